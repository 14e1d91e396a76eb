//! Traces as Parquet, so that pandas, polars, DuckDB and Spark read them as is (DESIGN.md
//! "Units and formats"). One row per request:
//!
//! | column  | type                         | meaning                                   |
//! |---------|------------------------------|-------------------------------------------|
//! | ts_ns   | UInt64                       | queue time, ns from the trace's origin    |
//! | pid     | UInt32, nullable             | issuing process; null when not recorded   |
//! | command | Dictionary(Int32, Utf8), nullable | process name; null when not recorded |
//! | device  | UInt32                       | device or disk number                     |
//! | sector  | UInt64                       | first 512-byte sector                     |
//! | sectors | UInt32                       | length in 512-byte sectors                |
//! | op      | Utf8                         | "R" or "W"                                |
//!
//! Written in record batches of [`BATCH_ROWS`] and row groups of about [`ROW_GROUP_ROWS`],
//! zstd compressed, so memory stays bounded whatever the trace's length; read back batch by
//! batch by [`crate::TraceReader`] (`--format parquet`, or `auto` on the `PAR1` magic).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use ::parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use ::parquet::arrow::ArrowWriter;
use ::parquet::basic::{Compression, ZstdLevel};
use ::parquet::file::properties::WriterProperties;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Int32Array, PrimitiveArray, RecordBatch, StringArray,
    UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::error::{FieldError, TraceError};
use crate::format::Parsed;
use crate::reader::NextParsed;
use crate::request::{CommandId, Commands, Op, Request, NO_COMMAND};
use crate::Trace;

/// Rows per record batch, written and read.
pub const BATCH_ROWS: usize = 64 * 1024;
/// Rows per row group: large enough for good compression and scans, small enough that a
/// writer holds only a few tens of MB.
pub const ROW_GROUP_ROWS: usize = 1 << 20;

/// The Arrow schema of a reblock trace.
pub fn schema() -> SchemaRef {
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    Arc::new(Schema::new(vec![
        Field::new("ts_ns", DataType::UInt64, false),
        Field::new("pid", DataType::UInt32, true),
        Field::new("command", dict, true),
        Field::new("device", DataType::UInt32, false),
        Field::new("sector", DataType::UInt64, false),
        Field::new("sectors", DataType::UInt32, false),
        Field::new("op", DataType::Utf8, false),
    ]))
}

fn other(path: &Path, why: impl std::fmt::Display) -> TraceError {
    TraceError::Other {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

/// Streams requests into a Parquet file, one record batch at a time.
pub struct ParquetWriter<W: Write + Send> {
    writer: ArrowWriter<W>,
    rows: Vec<Request>,
    written: u64,
    path: std::path::PathBuf,
}

impl ParquetWriter<File> {
    /// Creates (or truncates) `path`.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        ParquetWriter::new(file, path)
    }
}

impl<W: Write + Send> ParquetWriter<W> {
    /// Writes to `out`; `path` only names it in errors.
    pub fn new(out: W, path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .build();
        let writer =
            ArrowWriter::try_new(out, schema(), Some(props)).map_err(|e| other(&path, e))?;
        Ok(ParquetWriter {
            writer,
            rows: Vec::with_capacity(BATCH_ROWS),
            written: 0,
            path,
        })
    }

    /// Adds one request; `commands` names its command id (a reader's growing table is fine:
    /// it must hold every id pushed so far).
    pub fn push(&mut self, req: Request, commands: &Commands) -> Result<(), TraceError> {
        self.rows.push(req);
        if self.rows.len() >= BATCH_ROWS {
            self.flush_batch(commands)?;
        }
        Ok(())
    }

    /// Writes what is buffered and the file footer; returns the number of rows written.
    pub fn finish(mut self, commands: &Commands) -> Result<u64, TraceError> {
        self.flush_batch(commands)?;
        self.writer.close().map_err(|e| other(&self.path, e))?;
        Ok(self.written)
    }

    fn flush_batch(&mut self, commands: &Commands) -> Result<(), TraceError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let batch = to_batch(&self.rows, commands).map_err(|e| other(&self.path, e))?;
        self.writer
            .write(&batch)
            .map_err(|e| other(&self.path, e))?;
        self.written += self.rows.len() as u64;
        self.rows.clear();
        Ok(())
    }
}

