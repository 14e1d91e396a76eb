//! Golden tests: every statistic of the analysis on a hand-made trace, with the answers
//! worked out by hand below; and invariants plus capture-note cross-checks on the bundled
//! real trace.

use std::path::PathBuf;

use reblock_analyze::{Analyzer, Config, Interval, Level, Strategy};
use reblock_trace::{FormatChoice, ReadOptions, TraceReader};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(name)
}

fn run(path: &PathBuf, config: Config) -> reblock_analyze::Analysis {
    let opts = ReadOptions {
        format: FormatChoice::Named("native".to_string()),
        skip_bad: 0,
    };
    let mut reader = TraceReader::open(path, &opts).unwrap();
    let mut a = Analyzer::new(config);
    while let Some(r) = reader.next_request().unwrap() {
        a.observe(&r);
    }
    a.finish()
}

const MS: u64 = 1_000_000;

// tests/data/small.trace.txt, 4 KiB pages (8 sectors):
//   r1 t=0     pid10 a  sector 0   len 8  R  -> page 0
//   r2 t=1ms   pid10 a  sector 800 len 8  R  -> page 100
//   r3 t=2ms   pid10 a  sector 0   len 8  R  -> page 0
//   r4 t=3ms   pid10 a  sector 800 len 16 R  -> pages 100, 101
//   r5 t=4ms   pid10 a  sector 816 len 8  W  -> page 102
//   r6 t=500ms pid20 b  sector 0   len 16 W  -> pages 0, 1
//   r7 t=501ms pid20 b  sector 16  len 8  R  -> page 2
//   r8 t=2.6s  pid10 a  sector 0   len 8  R  -> page 0
fn small(interval: Interval) -> reblock_analyze::Analysis {
    let config = Config {
        interval,
        device_bytes: Some(1 << 20),
        ..Config::default()
    };
    run(&data("tests/data/small.trace.txt"), config)
}

#[test]
fn table1_counts_by_hand() {
    let a = small(Interval::Requests { n: 4 });
    // 8 requests; reads r1 r2 r3 r4 r7 r8 = 6, writes r5 r6 = 2.
    assert_eq!((a.requests, a.reads, a.writes), (8, 6, 2));
    // Read sectors 8+8+8+16+8+8 = 56 -> 28672 B; write sectors 8+16 = 24 -> 12288 B.
    assert_eq!((a.read_bytes, a.write_bytes), (28_672, 12_288));
    assert_eq!(a.read_fraction, Some(0.75));
    // Pages read {0,100,101,2} = 4, written {102,0,1} = 3, touched {0,1,2,100,101,102} = 6.
    assert_eq!(a.unique_read_bytes, 4 * 4096);
    assert_eq!(a.unique_write_bytes, 3 * 4096);
    assert_eq!(a.unique_bytes, 6 * 4096);
    // 24576 B of a 1 MiB device.
    assert_eq!(a.device_touched_fraction, Some(24_576.0 / 1_048_576.0));
    // Page accesses: page 0 = 4 (r1 r3 r6 r8), 100 = 2, 101, 102, 1, 2 = 1 each -> 10.
    // Top ceil(6/5) = 2 pages take 4 + 2 = 6 of 10.
    assert_eq!(a.pages.page_accesses, 10);
    assert_eq!(a.top20_access_share, Some(0.6));
    assert_eq!(a.pages.max_page_accesses, 4);
}

#[test]
fn determinism_and_sequentiality_by_hand() {
    let a = small(Interval::Requests { n: 4 });
    // Stream (10,a): r1->r2 (0,800) non-seq; r2->r3 (800,0) non-seq; r3->r4 (0,800)
    // non-seq; r4->r5 816 == 800+16 seq; r5->r8 (816,0) non-seq.
    // Stream (20,b): r6->r7 16 == 0+16 seq.
    // 6 transitions, 2 sequential -> 1/3. Non-seq 4, pair (0,800) occurs twice -> 2/4.
    let d = &a.determinism;
    assert_eq!(
        (d.streams, d.transitions, d.sequential_transitions),
        (2, 6, 2)
    );
    assert_eq!(
        (
            d.non_sequential_transitions,
            d.repeated_non_sequential_transitions
        ),
        (4, 2)
    );
    assert_eq!(d.distinct_pairs, 5);
    assert_eq!(a.sequential_fraction, Some(2.0 / 6.0));
    assert_eq!(a.partial_determinism, Some(0.5));
}

