//! Speed of one planning round on a million requests (target: under 10 s on one core):
//! session building + pair mining, then graph + Algorithm 1 + colour-to-disk mapping on
//! 14 disks. Baseline in the same run: interning every session block in an FxHash map
//! (the least any pair miner must do).
//!
//! Workload: 1 M requests of 1-4 pages (4 KiB blocks) over 200 k hot extents with a
//! skewed popularity, arriving 30 us apart, sessions are 100 us windows.

use criterion::{criterion_group, criterion_main, Criterion};
use reblock_parallel::colouring::ColouringConfig;
use reblock_parallel::mining::{BlockIds, PairCounts};
use reblock_parallel::plan::{plan, PlanInput};
use reblock_parallel::session::{for_each_session, Blocking, OpFilter, SessionConfig, SessionMode};
use reblock_parallel::zipf::{splitmix64, ZipfPlacement};
use reblock_trace::{Op, Request, Trace, NO_COMMAND};

const REQUESTS: u64 = 1_000_000;
const DISKS: usize = 14;

fn workload() -> Trace {
    let mut t = Trace::default();
    for i in 0..REQUESTS {
        let h = splitmix64(i);
        // Squaring a uniform number skews popularity towards low extents.
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        let extent = (u * u * 200_000.0) as u64;
        t.push(Request {
            ts_ns: i * 30_000,
            pid: None,
            command: NO_COMMAND,
            device: 0,
            sector: extent * 64,
            sectors: 8 * (1 + (h & 3) as u32),
            op: if h & 16 == 0 { Op::Read } else { Op::Write },
        });
    }
    t
}

fn config() -> SessionConfig {
    SessionConfig {
        blocking: Blocking {
            block_sectors: 8,
            wrap_sectors: None,
        },
        mode: SessionMode::WindowNs(100_000),
        ops: OpFilter::Both,
    }
}

fn mine(t: &Trace) -> PairCounts {
    let mut counts = PairCounts::new(DISKS - 1);
    for_each_session(t, 0..t.len(), &config(), |s| counts.add_session(s));
    counts
}

fn optimize(t: &Trace) -> u64 {
    let counts = mine(t);
    let zipf = ZipfPlacement::new(DISKS, 1.0, 3).unwrap();
    let disk: Vec<u32> = counts
        .ids()
        .blocks()
        .iter()
        .map(|&b| zipf.disk(b) as u32)
        .collect();
    let group_of: Vec<u32> = (0..disk.len() as u32).collect();
    let pairs = counts.frequent_ids(1);
    let input = PlanInput {
        disk: &disk,
        group_of: &group_of,
        groups: disk.len(),
        disks: DISKS,
        block_bytes: 4096,
        capacity_bytes: u64::MAX / 2,
        pairs: &pairs,
        colouring: ColouringConfig::default(),
    };
    plan(&input).1.bytes_moved
}

fn bench(c: &mut Criterion) {
    let t = workload();
    let mut g = c.benchmark_group("parallel_1m_requests");
    g.sample_size(10);
    g.bench_function("baseline_intern_session_blocks", |b| {
        b.iter(|| {
            let mut ids = BlockIds::default();
            for_each_session(&t, 0..t.len(), &config(), |s| {
                s.iter().for_each(|&x| {
                    ids.intern(x);
                })
            });
            ids.len()
        })
    });
    g.bench_function("mine_pairs", |b| b.iter(|| mine(&t).distinct_pairs()));
    g.bench_function("mine_colour_map", |b| b.iter(|| optimize(&t)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
