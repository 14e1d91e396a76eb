//! The `fs2` layout variant: FS2's replicas of hot pages in the data area's free space
//! (dynamic data replication in free disk space; docs/references.md), over the plain
//! layout (`fs2`) or BORG's BOPT (`borg+fs2`).
//!
//! The replica table is the free-space crate's [`ReplicaSet`], the one the engine is to
//! use online. A read of data-area pages goes, page run by page run, to the copy with the
//! least positioning time from the modelled head position — the end of the last request
//! this layout issued — on the disk model's seek curve and rotation, with contiguous
//! copies read together. A write drops the replicas of the pages it writes (FS2 makes no
//! update writes) and takes back any free page it lands on, replica or not; the
//! watermarks reclaim replicas when writes eat the free space. Replicas are made only at
//! a reconfiguration, as copies the copy scheduler orders like every other policy's, so
//! they are charged to the reconfiguration phase and weighed by the same admission.

use std::sync::Arc;

use reblock_device::seek::SeekModel;
use reblock_device::DevRequest;
use reblock_freespace::{FreeExtents, Positioner, ReplicaSet, Watermarks};
use reblock_layout::{Geometry, PhysIo, Region, ScheduleOptions};
use reblock_plan::Placement;
use rustc_hash::FxHashSet;

use crate::layout::{CopyIo, Layout};
use crate::EvalError;

/// A data-area page already holding a replica this close (pages) to where a new plan
/// wants it stays where it is: half a hot-area window.
fn near_pages(geo: &Geometry) -> u64 {
    reblock_plan::policy::HOT_AREA_BYTES / geo.page.bytes() / 2
}

/// A disk's positioning model: where a sector is (cylinder) and what reaching it costs.
#[derive(Debug)]
pub struct DiskModel {
    geom: reblock_device::geometry::Geometry,
    seek: SeekModel,
    /// Expected rotational wait of a request that does not continue the last one.
    half_turn_ns: f64,
}

impl DiskModel {
    /// The model of `device` when it is a single disk; `None` otherwise (arrays, SSDs:
    /// positioning then follows address distance).
    pub fn of_spec(device: &str) -> Result<Option<Arc<DiskModel>>, EvalError> {
        let built = reblock_device::parse_spec(device).map_err(EvalError::Device)?;
        if built.members.len() != 1 {
            return Ok(None);
        }
        Ok(built.members[0].as_hdd().map(|h| {
            Arc::new(DiskModel {
                geom: h.geometry().clone(),
                seek: h.seek_model().clone(),
                half_turn_ns: h.rotation_ns() / 2.0,
            })
        }))
    }

    /// Positioning time (seek plus expected rotational wait) from device sector `from`
    /// to device sector `to`: none when `to` continues where the head is.
    pub fn positioning_ns(&self, from: u64, to: u64) -> f64 {
        if from == to {
            return 0.0;
        }
        let (a, b) = (self.geom.locate(from), self.geom.locate(to));
        self.seek.seek_ns(a.cylinder.abs_diff(b.cylinder)) + self.half_turn_ns
    }
}

/// The modelled head: the device sector where the last request issued ended.
#[derive(Clone, Debug)]
pub struct DiskHead {
    pub sector: u64,
    geo: Geometry,
    model: Option<Arc<DiskModel>>,
}

impl DiskHead {
    pub fn new(geo: Geometry, model: Option<Arc<DiskModel>>) -> DiskHead {
        DiskHead {
            sector: 0,
            geo,
            model,
        }
    }

    fn page_sector(&self, page: u64) -> u64 {
        self.geo.data_sector(page * self.geo.page.sectors())
    }
}

impl Positioner for DiskHead {
    fn cost_to(&self, page: u64) -> f64 {
        let to = self.page_sector(page);
        match &self.model {
            Some(m) => m.positioning_ns(self.sector, to),
            None => to.abs_diff(self.sector) as f64,
        }
    }
    fn moved_to(&mut self, page: u64) {
        self.sector = self.page_sector(page);
    }
}

