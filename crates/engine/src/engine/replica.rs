//! FS2 online (the FS2 paper's "Approach", docs/references.md): copies of hot data pages
//! that lie away from where the head works are made in free pages near the hot area, in
//! the background under the copier's rate limit; when the hot area moves, a page read
//! there gets another replica near it (up to [`REPLICAS_PER_ORIGINAL`]); a read goes to
//! whichever copy (the original or any replica) is closest to the head's last known
//! position; every replica of a page is dropped when the page is written or trimmed, and
//! a client write into a free page holding a replica claims it first.
//!
//! Crash safety: the replica's data is written before the commit that names it (a
//! commit syncs the data first); every drop caused by a client write or trim is
//! committed before that write touches the disk, so after any crash the durable table
//! names no replica older than an acknowledged write of its original, and no replica
//! sits in a page the client wrote.

use super::{lock, Engine, StripeGuard};
use crate::replicas::ReplicaEntry;
use reblock_device::{geometry::Geometry as DiskGeometry, seek::SeekModel};
use reblock_freespace::{closest_whole_copy, MarkVerdict, Watermarks};
use reblock_layout::{CopyKind, PhysIo, Region, Step};
use reblock_plan::PlacedRange;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::Ordering::Relaxed;

/// Reads of one page before it counts as hot.
const HOT_READS: u32 = 3;
/// Pages whose read counts are kept; past this the counts are halved (old heat fades).
const HEAT_PAGES: usize = 1 << 16;
/// Hot pages whose median is the hot area's centre.
const HOT_SET: usize = 32;
/// How far from the centre a free page may be taken for a replica.
const SEARCH_PAGES: u64 = 1 << 16;
/// Longest run of consecutive hot pages whose replicas are placed side by side in one go
/// (a read is served whole by one copy, so the pages of one read need theirs in a row).
const RUN_PAGES: u64 = 32;
/// The most replicas one page gets (one near each hot area it is read from); the
/// watermarks and a full table reclaim the least recently read.
pub const REPLICAS_PER_ORIGINAL: usize = 4;

/// Read counts per data page served from home, and the replicas a re-planning policy
/// asked for.
#[derive(Default)]
pub(super) struct Heat {
    reads: HashMap<u64, u32>,
    /// (original, page it should lie near), in the policy's order (use order), made
    /// before any replica the heat alone suggests.
    wishes: VecDeque<(u64, u64)>,
    /// The replica page made for the last wish: the next one goes right after it when
    /// that page is usable, so pages used together are copied together.
    last_wish_page: Option<u64>,
}

/// FS2's free-space watermarks as `status --json` shows them (`replica_marks`), in data
/// pages: high, low and critical marks (the shares of the data area the simulator
/// uses), the free pages no replica holds, and what the marks ask now.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct ReplicaMarks {
    pub high_pages: u64,
    pub low_pages: u64,
    pub critical_pages: u64,
    pub unused_free_pages: u64,
    pub verdict: MarkVerdict,
}

impl ReplicaMarks {
    fn of(free_pages: u64, replicas: u64, data_pages: u64) -> ReplicaMarks {
        let marks = Watermarks::default();
        let (high_pages, low_pages, critical_pages) = marks.in_pages(data_pages);
        let unused = free_pages.saturating_sub(replicas);
        ReplicaMarks {
            high_pages,
            low_pages,
            critical_pages,
            unused_free_pages: unused,
            verdict: marks.verdict(unused, free_pages, data_pages),
        }
    }
}

/// What reaching a copy from the head's last known position costs, for FS2's read rule
/// ([`closest_whole_copy`]). Positions are data-area pages; `serve`'s disk holds the data
/// area from its first sector (docs/layout.md "Emulation"), so page `p` starts at sector
/// `p` times the page's sectors.
#[derive(Clone, Debug, Default)]
pub enum HeadCost {
    /// No device model: the distance in pages.
    #[default]
    Pages,
    /// A disk model: the seek time between the cylinders the two pages lie on, and among
    /// equal seeks (the same cylinder) the nearer page, by less than a nanosecond.
    Seek {
        geometry: Box<DiskGeometry>,
        seek: Box<SeekModel>,
    },
    /// A device without a moving head (flash): every copy costs the same, so reads stay
    /// with the original.
    Flat,
}

