//! Trace input options shared by every subcommand that reads a trace.

use std::path::PathBuf;

use anyhow::Result;
use reblock_analyze::units::{format_ns, parse_duration_ns};
use reblock_trace::{FormatChoice, ReadOptions, TimeOrder, TraceReader};

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
    /// Hold requests back this long (trace time) to put slightly late ones in time order,
    /// as blkparse's per-CPU buffers deliver them; a request later than this is an error
    /// naming its line. `0` accepts only a trace already in order.
    #[arg(long, default_value = "10ms", value_name = "DURATION", value_parser = parse_window_ns)]
    pub reorder_window: u64,
    /// Sort the whole trace by timestamp instead (it is held in memory, about 40 bytes a
    /// request): for traces whose records are far out of order.
    #[arg(long, conflicts_with = "reorder_window")]
    pub sort: bool,
}

/// `--reorder-window`: a duration (`10ms`, `1s`), or `0` for none.
fn parse_window_ns(s: &str) -> Result<u64, String> {
    match s.trim() {
        "0" => Ok(0),
        _ => parse_duration_ns(s),
    }
}

impl TraceInput {
    pub fn open(&self) -> Result<TraceReader> {
        let opts = ReadOptions {
            format: self.format.clone(),
            skip_bad: self.skip_bad,
        };
        let mut reader = TraceReader::open(&self.trace, &opts)?;
        reader.set_time_order(self.time_order());
        Ok(reader)
    }

    pub fn time_order(&self) -> TimeOrder {
        match self.sort {
            true => TimeOrder::Sort,
            false => TimeOrder::Window {
                ns: self.reorder_window,
            },
        }
    }
}

/// Tells the user, on stderr, which lines `--skip-bad` skipped and how many requests were
/// put back in time order.
pub fn report_bad_lines(reader: &TraceReader) {
    report_reordered(reader);
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

/// Says how many requests came after later ones and were moved into time order.
fn report_reordered(reader: &TraceReader) {
    let stats = reader.order_stats();
    if stats.moved == 0 {
        return;
    }
    let how = match reader.time_order() {
        TimeOrder::Sort => "--sort".to_string(),
        TimeOrder::Window { ns } => format!("--reorder-window {}", format_ns(ns)),
    };
    eprintln!(
        "reblock: note: {} request(s) of {} came after later ones (by up to {}) and were \
         put in time order ({how})",
        stats.moved,
        reader.path().display(),
        format_ns(stats.max_behind_ns)
    );
}
