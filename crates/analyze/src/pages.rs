//! Per-page access counts: unique bytes, the top-20% access share (seed 000 Table 1) and
//! the rank-frequency curve (seed 000 Figure 1, top row).
//!
//! A request touches every page that holds one of its sectors, and each touched page counts
//! one access (seed 000 §2.1 counts accesses to 4 KiB file-system pages of 8 sectors). The
//! counts live in a hash table of groups of eight pages ([`crate::groups`]), so memory
//! grows with the distinct pages touched, not requests: 64 bytes per group at a load
//! factor between 3/8 and 3/4, so 11 to 21 bytes per page where pages are dense, eight
//! times that where they are scattered one per group. A page's counts are 16 bits wide
//! (its interval count 14); the rare page counted past that keeps the rest in a spill map
//! keyed by page. Halving the bytes per page from the 12-byte counts of four-page groups
//! halved the table on the benchmark's million-request mix (32 to 16 MiB) and cut the
//! page counting's time by 40%, the table being what the analysis waits on.
//!
//! Lookups are queued: a touch computes its group's slot, asks for the slot's cache line
//! and joins a queue of [`LOOKAHEAD`] touches; the oldest is applied when a new one comes.
//! By then its line has (mostly) arrived, so several cache misses are in flight at once
//! instead of one after another. (Applying touches in batches sorted by slot, so as to
//! sweep the table in address order, measured slower: 100 against 84 ns per request on
//! the benchmark's million-request mix.) Counts commute, so the order they are applied in
//! changes nothing; anything that reads the counts drains the queue first.

use reblock_trace::{Op, Request, SECTOR_BYTES};
use serde::Serialize;

use crate::groups::{Cell, GroupTable, SlotId, GROUP_PAGES};

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

/// A page size with the shift that replaces division by it, when it is a power-of-two
/// number of sectors (4 KiB and every usual size are): the analyzer maps every request
/// to its pages, and a 64-bit division costs tens of cycles where a shift costs one.
#[derive(Clone, Copy, Debug)]
pub struct PageSize {
    bytes: u64,
    sector_shift: Option<u32>,
}

impl PageSize {
    pub fn new(bytes: u64) -> Self {
        let sectors = bytes / SECTOR_BYTES;
        let power = bytes.is_multiple_of(SECTOR_BYTES) && sectors.is_power_of_two();
        PageSize {
            bytes,
            sector_shift: power.then(|| sectors.trailing_zeros()),
        }
    }

    /// Sectors per page (0 for a page smaller than a sector).
    pub fn sectors(&self) -> u64 {
        self.bytes / SECTOR_BYTES
    }

    /// Which ends of [`PageSize::range`] `req` covers only in part.
    #[inline]
    pub fn partial_ends(&self, req: &Request) -> PartialEnds {
        let inside = |sector: u64| match self.sector_shift {
            Some(shift) => sector & ((1u64 << shift) - 1) != 0,
            None => !sector.is_multiple_of(self.sectors().max(1)),
        };
        PartialEnds {
            first: inside(req.sector),
            last: inside(req.end_sector()),
        }
    }

    /// [`page_range`] of `req`.
    #[inline]
    pub fn range(&self, req: &Request) -> std::ops::Range<u64> {
        match self.sector_shift {
            Some(shift) => (req.sector >> shift)..((req.end_sector() - 1) >> shift) + 1,
            None => page_range(req, self.bytes),
        }
    }
}

/// The pages `req` touches, as a half-open range of page numbers (the definition;
/// [`PageSize::range`] computes it faster).
pub fn page_range(req: &Request, page_bytes: u64) -> std::ops::Range<u64> {
    let sectors_per_page = page_bytes / SECTOR_BYTES;
    if sectors_per_page > 0 && page_bytes.is_multiple_of(SECTOR_BYTES) {
        let first = req.sector / sectors_per_page;
        let last = (req.end_sector() - 1) / sectors_per_page;
        return first..last + 1;
    }
    // Byte offsets past 2^64 (sectors past 2^55) need 128 bits.
    let first = u128::from(req.sector) * u128::from(SECTOR_BYTES) / u128::from(page_bytes);
    let last =
        (u128::from(req.end_sector()) * u128::from(SECTOR_BYTES) - 1) / u128::from(page_bytes);
    first as u64..last as u64 + 1
}

