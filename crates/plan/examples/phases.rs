//! Time each phase of planning on the bench workload, interleaved with the bench's
//! baseline so that a shared, noisy machine slows both alike; prints the best of each
//! phase and its ratio to the best baseline.
//!
//! `cargo run --release -p reblock-plan --example phases [requests] [rounds]`

#[path = "../benches/workload/mod.rs"]
mod workload;

use reblock_plan::{by_name, GraphOptions, MasterGraph, PlanParams, ProcessGraphs};
use reblock_trace::Request;
use rustc_hash::FxHashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn baseline(requests: &[Request]) -> usize {
    let mut counts: FxHashMap<u64, u32> = FxHashMap::default();
    for r in requests {
        *counts.entry(r.sector / 8).or_insert(0) += 1;
    }
    counts.len()
}

fn timed<T>(best: &mut Duration, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = black_box(f());
    *best = (*best).min(t.elapsed());
    out
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap());
    let len = args.next().unwrap_or(1_000_000);
    let rounds = args.next().unwrap_or(7);
    let requests = workload::workload(len);
    let params = PlanParams {
        read_cache_pages: Some(1 << 18),
        ..PlanParams::default()
    };
    let borg = by_name("borg").unwrap();
    let mut best = [Duration::MAX; 4];
    for _ in 0..rounds {
        timed(&mut best[0], || baseline(&requests));
        let pg = timed(&mut best[1], || {
            ProcessGraphs::build(requests.iter().copied(), GraphOptions::default())
        });
        let g = timed(&mut best[2], || MasterGraph::from_processes(&pg));
        timed(&mut best[3], || borg.plan(&g, &params).pages());
    }
    let base = best[0].as_secs_f64();
    for (name, d) in ["baseline", "process graphs", "master merge", "borg"]
        .iter()
        .zip(best)
    {
        let s = d.as_secs_f64();
        println!(
            "{name:>15}: {:8.2} ms  {:6.2} M req/s  {:6.2} x baseline",
            s * 1e3,
            len as f64 / s / 1e6,
            s / base
        );
    }
    let total: f64 = best[1..].iter().map(|d| d.as_secs_f64()).sum();
    println!(
        "{:>15}: {:8.2} ms  {:6.2} M req/s  {:6.2} x baseline",
        "build + borg",
        total * 1e3,
        len as f64 / total / 1e6,
        total / base
    );
}
