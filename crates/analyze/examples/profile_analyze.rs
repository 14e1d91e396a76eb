//! Runs the analyzer once over the benchmark's synthetic trace, for instruction-count
//! profiling (`valgrind --tool=callgrind`), where repeated timing runs would be noise.
//!
//! Usage: `profile_analyze [requests]` (default 200000).

#[path = "../benches/common/mod.rs"]
mod common;

use reblock_analyze::{Analyzer, Config, Interval};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let reqs = common::synthetic(n);
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