/// A page's flags as [`Pages::for_each_in_interval`] hands them out: whether it was in
/// the first interval's working set, and in that set's top 20% (see
/// [`crate::working_set`]).
pub const IN_FIRST: u32 = 1 << 31;
pub const IN_FIRST_TOP: u32 = 1 << 30;
/// The same flags in a cell's `interval` field, above its 14-bit count.
const CELL_FIRST: u16 = 1 << 15;
const CELL_FIRST_TOP: u16 = 1 << 14;
const CELL_COUNT: u16 = CELL_FIRST_TOP - 1;

/// Largest read or write count a cell holds; further accesses count in the spill map.
/// (The unit tests shrink these limits so that the property test against the reference
/// analyzer goes through every spill and stamp wrap.)
#[cfg(not(test))]
const COUNT_MAX: u16 = u16::MAX;
#[cfg(test)]
const COUNT_MAX: u16 = 3;
/// Largest interval count a cell holds.
#[cfg(not(test))]
const INTERVAL_MAX: u16 = CELL_COUNT;
#[cfg(test)]
const INTERVAL_MAX: u16 = 2;
/// Interval stamps run 1..=STAMP_MAX; then every slot is stamped 1 and counting goes on
/// from 2 (a slot's 0 means empty).
#[cfg(not(test))]
const STAMP_MAX: u16 = u16::MAX;
#[cfg(test)]
const STAMP_MAX: u16 = 4;

/// Counts of a page past what its cell holds: reads and writes beyond [`COUNT_MAX`], and
/// its interval count beyond [`INTERVAL_MAX`] in interval `interval_of`.
#[derive(Clone, Copy, Debug, Default)]
struct Spill {
    reads: u32,
    writes: u32,
    interval: u32,
    interval_of: u64,
}

/// Touches queued before they are applied (see the module doc): enough to cover a miss
/// to memory at a few nanoseconds of work per touch, few enough to stay in L1.
pub const LOOKAHEAD: usize = 16;

/// One queued touch: pages `first..last` of a group, by `op`; `full` marks those of them
/// the request covers whole (bit k for page k of the group).
#[derive(Clone, Copy, Debug)]
struct Touch {
    hash: u64,
    group: u64,
    device: u32,
    first: u8,
    last: u8,
    full: u8,
    write: bool,
}

const IDLE: Touch = Touch {
    hash: 0,
    group: 0,
    device: 0,
    first: 0,
    last: 0,
    full: 0,
    write: false,
};

/// Pages covered whole, by direction (see [`crate::sectors`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FullPages {
    pub read: u64,
    pub write: u64,
    /// Covered whole by a read or by a write.
    pub any: u64,
}

/// Which ends of a run of pages a request covers only in part: its first page (it starts
/// inside it) and its last (it ends inside it). One page may be both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartialEnds {
    pub first: bool,
    pub last: bool,
}

/// Counts one access of `page` in the spill map: a read or write past its cell's
/// [`COUNT_MAX`] (`full`), and one in interval `seq` past its cell's [`INTERVAL_MAX`].
#[cold]
fn spill_one(
    spill: &mut rustc_hash::FxHashMap<PageKey, Spill>,
    page: PageKey,
    write: bool,
    full: bool,
    interval_full: bool,
    seq: u64,
) {
    let s = spill.entry(page).or_default();
    if full {
        let n = if write { &mut s.writes } else { &mut s.reads };
        *n = n.saturating_add(1);
    }
    if interval_full {
        if s.interval_of != seq {
            (s.interval_of, s.interval) = (seq, 0);
        }
        s.interval = s.interval.saturating_add(1);
    }
}

