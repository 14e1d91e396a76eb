//! A naive analyzer for differential tests: the page counts, partial determinism, working
//! sets and heat map computed straight from the definitions in the module docs
//! ([`crate::pages`], [`crate::determinism`], [`crate::working_set`], [`crate::heat`]),
//! with ordered maps and full sorts, none of the fast paths. The property test in
//! `lib.rs` checks the real analyzer against it on random traces.

use std::collections::{BTreeMap, BTreeSet};

use reblock_trace::{Op, Request};

use crate::determinism::DeterminismSummary;
use crate::heat::{level, HeatMap, COLUMNS, ROWS};
use crate::pages::{page_range, sample_ranks, top20_share, PageSummary, RankFrequency};
use crate::working_set::{Interval, IntervalSummary};
use crate::Config;

pub(crate) struct Expected {
    pub pages: PageSummary,
    /// Distinct sectors (read, written, either), from merged sector ranges.
    pub unique_sectors: (u64, u64, u64),
    pub determinism: DeterminismSummary,
    pub intervals: Vec<IntervalSummary>,
    pub heat_map: HeatMap,
}

type Page = (u32, u64);

pub(crate) fn analyze(config: &Config, reqs: &[Request]) -> Expected {
    Expected {
        pages: pages(config, reqs),
        unique_sectors: unique_sectors(reqs),
        determinism: determinism(reqs),
        intervals: intervals(config, reqs),
        heat_map: heat_map(config, reqs),
    }
}

/// (reads, writes) per touched page over the whole trace.
fn page_counts(config: &Config, reqs: &[Request]) -> BTreeMap<Page, (u64, u64)> {
    let mut m: BTreeMap<Page, (u64, u64)> = BTreeMap::new();
    for r in reqs.iter().filter(|r| r.sectors > 0) {
        for p in page_range(r, config.page_bytes) {
            let e = m.entry((r.device, p)).or_default();
            match r.op {
                Op::Read => e.0 += 1,
                Op::Write => e.1 += 1,
            }
        }
    }
    m
}

/// Sectors covered by the union of `ranges` (device, start, end).
fn union_len(mut ranges: Vec<(u32, u64, u64)>) -> u64 {
    ranges.sort_unstable();
    let mut total = 0;
    let mut open: Option<(u32, u64, u64)> = None;
    for (d, s, e) in ranges {
        match &mut open {
            Some((od, _, oe)) if *od == d && s <= *oe => *oe = (*oe).max(e),
            _ => {
                if let Some((_, os, oe)) = open {
                    total += oe - os;
                }
                open = Some((d, s, e));
            }
        }
    }
    total + open.map_or(0, |(_, s, e)| e - s)
}

fn unique_sectors(reqs: &[Request]) -> (u64, u64, u64) {
    let range = |r: &Request| (r.device, r.sector, r.end_sector());
    let of = |op: Op| reqs.iter().filter(|r| r.op == op).map(range).collect();
    (
        union_len(of(Op::Read)),
        union_len(of(Op::Write)),
        union_len(reqs.iter().map(range).collect()),
    )
}

fn desc(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}

fn pages(config: &Config, reqs: &[Request]) -> PageSummary {
    let m = page_counts(config, reqs);
    let all = desc(m.values().map(|&(r, w)| r + w).collect());
    let reads = desc(m.values().map(|c| c.0).filter(|&c| c > 0).collect());
    let writes = desc(m.values().map(|c| c.1).filter(|&c| c > 0).collect());
    PageSummary {
        unique_pages: all.len() as u64,
        unique_read_pages: reads.len() as u64,
        unique_write_pages: writes.len() as u64,
        page_accesses: all.iter().sum(),
        top20_access_share: top20_share(&all),
        max_page_accesses: all.first().copied().unwrap_or(0),
        rank_frequency: RankFrequency {
            all: sample_ranks(&all),
            reads: sample_ranks(&reads),
            writes: sample_ranks(&writes),
        },
    }
}

fn determinism(reqs: &[Request]) -> DeterminismSummary {
    // Stream key: (device, pid, command, has_pid); no pid -> one stream per device.
    let mut last: BTreeMap<(u32, u32, u32, bool), (u64, u64)> = BTreeMap::new();
    // Pair (device, from, to) -> (all, non-sequential).
    let mut pairs: BTreeMap<(u32, u64, u64), (u64, u64)> = BTreeMap::new();
    let (mut transitions, mut sequential) = (0u64, 0u64);
    for r in reqs {
        let key = match r.pid {
            Some(pid) => (r.device, pid, r.command, true),
            None => (r.device, 0, 0, false),
        };
        if let Some((from, end)) = last.insert(key, (r.sector, r.end_sector())) {
            transitions += 1;
            let seq = r.sector == end;
            sequential += u64::from(seq);
            let e = pairs.entry((r.device, from, r.sector)).or_default();
            e.0 += 1;
            e.1 += u64::from(!seq);
        }
    }
    let non_sequential = transitions - sequential;
    let repeated: u64 = pairs.values().filter(|c| c.0 >= 2).map(|c| c.1).sum();
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    DeterminismSummary {
        streams: last.len() as u64,
        transitions,
        sequential_transitions: sequential,
        non_sequential_transitions: non_sequential,
        repeated_non_sequential_transitions: repeated,
        distinct_pairs: pairs.len() as u64,
        sequential_fraction: ratio(sequential, transitions),
        partial_determinism: ratio(repeated, non_sequential),
    }
}

