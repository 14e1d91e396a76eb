//! The `fs2` layout variant: FS2's replicas of hot pages in the data area's free space
//! (dynamic data replication in free disk space; docs/references.md), over the plain
//! layout (`fs2`) or BORG's BOPT (`borg+fs2`).
//!
//! The replica table is the free-space crate's [`ReplicaSet`], the one the engine is to
//! use online. A read is served whole by one copy, the original or replicas holding all
//! of it contiguously. Which copy is chosen when the device takes the read off its
//! queue, merged or not, from where its head is then ([`Replicated::dispatch`]; FS2's
//! "read whichever copy is closest to the head"), unless the read was queued on a
//! replica on arrival: one that continues a recent read, or any (routing
//! [`ReadRouting::Streams`]) when home continues none. Queued home, a burst merges
//! exactly as on the plain layout; queued on replicas laid out in use order, scattered
//! reads merge into one stream. The admission's trial picks the routing that serves the
//! workload best. A write drops the replicas of the pages it writes (FS2 makes no
//! update writes) and takes back any free page it lands on, replica or not; the
//! watermarks reclaim replicas when writes eat the free space. Replicas are reserved at
//! a reconfiguration and either written from the application's next reads of their
//! originals, in batches (FS2's way; charged to the normal phase that pays it), or
//! copied at once ([`Replicated::copy_pending`]; the reconfiguration's copies): the
//! admission weighs both as it weighs every other policy's copies.

use reblock_device::DevRequest;
use reblock_freespace::{FreeExtents, ReplicaSet, Watermarks};
use reblock_layout::{Geometry, PhysIo, ScheduleOptions};
use reblock_plan::{PlacedRange, Placement};
use rustc_hash::FxHashSet;
use std::collections::VecDeque;

use crate::layout::{CopyIo, Layout};
use crate::EvalError;

/// A data-area page already holding a replica this close (pages) to where a new plan
/// wants it stays where it is: half a hot-area window.
fn near_pages(geo: &Geometry) -> u64 {
    reblock_plan::policy::HOT_AREA_BYTES / geo.page.bytes() / 2
}

/// Replica pages whose data, read by the application, waits in memory until this many
/// are written together (4 MiB of 4 KiB pages): one write of consecutive replicas per
/// batch, instead of a seek to the hot area after every read that makes one.
const WRITE_BATCH_PAGES: usize = 1024;

/// Requests after which buffered replicas are written even when the batch is not full
/// (a write-behind timer, counted in requests: a small hot set would otherwise wait
/// in memory for ever).
const WRITE_BEHIND_REQUESTS: u64 = 64;

/// Gaps of free or reserved pages up to this many that a batch of replica writes is
/// written through rather than positioned past: what they hold nobody reads, and on the
/// development capture (hdd:wd2500aaks) writing through 1 MiB gaps cut the cost of
/// making R1's replicas from 16.95 s to 11.48 s (64 pages: 13.28 s).
const WRITE_THROUGH_PAGES: u64 = 256;

/// How arriving reads are queued; either way a read queued home has its copy chosen
/// when the device takes it ([`Replicated::dispatch`]), and a read whose replica copy
/// continues a recent read goes there at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadRouting {
    /// Else home when home continues a recent read, else to a replica copy of all of
    /// it: replicas laid out in use order serve scattered reads as one stream (an
    /// application start-up).
    #[default]
    Streams,
    /// Else home, where the queue merges it with its neighbours as on the plain layout
    /// (bursts contiguous at home: a development workload).
    Dispatch,
}

/// How long read replica data waits in memory for more to write with it (the
/// admission's trial picks it with the [`ReadRouting`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteBehind {
    /// [`WRITE_BATCH_PAGES`] or [`WRITE_BEHIND_REQUESTS`]: a small hot set read in one
    /// burst (an application start-up) is written before its next burst.
    #[default]
    Prompt,
    /// [`GATHERED_BATCH_PAGES`] or [`GATHERED_BEHIND_REQUESTS`]: replicas of a large
    /// working set read a few at a time between other reads (a development workload)
    /// wait for their neighbours, so a batch is a few long writes instead of many short
    /// ones.
    Gathered,
}

impl WriteBehind {
    /// (pages a batch is written at, requests after which it is written anyway).
    fn limits(self) -> (usize, u64) {
        match self {
            WriteBehind::Prompt => (WRITE_BATCH_PAGES, WRITE_BEHIND_REQUESTS),
            WriteBehind::Gathered => (GATHERED_BATCH_PAGES, GATHERED_BEHIND_REQUESTS),
        }
    }
}

