//! FS2's replicas of hot blocks in free space: the replica table, where new replicas go,
//! which copy a read uses, and when replicas give their space back.
//!
//! FS2 (dynamic data replication in free disk space; docs/references.md) keeps, per
//! replicated block, its original block number, the replica's block number, the last
//! access time and a reference count. A read goes to whichever copy is closest to the disk
//! head, keeping contiguous copies together; a write to the original drops its replicas
//! (no update writes); replicas give their space back when the file system runs low,
//! governed by high / low / critical free-space watermarks. The device driver picks what
//! to replicate: blocks outside the *hot area* (the region with the most activity) that
//! are used with it, copied into free space inside or next to the hot area.
//!
//! Everything here is in pages of the caller's page size; nothing performs I/O. The
//! simulator and the engine turn the decisions into copies.

use rustc_hash::FxHashMap;

use crate::FreeExtents;

/// Free-space watermarks, as fractions of the device's pages (FS2's high, low and
/// critical marks).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Watermarks {
    /// New replicas are made only while the free space left untouched stays above this.
    pub high: f64,
    /// Below this, replicas are reclaimed (least recently used first) until `high` holds
    /// again.
    pub low: f64,
    /// Below this, every replica is dropped at once.
    pub critical: f64,
}

impl Default for Watermarks {
    fn default() -> Self {
        Watermarks {
            high: 0.10,
            low: 0.05,
            critical: 0.02,
        }
    }
}

/// What the watermarks ask of the replicas (see [`Watermarks::verdict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "action", content = "pages")]
pub enum MarkVerdict {
    /// Above the high mark: up to this many new replicas may be made.
    Create(u64),
    /// Between the low and high marks: keep the replicas, make none.
    Hold,
    /// Below the low mark: give back this many replica pages (least recently read
    /// first), so that the high mark holds again.
    Reclaim(u64),
    /// Below the critical mark: drop every replica.
    DropAll,
}

impl Watermarks {
    /// The marks in pages of a device of `pages` pages: (high, low, critical).
    pub fn in_pages(&self, pages: u64) -> (u64, u64, u64) {
        let at = |f: f64| (f * pages as f64).ceil() as u64;
        (at(self.high), at(self.low), at(self.critical))
    }

    /// The one rule offline and online: with `unused` free pages holding no replica and
    /// `free` free pages in all (replica pages included) of `pages`, below the critical
    /// mark (all free space) every replica goes; below the low mark (unused space) the
    /// least recently read are reclaimed until the high mark holds; above the high mark
    /// new replicas may take what lies above it; in between nothing changes.
    pub fn verdict(&self, unused: u64, free: u64, pages: u64) -> MarkVerdict {
        let (high, low, critical) = self.in_pages(pages);
        if free < critical {
            MarkVerdict::DropAll
        } else if unused < low {
            MarkVerdict::Reclaim(high - unused)
        } else if unused > high {
            MarkVerdict::Create(unused - high)
        } else {
            MarkVerdict::Hold
        }
    }
}

/// Whether a replica's page holds its original's data yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaState {
    /// The page is reserved; the data comes from the next read of the original (FS2
    /// writes a replica from the buffer the application just read, never re-reading it).
    Pending,
    /// The original was read and its data waits in memory to be written.
    Buffered,
    /// Written: reads may use it.
    Valid,
}

/// One replica of an original page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replica {
    /// Where the copy lives.
    pub page: u64,
    pub state: ReplicaState,
    /// The page it was placed near (the hot area's centre then).
    pub target: u64,
    /// Logical time of the last read served from it (the set's access counter).
    pub last_access: u64,
    /// Reads it has served.
    pub refs: u64,
}

/// The copy a read is served from: `len` pages starting at `page`, which is either the
/// original (`replica == false`) or consecutive replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedRun {
    pub page: u64,
    pub len: u64,
    pub replica: bool,
}

