//! The copy scheduler against plan-order copying, on the same device model in the same
//! run: modelled disk busy time per MiB moved (printed before criterion runs; it is a
//! model figure, the same on every run), and the CPU time the scheduler itself takes per
//! reconfiguration (criterion).
//!
//! Every workload prints one block: how many batches, read and write extents the schedule
//! has, and its busy time per MiB split into seek, rotational wait, transfer and the rest
//! (on this drive mostly the write-back of cached writes), for: the schedule with its
//! reads in address order (`sorted`); the schedule with its reads ordered by the drive
//! model (`scheduled`, what the scheduler gives a caller with a model); plan-order
//! copying; and the floor (every source read in one merged sweep, ordered by the model,
//! then every destination written in one, ignoring the order chains need and the staging
//! bound).
//!
//! Workloads: a BORG-like plan bringing 4096 pages (16 MiB) into the read cache of a
//! 64 MiB BOPT in the middle of a WD2500AAKS, the pages drawn from 64 hot clusters of
//! the first 40 GB (as a file system's hot blocks are), placed in a fixed order that is
//! not address order. Plans made from real traces (`reblock plan TRACE --out plan.json`)
//! are added with `REBLOCK_COPY_PLANS=a.json,b.json+c.json` (absolute paths: cargo runs
//! benches in the crate's directory): `a.json` is copied into an
//! empty BOPT; `b.json+c.json` places `b.json`, then measures the move to `c.json`
//! re-planned stably against it (pages in place keep their slots, as `evaluate` does).

use criterion::{criterion_group, criterion_main, Criterion};
use reblock_device::DevRequest;
use reblock_eval::layout::{to_layout_plan, Layout};
use reblock_eval::replay::{self, AccessTime};
use reblock_layout::{
    diff, plan_order_requests, BoptConfig, BoptPosition, CopyBatch, CopyRequest, CopySchedule,
    DiffOptions, Geometry, Indirector, Plan, ScheduleOptions, Step, POSITIONED_WINDOW,
};
use reblock_plan::{PlacedRange, Placement, TargetSpace};

const DEVICE: &str = "hdd:wd2500aaks";
const PAGES: u64 = 4096;
const PAGE_SECTORS: u32 = 8;

/// One reconfiguration to copy: the map before it and its steps in plan order.
struct Workload {
    name: String,
    ind: Indirector,
    steps: Vec<Step>,
}

fn capacity_sectors() -> u64 {
    reblock_device::parse_spec(DEVICE)
        .unwrap()
        .array
        .capacity_sectors()
}

/// An empty BOPT of `bopt_pages` (a fifth of it write buffer) at `position` of the drive.
fn empty_bopt(bopt_pages: u32, position: BoptPosition) -> Indirector {
    let ps = u64::from(PAGE_SECTORS);
    let data_sectors = (capacity_sectors() - u64::from(bopt_pages) * ps) / ps * ps;
    let geo = Geometry::new(&BoptConfig {
        page_sectors: PAGE_SECTORS,
        data_sectors,
        bopt_pages,
        segment_pages: 256,
        write_buffer_fraction: 0.2,
        position,
        meta_sectors: 0,
    })
    .unwrap();
    Indirector::new(geo).unwrap()
}

fn synthetic() -> Workload {
    let ind = empty_bopt(16384, BoptPosition::Middle);
    let mut x: u64 = 7;
    let mut next = |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let clusters: Vec<u64> = (0..64).map(|_| next(10_000_000)).collect();
    let mut plan = Plan::new(PAGE_SECTORS, "bench");
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
    Workload {
        name: "synthetic: 16 MiB from 64 clusters into an empty 64 MiB BOPT".into(),
        ind,
        steps,
    }
}

fn load_plan(path: &str) -> Plan {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Plan::from_json(&text, path).unwrap_or_else(|e| panic!("{e}"))
}

/// The smallest BOPT (64 MiB doubled) whose read cache holds `plans`, placed before the
/// first plan's median page (where `evaluate --bopt-at auto` puts it, near the accesses).
fn bopt_for(plans: &[Plan]) -> Indirector {
    let pairs = || plans.iter().flat_map(|p| p.pairs());
    let end = pairs().map(|(_, s)| s + 1).max().unwrap_or(1);
    let mut pages: Vec<u64> = plans[0].pairs().map(|(p, _)| p).collect();
    pages.sort_unstable();
    let median = pages.get(pages.len() / 2).copied().unwrap_or(0);
    let at = BoptPosition::AtFsSector(median * u64::from(PAGE_SECTORS));
    let mut bopt_pages = 16384;
    loop {
        let ind = empty_bopt(bopt_pages, at);
        if u64::from(ind.geometry().read_cache_pages) >= end {
            return ind;
        }
        bopt_pages *= 2;
    }
}

/// `plan` re-planned against what `ind` has in place (evaluate's stable re-plan).
fn stable(plan: &Plan, ind: &Indirector) -> Plan {
    let placement = Placement {
        policy: plan.policy.clone(),
        page_sectors: plan.page_sectors,
        space: TargetSpace::ReadCache,
        ranges: plan
            .ranges
            .iter()
            .map(|r| PlacedRange {
                fs_page: r.fs_page,
                pages: r.pages,
                target: r.slot,
            })
            .collect(),
        replicas: Vec::new(),
    };
    to_layout_plan(&Layout::Bopt(ind.clone()).stable(&placement))
}