/// [`WriteBehind::Gathered`]'s batch: 64 MiB of 4 KiB pages.
const GATHERED_BATCH_PAGES: usize = 16384;

/// [`WriteBehind::Gathered`]'s write-behind timer, in requests.
const GATHERED_BEHIND_REQUESTS: u64 = 8192;

/// Reads remembered for [`Replicated::arriving`]: a drive's read-ahead segments are
/// about this many (16 on the desktop drive).
const RECENT_READS: usize = 16;

/// A layout with FS2 replicas over a base layout (plain or BOPT).
#[derive(Clone, Debug)]
pub struct Replicated {
    pub base: Layout,
    pub set: ReplicaSet,
    /// Replica pages whose original the application has read, their data held in memory
    /// until the batch is written.
    buffered: Vec<u64>,
    /// Replica pages whose write is queued: reads may use them once the device has taken
    /// the write (a read queued before it must not read the replica unwritten).
    writing: FxHashSet<u64>,
    /// Where the last [`RECENT_READS`] reads issued or served ended (device sectors).
    recent_ends: VecDeque<u64>,
    /// How arriving reads are queued (the admission's trial picks it).
    pub routing: ReadRouting,
    /// How long replica data waits to be written (the admission's trial picks it).
    pub write_behind: WriteBehind,
    /// Requests mapped, and the request that buffered the oldest page in `buffered`.
    requests: u64,
    buffered_at: u64,
    /// Replica pages written so far (each from the read of its original).
    pub written_pages: u64,
    /// Replica writes cost no I/O and the replicas are readable at once: the guard's
    /// twin ([`Replicated::judging_reads`]).
    writes_free: bool,
    /// Where in `out` the last [`Replicated::map`] put replica writes, if it wrote any
    /// (their purpose is a replica's, not the request's: see `SharedMapper`).
    pub(crate) replica_writes_from: Option<usize>,
}

impl Replicated {
    /// No replica yet; `free` are the data area's free pages.
    pub fn new(base: Layout, free: FreeExtents) -> Replicated {
        let geo = *base.geometry();
        Replicated {
            set: ReplicaSet::new(geo.fs_pages, free, Watermarks::default()),
            base,
            buffered: Vec::new(),
            writing: FxHashSet::default(),
            recent_ends: VecDeque::new(),
            routing: ReadRouting::default(),
            write_behind: WriteBehind::default(),
            requests: 0,
            buffered_at: 0,
            written_pages: 0,
            writes_free: false,
            replica_writes_from: None,
        }
    }

    /// Appends the device requests serving `req` to `out`: reads as the base layout
    /// places them (a replica is chosen at dispatch, [`Replicated::dispatch`]). True
    /// when the base layout served it entirely from its optimized region, or when every
    /// page of a read has a written replica that may serve it. Guarded, reads ignore the
    /// replicas (the plain layout's behaviour).
    pub fn map(
        &mut self,
        req: &DevRequest,
        out: &mut Vec<DevRequest>,
        phys: &mut Vec<PhysIo>,
        guarded: bool,
    ) -> bool {
        let geo = *self.base.geometry();
        let start = out.len();
        self.replica_writes_from = None;
        let (first, end) = page_span(&geo, req.sector, req.sectors);
        if req.write {
            let freed = self.set.note_write(first, end);
            self.forget_buffered(&freed);
        }
        phys.clear();
        let mut hit = self.base.map(req, out, phys, guarded);
        if !req.write && !guarded && !hit && self.set.replicas() > 0 {
            hit = (first..end).all(|p| self.set.has_written_replica(p));
            self.arriving(&mut out[start..]);
        }
        if !req.write && self.set.has_pending() {
            // FS2's piggyback: the pages just read are in memory, so their reserved
            // replicas are written from there, never read a second time. Under the guard
            // too: the guard decides where reads go, not what the plan makes.
            let taken = self.set.take_pending(first, end);
            if self.buffered.is_empty() {
                self.buffered_at = self.requests;
            }
            self.buffered.extend(taken);
        }
        self.requests += 1;
        let (batch_pages, behind) = self.write_behind.limits();
        let due = self.requests - self.buffered_at >= behind;
        if self.buffered.len() >= batch_pages || (due && !self.buffered.is_empty()) {
            self.write_buffered(out);
        }
        hit
    }

