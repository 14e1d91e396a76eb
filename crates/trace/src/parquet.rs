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
//! so memory stays bounded whatever the trace's length; read back batch by batch by
//! [`crate::TraceReader`] (`--format parquet`, or `auto` on the `PAR1` magic), which reads
//! any encoding and codec a Parquet writer may have used.
//!
//! Encodings: `ts_ns` and `sector` as DELTA_BINARY_PACKED (arrival times grow by small
//! steps and sectors run on in sequential streams, so the deltas pack into a few bits;
//! plain or dictionary pages left them 8 bytes a row for the codec to squeeze), the other
//! columns as dictionaries. Then a codec, [`Codec::Zstd`] by default. Measured on the
//! bundled kernel-build trace against plain/dictionary pages with zstd: half the file and
//! reading 1.5x faster (22 against 34 ns a row, same run); on a million-row synthetic mix,
//! 4.0 against 5.1 MB and 23 against 39 ns a row.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use ::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use ::parquet::arrow::ArrowWriter;
use ::parquet::basic::{Compression, Encoding, ZstdLevel};
use ::parquet::file::properties::WriterProperties;
use ::parquet::schema::types::ColumnPath;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Int32Array, PrimitiveArray, RecordBatch, StringArray,
    UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::error::{FieldError, TraceError};
use crate::reader::{Refill, Ring, RING};
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

/// The general-purpose compression applied after the column encodings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Codec {
    /// The smallest files (default).
    #[default]
    Zstd,
    /// Reads about 25% faster than zstd, files about 10% larger (LZ4_RAW; pyarrow 7+,
    /// DuckDB, polars and Spark 3.3+ read it).
    Lz4,
    /// Snappy, for the oldest readers.
    Snappy,
    /// No compression: the fastest to read, files about 50% larger than zstd's.
    None,
}

impl Codec {
    fn compression(self) -> Compression {
        match self {
            Codec::Zstd => Compression::ZSTD(ZstdLevel::default()),
            Codec::Lz4 => Compression::LZ4_RAW,
            Codec::Snappy => Compression::SNAPPY,
            Codec::None => Compression::UNCOMPRESSED,
        }
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
    /// Creates (or truncates) `path`, zstd compressed.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        Self::create_with(path, Codec::default())
    }

    /// Creates (or truncates) `path` with `codec`.
    pub fn create_with(path: impl AsRef<Path>, codec: Codec) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        ParquetWriter::new(file, path, codec)
    }
}

impl<W: Write + Send> ParquetWriter<W> {
    /// Writes to `out`; `path` only names it in errors.
    pub fn new(out: W, path: impl AsRef<Path>, codec: Codec) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let mut props = WriterProperties::builder()
            .set_compression(codec.compression())
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS));
        // See the module doc. (A column with a dictionary ignores its encoding.)
        for column in ["ts_ns", "sector"] {
            let column = ColumnPath::from(column);
            props = props
                .set_column_dictionary_enabled(column.clone(), false)
                .set_column_encoding(column, Encoding::DELTA_BINARY_PACKED);
        }
        let props = props.build();
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

/// What one dictionary value of the op column spells.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OpValue {
    Op(Op),
    Null,
    /// Neither "R" nor "W" (the spelling is in the dictionary, for the error).
    Other,
}

/// The op column of one batch as dictionary keys, each dictionary value looked at once.
struct OpColumn {
    keys: Int32Array,
    values: StringArray,
    ops: Vec<OpValue>,
}

/// One batch's columns, typed, checked as whole columns.
struct Columns {
    len: usize,
    ts_ns: UInt64Array,
    pid: UInt32Array,
    command: CommandColumn,
    device: UInt32Array,
    sector: UInt64Array,
    sectors: UInt32Array,
    op: OpColumn,
}

