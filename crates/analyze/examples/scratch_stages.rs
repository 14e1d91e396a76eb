#[path = "../benches/common/mod.rs"]
mod common;
use reblock_analyze::*;
use reblock_trace::{ReadOptions, Request, TraceReader};
use std::time::Instant;
fn main() {
    let arg = std::env::args().nth(1).unwrap();
    let reqs: Vec<Request> = match arg.parse::<usize>() {
        Ok(n) => common::synthetic(n),
        Err(_) => {
            let mut r = TraceReader::open(&arg, &ReadOptions::default()).unwrap();
            let mut v = vec![];
            while let Some(q) = r.next_request().unwrap() {
                v.push(q);
            }
            v
        }
    };
    let n = reqs.len() as f64;
    let mut t = Instant::now();
    let mut lap = |name: &str| {
        eprintln!(
            "{name:>12}: {:6.1} ns/req",
            t.elapsed().as_secs_f64() * 1e9 / n
        );
        t = Instant::now();
    };
    {
        let mut p = pages::Pages::default();
        for r in &reqs {
            p.touch_run(r.device, pages::page_range(r, 4096), r.op);
        }
        std::hint::black_box(p.interval_len());
    }
    lap("touch only");
    let mut p = pages::Pages::default();
    let mut w = working_set::WorkingSets::new(Interval::Requests { n: 100_000 });
    for r in &reqs {
        w.begin(r.ts_ns, &mut p);
        p.touch_run(r.device, pages::page_range(r, 4096), r.op);
    }
    lap("touch+ws");
    let iv = w.finish(&mut p);
    lap("last close");
    let s = p.summary();
    lap("summary");
    let h = heat::heat_map(&p, None);
    lap("heat");
    std::hint::black_box((iv, s, h));
    let mut d = determinism::Determinism::default();
    for r in &reqs {
        d.observe(r);
    }
    lap("det observe");
    std::hint::black_box(d.summary());
    lap("det summary");
}