/// A page's all-time counts: its cell's, plus the spill map's once the cell is full.
fn stat_of(c: &Cell, page: PageKey, spill: &rustc_hash::FxHashMap<PageKey, Spill>) -> PageStat {
    let extra = |count: u16, pick: fn(&Spill) -> u32| match count == COUNT_MAX {
        true => spill.get(&page).map_or(0, pick),
        false => 0,
    };
    PageStat {
        reads: u32::from(c.reads).saturating_add(extra(c.reads, |s| s.reads)),
        writes: u32::from(c.writes).saturating_add(extra(c.writes, |s| s.writes)),
    }
}

/// Page accesses to one device over the whole trace, and one past its highest page
/// touched: what the heat map needs to choose its device and span before the one scan of
/// the pages that also makes the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceTotals {
    pub device: u32,
    pub accesses: u64,
    pub end_page: u64,
}

/// Per-page counts over the whole trace and within the current working-set interval,
/// with one table lookup per group of [`GROUP_PAGES`] pages a request touches.
pub struct Pages {
    /// Per device, in order of appearance; `recent_device` is the last one touched.
    devices: Vec<DeviceTotals>,
    recent_device: usize,
    table: GroupTable,
    /// The current interval's stamp (starts at 1: a new slot's 0 is never current).
    stamp: u16,
    /// Intervals started so far (the spill map's interval tag; never wraps).
    interval_seq: u64,
    /// Counts past what cells hold, by page.
    spill: rustc_hash::FxHashMap<PageKey, Spill>,
    /// Slots first touched in the current interval (listed anew when the table grows).
    touched: Vec<SlotId>,
    /// The sort's scratch buffer, kept between intervals.
    touched_scratch: Vec<SlotId>,
    /// Whether `touched` is sorted (nothing was added since the last sort).
    touched_sorted: bool,
    /// Touches waiting for their slot's cache line, oldest first (a ring).
    queue: [Touch; LOOKAHEAD],
    queue_head: usize,
    queue_len: usize,
}

impl Default for Pages {
    fn default() -> Self {
        Pages {
            devices: Vec::new(),
            recent_device: 0,
            table: GroupTable::default(),
            stamp: 1,
            interval_seq: 0,
            spill: Default::default(),
            touched: Vec::new(),
            touched_scratch: Vec::new(),
            touched_sorted: true,
            queue: [IDLE; LOOKAHEAD],
            queue_head: 0,
            queue_len: 0,
        }
    }
}

impl Pages {
    /// Counts one access by `op` to each page of `pages` on `device`, and marks the pages
    /// covered whole (all but the `partial` ends).
    #[inline]
    pub fn touch_run(
        &mut self,
        device: u32,
        pages: std::ops::Range<u64>,
        op: Op,
        partial: PartialEnds,
    ) {
        self.count_device(device, &pages);
        // Pages (absolute) not covered whole; u64::MAX stands for none.
        let head = if partial.first { pages.start } else { u64::MAX };
        let tail = if partial.last {
            pages.end - 1
        } else {
            u64::MAX
        };
        let mut page = pages.start;
        while page < pages.end {
            let group = page / GROUP_PAGES;
            let base = group * GROUP_PAGES;
            let first = (page % GROUP_PAGES) as u8;
            let last = (pages.end - base).min(GROUP_PAGES) as u8;
            let mut full = ((1u16 << last) - (1u16 << first)) as u8;
            for p in [head, tail] {
                if p >= base && p - base < GROUP_PAGES {
                    full &= !(1 << (p - base));
                }
            }
            let hash = self.table.hash(device, group);
            self.table.prefetch(hash);
            let touch = Touch {
                hash,
                group,
                device,
                first,
                last,
                full,
                write: op == Op::Write,
            };
            if self.queue_len == LOOKAHEAD {
                let oldest = std::mem::replace(&mut self.queue[self.queue_head], touch);
                self.queue_head = (self.queue_head + 1) % LOOKAHEAD;
                self.apply(oldest);
            } else {
                self.queue[(self.queue_head + self.queue_len) % LOOKAHEAD] = touch;
                self.queue_len += 1;
            }
            page = (group + 1) * GROUP_PAGES;
        }
    }

