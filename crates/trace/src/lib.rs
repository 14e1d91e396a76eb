//! Block request records, columnar in-memory traces, and readers for every trace format
//! reblock accepts.
//!
//! Every later stage (analyze, plan, simulate, serve) reads traces through this crate:
//! [`TraceReader::open`] streams [`Request`]s from any supported file (format sniffed with
//! `auto`, gzip/zstd decompressed transparently), and [`Trace`] holds a whole trace as
//! columns when a stage needs random access.

pub mod columnar;
pub mod error;
pub mod format;
pub mod log;
pub mod order;
pub mod parquet;
pub mod reader;
pub mod request;

pub use columnar::Trace;
pub use error::{BadLine, FieldError, FormatGuess, LateRequest, TraceError};
pub use format::{formats, LineFormat, ParseState, Parsed};
pub use log::{AsRequestLog, RequestIter, RequestLog, RequestSpan};
pub use order::{OrderStats, TimeOrder, DEFAULT_REORDER_WINDOW_NS};
pub use reader::{FormatChoice, ReadOptions, TraceReader};
pub use request::{
    CommandId, Commands, Discard, Op, Request, RequestError, MAX_END_SECTOR, NO_COMMAND,
    SECTOR_BYTES,
};
