//! The on-board cache of a disk: read-ahead segments, replaced least recently used.
//!
//! A read miss claims a segment, which the drive fills with the request and then keeps
//! reading ahead into, sector after sector at media speed, until the segment is full or
//! the next media access interrupts it. A later read whose sectors lie inside a segment is
//! a hit; if the read-ahead has not reached them yet, the hit waits for it. Writes
//! invalidate the segments they overlap. Fixed-size storage: no allocation per request.
//!
//! With write caching, written data waits in a [`WriteBuffer`] (at most the cache's size
//! in sectors) until the drive writes it back to the media; see [`crate::hdd`] for when
//! that happens and how its time is counted.

use std::collections::{BTreeMap, VecDeque};

use crate::DevRequest;

#[derive(Clone, Copy, Debug, Default)]
pub struct Segment {
    pub start: u64,
    /// End (exclusive) of what the read-ahead will have read if not interrupted.
    pub fill_end: u64,
    /// Sectors before `ready_from` are in the cache since `ready_from_ns`.
    pub ready_from: u64,
    pub ready_from_ns: f64,
    /// Media time per sector while reading ahead.
    pub ns_per_sector: f64,
    pub last_use: u64,
    pub valid: bool,
}

impl Segment {
    /// End (exclusive) of the sectors in the cache at time `t_ns`.
    pub fn end_at(&self, t_ns: f64) -> u64 {
        if t_ns <= self.ready_from_ns {
            return self.ready_from;
        }
        let read = ((t_ns - self.ready_from_ns) / self.ns_per_sector) as u64;
        (self.ready_from + read).min(self.fill_end)
    }

    /// When sector `end - 1` will be in the cache.
    pub fn ready_ns(&self, end: u64) -> f64 {
        if end <= self.ready_from {
            self.ready_from_ns
        } else {
            self.ready_from_ns + (end - self.ready_from) as f64 * self.ns_per_sector
        }
    }
}

#[derive(Clone, Debug)]
pub struct Cache {
    segments: Vec<Segment>,
    pub segment_sectors: u32,
    pub write_caching: bool,
    /// Write all cached writes to the media before serving a command that does not
    /// append to them (DiskSim's "Fast write level 2").
    pub flush_before_non_append: bool,
    /// Cached writes not yet on the media (empty without write caching).
    pub dirty: WriteBuffer,
    clock: u64,
    /// The segment whose read-ahead may still run (only the last miss's can).
    pending: Option<usize>,
}

impl Cache {
    pub fn new(segments: u32, segment_sectors: u32, write_caching: bool) -> Cache {
        Cache {
            segments: vec![Segment::default(); segments as usize],
            segment_sectors,
            write_caching,
            flush_before_non_append: false,
            dirty: WriteBuffer::new(segments as u64 * segment_sectors as u64),
            clock: 0,
            pending: None,
        }
    }

    /// The segment holding (or about to hold) all of `[start, end)`.
    pub fn find(&self, start: u64, end: u64) -> Option<usize> {
        self.segments
            .iter()
            .position(|s| s.valid && s.start <= start && end <= s.fill_end)
    }

    pub fn segment(&self, i: usize) -> &Segment {
        &self.segments[i]
    }

    /// Whether segment `i` is the one whose read-ahead may still run.
    pub fn is_pending(&self, i: usize) -> bool {
        self.pending == Some(i)
    }

    pub fn touch(&mut self, i: usize) {
        self.clock += 1;
        self.segments[i].last_use = self.clock;
    }

    /// Where a running read-ahead has taken the head by `t_ns` (its last sector + 1), if
    /// it moved the head past the request that started it. Does not change the cache.
    pub fn reach_at(&self, t_ns: f64) -> Option<u64> {
        let s = &self.segments[self.pending?];
        let end = s.end_at(t_ns);
        (s.valid && s.ready_from < s.fill_end && end > s.ready_from).then_some(end)
    }

    /// Stops the read-ahead at what it has read by `t_ns` (the head leaves for another
    /// access); returns where the read-ahead took the head (its last sector + 1), if it
    /// moved it past the request that started it.
    pub fn interrupt(&mut self, t_ns: f64) -> Option<u64> {
        let reached = self.reach_at(t_ns);
        if let Some(i) = self.pending.take() {
            let s = &mut self.segments[i];
            if s.valid && s.ready_from < s.fill_end {
                let end = s.end_at(t_ns);
                s.ready_from_ns = s.ready_ns(end).min(t_ns);
                s.fill_end = end;
                s.ready_from = end;
            }
        }
        reached
    }