impl HeadCost {
    /// The cost model of a device spec as `evaluate --device` takes it: a disk model's
    /// seek curve, a flash model's flat cost; an array's (several disks, no one head)
    /// the distance in pages.
    pub fn of_device(spec: &str) -> Result<HeadCost, reblock_device::SpecError> {
        let built = reblock_device::parse_spec(spec)?;
        let [one] = &built.members[..] else {
            return Ok(HeadCost::Pages);
        };
        Ok(match one.as_hdd() {
            Some(hdd) => HeadCost::Seek {
                geometry: Box::new(hdd.geometry().clone()),
                seek: Box::new(hdd.seek_model().clone()),
            },
            None => HeadCost::Flat,
        })
    }

    /// The cost of reading a copy at data page `page` with the head at page `head`.
    pub fn cost(&self, head: u64, page: u64, page_sectors: u64) -> f64 {
        let pages = head.abs_diff(page) as f64;
        match self {
            HeadCost::Pages => pages,
            HeadCost::Flat => 0.0,
            HeadCost::Seek { geometry, seek } => {
                let cylinder = |p: u64| geometry.locate(p * page_sectors).cylinder;
                let d = cylinder(head).abs_diff(cylinder(page));
                seek.seek_ns(d) + pages / (pages + 1.0)
            }
        }
    }
}

impl Heat {
    fn record(&mut self, first: u64, end: u64) {
        for p in first..end {
            *self.reads.entry(p).or_insert(0) += 1;
        }
        if self.reads.len() > HEAT_PAGES {
            self.reads.retain(|_, n| {
                *n /= 2;
                *n > 0
            });
        }
    }
}

fn now_s() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

impl Engine {
    /// Replicas held now.
    pub fn replica_count(&self) -> usize {
        lock(&self.replicas).len()
    }

    /// A copy of the replica table (for tests and reports).
    pub fn replica_table(&self) -> crate::replicas::ReplicaTable {
        lock(&self.replicas).clone()
    }

    /// Reads served from a replica since the engine opened.
    pub fn replica_hits(&self) -> u64 {
        self.replica_hits.load(Relaxed)
    }

    fn data_pages(&self) -> u64 {
        self.layout.data_bytes / u64::from(self.layout.page_bytes)
    }

    /// How near a copy must lie to a hot area to serve it: a page with a copy that near
    /// gets no further replica there.
    fn hot_radius(&self) -> u64 {
        (self.data_pages() / 256).max(1)
    }

    /// The watermarks now.
    pub fn replica_marks(&self) -> ReplicaMarks {
        let free = lock(&self.free).free_pages();
        let replicas = lock(&self.replicas).len() as u64;
        ReplicaMarks::of(free, replicas, self.data_pages())
    }

    /// The replicas a re-planning policy wants (`serve --replan-policy fs2`): each page
    /// of `ranges` copied near its target, in order, ahead of what the heat suggests.
    /// Replaces the previous wishes; replicas already made stay until written, trimmed
    /// or reclaimed.
    pub fn want_replicas(&self, ranges: &[PlacedRange]) {
        let mut heat = lock(&self.heat);
        heat.wishes = ranges
            .iter()
            .flat_map(|r| (r.fs_page..r.fs_page + r.pages).map(move |p| (p, r.target)))
            .collect();
        heat.last_wish_page = None;
    }

    /// Gives replica pages back as the watermarks ask: the least recently read below the
    /// low mark until the high mark holds, all of them below the critical mark. In memory:
    /// the table on disk keeps naming them until the next commit, and until then a client
    /// write into one commits first, as for any replica. Returns the verdict.
    pub(super) fn enforce_marks(&self) -> MarkVerdict {
        if !self.has_free_map() {
            return MarkVerdict::Hold;
        }
        let free = lock(&self.free);
        let mut t = lock(&self.replicas);
        let m = ReplicaMarks::of(free.free_pages(), t.len() as u64, self.data_pages());
        let all = t.len() as u64;
        match m.verdict {
            MarkVerdict::DropAll => t.drop_coldest(all),
            MarkVerdict::Reclaim(n) => t.drop_coldest(n),
            _ => 0,
        };
        m.verdict
    }

