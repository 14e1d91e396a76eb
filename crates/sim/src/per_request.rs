//! Per-request output: one row per completed request, CSV or Parquet (by the file's
//! extension), streamed so memory stays bounded. Columns:
//!
//! | column        | type   | meaning                                               |
//! |---------------|--------|-------------------------------------------------------|
//! | number        | UInt64 | request number in the input, from 1                   |
//! | phase         | Utf8   | "normal" or "reconfiguration"                          |
//! | op            | Utf8   | "R" or "W"                                            |
//! | sector        | UInt64 | first sector served (after --wrap)                    |
//! | sectors       | UInt32 | length in sectors                                     |
//! | trace_device  | UInt32 | the trace's device number                             |
//! | member        | UInt32 | first member device that served it                    |
//! | arrival_ns    | UInt64 | simulated arrival                                     |
//! | start_ns      | UInt64 | start of its first device I/O                         |
//! | completion_ns | UInt64 | end of its last device I/O (that it waits for: not a replica written from its data) |
//! | response_ns   | UInt64 | completion_ns - arrival_ns                            |
//! | service_ns    | UInt64 | its share of device service time (replica writes made from its data included) |

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::SimError;
use crate::metrics::Phase;
use crate::replay::{Completion, Observer};

const BATCH_ROWS: usize = 64 * 1024;
const CSV_HEADER: &str = "number,phase,op,sector,sectors,trace_device,member,arrival_ns,start_ns,completion_ns,response_ns,service_ns";

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Normal => "normal",
        Phase::Reconfiguration => "reconfiguration",
    }
}

fn op_name(write: bool) -> &'static str {
    if write {
        "W"
    } else {
        "R"
    }
}

enum Sink {
    Csv(BufWriter<File>),
    Parquet {
        writer: Box<ArrowWriter<File>>,
        rows: Vec<Completion>,
    },
}

/// Writes every completion to a CSV or (for `*.parquet`) Parquet file.
pub struct PerRequestWriter {
    path: PathBuf,
    sink: Sink,
}

impl PerRequestWriter {
    pub fn create(path: impl AsRef<Path>) -> Result<PerRequestWriter, SimError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| SimError::Io {
            path: path.clone(),
            source,
        };
        let file = File::create(&path).map_err(io)?;
        let parquet = path.extension().is_some_and(|e| e == "parquet");
        let sink = if parquet {
            let props = WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                .build();
            let writer = ArrowWriter::try_new(file, schema(), Some(props)).map_err(|source| {
                SimError::Parquet {
                    path: path.clone(),
                    source,
                }
            })?;
            Sink::Parquet {
                writer: Box::new(writer),
                rows: Vec::with_capacity(BATCH_ROWS),
            }
        } else {
            let mut out = BufWriter::new(file);
            writeln!(out, "{CSV_HEADER}").map_err(io)?;
            Sink::Csv(out)
        };
        Ok(PerRequestWriter { path, sink })
    }

    /// Flushes buffered rows and closes the file.
    pub fn finish(mut self) -> Result<(), SimError> {
        self.flush_batch()?;
        let path = self.path;
        match self.sink {
            Sink::Csv(mut out) => out.flush().map_err(|source| SimError::Io { path, source }),
            Sink::Parquet { writer, .. } => writer
                .close()
                .map(|_| ())
                .map_err(|source| SimError::Parquet { path, source }),
        }
    }

    fn flush_batch(&mut self) -> Result<(), SimError> {
        let Sink::Parquet { writer, rows } = &mut self.sink else {
            return Ok(());
        };
        if rows.is_empty() {
            return Ok(());
        }
        let batch = to_batch(rows).map_err(|e| SimError::Parquet {
            path: self.path.clone(),
            source: e.into(),
        })?;
        rows.clear();
        writer.write(&batch).map_err(|source| SimError::Parquet {
            path: self.path.clone(),
            source,
        })
    }
}

impl Observer for PerRequestWriter {
    fn on_completion(&mut self, c: &Completion) -> Result<(), SimError> {
        match &mut self.sink {
            Sink::Csv(out) => writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                c.number,
                phase_name(c.phase),
                op_name(c.write),
                c.sector,
                c.sectors,
                c.trace_device,
                c.member,
                c.arrival_ns,
                c.start_ns,
                c.completion_ns,
                c.completion_ns - c.arrival_ns,
                c.service_ns
            )
            .map_err(|source| SimError::Io {
                path: self.path.clone(),
                source,
            }),
            Sink::Parquet { rows, .. } => {
                rows.push(*c);
                if rows.len() >= BATCH_ROWS {
                    self.flush_batch()?;
                }
                Ok(())
            }
        }
    }
}

/// The Arrow schema of per-request output.
pub fn schema() -> SchemaRef {
    let u64f = |n: &str| Field::new(n, DataType::UInt64, false);
    let u32f = |n: &str| Field::new(n, DataType::UInt32, false);
    let utf8 = |n: &str| Field::new(n, DataType::Utf8, false);
    Arc::new(Schema::new(vec![
        u64f("number"),
        utf8("phase"),
        utf8("op"),
        u64f("sector"),
        u32f("sectors"),
        u32f("trace_device"),
        u32f("member"),
        u64f("arrival_ns"),
        u64f("start_ns"),
        u64f("completion_ns"),
        u64f("response_ns"),
        u64f("service_ns"),
    ]))
}

fn to_batch(rows: &[Completion]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let u64s = |f: fn(&Completion) -> u64| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<UInt64Array>())
    };
    let u32s = |f: fn(&Completion) -> u32| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<UInt32Array>())
    };
    let strs = |f: fn(&Completion) -> &'static str| -> ArrayRef {
        Arc::new(rows.iter().map(|c| Some(f(c))).collect::<StringArray>())
    };
    RecordBatch::try_new(
        schema(),
        vec![
            u64s(|c| c.number),
            strs(|c| phase_name(c.phase)),
            strs(|c| op_name(c.write)),
            u64s(|c| c.sector),
            u32s(|c| c.sectors),
            u32s(|c| c.trace_device),
            u32s(|c| c.member),
            u64s(|c| c.arrival_ns),
            u64s(|c| c.start_ns),
            u64s(|c| c.completion_ns),
            u64s(|c| c.completion_ns - c.arrival_ns),
            u64s(|c| c.service_ns),
        ],
    )
}
