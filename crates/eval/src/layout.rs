//! The layout a policy keeps on the device between reconfigurations, and how a plan
//! turns into copy I/O.
//!
//! * `Home`: no reorganization (vanilla); every request goes to its home location.
//! * `Bopt`: the layout crate's indirector (seed 001 Algorithm 5), unchanged: the
//!   policies that place pages into the BOPT read cache (borg, hot, dlr-seq).
//! * `Permuted`: the pages of the data area itself permuted (dlr-frag, seed 002 §6.1): no
//!   second copy exists, so a page is read and written where the permutation put it.
//!
//! The device holds the data area and the BOPT (same device, as in BORG); the layout
//! crate's [`Geometry`] translates FS sectors to device sectors around the BOPT.

use std::sync::{Arc, Mutex};

use reblock_device::DevRequest;
use reblock_layout::{
    diff, CopyBatch, CopyKind, CopyOp, CopyRequest, CopySchedule, DiffOptions, ExtentMove,
    Geometry, Indirector, IoRequest, Mode, Op, PageRun, PhysIo, Plan, Region, ScheduleOptions,
    Step,
};
use reblock_plan::{Placement, TargetSpace};
use reblock_sim::{Mapper, Purpose};
use rustc_hash::FxHashMap;

use crate::replicas::Replicated;
use crate::EvalError;

/// The copy I/O of one reconfiguration, in issue order, and what it moved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CopyIo {
    /// Physical device requests: each copy's reads, then its writes (seed 000 §4.4).
    pub requests: Vec<DevRequest>,
    /// Pages copied by the plan diff (incoming, relocated, evicted).
    pub diff_pages: u64,
    /// Pages copied home to empty the write buffer.
    pub destage_pages: u64,
    pub bytes_moved: u64,
}

/// Where pages live for one policy.
#[derive(Clone, Debug)]
pub enum Layout {
    Home(Geometry),
    Bopt(Indirector),
    Permuted(Permuted),
    /// FS2 replicas in free space over a plain or BOPT layout (`fs2`, `borg+fs2`).
    Replicated(Box<Replicated>),
}

/// Data-area pages moved within the data area: page -> page it now lives in.
#[derive(Clone, Debug)]
pub struct Permuted {
    geo: Geometry,
    location: FxHashMap<u64, u64>,
    /// How the guard's move home is scheduled (mid-phase, without a caller to ask).
    schedule: ScheduleOptions,
}

impl Layout {
    /// The layout `policy` starts from: empty BOPT, nothing moved (phase N0). Which one
    /// follows from the policy's registered capabilities.
    pub fn empty(
        policy: &str,
        geo: Geometry,
        schedule: ScheduleOptions,
    ) -> Result<Layout, EvalError> {
        let p = reblock_plan::by_name(policy).map_err(|e| EvalError::Setup(e.to_string()))?;
        Ok(match p.capabilities().places {
            None => Layout::Home(geo),
            Some(TargetSpace::DataArea) => Layout::Permuted(Permuted {
                geo,
                location: FxHashMap::default(),
                schedule,
            }),
            Some(TargetSpace::ReadCache) => Layout::Bopt(
                Indirector::new(geo).map_err(|e| EvalError::Setup(format!("BOPT map: {e}")))?,
            ),
        })
    }

    pub fn geometry(&self) -> &Geometry {
        match self {
            Layout::Home(g) => g,
            Layout::Bopt(ind) => ind.geometry(),
            Layout::Permuted(p) => &p.geo,
            Layout::Replicated(r) => r.base.geometry(),
        }
    }

