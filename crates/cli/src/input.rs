//! Trace input options shared by every subcommand that reads a trace.

use std::path::PathBuf;

use anyhow::Result;
use reblock_trace::{FormatChoice, ReadOptions, TraceReader};

#[derive(clap::Args, Clone, Debug)]
pub struct TraceInput {
    /// Trace file (any supported format, optionally .gz or .zst compressed, or Parquet).
    pub trace: PathBuf,
    /// Trace format; `auto` sniffs the first lines. `reblock formats` lists them.
    #[arg(long, default_value = "auto")]
    pub format: FormatChoice,
    /// Tolerate up to N malformed lines (each is reported) instead of stopping at the first.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub skip_bad: usize,
}

impl TraceInput {
    pub fn open(&self) -> Result<TraceReader> {
        let opts = ReadOptions {
            format: self.format.clone(),
            skip_bad: self.skip_bad,
        };
        Ok(TraceReader::open(&self.trace, &opts)?)
    }
}

/// Tells the user which lines `--skip-bad` skipped, on stderr.
pub fn report_bad_lines(reader: &TraceReader) {
    let bad = reader.bad_lines();
    if bad.is_empty() {
        return;
    }
    eprintln!(
        "reblock: warning: skipped {} malformed line(s) of {}:",
        bad.len(),
        reader.path().display()
    );
    for b in bad.iter().take(20) {
        eprintln!("  {}:{}: {}", reader.path().display(), b.line, b.error);
    }
    if bad.len() > 20 {
        eprintln!("  ... and {} more", bad.len() - 20);
    }
}