    #[inline]
    fn count_device(&mut self, device: u32, pages: &std::ops::Range<u64>) {
        if self.devices.get(self.recent_device).map(|d| d.device) != Some(device) {
            self.recent_device = match self.devices.iter().position(|d| d.device == device) {
                Some(i) => i,
                None => {
                    self.devices.push(DeviceTotals {
                        device,
                        accesses: 0,
                        end_page: 0,
                    });
                    self.devices.len() - 1
                }
            };
        }
        let d = &mut self.devices[self.recent_device];
        d.accesses += pages.end - pages.start;
        d.end_page = d.end_page.max(pages.end);
    }

    /// Page accesses and extent per device, in order of first appearance.
    pub fn device_totals(&self) -> &[DeviceTotals] {
        &self.devices
    }

    /// Applies every queued touch.
    fn drain(&mut self) {
        while self.queue_len > 0 {
            let t = self.queue[self.queue_head];
            self.queue_head = (self.queue_head + 1) % LOOKAHEAD;
            self.queue_len -= 1;
            self.apply(t);
        }
    }

    #[inline]
    fn apply(&mut self, t: Touch) {
        let (i, grew) = self.table.find_or_insert(t.device, t.group, t.hash);
        let (stamp, seq) = (self.stamp, self.interval_seq);
        if grew {
            // Every slot moved: list the interval's slots again (the new one, not yet
            // stamped, is added below).
            self.touched.clear();
            let moved = self.table.occupied().filter(|(_, s)| s.stamp == stamp);
            self.touched.extend(moved.map(|(id, _)| id));
            self.touched_sorted = true; // listed in slot order
        }
        let g = self.table.slot_mut(i);
        if g.stamp != stamp {
            g.stamp = stamp;
            for c in &mut g.cells {
                c.interval &= !CELL_COUNT;
            }
            self.touched.push(i);
            self.touched_sorted = false;
        }
        g.full |= u16::from(t.full) << (8 * u16::from(t.write));
        let (device, first_page) = (g.device, g.group * GROUP_PAGES);
        for k in usize::from(t.first)..usize::from(t.last) {
            let c = &mut g.cells[k];
            let count = if t.write { &mut c.writes } else { &mut c.reads };
            let full = *count == COUNT_MAX;
            *count += u16::from(!full);
            let interval_full = c.interval & CELL_COUNT == INTERVAL_MAX;
            c.interval += u16::from(!interval_full);
            if full || interval_full {
                let page = PageKey {
                    device,
                    page: first_page + k as u64,
                };
                spill_one(&mut self.spill, page, t.write, full, interval_full, seq);
            }
        }
    }

    /// Counts one access to one page, covered whole.
    pub fn touch(&mut self, key: PageKey, op: Op) {
        let whole = PartialEnds::default();
        self.touch_run(key.device, key.page..key.page + 1, op, whole);
    }

    /// Whether a request covered `key` whole: (by a read, by a write).
    pub fn full_of(&self, key: PageKey) -> (bool, bool) {
        debug_assert_eq!(self.queue_len, 0, "queued touches not applied");
        let Some(g) = self.table.find(key.device, key.page / GROUP_PAGES) else {
            return (false, false);
        };
        let k = key.page % GROUP_PAGES;
        (g.full >> k & 1 == 1, g.full >> (8 + k) & 1 == 1)
    }