    /// Appends the device requests serving `req` (FS sectors) to `out`; true when every
    /// one of them is served from the optimized layout (a BOPT hit, or relocated pages).
    ///
    /// `guarded` (seed 001 §5.2.2, extended to writes): behave as the plain layout as far
    /// as the data allows — the indirector's Bypass mode: reads go home except dirty pages,
    /// writes go home (nothing new is absorbed, and a mapped page written home leaves the
    /// map), except a piece covering part of a dirty page. A permuted layout has no
    /// second copy: the mapper sends it home first ([`Layout::send_permuted_home`]).
    pub fn map(
        &mut self,
        req: &DevRequest,
        out: &mut Vec<DevRequest>,
        phys: &mut Vec<PhysIo>,
        guarded: bool,
    ) -> bool {
        match self {
            Layout::Home(g) => {
                home_extents(g, req, out);
                false
            }
            Layout::Bopt(ind) => {
                ind.set_mode(if guarded { Mode::Bypass } else { Mode::Normal });
                let io = IoRequest {
                    op: if req.write { Op::Write } else { Op::Read },
                    sector: req.sector,
                    sectors: u64::from(req.sectors),
                };
                ind.indirect(io, phys)
                    .expect("requests are folded into the data area before replay");
                out.extend(phys.iter().map(|p| DevRequest {
                    sector: p.device_sector,
                    sectors: p.sectors as u32,
                    write: req.write,
                }));
                !phys.is_empty() && phys.iter().all(|p| p.region == Region::Bopt)
            }
            Layout::Permuted(p) => p.map(req, out),
            Layout::Replicated(r) => r.map(req, out, phys, guarded),
        }
    }

    /// Where the device serves `req` (device sectors), taken off its queue now: a read
    /// may go to another copy of exactly its data when the layout keeps one the device
    /// reaches sooner (FS2's replicas, see [`Replicated::dispatch`]); else `req`.
    pub fn dispatch(&mut self, req: &DevRequest, cost: &dyn Fn(&DevRequest) -> u64) -> DevRequest {
        match self {
            Layout::Replicated(r) => r.dispatch(req, cost),
            _ => *req,
        }
    }

    /// Before a guarded request: writes home (and marks clean, still mapped) each dirty
    /// page that would split it between home and the BOPT, appending the copies (read
    /// from the slot, written home) to `out`; returns the pages written. A dirty page
    /// keeps its home copy stale, so without this every guarded request touching it is
    /// split — for good on a workload that is not page aligned, since only a write of the
    /// whole page would clean it. A request all of whose pages are dirty is not split,
    /// and a write covering a dirty page whole makes home current by itself.
    pub fn write_back_splitting(&mut self, req: &DevRequest, out: &mut Vec<DevRequest>) -> u64 {
        if let Layout::Replicated(r) = self {
            return r.base.write_back_splitting(req, out);
        }
        let Layout::Bopt(ind) = self else {
            return 0;
        };
        let g = *ind.geometry();
        let (mut pieces, mut dirty) = (0usize, Vec::new());
        for p in g.page.split(req.sector, u64::from(req.sectors)) {
            pieces += 1;
            let Some(slot) = ind.map().lookup(p.page) else {
                continue;
            };
            if ind.map().is_dirty(slot) && !(req.write && p.is_full(g.page)) {
                dirty.push((slot, p.page));
            }
        }
        if dirty.is_empty() || (!req.write && dirty.len() == pieces) {
            return 0;
        }
        let steps: Vec<Step> = dirty
            .iter()
            .map(|&(slot, page)| {
                Step::Copy(CopyOp {
                    kind: CopyKind::WriteBack,
                    src: PageRun::new(Region::Bopt, u64::from(slot), 1),
                    dst: PageRun::new(Region::Data, page, 1),
                })
            })
            .collect();
        let io = execute(ind, &steps, &ScheduleOptions::default())
            .expect("a write-back read off the live map applies");
        out.extend(io.requests);
        dirty.len() as u64
    }

    /// A guarded permuted layout (dlr-frag) has no second copy to bypass to: the guard
    /// moves every relocated page home, once, before the request. The copies (all reads,
    /// then all writes, as at a reconfiguration) go to `out` ahead of the request, so they
    /// are charged to the normal phase they interrupt; returns the pages moved. Other
    /// layouts, or a permutation already home, move nothing.
    pub fn send_permuted_home(&mut self, out: &mut Vec<DevRequest>) -> u64 {
        let Layout::Permuted(p) = self else {
            return 0;
        };
        let opts = p.schedule;
        let io = p.reconfigure_to(FxHashMap::default(), &opts);
        out.extend(io.requests);
        io.diff_pages
    }

    /// Whether pages live away from home in a permuted layout.
    pub fn is_permuted(&self) -> bool {
        matches!(self, Layout::Permuted(p) if !p.location.is_empty())
    }

