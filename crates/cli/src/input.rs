//! Trace input options shared by every subcommand that reads a trace.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Result;
use reblock_trace::{FormatChoice, ReadOptions, TraceReader};

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

    pub fn open(&self) -> Result<TraceReader> {
        if is_stdio(&self.trace) {
            let stdin = BufReader::with_capacity(1 << 20, std::io::stdin());
            return Ok(TraceReader::from_reader(
                Box::new(stdin),
                "<stdin>",
                &self.options(),
            )?);
        }
        Ok(TraceReader::open(&self.trace, &self.options())?)
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
        let reader = TraceReader::from_reader(Box::new(input), &self.trace, &self.options())?;
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
