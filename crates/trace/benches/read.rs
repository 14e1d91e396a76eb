//! Reading speed, in requests per second, against baselines measured in the same run:
//! splitting the same native file into lines with `read_until` and nothing else, and
//! decoding the same Parquet file's record batches with the Arrow reader and nothing else. The later
//! analyzer needs native text well above 2 M requests/s and Parquet well above 5 M/s on
//! one core.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use reblock_trace::format::native::write_line;
use reblock_trace::parquet::{ParquetWriter, BATCH_ROWS};
use reblock_trace::{Commands, FormatChoice, Op, ReadOptions, Request, TraceReader};

const REQUESTS: u64 = 1_000_000;

/// A native trace shaped like a recorded one: a few processes, mostly sequential runs.
fn generate(txt: &Path, pq: &Path) {
    let mut commands = Commands::new();
    let names = ["bash", "git", "cc1", "kworker/u8:2", "jbd2/sda1-8", "make"];
    let ids: Vec<u32> = names.iter().map(|n| commands.intern(n)).collect();
    let mut out = std::io::BufWriter::new(std::fs::File::create(txt).unwrap());
    let mut pw = ParquetWriter::create(pq).unwrap();
    let mut sector = 12_648_728u64;
    for i in 0..REQUESTS {
        let who = ((i / 37) % names.len() as u64) as usize;
        if i % 7 == 0 {
            sector = sector.wrapping_mul(6364136223846793005).wrapping_add(1) % (1 << 31);
        }
        let r = Request {
            ts_ns: 430_520_000 + i * 1_013,
            pid: Some(4000 + who as u32),
            command: ids[who],
            device: 0,
            sector,
            sectors: 8 << (i % 4),
            op: if i % 3 == 0 { Op::Write } else { Op::Read },
        };
        sector += u64::from(r.sectors);
        write_line(&mut out, &r, names[who]).unwrap();
        pw.push(r, &commands).unwrap();
    }
    out.flush().unwrap();
    pw.finish(&commands).unwrap();
}

fn count_requests(path: &Path, format: &str) -> u64 {
    let opts = ReadOptions {
        format: FormatChoice::Named(format.into()),
        skip_bad: 0,
    };
    let mut r = TraceReader::open(path, &opts).unwrap();
    let mut n = 0u64;
    while let Some(q) = r.next_request().unwrap() {
        n += black_box(q).sectors as u64 & 1 | 1;
    }
    assert_eq!(n, REQUESTS);
    n
}

fn count_lines(path: &Path) -> u64 {
    let mut input = BufReader::with_capacity(1 << 20, std::fs::File::open(path).unwrap());
    let mut buf = Vec::new();
    let mut n = 0;
    while input.read_until(b'\n', &mut buf).unwrap() > 0 {
        n += 1;
        black_box(&buf);
        buf.clear();
    }
    n
}

/// The Parquet floor: decoding the same file's record batches with the Arrow reader and
/// nothing else (no requests made).
fn count_batches(path: &Path) -> u64 {
    let file = std::fs::File::open(path).unwrap();
    let batches = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .with_batch_size(BATCH_ROWS)
        .build()
        .unwrap();
    let mut n = 0;
    for b in batches {
        n += black_box(b.unwrap()).num_rows() as u64;
    }
    assert_eq!(n, REQUESTS);
    n
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (txt, pq) = (dir.path().join("t.txt"), dir.path().join("t.parquet"));
    generate(&txt, &pq);
    let mut g = c.benchmark_group("read_1M_requests");
    g.sample_size(10);
    g.throughput(Throughput::Elements(REQUESTS));
    g.bench_function("baseline_read_until_lines", |b| {
        b.iter(|| count_lines(&txt))
    });
    g.bench_function("native_text", |b| b.iter(|| count_requests(&txt, "native")));
    g.bench_function("baseline_parquet_batches", |b| {
        b.iter(|| count_batches(&pq))
    });
    g.bench_function("parquet", |b| b.iter(|| count_requests(&pq, "parquet")));
    g.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