/// The interval each request falls in (never backwards).
fn interval_of(config: &Config, reqs: &[Request]) -> Vec<u64> {
    let origin = reqs.first().map_or(0, |r| r.ts_ns);
    let mut current = 0u64;
    reqs.iter()
        .enumerate()
        .map(|(i, r)| {
            let idx = match &config.interval {
                Interval::Duration { ns } => r.ts_ns.saturating_sub(origin) / ns,
                Interval::Requests { n } => i as u64 / n,
                Interval::Starts { starts_ns } => {
                    starts_ns.iter().filter(|&&s| s <= r.ts_ns).count() as u64
                }
            };
            current = current.max(idx);
            current
        })
        .collect()
}

/// The top 20% of a working set: ceil(n/5) pages by count descending, then lower device,
/// then lower page.
fn top20(counts: &BTreeMap<Page, u64>) -> BTreeSet<Page> {
    let mut v: Vec<(u64, Page)> = counts.iter().map(|(&p, &c)| (c, p)).collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let k = v.len().div_ceil(5);
    v[..k].iter().map(|&(_, p)| p).collect()
}

fn intervals(config: &Config, reqs: &[Request]) -> Vec<IntervalSummary> {
    let idx = interval_of(config, reqs);
    let mut groups: BTreeMap<u64, (u64, BTreeMap<Page, u64>)> = BTreeMap::new();
    for (r, &i) in reqs.iter().zip(&idx) {
        let g = groups.entry(i).or_default();
        g.0 += 1;
        if r.sectors > 0 {
            for p in page_range(r, config.page_bytes) {
                *g.1.entry((r.device, p)).or_default() += 1;
            }
        }
    }
    let mut first: Option<(BTreeSet<Page>, BTreeSet<Page>)> = None;
    let share = |hits: usize, n: usize| if n == 0 { 0.0 } else { hits as f64 / n as f64 };
    let mut out = Vec::new();
    for (index, (requests, counts)) in groups {
        let w: BTreeSet<Page> = counts.keys().copied().collect();
        let t = top20(&counts);
        let (w1, t1) = first.get_or_insert_with(|| (w.clone(), t.clone()));
        out.push(IntervalSummary {
            index,
            requests,
            pages: w.len() as u64,
            overlap: share(w.intersection(w1).count(), w.len()),
            overlap_top20: share(t.intersection(t1).count(), t.len()),
        });
    }
    out
}

fn heat_map(config: &Config, reqs: &[Request]) -> HeatMap {
    let m = page_counts(config, reqs);
    let mut per_device: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for (&(d, p), &(r, w)) in &m {
        let e = per_device.entry(d).or_default();
        e.0 += r + w;
        e.1 = e.1.max(p + 1);
    }
    // The busiest device; ties to the lower device number.
    let (device, highest) = per_device
        .iter()
        .fold(
            None,
            |best: Option<(u32, u64, u64)>, (&d, &(acc, hi))| match best {
                Some((_, b, _)) if b >= acc => best,
                _ => Some((d, acc, hi)),
            },
        )
        .map_or((0, 0), |(d, _, hi)| (d, hi));
    let device_pages = config.device_bytes.map(|b| b.div_ceil(config.page_bytes));
    let span_is_device_size = device_pages.is_some_and(|d| d >= highest);
    let span_pages = if span_is_device_size {
        device_pages.unwrap_or(highest)
    } else {
        highest
    };
    let cells = COLUMNS * ROWS;
    let pages_per_cell = span_pages.div_ceil(cells).max(1);
    let mut counts = vec![0u64; cells as usize];
    for (&(d, p), &(r, w)) in &m {
        if d == device {
            counts[(p / pages_per_cell).min(cells - 1) as usize] += r + w;
        }
    }
    let max = counts.iter().copied().max().unwrap_or(0);
    HeatMap {
        device,
        columns: COLUMNS,
        rows: ROWS,
        span_pages,
        span_is_device_size,
        pages_per_cell,
        levels: counts.iter().map(|&c| level(c, max)).collect(),
        counts,
        level_bounds: (1..=6).map(|k| (max as f64).powf(k as f64 / 6.0)).collect(),
    }
}