    /// `placement` as a diff against what is in place: pages already in the read cache
    /// keep their slots (see [`Placement::stable_against`]).
    pub fn stable(&self, placement: &Placement) -> Placement {
        let Layout::Bopt(ind) = self else {
            return placement.clone();
        };
        let slots = ind.geometry().read_cache_pages;
        let in_place: FxHashMap<u64, u64> = ind
            .map()
            .iter()
            .filter(|&(_, slot, _)| slot < slots)
            .map(|(page, slot, _)| (page, u64::from(slot)))
            .collect();
        placement.stable_against(&in_place, u64::from(slots))
    }

    /// Turns the layout into `placement`'s: returns the copy I/O and applies the map
    /// effect. The caller replays the I/O as the reconfiguration phase.
    pub fn reconfigure(
        &mut self,
        placement: &Placement,
        opts: &ScheduleOptions,
    ) -> Result<CopyIo, EvalError> {
        match self {
            Layout::Home(_) => Ok(CopyIo::default()),
            Layout::Bopt(ind) => reconfigure_bopt(ind, placement, opts),
            Layout::Permuted(p) => Ok(p.reconfigure(placement, opts)),
            Layout::Replicated(r) => r.reconfigure(placement, opts),
        }
    }
}

fn home_extents(g: &Geometry, req: &DevRequest, out: &mut Vec<DevRequest>) {
    for (e, _) in g.data_extents(req.sector, u64::from(req.sectors)) {
        out.push(DevRequest {
            sector: e.start_sector,
            sectors: e.sectors as u32,
            write: req.write,
        });
    }
}

/// The layout crate's plan for a read-cache placement.
pub fn to_layout_plan(placement: &Placement) -> Plan {
    let mut plan = Plan::new(placement.page_sectors, &placement.policy);
    for r in &placement.ranges {
        plan.push(r.fs_page, r.pages, r.target);
    }
    plan
}

/// Diff, then empty the write buffer (seed 000 §3.3: the write buffer is cleaned at
/// reconfiguration, so the next phase can absorb writes again; otherwise Algorithm 5
/// line 12 sends them all home); both through the copy scheduler as one schedule.
fn reconfigure_bopt(
    ind: &mut Indirector,
    placement: &Placement,
    opts: &ScheduleOptions,
) -> Result<CopyIo, EvalError> {
    if placement.space != TargetSpace::ReadCache {
        return Err(EvalError::Setup(format!(
            "policy {} places into the data area; it needs the permuted layout",
            placement.policy
        )));
    }
    let (steps, diff_pages) = bopt_steps(ind, placement)?;
    let mut io = execute(ind, &steps, opts)?;
    io.diff_pages = diff_pages;
    io.destage_pages -= diff_pages;
    Ok(io)
}

/// The steps that turn `ind`'s map into `placement`'s (the plan diff, then the destage
/// that empties the write buffer), and how many pages the diff alone copies.
fn bopt_steps(ind: &Indirector, placement: &Placement) -> Result<(Vec<Step>, u64), EvalError> {
    let plan = to_layout_plan(placement);
    let rec = diff(&plan, ind, DiffOptions::default())
        .map_err(|e| EvalError::Setup(format!("plan of {}: {e}", placement.policy)))?;
    let mut steps = rec.steps;
    let diff_pages = steps_pages(&steps);
    debug_assert_eq!(
        diff_pages * ind.geometry().page.bytes(),
        rec.stats.bytes_moved
    );
    steps.extend(destage_all(ind, &steps)?);
    Ok((steps, diff_pages))
}

