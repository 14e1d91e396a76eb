//! Service calls per second of the disk model (the simulator needs >= 1 M/s for one HDD
//! with FCFS on one core), against a same-run baseline: the seek table lookup alone.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use reblock_device::params::builtin;
use reblock_device::{DevRequest, Device, Hdd};

const CALLS: u64 = 10_000;

/// splitmix64: deterministic request streams without a dependency.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn random_reads(n: u64, capacity: u64) -> Vec<DevRequest> {
    let mut s = 1;
    (0..n)
        .map(|_| DevRequest {
            sector: next(&mut s) % (capacity - 8),
            sectors: 8,
            write: false,
        })
        .collect()
}

fn bench_service(c: &mut Criterion) {
    let cheetah = Hdd::new(&builtin("cheetah15k5").unwrap()).unwrap();
    let cap = cheetah.capacity_sectors();
    let random = random_reads(CALLS, cap);
    let sequential: Vec<DevRequest> = (0..CALLS)
        .map(|i| DevRequest {
            sector: i * 8,
            sectors: 8,
            write: false,
        })
        .collect();
    let mut g = c.benchmark_group("hdd_service");
    g.throughput(Throughput::Elements(CALLS));

    // Baseline: the seek table lookup alone, one per request.
    let seek = cheetah.seek_model().clone();
    let dists: Vec<u32> = {
        let mut s = 2;
        (0..CALLS)
            .map(|_| (next(&mut s) % 72_000) as u32 + 1)
            .collect()
    };
    g.bench_function("baseline_seek_table_lookup", |b| {
        b.iter(|| {
            dists
                .iter()
                .map(|&d| seek.seek_ns(black_box(d)))
                .sum::<f64>()
        })
    });
    let cases = [
        (
            "cheetah_random_4k_nocache",
            cheetah.clone().without_cache(),
            &random,
        ),
        ("cheetah_random_4k_cache", cheetah.clone(), &random),
        (
            "cheetah_sequential_4k_nocache",
            cheetah.clone().without_cache(),
            &sequential,
        ),
        ("cheetah_sequential_4k_cache", cheetah.clone(), &sequential),
    ];
    for (name, disk, reqs) in cases {
        g.bench_function(name, |b| {
            let mut d = disk.clone();
            let mut t = 0u64;
            b.iter(|| {
                for r in reqs.iter() {
                    t += d.service(t, black_box(r)).total_ns + 1_000;
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_service);
criterion_main!(benches);
