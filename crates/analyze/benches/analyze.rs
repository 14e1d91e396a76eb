//! Analyzer throughput (issue target: >= 2 million requests/s over native text on one
//! core). Baselines measured in the same run:
//! * `memory/iterate`: walking the in-memory requests only, against `memory/analyze`;
//! * `native_text/read`: reading the native text file only, against `native_text/analyze`
//!   (read + analyze), so the analyzer's share of the time shows.

use std::io::Write;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reblock_analyze::{Analyzer, Config, Interval};
use reblock_trace::{Op, ReadOptions, Request, TraceReader};

/// A developer-like mix: runs of sequential 4-32 KiB requests from a few processes over a
/// 2^22-page (16 GiB) space with skewed hot regions, 5% writes, ~10 us apart.
fn synthetic(n: usize) -> Vec<Request> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(n);
    let mut sector = 0u64;
    let mut ts = 0u64;
    for i in 0..n {
        let r = next();
        if i % 8 == 0 {
            // New run: hot region (1/16 of the space) three times in four.
            let span = if r % 4 == 0 { 1u64 << 25 } else { 1u64 << 21 };
            sector = (next() % span) & !7;
        }
        let sectors = 8 << (r % 3);
        out.push(Request {
            ts_ns: ts,
            pid: Some(1000 + (r >> 8) as u32 % 4),
            command: 1 + (r >> 8) as u32 % 4,
            device: 0,
            sector,
            sectors,
            op: if r % 20 == 0 { Op::Write } else { Op::Read },
        });
        sector += u64::from(sectors);
        ts += 5_000 + (r >> 16) % 10_000;
    }
    out
}

fn config() -> Config {
    Config {
        interval: Interval::Requests { n: 100_000 },
        ..Config::default()
    }
}

fn bench(c: &mut Criterion) {
    let n = 1_000_000;
    let reqs = synthetic(n);
    let mut g = c.benchmark_group("memory");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("iterate", n), |b| {
        b.iter(|| {
            reqs.iter()
                .map(|r| r.sector ^ r.ts_ns)
                .fold(0, u64::wrapping_add)
        })
    });
    g.bench_function(BenchmarkId::new("analyze", n), |b| {
        b.iter(|| {
            let mut a = Analyzer::new(config());
            for r in &reqs {
                a.observe(r);
            }
            a.finish().requests
        })
    });
    g.finish();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.trace.txt");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for r in &reqs {
        let cmd = ["git", "make", "cc1", "grep", "sh"][r.command as usize];
        let op = r.op.letter();
        writeln!(
            f,
            "{} {} {cmd} {} {} {op}",
            r.ts_ns,
            r.pid.unwrap(),
            r.sector,
            r.sectors
        )
        .unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let mut g = c.benchmark_group("native_text");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("read", n), |b| {
        b.iter(|| {
            let mut r = TraceReader::open(&path, &ReadOptions::default()).unwrap();
            let mut k = 0u64;
            while let Some(q) = r.next_request().unwrap() {
                k = k.wrapping_add(q.sector);
            }
            k
        })
    });
    g.bench_function(BenchmarkId::new("analyze", n), |b| {
        b.iter(|| {
            let mut r = TraceReader::open(&path, &ReadOptions::default()).unwrap();
            let mut a = Analyzer::new(config());
            while let Some(q) = r.next_request().unwrap() {
                a.observe(&q);
            }
            a.finish().requests
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