    /// Where the device reads `req` (device sectors, a read the base layout sent to the
    /// data area, possibly several merged by the queue): the copy that holds all of it
    /// contiguously and that `cost` (the device's service estimate from its head now)
    /// rates cheapest, the original on a tie ([`reblock_freespace::closest_whole_copy`]).
    pub fn dispatch(&mut self, req: &DevRequest, cost: &dyn Fn(&DevRequest) -> u64) -> DevRequest {
        if req.write {
            if !self.writing.is_empty() {
                self.note_dispatched_write(req);
            }
            return *req;
        }
        let read = self.whole_copy(req, |c| cost(c) as f64);
        self.note_read(&read);
        read
    }

    /// The copy of read `req` (device sectors) that holds all of it contiguously and
    /// that `cost` rates cheapest, the original on a tie
    /// ([`reblock_freespace::closest_whole_copy`]); `req` itself when it is not a read
    /// of data-area originals.
    fn whole_copy(&mut self, req: &DevRequest, cost: impl Fn(&DevRequest) -> f64) -> DevRequest {
        if self.set.replicas() == 0 {
            return *req;
        }
        let geo = *self.base.geometry();
        let Some(fs) = fs_sector_of(&geo, req.sector, req.sectors) else {
            return *req;
        };
        let ps = geo.page.sectors();
        let (first, end) = page_span(&geo, fs, req.sectors);
        let offset = fs - first * ps;
        // A copy starting at `page` and holding the request's sectors as one extent.
        let copy = |page: u64| {
            let at = page * ps + offset;
            let mut extents = geo.data_extents(at, u64::from(req.sectors));
            let whole = extents.next().map(|(e, _)| e.start_sector);
            whole
                .filter(|_| extents.next().is_none())
                .map(|sector| DevRequest { sector, ..*req })
        };
        let run = self.set.serve_whole(first, end - first, |page| {
            copy(page).map_or(f64::INFINITY, |c| cost(&c))
        });
        if run.replica {
            copy(run.page).unwrap_or(*req)
        } else {
            *req
        }
    }

    /// Remembers where read `read` ends (see [`Replicated::arriving`]).
    fn note_read(&mut self, read: &DevRequest) {
        if self.recent_ends.len() == RECENT_READS {
            self.recent_ends.pop_front();
        }
        self.recent_ends
            .push_back(read.sector + u64::from(read.sectors));
    }

    /// Reads arriving (`out`, the data-area reads the base layout issued), queued where
    /// [`Replicated::routing`] says.
    fn arriving(&mut self, out: &mut [DevRequest]) {
        for io in out.iter_mut().filter(|io| !io.write) {
            let home = *io;
            // Taken, not cloned (this runs for every arriving read): `whole_copy` never
            // reads `recent_ends`, and it is put back before `note_read` updates it.
            let recent = std::mem::take(&mut self.recent_ends);
            let continues = |c: &DevRequest| recent.contains(&c.sector);
            // Replicas continuing a recent read (issued, so the queue may merge them, or
            // served, so the drive may have read ahead into them) come first.
            let next = self.whole_copy(io, |c| {
                if c.sector != home.sector && continues(c) {
                    0.0
                } else {
                    1.0
                }
            });
            *io = if next != home || continues(&home) {
                next
            } else {
                match self.routing {
                    ReadRouting::Streams => {
                        self.whole_copy(io, |c| if c.sector == home.sector { 1.0 } else { 0.0 })
                    }
                    ReadRouting::Dispatch => home,
                }
            };
            self.recent_ends = recent;
            let read = *io;
            self.note_read(&read);
            if read != home {
                // A neighbour at home still continues this read there.
                self.note_read(&home);
            }
        }
    }

    /// This layout as the guard's twin judges it: replica writes cost nothing and make
    /// their replicas readable at once. The guard decides where reads go; writing the
    /// replicas is the plan's making, weighed once by the admission that installed it
    /// (or kept it). A twin that paid them looked slower than the plain layout while the
    /// replicas were being written, the guard sent the reads home, and the writes went
    /// on under it without ever being read from: on the development capture 36 of the
    /// 40 epochs of the phase after the first plan's ran guarded.
    pub fn judging_reads(mut self) -> Replicated {
        self.writes_free = true;
        self
    }