/// FS2's read rule, one for the simulator and the engine: a read of pages
/// `[start, start + len)` is served whole by one copy, the original or replicas of every
/// one of its pages laid out one after another in the same order (contiguous copies are
/// kept together),
/// whichever `cost` (positioning from the head, as the caller knows it) rates cheapest;
/// the original on a tie. `replicas_of(page)` lists the replica pages reads may use.
/// Returns the first page of the copy chosen. Taking a read whole, never page by page,
/// keeps a burst that the device reads as one request at home one request elsewhere.
pub fn closest_whole_copy<I>(
    start: u64,
    len: u64,
    replicas_of: impl Fn(u64) -> I,
    mut cost: impl FnMut(u64) -> f64,
) -> u64
where
    I: IntoIterator<Item = u64>,
{
    let mut best: Option<(u64, f64)> = None;
    for r in replicas_of(start) {
        let whole = (1..len).all(|k| replicas_of(start + k).into_iter().any(|q| q == r + k));
        if !whole {
            continue;
        }
        // The original is costed only once some replica could serve instead.
        let b = best.get_or_insert_with(|| (start, cost(start)));
        let c = cost(r);
        if c < b.1 {
            *b = (r, c);
        }
    }
    best.map_or(start, |b| b.0)
}

/// The replica table with the free space it draws on.
#[derive(Clone, Debug)]
pub struct ReplicaSet {
    /// Original page -> its replicas.
    originals: FxHashMap<u64, Vec<Replica>>,
    /// Replica page -> original page.
    owner: FxHashMap<u64, u64>,
    /// Free pages not holding a replica.
    available: FreeExtents,
    device_pages: u64,
    marks: Watermarks,
    clock: u64,
    /// Replicas in state [`ReplicaState::Pending`].
    pending: u64,
    /// Reads (pages) served from a replica.
    pub replica_hits: u64,
}

impl ReplicaSet {
    /// An empty table over a device of `device_pages` pages of which `free` are free.
    pub fn new(device_pages: u64, free: FreeExtents, marks: Watermarks) -> ReplicaSet {
        ReplicaSet {
            originals: FxHashMap::default(),
            owner: FxHashMap::default(),
            available: free,
            device_pages,
            marks,
            clock: 0,
            pending: 0,
            replica_hits: 0,
        }
    }

    /// Replica pages in use.
    pub fn replicas(&self) -> u64 {
        self.owner.len() as u64
    }

    /// Free pages, those holding replicas included (what the file system sees as free).
    pub fn free_pages(&self) -> u64 {
        self.available.total() + self.replicas()
    }

    /// The replicas of `page`.
    pub fn replicas_of(&self, page: u64) -> &[Replica] {
        self.originals.get(&page).map_or(&[], |v| v.as_slice())
    }

    /// The replicas of `page` reads may use.
    fn valid_replicas_of(&self, page: u64) -> impl Iterator<Item = &Replica> {
        self.replicas_of(page)
            .iter()
            .filter(|r| r.state == ReplicaState::Valid)
    }

    /// Whether `page` has a replica reads may use.
    pub fn has_written_replica(&self, page: u64) -> bool {
        self.valid_replicas_of(page).next().is_some()
    }

    /// Whether `page` holds nothing anyone reads: free and unused, or a replica still
    /// waiting for its data. Writing it costs nothing but time, so a batch of replica
    /// writes may write through it rather than position again past it.
    pub fn holds_nothing(&self, page: u64) -> bool {
        if self.available.contains(page) {
            return true;
        }
        let Some(orig) = self.owner.get(&page) else {
            return false;
        };
        self.replicas_of(*orig)
            .iter()
            .any(|r| r.page == page && r.state == ReplicaState::Pending)
    }

    /// Whether some replica still waits for its original to be read.
    pub fn has_pending(&self) -> bool {
        self.pending > 0
    }

    /// A read of originals `[start, end)` has brought their data into memory: their
    /// pending replicas now wait to be written from it. Returns those replicas' pages.
    pub fn take_pending(&mut self, start: u64, end: u64) -> Vec<u64> {
        let mut taken = Vec::new();
        if self.pending == 0 {
            return taken;
        }
        for p in start..end {
            for r in self.originals.get_mut(&p).into_iter().flatten() {
                if r.state == ReplicaState::Pending {
                    r.state = ReplicaState::Buffered;
                    taken.push(r.page);
                }
            }
        }
        self.pending -= taken.len() as u64;
        taken
    }