/// One record batch of `rows`. Commands get batch-local dictionary keys, so a batch carries
/// only the names it uses.
fn to_batch(
    rows: &[Request],
    commands: &Commands,
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let mut local: Vec<i32> = vec![-1; commands.len()];
    let mut names: Vec<&str> = Vec::new();
    let keys: Int32Array = rows
        .iter()
        .map(|r| {
            (r.command != NO_COMMAND).then(|| {
                let k = &mut local[r.command as usize];
                if *k < 0 {
                    *k = names.len() as i32;
                    names.push(commands.name(r.command));
                }
                *k
            })
        })
        .collect();
    let command = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(StringArray::from(names)))?;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.ts_ns))),
        Arc::new(rows.iter().map(|r| r.pid).collect::<UInt32Array>()),
        Arc::new(command),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.device))),
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.sector))),
        Arc::new(UInt32Array::from_iter_values(
            rows.iter().map(|r| r.sectors),
        )),
        Arc::new(StringArray::from_iter_values(rows.iter().map(
            |r| match r.op {
                Op::Read => "R",
                Op::Write => "W",
            },
        ))),
    ];
    RecordBatch::try_new(schema(), columns)
}

/// Writes a whole in-memory trace to `path`.
pub fn write_trace(trace: &Trace, path: impl AsRef<Path>) -> Result<u64, TraceError> {
    let mut w = ParquetWriter::create(path)?;
    for r in trace.iter() {
        w.push(r, &trace.commands)?;
    }
    w.finish(&trace.commands)
}

/// Reads a whole Parquet trace into memory.
pub fn read_trace(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
    let opts = crate::ReadOptions {
        format: crate::FormatChoice::Named("parquet".into()),
        skip_bad: 0,
    };
    crate::TraceReader::open(path, &opts)?.read_all()
}

/// The command column of one batch, with its dictionary already mapped to reader ids.
struct CommandColumn {
    keys: Int32Array,
    ids: Vec<CommandId>,
}

/// One batch's columns, typed.
struct Columns {
    ts_ns: UInt64Array,
    pid: UInt32Array,
    command: CommandColumn,
    device: UInt32Array,
    sector: UInt64Array,
    sectors: UInt32Array,
    op: StringArray,
}

/// Requests read back from Parquet, batch by batch, for [`crate::TraceReader`]. Each batch
/// is decoded column by column into requests at once (tight loops over plain slices); the
/// rare bad rows are kept aside with their errors.
pub(crate) struct ParquetRows {
    batches: ParquetRecordBatchReader,
    rows: std::vec::IntoIter<Request>,
    /// Bad rows of the current batch, by index, in order.
    bad: std::collections::VecDeque<(usize, FieldError)>,
    next: usize,
    /// Rows before the current batch: row numbers in errors count from 1.
    base_row: u64,
    pub(crate) commands: Commands,
}

impl ParquetRows {
    pub(crate) fn open<R: ::parquet::file::reader::ChunkReader + 'static>(
        input: R,
        path: &Path,
    ) -> Result<Self, TraceError> {
        let batches = ParquetRecordBatchReaderBuilder::try_new(input)
            .and_then(|b| b.with_batch_size(BATCH_ROWS).build())
            .map_err(|e| other(path, format!("not a readable Parquet trace: {e}")))?;
        Ok(ParquetRows {
            batches,
            rows: Vec::new().into_iter(),
            bad: Default::default(),
            next: 0,
            base_row: 0,
            commands: Commands::new(),
        })
    }

    /// The next row as a request (or why it is not one), with its 1-based row number.
    pub(crate) fn next_parsed(&mut self, path: &Path) -> Result<NextParsed, TraceError> {
        loop {
            if let Some(r) = self.rows.next() {
                let i = self.next;
                self.next += 1;
                let row = self.base_row + i as u64 + 1;
                if self.bad.front().is_some_and(|(b, _)| *b == i) {
                    let (_, e) = self.bad.pop_front().expect("checked");
                    return Ok(Some((row, Err(e))));
                }
                return Ok(Some((row, Ok(Parsed::Request(r)))));
            }
            self.base_row += self.next as u64;
            let Some(batch) = self.batches.next() else {
                return Ok(None);
            };
            let batch = batch.map_err(|e| other(path, format!("reading Parquet: {e}")))?;
            let cols = Columns::of(&batch, &mut self.commands).map_err(|e| other(path, e))?;
            let (rows, bad) = cols.decode();
            self.rows = rows.into_iter();
            self.bad = bad;
            self.next = 0;
        }
    }
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef, String> {
    batch
        .column_by_name(name)
        .ok_or_else(|| format!("Parquet trace has no column '{name}'"))
}