/// Replica pages whose data, read by the application, waits in memory until this many
/// are written together (4 MiB of 4 KiB pages): one write of consecutive replicas per
/// batch, instead of a seek to the hot area after every read that makes one.
const WRITE_BATCH_PAGES: usize = 1024;

/// Requests after which buffered replicas are written even when the batch is not full
/// (a write-behind timer, counted in requests: a small hot set would otherwise wait
/// in memory for ever).
const WRITE_BEHIND_REQUESTS: u64 = 64;

/// A layout with FS2 replicas over a base layout (plain or BOPT).
#[derive(Clone, Debug)]
pub struct Replicated {
    pub base: Layout,
    pub set: ReplicaSet,
    head: DiskHead,
    /// Replica pages whose original the application has read, their data held in memory
    /// until the batch is written.
    buffered: Vec<u64>,
    /// Requests mapped, and the request that buffered the oldest page in `buffered`.
    requests: u64,
    buffered_at: u64,
    /// Replica pages written so far (each from the read of its original).
    pub written_pages: u64,
}

impl Replicated {
    /// No replica yet; `free` are the data area's free pages.
    pub fn new(base: Layout, free: FreeExtents, model: Option<Arc<DiskModel>>) -> Replicated {
        let geo = *base.geometry();
        Replicated {
            set: ReplicaSet::new(geo.fs_pages, free, Watermarks::default()),
            head: DiskHead::new(geo, model),
            base,
            buffered: Vec::new(),
            requests: 0,
            buffered_at: 0,
            written_pages: 0,
        }
    }