    /// Every replica still waiting for its original to be read, as (original, replica)
    /// pairs in original order, now waiting to be written: the caller copies them (reads
    /// the originals, writes the replicas) and then marks them written
    /// ([`ReplicaSet::mark_written`]). A copy made in idle time lets a replica serve the
    /// first read of its original instead of the one after.
    pub fn take_every_pending(&mut self) -> Vec<(u64, u64)> {
        let mut taken = Vec::new();
        if self.pending == 0 {
            return taken;
        }
        for (&orig, reps) in self.originals.iter_mut() {
            for r in reps.iter_mut().filter(|r| r.state == ReplicaState::Pending) {
                r.state = ReplicaState::Buffered;
                taken.push((orig, r.page));
            }
        }
        self.pending -= taken.len() as u64;
        taken.sort_unstable();
        taken
    }

    /// The replicas living at `pages` have been written: reads may use them. Pages whose
    /// replica was dropped meanwhile are ignored.
    pub fn mark_written(&mut self, pages: &[u64]) {
        for &page in pages {
            let Some(&orig) = self.owner.get(&page) else {
                continue;
            };
            for r in self.originals.get_mut(&orig).into_iter().flatten() {
                if r.page == page && r.state == ReplicaState::Buffered {
                    r.state = ReplicaState::Valid;
                }
            }
        }
    }

    /// The original whose replica lives at `page`, if one does.
    pub fn owner_of(&self, page: u64) -> Option<u64> {
        self.owner.get(&page).copied()
    }

    /// A write to pages `[start, end)`: replicas of those pages are dropped (FS2 makes no
    /// update writes), a replica living in the written range loses its space to the
    /// client's data, and the range is no longer free. Returns the replica pages freed.
    pub fn note_write(&mut self, start: u64, end: u64) -> Vec<u64> {
        let mut freed = Vec::new();
        for p in start..end {
            if let Some(reps) = self.remove_original(p) {
                for r in reps {
                    if !(start..end).contains(&r.page) {
                        self.available.insert(r.page, r.page + 1);
                    }
                    freed.push(r.page);
                }
            }
            if let Some(orig) = self.owner.remove(&p) {
                self.forget_replica(orig, p);
                freed.push(p);
            }
        }
        self.available.remove(start, end);
        self.enforce_watermarks(&mut freed);
        freed
    }

    /// A trim (discard) of `[start, end)`: the data is gone, so replicas of those pages
    /// are dropped and the pages become free. A replica page inside the range stays: the
    /// file system trimmed free space it does not know we use, and the original is intact.
    pub fn note_trim(&mut self, start: u64, end: u64) -> Vec<u64> {
        let mut freed = Vec::new();
        for p in start..end {
            if let Some(reps) = self.remove_original(p) {
                for r in reps {
                    self.available.insert(r.page, r.page + 1);
                    freed.push(r.page);
                }
            }
        }
        for p in start..end {
            if !self.owner.contains_key(&p) {
                self.available.insert(p, p + 1);
            }
        }
        freed
    }

    /// Drops every replica whose original `keep` refuses (a new plan no longer wants
    /// it); their pages are free again. Returns the replica pages freed.
    pub fn retain_originals(&mut self, keep: impl Fn(u64) -> bool) -> Vec<u64> {
        let gone: Vec<u64> = self
            .originals
            .keys()
            .copied()
            .filter(|&o| !keep(o))
            .collect();
        let mut freed = Vec::new();
        for o in gone {
            for r in self.remove_original(o).unwrap_or_default() {
                self.available.insert(r.page, r.page + 1);
                freed.push(r.page);
            }
        }
        freed
    }

    /// Takes `orig`'s replicas out of the table (their pages are the caller's to free).
    fn remove_original(&mut self, orig: u64) -> Option<Vec<Replica>> {
        let reps = self.originals.remove(&orig)?;
        for r in &reps {
            self.owner.remove(&r.page);
            self.pending -= u64::from(r.state == ReplicaState::Pending);
        }
        Some(reps)
    }

