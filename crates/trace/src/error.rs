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
    #[error("{path}: cannot tell the trace format from the first lines; pass --format (one of: {supported})")]
    Undetected { path: PathBuf, supported: String },
    #[error("{path}: the trace is empty (no requests)")]
    Empty { path: PathBuf },
    #[error("{path}: {why}")]
    Other { path: PathBuf, why: String },
}
