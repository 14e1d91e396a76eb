//! Times each stage of one analysis in a fresh process (page faults included, as a
//! `reblock analyze` run pays them), for deciding where to optimize: the page counts
//! alone, with working-set intervals, the final summary and heat map, and the transition
//! pairs. The criterion benchmark measures whole runs in a warm process instead.
//!
//! Usage: `stages [requests | TRACE-FILE]` (default 1000000 synthetic requests; the
//! trace is read into memory first, so reading is not timed).

#[path = "../benches/common/mod.rs"]
mod common;

use std::time::Instant;

use reblock_analyze::{determinism, heat, pages, working_set, Interval};
use reblock_trace::{ReadOptions, Request, TraceReader};

fn main() {
    let arg = std::env::args().nth(1);
    let reqs: Vec<Request> = match arg.as_deref().map(|a| (a, a.parse::<usize>())) {
        None => common::synthetic(1_000_000),
        Some((_, Ok(n))) => common::synthetic(n),
        Some((path, Err(_))) => {
            let r =
                TraceReader::open(path, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
            r.map(|q| q.unwrap_or_else(|e| panic!("{e}"))).collect()
        }
    };
    let n = reqs.len() as f64;
    let mut t = Instant::now();
    let mut lap = |name: &str| {
        let ns = t.elapsed().as_secs_f64() * 1e9 / n;
        println!("{name:>24}: {ns:6.1} ns/request");
        t = Instant::now();
    };
    let mut p = pages::Pages::default();
    for r in &reqs {
        p.touch_run(
            r.device,
            pages::page_range(r, 4096),
            r.op,
            Default::default(),
        );
    }
    std::hint::black_box(p.interval_len());
    lap("pages, no intervals");
    let mut p = pages::Pages::default();
    let mut w = working_set::WorkingSets::new(Interval::Requests { n: 100_000 });
    for r in &reqs {
        w.begin(r.ts_ns, &mut p);
        p.touch_run(
            r.device,
            pages::page_range(r, 4096),
            r.op,
            Default::default(),
        );
    }
    let intervals = w.finish(&mut p);
    lap("pages, 100k-req intervals");
    let summary = p.summary();
    lap("page summary");
    let heat = heat::heat_map(&p, None);
    lap("heat map");
    let mut d = determinism::Determinism::default();
    for r in &reqs {
        d.observe(r);
    }
    lap("pairs, observe");
    let det = d.summary();
    lap("pairs, summary");
    std::hint::black_box((intervals, summary, heat, det));
    let (groups, slots) = p.groups();
    println!(
        "{} pages in {groups} groups, {slots} slots, {} MiB",
        p.len(),
        p.heap_bytes() >> 20
    );
}
