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
//! Memory: next to nothing per page of its own. The interval counts and two flags per
//! page (in W_1, in T_1) live next to the page's other counts in [`Pages`], so counting an
//! access costs no lookup of its own, and comparing with the first interval needs no set
//! of its pages. Closing an interval takes one pass over its pages, which histograms
//! their counts: T_i is every page above the ceil(|W_i| / 5)-th largest count c plus
//! enough of the pages at c, so only when the pages at c are not all in does a second
//! pass gather those to pick the lowest (device, page) among them.

use serde::Serialize;

use crate::pages::{CountHistogram, PageKey, Pages, IN_FIRST, IN_FIRST_TOP};

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
    /// Where the next interval starts (a timestamp, or a request count for
    /// [`Interval::Requests`]): requests before it need no division or search to find
    /// their interval.
    next: u64,
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
            next: 0,
            requests: 0,
            first_done: false,
            done: Vec::new(),
        }
    }

    /// Starts a request at `ts_ns`: moves to its interval (never backwards, so a late
    /// request counts in the current interval), closing the current one in `pages`.
    pub fn begin(&mut self, ts_ns: u64, pages: &mut Pages) {
        let origin = *self.origin_ns.get_or_insert(ts_ns);
        let at = match self.rule {
            Interval::Requests { .. } => self.seen,
            _ => ts_ns,
        };
        self.seen += 1;
        if at >= self.next {
            let index = match &self.rule {
                Interval::Duration { ns } => ts_ns.saturating_sub(origin) / (*ns).max(1),
                Interval::Requests { n } => at / (*n).max(1),
                Interval::Starts { starts_ns } => starts_ns.partition_point(|&s| s <= ts_ns) as u64,
            };
            // (Not greater only where the next start saturated at u64::MAX.)
            if index > self.index {
                self.close(pages);
                self.index = index;
            }
            self.next = self.next_start(origin);
        }
        self.requests += 1;
    }

    /// Where interval `self.index + 1` starts (u64::MAX if past the end of time).
    fn next_start(&self, origin: u64) -> u64 {
        let next = self.index + 1;
        match &self.rule {
            Interval::Duration { ns } => next
                .checked_mul((*ns).max(1))
                .and_then(|t| t.checked_add(origin))
                .unwrap_or(u64::MAX),
            Interval::Requests { n } => next.saturating_mul((*n).max(1)),
            Interval::Starts { starts_ns } => starts_ns
                .get(self.index as usize)
                .copied()
                .unwrap_or(u64::MAX),
        }
    }

    fn close(&mut self, pages: &mut Pages) {
        if self.requests == 0 {
            return;
        }
        // One pass: how many pages have each count, how many were in W_1, and the pages
        // of T_1 seen again with their counts.
        let mut counts = CountHistogram::default();
        let (mut n, mut first_hits) = (0u64, 0u64);
        let mut from_first_top: Vec<(u32, PageKey)> = Vec::new();
        pages.for_each_in_interval(|page, count, flags| {
            n += 1;
            counts.add(u64::from(count));
            first_hits += u64::from(*flags & IN_FIRST != 0);
            if *flags & IN_FIRST_TOP != 0 {
                from_first_top.push((count, page));
            }
        });
        let k = n.div_ceil(5);
        let top = Top::select(pages, &counts, k);
        let share = |hits: u64, n: u64| if n == 0 { 0.0 } else { hits as f64 / n as f64 };
        let (overlap, overlap_top20) = if self.first_done {
            let top_hits = from_first_top
                .iter()
                .filter(|&&(c, p)| top.holds(c, p))
                .count() as u64;
            (share(first_hits, n), share(top_hits, k))
        } else {
            // The first interval: remember its pages and its top 20% in their flags.
            pages.for_each_in_interval(|page, count, flags| {
                *flags |= IN_FIRST;
                if top.holds(count, page) {
                    *flags |= IN_FIRST_TOP;
                }
            });
            self.first_done = true;
            (share(n, n), share(k, k))
        };
        self.done.push(IntervalSummary {
            index: self.index,
            requests: self.requests,
            pages: n,
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

/// An interval's top 20% (see the module doc): every page with more than `count`
/// accesses, and of the pages with exactly `count`, those up to `last_tie` in (device,
/// page) order (all of them when None).
struct Top {
    /// None when the interval has no pages.
    count: Option<u32>,
    last_tie: Option<PageKey>,
}

impl Top {
    /// The top `k` of the interval's pages, whose counts `counts` holds. The k-th largest
    /// count comes from the histogram; only when the pages at that count are not all in
    /// does a second pass gather them to pick the lowest (device, page) among them.
    fn select(pages: &mut Pages, counts: &CountHistogram, k: u64) -> Top {
        let mut above = 0;
        for (count, n) in counts.descending() {
            if above + n < k {
                above += n;
                continue;
            }
            let count = count as u32;
            let wanted = k - above;
            if wanted == n {
                return Top {
                    count: Some(count),
                    last_tie: None,
                };
            }
            let mut ties = Vec::with_capacity(n as usize);
            pages.for_each_in_interval(|page, c, _| {
                if c == count {
                    ties.push(page);
                }
            });
            let last_tie = *ties.select_nth_unstable(wanted as usize - 1).1;
            return Top {
                count: Some(count),
                last_tie: Some(last_tie),
            };
        }
        Top {
            count: None,
            last_tie: None,
        }
    }

    fn holds(&self, count: u32, page: PageKey) -> bool {
        match self.count {
            Some(c) => count > c || (count == c && self.last_tie.is_none_or(|l| page <= l)),
            None => false,
        }
    }
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
