//! What can go wrong building or measuring a tree layout.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Malformed XML, with the 1-based line and column of the offending byte.
    #[error("{path}:{line}:{column}: malformed XML: {message}")]
    Xml {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: the document has no root element")]
    EmptyDocument { path: String },
    /// An XPath expression outside the supported subset, with the character position.
    #[error("query `{query}`, at character {position}: {message}")]
    Query {
        query: String,
        position: usize,
        message: String,
    },
    #[error("device `{spec}`: {message}")]
    Device { spec: String, message: String },
    #[error("block size {bytes} bytes: {message}")]
    BlockSize { bytes: u64, message: String },
    /// A placement ran out of disk: the layout needs more tracks than the drive has.
    #[error("{layout} layout: {message}")]
    DiskFull {
        layout: &'static str,
        message: String,
    },
    #[error("think time sample `{text}`: {message}")]
    ThinkTime { text: String, message: String },
    #[error("report {path}: {message}")]
    Report { path: PathBuf, message: String },
}