    /// Sends each data-area read served from home whole to one copy, by FS2's read rule
    /// shared with the simulator ([`closest_whole_copy`]): the original, or replicas
    /// holding every page of the read one after another in order, whichever
    /// [`HeadCost`] rates cheapest from the head's last position, the original on a tie.
    /// Counts the heat of the pages read and moves the head. Called with the gate held.
    pub(super) fn route_to_replicas(&self, ios: &mut [PhysIo]) {
        let ps = self.geo.page.sectors();
        if !ios.iter().any(|io| io.region == Region::Data) {
            return;
        }
        let head = self.head_page.load(Relaxed);
        let mut table = lock(&self.replicas);
        let mut heat = lock(&self.heat);
        for io in ios.iter_mut().filter(|io| io.region == Region::Data) {
            let (first, end) = (
                io.device_sector / ps,
                (io.device_sector + io.sectors).div_ceil(ps),
            );
            heat.record(first, end);
            if table.is_empty() {
                continue;
            }
            let copies = |p: u64| table.of_original(p).map(|e| e.replica);
            let cost = |p: u64| self.head_cost.cost(head, p, ps);
            let target = closest_whole_copy(first, end - first, copies, cost);
            if target == first {
                continue;
            }
            for k in 0..end - first {
                table.touch(first + k, target + k, now_s());
            }
            self.replica_hits.fetch_add(end - first, Relaxed);
            io.device_sector = target * ps + (io.device_sector - first * ps);
        }
        if let Some(last) = ios.iter().rev().find(|io| io.region == Region::Data) {
            self.move_head(last);
        }
    }

    /// The head's last known position: the end of the last data-area I/O.
    pub(super) fn move_head(&self, io: &PhysIo) {
        let ps = self.geo.page.sectors();
        self.head_page
            .store((io.device_sector + io.sectors) / ps, Relaxed);
    }

    /// Whether a client write of sectors `sector..+sectors` makes a replica stale: a
    /// replica of its pages, or a replica stored in its pages (free space it claims),
    /// in memory or still named by the durable table.
    pub(super) fn write_meets_replicas(&self, sector: u64, sectors: u64) -> bool {
        let ps = self.geo.page.sectors();
        let (first, end) = (sector / ps, (sector + sectors).div_ceil(ps));
        let t = lock(&self.replicas);
        t.of_original_in(first, end) || t.named_durably(first, end)
    }

    /// Before a client write of sectors `sector..+sectors` touches the disk: replicas of
    /// its pages, and replicas stored in its pages (free space it claims), are dropped
    /// and the drop committed. The caller holds `commit` (taken before the pages'
    /// stripes: the engine's lock order, see [`Engine::lock_stripes_for_write`]) and the
    /// pages' stripes.
    pub(super) fn release_replicas(
        &self,
        c: &mut std::sync::MutexGuard<'_, super::CommitState>,
        sector: u64,
        sectors: u64,
    ) -> io::Result<()> {
        if !self.write_meets_replicas(sector, sectors) {
            return Ok(());
        }
        let ps = self.geo.page.sectors();
        let (first, end) = (sector / ps, (sector + sectors).div_ceil(ps));
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        {
            let mut t = lock(&self.replicas);
            let dropped = t.drop_touching(first, end);
            if dropped == 0 && !t.named_durably(first, end) {
                return Ok(());
            }
        }
        let snap = self.snapshot(c);
        self.persist(c, snap)
    }

