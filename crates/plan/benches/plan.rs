//! Graph building and planning throughput, in requests per second, against a same-run
//! baseline that only hashes each request's first page into a count table (the least any
//! analyzer must do per request). The bar: graph building + borg planning at one
//! million requests per second or more on one core.
//!
//! Workload: 64 processes, each replaying its own program of 1024 extents (4-512 KiB,
//! page aligned, a quarter of them shared or shifted by a page between processes so that
//! the master graph must split ranges), in bursts of 1-16 requests, jumping elsewhere in
//! its program 1 time in 10. One million requests.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reblock_plan::{build_graphs, by_name, PlanParams};
use reblock_trace::Request;
use rustc_hash::FxHashMap;

mod workload;
use workload::workload;

fn baseline(requests: &[Request]) -> usize {
    let mut counts: FxHashMap<u64, u32> = FxHashMap::default();
    for r in requests {
        *counts.entry(r.sector / 8).or_insert(0) += 1;
    }
    counts.len()
}

fn bench(c: &mut Criterion) {
    let requests = workload(1_000_000);
    let graph = build_graphs(requests.iter().copied());
    eprintln!(
        "workload: {} requests, {} processes, master graph {} vertices, {} edges, {} KiB",
        requests.len(),
        graph.processes(),
        graph.len(),
        graph.edge_count(),
        graph.heap_bytes() / 1024
    );
    let params = PlanParams {
        read_cache_pages: Some(1 << 18),
        ..PlanParams::default()
    };
    let borg = by_name("borg").unwrap();
    let mut group = c.benchmark_group("plan");
    group.throughput(Throughput::Elements(requests.len() as u64));
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("baseline-hash-pages", "1M"), |b| {
        b.iter(|| baseline(black_box(&requests)))
    });
    group.bench_function(BenchmarkId::new("build-graphs", "1M"), |b| {
        b.iter(|| build_graphs(black_box(&requests).iter().copied()).len())
    });
    group.bench_function(BenchmarkId::new("build-graphs+borg", "1M"), |b| {
        b.iter(|| {
            let g = build_graphs(black_box(&requests).iter().copied());
            borg.plan(&g, &params).pages()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
