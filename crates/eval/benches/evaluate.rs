//! `evaluate` end to end against a same-run baseline: one plain replay of the same
//! requests on the same device (the least any evaluation must do). Graph building and
//! borg planning over 1M requests are benchmarked by the plan crate (benches/plan.rs);
//! they are not repeated here.
//!
//! Workload: 16 processes, each looping over its own 256 scattered pages in a fixed
//! order with a 1-in-8 chance of a write, 100 000 requests, 5 ms apart.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use reblock_eval::{evaluate_point, EvalConfig, Interval};
use reblock_sim::{Config, IterSource, Pacing, Phase, Replay, Submission};
use reblock_trace::{Op, Request};

const N: usize = 100_000;

fn workload() -> Vec<Request> {
    let mut x: u64 = 42;
    let mut next = |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let programs: Vec<Vec<u64>> = (0..16)
        .map(|_| (0..256).map(|_| next(30_000_000)).collect())
        .collect();
    let mut pos = [0usize; 16];
    (0..N)
        .map(|i| {
            let p = next(16) as usize;
            pos[p] = (pos[p] + 1) % 256;
            Request {
                ts_ns: i as u64 * 5_000_000,
                pid: Some(100 + p as u32),
                command: 0,
                device: 0,
                sector: programs[p][pos[p]] * 8,
                sectors: 8,
                op: if next(8) == 0 { Op::Write } else { Op::Read },
            }
        })
        .collect()
}

fn plain_replay(reqs: &[Request], device: &str) -> f64 {
    let built = reblock_device::parse_spec(device).unwrap();
    let cfg = Config {
        pacing: Pacing::Open { speed: 168.0 },
        ..Config::default()
    };
    let replay = Replay::new(built.array, built.members, cfg).unwrap();
    let subs = reqs.iter().enumerate().map(|(i, r)| Submission {
        number: i as u64 + 1,
        ts_ns: r.ts_ns,
        req: reblock_device::DevRequest {
            sector: r.sector,
            sectors: r.sectors,
            write: r.op.is_write(),
        },
        device: 0,
        phase: Phase::Normal,
        physical: false,
    });
    replay
        .run(&mut IterSource(subs), &mut ())
        .unwrap()
        .overall
        .busy_time_s
}

fn bench(c: &mut Criterion) {
    let reqs = workload();
    let mut g = c.benchmark_group("evaluate");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N as u64));
    let device = "hdd:cheetah15k5";
    g.bench_function("baseline_plain_replay", |b| {
        b.iter(|| plain_replay(&reqs, device))
    });
    for (name, policies, guard) in [
        ("vanilla", vec!["vanilla"], false),
        ("borg_no_guard", vec!["borg"], false),
        ("borg_guard", vec!["borg"], true),
    ] {
        let cfg = EvalConfig {
            policies: policies.iter().map(|s| s.to_string()).collect(),
            device: device.into(),
            interval: Interval::Count {
                reconfigurations: 4,
            },
            guard,
            ..EvalConfig::default()
        };
        g.bench_function(name, |b| {
            b.iter(|| evaluate_point(&reqs, &cfg, "bench", &mut |_, _, _| {}).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
