//! Counting 1M keys drawn over 2^22 values: the batch-sorted tally against the hash map
//! it replaces (the baseline, measured in the same run).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reblock_tally::Tally;
use rustc_hash::FxHashMap;

fn keys(n: usize) -> Vec<u64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % (1 << 22)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let n = 1_000_000;
    let ks = keys(n);
    let mut g = c.benchmark_group("count");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("hashmap_baseline", n), |b| {
        b.iter(|| {
            let mut m: FxHashMap<u64, u64> = FxHashMap::default();
            for &k in &ks {
                *m.entry(k).or_default() += 1;
            }
            m.len()
        })
    });
    g.bench_function(BenchmarkId::new("tally", n), |b| {
        b.iter(|| {
            let mut t: Tally<u64, u64> = Tally::default();
            for &k in &ks {
                t.add(k, 1);
            }
            t.distinct()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