    /// How many pages requests covered whole, by direction.
    pub fn full_pages(&self) -> FullPages {
        debug_assert_eq!(self.queue_len, 0, "queued touches not applied");
        let mut f = FullPages::default();
        for (_, g) in self.table.occupied() {
            let (r, w) = (g.full & 0xff, g.full >> 8);
            f.read += u64::from(r.count_ones());
            f.write += u64::from(w.count_ones());
            f.any += u64::from((r | w).count_ones());
        }
        f
    }

    /// Calls `f` with each page touched in the current interval, its count in the
    /// interval and its flags ([`IN_FIRST`], [`IN_FIRST_TOP`]), which `f` may change.
    /// The interval's slots are visited in address order (sorted ids), sweeping the table
    /// instead of jumping around it.
    pub fn for_each_in_interval(&mut self, mut f: impl FnMut(PageKey, u32, &mut u32)) {
        self.drain();
        if !self.touched_sorted {
            sort_ids(
                &mut self.touched,
                self.table.capacity(),
                &mut self.touched_scratch,
            );
            self.touched_sorted = true;
        }
        let seq = self.interval_seq;
        for &id in &self.touched {
            let g = self.table.slot_mut(id);
            debug_assert_eq!(g.stamp, self.stamp);
            for (i, c) in g.cells.iter_mut().enumerate() {
                let count = c.interval & CELL_COUNT;
                if count == 0 {
                    continue;
                }
                let page = PageKey {
                    device: g.device,
                    page: g.group * GROUP_PAGES + i as u64,
                };
                let mut total = u32::from(count);
                if count == INTERVAL_MAX {
                    if let Some(s) = self.spill.get(&page).filter(|s| s.interval_of == seq) {
                        total = total.saturating_add(s.interval);
                    }
                }
                let mut flags = (u32::from(c.interval & CELL_FIRST != 0) * IN_FIRST)
                    | (u32::from(c.interval & CELL_FIRST_TOP != 0) * IN_FIRST_TOP);
                f(page, total, &mut flags);
                c.interval = count
                    | (u16::from(flags & IN_FIRST != 0) * CELL_FIRST)
                    | (u16::from(flags & IN_FIRST_TOP != 0) * CELL_FIRST_TOP);
            }
        }
    }

    /// Pages touched in the current interval.
    pub fn interval_len(&mut self) -> usize {
        let mut n = 0;
        self.for_each_in_interval(|_, _, _| n += 1);
        n
    }

    /// Starts the next interval: every interval count reads as zero from now on.
    pub fn next_interval(&mut self) {
        self.drain();
        self.interval_seq += 1;
        if self.stamp == STAMP_MAX {
            // Out of stamps: every slot takes stamp 1, which no later interval has.
            self.table.restamp(1);
            self.stamp = 2;
        } else {
            self.stamp += 1;
        }
        self.touched.clear();
        self.touched_sorted = true;
    }

    /// Every touched page with its counts, in no particular order. Touches still
    /// pending are not counted: the working sets' last close applies them.
    pub fn iter(&self) -> impl Iterator<Item = (PageKey, PageStat)> + '_ {
        debug_assert_eq!(self.queue_len, 0, "queued touches not applied");
        let spill = &self.spill;
        self.table.occupied().flat_map(move |(_, g)| {
            g.cells.iter().enumerate().filter_map(move |(i, c)| {
                let page = PageKey {
                    device: g.device,
                    page: g.group * GROUP_PAGES + i as u64,
                };
                (c.reads > 0 || c.writes > 0).then(|| (page, stat_of(c, page, spill)))
            })
        })
    }

    /// Distinct pages touched.
    pub fn len(&mut self) -> usize {
        self.drain();
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.table.len() == 0 && self.queue_len == 0
    }

    /// Heap bytes held: the table, the interval's slot list and the spill map.
    pub fn heap_bytes(&self) -> usize {
        self.table.heap_bytes()
            + self.touched.capacity() * std::mem::size_of::<SlotId>()
            + self.spill.capacity() * (std::mem::size_of::<(PageKey, Spill)>() + 1)
    }

    /// Groups held and the table's slots.
    pub fn groups(&self) -> (usize, usize) {
        (self.table.len(), self.table.capacity())
    }
}