fn typed<T: arrow_array::types::ArrowPrimitiveType>(
    batch: &RecordBatch,
    name: &str,
) -> Result<PrimitiveArray<T>, String> {
    let col = column(batch, name)?;
    col.as_primitive_opt::<T>().cloned().ok_or_else(|| {
        format!(
            "column '{name}' is {}, expected {}",
            col.data_type(),
            T::DATA_TYPE
        )
    })
}

impl Columns {
    fn of(batch: &RecordBatch, commands: &mut Commands) -> Result<Columns, String> {
        let op = column(batch, "op")?;
        let op = op
            .as_string_opt::<i32>()
            .cloned()
            .ok_or_else(|| format!("column 'op' is {}, expected Utf8", op.data_type()))?;
        Ok(Columns {
            ts_ns: typed::<UInt64Type>(batch, "ts_ns")?,
            pid: typed::<UInt32Type>(batch, "pid")?,
            command: command_column(column(batch, "command")?, commands)?,
            device: typed::<UInt32Type>(batch, "device")?,
            sector: typed::<UInt64Type>(batch, "sector")?,
            sectors: typed::<UInt32Type>(batch, "sectors")?,
            op,
        })
    }

    /// Every row as a request, plus the rows that are not valid requests and why.
    fn decode(
        &self,
    ) -> (
        Vec<Request>,
        std::collections::VecDeque<(usize, FieldError)>,
    ) {
        let CommandColumn { keys, ids } = &self.command;
        let (offsets, op_bytes) = (self.op.value_offsets(), self.op.value_data());
        let mut bad = std::collections::VecDeque::new();
        let rows = (0..self.ts_ns.len())
            .map(|i| {
                let op = match &op_bytes[offsets[i] as usize..offsets[i + 1] as usize] {
                    b"W" => Op::Write,
                    _ => Op::Read, // "R"; anything else is reported by `check`
                };
                let command = match keys.is_valid(i) {
                    true => ids
                        .get(keys.values()[i] as usize)
                        .copied()
                        .unwrap_or(NO_COMMAND),
                    false => NO_COMMAND,
                };
                Request {
                    ts_ns: self.ts_ns.values()[i],
                    pid: self.pid.is_valid(i).then(|| self.pid.values()[i]),
                    command,
                    device: self.device.values()[i],
                    sector: self.sector.values()[i],
                    sectors: self.sectors.values()[i],
                    op,
                }
            })
            .collect();
        for i in 0..self.ts_ns.len() {
            if let Err(e) = self.check(i) {
                bad.push_back((i, e));
            }
        }
        (rows, bad)
    }

    /// Whether row `i` is a valid request: no nulls where a value is required, a length,
    /// an op of R or W, a command key inside its dictionary.
    fn check(&self, i: usize) -> Result<(), FieldError> {
        for (name, null) in [
            ("ts_ns", self.ts_ns.is_null(i)),
            ("device", self.device.is_null(i)),
            ("sector", self.sector.is_null(i)),
            ("sectors", self.sectors.is_null(i)),
            ("op", self.op.is_null(i)),
        ] {
            if null {
                return Err(FieldError::new(name, "null"));
            }
        }
        if self.sectors.values()[i] == 0 {
            return Err(FieldError::new("sectors", "a request of 0 sectors"));
        }
        match self.op.value(i) {
            "R" | "W" => {}
            other => return Err(FieldError::new("op", format!("'{other}' is not R or W"))),
        }
        let CommandColumn { keys, ids } = &self.command;
        if keys.is_valid(i) && keys.values()[i] as usize >= ids.len() {
            return Err(FieldError::new("command", "dictionary key out of range"));
        }
        Ok(())
    }
}

/// Interns a batch's command names once per batch, not once per row. Plain string columns
/// (files written by other tools) are turned into a dictionary first.
fn command_column(col: &ArrayRef, commands: &mut Commands) -> Result<CommandColumn, String> {
    let dict = match col.data_type() {
        DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8 => {
            col.as_dictionary::<Int32Type>().clone()
        }
        DataType::Utf8 => col
            .as_string::<i32>()
            .iter()
            .collect::<DictionaryArray<Int32Type>>(),
        other => {
            return Err(format!(
                "column 'command' is {other}, expected Utf8 or a Utf8 dictionary"
            ))
        }
    };
    let names = dict.values().as_string::<i32>();
    let ids = names
        .iter()
        .map(|n| n.map_or(NO_COMMAND, |n| commands.intern(n)))
        .collect();
    Ok(CommandColumn {
        keys: dict.keys().clone(),
        ids,
    })
}
