//! What every line-format target does with its input: no input may make a parser panic.

// Each target uses one of the two entry points.
#![allow(dead_code)]

use std::io::Cursor;

use reblock_trace::format::{by_name, ParseState};
use reblock_trace::{FormatChoice, ReadOptions, TraceReader};

/// Feeds `data` to the format called `name` line by line (and to its sniff), then through
/// a whole `TraceReader` with that format, tolerating every bad line.
pub fn lines(name: &str, data: &[u8]) {
    let format = by_name(name).expect("a registered format");
    let text = String::from_utf8_lossy(data);
    let lines: Vec<&str> = text.lines().collect();
    let mut state = ParseState::default();
    for line in &lines {
        let _ = format.parse(line, &mut state);
    }
    let _ = format.sniff(&lines);
    read(FormatChoice::Named(name.to_string()), data);
}

/// Reads `data` as a trace of `format` to its end or its first fatal error.
pub fn read(format: FormatChoice, data: &[u8]) {
    let opts = ReadOptions {
        format,
        skip_bad: usize::MAX,
    };
    let input = Box::new(Cursor::new(data.to_vec()));
    if let Ok(mut reader) = TraceReader::from_reader(input, "fuzz-input", &opts) {
        while let Ok(Some(r)) = reader.next_request() {
            let _ = reader.commands().name(r.command);
        }
    }
}