impl Layout {
    /// The copy requests that turn the layout into `placement`'s when foreground reads
    /// carry the incoming pages `carried` says yes to (piggybacking, as `serve`'s copier
    /// does: such a page is written to its slot from data read anyway, so only its write
    /// costs): the scheduled copies of every other step, then the carried pages' writes,
    /// ascending. The layout itself is unchanged. A layout without a read cache carries
    /// nothing: its whole copy I/O.
    pub fn carried_copy_requests(
        &self,
        placement: &Placement,
        opts: &ScheduleOptions,
        carried: &dyn Fn(u64) -> bool,
    ) -> Result<Vec<DevRequest>, EvalError> {
        let Layout::Bopt(ind) = self else {
            return Ok(self.clone().reconfigure(placement, opts)?.requests);
        };
        let (steps, _) = bopt_steps(ind, placement)?;
        let (copied, written) = split_carried(&steps, carried);
        let mut out: Vec<DevRequest> = CopySchedule::new(&copied, ind, *opts)
            .requests()
            .iter()
            .map(dev_request)
            .collect();
        let writes = CopySchedule::new(&written, ind, *opts).requests();
        out.extend(writes.iter().filter(|r| r.write).map(dev_request));
        Ok(out)
    }
}

/// `steps` split into those still copied (read and written) and the incoming pieces
/// whose data-area pages `carried` says a foreground read brings (written only), each
/// incoming step cut where `carried` changes along its pages.
fn split_carried(steps: &[Step], carried: &dyn Fn(u64) -> bool) -> (Vec<Step>, Vec<Step>) {
    let (mut copied, mut written) = (Vec::new(), Vec::new());
    for step in steps {
        let op = match step {
            Step::Copy(op) if op.kind == CopyKind::Incoming && op.src.region == Region::Data => op,
            _ => {
                copied.push(*step);
                continue;
            }
        };
        let mut at = 0;
        while at < op.pages() {
            let is = carried(op.src.first + at);
            let n = (at..op.pages())
                .take_while(|&k| carried(op.src.first + k) == is)
                .count() as u64;
            let piece = Step::Copy(CopyOp {
                src: PageRun::new(op.src.region, op.src.first + at, n),
                dst: PageRun::new(op.dst.region, op.dst.first + at, n),
                ..*op
            });
            if is { &mut written } else { &mut copied }.push(piece);
            at += n;
        }
    }
    (copied, written)
}

fn steps_pages(steps: &[Step]) -> u64 {
    steps
        .iter()
        .map(|s| match s {
            Step::Copy(op) => op.pages(),
            Step::Drop(_) => 0,
        })
        .sum()
}

/// The destage steps that empty the write buffer once `before` has been applied.
fn destage_all(ind: &Indirector, before: &[Step]) -> Result<Vec<Step>, EvalError> {
    let mut after = ind.clone();
    for step in before {
        after.apply(step).map_err(refused)?;
    }
    let mut out = Vec::new();
    loop {
        let steps = after.destage_oldest(DiffOptions::default().max_copy_pages);
        if steps.is_empty() {
            return Ok(out);
        }
        for step in &steps {
            after.apply(step).map_err(refused)?;
        }
        out.extend(steps);
    }
}

fn refused(e: reblock_layout::ApplyError) -> EvalError {
    EvalError::Setup(format!("reconfiguration step refused: {e}"))
}

/// Runs `steps` through the copy scheduler: returns its I/O in issue order (pages
/// counted in `destage_pages`) and applies the map effects batch by batch.
fn execute(
    ind: &mut Indirector,
    steps: &[Step],
    opts: &ScheduleOptions,
) -> Result<CopyIo, EvalError> {
    let sched = CopySchedule::new(steps, ind, *opts);
    let mut io = CopyIo {
        requests: sched.requests().iter().map(dev_request).collect(),
        destage_pages: sched.pages(),
        ..CopyIo::default()
    };
    for step in sched.steps() {
        ind.apply(step).map_err(refused)?;
    }
    io.bytes_moved = io.destage_pages * ind.geometry().page.bytes();
    Ok(io)
}

pub(crate) fn dev_request(r: &CopyRequest) -> DevRequest {
    DevRequest {
        sector: r.extent.start_sector,
        sectors: r.extent.sectors as u32,
        write: r.write,
    }
}

impl Permuted {
    fn loc(&self, page: u64) -> u64 {
        self.location.get(&page).copied().unwrap_or(page)
    }

