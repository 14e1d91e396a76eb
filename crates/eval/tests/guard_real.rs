//! The degradation guard on write-heavy real-trace excerpts (tests/data/README.md): with
//! the guard, no policy's normal-phase busy time may exceed vanilla's by more than 2%.
//!
//! Regression: the guard used to cover reads only. Guarded epochs still sent writes of
//! mapped pages to the BOPT, unguarded ones kept absorbing writes whose dirty pages later
//! split reads and writes between home and the BOPT, and only the permuted layout's plans
//! were tried before being installed; on these traces every BOPT policy was 10-30% slower
//! than vanilla with the guard on.

use std::path::Path;

use reblock_eval::{evaluate_point, DataArea, EvalConfig};
use reblock_trace::{ReadOptions, Request, TraceReader};

fn requests(name: &str) -> Vec<Request> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    TraceReader::open(&path, &ReadOptions::default())
        .and_then(|r| r.collect::<Result<Vec<_>, _>>())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Normal busy time of each policy relative to vanilla's (the auditor's defaults on a
/// Cheetah 15K.5: 64 MiB BOPT, 4 reconfigurations, speed 168).
fn relative(reqs: &[Request], data_area: DataArea, guard: bool) -> Vec<(String, f64)> {
    let cfg = EvalConfig {
        device: "hdd:cheetah15k5".into(),
        data_area,
        guard,
        ..EvalConfig::default()
    };
    let (res, _) = evaluate_point(reqs, &cfg, "test", &mut |_, _, _| {}).unwrap();
    let v = res["vanilla"].normal_busy_time_s;
    assert!(v > 0.0);
    res.iter()
        .map(|(name, r)| (name.clone(), r.normal_busy_time_s / v))
        .collect()
}

fn check(name: &str, data_area: DataArea) {
    let reqs = requests(name);
    assert!(reqs.iter().filter(|r| r.op.is_write()).count() * 3 > reqs.len());
    // The excerpt must be one where the layouts hurt, else the bound says nothing. With the
    // Cheetah's own queue and write segments (the DiskSim package's), the worst unguarded
    // policy on web_0 loses 6.9% (it lost over 10% on the queue-less model): still well
    // past the guarded bound below.
    let worst = relative(&reqs, data_area, false)
        .into_iter()
        .map(|(_, r)| r)
        .fold(0.0, f64::max);
    assert!(
        worst > 1.05,
        "{name}: without the guard the worst is only {worst}"
    );
    for (policy, rel) in relative(&reqs, data_area, true) {
        assert!(
            // The bound. (With the drive queue serving cached writes first, dlr-seq
            // on web_0 came to 1.020; the queue now orders by mechanical positioning, as
            // DiskSim's does.)
            rel <= 1.02,
            "{name}: {policy} at {rel:.3} of vanilla with the guard"
        );
    }
}

#[test]
fn guard_bounds_every_policy_on_write_heavy_financial1() {
    check("financial1.first4000.ascii", DataArea::Trace);
}

#[test]
fn guard_bounds_every_policy_on_unaligned_web_0() {
    check("web_0.first3000.csv", DataArea::Device);
}
