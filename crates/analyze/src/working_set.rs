//! Per-interval working sets and their overlap with the first interval (seed 000 §2.2 and
//! Figure 1, bottom row: "the on-disk working-set ... the set of all unique blocks
//! accessed in a given interval", compared day by day with day 1).
//!
//! Definitions: W_i is the set of pages touched in interval i; T_i its top 20%: the
//! ceil(|W_i| / 5) pages with the most accesses in interval i (ties broken by lower
//! device, then lower page number). overlap_i = |W_i ∩ W_1| / |W_i| (the share of
//! interval i's working set already used in interval 1) and overlap_top20_i =
//! |T_i ∩ T_1| / |T_i|. Only intervals holding requests are listed, so a long gap costs
//! nothing; each keeps its index.
//!
//! Memory: the current interval's page counts and the first interval's two sets.
//!
//! Speed: the counts are a dense list, and each page remembers its position in it (a
//! [`Slot`]) alongside its other per-page data, so counting an access costs no hash
//! lookup of its own. A slot is valid when it points inside the list at an entry for the
//! same page; clearing the list at an interval's end therefore invalidates every slot at
//! once.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::pages::PageKey;

/// How the trace is cut into intervals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Interval {
    /// Fixed durations from the first request's timestamp.
    Duration { ns: u64 },
    /// Every N requests.
    Requests { n: u64 },
    /// Explicit start times (ns, ascending): interval k starts at `starts[k - 1]`;
    /// interval 0 holds everything before `starts[0]`.
    Starts { starts_ns: Vec<u64> },
}

