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
pub mod parquet;
pub mod reader;
pub mod request;

pub use columnar::Trace;
pub use error::{BadLine, FieldError, TraceError};
pub use format::{formats, LineFormat, ParseState, Parsed};
pub use reader::{FormatChoice, ReadOptions, TraceReader};
pub use request::{CommandId, Commands, Op, Request, NO_COMMAND, SECTOR_BYTES};
