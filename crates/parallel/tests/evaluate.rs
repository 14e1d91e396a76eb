//! End to end on a hand-made workload: requests of 4 KiB (8 blocks of 512 B) on an
//! array of 4 SSDs, placed with alpha = 1 (skewed towards disk 0). The optimizer must
//! spread each request's blocks and beat the static placement on the testing half.

use reblock_parallel::evaluate::{evaluate_array, ArrayEvalConfig, ArraySpec, Policy};
use reblock_parallel::session::SessionMode;
use reblock_trace::{Op, Request, Trace, NO_COMMAND};

fn workload() -> Trace {
    let mut t = Trace::default();
    // 32 hot 4 KiB extents read round after round, 200 us apart.
    for i in 0..4000u64 {
        t.push(Request {
            ts_ns: i * 200_000,
            pid: None,
            command: NO_COMMAND,
            device: 0,
            sector: (i % 32) * 64,
            sectors: 8,
            op: if i % 4 == 3 { Op::Write } else { Op::Read },
        });
    }
    t
}

#[test]
fn optimized_placement_beats_skewed_static_placement() {
    let cfg = ArrayEvalConfig {
        array: ArraySpec::parse("4xssd:k9xxg08uxm").unwrap(),
        alphas: vec![0.0, 1.0],
        supports: vec![1, 1000],
        policies: vec![Policy::Static, Policy::Parallel, Policy::ParallelHdd],
        session: SessionMode::Request,
        ..ArrayEvalConfig::default()
    };
    let mut steps = Vec::new();
    let out = evaluate_array(&workload(), "synthetic", &cfg, |p| steps.push(p)).unwrap();
    assert_eq!(steps.last().map(|p| (p.done, p.total)), Some((10, 10)));
    assert_eq!(out.train_requests, 2000);
    assert_eq!(out.runs.len(), 4);
    let skewed = &out.runs[2];
    assert_eq!((skewed.alpha, skewed.support), (1.0, 1));
    let (s, p) = (&skewed.policies["static"], &skewed.policies["parallel"]);
    assert!(
        p.mean_response_ms < s.mean_response_ms,
        "parallel {} ms vs static {} ms",
        p.mean_response_ms,
        s.mean_response_ms
    );
    // 32 extents x 8 blocks = 256 blocks, each pair inside an extent seen 2000/32 times.
    let plan = p.plan.unwrap();
    assert_eq!(plan.vertices, 256);
    assert!(plan.colouring.conflicts_after < plan.colouring.conflicts_before);
    assert!(p.bytes_moved > 0 && p.bytes_moved <= 256 * 512);
    // Support above every count: no pairs, nothing moves, same figures as static.
    let none = &out.runs[3].policies["parallel"];
    assert_eq!(none.bytes_moved, 0);
    assert_eq!(none.mean_response_ms, s.mean_response_ms);
}

#[test]
fn bad_settings_name_their_flag() {
    let t = workload();
    let mut cfg = ArrayEvalConfig {
        train_fraction: 1.5,
        ..ArrayEvalConfig::default()
    };
    let e = evaluate_array(&t, "x", &cfg, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("--train-fraction"), "{e}");
    cfg.train_fraction = 0.5;
    cfg.supports = vec![0];
    let e = evaluate_array(&t, "x", &cfg, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("--support"), "{e}");
    let e = ArraySpec::parse("ssd:zero").unwrap_err().to_string();
    assert!(e.contains("--array"), "{e}");
    assert!(Policy::parse("fastest").is_err());
}

/// `hdd:N` is seed 003's Cheetah array with writes that wait for the media, and its
/// explicit-placement spec builds.
#[test]
fn hdd_array_shorthand_is_write_through_cheetahs() {
    let a = ArraySpec::parse("hdd:100").unwrap();
    assert_eq!(a.disks, 100);
    assert_eq!(a.member, "hdd:cheetah15k5:write-cache=off");
    let built = reblock_device::parse_spec(&a.device_spec(1)).unwrap();
    assert_eq!(built.members.len(), 100);
}
