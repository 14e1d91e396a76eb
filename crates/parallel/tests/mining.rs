//! Seed 003 Figure 4: the monitoring output (a) mined with support 1 gives the analysis
//! output (b).
//!
//! Derived from the text of §IV-A/B: Figure 4(a) has three sessions, {1, 2, 3}, {1, 3, 4}
//! and {4, 5}; Figure 4(b) lists (1,2) 1, (1,3) 2, (1,4) 1, (2,3) 1, (3,4) 1, (4,5) 1.

use reblock_parallel::mining::{Pair, PairCounts};
use reblock_parallel::session::{for_each_session, Blocking, OpFilter, SessionConfig, SessionMode};
use reblock_trace::{Op, Request, Trace, NO_COMMAND};

fn p(a: u64, b: u64, count: u32) -> Pair {
    Pair { a, b, count }
}

fn figure_4b() -> Vec<Pair> {
    vec![
        p(1, 2, 1),
        p(1, 3, 2),
        p(1, 4, 1),
        p(2, 3, 1),
        p(3, 4, 1),
        p(4, 5, 1),
    ]
}

#[test]
fn figure_4_sessions_give_figure_4b_pairs() {
    let mut counts = PairCounts::new(13);
    for s in [&[1u64, 2, 3][..], &[1, 3, 4], &[4, 5]] {
        counts.add_session(s);
    }
    assert_eq!(counts.frequent(1), figure_4b());
    // Support 2 keeps only the pair seen twice.
    assert_eq!(counts.frequent(2), vec![p(1, 3, 2)]);
}

#[test]
fn window_of_one_keeps_only_neighbours_in_request_order() {
    let mut counts = PairCounts::new(1);
    for s in [&[1u64, 2, 3][..], &[1, 3, 4], &[4, 5]] {
        counts.add_session(s);
    }
    // (1,3) loses its count from session {1,2,3}, where 1 and 3 are two apart; (1,4)
    // disappears for the same reason in {1,3,4}.
    assert_eq!(
        counts.frequent(1),
        vec![p(1, 2, 1), p(1, 3, 1), p(2, 3, 1), p(3, 4, 1), p(4, 5, 1)]
    );
}

fn req(ts_ns: u64, sector: u64, sectors: u32, write: bool) -> Request {
    Request {
        ts_ns,
        pid: None,
        command: NO_COMMAND,
        device: 0,
        sector,
        sectors,
        op: if write { Op::Write } else { Op::Read },
    }
}

fn sessions_of(trace: &Trace, mode: SessionMode, ops: OpFilter) -> Vec<Vec<u64>> {
    let cfg = SessionConfig {
        blocking: Blocking {
            block_sectors: 1,
            wrap_sectors: None,
        },
        mode,
        ops,
    };
    let mut out = Vec::new();
    for_each_session(trace, 0..trace.len(), &cfg, |s| out.push(s.to_vec()));
    out
}

/// Figure 4(a) as requests: session 2 is two requests 10 us apart (blocks 1 and 3-4),
/// sessions are 1 ms apart, and a 100 us window joins what arrives together.
fn figure_4_trace() -> Trace {
    let mut t = Trace::default();
    for r in [
        req(0, 1, 3, false),
        req(1_000_000, 1, 1, false),
        req(1_010_000, 3, 2, true),
        req(2_000_000, 4, 2, false),
    ] {
        t.push(r);
    }
    t
}

#[test]
fn time_window_sessions_of_a_trace_reproduce_figure_4() {
    let t = figure_4_trace();
    let sessions = sessions_of(&t, SessionMode::WindowNs(100_000), OpFilter::Both);
    assert_eq!(sessions, vec![vec![1, 2, 3], vec![1, 3, 4], vec![4, 5]]);
    let mut counts = PairCounts::new(13);
    sessions.iter().for_each(|s| counts.add_session(s));
    assert_eq!(counts.frequent(1), figure_4b());
}

#[test]
fn request_sessions_and_op_filters() {
    let t = figure_4_trace();
    let per_request = sessions_of(&t, SessionMode::Request, OpFilter::Both);
    assert_eq!(
        per_request,
        vec![vec![1, 2, 3], vec![1], vec![3, 4], vec![4, 5]]
    );
    let reads = sessions_of(&t, SessionMode::WindowNs(100_000), OpFilter::Reads);
    assert_eq!(reads, vec![vec![1, 2, 3], vec![1], vec![4, 5]]);
    let writes = sessions_of(&t, SessionMode::WindowNs(100_000), OpFilter::Writes);
    assert_eq!(writes, vec![vec![3, 4]]);
}

#[test]
fn page_blocks_and_repeats_in_a_window_count_once() {
    // Sectors 0-15 and 8-23 in one window: 4 KiB pages 0, 1, 2; page 1 twice, once kept.
    let mut t = Trace::default();
    t.push(req(0, 0, 16, false));
    t.push(req(5, 8, 16, false));
    let cfg = SessionConfig {
        blocking: Blocking {
            block_sectors: 8,
            wrap_sectors: None,
        },
        mode: SessionMode::WindowNs(100),
        ops: OpFilter::Both,
    };
    let mut got = Vec::new();
    for_each_session(&t, 0..2, &cfg, |s| got.push(s.to_vec()));
    assert_eq!(got, vec![vec![0, 1, 2]]);
}

#[test]
fn folding_maps_blocks_past_the_capacity_back() {
    let b = Blocking {
        block_sectors: 8,
        wrap_sectors: Some(64),
    };
    // Sectors 56..72 are pages 7 and 8; page 8 starts at sector 64 = 0 mod 64.
    assert_eq!(b.blocks(56, 16).collect::<Vec<_>>(), vec![7, 0]);
}
