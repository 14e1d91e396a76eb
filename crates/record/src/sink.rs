//! Turns the recorder's input lines into native trace lines and counts them.

use std::io::Write;

use reblock_trace::format::native::write_line;
use reblock_trace::{Op, ParseState, Parsed, Request};

use crate::error::RecordError;
use crate::Summary;

/// Writes requests of one device as native lines, counting what it writes.
pub struct Sink<W: Write> {
    out: W,
    trace_dev: u32,
    pub summary: Summary,
    /// Bytes of an input line not yet ended by '\n'.
    partial: Vec<u8>,
    state: ParseState,
}

/// How a backend's text becomes requests.
pub type LineParser = fn(&str, &mut ParseState) -> Result<Parsed, String>;

impl<W: Write> Sink<W> {
    pub fn new(out: W, trace_dev: u32, summary: Summary) -> Self {
        Sink {
            out,
            trace_dev,
            summary,
            partial: Vec::new(),
            state: ParseState::default(),
        }
    }

    /// Feeds raw bytes; complete lines are parsed with `parse`, the rest kept.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        source: &'static str,
        parse: LineParser,
    ) -> Result<(), RecordError> {
        self.partial.extend_from_slice(bytes);
        let Some(last_nl) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let rest = self.partial.split_off(last_nl + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        for line in String::from_utf8_lossy(&complete).lines() {
            self.line(line, source, parse)?;
        }
        Ok(())
    }

    fn line(
        &mut self,
        line: &str,
        source: &'static str,
        parse: LineParser,
    ) -> Result<(), RecordError> {
        if let Some(lost) = reblock_trace::format::tracefs::lost_events(line) {
            self.summary.lost_events += lost;
            return Ok(());
        }
        let bad = |error: String| RecordError::BadLine {
            source_name: source,
            line: line.to_string(),
            error,
        };
        match parse(line, &mut self.state).map_err(bad)? {
            // The event filter already keeps one device; a foreign line would mean the
            // filter was not applied, and must not leak into the trace.
            Parsed::Request(r) if r.device == self.trace_dev => self.write(&r),
            Parsed::Request(_) => Ok(()),
            Parsed::Skip => {
                self.summary.skipped_events +=
                    u64::from(!line.trim().is_empty() && !line.starts_with('#'));
                Ok(())
            }
        }
    }

    fn write(&mut self, req: &Request) -> Result<(), RecordError> {
        // The native format's command is one token: blanks in process names become '_'.
        let command: String = self
            .state
            .commands
            .name(req.command)
            .chars()
            .map(|c| if c.is_whitespace() { '_' } else { c })
            .collect();
        write_line(&mut self.out, req, &command)
            .map_err(|e| RecordError::io("write the trace", e))?;
        let s = &mut self.summary;
        s.requests += 1;
        s.bytes += req.bytes();
        match req.op {
            Op::Read => s.reads += 1,
            Op::Write => s.writes += 1,
        }
        Ok(())
    }

    /// Parses a last line without '\n', flushes, and hands back the summary.
    pub fn finish(
        mut self,
        source: &'static str,
        parse: LineParser,
    ) -> Result<Summary, RecordError> {
        if !self.partial.is_empty() {
            let last = String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned();
            self.line(&last, source, parse)?;
        }
        self.out
            .flush()
            .map_err(|e| RecordError::io("write the trace", e))?;
        Ok(self.summary)
    }
}
