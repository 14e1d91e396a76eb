//! Analyzer throughput (issue targets, one core: >= 2 million requests/s over native text,
//! >= 5 million over Parquet). Baselines measured in the same run:
//! * `memory/iterate`: walking the in-memory requests only, against `memory/analyze`;
//! * `<file>/read`: reading the file only, against `<file>/analyze` (read + analyze), for
//!   the synthetic trace as native text and as Parquet and for the bundled real trace.

mod common;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reblock_analyze::{Analyzer, Config, Interval};
use reblock_trace::parquet::ParquetWriter;
use reblock_trace::{Commands, ReadOptions, Request, TraceReader};

fn config() -> Config {
    Config {
        interval: Interval::Requests { n: 100_000 },
        ..Config::default()
    }
}

fn bench(c: &mut Criterion) {
    let n = 1_000_000;
    let reqs = common::synthetic(n);
    report_memory(&reqs);
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
    let text = dir.path().join("bench.trace.txt");
    write_text(&reqs, &text);
    file_group(c, "native_text", &text, n as u64);
    let parquet = dir.path().join("bench.parquet");
    write_parquet(&reqs, &parquet);
    file_group(c, "parquet", &parquet, n as u64);
    // The bundled real trace: a developer's kernel build, far less random than the
    // synthetic mix (how the target is meant to be met on real workloads).
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces/captured/dev_kernel.trace.txt");
    match count(&real) {
        Some(rows) => {
            file_group(c, "real_dev_kernel_text", &real, rows);
            let real_parquet = dir.path().join("dev_kernel.parquet");
            let trace = TraceReader::open(&real, &ReadOptions::default())
                .and_then(|r| r.read_all())
                .unwrap();
            reblock_trace::parquet::write_trace(&trace, &real_parquet).unwrap();
            file_group(c, "real_dev_kernel_parquet", &real_parquet, rows);
        }
        None => eprintln!(
            "skipping the real-trace case: {} unreadable",
            real.display()
        ),
    }
}

/// Memory, which the issue bounds by the distinct pages (and, for exact partial
/// determinism, the distinct transition pairs), not the requests.
fn report_memory(reqs: &[Request]) {
    let mut a = Analyzer::new(config());
    for r in reqs {
        a.observe(r);
    }
    let held = a.heap_bytes();
    let out = a.finish();
    let (pages, pairs) = (out.pages.unique_pages, out.determinism.distinct_pairs);
    eprintln!(
        "analyzer memory after {} requests: {:.1} MiB for {pages} distinct pages and {pairs} \
         distinct pairs ({:.1} B per page + pair)",
        reqs.len(),
        held as f64 / (1 << 20) as f64,
        held as f64 / (pages + pairs) as f64
    );
}

fn write_text(reqs: &[Request], path: &Path) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for r in reqs {
        let cmd = ["git", "make", "cc1", "grep", "sh"][r.command as usize];
        let op = r.op.letter();
        let (ts, pid, sector, sectors) = (r.ts_ns, r.pid.unwrap(), r.sector, r.sectors);
        writeln!(f, "{ts} {pid} {cmd} {sector} {sectors} {op}").unwrap();
    }
    f.flush().unwrap();
}

fn write_parquet(reqs: &[Request], path: &Path) {
    let mut commands = Commands::new();
    for name in ["git", "make", "cc1", "grep"] {
        commands.intern(name);
    }
    let mut w = ParquetWriter::create(path).unwrap();
    for r in reqs {
        w.push(*r, &commands).unwrap();
    }
    w.finish(&commands).unwrap();
}

fn count(path: &Path) -> Option<u64> {
    let mut r = TraceReader::open(path, &ReadOptions::default()).ok()?;
    let mut n = 0;
    while r.next_request().ok()?.is_some() {
        n += 1;
    }
    Some(n)
}

/// `read` (reading only) is the baseline `analyze` (read + analyze) is measured against.
fn file_group(c: &mut Criterion, name: &str, path: &Path, rows: u64) {
    let mut g: BenchmarkGroup<WallTime> = c.benchmark_group(name);
    g.throughput(Throughput::Elements(rows));
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("read", rows), |b| {
        b.iter(|| {
            let mut r = TraceReader::open(path, &ReadOptions::default()).unwrap();
            let mut k = 0u64;
            while let Some(q) = r.next_request().unwrap() {
                k = k.wrapping_add(q.sector);
            }
            k
        })
    });
    g.bench_function(BenchmarkId::new("analyze", rows), |b| {
        b.iter(|| {
            let mut r = TraceReader::open(path, &ReadOptions::default()).unwrap();
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