    /// Detach: every replica is dropped (committed first), then every page that held one
    /// and is still free is zeroed, so the data area alone is the image again. The gate
    /// is held throughout, so no client write to such a page runs meanwhile.
    pub(super) fn clear_replicas(&self) -> io::Result<()> {
        let mut c = lock(&self.commit);
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        let pages = lock(&self.replicas).clear();
        let snap = self.snapshot(&c);
        self.persist(&mut c, snap)?;
        let zero = vec![0u8; self.layout.page_bytes as usize];
        let pb = u64::from(self.layout.page_bytes);
        for p in pages.into_iter().filter(|&p| lock(&self.free).is_free(p)) {
            self.store
                .write_at(crate::store::Dev::Data, &zero, p * pb)
                .map_err(|e| self.io_failed(e, "replica erase"))?;
        }
        Ok(())
    }

    /// A copy step about to read or write data pages: replicas stored there are
    /// forgotten (committed with the step's map change), so a page that enters the BOPT
    /// is never both a replica and a mapped page.
    pub(super) fn forget_replicas_of_step(&self, step: &Step) {
        let Step::Copy(op) = step else { return };
        let mut t = lock(&self.replicas);
        for run in [op.src, op.dst] {
            if run.region == Region::Data && (op.kind == CopyKind::Incoming || run == op.dst) {
                t.drop_touching(run.first, run.first + run.pages);
            }
        }
    }

    /// One background round of FS2: when the watermarks' `marks` allow new replicas, make
    /// one (the policy's next wish, else a hot page lying outside the hot area) in the
    /// free page nearest where it should lie. Returns 1 when a replica was made (its
    /// bytes count toward the copier's rate limit), else 0.
    pub(super) fn replica_tick(&self, allowed: bool, marks: MarkVerdict) -> io::Result<usize> {
        let create = matches!(marks, MarkVerdict::Create(_));
        if !allowed || !create || self.is_read_only() || !self.has_free_map() || self.is_detached()
        {
            return Ok(0);
        }
        let Some((original, replica)) = self.pick_replica() else {
            return Ok(0);
        };
        // No client write to either page, and no copy step, until the entry is in.
        let _s = self.lock_page_stripes(original, replica);
        let _g = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = self.replica_still_fits(original, replica) else {
            return Ok(0);
        };
        let pb = u64::from(self.layout.page_bytes);
        let mut buf = vec![0u8; pb as usize];
        let (dev, at) = match slot {
            Some(slot) => (crate::store::Dev::Bopt, self.geo.bopt_sector(slot, 0) * 512),
            None => (crate::store::Dev::Data, original * pb),
        };
        self.store
            .read_at(dev, &mut buf, at)
            .map_err(|e| self.io_failed(e, "replica read"))?;
        if let Some(slot) = slot {
            self.verify_copy_source(slot, &buf)?;
        }
        self.store
            .write_at(crate::store::Dev::Data, &buf, replica * pb)
            .map_err(|e| self.io_failed(e, "replica write"))?;
        lock(&self.replicas).insert(ReplicaEntry {
            original,
            replica,
            last_access: now_s(),
            refcount: 0,
        });
        self.counters.bytes_moved.fetch_add(pb, Relaxed);
        Ok(1)
    }

    /// Both pages still as [`Engine::pick_replica`] chose them (the replica page free,
    /// unmapped and unused; the original in use, trusted, without a copy near the replica
    /// page and below its replica count): then the BOPT slot holding the original's
    /// current data, if any.
    fn replica_still_fits(&self, original: u64, replica: u64) -> Option<Option<u32>> {
        let st = lock(&self.state);
        let free = lock(&self.free);
        let t = lock(&self.replicas);
        let fits = st.ind.mode() != reblock_layout::Mode::Detaching
            && free.durably_free(replica)
            && !free.is_free(original)
            && st.ind.map().lookup(replica).is_none()
            && !t.is_replica(replica)
            && !has_replica_near(&t, original, replica, self.hot_radius())
            && !self.untrusted.any();
        fits.then(|| st.ind.map().lookup(original))
    }