    /// Writes the buffered replicas, consecutive pages as one request, in address order.
    fn write_buffered(&mut self, out: &mut Vec<DevRequest>) {
        if self.writes_free {
            self.set.mark_written(&self.buffered);
            self.buffered.clear();
            return;
        }
        let geo = *self.base.geometry();
        let ps = geo.page.sectors();
        self.buffered.sort_unstable();
        let gap = WRITE_THROUGH_PAGES;
        let floor = out.len();
        self.replica_writes_from = Some(floor);
        let mut last_page: Option<u64> = None;
        for &page in &self.buffered {
            let at = geo.data_sector(page * ps);
            let through = last_page.is_some_and(|l| {
                page > l + 1
                    && page - l - 1 <= gap
                    && (l + 1..page).all(|p| self.set.holds_nothing(p))
                    && geo.data_sector((l + 1) * ps) == geo.data_sector(l * ps) + ps
                    && at == geo.data_sector(l * ps) + (page - l) * ps
            });
            match out[floor..].last_mut() {
                Some(last) if last.sector + u64::from(last.sectors) == at => {
                    last.sectors += ps as u32;
                }
                Some(last) if through => {
                    last.sectors = (at + ps - last.sector) as u32;
                }
                _ => out.push(DevRequest {
                    sector: at,
                    sectors: ps as u32,
                    write: true,
                }),
            }
            last_page = Some(page);
        }
        self.writing.extend(self.buffered.iter().copied());
        self.written_pages += self.buffered.len() as u64;
        self.buffered.clear();
    }

    /// Forgets buffered data of replicas that were dropped (`freed` pages).
    fn forget_buffered(&mut self, freed: &[u64]) {
        if !freed.is_empty() && !self.buffered.is_empty() {
            self.buffered.retain(|p| !freed.contains(p));
        }
        for p in freed {
            self.writing.remove(p);
        }
    }

    /// The device takes write `req` (device sectors): the replicas it writes become
    /// readable.
    fn note_dispatched_write(&mut self, req: &DevRequest) {
        let geo = *self.base.geometry();
        let Some(fs) = fs_sector_of(&geo, req.sector, req.sectors) else {
            return;
        };
        let (first, end) = page_span(&geo, fs, req.sectors);
        let written: Vec<u64> = (first..end).filter(|p| self.writing.remove(p)).collect();
        self.set.mark_written(&written);
    }

    /// Reconfigures the base layout to `placement`, then keeps exactly the replicas it
    /// names: those of pages it no longer names are dropped (their space is free again,
    /// at no I/O), new ones are reserved near their target, to be written from the next
    /// read of their originals (no copy I/O here: FS2 never reads a block to replicate it).
    pub fn reconfigure(
        &mut self,
        placement: &Placement,
        opts: &ScheduleOptions,
    ) -> Result<CopyIo, EvalError> {
        let io = self.base.reconfigure(placement, opts)?;
        let geo = *self.base.geometry();
        let wanted: FxHashSet<u64> = placement
            .replicas
            .iter()
            .flat_map(|r| r.fs_page..r.fs_page + r.pages)
            .collect();
        let freed = self.set.retain_originals(|p| wanted.contains(&p));
        self.forget_buffered(&freed);
        let mut by_target: Vec<(u64, Vec<u64>)> = Vec::new();
        for r in &placement.replicas {
            let pages = (r.fs_page..r.fs_page + r.pages).filter(|&p| p < geo.fs_pages);
            match by_target.last_mut() {
                Some((t, v)) if *t == r.target => v.extend(pages),
                _ => by_target.push((r.target, pages.collect())),
            }
        }
        for (target, candidates) in by_target {
            self.set.reserve(&candidates, target, near_pages(&geo));
        }
        Ok(io)
    }
}

impl Replicated {
    /// Copies every replica still waiting for its original's read, now, as BORG copies
    /// its pages at a reconfiguration: the originals read (in address order, through the
    /// copy scheduler's staging batches), the replicas written, all of it the
    /// reconfiguration phase's I/O. Made in the idle time between phases, a replica then
    /// serves the first read of its original in the next phase, not the one after: a
    /// plan made after one day of a start-up serves the next day. This is reblock's
    /// addition to FS2, which only writes replicas from the application's reads; the
    /// admission chooses between the two per plan.
    pub fn copy_pending(&mut self, opts: &ScheduleOptions) -> CopyIo {
        let pairs = self.set.take_every_pending();
        let geo = *self.base.geometry();
        let batch = opts.staging_pages.max(1) as usize;
        let io = crate::layout::copy_data_pages(&geo, &pairs, opts, batch);
        let written: Vec<u64> = pairs.iter().map(|p| p.1).collect();
        self.set.mark_written(&written);
        io
    }
}

/// Sets how `layout`'s replicas route arriving reads and how long their data waits to
/// be written (other layouts have none).
pub fn set_routing(layout: &mut Layout, (routing, write_behind): (ReadRouting, WriteBehind)) {
    if let Layout::Replicated(r) = layout {
        r.routing = routing;
        r.write_behind = write_behind;
    }
}

