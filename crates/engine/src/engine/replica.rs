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
use reblock_freespace::{MarkVerdict, Watermarks};
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

    /// Sends each page of a read served from home to whichever copy (original or replica)
    /// lies closer to the head's last position, counts the heat of those pages, and
    /// moves the head. Called with the gate held.
    pub(super) fn route_to_replicas(&self, ios: &mut Vec<PhysIo>) {
        let ps = self.geo.page.sectors();
        if !ios.iter().any(|io| io.region == Region::Data) {
            return;
        }
        let head = self.head_page.load(Relaxed);
        let mut table = lock(&self.replicas);
        let mut heat = lock(&self.heat);
        let mut out = Vec::with_capacity(ios.len());
        for io in ios.drain(..) {
            if io.region != Region::Data {
                out.push(io);
                continue;
            }
            let (first, end) = (
                io.device_sector / ps,
                (io.device_sector + io.sectors).div_ceil(ps),
            );
            heat.record(first, end);
            if table.is_empty() {
                out.push(io);
                continue;
            }
            for page in first..end {
                let a = (page * ps).max(io.device_sector);
                let b = ((page + 1) * ps).min(io.device_sector + io.sectors);
                let target = closest_copy(&table, page, head);
                if target != page {
                    table.touch(page, target, now_s());
                    self.replica_hits.fetch_add(1, Relaxed);
                }
                push_merged(
                    &mut out,
                    PhysIo {
                        device_sector: target * ps + (a - page * ps),
                        sectors: b - a,
                        buf_offset_sectors: io.buf_offset_sectors + (a - io.device_sector),
                        ..io
                    },
                );
            }
        }
        if let Some(last) = out.iter().rev().find(|io| io.region == Region::Data) {
            self.move_head(last);
        }
        *ios = out;
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
        hot.sort_unstable_by(|a, b| b.cmp(a));
        let mut centre: Vec<u64> = hot.iter().take(HOT_SET).map(|h| h.1).collect();
        centre.sort_unstable();
        let centre = centre[centre.len() / 2];
        let radius = self.hot_radius();
        let free = lock(&self.free);
        let mut t = lock(&self.replicas);
        // The free-page search probes up to twice SEARCH_PAGES pages under the locks every
        // foreground read takes: skip it when no hot page could gain a copy anywhere.
        let wants = |p: u64| may_gain_copy(&t, p, centre, radius) && !t.is_replica(p);
        if !hot.iter().any(|h| wants(h.1) && !free.is_free(h.1)) {
            return None;
        }
        let replica = self.free_page_near(&free, &t, centre, None)?;
        let original = hot.iter().map(|h| h.1).find(|&p| {
            gains_copy_at(&t, p, centre, replica, radius) && !t.is_replica(p) && !free.is_free(p)
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
            let page = self.free_page_near(&free, &t, target, after)?;
            if !gains_copy_at(&t, original, target, page, radius) {
                continue;
            }
            make_room(&mut t);
            heat.last_wish_page = Some(page);
            return Some((original, page));
        }
        None
    }

    /// A durably free page no replica uses (now or on disk) within [`SEARCH_PAGES`] of
    /// `centre`: `first_choice` when it is one and lies as near, else the nearest.
    fn free_page_near(
        &self,
        free: &crate::freemap::FreeMap,
        t: &crate::replicas::ReplicaTable,
        centre: u64,
        first_choice: Option<u64>,
    ) -> Option<u64> {
        let pages = self.data_pages();
        let usable = |r: u64| {
            r < pages && free.durably_free(r) && !t.is_replica(r) && !t.named_durably(r, r + 1)
        };
        if let Some(p) = first_choice.filter(|&p| usable(p) && p.abs_diff(centre) <= SEARCH_PAGES) {
            return Some(p);
        }
        (0..SEARCH_PAGES).find_map(|d| {
            [centre + d, centre.wrapping_sub(d)]
                .into_iter()
                .find(|&r| usable(r))
        })
    }
}

/// Whichever copy of data page `page` (itself or a replica) lies closest to page `head`;
/// the original among equals.
fn closest_copy(t: &crate::replicas::ReplicaTable, page: u64, head: u64) -> u64 {
    t.of_original(page)
        .map(|e| e.replica)
        .fold(page, |best, r| {
            if r.abs_diff(head) < best.abs_diff(head) {
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

/// Appends `io`, merged into the previous extent when it continues it on the device and
/// in the buffer.
fn push_merged(out: &mut Vec<PhysIo>, io: PhysIo) {
    if let Some(last) = out.last_mut() {
        if last.region == io.region
            && last.device_sector + last.sectors == io.device_sector
            && last.buf_offset_sectors + last.sectors == io.buf_offset_sectors
        {
            last.sectors += io.sectors;
            return;
        }
    }
    out.push(io);
}