/// Requests read back from Parquet, batch by batch, for [`crate::TraceReader`]. Each batch
/// is checked column by column at once (nulls by count, lengths and keys by a scan); the
/// rare bad rows are found row by row only when a column check fails. Good rows are
/// decoded a ring at a time, in tight loops over plain slices.
pub(crate) struct ParquetRows {
    batches: ParquetRecordBatchReader,
    cols: Option<Columns>,
    /// Bad rows of the current batch, by index, in order.
    bad: std::collections::VecDeque<(usize, FieldError)>,
    /// The next row of the current batch to hand out.
    next: usize,
    /// Rows before the current batch: row numbers in errors count from 1.
    base_row: u64,
    /// Whether the decoder failed (see [`guarded`]): then the trace ends there.
    failed: bool,
    pub(crate) commands: Commands,
}

/// The schema to read `file` with: string `op` and `command` columns come as dictionaries
/// (the writer dictionary-encodes them, so the reader hands over the keys instead of
/// expanding every row into a string). Anything else is read as the file says.
fn dictionary_hint(file: &SchemaRef) -> Option<SchemaRef> {
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let mut changed = false;
    let fields: Vec<Field> = file
        .fields()
        .iter()
        .map(|f| {
            let mut f = f.as_ref().clone();
            if matches!(f.name().as_str(), "op" | "command") && *f.data_type() == DataType::Utf8 {
                f = f.with_data_type(dict.clone());
                changed = true;
            }
            f
        })
        .collect();
    changed.then(|| Arc::new(Schema::new_with_metadata(fields, file.metadata().clone())))
}

impl ParquetRows {
    pub(crate) fn open<R: ::parquet::file::reader::ChunkReader + 'static>(
        input: R,
        path: &Path,
    ) -> Result<Self, TraceError> {
        let bad = |e: ::parquet::errors::ParquetError| {
            other(path, format!("not a readable Parquet trace: {e}"))
        };
        let batches = guarded(path, "the file's metadata", || {
            let mut meta = ArrowReaderMetadata::load(&input, ArrowReaderOptions::new())?;
            if let Some(hint) = dictionary_hint(meta.schema()) {
                let opts = ArrowReaderOptions::new().with_schema(hint);
                if let Ok(hinted) = ArrowReaderMetadata::try_new(meta.metadata().clone(), opts) {
                    meta = hinted;
                }
            }
            ParquetRecordBatchReaderBuilder::new_with_metadata(input, meta)
                .with_batch_size(BATCH_ROWS)
                .build()
        })?
        .map_err(bad)?;
        Ok(ParquetRows {
            batches,
            cols: None,
            bad: Default::default(),
            next: 0,
            base_row: 0,
            failed: false,
            commands: Commands::new(),
        })
    }

    /// Decodes the next good rows into `ring`, or reports the next bad row (numbered
    /// from 1), or the end.
    pub(crate) fn refill(&mut self, ring: &mut Ring, path: &Path) -> Result<Refill, TraceError> {
        loop {
            if let Some(cols) = &self.cols {
                if self.next < cols.len {
                    let stop = match self.bad.front() {
                        Some(&(b, _)) if b == self.next => {
                            let (_, e) = self.bad.pop_front().expect("checked");
                            self.next += 1;
                            return Ok(Refill::Bad(self.base_row + self.next as u64, e));
                        }
                        Some(&(b, _)) => b,
                        None => cols.len,
                    };
                    let stop = stop.min(self.next + RING);
                    cols.decode(self.next..stop, &mut ring.reqs);
                    self.next = stop;
                    return Ok(ring.ready());
                }
                self.base_row += cols.len as u64;
                self.cols = None;
            }
            if self.failed {
                return Ok(Refill::End);
            }
            let row = self.base_row + 1;
            let next = guarded(path, &format!("the rows from row {row} on"), || {
                self.batches.next()
            });
            // After a decoder panic its state is unknown: nothing more is read from it.
            self.failed = next.is_err();
            let Some(batch) = next? else {
                return Ok(Refill::End);
            };
            let batch = batch.map_err(|e| other(path, format!("reading Parquet: {e}")))?;
            let cols = Columns::of(&batch, &mut self.commands).map_err(|e| other(path, e))?;
            self.bad = cols.bad_rows();
            self.next = 0;
            self.cols = Some(cols);
        }
    }
}