    fn map(&self, req: &DevRequest, out: &mut Vec<DevRequest>) -> bool {
        let ps = self.geo.page.sectors();
        let start = out.len();
        let mut all_moved = true;
        for piece in self.geo.page.split(req.sector, u64::from(req.sectors)) {
            let loc = self.loc(piece.page);
            all_moved &= loc != piece.page;
            let sector = self
                .geo
                .data_sector(loc * ps + u64::from(piece.offset_sectors));
            match out[start..].last_mut() {
                Some(last) if last.sector + u64::from(last.sectors) == sector => {
                    last.sectors += piece.sectors;
                }
                _ => out.push(DevRequest {
                    sector,
                    sectors: piece.sectors,
                    write: req.write,
                }),
            }
        }
        all_moved && out.len() > start
    }

    /// Every page whose location changes is read where it is and written where it goes;
    /// all reads come first (the permutation may move a page onto one not yet read).
    fn reconfigure(&mut self, placement: &Placement, opts: &ScheduleOptions) -> CopyIo {
        let mut next: FxHashMap<u64, u64> = FxHashMap::default();
        for (page, target) in placement.page_pairs() {
            if page != target {
                next.insert(page, target);
            }
        }
        self.reconfigure_to(next, opts)
    }

    /// Moves pages so that `next` (page -> location, home when absent) holds: one batch
    /// of the copy scheduler (every source is read before any destination is written).
    fn reconfigure_to(&mut self, next: FxHashMap<u64, u64>, opts: &ScheduleOptions) -> CopyIo {
        let mut moves: Vec<(u64, u64)> = self
            .location
            .keys()
            .chain(next.keys())
            .map(|&p| (self.loc(p), next.get(&p).copied().unwrap_or(p)))
            .filter(|(from, to)| from != to)
            .collect();
        moves.sort_unstable();
        moves.dedup();
        let io = copy_data_pages(&self.geo, &moves, opts, moves.len());
        self.location = next;
        io
    }
}

/// The copies of data-area pages `moves` (from, to), in batches of `batch_pages` moves
/// through the copy scheduler: each batch reads its sources, merged and in address
/// order, then writes its destinations (a permutation needs one batch: it may move a
/// page onto one not yet read; FS2's replicas copied at a reconfiguration go in batches
/// of the staging buffer, their destinations being free pages nobody reads).
pub(crate) fn copy_data_pages(
    geo: &Geometry,
    moves: &[(u64, u64)],
    opts: &ScheduleOptions,
    batch_pages: usize,
) -> CopyIo {
    let ps = geo.page.sectors();
    let mut requests = Vec::new();
    for batch in moves.chunks(batch_pages.max(1)) {
        let mut extent_moves = Vec::with_capacity(batch.len());
        for &(from, to) in batch {
            let src = PageRun::new(Region::Data, from, 1).device_extents(geo);
            let dst = PageRun::new(Region::Data, to, 1).device_extents(geo);
            debug_assert!(src.len() == 1 && dst.len() == 1 && src[0].sectors == ps);
            extent_moves.push(ExtentMove {
                src: src[0],
                dst_sector: dst[0].start_sector,
            });
        }
        let batch = CopyBatch::of_moves(extent_moves, opts);
        let cut = batch.requests(opts.max_io_sectors);
        requests.extend(cut.iter().map(dev_request));
    }
    CopyIo {
        requests,
        diff_pages: moves.len() as u64,
        destage_pages: 0,
        bytes_moved: moves.len() as u64 * geo.page.bytes(),
    }
}

/// The live layout of one replay plus its hit counters, shared between the replay's
/// [`Mapper`] and the phase driver (which reads the counters and sets the guard's mode).
#[derive(Debug)]
pub struct Cell {
    pub layout: Layout,
    /// The guard's state for the requests mapped from now on.
    pub guarded: bool,
    /// Dirty pages the guard wrote home during this replay.
    pub written_back_pages: u64,
    pub requests: u64,
    pub hits: u64,
    phys: Vec<PhysIo>,
}

pub type Shared = Arc<Mutex<Cell>>;

pub fn share(layout: Layout) -> Shared {
    Arc::new(Mutex::new(Cell {
        layout,
        guarded: false,
        written_back_pages: 0,
        requests: 0,
        hits: 0,
        phys: Vec::new(),
    }))
}

/// The sim's mapper hook over a shared layout.
pub struct SharedMapper(pub Shared);

