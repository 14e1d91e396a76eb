//! Runs the analyzer once, for profiling (`perf record`, `valgrind --tool=callgrind`),
//! where repeated timing runs would be noise: over the benchmark's synthetic trace, or
//! over a trace file read into memory first (so the profile holds the analysis alone).
//!
//! Usage: `profile_analyze [requests | TRACE-FILE [repeat]]` (default 200000 synthetic
//! requests; a file is analyzed `repeat` times, default 10).

#[path = "../benches/common/mod.rs"]
mod common;

use std::time::Instant;

use reblock_analyze::{Analyzer, Config, Interval};
use reblock_trace::{ReadOptions, TraceReader};

fn main() {
    let arg = std::env::args().nth(1);
    let (reqs, repeat) = match arg.as_deref().map(|a| (a, a.parse::<usize>())) {
        Some((_, Ok(n))) => (common::synthetic(n), 1),
        Some((path, Err(_))) => {
            let mut r =
                TraceReader::open(path, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
            let mut v = Vec::new();
            while let Some(q) = r.next_request().unwrap_or_else(|e| panic!("{e}")) {
                v.push(q);
            }
            let repeat = std::env::args()
                .nth(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or(10);
            (v, repeat)
        }
        None => (common::synthetic(200_000), 1),
    };
    let start = Instant::now();
    for _ in 0..repeat {
        let mut a = Analyzer::new(Config {
            interval: Interval::Requests { n: 20_000 },
            ..Config::default()
        });
        for r in &reqs {
            a.observe(r);
        }
        let out = a.finish();
        println!(
            "{} requests, {} pages, {} pairs, pd {:?}",
            out.requests,
            out.pages.unique_pages,
            out.determinism.distinct_pairs,
            out.partial_determinism
        );
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "analysis alone: {:.2} M requests/s",
        (reqs.len() * repeat) as f64 / secs / 1e6
    );
}