thread_local! {
    /// Set while [`guarded`] runs a call into the Parquet decoder on this thread.
    static IN_DECODER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, a call into the Parquet decoder on the file's bytes, turning a panic into an
/// error naming `path` and `what` was being read.
///
/// Why: the parquet crate panics on some malformed pages where it should return an
/// error (an out-of-bounds slice while decoding definition levels, found by this crate's
/// fuzz target; the same class as apache/arrow-rs #9992 and #11121), and a corrupt trace
/// must stop with a clear error, never abort the program. While `f` runs, a panic hook
/// chained in front of the process's own stays quiet (the error says what happened);
/// any other panic goes to the previous hook as before, so a fuzzer still aborts on
/// panics in this crate's own code.
fn guarded<T>(path: &Path, what: &str, f: impl FnOnce() -> T) -> Result<T, TraceError> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_DECODER.with(|d| d.get()) {
                previous(info);
            }
        }));
    });
    IN_DECODER.with(|d| d.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    IN_DECODER.with(|d| d.set(false));
    result.map_err(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no reason given".to_string());
        other(
            path,
            format!("not a readable Parquet trace: the Parquet decoder failed on {what} ({why})"),
        )
    })
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

/// Whether every key of `keys` (nulls included, whatever they hold) indexes a table of
/// `len` entries: one branch-free scan.
fn keys_below(keys: &Int32Array, len: usize) -> bool {
    let max = keys.values().iter().fold(0u32, |m, &k| m.max(k as u32));
    keys.is_empty() || (max as usize) < len
}

impl Columns {
    fn of(batch: &RecordBatch, commands: &mut Commands) -> Result<Columns, String> {
        let op = op_column(column(batch, "op")?)?;
        Ok(Columns {
            len: batch.num_rows(),
            ts_ns: typed::<UInt64Type>(batch, "ts_ns")?,
            pid: typed::<UInt32Type>(batch, "pid")?,
            command: command_column(column(batch, "command")?, commands)?,
            device: typed::<UInt32Type>(batch, "device")?,
            sector: typed::<UInt64Type>(batch, "sector")?,
            sectors: typed::<UInt32Type>(batch, "sectors")?,
            op,
        })
    }

    /// The rows that are not valid requests and why, in order. Whole columns are checked
    /// first; only a batch that fails them is checked row by row.
    fn bad_rows(&self) -> std::collections::VecDeque<(usize, FieldError)> {
        let (op, command) = (&self.op, &self.command);
        let clean = self.ts_ns.null_count() == 0
            && self.device.null_count() == 0
            && self.sector.null_count() == 0
            && self.sectors.null_count() == 0
            && op.keys.null_count() == 0
            && op.ops.iter().all(|v| matches!(v, OpValue::Op(_)))
            && keys_below(&op.keys, op.ops.len())
            && keys_below(&command.keys, command.ids.len())
            && self
                .sectors
                .values()
                .iter()
                .fold(u32::MAX, |m, &v| m.min(v))
                != 0;
        if clean {
            return Default::default();
        }
        (0..self.len)
            .filter_map(|i| self.check(i).err().map(|e| (i, e)))
            .collect()
    }

