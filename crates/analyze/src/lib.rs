//! Workload characterization: the statistics of seed 000 §2 (Table 1, Figure 1), partial
//! determinism, working-set overlap, request sizes and timing, and the layout advice of
//! seed 001 Table 4.1.
//!
//! One pass, request by request: [`Analyzer::observe`] takes each [`Request`] as it is
//! read and [`Analyzer::finish`] returns the [`Analysis`]. Memory grows with the distinct
//! pages touched (and the distinct non-sequential transition pairs, see [`determinism`]),
//! never with the number of requests. Per request the analyzer allocates nothing beyond
//! hash-map growth.

pub mod advice;
pub mod chart;
pub mod determinism;
pub mod figures;
mod groups;
pub mod heat;
pub mod invariants;
mod keys;
pub mod pages;
pub mod report;
pub mod sectors;
pub mod sidecar;
pub mod stats;
pub mod timing;
pub mod units;
pub mod working_set;

use reblock_trace::{OrderStats, Request, TimeOrder, SECTOR_BYTES};
use serde::Serialize;

pub use advice::{Advice, Level, Strategy};
pub use working_set::{Interval, IntervalSummary};

/// What to measure and at which granularity.
#[derive(Clone, Debug)]
pub struct Config {
    /// Page size the statistics count in (4 KiB, seed 000 §2.1).
    pub page_bytes: u64,
    /// Working-set intervals (seed 000 Figure 1 uses days).
    pub interval: Interval,
    /// Size of the traced device, when known; the fraction touched needs it.
    pub device_bytes: Option<u64>,
    /// Gaps between arrivals of at least this long are idle periods.
    pub idle_threshold_ns: u64,
    /// Window over which burstiness counts arrivals.
    pub burst_window_ns: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            page_bytes: 4096,
            interval: Interval::Duration {
                ns: 86_400_000_000_000,
            },
            device_bytes: None,
            idle_threshold_ns: 100_000_000,
            burst_window_ns: 1_000_000_000,
        }
    }
}

pub struct Analyzer {
    config: Config,
    page_size: pages::PageSize,
    counters: stats::Counters,
    sizes_bytes: stats::Distribution,
    timing: timing::Timing,
    pages: pages::Pages,
    partial: sectors::PartialSectors,
    determinism: determinism::Determinism,
    working_sets: working_set::WorkingSets,
    figures: figures::Figures,
}

/// Total and unique bytes by direction, all at one granularity (see [`Analysis`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ByteTotals {
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// read_bytes + write_bytes.
    pub total_bytes: u64,
    pub unique_read_bytes: u64,
    pub unique_write_bytes: u64,
    /// Read or written.
    pub unique_bytes: u64,
}

/// Everything the analysis found; serialized as `reblock analyze --json`.
///
/// Totals and unique bytes come at two granularities, each consistent in itself (unique
/// never exceeds total): `sector_exact` counts the 512-byte sectors requests name, and
/// `page_rounded` counts whole pages, every page a request touches (seed 000 Table 1
/// counts 4 KiB pages). The top-level byte fields are the sector-exact ones.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub page_bytes: u64,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// Bytes requested by reads (sector-exact).
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// read_bytes + write_bytes.
    pub total_bytes: u64,
    /// Share of requests that are reads (None for an empty trace).
    pub read_fraction: Option<f64>,
    /// Distinct sectors read × 512 (seed 000 Table 1 "Reads Unique", sector-exact; the
    /// page-rounded figure is `page_rounded.unique_read_bytes`).
    pub unique_read_bytes: u64,
    pub unique_write_bytes: u64,
    /// Distinct sectors read or written × 512.
    pub unique_bytes: u64,
    pub sector_exact: ByteTotals,
    pub page_rounded: ByteTotals,
    pub device_bytes: Option<u64>,
    /// unique_bytes / device_bytes; None when the device size is unknown.
    pub device_touched_fraction: Option<f64>,
    pub top20_access_share: Option<f64>,
    pub partial_determinism: Option<f64>,
    pub sequential_fraction: Option<f64>,
    pub pages: pages::PageSummary,
    pub determinism: determinism::DeterminismSummary,
    pub request_size_bytes: stats::Summary,
    pub request_size_histogram: Vec<stats::SizeBucket>,
    pub timing: timing::TimingSummary,
    pub interval: String,
    pub intervals: Vec<IntervalSummary>,
    /// overlap of each listed interval's working set with the first's (see [`working_set`]).
    pub working_set_overlap: Vec<f64>,
    pub working_set_overlap_top20: Vec<f64>,
    pub heat_map: heat::HeatMap,
    pub advice: Advice,
    /// What the report's CDFs, scatter, timeline and command table draw.
    pub figures: figures::FigureData,
}

