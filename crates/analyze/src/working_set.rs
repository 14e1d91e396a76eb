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
//! Memory: nothing per page of its own. The interval counts and two flags per page
//! (in W_1, in T_1) live next to the page's other counts in [`Pages`], so counting an
//! access costs no lookup of its own, and comparing with the first interval needs no set
//! of its pages.

use serde::Serialize;

use crate::pages::{PageKey, Pages, IN_FIRST, IN_FIRST_TOP};

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
    /// Whether the first interval (holding requests) has closed.
    first_done: bool,
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
            first_done: false,
            done: Vec::new(),
        }
    }

    /// Starts a request at `ts_ns`: moves to its interval (never backwards, so a late
    /// request counts in the current interval), closing the current one in `pages`.
    pub fn begin(&mut self, ts_ns: u64, pages: &mut Pages) {
        let origin = *self.origin_ns.get_or_insert(ts_ns);
        let index = match &self.rule {
            Interval::Duration { ns } => ts_ns.saturating_sub(origin) / (*ns).max(1),
            Interval::Requests { n } => self.seen / (*n).max(1),
            Interval::Starts { starts_ns } => starts_ns.partition_point(|&s| s <= ts_ns) as u64,
        };
        self.seen += 1;
        if index > self.index {
            self.close(pages);
            self.index = index;
        }
        self.requests += 1;
    }

    fn close(&mut self, pages: &mut Pages) {
        if self.requests == 0 {
            return;
        }
        // Every page of the interval ranked by one packed integer (see `rank`); the
        // top 20% are the ranks up to the k-th smallest.
        let mut ranks = Vec::new();
        let mut first_top_ranks = Vec::new();
        let mut first_hits = 0usize;
        pages.for_each_in_interval(|page, count, flags| {
            let r = rank(page, count);
            ranks.push(r);
            first_hits += usize::from(*flags & IN_FIRST != 0);
            if *flags & IN_FIRST_TOP != 0 {
                first_top_ranks.push(r);
            }
        });
        let n = ranks.len();
        let k = n.div_ceil(5);
        let threshold = kth_smallest(&mut ranks, k);
        let share = |hits: usize, n: usize| if n == 0 { 0.0 } else { hits as f64 / n as f64 };
        let (overlap, overlap_top20) = if self.first_done {
            let top_hits = first_top_ranks.iter().filter(|&&r| r <= threshold).count();
            (share(first_hits, n), share(top_hits, k))
        } else {
            // The first interval: remember its pages and its top 20% in their flags.
            pages.for_each_in_interval(|page, count, flags| {
                *flags |= IN_FIRST;
                if rank(page, count) <= threshold {
                    *flags |= IN_FIRST_TOP;
                }
            });
            self.first_done = true;
            (share(n, n), share(k, k))
        };
        self.done.push(IntervalSummary {
            index: self.index,
            requests: self.requests,
            pages: n as u64,
            overlap,
            overlap_top20,
        });
        pages.next_interval();
        self.requests = 0;
    }

    pub fn finish(mut self, pages: &mut Pages) -> Vec<IntervalSummary> {
        self.close(pages);
        self.done
    }
}

/// A page's rank in its interval as one integer whose plain order is the rank order:
/// more accesses first (the inverted count in the top 32 bits), ties to the lower device,
/// then the lower page. Keys are distinct, so the order is total and "rank <= the k-th
/// smallest rank" selects exactly the k pages a full sort would put first.
fn rank(page: PageKey, count: u32) -> u128 {
    u128::from(!count) << 96 | u128::from(page.device) << 64 | u128::from(page.page)
}

/// The k-th smallest of `ranks` (1-based; linear-time selection), or 0 when k == 0.
fn kth_smallest(ranks: &mut [u128], k: usize) -> u128 {
    if k == 0 {
        return 0;
    }
    *ranks.select_nth_unstable(k - 1).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::Op;

    fn k(page: u64) -> PageKey {
        PageKey { device: 0, page }
    }

    #[test]
    fn overlap_with_first_interval_by_hand() {
        // Every 2 requests. Interval 0: pages {0,1,2,3,4} with page 0 touched 3 times.
        // Interval 1: pages {0,1,9,10} with page 9 touched 3 times.
        // overlap_1 = |{0,1}| / 4 = 0.5. Top 20%: T_0 = ceil(5/5) = 1 page {0};
        // T_1 = ceil(4/5) = 1 page {9}; overlap_top20 = 0/1 = 0.
        let mut pages = Pages::default();
        let mut w = WorkingSets::new(Interval::Requests { n: 2 });
        w.begin(0, &mut pages);
        for p in [0, 1, 2, 0] {
            pages.touch(k(p), Op::Read);
        }
        w.begin(0, &mut pages);
        for p in [3, 4, 0] {
            pages.touch(k(p), Op::Read);
        }
        w.begin(0, &mut pages);
        for p in [9, 9, 0] {
            pages.touch(k(p), Op::Read);
        }
        w.begin(0, &mut pages);
        for p in [1, 10, 9] {
            pages.touch(k(p), Op::Read);
        }
        let s = w.finish(&mut pages);
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
        let mut pages = Pages::default();
        let mut w = WorkingSets::new(Interval::Duration { ns: 1_000_000_000 });
        for (ts, p) in [(0, 1), (500_000_000, 2), (3_200_000_000, 1)] {
            w.begin(ts, &mut pages);
            pages.touch(k(p), Op::Read);
        }
        let s = w.finish(&mut pages);
        let idx: Vec<u64> = s.iter().map(|i| i.index).collect();
        assert_eq!(idx, vec![0, 3]);
        assert_eq!(s[1].overlap, 1.0);
        // Starts [10, 20]: ts 5 -> interval 0, ts 10 -> 1, ts 25 -> 2.
        let mut pages = Pages::default();
        let mut w = WorkingSets::new(Interval::Starts {
            starts_ns: vec![10, 20],
        });
        for (ts, p) in [(5, 1), (10, 2), (25, 3)] {
            w.begin(ts, &mut pages);
            pages.touch(k(p), Op::Read);
        }
        let idx: Vec<u64> = w.finish(&mut pages).iter().map(|i| i.index).collect();
        assert_eq!(idx, vec![0, 1, 2]);
    }
}
