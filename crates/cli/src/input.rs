//! Trace input options shared by every subcommand that reads a trace.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Result;
use reblock_analyze::units::{format_ns, parse_duration_ns};
use reblock_trace::{FormatChoice, ReadOptions, TimeOrder, TraceReader};

use crate::progress::Progress;

/// The path that means standard input (or output).
pub const STDIO: &str = "-";

/// True when `path` is `-`: standard input or output.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == STDIO
}

#[derive(clap::Args, Clone, Debug)]
pub struct TraceInput {
    /// Trace file (any supported format, optionally .gz or .zst compressed, or Parquet);
    /// `-` reads standard input.
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

/// Counts the bytes read through it, for the percent done of a progress line.
struct Counted<R> {
    inner: R,
    bytes: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl TraceInput {
    fn options(&self) -> ReadOptions {
        ReadOptions {
            format: self.format.clone(),
            skip_bad: self.skip_bad,
        }
    }

    /// How out-of-order records are handled (`--reorder-window`, `--sort`).
    pub fn time_order(&self) -> TimeOrder {
        match self.sort {
            true => TimeOrder::Sort,
            false => TimeOrder::Window {
                ns: self.reorder_window,
            },
        }
    }

    pub fn open(&self) -> Result<TraceReader> {
        let mut reader = if is_stdio(&self.trace) {
            let stdin = BufReader::with_capacity(1 << 20, std::io::stdin());
            TraceReader::from_reader(Box::new(stdin), "<stdin>", &self.options())?
        } else {
            TraceReader::open(&self.trace, &self.options())?
        };
        reader.set_time_order(self.time_order());
        Ok(reader)
    }

    /// Opens the trace with progress for `what` ("analyzing"), in requests: a text file's
    /// percent done is the share of its bytes read (compressed or not). Parquet and
    /// standard input show the count and rate only.
    pub fn open_with_progress(&self, what: &str) -> Result<(TraceReader, Progress)> {
        let progress = Progress::new(what, "requests", None);
        let size = std::fs::metadata(&self.trace).map(|m| m.len()).ok();
        let text_file = !is_stdio(&self.trace) && !is_parquet(&self.trace);
        let (Some(size), true) = (size.filter(|&s| s > 0), text_file) else {
            return Ok((self.open()?, progress));
        };
        let bytes = Arc::new(AtomicU64::new(0));
        let file = File::open(&self.trace).map_err(|source| reblock_trace::TraceError::Io {
            path: self.trace.clone(),
            source,
        })?;
        let counted = Counted {
            inner: file,
            bytes: bytes.clone(),
        };
        let input = BufReader::with_capacity(1 << 20, counted);
        let mut reader = TraceReader::from_reader(Box::new(input), &self.trace, &self.options())?;
        reader.set_time_order(self.time_order());
        let fraction = move || Some(bytes.load(Ordering::Relaxed) as f64 / size as f64);
        Ok((reader, progress.with_fraction(Box::new(fraction))))
    }
}

/// True when the file starts with the Parquet magic (read whole into memory otherwise).
fn is_parquet(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|_| &magic == b"PAR1")
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