/// One `REBLOCK_COPY_PLANS` entry: `a.json` or `before.json+after.json`.
fn from_plan_files(entry: &str) -> Workload {
    let plans: Vec<Plan> = entry.split('+').map(load_plan).collect();
    let mut ind = bopt_for(&plans);
    let mut plan = plans[0].clone();
    if let Some(next) = plans.get(1) {
        for s in diff(&plan, &ind, DiffOptions::default()).unwrap().steps {
            ind.apply(&s).unwrap();
        }
        plan = stable(next, &ind);
    }
    let steps = diff(&plan, &ind, DiffOptions::default()).unwrap().steps;
    Workload {
        name: entry.to_string(),
        ind,
        steps,
    }
}

/// Busy seconds of `requests` issued at once, in their order, on a fresh drive, and
/// their split.
fn busy(requests: &[CopyRequest]) -> (f64, AccessTime) {
    let reqs: Vec<DevRequest> = requests
        .iter()
        .map(|r| DevRequest {
            sector: r.extent.start_sector,
            sectors: r.extent.sectors as u32,
            write: r.write,
        })
        .collect();
    let r = replay::copies_in_order(DEVICE, &reqs).unwrap();
    (r.summary.busy_time_s, r.access)
}

fn line(what: &str, requests: &[CopyRequest], mib: f64) -> f64 {
    let (s, a) = busy(requests);
    eprintln!(
        "  {what:<10} {:>8.4} s/MiB  (seek {:.4}, rotation {:.4}, transfer {:.4}, other {:.4}; \
         {} requests)",
        s / mib,
        a.seek_s / mib,
        a.rotation_s / mib,
        a.transfer_s / mib,
        a.other_s / mib,
        requests.len()
    );
    s / mib
}

/// Prints the workload's block.
fn report(w: &Workload, opts: ScheduleOptions) {
    let sched = CopySchedule::new(&w.steps, &w.ind, opts);
    if sched.batches.is_empty() {
        eprintln!("{}\n  nothing to copy", w.name);
        return;
    }
    let mib = (sched.pages() * u64::from(PAGE_SECTORS) * 512) as f64 / (1 << 20) as f64;
    let count = |f: fn(&CopyBatch) -> usize| sched.batches.iter().map(f).sum::<usize>();
    let read_mib: u64 = sched
        .batches
        .iter()
        .flat_map(|b| &b.reads)
        .map(|e| e.sectors)
        .sum();
    eprintln!(
        "{}\n  {mib:.1} MiB moved in {} batches: {} read extents ({:.1} MiB read, gaps \
         included), {} write extents",
        w.name,
        sched.batches.len(),
        count(|b| b.reads.len()),
        read_mib as f64 * 512.0 / (1 << 20) as f64,
        count(|b| b.writes.len()),
    );
    let sorted = line("sorted", &sched.requests(), mib);
    let mut model = replay::DevicePositioning::new(DEVICE).unwrap().unwrap();
    let scheduled = line(
        "scheduled",
        &sched.requests_positioned(&mut model, POSITIONED_WINDOW),
        mib,
    );
    let g = w.ind.geometry();
    let plan_order = line(
        "plan order",
        &plan_order_requests(&w.steps, g, opts.max_io_sectors),
        mib,
    );
    let every_move = sched.batches.iter().flat_map(|b| b.moves.clone()).collect();
    let mut model = replay::DevicePositioning::new(DEVICE).unwrap().unwrap();
    let floor = line(
        "floor",
        &CopyBatch::of_moves(every_move, &opts).requests_positioned(
            opts.max_io_sectors,
            &mut model,
            POSITIONED_WINDOW,
        ),
        mib,
    );
    eprintln!(
        "  plan order / scheduled = {:.1}x (address-ordered reads: {:.1}x); scheduled / \
         floor = {:.2}",
        plan_order / scheduled,
        plan_order / sorted,
        scheduled / floor
    );
}

fn bench(c: &mut Criterion) {
    let opts = ScheduleOptions {
        read_gap_sectors: replay::read_through_gap_sectors(DEVICE).unwrap(),
        ..ScheduleOptions::default()
    };
    eprintln!(
        "copy busy per MiB moved on {DEVICE} (same model, same plans; read-through gap {} \
         sectors)",
        opts.read_gap_sectors
    );
    let w = synthetic();
    report(&w, opts);
    for entry in std::env::var("REBLOCK_COPY_PLANS")
        .unwrap_or_default()
        .split(',')
    {
        if !entry.is_empty() {
            report(&from_plan_files(entry), opts);
        }
    }
    c.bench_function("schedule_16MiB_cpu", |b| {
        b.iter(|| CopySchedule::new(&w.steps, &w.ind, opts).batches.len())
    });
    let sched = CopySchedule::new(&w.steps, &w.ind, opts);
    c.bench_function("position_16MiB_reads_cpu", |b| {
        b.iter(|| {
            let mut model = replay::DevicePositioning::new(DEVICE).unwrap().unwrap();
            sched
                .requests_positioned(&mut model, POSITIONED_WINDOW)
                .len()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
