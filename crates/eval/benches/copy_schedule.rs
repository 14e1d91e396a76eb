//! The copy scheduler against plan-order copying, on the same device model in the same
//! run: modelled disk busy time per MiB moved (reported by criterion as the "time" of one
//! iteration, via `iter_custom`: one iteration = copying one MiB), and the CPU time the
//! scheduler itself takes per reconfiguration.
//!
//! Workload: a BORG-like plan bringing 4096 pages (16 MiB) into the read cache of a
//! 64 MiB BOPT in the middle of a WD2500AAKS, the pages drawn from 64 hot clusters of
//! the first 40 GB (as a file system's hot blocks are), placed in a fixed order that is
//! not address order.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use reblock_device::DevRequest;
use reblock_eval::replay;
use reblock_layout::{
    diff, plan_order_requests, BoptConfig, BoptPosition, CopyRequest, CopySchedule, DiffOptions,
    Geometry, Indirector, Plan, ScheduleOptions, Step,
};

const DEVICE: &str = "hdd:wd2500aaks";
const PAGES: u64 = 4096;

fn setup() -> (Indirector, Vec<Step>) {
    let capacity = reblock_device::parse_spec(DEVICE)
        .unwrap()
        .array
        .capacity_sectors();
    let bopt_pages = 16384u32;
    let data_sectors = (capacity - u64::from(bopt_pages) * 8) / 8 * 8;
    let geo = Geometry::new(&BoptConfig {
        page_sectors: 8,
        data_sectors,
        bopt_pages,
        segment_pages: 256,
        write_buffer_fraction: 0.2,
        position: BoptPosition::Middle,
        meta_sectors: 0,
    })
    .unwrap();
    let ind = Indirector::new(geo).unwrap();
    let mut x: u64 = 7;
    let mut next = |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let clusters: Vec<u64> = (0..64).map(|_| next(10_000_000)).collect();
    let mut plan = Plan::new(8, "bench");
    let mut seen = std::collections::HashSet::new();
    let mut slot = 0;
    while slot < PAGES {
        let page = clusters[next(64) as usize] + next(2048);
        if seen.insert(page) {
            plan.push(page, 1, slot);
            slot += 1;
        }
    }
    let steps = diff(&plan, &ind, DiffOptions::default()).unwrap().steps;
    (ind, steps)
}

fn busy_s(requests: &[CopyRequest]) -> f64 {
    let reqs: Vec<DevRequest> = requests
        .iter()
        .map(|r| DevRequest {
            sector: r.extent.start_sector,
            sectors: r.extent.sectors as u32,
            write: r.write,
        })
        .collect();
    replay::copies(DEVICE, &reqs).unwrap().summary.busy_time_s
}

fn bench(c: &mut Criterion) {
    let (ind, steps) = setup();
    let mib = (PAGES * 4096) as f64 / (1 << 20) as f64;
    let opts = ScheduleOptions {
        read_gap_sectors: replay::read_through_gap_sectors(DEVICE).unwrap(),
        ..ScheduleOptions::default()
    };
    let scheduled = busy_s(&CopySchedule::new(&steps, &ind, opts).requests()) / mib;
    let plan_order = busy_s(&plan_order_requests(&steps, ind.geometry(), 2048)) / mib;
    eprintln!(
        "copy busy per MiB on {DEVICE}: scheduled {scheduled:.4} s, plan order {plan_order:.4} s \
         ({:.1}x less)",
        plan_order / scheduled
    );
    let mut g = c.benchmark_group("copy_busy_per_mib");
    g.sample_size(10);
    for (name, per_mib) in [("scheduled", scheduled), ("plan_order", plan_order)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| Duration::from_secs_f64(per_mib * iters as f64))
        });
    }
    g.finish();
    c.bench_function("schedule_16MiB_cpu", |b| {
        b.iter(|| CopySchedule::new(&steps, &ind, opts).batches.len())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