    /// The stripes of two pages, in ascending stripe order.
    fn lock_page_stripes(&self, a: u64, b: u64) -> Vec<StripeGuard<'_>> {
        let n = super::STRIPES as u64;
        let mut ids = vec![(a % n) as usize, (b % n) as usize];
        ids.sort_unstable();
        ids.dedup();
        self.lock_stripe_ids(ids)
    }

    /// The next replica to make: the policy's next wish, else the hottest page without a
    /// copy in the hot area; with the free page nearest where it should lie (a full
    /// table gives up its coldest replica). The caller checked the watermarks.
    fn pick_replica(&self) -> Option<(u64, u64)> {
        if let Some(wished) = self.pick_wished() {
            return Some(wished);
        }
        let mut hot: Vec<(u32, u64)> = {
            let heat = lock(&self.heat);
            heat.reads
                .iter()
                .filter(|(_, &n)| n >= HOT_READS)
                .map(|(&p, &n)| (n, p))
                .collect()
        };
        if hot.is_empty() {
            return None;
        }
        // Hottest first; among equals (the pages of one read) in page order, so that they
        // are copied one after another and a read of them all can use the copies.
        hot.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut centre: Vec<u64> = hot.iter().take(HOT_SET).map(|h| h.1).collect();
        centre.sort_unstable();
        let centre = centre[centre.len() / 2];
        let radius = self.hot_radius();
        // Sorted before the locks every foreground read takes: only `hot` is read.
        let mut hot_pages: Vec<u64> = hot.iter().map(|h| h.1).collect();
        hot_pages.sort_unstable();
        let free = lock(&self.free);
        let mut t = lock(&self.replicas);
        // The free-page search probes up to twice SEARCH_PAGES pages under the locks every
        // foreground read takes: skip it when no hot page could gain a copy anywhere.
        let wants = |p: u64| may_gain_copy(&t, p, centre, radius) && !t.is_replica(p);
        // FS2 keeps contiguous copies together (a read goes whole to one copy): the next
        // page wanting a copy goes right after its predecessor's replica when it can.
        let first = hot
            .iter()
            .map(|h| h.1)
            .find(|&p| wants(p) && !free.is_free(p))?;
        let after = (t.of_original(first.wrapping_sub(1)))
            .map(|e| e.replica + 1)
            .min_by_key(|r| r.abs_diff(centre));
        // A run's first page starts where the whole run fits, when such room is near.
        let run = (first..first + RUN_PAGES)
            .take_while(|&p| hot_pages.binary_search(&p).is_ok() && wants(p) && !free.is_free(p))
            .count() as u64;
        let replica = match after {
            None if run > 1 => self.free_pages_near(&free, &t, centre, None, run),
            _ => None,
        };
        let replica = match replica {
            Some(r) => r,
            None => self.free_pages_near(&free, &t, centre, after, 1)?,
        };
        let original = std::iter::once(first)
            .chain(hot.iter().map(|h| h.1))
            .find(|&p| {
                gains_copy_at(&t, p, centre, replica, radius)
                    && !t.is_replica(p)
                    && !free.is_free(p)
            })?;
        make_room(&mut t);
        Some((original, replica))
    }

    /// The policy's next wish that still makes sense (its original in use, without a
    /// copy near the target, not itself a replica page), with the free page nearest its
    /// target: right after the last wish's replica when that one is usable and as near.
    fn pick_wished(&self) -> Option<(u64, u64)> {
        let free = lock(&self.free);
        let mut t = lock(&self.replicas);
        let mut heat = lock(&self.heat);
        let radius = self.hot_radius();
        while let Some((original, target)) = heat.wishes.pop_front() {
            if free.is_free(original) || t.is_replica(original) {
                continue;
            }
            let after = heat.last_wish_page.map(|p| p + 1);
            let page = self.free_pages_near(&free, &t, target, after, 1)?;
            if !gains_copy_at(&t, original, target, page, radius) {
                continue;
            }
            make_room(&mut t);
            heat.last_wish_page = Some(page);
            return Some((original, page));
        }
        None
    }

    /// The first of `run` durably free pages in a row that no replica uses (now or on
    /// disk), within [`SEARCH_PAGES`] of `centre`: `first_choice` when it is one and lies
    /// as near, else the nearest.
    fn free_pages_near(
        &self,
        free: &crate::freemap::FreeMap,
        t: &crate::replicas::ReplicaTable,
        centre: u64,
        first_choice: Option<u64>,
        run: u64,
    ) -> Option<u64> {
        let pages = self.data_pages();
        let usable = |r: u64| {
            r < pages && free.durably_free(r) && !t.is_replica(r) && !t.named_durably(r, r + 1)
        };
        let fits = |r: u64| r.checked_add(run).is_some_and(|end| (r..end).all(usable));
        if let Some(p) = first_choice.filter(|&p| fits(p) && p.abs_diff(centre) <= SEARCH_PAGES) {
            return Some(p);
        }
        (0..SEARCH_PAGES).find_map(|d| {
            [centre + d, centre.wrapping_sub(d)]
                .into_iter()
                .find(|&r| fits(r))
        })
    }
}