/// [`Replicated::copy_pending`] of `layout`'s replicas (other layouts have none to copy).
pub fn copy_pending_replicas(layout: &mut Layout, opts: &ScheduleOptions) -> CopyIo {
    match layout {
        Layout::Replicated(r) => r.copy_pending(opts),
        _ => CopyIo::default(),
    }
}

/// `placement` without the replicas of pages its region (BORG's read cache) holds: a
/// read of such a page is served from the region, never from a replica.
pub fn outside_region(mut placement: Placement) -> Placement {
    if placement.ranges.is_empty() || placement.replicas.is_empty() {
        return placement;
    }
    let held: FxHashSet<u64> = placement.fs_pages().into_iter().collect();
    let kept = replica_pages(&placement).filter(|(p, _)| !held.contains(p));
    placement.replicas = replica_ranges_of(kept);
    placement
}

/// Each page `placement` replicates, with the page its replica should lie near, in the
/// placement's order.
pub(crate) fn replica_pages(placement: &Placement) -> impl Iterator<Item = (u64, u64)> + '_ {
    (placement.replicas.iter())
        .flat_map(|r| (r.fs_page..r.fs_page + r.pages).map(move |p| (p, r.target)))
}

/// (page, target) pairs, in order, as replica ranges: consecutive pages with one target
/// make one range.
pub(crate) fn replica_ranges_of(pages: impl Iterator<Item = (u64, u64)>) -> Vec<PlacedRange> {
    let mut ranges: Vec<PlacedRange> = Vec::new();
    for (page, target) in pages {
        match ranges.last_mut() {
            Some(l) if l.fs_page + l.pages == page && l.target == target => l.pages += 1,
            _ => ranges.push(PlacedRange {
                fs_page: page,
                pages: 1,
                target,
            }),
        }
    }
    ranges
}

/// The pages `[first, end)` that `sectors` sectors from `sector` touch (in the
/// address space `sector` is in: device or FS).
fn page_span(geo: &Geometry, sector: u64, sectors: u32) -> (u64, u64) {
    let ps = geo.page.sectors();
    (sector / ps, (sector + u64::from(sectors)).div_ceil(ps))
}

