//! Compressed inputs, Parquet, and readers over in-memory bytes.

use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use reblock_trace::format::native::write_line;
use reblock_trace::parquet::{read_trace, write_trace, ParquetWriter, BATCH_ROWS};
use reblock_trace::{Commands, FormatChoice, Op, ReadOptions, Request, Trace, TraceReader};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn requests(path: &Path, opts: &ReadOptions) -> (Vec<Request>, Vec<String>, &'static str) {
    let mut r = TraceReader::open(path, opts).unwrap();
    let mut out = Vec::new();
    while let Some(q) = r.next_request().unwrap() {
        out.push(q);
    }
    let names = out
        .iter()
        .map(|q| r.commands().name(q.command).to_string())
        .collect();
    (out, names, r.format_name())
}

#[test]
fn gzip_and_zstd_read_like_the_plain_file() {
    let plain = std::fs::read(data("fiu.txt")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("fiu.txt.gz");
    let mut enc =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    enc.write_all(&plain).unwrap();
    enc.finish().unwrap();
    let zst = dir.path().join("fiu.txt.zst");
    std::fs::write(&zst, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();

    let want = requests(&data("fiu.txt"), &ReadOptions::default());
    assert_eq!(want.0.len(), 300);
    for path in [gz, zst] {
        assert_eq!(
            requests(&path, &ReadOptions::default()),
            want,
            "{}",
            path.display()
        );
    }
}

fn to_native(trace: &Trace) -> String {
    let mut out = Vec::new();
    for r in trace.iter() {
        write_line(&mut out, &r, trace.commands.name(r.command)).unwrap();
    }
    String::from_utf8(out).unwrap()
}

/// native text -> Trace -> Parquet -> Trace -> native text.
fn through_parquet(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let txt = dir.path().join("t.txt");
    std::fs::write(&txt, text).unwrap();
    let native = ReadOptions {
        format: FormatChoice::Named("native".into()),
        skip_bad: 0,
    };
    let trace = TraceReader::open(&txt, &native)
        .unwrap()
        .read_all()
        .unwrap();
    let pq = dir.path().join("t.parquet");
    assert_eq!(write_trace(&trace, &pq).unwrap(), trace.len() as u64);
    let back = read_trace(&pq).unwrap();
    to_native(&back)
}

fn native_line() -> impl Strategy<Value = String> {
    let command = prop_oneof![Just("-".to_string()), "[a-z][a-z0-9_/:.-]{0,14}"];
    // Times and sectors up to i64::MAX: the file's columns are signed.
    (
        0..=i64::MAX as u64,
        0..u32::MAX,
        command,
        // Any sector a request may start at and still end within the addressable ones.
        0..=reblock_trace::MAX_END_SECTOR - u64::from(u32::MAX),
        1..=u32::MAX,
        any::<bool>(),
    )
        .prop_map(|(ts, pid, cmd, sector, sectors, w)| {
            format!(
                "{ts} {pid} {cmd} {sector} {sectors} {}\n",
                if w { 'W' } else { 'R' }
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn native_parquet_native_is_byte_identical(lines in prop::collection::vec(native_line(), 1..200)) {
        // In time order: readers hand out requests sorted by timestamp.
        let mut lines = lines;
        lines.sort_by_key(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap());
        let text: String = lines.concat();
        prop_assert_eq!(through_parquet(&text), text);
    }
}

#[test]
fn parquet_spans_batches_and_keeps_nulls() {
    // more rows than one batch, commands first seen in different batches, and requests
    // without pid or command (MSR-like)
    let mut commands = Commands::new();
    let names = ["a", "b b", "c"];
    let n = BATCH_ROWS * 2 + 17;
    let mut want = Vec::with_capacity(n);
    for i in 0..n {
        let command = if i % 5 == 0 {
            0
        } else {
            commands.intern(names[(i / 40_000) % 3])
        };
        want.push(Request {
            ts_ns: i as u64 * 1000,
            pid: (i % 3 != 0).then_some(i as u32),
            command,
            device: (i % 4) as u32,
            sector: (i as u64) << 20,
            sectors: 1 + (i % 256) as u32,
            op: if i % 2 == 0 { Op::Read } else { Op::Write },
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("t.data"); // no extension: detected by the PAR1 magic
    let mut w = ParquetWriter::create(&pq).unwrap();
    for r in &want {
        w.push(*r, &commands).unwrap();
    }
    assert_eq!(w.finish(&commands).unwrap(), n as u64);
    let (got, got_names, format) = requests(&pq, &ReadOptions::default());
    assert_eq!(format, "parquet");
    assert_eq!(got.len(), n);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let mut g = *g;
        g.command = w.command; // ids depend on interning order; names are compared below
        assert_eq!(g, *w, "row {i}");
        assert_eq!(got_names[i], commands.name(w.command), "row {i}");
    }
}

#[test]
fn parquet_bad_row_names_row_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("t.parquet");
    let commands = Commands::new();
    let mut w = ParquetWriter::create(&pq).unwrap();
    let ok = Request {
        ts_ns: 1,
        pid: None,
        command: 0,
        device: 0,
        sector: 8,
        sectors: 8,
        op: Op::Read,
    };
    w.push(ok, &commands).unwrap();
    w.push(Request { sectors: 0, ..ok }, &commands).unwrap();
    w.finish(&commands).unwrap();
    let e = read_trace(&pq).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: field sectors: a request of 0 sectors (row group 0 of 1)",
            pq.display()
        )
    );
}

/// A time or sector past i64::MAX cannot be stored in the signed columns: writing it is an
/// error naming the request and the field, never a wrapped (negative) value.
#[test]
fn parquet_refuses_a_sector_past_the_signed_range() {
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("t.parquet");
    let commands = Commands::new();
    let mut w = ParquetWriter::create(&pq).unwrap();
    let ok = Request {
        ts_ns: i64::MAX as u64,
        pid: None,
        command: 0,
        device: 0,
        sector: i64::MAX as u64,
        sectors: 8,
        op: Op::Read,
    };
    w.push(ok, &commands).unwrap();
    w.push(
        Request {
            sector: i64::MAX as u64 + 1,
            ..ok
        },
        &commands,
    )
    .unwrap();
    let e = w.finish(&commands).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}:2: field sector: 9223372036854775808 does not fit the file's signed 64-bit \
             column (max 9223372036854775807)",
            pq.display()
        )
    );
}

#[test]
fn parquet_format_on_text_is_a_clear_error() {
    let opts = ReadOptions {
        format: FormatChoice::Named("parquet".into()),
        skip_bad: 0,
    };
    let e = TraceReader::open(data("fiu.txt"), &opts)
        .err()
        .unwrap()
        .to_string();
    let prefix = format!(
        "{}: not a readable Parquet trace: ",
        data("fiu.txt").display()
    );
    assert!(e.starts_with(&prefix), "{e}");
}

#[test]
fn from_reader_reads_bytes_and_compressed_bytes() {
    let plain = std::fs::read(data("msr-hm_0.csv")).unwrap();
    let want = requests(&data("msr-hm_0.csv"), &ReadOptions::default()).0;
    for bytes in [plain.clone(), zstd::encode_all(&plain[..], 1).unwrap()] {
        let input = Box::new(std::io::Cursor::new(bytes));
        let r = TraceReader::from_reader(input, "mem", &ReadOptions::default()).unwrap();
        assert_eq!(r.format_name(), "msr");
        let got: Vec<Request> = r.map(|q| q.unwrap()).collect();
        assert_eq!(got, want);
    }
}

/// A file written by another tool: plain (not dictionary) string columns, every column
/// nullable, bad rows spread over several batches. Good rows read as written; bad rows are
/// reported in order with their row number and field under --skip-bad.
#[test]
fn parquet_from_another_writer_checks_every_row() {
    use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    let n = BATCH_ROWS * 2 + 123;
    let schema = Arc::new(Schema::new(
        [
            ("ts_ns", DataType::UInt64),
            ("pid", DataType::UInt32),
            ("command", DataType::Utf8),
            ("device", DataType::UInt32),
            ("sector", DataType::UInt64),
            ("sectors", DataType::UInt32),
            ("op", DataType::Utf8),
        ]
        .map(|(name, t)| Field::new(name, t, true))
        .to_vec(),
    ));
    let ts: Vec<Option<u64>> = (0..n)
        .map(|i| (i % 9001 != 7).then_some(i as u64))
        .collect();
    let pid: Vec<Option<u32>> = (0..n).map(|i| (i % 3 != 0).then_some(i as u32)).collect();
    let command: Vec<Option<&str>> = (0..n)
        .map(|i| (i % 5 != 0).then_some(["git", "make", "cc1"][i % 3]))
        .collect();
    let sectors: Vec<Option<u32>> = (0..n).map(|i| Some((i % 20011 != 3) as u32 * 8)).collect();
    let op: Vec<Option<&str>> = (0..n)
        .map(|i| match i % 30011 {
            11 => Some("X"),
            12 => None,
            _ => Some(["R", "W"][i % 2]),
        })
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from(ts.clone())),
        Arc::new(UInt32Array::from(pid.clone())),
        Arc::new(StringArray::from(command.clone())),
        Arc::new(UInt32Array::from_iter_values((0..n).map(|i| i as u32 % 4))),
        Arc::new(UInt64Array::from_iter_values((0..n).map(|i| i as u64 * 8))),
        Arc::new(UInt32Array::from(sectors.clone())),
        Arc::new(StringArray::from(op.clone())),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("t.parquet");
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&pq).unwrap(), schema, None)
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    let mut want_bad = Vec::new();
    let mut want = Vec::new();
    for i in 0..n {
        let why = if ts[i].is_none() {
            Some("field ts_ns: null")
        } else if op[i].is_none() {
            Some("field op: null")
        } else if sectors[i] == Some(0) {
            Some("field sectors: a request of 0 sectors")
        } else if op[i] == Some("X") {
            Some("field op: 'X' is not R or W")
        } else {
            None
        };
        match why {
            Some(why) => want_bad.push((i as u64 + 1, format!("{why} (row group 0 of 1)"))),
            None => want.push((i as u64, pid[i], command[i].unwrap_or(""), op[i])),
        }
    }
    let opts = ReadOptions {
        format: FormatChoice::Auto,
        skip_bad: want_bad.len(),
    };
    let mut r = TraceReader::open(&pq, &opts).unwrap();
    let mut got = Vec::new();
    while let Some(q) = r.next_request().unwrap() {
        got.push(q);
    }
    let bad: Vec<(u64, String)> = r
        .bad_lines()
        .iter()
        .map(|b| (b.line, b.error.to_string()))
        .collect();
    assert_eq!(bad, want_bad);
    assert_eq!(got.len(), want.len());
    for (q, (ts, pid, command, op)) in got.iter().zip(&want) {
        assert_eq!(
            (q.ts_ns, q.pid, r.commands().name(q.command)),
            (*ts, *pid, *command)
        );
        assert_eq!((q.sector, q.device, q.sectors), (ts * 8, *ts as u32 % 4, 8));
        assert_eq!(Some(q.op.letter().to_string().as_str()), *op);
    }
    // One bad row fewer tolerated: the last one fails, naming its row.
    let opts = ReadOptions {
        format: FormatChoice::Auto,
        skip_bad: want_bad.len() - 1,
    };
    let e = TraceReader::open(&pq, &opts)
        .unwrap()
        .read_all()
        .unwrap_err();
    let (row, why) = want_bad.last().unwrap();
    assert!(
        e.to_string().ends_with(&format!("line {row}: {why}")),
        "{e}"
    );
}

