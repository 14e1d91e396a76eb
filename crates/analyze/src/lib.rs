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
mod keys;
pub mod pages;
pub mod report;
pub mod sidecar;
pub mod stats;
pub mod timing;
pub mod units;
pub mod working_set;

use reblock_trace::Request;
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
    determinism: determinism::Determinism,
    working_sets: working_set::WorkingSets,
    figures: figures::Figures,
}

/// Everything the analysis found; serialized as `reblock analyze --json`.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub page_bytes: u64,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Share of requests that are reads (None for an empty trace).
    pub read_fraction: Option<f64>,
    /// Distinct pages read × page size (seed 000 Table 1 "Reads Unique").
    pub unique_read_bytes: u64,
    pub unique_write_bytes: u64,
    /// Distinct pages touched × page size.
    pub unique_bytes: u64,
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

impl Analyzer {
    pub fn new(config: Config) -> Self {
        Self::with_min_batch(config, reblock_tally::MIN_BATCH)
    }

    /// An analyzer whose sorted counters gather `min_batch` keys before sorting (tests use
    /// tiny batches so that merging is exercised on short traces).
    fn with_min_batch(config: Config, min_batch: usize) -> Self {
        assert!(config.page_bytes > 0, "page size must be positive");
        Analyzer {
            page_size: pages::PageSize::new(config.page_bytes),
            timing: timing::Timing::new(config.idle_threshold_ns, config.burst_window_ns),
            working_sets: working_set::WorkingSets::new(config.interval.clone()),
            config,
            counters: Default::default(),
            sizes_bytes: Default::default(),
            pages: Default::default(),
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
        self.pages.heap_bytes() + self.determinism.heap_bytes()
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
        self.pages
            .touch_run(req.device, self.page_size.range(req), req.op);
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
        let unique_bytes = pages.unique_pages * page_bytes;
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
        Analysis {
            page_bytes,
            requests: c.requests,
            reads: c.reads,
            writes: c.writes,
            read_bytes: c.read_bytes,
            write_bytes: c.write_bytes,
            read_fraction,
            unique_read_bytes: pages.unique_read_pages * page_bytes,
            unique_write_bytes: pages.unique_write_pages * page_bytes,
            unique_bytes,
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
        }
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
            prop_assert_eq!(&got.determinism, &want.determinism);
            prop_assert_eq!(&got.intervals, &want.intervals);
            prop_assert_eq!(&got.heat_map, &want.heat_map);
        }
    }
}