/// Sorts distinct slot ids below `universe`. Where they are dense (at least one in 64 of
/// the table's slots, as in any long interval), by setting their bits in a bitmap and
/// reading it back in order: a bit set per id and a word read per 64 slots, against
/// three radix passes over the ids. Sparse ids are radix sorted.
fn sort_ids(ids: &mut Vec<SlotId>, universe: usize, scratch: &mut Vec<SlotId>) {
    if ids.len() < universe / 64 {
        reblock_tally::sort_keys(ids, scratch);
        return;
    }
    scratch.clear();
    scratch.resize(universe.div_ceil(64), 0);
    for &id in ids.iter() {
        scratch[(id / 64) as usize] |= 1 << (id % 64);
    }
    ids.clear();
    for (w, &bits) in scratch.iter().enumerate() {
        let mut bits = bits;
        while bits != 0 {
            ids.push(w as u64 * 64 + u64::from(bits.trailing_zeros()));
            bits &= bits - 1;
        }
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
    sampled_ranks(sorted_desc.len() as u64)
        .map(|r| (r, sorted_desc[r as usize - 1]))
        .collect()
}

/// The ranks [`sample_ranks`] samples among `n`: 1, then about 40 per decade, and `n`.
fn sampled_ranks(n: u64) -> impl Iterator<Item = u64> {
    let step = 10f64.powf(1.0 / 40.0);
    let mut rank = 1u64;
    std::iter::from_fn(move || {
        if rank > n {
            return None;
        }
        let r = rank;
        let next = ((rank as f64) * step).ceil() as u64;
        rank = match next.max(rank + 1) {
            // The last rank is always sampled.
            past if past > n && r < n => n,
            next => next,
        };
        Some(r)
    })
}

/// Page access counts by value: how many pages have each count. The summary needs only
/// order statistics of the counts (the sum of the largest fifth, the values at sampled
/// ranks), and those come from the distinct values in order, of which a trace has few:
/// no sort of a million counts.
#[derive(Default)]
pub(crate) struct CountHistogram {
    /// Pages per count, for counts below [`DENSE_COUNTS`].
    dense: Vec<u64>,
    sparse: rustc_hash::FxHashMap<u64, u64>,
}

const DENSE_COUNTS: u64 = 1024;

impl CountHistogram {
    #[inline]
    pub(crate) fn add(&mut self, count: u64) {
        if count < DENSE_COUNTS {
            if self.dense.is_empty() {
                self.dense.resize(DENSE_COUNTS as usize, 0);
            }
            self.dense[count as usize] += 1;
        } else {
            *self.sparse.entry(count).or_insert(0) += 1;
        }
    }

    /// (count, pages) for every count some page has, the largest count first.
    pub(crate) fn descending(&self) -> Vec<(u64, u64)> {
        let mut big: Vec<(u64, u64)> = self.sparse.iter().map(|(&c, &p)| (c, p)).collect();
        big.sort_unstable_by(|a, b| b.cmp(a));
        let small = self.dense.iter().enumerate().rev();
        big.extend(small.filter(|&(_, &p)| p > 0).map(|(c, &p)| (c as u64, p)));
        big
    }
}

/// [`top20_share`] of the counts a histogram holds (`desc` from
/// [`CountHistogram::descending`]).
fn top20_share_of(desc: &[(u64, u64)]) -> Option<f64> {
    let total: u64 = desc.iter().map(|&(c, p)| c * p).sum();
    if total == 0 {
        return None;
    }
    let mut left = desc.iter().map(|&(_, p)| p).sum::<u64>().div_ceil(5);
    let mut top = 0;
    for &(c, p) in desc {
        let take = p.min(left);
        top += c * take;
        left -= take;
    }
    Some(top as f64 / total as f64)
}

/// [`sample_ranks`] of the counts a histogram holds.
fn sample_ranks_of(desc: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let n = desc.iter().map(|&(_, p)| p).sum();
    let mut values = desc.iter();
    let (mut value, mut through) = (0, 0);
    sampled_ranks(n)
        .map(|r| {
            while through < r {
                let &(c, p) = values.next().expect("ranks stay within n");
                (value, through) = (c, through + p);
            }
            (r, value)
        })
        .collect()
}

impl Pages {
    /// The all-time counts; call after the last interval closed.
    pub fn summary(&self) -> PageSummary {
        self.summary_with(|_, _| ())
    }

    /// [`Pages::summary`], calling `f` with every page and its counts on the way (so the
    /// heat map needs no scan of its own).
    pub fn summary_with(&self, mut f: impl FnMut(PageKey, PageStat)) -> PageSummary {
        let (mut all, mut reads, mut writes) = Default::default();
        let mut accesses = 0;
        for (key, s) in self.iter() {
            f(key, s);
            accesses += s.accesses();
            CountHistogram::add(&mut all, s.accesses());
            if s.reads > 0 {
                CountHistogram::add(&mut reads, u64::from(s.reads));
            }
            if s.writes > 0 {
                CountHistogram::add(&mut writes, u64::from(s.writes));
            }
        }
        let [all, reads, writes] = [all, reads, writes].map(|h| h.descending());
        let pages = |d: &[(u64, u64)]| d.iter().map(|&(_, p)| p).sum();
        PageSummary {
            unique_pages: pages(&all),
            unique_read_pages: pages(&reads),
            unique_write_pages: pages(&writes),
            page_accesses: accesses,
            top20_access_share: top20_share_of(&all),
            max_page_accesses: all.first().map_or(0, |&(c, _)| c),
            rank_frequency: RankFrequency {
                all: sample_ranks_of(&all),
                reads: sample_ranks_of(&reads),
                writes: sample_ranks_of(&writes),
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
        // The shift agrees with the division for powers of two and falls back otherwise.
        for bytes in [512, 4096, 65536, 1536, 3000] {
            let size = PageSize::new(bytes);
            for (s, n) in [
                (0, 1),
                (7, 2),
                (8, 8),
                (0, 17),
                (1 << 40, 9),
                (u64::MAX - 9, 9),
            ] {
                assert_eq!(
                    size.range(&req(s, n)),
                    page_range(&req(s, n), bytes),
                    "{bytes}"
                );
            }
        }
    }

    #[test]
    fn slot_ids_sort_dense_and_sparse() {
        let mut scratch = Vec::new();
        for (n, universe) in [(5000u64, 8192usize), (10, 1 << 20), (0, 64), (64, 64)] {
            let mut ids: Vec<SlotId> = (0..n).map(|i| i * 7919 % universe as u64).collect();
            let mut want = ids.clone();
            want.sort_unstable();
            sort_ids(&mut ids, universe, &mut scratch);
            assert_eq!(ids, want, "{n} of {universe}");
        }
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

    proptest::proptest! {
        #[test]
        fn histogram_order_statistics_equal_the_sorted_list(
            counts in proptest::collection::vec(
                proptest::prop_oneof![1u64..5, 1u64..3000, 1u64..u64::from(u32::MAX)], 0..3000)
        ) {
            let mut h = CountHistogram::default();
            for &c in &counts {
                h.add(c);
            }
            let mut sorted = counts.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let desc = h.descending();
            proptest::prop_assert_eq!(top20_share_of(&desc), top20_share(&sorted));
            proptest::prop_assert_eq!(sample_ranks_of(&desc), sample_ranks(&sorted));
        }
    }
}