/// The traced device's size in bytes: `flag` (a `--device-size` given by the user), else
/// the `device_sectors` of the trace's .meta.json, else the `reblock.device_sectors` of a
/// Parquet trace's footer (docs/parquet.md), else unknown.
pub fn device_bytes(
    flag: Option<u64>,
    meta: Option<&sidecar::Sidecar>,
    reader: &reblock_trace::TraceReader,
) -> Option<u64> {
    let footer = || {
        reader
            .parquet_meta()
            .and_then(|m| m.device_sectors)
            .map(|s| s.saturating_mul(SECTOR_BYTES))
    };
    flag.or(meta.and_then(|m| m.device_bytes)).or_else(footer)
}

/// Streams every request of `reader` through a new analyzer: the one pass `reblock
/// analyze` and the Python package make. `progress` hears the request count every 64 Ki
/// requests (updating a bar costs more than analyzing a request).
pub fn analyze_trace(
    reader: &mut reblock_trace::TraceReader,
    config: Config,
    mut progress: impl FnMut(u64),
) -> Result<Analysis, reblock_trace::TraceError> {
    let mut analyzer = Analyzer::new(config);
    while let Some(req) = reader.next_request()? {
        analyzer.observe(&req);
        if analyzer.requests().is_multiple_of(65_536) {
            progress(analyzer.requests());
        }
    }
    let mut analysis = analyzer.finish();
    analysis.record_time_order(reader.time_order(), reader.order_stats());
    let commands = reader.commands();
    analysis.figures.name_commands(|id| {
        if (id as usize) < commands.len() {
            commands.name(id)
        } else {
            ""
        }
    });
    Ok(analysis)
}

impl Analyzer {
    pub fn new(config: Config) -> Self {
        Self::with_min_batch(config, reblock_tally::MIN_BATCH)
    }

    /// An analyzer whose sorted counters gather `min_batch` keys before sorting (tests use
    /// tiny batches so that merging is exercised on short traces).
    fn with_min_batch(config: Config, min_batch: usize) -> Self {
        assert!(
            config.page_bytes > 0 && config.page_bytes.is_multiple_of(SECTOR_BYTES),
            "the page size must be a positive multiple of 512 bytes"
        );
        Analyzer {
            page_size: pages::PageSize::new(config.page_bytes),
            timing: timing::Timing::new(config.idle_threshold_ns, config.burst_window_ns),
            working_sets: working_set::WorkingSets::new(config.interval.clone()),
            config,
            counters: Default::default(),
            sizes_bytes: Default::default(),
            pages: Default::default(),
            partial: Default::default(),
            determinism: determinism::Determinism::with_min_batch(min_batch),
            figures: figures::Figures::new(),
        }
    }

    pub fn requests(&self) -> u64 {
        self.counters.requests
    }

    /// Heap bytes the analysis holds: bounded by the distinct pages and the distinct
    /// transition pairs seen, whatever the number of requests (exact partial determinism
    /// needs every pair seen once remembered, to know whether it comes again).
    pub fn heap_bytes(&self) -> usize {
        self.pages.heap_bytes() + self.partial.heap_bytes() + self.determinism.heap_bytes()
    }

    pub fn observe(&mut self, req: &Request) {
        self.counters.observe(req);
        self.sizes_bytes.observe(req.bytes());
        self.timing.observe(req.ts_ns);
        self.determinism.observe(req);
        self.figures.observe(req);
        self.working_sets.begin(req.ts_ns, &mut self.pages);
        if req.sectors == 0 {
            return;
        }
        let pages = self.page_size.range(req);
        let partial = self.page_size.partial_ends(req);
        if partial.first || partial.last {
            self.add_partial(req, &pages, partial);
        }
        self.counters.observe_pages(req.op, pages.end - pages.start);
        self.pages.touch_run(req.device, pages, req.op, partial);
    }

    /// Keeps the sectors `req` names in the pages it covers only in part (its first and
    /// last), for the sector-exact unique counts.
    #[cold]
    fn add_partial(&mut self, req: &Request, pages: &std::ops::Range<u64>, p: pages::PartialEnds) {
        let per_page = self.page_size.sectors();
        let (start, end) = (req.sector, req.end_sector());
        let first_end = end.min((pages.start + 1).saturating_mul(per_page));
        if p.first {
            self.partial.add(req.device, start..first_end, req.op);
        }
        if p.last && !(p.first && first_end == end) {
            let last_start = start.max((pages.end - 1).saturating_mul(per_page));
            self.partial.add(req.device, last_start..end, req.op);
        }
    }