impl Interval {
    pub fn describe(&self) -> String {
        match self {
            Interval::Duration { ns } => format!("every {}", crate::units::format_ns(*ns)),
            Interval::Requests { n } => format!("every {n} requests"),
            Interval::Starts { starts_ns } => {
                format!("{} intervals from given start times", starts_ns.len() + 1)
            }
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct IntervalSummary {
    /// Interval number (0-based) under the interval rule; gaps have no entry.
    pub index: u64,
    pub requests: u64,
    /// |W_i| in pages.
    pub pages: u64,
    pub overlap: f64,
    pub overlap_top20: f64,
}

pub struct WorkingSets {
    rule: Interval,
    origin_ns: Option<u64>,
    seen: u64,
    index: u64,
    requests: u64,
    /// Pages touched in the current interval with their access counts.
    counts: Vec<(PageKey, u32)>,
    /// Slots of pages touched through [`WorkingSets::touch`] (callers without their own).
    slots: FxHashMap<PageKey, Slot>,
    first: Option<(FxHashSet<PageKey>, FxHashSet<PageKey>)>,
    done: Vec<IntervalSummary>,
}

impl WorkingSets {
    pub fn new(rule: Interval) -> Self {
        WorkingSets {
            rule,
            origin_ns: None,
            seen: 0,
            index: 0,
            requests: 0,
            counts: Vec::new(),
            slots: FxHashMap::default(),
            first: None,
            done: Vec::new(),
        }
    }

    /// Starts a request at `ts_ns`: moves to its interval (never backwards, so a late
    /// request counts in the current interval).
    pub fn begin(&mut self, ts_ns: u64) {
        let origin = *self.origin_ns.get_or_insert(ts_ns);
        let index = match &self.rule {
            Interval::Duration { ns } => ts_ns.saturating_sub(origin) / (*ns).max(1),
            Interval::Requests { n } => self.seen / (*n).max(1),
            Interval::Starts { starts_ns } => starts_ns.partition_point(|&s| s <= ts_ns) as u64,
        };
        self.seen += 1;
        if index > self.index {
            self.close();
            self.index = index;
        }
        self.requests += 1;
    }

    pub fn touch(&mut self, key: PageKey) {
        let slot = self.slots.entry(key).or_default();
        touch_slot(&mut self.counts, key, slot);
    }

    /// Counts an access to `key`, whose slot the caller keeps (see the module doc).
    pub fn touch_slot(&mut self, key: PageKey, slot: &mut Slot) {
        touch_slot(&mut self.counts, key, slot);
    }

    fn close(&mut self) {
        if self.requests == 0 {
            return;
        }
        let top = top20(&self.counts);
        let pages = self.counts.len();
        // Only the first interval's sets are kept; later ones are measured against them
        // straight from the counts, without building a set per interval.
        let share = |hits: usize, n: usize| if n == 0 { 0.0 } else { hits as f64 / n as f64 };
        let Some((first_all, first_top)) = &self.first else {
            let all: FxHashSet<PageKey> = self.counts.iter().map(|e| e.0).collect();
            let (overlap, overlap_top20) = (share(pages, pages), share(top.len(), top.len()));
            self.first = Some((all, top.into_iter().collect()));
            self.push_summary(pages, overlap, overlap_top20);
            return;
        };
        let all_hits = self
            .counts
            .iter()
            .filter(|e| first_all.contains(&e.0))
            .count();
        let top_hits = top.iter().filter(|k| first_top.contains(k)).count();
        let (overlap, overlap_top20) = (share(all_hits, pages), share(top_hits, top.len()));
        self.push_summary(pages, overlap, overlap_top20);
    }

    fn push_summary(&mut self, pages: usize, overlap: f64, overlap_top20: f64) {
        self.done.push(IntervalSummary {
            index: self.index,
            requests: self.requests,
            pages: pages as u64,
            overlap,
            overlap_top20,
        });
        self.counts.clear();
        self.requests = 0;
    }

    pub fn finish(mut self) -> Vec<IntervalSummary> {
        self.close();
        self.done
    }
}

/// Where a page's count sits in the current interval's list (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(u32);

impl Default for Slot {
    fn default() -> Self {
        Slot(u32::MAX)
    }
}

fn touch_slot(counts: &mut Vec<(PageKey, u32)>, key: PageKey, slot: &mut Slot) {
    if let Some(e) = counts.get_mut(slot.0 as usize) {
        if e.0 == key {
            e.1 = e.1.saturating_add(1);
            return;
        }
    }
    // More than u32::MAX - 1 pages in one interval (16 TiB of 4 KiB pages) would need a
    // wider slot; this one then stays invalid, and the page would be listed again.
    slot.0 = u32::try_from(counts.len()).unwrap_or(u32::MAX);
    counts.push((key, 1));
}

/// The ceil(n / 5) most-accessed pages (ties: lower key first). Keys are distinct, so
/// the order is total and selecting the first k (linear time) picks exactly the pages a
/// full sort would.
///
/// Each entry is packed into one u128 whose plain order is the rank order: the inverted
/// count in the top 32 bits, then the device, then the page, so selection compares single
/// integers instead of running a three-field comparator.
fn top20(counts: &[(PageKey, u32)]) -> Vec<PageKey> {
    let mut v: Vec<u128> = counts
        .iter()
        .map(|&(k, c)| u128::from(!c) << 96 | u128::from(k.device) << 64 | u128::from(k.page))
        .collect();
    let k = v.len().div_ceil(5);
    if k < v.len() {
        v.select_nth_unstable(k);
        v.truncate(k);
    }
    v.into_iter()
        .map(|x| PageKey {
            device: (x >> 64) as u32,
            page: x as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(page: u64) -> PageKey {
        PageKey { device: 0, page }
    }

    #[test]
    fn overlap_with_first_interval_by_hand() {
        // Every 2 requests. Interval 0: pages {0,1,2,3,4} with page 0 touched 3 times.
        // Interval 1: pages {0,1,9,10} with page 9 touched 3 times.
        // overlap_1 = |{0,1}| / 4 = 0.5. Top 20%: T_0 = ceil(5/5) = 1 page {0};
        // T_1 = ceil(4/5) = 1 page {9}; overlap_top20 = 0/1 = 0.
        let mut w = WorkingSets::new(Interval::Requests { n: 2 });
        w.begin(0);
        for p in [0, 1, 2, 0] {
            w.touch(k(p));
        }
        w.begin(0);
        for p in [3, 4, 0] {
            w.touch(k(p));
        }
        w.begin(0);
        for p in [9, 9, 0] {
            w.touch(k(p));
        }
        w.begin(0);
        for p in [1, 10, 9] {
            w.touch(k(p));
        }
        let s = w.finish();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].pages, s[0].overlap, s[0].overlap_top20),
            (5, 1.0, 1.0)
        );
        assert_eq!((s[1].index, s[1].pages), (1, 4));
        assert_eq!((s[1].overlap, s[1].overlap_top20), (0.5, 0.0));
    }

    #[test]
    fn time_intervals_skip_empty_ones_and_start_lists_work() {
        // 1 s intervals: requests at 0 s, 0.5 s, 3.2 s -> intervals 0 and 3 only.
        let mut w = WorkingSets::new(Interval::Duration { ns: 1_000_000_000 });
        for (ts, p) in [(0, 1), (500_000_000, 2), (3_200_000_000, 1)] {
            w.begin(ts);
            w.touch(k(p));
        }
        let s = w.finish();
        let idx: Vec<u64> = s.iter().map(|i| i.index).collect();
        assert_eq!(idx, vec![0, 3]);
        assert_eq!(s[1].overlap, 1.0);
        // Starts [10, 20]: ts 5 -> interval 0, ts 10 -> 1, ts 25 -> 2.
        let mut w = WorkingSets::new(Interval::Starts {
            starts_ns: vec![10, 20],
        });
        for (ts, p) in [(5, 1), (10, 2), (25, 3)] {
            w.begin(ts);
            w.touch(k(p));
        }
        let idx: Vec<u64> = w.finish().iter().map(|i| i.index).collect();
        assert_eq!(idx, vec![0, 1, 2]);
    }
}
