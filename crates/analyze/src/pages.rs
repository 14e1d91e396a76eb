//! Per-page access counts: unique bytes, the top-20% access share (seed 000 Table 1) and
//! the rank-frequency curve (seed 000 Figure 1, top row).
//!
//! A request touches every page that holds one of its sectors, and each touched page counts
//! one access (seed 000 §2.1 counts accesses to 4 KiB file-system pages of 8 sectors). The
//! map is keyed by page, so memory grows with the distinct pages touched, not requests.

use reblock_trace::{Op, Request, SECTOR_BYTES};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// A page of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PageKey {
    pub device: u32,
    pub page: u64,
}

impl std::hash::Hash for PageKey {
    /// One word per key instead of two: the device goes to the high bits page numbers
    /// never reach. Equal keys hash equally; the rare unequal keys that collide are told
    /// apart by `Eq`, so this only saves a hashing round per lookup.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.page ^ u64::from(self.device).rotate_right(16));
    }
}

/// Accesses to one page by operation (saturating at u32::MAX).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageStat {
    pub reads: u32,
    pub writes: u32,
}

impl PageStat {
    pub fn accesses(self) -> u64 {
        u64::from(self.reads) + u64::from(self.writes)
    }
}

/// The pages `req` touches, as a half-open range of page numbers.
pub fn page_range(req: &Request, page_bytes: u64) -> std::ops::Range<u64> {
    let sectors_per_page = page_bytes / SECTOR_BYTES;
    if sectors_per_page > 0 && page_bytes.is_multiple_of(SECTOR_BYTES) {
        // Shift-free division by a constant is what the hot loop does most.
        let first = req.sector / sectors_per_page;
        let last = (req.end_sector() - 1) / sectors_per_page;
        return first..last + 1;
    }
    let first = req.sector * SECTOR_BYTES / page_bytes;
    let last = (req.end_sector() * SECTOR_BYTES - 1) / page_bytes;
    first..last + 1
}

/// Pages per map entry. A request touches a run of consecutive pages (2.6 on average on
/// the bundled kernel-build trace), and one lookup per group of four instead of one per
/// page is most of the analyzer's speed: every lookup is a random access into a map that
/// lives in the last-level cache or beyond. Memory per distinct page grows from 32 to at
/// most 80 bytes when pages are scattered one per group.
pub const GROUP_PAGES: u64 = 4;

/// The key of one group: a device and the first page of the group divided by
/// [`GROUP_PAGES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GroupKey {
    device: u32,
    group: u64,
}

impl std::hash::Hash for GroupKey {
    /// One word per key (see [`PageKey`]'s hash).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.group ^ u64::from(self.device).rotate_right(16));
    }
}

/// Flags of a page in [`Cell::interval`]'s top bits: whether it was in the first
/// interval's working set, and in that set's top 20% (see [`crate::working_set`]).
pub const IN_FIRST: u32 = 1 << 31;
pub const IN_FIRST_TOP: u32 = 1 << 30;
const INTERVAL_COUNT: u32 = IN_FIRST_TOP - 1;

/// One page: its counts over the whole trace, its count in the current interval
/// (saturating at 2^30 - 1) and the two first-interval flags.
#[derive(Clone, Copy, Debug, Default)]
struct Cell {
    stat: PageStat,
    interval: u32,
}

/// Four consecutive pages and the interval their interval counts belong to.
#[derive(Clone, Copy, Debug, Default)]
struct Group {
    /// Interval stamp of the interval counts; older stamps mean "zero this interval".
    stamp: u32,
    cells: [Cell; GROUP_PAGES as usize],
}

/// Per-page counts over the whole trace and within the current working-set interval,
/// with one map lookup per group of [`GROUP_PAGES`] pages a request touches.
pub struct Pages {
    map: FxHashMap<GroupKey, Group>,
    /// The current interval's stamp (starts at 1: a new group's 0 is never current).
    stamp: u32,
    /// Groups first touched in the current interval, in order.
    touched: Vec<GroupKey>,
}