/// Every codec round-trips, and the file holds what the module doc promises: the codec
/// asked for on every column, and delta-encoded times and sectors.
#[test]
fn every_codec_round_trips_with_delta_encoded_times_and_sectors() {
    use parquet::basic::{Compression, Encoding};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use reblock_trace::parquet::Codec;

    let trace = TraceReader::open(data("fiu.txt"), &ReadOptions::default())
        .unwrap()
        .read_all()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (codec, want) in [
        (Codec::Zstd, "ZSTD"),
        (Codec::Lz4, "LZ4_RAW"),
        (Codec::Snappy, "SNAPPY"),
        (Codec::None, "UNCOMPRESSED"),
    ] {
        let pq = dir.path().join(format!("{want}.parquet"));
        let mut w = ParquetWriter::create_with(&pq, codec).unwrap();
        for r in trace.iter() {
            w.push(r, &trace.commands).unwrap();
        }
        assert_eq!(w.finish(&trace.commands).unwrap(), 300);
        assert_eq!(to_native(&read_trace(&pq).unwrap()), to_native(&trace));
        let file = SerializedFileReader::new(std::fs::File::open(&pq).unwrap()).unwrap();
        let group = file.metadata().row_group(0);
        for col in group.columns() {
            let name = col.column_path().string();
            let codec_name = match col.compression() {
                Compression::ZSTD(_) => "ZSTD".to_string(),
                c => c.to_string(),
            };
            assert_eq!(codec_name, want, "{name}");
            let delta = col.encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED);
            assert_eq!(delta, name == "ts_ns" || name == "sector", "{name}");
        }
    }
}