    pub fn finish(mut self) -> Analysis {
        let page_bytes = self.config.page_bytes;
        let intervals = self.working_sets.finish(&mut self.pages);
        let device_pages = self.config.device_bytes.map(|b| b.div_ceil(page_bytes));
        // One scan of the pages makes both the summary and the heat map.
        let mut heat = heat::HeatBuilder::new(self.pages.device_totals(), device_pages);
        let pages = self.pages.summary_with(|k, s| heat.add(k, s.accesses()));
        let det = self.determinism.summary();
        let timing = self.timing.finish();
        let c = &self.counters;
        let exact = self.partial.unique(&self.pages, self.page_size.sectors());
        let sector_exact = ByteTotals {
            read_bytes: c.read_bytes,
            write_bytes: c.write_bytes,
            total_bytes: c.read_bytes + c.write_bytes,
            unique_read_bytes: exact.read * SECTOR_BYTES,
            unique_write_bytes: exact.write * SECTOR_BYTES,
            unique_bytes: exact.any * SECTOR_BYTES,
        };
        let page_rounded = ByteTotals {
            read_bytes: c.read_pages * page_bytes,
            write_bytes: c.write_pages * page_bytes,
            total_bytes: (c.read_pages + c.write_pages) * page_bytes,
            unique_read_bytes: pages.unique_read_pages * page_bytes,
            unique_write_bytes: pages.unique_write_pages * page_bytes,
            unique_bytes: pages.unique_pages * page_bytes,
        };
        let unique_bytes = sector_exact.unique_bytes;
        let read_fraction = (c.requests > 0).then(|| c.reads as f64 / c.requests as f64);
        let measures = advice::Measures {
            requests: c.requests,
            temporal_locality: temporal_locality(&intervals),
            index_of_dispersion: timing.bursts.index_of_dispersion,
            sequential_fraction: det.sequential_fraction,
            partial_determinism: det.partial_determinism,
            top20_access_share: pages.top20_access_share,
            read_fraction,
        };
        let analysis = Analysis {
            page_bytes,
            requests: c.requests,
            reads: c.reads,
            writes: c.writes,
            read_bytes: c.read_bytes,
            write_bytes: c.write_bytes,
            total_bytes: sector_exact.total_bytes,
            read_fraction,
            unique_read_bytes: sector_exact.unique_read_bytes,
            unique_write_bytes: sector_exact.unique_write_bytes,
            unique_bytes,
            sector_exact,
            page_rounded,
            device_bytes: self.config.device_bytes,
            device_touched_fraction: self
                .config
                .device_bytes
                .map(|d| unique_bytes as f64 / d as f64),
            top20_access_share: pages.top20_access_share,
            partial_determinism: det.partial_determinism,
            sequential_fraction: det.sequential_fraction,
            heat_map: heat.finish(),
            pages,
            determinism: det,
            request_size_bytes: self.sizes_bytes.summary(),
            request_size_histogram: stats::size_histogram(&self.sizes_bytes),
            timing,
            interval: self.config.interval.describe(),
            working_set_overlap: intervals.iter().map(|i| i.overlap).collect(),
            working_set_overlap_top20: intervals.iter().map(|i| i.overlap_top20).collect(),
            intervals,
            advice: advice::advise(&measures),
            figures: self.figures.finish(),
        };
        debug_assert_eq!(
            analysis.contradictions(),
            vec![],
            "the analysis contradicts itself"
        );
        analysis
    }
}

impl Analysis {
    /// Notes how the trace reader restored time order ([`analyze_trace`] calls this once
    /// the trace is read): the requests it moved count as out of order.
    pub fn record_time_order(&mut self, order: TimeOrder, stats: OrderStats) {
        let t = &mut self.timing;
        t.reordered = stats.moved;
        t.out_of_order += stats.moved;
        t.max_lateness_ns = t.max_lateness_ns.max(stats.max_behind_ns);
        (t.reorder_window_ns, t.sorted) = match order {
            TimeOrder::Window { ns } => (Some(ns), false),
            TimeOrder::Sort => (None, true),
        };
    }
}

/// Mean overlap of intervals 2..n with interval 1; None with fewer than two intervals.
pub fn temporal_locality(intervals: &[IntervalSummary]) -> Option<f64> {
    let later = intervals.get(1..)?;
    if later.is_empty() {
        return None;
    }
    Some(later.iter().map(|i| i.overlap).sum::<f64>() / later.len() as f64)
}