#[test]
fn request_sizes_by_hand() {
    let a = small(Interval::Requests { n: 4 });
    // Sizes: 4096 B x6, 8192 B x2. Nearest rank: p50 = 4th -> 4096; p95 = ceil(7.6) = 8th
    // -> 8192; p99 = 8th -> 8192. Mean = (6*4096 + 2*8192)/8 = 5120.
    let s = &a.request_size_bytes;
    assert_eq!((s.p50, s.p95, s.p99), (Some(4096), Some(8192), Some(8192)));
    assert_eq!(
        (s.min, s.max, s.mean),
        (Some(4096), Some(8192), Some(5120.0))
    );
    let h: Vec<(u64, u64)> = a
        .request_size_histogram
        .iter()
        .map(|b| (b.lower_bytes, b.requests))
        .collect();
    assert_eq!(h, vec![(4096, 6), (8192, 2)]);
}

#[test]
fn timing_idle_and_bursts_by_hand() {
    let a = small(Interval::Requests { n: 4 });
    let t = &a.timing;
    assert_eq!(t.duration_ns, 2600 * MS);
    // Gaps (ms): 1 1 1 1 496 1 2099. Sorted: 1 1 1 1 1 496 2099. p50 = 4th = 1 ms;
    // p95 = ceil(6.65) = 7th = 2099 ms; p99 = 7th. Mean = 2600/7 ms.
    let ia = &t.interarrival_ns;
    assert_eq!(ia.count, 7);
    assert_eq!(
        (ia.p50, ia.p95, ia.p99),
        (Some(MS), Some(2099 * MS), Some(2099 * MS))
    );
    let mean_ms = 2600.0 / 7.0;
    assert!((ia.mean.unwrap() / MS as f64 - mean_ms).abs() < 1e-9);
    // E[x^2] = (5*1 + 496^2 + 2099^2)/7 = 4651822/7 (ms^2); cv = sqrt(E[x^2]-mean^2)/mean.
    let cv = (4_651_822.0 / 7.0 - mean_ms * mean_ms).sqrt() / mean_ms;
    assert!((ia.cv.unwrap() - cv).abs() < 1e-9, "{:?} vs {cv}", ia.cv);
    assert_eq!(t.out_of_order, 0);
    // Idle gaps >= 100 ms: 496 and 2099 -> 2 periods, 2595 ms, longest 2099 ms.
    assert_eq!(
        (t.idle.count, t.idle.total_ns, t.idle.longest_ns),
        (2, 2595 * MS, 2099 * MS)
    );
    assert_eq!(t.idle.fraction_of_duration, Some(2595.0 / 2600.0));
    // 1 s windows from t=0: [0,1s) holds r1..r7 = 7, [1,2s) 0, [2,3s) r8 = 1.
    // Mean 8/3; E[c^2] = 50/3; var = 50/3 - 64/9 = 86/9; IDC = (86/9)/(8/3) = 86/24.
    let b = &t.bursts;
    assert_eq!((b.windows, b.peak_per_window), (3, 7));
    assert!((b.mean_per_window.unwrap() - 8.0 / 3.0).abs() < 1e-12);
    assert!((b.index_of_dispersion.unwrap() - 86.0 / 24.0).abs() < 1e-12);
    assert!((b.peak_to_mean.unwrap() - 7.0 * 3.0 / 8.0).abs() < 1e-12);
}

#[test]
fn working_sets_by_hand() {
    // Every 4 requests. Interval 1 (r1..r4): pages 0 (x2), 100 (x2), 101 -> W1 of 3;
    // T1 = ceil(3/5) = 1 page, tie 0/100 -> lower page 0.
    // Interval 2 (r5..r8): 102, 0 (r6 r8: x2), 1, 2 -> W2 = {0,1,2,102}: overlap 1/4.
    // T2 = {0} -> top-20% overlap 1/1.
    let a = small(Interval::Requests { n: 4 });
    assert_eq!(a.working_set_overlap, vec![1.0, 0.25]);
    assert_eq!(a.working_set_overlap_top20, vec![1.0, 1.0]);
    let pages: Vec<u64> = a.intervals.iter().map(|i| i.pages).collect();
    assert_eq!(pages, vec![3, 4]);
    // 1 s intervals: r1..r7 in interval 0, r8 in interval 2 (interval 1 is empty and not
    // listed); r8's page 0 was in interval 0 -> overlap 1.
    let a = small(Interval::Duration { ns: 1000 * MS });
    let idx: Vec<u64> = a.intervals.iter().map(|i| i.index).collect();
    assert_eq!(idx, vec![0, 2]);
    assert_eq!(a.working_set_overlap, vec![1.0, 1.0]);
}