/// Regression (found by the parquet fuzz target): a corrupt file on which the parquet
/// crate itself panics, decoding definition levels, stops with an error naming the
/// file instead of aborting; reading it again does the same.
#[test]
fn a_decoder_panic_is_an_error_naming_the_file() {
    let path = data("decoder_panic.parquet");
    for _ in 0..2 {
        let err = TraceReader::open(&path, &ReadOptions::default())
            .and_then(|r| r.read_all())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("decoder_panic.parquet")
                && err.contains("not a readable Parquet trace: the Parquet decoder failed"),
            "{err}"
        );
    }
}

/// Columns as other tools type them: signed and narrow integers, large strings, string
/// views and a dictionary with Int8 keys (a pandas categorical). Values in range read as
/// the same requests; a negative sector and a pid past u32 are bad rows naming their row
/// group, row and column.
#[test]
fn parquet_of_any_integer_and_string_type_reads_with_range_checks() {
    use arrow_array::types::Int8Type;
    use arrow_array::{
        ArrayRef, DictionaryArray, Int16Array, Int64Array, Int8Array, LargeStringArray,
        RecordBatch, StringArray, StringViewArray, UInt8Array,
    };
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;

    let n = 6;
    let names = StringArray::from(vec!["git", "make"]);
    let command = DictionaryArray::<Int8Type>::try_new(
        Int8Array::from(vec![0, 1, 0, 1, 0, 1]),
        Arc::new(names),
    )
    .unwrap();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("ts_ns", Arc::new(Int64Array::from_iter_values(0..n))),
        (
            "pid",
            Arc::new(Int64Array::from(vec![1, 2, 3, 1 << 33, 5, 6])),
        ),
        ("command", Arc::new(command)),
        ("device", Arc::new(UInt8Array::from(vec![0, 1, 0, 1, 0, 1]))),
        (
            "sector",
            Arc::new(Int16Array::from(vec![8, 16, -8, 24, 32, 40])),
        ),
        ("sectors", Arc::new(Int8Array::from(vec![8; 6]))),
        (
            "op",
            Arc::new(LargeStringArray::from(vec!["R", "W", "R", "W", "R", "W"])),
        ),
    ];
    let batch = RecordBatch::try_from_iter(columns.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("t.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(3))
        .build();
    let file = std::fs::File::create(&pq).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    let opts = ReadOptions {
        format: FormatChoice::Auto,
        skip_bad: 2,
    };
    let mut r = TraceReader::open(&pq, &opts).unwrap();
    let mut got = Vec::new();
    while let Some(q) = r.next_request().unwrap() {
        got.push((
            q.ts_ns,
            q.pid,
            r.commands().name(q.command).to_string(),
            q.device,
            q.sector,
            q.op,
        ));
    }
    let bad: Vec<String> = r
        .bad_lines()
        .iter()
        .map(|b| format!("{}: {}", b.line, b.error))
        .collect();
    assert_eq!(
        bad,
        [
            "3: field sector: -8 is outside the column's range 0 to 18446744073709551615 \
             (row group 0 of 2)",
            "4: field pid: 8589934592 is outside the column's range 0 to 4294967295 \
             (row group 1 of 2)",
        ]
    );
    let want: Vec<(u64, Option<u32>, String, u32, u64, Op)> = [0usize, 1, 4, 5]
        .iter()
        .map(|&i| {
            let op = if i % 2 == 0 { Op::Read } else { Op::Write };
            let cmd = ["git", "make"][i % 2].to_string();
            (
                i as u64,
                Some(i as u32 + 1),
                cmd,
                i as u32 % 2,
                [8, 16, 0, 0, 32, 40][i],
                op,
            )
        })
        .collect();
    assert_eq!(got, want);

    // The same rows with the strings as views read the same.
    let mut columns = columns;
    columns[6].1 = Arc::new(StringViewArray::from(vec!["R", "W", "R", "W", "R", "W"]));
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(&pq).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let mut r = TraceReader::open(&pq, &opts).unwrap();
    let mut ops = Vec::new();
    while let Some(q) = r.next_request().unwrap() {
        ops.push(q.op);
    }
    assert_eq!(ops, [Op::Read, Op::Write, Op::Read, Op::Write]);
}

/// The footer carries the schema version, the source format and the device size; a
/// reader sees them, and a file without them reads as none.
#[test]
fn parquet_metadata_round_trips() {
    use reblock_trace::parquet::{read_meta, Codec, TraceMeta};
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("t.parquet");
    let meta = TraceMeta {
        device_sectors: Some(16_777_216),
        source_format: Some("blkparse".into()),
        schema_version: None,
    };
    let commands = Commands::new();
    let mut w = ParquetWriter::create_with_meta(&pq, Codec::default(), &meta).unwrap();
    let r = Request {
        ts_ns: 1,
        pid: None,
        command: 0,
        device: 0,
        sector: 8,
        sectors: 8,
        op: Op::Read,
    };
    w.push(r, &commands).unwrap();
    w.finish(&commands).unwrap();
    let want = TraceMeta {
        schema_version: Some(2),
        ..meta
    };
    assert_eq!(read_meta(&pq).unwrap(), want);
    let reader = TraceReader::open(&pq, &ReadOptions::default()).unwrap();
    assert_eq!(reader.parquet_meta(), Some(&want));
}
