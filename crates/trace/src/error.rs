//! Errors that name the file, the line and the field (DESIGN.md: "a malformed line is an
//! error that names the file, line number and the field").

use std::fmt;
use std::path::PathBuf;

/// What is wrong with one field of one line; the reader adds the file and line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: &'static str,
    pub why: String,
}

impl FieldError {
    pub fn new(field: &'static str, why: impl Into<String>) -> Self {
        FieldError {
            field,
            why: why.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "field {}: {}", self.field, self.why)
    }
}

/// A line skipped under `--skip-bad`, kept so that it can be reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    pub line: u64,
    pub error: FieldError,
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Rendered as `FILE:LINE: field F: why`, the form the CLI promises.
    #[error("{path}:{line}: {error}")]
    BadLine {
        path: PathBuf,
        line: u64,
        error: FieldError,
    },
    #[error(
        "{path}: more than {limit} bad lines (--skip-bad {limit}); the last: line {line}: {error}"
    )]
    TooManyBadLines {
        path: PathBuf,
        limit: usize,
        line: u64,
        error: FieldError,
    },
    #[error("unknown trace format '{name}'; supported: {supported}")]
    UnknownFormat { name: String, supported: String },
    #[error(
        "{path}: cannot tell the trace format from the first lines; pass --format (one of: \
         {supported}){}",
        guess.as_ref().map_or(String::new(), |g| g.to_string())
    )]
    Undetected {
        path: PathBuf,
        supported: String,
        /// The format that reads most of the first lines, and where it stops.
        guess: Option<FormatGuess>,
    },
    #[error("{path}: the trace is empty (no requests)")]
    Empty { path: PathBuf },
    #[error("{path}: {why}")]
    Other { path: PathBuf, why: String },
    /// A request earlier than the reorder window allows (see `TimeOrder`).
    #[error("{0}")]
    Late(Box<LateRequest>),
}

/// The format a file most looks like, and its first line that format cannot read: said
/// when `auto` cannot tell the format, so that a malformed line of a short file is still
/// named with its field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatGuess {
    pub format: &'static str,
    pub line: u64,
    pub error: FieldError,
}

impl fmt::Display for FormatGuess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (format, line, error) = (self.format, self.line, &self.error);
        write!(f, "; read as {format}, line {line} has {error}")
    }
}

/// A request whose timestamp is further behind one already read than the reorder window
/// allows: time order cannot be restored by holding requests back, so it is an error
/// (`--sort` sorts the whole trace instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateRequest {
    pub path: PathBuf,
    /// Its line in the file (text formats); `None` for Parquet, where `request` says which.
    pub line: Option<u64>,
    /// Its number among the requests read, from 1.
    pub request: u64,
    pub ts_ns: u64,
    /// The latest timestamp read before it.
    pub latest_ns: u64,
    pub window_ns: u64,
}

/// Nanoseconds as seconds, exactly (`1.500000000 s`).
fn seconds(ns: u64) -> String {
    format!("{}.{:09} s", ns / 1_000_000_000, ns % 1_000_000_000)
}

impl fmt::Display for LateRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: ", self.path.display())?,
            None => write!(f, "{}: request {}: ", self.path.display(), self.request)?,
        }
        write!(
            f,
            "field timestamp: {} is {} before a request already read (at {}), more than the \
             {} reorder window; pass --sort to sort the whole trace, or a wider \
             --reorder-window",
            seconds(self.ts_ns),
            seconds(self.latest_ns - self.ts_ns),
            seconds(self.latest_ns),
            seconds(self.window_ns)
        )
    }
}