/// The FS sector at device sector `sector` when `[sector, sector + sectors)` lies in the
/// data area as one extent (not in the BOPT, not across it).
fn fs_sector_of(geo: &Geometry, sector: u64, sectors: u32) -> Option<u64> {
    let past_hole = geo.data_hole_at.saturating_add(geo.data_hole_sectors);
    let fs = if sector >= past_hole {
        sector - geo.data_hole_sectors
    } else {
        sector
    };
    let end = fs + u64::from(sectors);
    let one_extent = !(fs < geo.data_hole_at && geo.data_hole_at < end);
    (end <= geo.data_sectors() && geo.data_sector(fs) == sector && one_extent).then_some(fs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_layout::{BoptConfig, BoptPosition};
    use reblock_plan::{PlacedRange, TargetSpace};
    use reblock_trace::{Op, Request, NO_COMMAND};

    fn geo_config() -> BoptConfig {
        BoptConfig {
            page_sectors: 8,
            data_sectors: 8 * 1_000_000,
            bopt_pages: 16,
            segment_pages: 4,
            write_buffer_fraction: 0.25,
            position: BoptPosition::End,
            meta_sectors: 0,
        }
    }

    fn geo() -> Geometry {
        Geometry::new(&geo_config()).unwrap()
    }

    /// Free pages 100_000..100_100, 200_000..320_000 and 600_000..600_100 (above the 10%
    /// high watermark, so replicas may be made).
    fn layout() -> Replicated {
        let free: FreeExtents = [100_000..100_100, 200_000..320_000, 600_000..600_100]
            .into_iter()
            .collect();
        Replicated::new(Layout::Home(geo()), free)
    }

    fn read(page: u64) -> DevRequest {
        DevRequest {
            sector: page * 8,
            sectors: 8,
            write: false,
        }
    }

    /// The device requests serving `req`, each taken off the queue in order with the
    /// head at device sector `head` (distance as the cost).
    fn serve(r: &mut Replicated, req: &DevRequest, head: u64) -> Vec<DevRequest> {
        let (mut out, mut phys) = (Vec::new(), Vec::new());
        r.map(req, &mut out, &mut phys, false);
        for io in out.iter_mut() {
            *io = r.dispatch(io, &|c| c.sector.abs_diff(head));
        }
        out
    }

    #[test]
    fn a_read_goes_to_the_copy_the_device_reaches_first() {
        let mut r = layout();
        r.set.place(&[900_000], 100_050, 0);
        r.set.place(&[900_000], 600_050, 0);
        let copies: Vec<u64> = std::iter::once(900_000)
            .chain(r.set.replicas_of(900_000).iter().map(|c| c.page))
            .collect();
        assert_eq!(copies.len(), 3);
        let mut chosen = std::collections::BTreeSet::new();
        for head in [0, 95_000, 500_000, 640_000, 899_000, 999_000] {
            // A fresh drive whose head has just read page `head`.
            let mut built = reblock_device::parse_spec("hdd:cheetah15k5").unwrap();
            let dev = &mut built.members[0];
            let now = dev.service(0, &read(head)).total_ns;
            let cost = |c: &DevRequest| dev.estimate_ns(now, c);
            let best = copies
                .iter()
                .map(|&p| read(p))
                .min_by_key(|c| (cost(c), c.sector != 900_000 * 8))
                .unwrap();
            assert_eq!(
                r.dispatch(&read(900_000), &cost),
                best,
                "head at page {head}"
            );
            chosen.insert(best.sector);
        }
        assert!(
            chosen.len() >= 2,
            "the original and a replica, each from some head"
        );
        assert!(r.set.replica_hits > 0);
    }

    #[test]
    fn contiguous_replicas_are_read_as_one_request() {
        let mut r = layout();
        r.set.place(&[900_000, 900_001, 900_002], 100_010, 0);
        let out = serve(
            &mut r,
            &DevRequest {
                sector: 900_000 * 8,
                sectors: 24,
                write: false,
            },
            100_000 * 8,
        );
        let first = r.set.replicas_of(900_000)[0].page;
        assert_eq!(
            out,
            vec![DevRequest {
                sector: first * 8,
                sectors: 24,
                write: false
            }]
        );
    }

    #[test]
    fn a_write_drops_the_replica_and_claims_free_space() {
        let mut r = layout();
        r.set.place(&[900_000, 900_001], 100_050, 0);
        let free = r.set.free_pages();
        // Writing the original drops its replica; the read after goes home.
        let write = DevRequest {
            write: true,
            ..read(900_000)
        };
        assert_eq!(serve(&mut r, &write, 0), vec![write]);
        assert!(r.set.replicas_of(900_000).is_empty());
        assert_eq!(
            serve(&mut r, &read(900_000), 100_050 * 8)[0].sector,
            900_000 * 8
        );
        // A client write into the free page holding 900_001's replica takes it back.
        let slot = r.set.replicas_of(900_001)[0].page;
        serve(
            &mut r,
            &DevRequest {
                write: true,
                ..read(slot)
            },
            0,
        );
        assert!(r.set.replicas_of(900_001).is_empty());
        assert_eq!(r.set.free_pages(), free - 1);
        assert_eq!(
            serve(&mut r, &read(900_001), 100_050 * 8)[0].sector,
            900_001 * 8
        );
    }

    #[test]
    fn replicas_are_written_from_the_applications_reads_never_read_twice() {
        let mut r = layout();
        let mut placement = Placement::empty("fs2", &Default::default());
        placement.space = TargetSpace::ReadCache;
        let n = WRITE_BATCH_PAGES as u64;
        placement.replicas = vec![PlacedRange {
            fs_page: 900_000,
            pages: n,
            target: 250_000,
        }];
        let opts = ScheduleOptions::default();
        // Reconfiguring only reserves: no copy I/O.
        let io = r.reconfigure(&placement, &opts).unwrap();
        assert!(io.requests.is_empty() && io.bytes_moved == 0);
        assert_eq!(r.set.replicas(), n);
        // The application reads the originals: one read, then the whole batch of
        // replicas written from it as one request, nothing read a second time.
        let whole = DevRequest {
            sector: 900_000 * 8,
            sectors: (n * 8) as u32,
            write: false,
        };
        let out = serve(&mut r, &whole, 0);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0], whole);
        let first = r.set.replicas_of(900_000)[0].page;
        assert_eq!(
            out[1],
            DevRequest {
                sector: first * 8,
                sectors: (n * 8) as u32,
                write: true
            }
        );
        assert_eq!(r.written_pages, n);
        // The next read with the head by the hot area comes from the replicas.
        let out = serve(&mut r, &whole, 250_000 * 8);
        assert_eq!(
            out,
            vec![DevRequest {
                sector: first * 8,
                ..whole
            }]
        );
        // The same plan again reserves nothing; an empty one drops all at no I/O.
        assert!(r
            .reconfigure(&placement, &opts)
            .unwrap()
            .requests
            .is_empty());
        assert_eq!(r.set.replicas(), n);
        placement.replicas.clear();
        assert!(r
            .reconfigure(&placement, &opts)
            .unwrap()
            .requests
            .is_empty());
        assert_eq!(r.set.replicas(), 0);
        assert_eq!(r.set.free_pages(), 120_200);
    }

    /// [`layout`] with replicas of pages 900_000 and 900_001 reserved near page 100_050.
    fn two_reserved() -> Replicated {
        let mut r = layout();
        let mut placement = Placement::empty("fs2", &Default::default());
        placement.replicas = vec![PlacedRange {
            fs_page: 900_000,
            pages: 2,
            target: 100_050,
        }];
        r.reconfigure(&placement, &ScheduleOptions::default())
            .unwrap();
        r
    }

    #[test]
    fn a_write_before_the_batch_is_written_drops_its_buffered_replica() {
        let mut r = two_reserved();
        // Read: both replicas wait in memory (the batch is not full).
        assert_eq!(serve(&mut r, &read(900_000).with_sectors(16), 0).len(), 1);
        assert_eq!(r.buffered.len(), 2);
        // The application overwrites page 900_000: its replica and buffered data go.
        let write = DevRequest {
            write: true,
            ..read(900_000)
        };
        serve(&mut r, &write, 0);
        assert_eq!(r.buffered.len(), 1);
        assert!(r.set.replicas_of(900_000).is_empty());
        // The buffered replica is not read before it is written.
        assert_eq!(
            serve(&mut r, &read(900_001), 100_000 * 8)[0].sector,
            900_001 * 8
        );
        let mut out = Vec::new();
        r.write_buffered(&mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].write);
        // Nor while its write waits in the queue: only once the device has taken it.
        let home = read(900_001);
        assert_eq!(r.dispatch(&home, &|c| c.sector.abs_diff(100_000 * 8)), home);
        assert_eq!(r.dispatch(&out[0], &|_| 0), out[0]);
        assert_eq!(serve(&mut r, &home, 100_000 * 8)[0].sector, out[0].sector);
    }

    #[test]
    fn the_guards_twin_reads_replicas_at_once_and_pays_no_replica_writes() {
        let mut r = two_reserved();
        let both = read(900_000).with_sectors(16);
        let mut twin = r.clone().judging_reads();
        for l in [&mut r, &mut twin] {
            assert_eq!(serve(l, &both, 0), vec![both]);
        }
        // The layout writes its batch of replicas; the twin writes nothing, and its
        // replicas serve the next read by the hot area at once.
        let (mut out, mut twin_out) = (Vec::new(), Vec::new());
        r.write_buffered(&mut out);
        twin.write_buffered(&mut twin_out);
        assert_eq!(out.len(), 1);
        assert!(out[0].write);
        assert!(twin_out.is_empty(), "{twin_out:?}");
        let replica = twin.set.replicas_of(900_000)[0].page;
        assert_eq!(serve(&mut twin, &both, 100_000 * 8)[0].sector, replica * 8);
        // The layout itself reads them only once the device has taken the write.
        assert_eq!(serve(&mut r, &both, 100_000 * 8), vec![both]);
    }

    #[test]
    fn gathered_replica_data_waits_past_the_prompt_timer() {
        let mut prompt = two_reserved();
        let mut gathered = prompt.clone();
        gathered.write_behind = WriteBehind::Gathered;
        let both = read(900_000).with_sectors(16);
        let writes = |r: &mut Replicated, requests: u64| {
            let mut n = serve(r, &both, 0).iter().filter(|io| io.write).count();
            for k in 1..requests {
                n += serve(r, &read(500_000 + k), 0)
                    .iter()
                    .filter(|io| io.write)
                    .count();
            }
            n
        };
        // Prompt: the two replicas are written once 64 requests have passed.
        assert_eq!(writes(&mut prompt, WRITE_BEHIND_REQUESTS + 1), 1);
        assert_eq!(prompt.written_pages, 2);
        // Gathered: still in memory, waiting for neighbours, until its own timer.
        assert_eq!(writes(&mut gathered, WRITE_BEHIND_REQUESTS + 1), 0);
        assert_eq!(gathered.buffered.len(), 2);
        let more = GATHERED_BEHIND_REQUESTS - WRITE_BEHIND_REQUESTS;
        let mut n = 0;
        for k in 0..more {
            n += serve(&mut gathered, &read(600_000 + k), 0)
                .iter()
                .filter(|io| io.write)
                .count();
        }
        assert_eq!((n, gathered.written_pages), (1, 2));
    }

    /// A data area of 50 million pages on the desktop drive, free pages 100_000..100_100
    /// near the start, where a fresh drive's head is.
    fn wide_layout(routing: ReadRouting) -> Replicated {
        let geo = Geometry::new(&BoptConfig {
            data_sectors: 8 * 50_000_000,
            ..geo_config()
        })
        .unwrap();
        let free: FreeExtents = std::iter::once(100_000..100_100).collect();
        let mut r = Replicated::new(Layout::Home(geo), free);
        r.set = ReplicaSet::new(
            geo.fs_pages,
            std::iter::once(100_000..100_100).collect(),
            Watermarks {
                high: 0.0,
                low: 0.0,
                critical: 0.0,
            },
        );
        r.routing = routing;
        r
    }

    /// One-page reads of `pages`, all arriving at once.
    fn burst(pages: impl Iterator<Item = u64>) -> Vec<Request> {
        pages
            .map(|p| Request::try_new(0, None, NO_COMMAND, 0, p * 8, 8, Op::Read).unwrap())
            .collect()
    }

    /// The device I/Os serving `reqs` through `r` on the desktop drive, and the pages
    /// replicas served.
    fn replayed(r: Replicated, reqs: &[Request]) -> (u64, u64) {
        let shared = crate::layout::share(Layout::Replicated(Box::new(r)));
        let m = crate::replay::normal(
            "hdd:wd2500aaks",
            1.0,
            reqs.iter().copied(),
            1,
            shared.clone(),
            &[],
            1,
        )
        .unwrap();
        let cell = shared.lock().unwrap();
        let Layout::Replicated(r) = &cell.layout else {
            unreachable!("the layout stays replicated")
        };
        (m.summary.ios, r.set.replica_hits)
    }

    #[test]
    fn a_burst_that_merges_at_home_stays_one_io_with_replicas_present() {
        let far = 45_000_000;
        let reqs = burst(far..far + 8);
        // The queue merges the burst into one read.
        assert_eq!(replayed(wide_layout(ReadRouting::Dispatch), &reqs), (1, 0));
        // Replicas of every other page, by the head: no copy holds the merged read
        // whole, so it is still one read, at home (chosen at arrival, the replicas split
        // it into eight).
        let mut r = wide_layout(ReadRouting::Dispatch);
        for p in (far..far + 8).step_by(2) {
            r.set.place(&[p], 100_050, 0);
        }
        assert_eq!(replayed(r, &reqs), (1, 0));
        // Contiguous replicas of every page, by the head: the merged read goes there.
        let mut r = wide_layout(ReadRouting::Dispatch);
        r.set.place(&(far..far + 8).collect::<Vec<_>>(), 100_010, 0);
        assert_eq!(replayed(r, &reqs), (1, 8));
    }

    #[test]
    fn scattered_reads_laid_out_in_use_order_are_read_as_one_stream() {
        let far = 45_000_000;
        let pages: Vec<u64> = (0..8).map(|k| far + 1000 * k).collect();
        let reqs = burst(pages.iter().copied());
        let mut streams = wide_layout(ReadRouting::Streams);
        streams.set.place(&pages, 100_010, 0);
        let mut dispatch = streams.clone();
        dispatch.routing = ReadRouting::Dispatch;
        // At home they are eight reads; queued on their replicas, which follow each
        // other in use order, the queue merges them into one.
        assert_eq!(replayed(streams, &reqs), (1, 8));
        // Queued home, each is taken on its own (to a replica or not).
        assert_eq!(replayed(dispatch, &reqs).0, 8);
    }

    #[test]
    fn a_part_drops_the_replicas_of_pages_its_region_holds() {
        let mut placement = Placement::empty("borg+fs2", &Default::default());
        let range = |fs_page, pages, target| PlacedRange {
            fs_page,
            pages,
            target,
        };
        placement.ranges = vec![range(11, 2, 0)];
        placement.replicas = vec![range(10, 4, 500), range(20, 1, 500)];
        let part = outside_region(placement.clone());
        assert_eq!(
            part.replicas,
            vec![range(10, 1, 500), range(13, 1, 500), range(20, 1, 500)]
        );
        assert_eq!(part.ranges, placement.ranges);
        // Without a region, every replica stays.
        placement.ranges.clear();
        assert_eq!(outside_region(placement.clone()), placement);
    }

    trait WithSectors {
        fn with_sectors(self, sectors: u32) -> Self;
    }

    impl WithSectors for DevRequest {
        fn with_sectors(self, sectors: u32) -> Self {
            DevRequest { sectors, ..self }
        }
    }
}