#[test]
fn rank_frequency_and_heat_map_by_hand() {
    let a = small(Interval::Requests { n: 4 });
    let rf = &a.pages.rank_frequency;
    // All: 4,2,1,1,1,1. Reads: page 0 x3, 100 x2, 101, 2. Writes: 0, 102, 1 once each.
    assert_eq!(rf.all, vec![(1, 4), (2, 2), (3, 1), (4, 1), (5, 1), (6, 1)]);
    assert_eq!(rf.reads, vec![(1, 3), (2, 2), (3, 1), (4, 1)]);
    assert_eq!(rf.writes, vec![(1, 1), (2, 1), (3, 1)]);
    // 1 MiB device = 256 pages over 32x32 cells -> 1 page per cell. Busiest cell M = 4:
    // bounds 4^(k/6); c=4 -> 6; c=2 -> 6*ln2/ln4 = 3 -> 3; c=1 -> 1.
    let h = &a.heat_map;
    assert_eq!(
        (h.span_pages, h.span_is_device_size, h.pages_per_cell),
        (256, true, 1)
    );
    assert_eq!(&h.counts[..3], &[4, 1, 1]);
    assert_eq!((h.counts[100], h.counts[101], h.counts[102]), (2, 1, 1));
    assert_eq!(&h.levels[..4], &[6, 1, 1, 0]);
    assert_eq!((h.levels[100], h.levels[101]), (3, 1));
    assert_eq!(h.counts.iter().sum::<u64>(), 10);
}

#[test]
fn advice_by_hand() {
    // TL 0.25 low, IDC 3.58 high, seq 0.33 low, PD 0.5 high, top20 0.6 high: all five
    // cells of the BORG row match (score 5); reads 0.75 high with shifting working sets
    // adds the seed 001 §4.2.5 caution.
    let a = small(Interval::Requests { n: 4 });
    assert_eq!(a.advice.strategy, Strategy::DynamicBorg);
    assert_eq!(a.advice.scores[0], (Strategy::DynamicBorg, 5));
    let levels: Vec<Level> = a.advice.attributes.iter().map(|x| x.level).collect();
    use Level::{High, Low};
    assert_eq!(levels, vec![Low, High, Low, High, High, High]);
    assert!(a
        .advice
        .reasons
        .iter()
        .any(|r| r.starts_with("partial_determinism = 0.500")));
    assert!(a.advice.reasons.iter().any(|r| r.contains("caution")));
}

#[test]
fn empty_trace_is_all_zero_and_unknown() {
    let a = run(
        &data("tests/data/comment_only.trace.txt"),
        Config::default(),
    );
    assert_eq!((a.requests, a.unique_bytes), (0, 0));
    assert_eq!(a.top20_access_share, None);
    assert_eq!(a.partial_determinism, None);
    assert!(a.intervals.is_empty());
    assert_eq!(
        a.advice.reasons,
        vec!["the trace holds no requests".to_string()]
    );
}