    /// Appends the device requests serving `req` to `out`; true when the base layout
    /// served it entirely from its optimized region or every page came from a replica.
    /// Guarded, reads ignore the replicas (the plain layout's behaviour).
    pub fn map(
        &mut self,
        req: &DevRequest,
        out: &mut Vec<DevRequest>,
        phys: &mut Vec<PhysIo>,
        guarded: bool,
    ) -> bool {
        let geo = *self.base.geometry();
        let start = out.len();
        let (first, end) = page_span(&geo, req);
        if req.write {
            let freed = self.set.note_write(first, end);
            self.forget_buffered(&freed);
        }
        let bopt = matches!(self.base, Layout::Bopt(_));
        phys.clear();
        let mut hit = self.base.map(req, out, phys, guarded);
        if !req.write && !guarded && self.set.replicas() > 0 {
            // The data-area parts of the read, in FS sectors, in the base's issue order.
            let parts: Vec<Option<(u64, u64)>> = if bopt {
                phys.iter()
                    .map(|p| {
                        (p.region == Region::Data)
                            .then(|| (req.sector + p.buf_offset_sectors, p.sectors))
                    })
                    .collect()
            } else {
                vec![Some((req.sector, u64::from(req.sectors)))]
            };
            let issued: Vec<DevRequest> = out.drain(start..).collect();
            let mut all_replicas = true;
            let mut issued = issued.into_iter();
            for part in parts {
                match part {
                    Some((s, n)) => all_replicas &= self.route(s, n, out, start),
                    None => out.extend(issued.next()),
                }
            }
            hit |= all_replicas;
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
        let due = self.requests - self.buffered_at >= WRITE_BEHIND_REQUESTS;
        if self.buffered.len() >= WRITE_BATCH_PAGES || (due && !self.buffered.is_empty()) {
            self.write_buffered(out);
        }
        if let Some(last) = out[start..].last() {
            self.head.sector = last.sector + u64::from(last.sectors);
        }
        hit
    }

    /// Writes the buffered replicas, consecutive pages as one request, in address order.
    fn write_buffered(&mut self, out: &mut Vec<DevRequest>) {
        let geo = *self.base.geometry();
        let ps = geo.page.sectors();
        self.buffered.sort_unstable();
        let floor = out.len();
        for &page in &self.buffered {
            let at = geo.data_sector(page * ps);
            match out[floor..].last_mut() {
                Some(last) if last.sector + u64::from(last.sectors) == at => {
                    last.sectors += ps as u32;
                }
                _ => out.push(DevRequest {
                    sector: at,
                    sectors: ps as u32,
                    write: true,
                }),
            }
        }
        self.set.mark_written(&self.buffered);
        self.written_pages += self.buffered.len() as u64;
        self.buffered.clear();
    }

    /// Forgets buffered data of replicas that were dropped (`freed` pages).
    fn forget_buffered(&mut self, freed: &[u64]) {
        if !freed.is_empty() && !self.buffered.is_empty() {
            self.buffered.retain(|p| !freed.contains(p));
        }
    }

    /// Issues a read of FS sectors `[sector, sector + sectors)` of the data area, page
    /// runs from the closest copies; true when every page came from a replica.
    fn route(
        &mut self,
        sector: u64,
        sectors: u64,
        out: &mut Vec<DevRequest>,
        floor: usize,
    ) -> bool {
        let geo = *self.base.geometry();
        let ps = geo.page.sectors();
        let pieces: Vec<_> = geo.page.split(sector, sectors).collect();
        let Some(first) = pieces.first().map(|p| p.page) else {
            return false;
        };
        let runs = self
            .set
            .route_read_with(first, pieces.len() as u64, &mut self.head);
        let mut all = true;
        let mut i = 0;
        for run in runs {
            all &= run.replica;
            for k in 0..run.len {
                let piece = &pieces[i];
                i += 1;
                let page = if run.replica {
                    run.page + k
                } else {
                    piece.page
                };
                let at = geo.data_sector(page * ps + u64::from(piece.offset_sectors));
                push_merged(out, floor, at, piece.sectors);
            }
        }
        all
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

/// The pages `[first, end)` a request touches.
fn page_span(geo: &Geometry, req: &DevRequest) -> (u64, u64) {
    let ps = geo.page.sectors();
    let end = req.sector + u64::from(req.sectors);
    (req.sector / ps, end.div_ceil(ps))
}

/// Appends a read of `sectors` at device sector `at` to `out`, extending the last request
/// past index `floor` when it ends there.
fn push_merged(out: &mut Vec<DevRequest>, floor: usize, at: u64, sectors: u32) {
    match out[floor..].last_mut() {
        Some(last) if !last.write && last.sector + u64::from(last.sectors) == at => {
            last.sectors += sectors;
        }
        _ => out.push(DevRequest {
            sector: at,
            sectors,
            write: false,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_layout::{BoptConfig, BoptPosition};
    use reblock_plan::{PlacedRange, TargetSpace};

    fn geo() -> Geometry {
        Geometry::new(&BoptConfig {
            page_sectors: 8,
            data_sectors: 8 * 1_000_000,
            bopt_pages: 16,
            segment_pages: 4,
            write_buffer_fraction: 0.25,
            position: BoptPosition::End,
            meta_sectors: 0,
        })
        .unwrap()
    }

    /// Free pages 100_000..100_100, 200_000..320_000 and 600_000..600_100 on cheetah15k5
    /// (above the 10% high watermark, so replicas may be made).
    fn layout() -> Replicated {
        let free: FreeExtents = [100_000..100_100, 200_000..320_000, 600_000..600_100]
            .into_iter()
            .collect();
        let model = DiskModel::of_spec("hdd:cheetah15k5").unwrap();
        assert!(model.is_some(), "a single disk has a positioning model");
        Replicated::new(Layout::Home(geo()), free, model)
    }

    fn read(page: u64) -> DevRequest {
        DevRequest {
            sector: page * 8,
            sectors: 8,
            write: false,
        }
    }

    fn serve(r: &mut Replicated, req: &DevRequest) -> Vec<DevRequest> {
        let (mut out, mut phys) = (Vec::new(), Vec::new());
        r.map(req, &mut out, &mut phys, false);
        out
    }

    #[test]
    fn a_read_goes_to_the_copy_with_least_positioning_time_on_the_model() {
        let mut r = layout();
        r.set.place(&[900_000], 100_050, 0);
        r.set.place(&[900_000], 600_050, 0);
        let copies: Vec<u64> = std::iter::once(900_000)
            .chain(r.set.replicas_of(900_000).iter().map(|c| c.page))
            .collect();
        assert_eq!(copies.len(), 3);
        let model = r.head.model.clone().unwrap();
        let mut chosen = std::collections::BTreeSet::new();
        for head in [
            0,
            95_000 * 8,
            500_000 * 8,
            640_000 * 8,
            899_000 * 8,
            7_999_000,
        ] {
            r.head.sector = head;
            let out = serve(&mut r, &read(900_000));
            assert_eq!(out.len(), 1);
            let best = copies
                .iter()
                .copied()
                .min_by(|a, b| {
                    let ca = model.positioning_ns(head, a * 8);
                    let cb = model.positioning_ns(head, b * 8);
                    ca.total_cmp(&cb)
                })
                .unwrap();
            assert_eq!(out[0].sector, best * 8, "head at sector {head}");
            chosen.insert(best);
            // The head model follows the request served.
            assert_eq!(r.head.sector, best * 8 + 8);
        }
        assert_eq!(chosen.len(), 3, "each copy is the closest from some head");
    }

    #[test]
    fn contiguous_replicas_are_read_as_one_request() {
        let mut r = layout();
        r.set.place(&[900_000, 900_001, 900_002], 100_010, 0);
        r.head.sector = 100_000 * 8;
        let out = serve(
            &mut r,
            &DevRequest {
                sector: 900_000 * 8,
                sectors: 24,
                write: false,
            },
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
        assert_eq!(serve(&mut r, &write), vec![write]);
        assert!(r.set.replicas_of(900_000).is_empty());
        r.head.sector = 100_050 * 8;
        assert_eq!(serve(&mut r, &read(900_000))[0].sector, 900_000 * 8);
        // A client write into the free page holding 900_001's replica takes it back.
        let slot = r.set.replicas_of(900_001)[0].page;
        serve(
            &mut r,
            &DevRequest {
                write: true,
                ..read(slot)
            },
        );
        assert!(r.set.replicas_of(900_001).is_empty());
        assert_eq!(r.set.free_pages(), free - 1);
        assert_eq!(serve(&mut r, &read(900_001))[0].sector, 900_001 * 8);
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
        let out = serve(&mut r, &whole);
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
        r.head.sector = 250_000 * 8;
        let out = serve(&mut r, &whole);
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

    #[test]
    fn a_write_before_the_batch_is_written_drops_its_buffered_replica() {
        let mut r = layout();
        let mut placement = Placement::empty("fs2", &Default::default());
        placement.replicas = vec![PlacedRange {
            fs_page: 900_000,
            pages: 2,
            target: 100_050,
        }];
        r.reconfigure(&placement, &ScheduleOptions::default())
            .unwrap();
        // Read: both replicas wait in memory (the batch is not full).
        assert_eq!(serve(&mut r, &read(900_000).with_sectors(16)).len(), 1);
        assert_eq!(r.buffered.len(), 2);
        // The application overwrites page 900_000: its replica and buffered data go.
        let write = DevRequest {
            write: true,
            ..read(900_000)
        };
        serve(&mut r, &write);
        assert_eq!(r.buffered.len(), 1);
        assert!(r.set.replicas_of(900_000).is_empty());
        // The buffered replica is not read before it is written.
        r.head.sector = 100_000 * 8;
        assert_eq!(serve(&mut r, &read(900_001))[0].sector, 900_001 * 8);
        let mut out = Vec::new();
        r.write_buffered(&mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].write);
        r.head.sector = 100_000 * 8;
        assert_eq!(serve(&mut r, &read(900_001))[0].sector, out[0].sector);
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