    fn forget_replica(&mut self, orig: u64, page: u64) {
        if let Some(v) = self.originals.get_mut(&orig) {
            let pending = &mut self.pending;
            v.retain(|r| {
                let gone = r.page == page;
                *pending -= u64::from(gone && r.state == ReplicaState::Pending);
                !gone
            });
            if v.is_empty() {
                self.originals.remove(&orig);
            }
        }
    }

    /// Reclaims replicas when free space runs low: all of them below the critical mark,
    /// least recently used first below the low mark until the high mark holds.
    fn enforce_watermarks(&mut self, freed: &mut Vec<u64>) {
        let verdict =
            self.marks
                .verdict(self.available.total(), self.free_pages(), self.device_pages);
        if verdict == MarkVerdict::DropAll {
            let all: Vec<(u64, u64)> = self.owner.iter().map(|(&r, &o)| (r, o)).collect();
            for (r, o) in all {
                self.drop_replica(o, r, freed);
            }
            return;
        }
        let MarkVerdict::Reclaim(n) = verdict else {
            return;
        };
        let want = self.available.total() + n;
        let mut lru: Vec<(u64, u64, u64)> = self
            .originals
            .iter()
            .flat_map(|(&o, v)| v.iter().map(move |r| (r.last_access, r.page, o)))
            .collect();
        lru.sort_unstable();
        for (_, r, o) in lru {
            if self.available.total() >= want {
                break;
            }
            self.drop_replica(o, r, freed);
        }
    }

    fn drop_replica(&mut self, orig: u64, page: u64, freed: &mut Vec<u64>) {
        self.owner.remove(&page);
        self.forget_replica(orig, page);
        self.available.insert(page, page + 1);
        freed.push(page);
    }

    /// The copy serving a read of `[start, start + len)` whole ([`closest_whole_copy`]
    /// over the written replicas), `cost` rating a copy by its first page; a replica
    /// chosen counts the read on each of its pages.
    pub fn serve_whole(&mut self, start: u64, len: u64, cost: impl FnMut(u64) -> f64) -> ServedRun {
        let page = closest_whole_copy(
            start,
            len,
            |p| self.valid_replicas_of(p).map(|r| r.page),
            cost,
        );
        let replica = page != start;
        if replica {
            self.clock += 1;
            for k in 0..len {
                self.touch(start + k, page + k);
            }
        }
        ServedRun { page, len, replica }
    }

    fn touch(&mut self, orig: u64, page: u64) {
        let now = self.clock;
        if let Some(r) = self
            .originals
            .get_mut(&orig)
            .and_then(|v| v.iter_mut().find(|r| r.page == page))
        {
            r.last_access = now;
            r.refs += 1;
            self.replica_hits += 1;
        }
    }

    /// Places replicas of `candidates` (original pages in the order they should be laid
    /// out: first access) in the free space closest to `centre`, runs of consecutive
    /// candidates in consecutive free pages, while the high watermark allows. A page that
    /// already has a replica placed for a centre within `near` pages of `centre` is
    /// skipped (its replicas spread as far as the run they were laid in, so where the
    /// replica sits says less than what it was placed for). Returns the new
    /// (original, replica) pairs in placement order; the caller copies them.
    pub fn place(&mut self, candidates: &[u64], centre: u64, near: u64) -> Vec<(u64, u64)> {
        self.place_as(candidates, centre, near, ReplicaState::Valid)
    }

    /// As [`ReplicaSet::place`], but the replicas are only reserved: each is written
    /// from the next read of its original ([`ReplicaSet::take_pending`]).
    pub fn reserve(&mut self, candidates: &[u64], centre: u64, near: u64) -> Vec<(u64, u64)> {
        self.place_as(candidates, centre, near, ReplicaState::Pending)
    }