    /// Rows `rows` as requests into `out` (replacing what it held); every one of them
    /// passed [`Columns::check`].
    fn decode(&self, rows: std::ops::Range<usize>, out: &mut Vec<Request>) {
        out.clear();
        let CommandColumn { keys, ids } = &self.command;
        let ts = &self.ts_ns.values()[rows.clone()];
        let dev = &self.device.values()[rows.clone()];
        let sector = &self.sector.values()[rows.clone()];
        let sectors = &self.sectors.values()[rows.clone()];
        let pid = &self.pid.values()[rows.clone()];
        let cmd = &keys.values()[rows.clone()];
        let op = &self.op.keys.values()[rows.clone()];
        let (pid_nulls, cmd_nulls) = (self.pid.null_count() > 0, keys.null_count() > 0);
        let op_of = |k: i32| match self.op.ops.get(k as usize) {
            Some(OpValue::Op(Op::Write)) => Op::Write,
            _ => Op::Read,
        };
        if !pid_nulls && !cmd_nulls {
            // The usual batch: no nulls to look up per row, and the columns walked in
            // step (zipped, so no index is bounds-checked seven times a row).
            let ops: Vec<Op> = (0..self.op.ops.len() as i32).map(op_of).collect();
            let columns = ts.iter().zip(dev).zip(sector).zip(sectors);
            let names = pid.iter().zip(cmd).zip(op);
            out.extend(
                columns
                    .zip(names)
                    .map(|((((&t, &d), &s), &n), ((&p, &c), &o))| Request {
                        ts_ns: t,
                        pid: Some(p),
                        command: ids.get(c as usize).copied().unwrap_or(NO_COMMAND),
                        device: d,
                        sector: s,
                        sectors: n,
                        op: ops.get(o as usize).copied().unwrap_or(Op::Read),
                    }),
            );
            return;
        }
        out.extend((0..rows.len()).map(|j| {
            let i = rows.start + j;
            let command = match cmd_nulls && keys.is_null(i) {
                true => NO_COMMAND,
                false => ids.get(cmd[j] as usize).copied().unwrap_or(NO_COMMAND),
            };
            Request {
                ts_ns: ts[j],
                pid: (!pid_nulls || self.pid.is_valid(i)).then_some(pid[j]),
                command,
                device: dev[j],
                sector: sector[j],
                sectors: sectors[j],
                op: op_of(op[j]),
            }
        }));
    }

    /// Whether row `i` is a valid request: no nulls where a value is required, a length,
    /// an op of R or W, a command key inside its dictionary.
    fn check(&self, i: usize) -> Result<(), FieldError> {
        let op = &self.op;
        let op_value = match op.keys.is_null(i) {
            true => OpValue::Null,
            false => match op.ops.get(op.keys.values()[i] as usize) {
                Some(v) => *v,
                None => return Err(FieldError::new("op", "dictionary key out of range")),
            },
        };
        for (name, null) in [
            ("ts_ns", self.ts_ns.is_null(i)),
            ("device", self.device.is_null(i)),
            ("sector", self.sector.is_null(i)),
            ("sectors", self.sectors.is_null(i)),
            ("op", op_value == OpValue::Null),
        ] {
            if null {
                return Err(FieldError::new(name, "null"));
            }
        }
        if self.sectors.values()[i] == 0 {
            return Err(FieldError::new("sectors", "a request of 0 sectors"));
        }
        if op_value == OpValue::Other {
            let other = op.values.value(op.keys.values()[i] as usize);
            return Err(FieldError::new("op", format!("'{other}' is not R or W")));
        }
        let CommandColumn { keys, ids } = &self.command;
        if keys.is_valid(i) && keys.values()[i] as usize >= ids.len() {
            return Err(FieldError::new("command", "dictionary key out of range"));
        }
        Ok(())
    }
}

/// A string column as a dictionary with Int32 keys: as read (the reader is asked for one),
/// or built from plain strings when a file's schema kept them plain.
fn as_dictionary(col: &ArrayRef, name: &str) -> Result<DictionaryArray<Int32Type>, String> {
    match col.data_type() {
        DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8 => {
            Ok(col.as_dictionary::<Int32Type>().clone())
        }
        DataType::Utf8 => Ok(col.as_string::<i32>().iter().collect()),
        other => Err(format!(
            "column '{name}' is {other}, expected Utf8 or a Utf8 dictionary"
        )),
    }
}

/// Looks at each op spelling once per batch, not once per row.
fn op_column(col: &ArrayRef) -> Result<OpColumn, String> {
    let dict = as_dictionary(col, "op")?;
    let values = dict.values().as_string::<i32>().clone();
    let ops = values
        .iter()
        .map(|v| match v {
            Some("R") => OpValue::Op(Op::Read),
            Some("W") => OpValue::Op(Op::Write),
            Some(_) => OpValue::Other,
            None => OpValue::Null,
        })
        .collect();
    Ok(OpColumn {
        keys: dict.keys().clone(),
        values,
        ops,
    })
}

/// Interns a batch's command names once per batch, not once per row.
fn command_column(col: &ArrayRef, commands: &mut Commands) -> Result<CommandColumn, String> {
    let dict = as_dictionary(col, "command")?;
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