#[test]
fn bundled_real_trace_invariants_and_capture_notes() {
    let trace = data("../../data/dev_kernel.trace.txt.zst");
    let meta = reblock_analyze::sidecar::find(&trace)
        .unwrap()
        .expect("sidecar");
    let config = Config {
        device_bytes: meta.device_bytes,
        interval: Interval::Starts {
            starts_ns: meta.day_starts_ns[1..].to_vec(),
        },
        ..Config::default()
    };
    let a = run(&trace, config);
    // Cross-check against the capture notes (computed by a different program).
    assert_eq!((a.requests, a.reads, a.writes), (97_129, 94_773, 2_356));
    assert_eq!(a.read_bytes, 1_831_888 * 512);
    assert_eq!(a.write_bytes, 206_624 * 512);
    // The unique bytes are sector-exact: the capture notes' distinct sectors, exactly.
    assert_eq!(a.unique_bytes, 903_104 * 512);
    assert_eq!(a.unique_read_bytes, 873_064 * 512);
    assert_eq!(a.unique_write_bytes, 97_952 * 512);
    assert_eq!(a.sector_exact.unique_bytes, a.unique_bytes);
    assert_eq!(a.total_bytes, a.read_bytes + a.write_bytes);
    // Page-rounded unique bytes cover at least the sector-exact ones.
    let p = &a.page_rounded;
    assert_eq!(p.unique_bytes, a.pages.unique_pages * 4096);
    assert!(p.unique_bytes >= a.unique_bytes);
    assert!(p.unique_read_bytes >= a.unique_read_bytes);
    assert!(p.unique_write_bytes >= a.unique_write_bytes);
    // Invariants.
    assert_eq!(a.contradictions(), vec![]);
    // Unique never exceeds total: each distinct page is at least one page access.
    assert_eq!(p.total_bytes, a.pages.page_accesses * 4096);
    assert!(p.unique_bytes <= p.total_bytes);
    assert!(a.unique_bytes <= a.total_bytes);
    assert!(a.pages.unique_read_pages + a.pages.unique_write_pages >= a.pages.unique_pages);
    assert!(a.unique_bytes <= a.unique_read_bytes + a.unique_write_bytes);
    assert!(a.unique_bytes >= a.unique_read_bytes.max(a.unique_write_bytes));
    for share in [
        a.top20_access_share,
        a.partial_determinism,
        a.sequential_fraction,
        a.device_touched_fraction,
    ] {
        let s = share.expect("known");
        assert!((0.0..=1.0).contains(&s), "{s}");
    }
    assert!(a.top20_access_share.unwrap() >= 0.2);
    // Five days, one interval each.
    assert_eq!(a.intervals.len(), 5);
    assert_eq!(a.working_set_overlap.len(), a.intervals.len());
    assert_eq!(a.working_set_overlap_top20.len(), a.intervals.len());
    assert_eq!(a.working_set_overlap[0], 1.0);
    assert_eq!(
        a.intervals.iter().map(|i| i.requests).sum::<u64>(),
        a.requests
    );
    assert_eq!(a.heat_map.counts.iter().sum::<u64>(), a.pages.page_accesses);
    assert!(a.heat_map.span_is_device_size);
}

/// A page read 70,000 times and written 3 times in one interval: past the 16 bits a page's
/// counts hold in the table and the 14 bits of its interval count, so the totals come
/// from the spill map (the unit tests shrink those limits; this runs the real ones).
#[test]
fn a_page_counted_past_sixteen_bits() {
    let mut a = Analyzer::new(Config {
        interval: Interval::Requests { n: 1_000_000 },
        ..Config::default()
    });
    let req = |sector, op| reblock_trace::Request {
        ts_ns: 0,
        pid: None,
        command: 0,
        device: 0,
        sector,
        sectors: 8,
        op,
    };
    for _ in 0..70_000 {
        a.observe(&req(0, reblock_trace::Op::Read));
    }
    for _ in 0..3 {
        a.observe(&req(0, reblock_trace::Op::Write));
    }
    // Five more pages read once each: the top 20% is ceil(6/5) = 2 pages, page 0 and
    // (the tie at 1 access going to the lower page) page 1.
    for p in 1..=5 {
        a.observe(&req(p * 8, reblock_trace::Op::Read));
    }
    let a = a.finish();
    assert_eq!(a.pages.max_page_accesses, 70_003);
    assert_eq!(a.pages.page_accesses, 70_008);
    assert_eq!(a.pages.rank_frequency.reads[0], (1, 70_000));
    assert_eq!(a.pages.rank_frequency.writes, vec![(1, 3)]);
    assert_eq!(a.top20_access_share, Some(70_004.0 / 70_008.0));
    assert_eq!(a.intervals[0].pages, 6);
    // Six pages span the map (no device size given): a page per cell.
    assert_eq!(&a.heat_map.counts[..7], &[70_003, 1, 1, 1, 1, 1, 0]);
}