    fn place_as(
        &mut self,
        candidates: &[u64],
        centre: u64,
        near: u64,
        state: ReplicaState,
    ) -> Vec<(u64, u64)> {
        let budget = self.creation_budget();
        let todo: Vec<u64> = candidates
            .iter()
            .copied()
            .filter(|&p| {
                !self.owner.contains_key(&p)
                    && !self
                        .replicas_of(p)
                        .iter()
                        .any(|r| r.target.abs_diff(centre) <= near)
            })
            .take(budget as usize)
            .collect();
        let slots = self.nearest_free(centre, todo.len() as u64);
        let mut placed = Vec::with_capacity(todo.len());
        for (orig, slot) in todo.into_iter().zip(slots) {
            self.available.remove(slot, slot + 1);
            self.owner.insert(slot, orig);
            self.pending += u64::from(state == ReplicaState::Pending);
            self.originals.entry(orig).or_default().push(Replica {
                page: slot,
                state,
                target: centre,
                last_access: self.clock,
                refs: 0,
            });
            placed.push((orig, slot));
        }
        placed
    }

    /// How many replicas may still be made without crossing the high watermark.
    pub fn creation_budget(&self) -> u64 {
        let v = self
            .marks
            .verdict(self.available.total(), self.free_pages(), self.device_pages);
        match v {
            MarkVerdict::Create(n) => n,
            _ => 0,
        }
    }

    /// `n` free pages closest to `centre`, in address order within each side so that
    /// consecutive candidates land on consecutive pages: free runs are taken whole, nearest
    /// first.
    fn nearest_free(&self, centre: u64, n: u64) -> Vec<u64> {
        let mut runs: Vec<(u64, std::ops::Range<u64>)> = self
            .available
            .iter()
            .map(|r| {
                let d = if r.contains(&centre) {
                    0
                } else if r.end <= centre {
                    centre - r.end + 1
                } else {
                    r.start - centre
                };
                (d, r)
            })
            .collect();
        runs.sort_unstable_by_key(|(d, r)| (*d, r.start));
        let mut out = Vec::with_capacity(n as usize);
        for (_, r) in runs {
            if out.len() as u64 >= n {
                break;
            }
            // Inside the run, start as close to the centre as the run allows.
            let want = n - out.len() as u64;
            let len = r.end - r.start;
            let start = if len <= want {
                r.start
            } else {
                centre.saturating_sub(want / 2).clamp(r.start, r.end - want)
            };
            out.extend(start..start + want.min(len));
        }
        out
    }
}

/// The hot area of an epoch's page accesses: the window of `window` pages (aligned) with
/// the most accesses, and its access-weighted centre. `None` without accesses.
pub fn hot_area(accesses: &[u64], window: u64) -> Option<(std::ops::Range<u64>, u64)> {
    let window = window.max(1);
    let mut counts: FxHashMap<u64, u64> = FxHashMap::default();
    for &p in accesses {
        *counts.entry(p / window).or_default() += 1;
    }
    let (&w, _) = counts
        .iter()
        .max_by_key(|(&w, &c)| (c, std::cmp::Reverse(w)))?;
    let area = w * window..(w + 1) * window;
    let inside: Vec<u64> = accesses
        .iter()
        .copied()
        .filter(|p| area.contains(p))
        .collect();
    let centre = inside.iter().sum::<u64>() / inside.len().max(1) as u64;
    Some((area, centre))
}