/// Analyzes a whole stream of requests with one configuration.
pub fn analyze<'a>(config: Config, requests: impl IntoIterator<Item = &'a Request>) -> Analysis {
    let mut a = Analyzer::new(config);
    for r in requests {
        a.observe(r);
    }
    a.finish()
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::{reference, Analyzer, Config, Interval};
    use proptest::prelude::*;
    use reblock_trace::{Op, Request};

    /// A sector: mostly from a small range so pairs and pages repeat, sometimes huge so
    /// the wide key layouts and the hash-map fallback are exercised.
    fn sector() -> impl Strategy<Value = u64> {
        prop_oneof![
            8 => 0u64..200,
            1 => (1u64 << 40)..(1u64 << 40) + 64,
            1 => (1u64 << 57)..(1u64 << 57) + 64,
            1 => Just(u64::MAX - 4096),
        ]
    }

    fn request() -> impl Strategy<Value = (u64, Request)> {
        (
            0u64..3_000,
            prop_oneof![Just(None), (1u32..4).prop_map(Some)],
            0u32..3,
            prop_oneof![4 => Just(0u32), 1 => Just(7u32), 1 => Just(u32::MAX)],
            sector(),
            1u32..40,
            any::<bool>(),
        )
            .prop_map(|(gap, pid, command, device, sector, sectors, w)| {
                let req = Request {
                    ts_ns: 0,
                    pid,
                    command,
                    device,
                    sector,
                    sectors,
                    op: if w { Op::Write } else { Op::Read },
                };
                (gap, req)
            })
    }

    fn interval() -> impl Strategy<Value = Interval> {
        prop_oneof![
            (1u64..40).prop_map(|n| Interval::Requests { n }),
            (1u64..20_000).prop_map(|ns| Interval::Duration { ns }),
            proptest::collection::vec(0u64..200_000, 0..5).prop_map(|mut s| {
                s.sort_unstable();
                Interval::Starts { starts_ns: s }
            }),
        ]
    }

    fn trace() -> impl Strategy<Value = Vec<Request>> {
        proptest::collection::vec(request(), 0..300).prop_map(|v| {
            // Timestamps mostly ascend; a gap over 2900 steps back instead, so late
            // requests are exercised too.
            let mut ts = 1_000_000u64;
            v.into_iter()
                .map(|(gap, mut r)| {
                    ts = if gap > 2_900 { ts - 50 } else { ts + gap * 10 };
                    r.ts_ns = ts;
                    r
                })
                .collect()
        })
    }

    /// Adversarial requests: tiny and unaligned, at the very end of the addressable
    /// sectors, with timestamps that jump far back and forth or sit at u64::MAX.
    fn adversarial() -> impl Strategy<Value = Vec<Request>> {
        let sector = prop_oneof![
            0u64..64,
            (reblock_trace::MAX_END_SECTOR - 300)..reblock_trace::MAX_END_SECTOR,
        ];
        let ts = prop_oneof![0u64..100, Just(u64::MAX), any::<u64>()];
        let req = (ts, sector, 1u32..300, any::<bool>(), 0u32..2);
        proptest::collection::vec(req, 0..120).prop_map(|v| {
            v.into_iter()
                .map(|(ts_ns, sector, n, w, device)| Request {
                    ts_ns,
                    pid: Some(device),
                    command: 0,
                    device,
                    sector,
                    sectors: n
                        .min((reblock_trace::MAX_END_SECTOR - sector) as u32)
                        .max(1),
                    op: if w { Op::Write } else { Op::Read },
                })
                .filter(|r| r.check().is_ok())
                .collect()
        })
    }

    proptest! {
        /// The analysis never contradicts itself, on random and adversarial traces alike
        /// (unique <= total per direction at both granularities, idle <= duration,
        /// fractions in [0, 1], counts that add up), and its sector-exact unique bytes are
        /// those of the merged sector ranges.
        #[test]
        fn statistics_agree_with_each_other(
            reqs in prop_oneof![trace(), adversarial()],
            page_bytes in prop_oneof![Just(4096u64), Just(512), Just(1536), Just(65536), Just(1 << 20)],
            idle_threshold_ns in prop_oneof![Just(0u64), 1u64..1000, Just(100_000_000)],
        ) {
            let reqs: Vec<Request> = reqs.into_iter().filter(|r| r.check().is_ok()).collect();
            let config = Config { page_bytes, idle_threshold_ns, ..Config::default() };
            let got = super::analyze(config, &reqs);
            prop_assert_eq!(got.contradictions(), vec![]);
            let (r, w, any) = reference::analyze(&Config::default(), &reqs).unique_sectors;
            prop_assert_eq!(got.unique_bytes, any * 512);
            prop_assert_eq!((got.unique_read_bytes, got.unique_write_bytes), (r * 512, w * 512));
            prop_assert!(got.timing.idle.total_ns <= got.timing.duration_ns);
        }
    }

    /// Regression: a request 0.5 s earlier than the one before it was counted twice in
    /// the idle time (once going back, once coming forward), which came to 125% of the
    /// trace's duration. Gaps now run from the latest arrival.
    #[test]
    fn time_going_back_never_makes_idle_exceed_the_duration() {
        let at = |ts_ns| Request {
            ts_ns,
            pid: Some(1),
            command: 0,
            device: 0,
            sector: 0,
            sectors: 8,
            op: Op::Read,
        };
        let s = 1_000_000_000;
        let reqs = [at(0), at(s), at(s / 2), at(2 * s)];
        let a = super::analyze(Config::default(), &reqs);
        let t = &a.timing;
        assert_eq!(
            (t.duration_ns, t.idle.total_ns, t.out_of_order),
            (2 * s, 2 * s, 1)
        );
        assert_eq!(t.idle.fraction_of_duration, Some(1.0));
    }

    /// Regression: unique bytes were counted in pages and totals in sectors, so a trace
    /// of 512-byte requests showed 8 times more unique bytes than it moved.
    #[test]
    fn unique_and_total_bytes_share_a_granularity() {
        let reqs: Vec<Request> = (0..4)
            .map(|i| Request {
                ts_ns: i,
                pid: None,
                command: 0,
                device: 0,
                sector: i * 64 + 3,
                sectors: 1,
                op: if i == 0 { Op::Write } else { Op::Read },
            })
            .collect();
        let a = super::analyze(Config::default(), &reqs);
        assert_eq!((a.read_bytes, a.unique_read_bytes), (1536, 1536));
        assert_eq!((a.write_bytes, a.unique_write_bytes), (512, 512));
        assert_eq!((a.total_bytes, a.unique_bytes), (2048, 2048));
        let p = &a.page_rounded;
        assert_eq!(
            (p.total_bytes, p.unique_bytes, p.unique_read_bytes),
            (16384, 16384, 12288)
        );
    }

    /// A loop over the same 1,000 pages in the same order: ten times the requests hold
    /// no more memory once every page and transition has been seen.
    #[test]
    fn memory_does_not_grow_with_requests() {
        let held = |loops: u64| {
            let mut a = Analyzer::with_min_batch(Config::default(), 4096);
            for i in 0..loops * 1000 {
                let page = i % 1000 * 3;
                a.observe(&Request {
                    ts_ns: i * 1000,
                    pid: Some(7),
                    command: 1,
                    device: 0,
                    sector: page * 8,
                    sectors: 8,
                    op: if i % 5 == 0 { Op::Write } else { Op::Read },
                });
            }
            a.heap_bytes()
        };
        let (ten, hundred) = (held(10), held(100));
        assert!(
            hundred <= ten,
            "{ten} B after 10 loops, {hundred} B after 100"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn matches_the_reference(
            reqs in trace(),
            interval in interval(),
            page_bytes in prop_oneof![Just(4096u64), Just(512), Just(1536), Just(65536)],
            device_bytes in prop_oneof![Just(None), Just(Some(1u64 << 20))],
            min_batch in prop_oneof![Just(1usize), 2usize..64, Just(reblock_tally::MIN_BATCH)],
        ) {
            // Requests ending past u64::MAX sectors are not requests a reader hands out.
            let reqs: Vec<Request> = reqs
                .into_iter()
                .filter(|r| r.sector.checked_add(u64::from(r.sectors)).is_some())
                .collect();
            let config = Config { page_bytes, interval, device_bytes, ..Config::default() };
            let mut a = Analyzer::with_min_batch(config.clone(), min_batch);
            for r in &reqs {
                a.observe(r);
            }
            let got = a.finish();
            let want = reference::analyze(&config, &reqs);
            prop_assert_eq!(&got.pages, &want.pages);
            let (r, w, any) = want.unique_sectors;
            let exact = (got.unique_read_bytes, got.unique_write_bytes, got.unique_bytes);
            prop_assert_eq!(exact, (r * 512, w * 512, any * 512));
            prop_assert_eq!(got.contradictions(), vec![]);
            prop_assert_eq!(&got.determinism, &want.determinism);
            prop_assert_eq!(&got.intervals, &want.intervals);
            prop_assert_eq!(&got.heat_map, &want.heat_map);
        }
    }
}