impl Mapper for SharedMapper {
    fn map(&mut self, req: &DevRequest, out: &mut Vec<DevRequest>) {
        self.map_for(req, out, &mut Vec::new());
    }

    /// The guard's copies ahead of a request are copies; FS2's replica writes after it
    /// are replicas; the rest is the request's own data.
    fn map_for(
        &mut self,
        req: &DevRequest,
        out: &mut Vec<DevRequest>,
        purposes: &mut Vec<Purpose>,
    ) {
        let mut cell = self.0.lock().expect("layout lock");
        let Cell {
            layout,
            phys,
            guarded,
            written_back_pages,
            ..
        } = &mut *cell;
        if *guarded {
            *written_back_pages += layout.write_back_splitting(req, out);
            *written_back_pages += layout.send_permuted_home(out);
        }
        purposes.resize(out.len(), Purpose::Copy);
        let hit = layout.map(req, out, phys, *guarded);
        purposes.resize(out.len(), Purpose::Client);
        if let Layout::Replicated(r) = layout {
            if let Some(from) = r.replica_writes_from {
                purposes[from..].fill(Purpose::Replica);
            }
        }
        cell.requests += 1;
        cell.hits += u64::from(hit);
    }

    /// Guarded, reads stay where `map` sent them (the plain layout's behaviour).
    fn dispatch(&mut self, req: &DevRequest, cost: &dyn Fn(&DevRequest) -> u64) -> DevRequest {
        let mut cell = self.0.lock().expect("layout lock");
        if cell.guarded && !req.write {
            return *req;
        }
        cell.layout.dispatch(req, cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_layout::{BoptConfig, BoptPosition};
    use reblock_plan::PlacedRange;

    fn geo() -> Geometry {
        Geometry::new(&BoptConfig {
            page_sectors: 8,
            data_sectors: 8 * 100,
            bopt_pages: 16,
            segment_pages: 4,
            write_buffer_fraction: 0.25,
            position: BoptPosition::End,
            meta_sectors: 0,
        })
        .unwrap()
    }

    fn placement(space: TargetSpace, ranges: &[(u64, u64, u64)]) -> Placement {
        Placement {
            policy: "t".into(),
            page_sectors: 8,
            space,
            replicas: Vec::new(),
            ranges: ranges
                .iter()
                .map(|&(fs_page, pages, target)| PlacedRange {
                    fs_page,
                    pages,
                    target,
                })
                .collect(),
        }
    }

    #[test]
    fn carried_pages_cost_only_their_writes() {
        let l = Layout::empty("borg", geo(), ScheduleOptions::default()).unwrap();
        let p = placement(TargetSpace::ReadCache, &[(10, 2, 0), (50, 1, 2)]);
        let opts = ScheduleOptions::default();
        let none = l.carried_copy_requests(&p, &opts, &|_| false).unwrap();
        assert_eq!(none, l.clone().reconfigure(&p, &opts).unwrap().requests);
        // Pages 11 and 50 carried: only page 10 is read, every slot still written.
        let some = l
            .carried_copy_requests(&p, &opts, &|page| page == 11 || page == 50)
            .unwrap();
        let g = geo();
        let reads: Vec<_> = some.iter().filter(|r| !r.write).collect();
        assert_eq!(reads.len(), 1, "{some:?}");
        assert_eq!(reads[0].sector, g.data_sector(10 * 8));
        assert_eq!(reads[0].sectors, 8);
        let written: u32 = some.iter().filter(|r| r.write).map(|r| r.sectors).sum();
        assert_eq!(written, 3 * 8, "{some:?}");
        // Everything carried: no read at all.
        let all = l.carried_copy_requests(&p, &opts, &|_| true).unwrap();
        assert!(all.iter().all(|r| r.write), "{all:?}");
    }

    #[test]
    fn bopt_reconfiguration_copies_each_incoming_page_once() {
        let mut l = Layout::empty("borg", geo(), ScheduleOptions::default()).unwrap();
        // Pages 10, 11 to slots 0, 1 and page 50 to slot 2: two runs read then written.
        let io = l
            .reconfigure(
                &placement(TargetSpace::ReadCache, &[(10, 2, 0), (50, 1, 2)]),
                &ScheduleOptions::default(),
            )
            .unwrap();
        assert_eq!(io.diff_pages, 3);
        assert_eq!(io.bytes_moved, 3 * 4096);
        // BOPT at the end: slot s is at device sector 800 + 8 s. The scheduler reads
        // both runs in address order, then writes slots 0..3 as one request.
        assert_eq!(
            io.requests,
            vec![
                DevRequest {
                    sector: 80,
                    sectors: 16,
                    write: false
                },
                DevRequest {
                    sector: 400,
                    sectors: 8,
                    write: false
                },
                DevRequest {
                    sector: 800,
                    sectors: 24,
                    write: true
                },
            ]
        );
        let (mut out, mut phys) = (Vec::new(), Vec::new());
        let hit = l.map(
            &DevRequest {
                sector: 80,
                sectors: 16,
                write: false,
            },
            &mut out,
            &mut phys,
            false,
        );
        assert!(hit);
        assert_eq!(
            out,
            vec![DevRequest {
                sector: 800,
                sectors: 16,
                write: false
            }]
        );
    }

    #[test]
    fn permutation_moves_pages_and_back() {
        let mut l = Layout::empty("dlr-frag", geo(), ScheduleOptions::default()).unwrap();
        // Swap pages 3 and 7.
        let io = l
            .reconfigure(
                &placement(TargetSpace::DataArea, &[(7, 1, 3), (3, 1, 7)]),
                &ScheduleOptions::default(),
            )
            .unwrap();
        assert_eq!(io.diff_pages, 2);
        assert_eq!(io.requests.iter().filter(|r| r.write).count(), 2);
        let (mut out, mut phys) = (Vec::new(), Vec::new());
        assert!(l.map(
            &DevRequest {
                sector: 56,
                sectors: 8,
                write: false
            },
            &mut out,
            &mut phys,
            false
        ));
        assert_eq!(
            out,
            vec![DevRequest {
                sector: 24,
                sectors: 8,
                write: false
            }]
        );
        // An empty plan moves both home again.
        let io = l
            .reconfigure(
                &placement(TargetSpace::DataArea, &[]),
                &ScheduleOptions::default(),
            )
            .unwrap();
        assert_eq!(io.diff_pages, 2);
        out.clear();
        assert!(!l.map(
            &DevRequest {
                sector: 56,
                sectors: 8,
                write: false
            },
            &mut out,
            &mut phys,
            false
        ));
        assert_eq!(out[0].sector, 56);
    }

    #[test]
    fn guard_sends_a_permutation_home_once() {
        let mut l = Layout::empty("dlr-frag", geo(), ScheduleOptions::default()).unwrap();
        l.reconfigure(
            &placement(TargetSpace::DataArea, &[(7, 1, 3), (3, 1, 7)]),
            &ScheduleOptions::default(),
        )
        .unwrap();
        assert!(l.is_permuted());
        let mut out = Vec::new();
        // Both pages read where they are, then written home: four copies, two pages.
        assert_eq!(l.send_permuted_home(&mut out), 2);
        assert_eq!(out.iter().filter(|r| r.write).count(), 2);
        assert_eq!(out.iter().filter(|r| !r.write).count(), 2);
        assert!(!l.is_permuted());
        out.clear();
        assert_eq!(l.send_permuted_home(&mut out), 0);
        assert!(out.is_empty());
        // Through the mapper: a guarded request pays the moves before it is served home.
        let mut l = Layout::empty("dlr-frag", geo(), ScheduleOptions::default()).unwrap();
        l.reconfigure(
            &placement(TargetSpace::DataArea, &[(7, 1, 3), (3, 1, 7)]),
            &ScheduleOptions::default(),
        )
        .unwrap();
        let shared = share(l);
        shared.lock().unwrap().guarded = true;
        let mut m = SharedMapper(shared.clone());
        let req = DevRequest {
            sector: 56,
            sectors: 8,
            write: false,
        };
        out.clear();
        m.map(&req, &mut out);
        assert_eq!(out.len(), 5);
        assert_eq!(out[4], req);
        assert_eq!(shared.lock().unwrap().written_back_pages, 2);
    }
}