    /// Claims the least recently used segment for a miss on `[start, end)` completed at
    /// `done_ns`; read-ahead runs up to `limit` (the capacity).
    pub fn fill(&mut self, start: u64, end: u64, done_ns: f64, ns_per_sector: f64, limit: u64) {
        // Invalid segments first (rank 0), then the least recently used. A plain loop:
        // `min_by_key` on a (bool, u64) tuple compiled to store-forwarding stalls here.
        let mut i = 0;
        let mut best = u64::MAX;
        for (j, seg) in self.segments.iter().enumerate() {
            let rank = if seg.valid { seg.last_use } else { 0 };
            if rank < best {
                (i, best) = (j, rank);
            }
        }
        let fill_end = (start + self.segment_sectors as u64).min(limit).max(end);
        self.segments[i] = Segment {
            start,
            fill_end,
            ready_from: end,
            ready_from_ns: done_ns,
            ns_per_sector,
            last_use: 0,
            valid: true,
        };
        self.touch(i);
        self.pending = Some(i);
    }

    /// Drops the segments that overlap `[start, end)` (the data there changes).
    pub fn invalidate(&mut self, start: u64, end: u64) {
        for s in self.segments.iter_mut() {
            if s.valid && s.start < end && start < s.fill_end {
                s.valid = false;
            }
        }
    }
}

/// Cached writes waiting to be written back, oldest first, holding at most `limit`
/// sectors. Rewriting sectors that are still waiting adds nothing (the cache absorbs it).
#[derive(Clone, Debug, Default)]
pub struct WriteBuffer {
    queue: VecDeque<DevRequest>,
    /// Writes taken off the queue so far: the number of the oldest one waiting.
    popped: u64,
    /// (start, sectors) -> number of the newest waiting write with exactly that extent.
    index: BTreeMap<(u64, u32), u64>,
    sectors: u64,
    limit: u64,
    /// Most writes waiting at once (the drive's write segments).
    max_writes: usize,
}

/// How many queued extents before a read's start [`WriteBuffer::covers`] looks at.
const COVER_LOOKBACK: usize = 8;

impl WriteBuffer {
    pub fn new(limit: u64) -> WriteBuffer {
        WriteBuffer {
            limit,
            max_writes: usize::MAX,
            ..WriteBuffer::default()
        }
    }

    /// At most `n` writes wait at once (DiskSim's "Maximum number of write segments"):
    /// a write that would be one more waits for a write-back, unless it appends.
    pub fn set_max_writes(&mut self, n: usize) {
        self.max_writes = n.max(1);
    }

    pub fn max_writes(&self) -> usize {
        self.max_writes
    }

    /// Whether a write-segment limit bounds the writes waiting (then the drive orders
    /// them nearest first: few enough to compare).
    pub fn bounded(&self) -> bool {
        self.max_writes != usize::MAX
    }

    /// Replaces the waiting writes with `writes` (the same writes in a new order).
    pub fn reorder(&mut self, writes: Vec<DevRequest>) {
        while self.pop().is_some() {}
        for w in writes {
            self.push(w);
        }
    }

    /// Adds `req`, which starts where the newest waiting write ends, to that write (the
    /// drive combines sequential writes into one segment and one media access).
    pub fn append(&mut self, req: DevRequest) {
        let number = self.popped + self.queue.len() as u64 - 1;
        let newest = self.queue.back_mut().expect("a waiting write to append to");
        let old = (newest.sector, newest.sectors);
        newest.sectors += req.sectors;
        let new = (newest.sector, newest.sectors);
        if self.index.get(&old) == Some(&number) {
            self.index.remove(&old);
        }
        self.index.insert(new, number);
        self.sectors += req.sectors as u64;
    }

    /// Most sectors it holds: the cache's size.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Sectors waiting.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// End (exclusive) of the newest waiting write: a write starting there appends.
    pub fn newest_end(&self) -> Option<u64> {
        self.queue.back().map(|r| r.sector + r.sectors as u64)
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The `i`-th oldest write waiting.
    pub fn get(&self, i: usize) -> Option<&DevRequest> {
        self.queue.get(i)
    }

    /// Whether one waiting write, not counting the `skip` oldest, holds all of
    /// `[start, end)` (a read of it is a hit, a rewrite of it is absorbed). Looks at the
    /// few extents starting nearest before `start`, which finds it unless many
    /// overlapping writes are waiting.
    pub fn covers(&self, start: u64, end: u64, skip: usize) -> bool {
        let oldest = self.popped + skip as u64;
        self.queue.len() > skip
            && self
                .index
                .range(..=(start, u32::MAX))
                .rev()
                .take(COVER_LOOKBACK)
                .any(|(&(s, n), &number)| number >= oldest && end <= s + n as u64)
    }

    pub fn push(&mut self, req: DevRequest) {
        let number = self.popped + self.queue.len() as u64;
        self.index.insert((req.sector, req.sectors), number);
        self.sectors += req.sectors as u64;
        self.queue.push_back(req);
    }

    /// Takes the oldest write (it is on the media now).
    pub fn pop(&mut self) -> Option<DevRequest> {
        let req = self.queue.pop_front()?;
        let key = (req.sector, req.sectors);
        if self.index.get(&key) == Some(&self.popped) {
            self.index.remove(&key);
        }
        self.popped += 1;
        self.sectors -= req.sectors as u64;
        Some(req)
    }
}