/// Whichever copy of data page `page` (itself or a replica) lies closest to page `near`
/// (a hot area's centre); the original among equals.
fn closest_copy(t: &crate::replicas::ReplicaTable, page: u64, near: u64) -> u64 {
    t.of_original(page)
        .map(|e| e.replica)
        .fold(page, |best, r| {
            if r.abs_diff(near) < best.abs_diff(near) {
                r
            } else {
                best
            }
        })
}

/// True when a replica of data page `page` in page `at` would serve reads near page
/// `near` (the hot area): its first one when the page lies outside the hot area (more
/// than `radius` from `near`); another only when `at` lies nearer there than every copy
/// it has (itself and its replicas) by more than `radius`, and below
/// [`REPLICAS_PER_ORIGINAL`]. So a page gets one replica per hot area it is read from.
fn gains_copy_at(
    t: &crate::replicas::ReplicaTable,
    page: u64,
    near: u64,
    at: u64,
    radius: u64,
) -> bool {
    let made = t.of_original(page).count();
    let closer = match made {
        0 => page.abs_diff(near) > radius,
        _ => closest_copy(t, page, near).abs_diff(near) > at.abs_diff(near) + radius,
    };
    closer && made < REPLICAS_PER_ORIGINAL
}

/// What [`gains_copy_at`] needs whatever the copy's page: below the count, and no copy
/// (the page itself included) within `radius` of `near`.
fn may_gain_copy(t: &crate::replicas::ReplicaTable, page: u64, near: u64, radius: u64) -> bool {
    t.of_original(page).count() < REPLICAS_PER_ORIGINAL
        && closest_copy(t, page, near).abs_diff(near) > radius
}

/// True when `page` has a replica within `radius` of page `at`, or its full count (a
/// replica made meanwhile: the background checks again under the stripe locks).
fn has_replica_near(t: &crate::replicas::ReplicaTable, page: u64, at: u64, radius: u64) -> bool {
    t.of_original(page)
        .any(|e| e.replica.abs_diff(at) <= radius)
        || t.of_original(page).count() >= REPLICAS_PER_ORIGINAL
}

/// A full table gives up its coldest replica before another is made.
fn make_room(t: &mut crate::replicas::ReplicaTable) {
    if t.full() {
        t.drop_coldest(1);
    }
}

#[cfg(test)]
mod tests {
    use super::HeadCost;

    /// A disk model rates copies by the seek from the head's cylinder, the nearer page
    /// first among copies on one cylinder; flash rates every copy the same.
    #[test]
    fn a_disk_rates_copies_by_seek_and_flash_alike() {
        let disk = HeadCost::of_device("hdd:wd2500aaks").unwrap();
        assert!(matches!(disk, HeadCost::Seek { .. }));
        let head = 1_000_000;
        let far = disk.cost(head, 30_000_000, 8);
        let near = disk.cost(head, 1_200_000, 8);
        let beside = disk.cost(head, head + 1, 8);
        assert!(far > near && near > beside, "{far} {near} {beside}");
        assert!(beside < 1.0, "same cylinder: no seek, {beside}");
        assert!(disk.cost(head, head + 2, 8) > beside);
        let flash = HeadCost::of_device("ssd:k9").unwrap();
        assert_eq!(flash.cost(head, 30_000_000, 8), flash.cost(head, head, 8));
        assert_eq!(HeadCost::Pages.cost(10, 4, 8), 6.0);
    }
}