impl Default for Pages {
    fn default() -> Self {
        Pages {
            map: FxHashMap::default(),
            stamp: 1,
            touched: Vec::new(),
        }
    }
}

impl Pages {
    /// Counts one access by `op` to each page of `pages` on `device`.
    pub fn touch_run(&mut self, device: u32, pages: std::ops::Range<u64>, op: Op) {
        let mut page = pages.start;
        while page < pages.end {
            let group = page / GROUP_PAGES;
            let first = (page % GROUP_PAGES) as usize;
            let last = (pages.end - group * GROUP_PAGES).min(GROUP_PAGES) as usize;
            let key = GroupKey { device, group };
            let g = self.map.entry(key).or_default();
            if g.stamp != self.stamp {
                g.stamp = self.stamp;
                for c in &mut g.cells {
                    c.interval &= !INTERVAL_COUNT;
                }
                self.touched.push(key);
            }
            for c in &mut g.cells[first..last] {
                match op {
                    Op::Read => c.stat.reads = c.stat.reads.saturating_add(1),
                    Op::Write => c.stat.writes = c.stat.writes.saturating_add(1),
                }
                if c.interval & INTERVAL_COUNT != INTERVAL_COUNT {
                    c.interval += 1;
                }
            }
            page = (group + 1) * GROUP_PAGES;
        }
    }

    /// Counts one access to one page.
    pub fn touch(&mut self, key: PageKey, op: Op) {
        self.touch_run(key.device, key.page..key.page + 1, op);
    }

    /// Calls `f` with each page touched in the current interval, its count in the
    /// interval and its flags ([`IN_FIRST`], [`IN_FIRST_TOP`]), which `f` may change.
    /// Visits the groups through the interval's list when it is short, and by one scan of
    /// the map when the interval touched a good part of it (a scan is sequential, so
    /// about eight times cheaper per group than a lookup).
    pub fn for_each_in_interval(&mut self, mut f: impl FnMut(PageKey, u32, &mut u32)) {
        let stamp = self.stamp;
        let mut visit = |key: &GroupKey, g: &mut Group| {
            for (i, c) in g.cells.iter_mut().enumerate() {
                let count = c.interval & INTERVAL_COUNT;
                if count > 0 {
                    let page = PageKey {
                        device: key.device,
                        page: key.group * GROUP_PAGES + i as u64,
                    };
                    let mut flags = c.interval & !INTERVAL_COUNT;
                    f(page, count, &mut flags);
                    c.interval = count | (flags & !INTERVAL_COUNT);
                }
            }
        };
        if self.touched.len() * 8 >= self.map.len() {
            for (key, g) in self.map.iter_mut().filter(|(_, g)| g.stamp == stamp) {
                visit(key, g);
            }
        } else {
            for key in &self.touched {
                if let Some(g) = self.map.get_mut(key) {
                    visit(key, g);
                }
            }
        }
    }

    /// Pages touched in the current interval.
    pub fn interval_len(&self) -> usize {
        self.touched
            .iter()
            .filter_map(|k| self.map.get(k))
            .map(|g| {
                g.cells
                    .iter()
                    .filter(|c| c.interval & INTERVAL_COUNT > 0)
                    .count()
            })
            .sum()
    }

    /// Starts the next interval: every interval count reads as zero from now on.
    pub fn next_interval(&mut self) {
        self.stamp += 1;
        self.touched.clear();
    }

    /// Every touched page with its counts, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (PageKey, PageStat)> + '_ {
        self.map.iter().flat_map(|(k, g)| {
            g.cells.iter().enumerate().filter_map(move |(i, c)| {
                (c.stat.accesses() > 0).then_some((
                    PageKey {
                        device: k.device,
                        page: k.group * GROUP_PAGES + i as u64,
                    },
                    c.stat,
                ))
            })
        })
    }

    /// Distinct pages touched.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What the page map says at the end of the trace.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PageSummary {
    pub unique_pages: u64,
    pub unique_read_pages: u64,
    pub unique_write_pages: u64,
    /// Page accesses (a request of k pages is k accesses).
    pub page_accesses: u64,
    /// Share of page accesses that go to the ceil(20%) most-accessed pages.
    pub top20_access_share: Option<f64>,
    /// Accesses of the most-accessed page.
    pub max_page_accesses: u64,
    pub rank_frequency: RankFrequency,
}

