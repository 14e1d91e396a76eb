//! What can go wrong while recording, each saying why and what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}: no such device (create one with e.g. 'losetup -f --show IMAGE')")]
    NoSuchDevice(PathBuf),
    #[error("{0}: permission denied (recording needs root)")]
    DevicePermission(PathBuf),
    #[error(
        "{path}: is {kind}, not a block device (pass a /dev node such as /dev/loop0 or /dev/sda)"
    )]
    NotABlockDevice { path: PathBuf, kind: &'static str },
    #[error("tracefs is unavailable: {why}")]
    TracefsUnavailable { why: String },
    #[error("blktrace is unavailable: {why}")]
    BlktraceUnavailable { why: String },
    #[error("no backend could record: tracefs: {tracefs}; blktrace: {blktrace}")]
    NoBackend { tracefs: String, blktrace: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{source_name}: line '{line}': {error}")]
    BadLine {
        source_name: &'static str,
        line: String,
        error: String,
    },
}

impl RecordError {
    pub(crate) fn io(what: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        RecordError::Io {
            what: what.into(),
            source: source.into(),
        }
    }
}