/// FS2's candidates: pages outside the hot area read at least `min_reads` times in the
/// epoch, in first-access order (blocks used together are laid out together).
pub fn replica_candidates(reads: &[u64], area: &std::ops::Range<u64>, min_reads: u64) -> Vec<u64> {
    let mut count: FxHashMap<u64, (u64, usize)> = FxHashMap::default();
    for (i, &p) in reads.iter().enumerate() {
        if area.contains(&p) {
            continue;
        }
        count.entry(p).or_insert((0, i)).0 += 1;
    }
    let mut out: Vec<(usize, u64)> = count
        .into_iter()
        .filter(|(_, (c, _))| *c >= min_reads)
        .map(|(p, (_, first))| (first, p))
        .collect();
    out.sort_unstable();
    out.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read served whole with the head at page `head`, page distance as the cost.
    fn read_at(s: &mut ReplicaSet, start: u64, len: u64, head: u64) -> ServedRun {
        s.serve_whole(start, len, |p| p.abs_diff(head) as f64)
    }

    fn set(device: u64, free: &[(u64, u64)]) -> ReplicaSet {
        let marks = Watermarks {
            high: 0.0,
            low: 0.0,
            critical: 0.0,
        };
        ReplicaSet::new(device, free.iter().map(|&(s, e)| s..e).collect(), marks)
    }

    #[test]
    fn replicas_go_next_to_the_hot_area_in_first_access_order() {
        let mut s = set(10_000, &[(100, 200), (5_000, 5_100)]);
        let placed = s.place(&[9_000, 9_001, 20, 21], 5_050, 0);
        let slots: Vec<u64> = placed.iter().map(|p| p.1).collect();
        assert_eq!(slots, vec![5_048, 5_049, 5_050, 5_051]);
        assert_eq!(s.replicas(), 4);
        assert_eq!(s.free_pages(), 200);
    }

    #[test]
    fn a_read_uses_the_closest_copy_and_keeps_contiguous_copies_together() {
        let mut s = set(10_000, &[(5_000, 5_100)]);
        s.place(&[9_000, 9_001, 9_002], 5_010, 0);
        let r = read_at(&mut s, 9_000, 3, 5_000);
        assert_eq!(
            r,
            ServedRun {
                page: 5_009,
                len: 3,
                replica: true
            }
        );
        // With the head beside the original, the original wins.
        let r = read_at(&mut s, 9_000, 3, 8_990);
        assert!(!r.replica);
        assert_eq!(s.replica_hits, 3);
        // A read reaching a page with no replica is served whole at home, however close
        // the replicas of its other pages are.
        assert!(!read_at(&mut s, 9_000, 4, 5_000).replica);
        // So is one whose pages' replicas do not follow each other.
        s.place(&[9_010], 5_020, 0);
        s.place(&[9_011], 5_080, 0);
        assert!(!read_at(&mut s, 9_010, 2, 5_020).replica);
        assert!(read_at(&mut s, 9_011, 1, 5_080).replica);
        assert_eq!(s.replica_hits, 4);
    }

    #[test]
    fn a_write_drops_replicas_and_claims_free_space() {
        let mut s = set(10_000, &[(5_000, 5_100)]);
        s.place(&[9_000, 9_001], 5_050, 0);
        let (r0, r1) = (s.replicas_of(9_000)[0].page, s.replicas_of(9_001)[0].page);
        // Writing the original: its replica goes back to free space.
        assert_eq!(s.note_write(9_000, 9_001), vec![r0]);
        assert!(s.replicas_of(9_000).is_empty());
        // The client writing into the free space holding 9_001's replica claims it.
        assert_eq!(s.note_write(r1, r1 + 1), vec![r1]);
        assert!(s.replicas_of(9_001).is_empty());
        assert_eq!(s.free_pages(), 99);
        assert!(!read_at(&mut s, 9_001, 1, r1).replica);
    }

    #[test]
    fn every_pending_replica_is_taken_once_for_copying() {
        let mut s = set(10_000, &[(5_000, 5_100)]);
        s.reserve(&[9_000, 9_001, 9_002], 5_010, 0);
        // One already buffered by a read: it is written from memory, not copied.
        let buffered = s.take_pending(9_000, 9_001);
        let taken = s.take_every_pending();
        let originals: Vec<u64> = taken.iter().map(|p| p.0).collect();
        assert_eq!(originals, vec![9_001, 9_002]);
        assert!(!s.has_pending());
        assert!(s.take_every_pending().is_empty(), "taken once");
        assert!(!read_at(&mut s, 9_001, 1, 5_010).replica, "not yet written");
        let pages: Vec<u64> = taken.iter().map(|p| p.1).chain(buffered).collect();
        s.mark_written(&pages);
        assert!(read_at(&mut s, 9_000, 3, 5_010).replica);
    }

    #[test]
    fn reserved_replicas_serve_reads_only_once_written() {
        let mut s = set(10_000, &[(5_000, 5_100)]);
        s.reserve(&[9_000, 9_001, 9_002], 5_010, 0);
        assert!(s.has_pending());
        // Pending: reads stay on the original even with the head by the replica.
        assert!(!read_at(&mut s, 9_000, 3, 5_009).replica);
        let taken = s.take_pending(9_000, 9_002);
        assert_eq!(taken.len(), 2);
        assert!(s.take_pending(9_000, 9_002).is_empty(), "taken once");
        assert!(
            !read_at(&mut s, 9_000, 1, 5_009).replica,
            "buffered, not written"
        );
        s.mark_written(&taken);
        assert!(read_at(&mut s, 9_000, 1, 5_009).replica);
        // A write drops the pending replica of 9_002 and keeps the count right.
        s.note_write(9_002, 9_003);
        assert!(!s.has_pending());
        // A replica reserved for the same centre is not reserved twice.
        assert!(s.reserve(&[9_000], 5_020, 100).is_empty());
        // A new hot area far from the first gets a second replica (FS2 allows several).
        assert_eq!(s.reserve(&[9_000], 9_500, 100).len(), 1);
        assert_eq!(s.replicas_of(9_000).len(), 2);
    }

    #[test]
    fn trim_frees_and_keeps_replica_pages() {
        let mut s = set(10_000, &[(5_000, 5_010)]);
        s.place(&[9_000], 5_000, 0);
        let r = s.replicas_of(9_000)[0].page;
        s.note_trim(5_000, 5_010);
        assert_eq!(
            s.owner_of(r),
            Some(9_000),
            "fstrim of free space keeps our replica"
        );
        s.note_trim(9_000, 9_001);
        assert!(s.replicas_of(9_000).is_empty());
        assert_eq!(s.free_pages(), 11);
    }

    #[test]
    fn watermarks_limit_and_reclaim_replicas() {
        let marks = Watermarks {
            high: 0.05,
            low: 0.03,
            critical: 0.01,
        };
        // 1000 pages, 100 free: the high mark keeps 50 untouched.
        let mut s = ReplicaSet::new(1_000, std::iter::once(0..100).collect(), marks);
        let placed = s.place(&(500..600).collect::<Vec<_>>(), 50, 0);
        assert_eq!(placed.len(), 50);
        // Read some replicas so they are recently used.
        read_at(&mut s, 500, 10, 0);
        // The client fills 25 of the untouched free pages. At the 21st, 29 are left, below
        // the low mark (30): the 21 least recently used replicas go, 50 are untouched
        // again, and the last 4 writes leave 46.
        let untouched: Vec<u64> = s.available.iter().flatten().take(25).collect();
        for p in untouched {
            s.note_write(p, p + 1);
        }
        assert_eq!(s.replicas(), 29);
        assert_eq!(s.available.total(), 46);
        assert_eq!(
            s.replicas_of(500).len(),
            1,
            "a recently read replica survives"
        );
        // Below the critical mark every replica goes.
        let rest: Vec<u64> = s.available.iter().flatten().collect();
        for p in rest {
            s.note_write(p, p + 1);
        }
        assert_eq!(s.replicas(), 0);
    }

    #[test]
    fn the_verdict_of_the_marks() {
        let m = Watermarks::default(); // 10 %, 5 %, 2 % of 1000 pages: 100, 50, 20
        assert_eq!(m.in_pages(1000), (100, 50, 20));
        assert_eq!(m.verdict(130, 200, 1000), MarkVerdict::Create(30));
        assert_eq!(m.verdict(100, 200, 1000), MarkVerdict::Hold);
        assert_eq!(m.verdict(50, 200, 1000), MarkVerdict::Hold);
        assert_eq!(m.verdict(49, 200, 1000), MarkVerdict::Reclaim(51));
        assert_eq!(m.verdict(10, 19, 1000), MarkVerdict::DropAll);
    }

    #[test]
    fn hot_area_and_candidates() {
        let reads = [10, 11, 500, 501, 502, 500, 501, 502, 11, 900, 900];
        let (area, centre) = hot_area(&reads, 100).unwrap();
        assert_eq!(area, 500..600);
        assert_eq!(centre, 501);
        assert_eq!(replica_candidates(&reads, &area, 2), vec![11, 900]);
    }
}