/// Access counts by rank, sampled at (about 40 per decade) log-spaced ranks for plotting;
/// the last rank is always included. Rank 1 is the most-accessed page.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct RankFrequency {
    pub all: Vec<(u64, u64)>,
    pub reads: Vec<(u64, u64)>,
    pub writes: Vec<(u64, u64)>,
}

/// Sum of the top ceil(0.2 * n) counts over the sum of all counts (counts sorted
/// descending); None when there are no accesses.
pub fn top20_share(sorted_desc: &[u64]) -> Option<f64> {
    let total: u64 = sorted_desc.iter().sum();
    if total == 0 {
        return None;
    }
    let k = sorted_desc.len().div_ceil(5);
    let top: u64 = sorted_desc[..k].iter().sum();
    Some(top as f64 / total as f64)
}

/// (rank, count) pairs at log-spaced ranks of a descending count list.
pub fn sample_ranks(sorted_desc: &[u64]) -> Vec<(u64, u64)> {
    let n = sorted_desc.len();
    let mut out = Vec::new();
    let mut rank = 1usize;
    while rank <= n {
        out.push((rank as u64, sorted_desc[rank - 1]));
        let next = ((rank as f64) * 10f64.powf(1.0 / 40.0)).ceil() as usize;
        rank = next.max(rank + 1);
    }
    if out.last().is_some_and(|&(r, _)| r as usize != n) {
        out.push((n as u64, sorted_desc[n - 1]));
    }
    out
}

impl Pages {
    pub fn summary(&self) -> PageSummary {
        let mut all = Vec::with_capacity(self.map.len());
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for (_, s) in self.iter() {
            all.push(s.accesses());
            if s.reads > 0 {
                reads.push(u64::from(s.reads));
            }
            if s.writes > 0 {
                writes.push(u64::from(s.writes));
            }
        }
        for v in [&mut all, &mut reads, &mut writes] {
            v.sort_unstable_by(|a, b| b.cmp(a));
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(sector: u64, sectors: u32) -> Request {
        Request {
            ts_ns: 0,
            pid: None,
            command: 0,
            device: 0,
            sector,
            sectors,
            op: Op::Read,
        }
    }

    #[test]
    fn unaligned_requests_touch_every_page_they_overlap() {
        // 4 KiB pages are 8 sectors: sectors 7..9 straddle pages 0 and 1.
        assert_eq!(page_range(&req(7, 2), 4096), 0..2);
        assert_eq!(page_range(&req(8, 8), 4096), 1..2);
        assert_eq!(page_range(&req(0, 17), 4096), 0..3);
        // 1536-byte pages (3 sectors): sectors 2..5 are bytes 1024..2560 -> pages 0 and 1.
        assert_eq!(page_range(&req(2, 3), 1536), 0..2);
    }

    #[test]
    fn top20_share_by_hand() {
        // 6 pages: ceil(6/5) = 2 top pages, 5 + 3 = 8 of 5+3+1+1+1+1 = 12 accesses.
        assert_eq!(top20_share(&[5, 3, 1, 1, 1, 1]), Some(8.0 / 12.0));
        assert_eq!(top20_share(&[]), None);
    }

    #[test]
    fn rank_sampling_keeps_first_and_last() {
        let counts: Vec<u64> = (1..=1000).rev().collect();
        let s = sample_ranks(&counts);
        assert_eq!(s.first(), Some(&(1, 1000)));
        assert_eq!(s.last(), Some(&(1000, 1)));
        assert!(s.len() < 200, "{} points", s.len());
        assert!(s.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
