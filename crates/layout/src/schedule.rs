//! The copy scheduler: the one executor plan of every reconfiguration, destage and flush
//! back, for the simulator and the online engine alike (docs/layout.md "Executing a
//! reconfiguration").
//!
//! A diff's steps are in a valid order, but issuing them one by one pays a seek and a
//! rotation for every read and again for every write. The scheduler groups the steps into
//! **batches** whose steps do not depend on each other, then issues a batch as one sweep:
//! every source read sorted by device address and merged into large extents (reading
//! through small gaps when the caller's device model says that is cheaper than skipping
//! them), then every destination written sorted by address (the region in target order).
//! A batch's data fits one staging buffer of `staging_pages`; its steps' map effects are
//! applied, in their original order, only after all its writes.
//!
//! A step depends on an earlier one when it reads a location the earlier one writes
//! (an evicted page read back home by a cycle's incoming copy), when it writes a location
//! the earlier one reads or writes (a relocation chain: a slot is filled only once its old
//! page has left, seed 000 §5.2), or when both change the same FS page's map entry. A step
//! goes one batch after the latest batch it depends on, so a chain of `k` moves takes `k`
//! batches however many chains there are. Within a batch no write lands on a location the
//! map still needs, so a crash mid-batch loses nothing: the persisted map still points to
//! every page's old copy, and the diff recomputed after restart resumes the work.
//!
//! Reads may go out in address order ([`CopySchedule::requests`]) or, given a device
//! model ([`Positioning`]), in the order the model serves fastest
//! ([`CopySchedule::requests_positioned`]): still one ascending sweep, but the next read
//! is whichever of the next few the head reaches first, so a read just behind the
//! rotation does not cost a whole turn. Which reads a batch makes, and when its writes
//! go out, is the same either way.

use std::collections::VecDeque;

use crate::bopt::{Geometry, Region};
use crate::copy::{CopyKind, PageRun, Step};
use crate::indirector::Indirector;
use crate::units::Extent;

/// Knobs of the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleOptions {
    /// Pages one batch may move: the size of the executor's staging buffer.
    pub staging_pages: u64,
    /// Two reads this close (in sectors) are merged into one that reads the gap too; set
    /// it from the device model (0: never read what is not needed).
    pub read_gap_sectors: u64,
    /// Largest single request issued, in sectors.
    pub max_io_sectors: u64,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            staging_pages: 16 * 1024,
            read_gap_sectors: 0,
            max_io_sectors: 2048,
        }
    }
}

/// One device-level piece of a copy: `src.sectors` sectors read at `src`, written at `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtentMove {
    pub src: Extent,
    pub dst_sector: u64,
}

/// One device request of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyRequest {
    pub extent: Extent,
    pub write: bool,
}

/// What a device model says about the requests a schedule issues: how long each would
/// wait from now before its data moves, and what issuing one does to the head and the
/// clock (the simulator's drive model implements it; see `reblock_eval::replay`).
pub trait Positioning {
    /// Nanoseconds from now until `req`'s transfer could start (seek plus rotational
    /// wait on a disk).
    fn positioning_ns(&self, req: &CopyRequest) -> u64;
    /// Serves `req`: the model's head and clock move past it.
    fn issue(&mut self, req: &CopyRequest);
}

/// Reads considered at each pick of a positioned sweep: enough to catch the next read
/// coming under the head on nearby tracks, few enough that the sweep stays one pass.
pub const POSITIONED_WINDOW: usize = 16;

/// Steps that run as one sweep through one staging buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyBatch {
    /// The steps, in their original order: apply them after the batch's writes.
    pub steps: Vec<Step>,
    /// What goes where, per device extent.
    pub moves: Vec<ExtentMove>,
    /// Device extents to read, ascending, merged (gaps included when short).
    pub reads: Vec<Extent>,
    /// Device extents to write, ascending, merged where they touch.
    pub writes: Vec<Extent>,
}

impl CopyBatch {
    /// Pages this batch copies.
    pub fn pages(&self) -> u64 {
        self.steps.iter().map(step_pages).sum()
    }

    /// The batch's device requests in issue order: reads, then writes, each cut to
    /// `max_io_sectors`.
    pub fn requests(&self, max_io_sectors: u64) -> Vec<CopyRequest> {
        let mut out = Vec::new();
        for (extents, write) in [(&self.reads, false), (&self.writes, true)] {
            for e in extents {
                push_cut(&mut out, *e, write, max_io_sectors);
            }
        }
        out
    }

    /// [`CopyBatch::requests`] with the reads in the order `model` serves fastest (see
    /// [`position_reads`]), then the writes in address order.
    pub fn requests_positioned(
        &self,
        max_io_sectors: u64,
        model: &mut dyn Positioning,
        window: usize,
    ) -> Vec<CopyRequest> {
        position_reads(&self.requests(max_io_sectors), model, window)
    }
}

/// `requests` with each run of consecutive reads issued in the order `model` serves
/// fastest: one sweep in which each next read is, of the `window` next in the run's own
/// order, the one the head reaches first. Reads with no write between them never depend
/// on each other, so any request list (a schedule's, plan order's) leaves the same bytes;
/// every request, writes included, is issued to `model` in the returned order.
pub fn position_reads(
    requests: &[CopyRequest],
    model: &mut dyn Positioning,
    window: usize,
) -> Vec<CopyRequest> {
    let mut out = Vec::with_capacity(requests.len());
    let mut reads = VecDeque::new();
    for r in requests {
        if r.write {
            sweep(&mut reads, model, window, &mut out);
            model.issue(r);
            out.push(*r);
        } else {
            reads.push_back(*r);
        }
    }
    sweep(&mut reads, model, window, &mut out);
    out
}

/// Issues every read of `reads` (in their order, picked within `window`) to `out`.
fn sweep(
    reads: &mut VecDeque<CopyRequest>,
    model: &mut dyn Positioning,
    window: usize,
    out: &mut Vec<CopyRequest>,
) {
    while !reads.is_empty() {
        let next = (0..window.clamp(1, reads.len()))
            .min_by_key(|&i| model.positioning_ns(&reads[i]))
            .and_then(|i| reads.remove(i))
            .expect("a read is left");
        model.issue(&next);
        out.push(next);
    }
}

/// A reconfiguration's steps grouped into batches (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopySchedule {
    pub batches: Vec<CopyBatch>,
    pub opts: ScheduleOptions,
}

impl CopySchedule {
    /// Schedules `steps`, which must be valid in their order against `ind`'s map (as a
    /// diff, destage or flush back returns them, or such lists one after the other with
    /// each computed on the map the previous leaves).
    pub fn new(steps: &[Step], ind: &Indirector, opts: ScheduleOptions) -> CopySchedule {
        let levels = Dependencies::levels(steps, ind);
        let depth = levels.iter().copied().max().map_or(0, |l| l as usize + 1);
        let mut by_level: Vec<Vec<Step>> = vec![Vec::new(); depth];
        for (step, &level) in steps.iter().zip(&levels) {
            by_level[level as usize].push(*step);
        }
        let g = ind.geometry();
        let staging = opts.staging_pages.max(1);
        let mut batches = Vec::new();
        for level in by_level {
            let mut batch = Vec::new();
            let mut pages = 0;
            for step in level {
                let n = step_pages(&step);
                if pages + n > staging && !batch.is_empty() {
                    batches.push(build_batch(std::mem::take(&mut batch), g, &opts));
                    pages = 0;
                }
                pages += n;
                batch.push(step);
            }
            if !batch.is_empty() {
                batches.push(build_batch(batch, g, &opts));
            }
        }
        CopySchedule { batches, opts }
    }

    /// Every device request, in issue order.
    pub fn requests(&self) -> Vec<CopyRequest> {
        self.batches
            .iter()
            .flat_map(|b| b.requests(self.opts.max_io_sectors))
            .collect()
    }

    /// Every device request, in issue order, each batch's reads ordered by `model` (see
    /// [`position_reads`]).
    pub fn requests_positioned(
        &self,
        model: &mut dyn Positioning,
        window: usize,
    ) -> Vec<CopyRequest> {
        position_reads(&self.requests(), model, window)
    }

    /// Pages copied (each read once and written once).
    pub fn pages(&self) -> u64 {
        self.batches.iter().map(CopyBatch::pages).sum()
    }

    /// Every step in the order it is applied.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.batches.iter().flat_map(|b| b.steps.iter())
    }
}

/// The requests of executing `steps` one at a time in plan order, each step's reads then
/// its writes (what the scheduler replaces; kept to measure it against).
pub fn plan_order_requests(steps: &[Step], g: &Geometry, max_io_sectors: u64) -> Vec<CopyRequest> {
    let mut out = Vec::new();
    for step in steps {
        if let Step::Copy(op) = step {
            for (run, write) in [(op.src, false), (op.dst, true)] {
                for e in run.device_extents(g) {
                    push_cut(&mut out, e, write, max_io_sectors);
                }
            }
        }
    }
    out
}

fn step_pages(step: &Step) -> u64 {
    match step {
        Step::Drop(_) => 0,
        Step::Copy(op) => op.pages(),
    }
}

fn push_cut(out: &mut Vec<CopyRequest>, e: Extent, write: bool, max: u64) {
    let max = max.max(1);
    let mut at = e.start_sector;
    while at < e.end_sector() {
        let n = max.min(e.end_sector() - at);
        out.push(CopyRequest {
            extent: Extent::new(at, n),
            write,
        });
        at += n;
    }
}

fn build_batch(steps: Vec<Step>, g: &Geometry, opts: &ScheduleOptions) -> CopyBatch {
    let mut moves = Vec::new();
    for step in &steps {
        if let Step::Copy(op) = step {
            pair_extents(&op.src, &op.dst, g, &mut moves);
        }
    }
    CopyBatch {
        steps,
        ..CopyBatch::of_moves(moves, opts)
    }
}

impl CopyBatch {
    /// A batch of device-level moves with no map effect (a permutation of the data area):
    /// the moves must be independent (no source is another move's destination).
    pub fn of_moves(moves: Vec<ExtentMove>, opts: &ScheduleOptions) -> CopyBatch {
        let mut reads: Vec<Extent> = moves.iter().map(|m| m.src).collect();
        let mut writes: Vec<Extent> = moves
            .iter()
            .map(|m| Extent::new(m.dst_sector, m.src.sectors))
            .collect();
        reads = merge_extents(&mut reads, opts.read_gap_sectors);
        writes = merge_extents(&mut writes, 0);
        CopyBatch {
            steps: Vec::new(),
            moves,
            reads,
            writes,
        }
    }
}

/// Pairs a run's source and destination device extents piece by piece (either side may
/// be split where the data area runs around a BOPT placed inside it).
pub(crate) fn pair_extents(src: &PageRun, dst: &PageRun, g: &Geometry, out: &mut Vec<ExtentMove>) {
    let s = src.device_extents(g);
    let d = dst.device_extents(g);
    let (mut si, mut di, mut so, mut dof) = (0, 0, 0, 0);
    while si < s.len() && di < d.len() {
        let n = (s[si].sectors - so).min(d[di].sectors - dof);
        out.push(ExtentMove {
            src: Extent::new(s[si].start_sector + so, n),
            dst_sector: d[di].start_sector + dof,
        });
        so += n;
        dof += n;
        if so == s[si].sectors {
            si += 1;
            so = 0;
        }
        if dof == d[di].sectors {
            di += 1;
            dof = 0;
        }
    }
}

/// Sorts extents and merges those that overlap, touch, or lie at most `gap` apart.
pub(crate) fn merge_extents(extents: &mut [Extent], gap: u64) -> Vec<Extent> {
    extents.sort_unstable_by_key(|e| e.start_sector);
    let mut out: Vec<Extent> = Vec::with_capacity(extents.len());
    for e in extents.iter() {
        match out.last_mut() {
            Some(last) if e.start_sector <= last.end_sector() + gap => {
                let end = last.end_sector().max(e.end_sector());
                last.sectors = end - last.start_sector;
            }
            _ => out.push(*e),
        }
    }
    out
}

/// A location whose order matters: a data-area page, a BOPT slot, or an FS page's map
/// entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Home(u64),
    Slot(u64),
    Entry(u64),
}

/// One past the latest batch level that read, and that wrote, one location (0: none so
/// far), so that "one batch after" is a plain `max`.
#[derive(Clone, Copy, Default)]
struct Seen {
    read_after: u32,
    write_after: u32,
}

/// Locations per chunk of a [`PagedTable`]: 32 KiB of [`Seen`], small against a
/// reconfiguration that moves many pages, large enough that the chunk index stays short.
const CHUNK_LOCATIONS: usize = 4096;

/// A value per location number, kept in fixed chunks allocated on first touch: indexing
/// is a shift and a mask (no hashing), and memory follows the touched part of the address
/// space, not its size (a hash map of three keys per copied page took 207 MB for one
/// scattered reconfiguration of a synthetic trace of 10^6 requests).
struct PagedTable<T> {
    chunks: Vec<Option<Box<[T]>>>,
}

impl<T: Copy + Default> PagedTable<T> {
    fn new() -> Self {
        PagedTable { chunks: Vec::new() }
    }

    /// The value at `at`, `T::default()` where nothing was stored.
    fn get(&self, at: u64) -> T {
        let (c, i) = Self::split(at);
        match self.chunks.get(c) {
            Some(Some(chunk)) => chunk[i],
            _ => T::default(),
        }
    }

    fn get_mut(&mut self, at: u64) -> &mut T {
        let (c, i) = Self::split(at);
        if c >= self.chunks.len() {
            self.chunks.resize_with(c + 1, || None);
        }
        &mut self.chunks[c].get_or_insert_with(|| vec![T::default(); CHUNK_LOCATIONS].into())[i]
    }

    fn split(at: u64) -> (usize, usize) {
        let at = usize::try_from(at).expect("a location number fits the address space");
        (at / CHUNK_LOCATIONS, at % CHUNK_LOCATIONS)
    }
}

/// A slot's FS page as the steps so far leave it, over the map's own: `Map` (not touched
/// yet: ask the map), or the page it now holds, if any.
#[derive(Clone, Copy, Default)]
enum Owner {
    #[default]
    Map,
    Now(Option<u64>),
}

/// The latest batch level that read and that wrote each location so far.
struct Dependencies {
    home: PagedTable<Seen>,
    slot: PagedTable<Seen>,
    entry: PagedTable<Seen>,
    owner: PagedTable<Owner>,
}

impl Dependencies {
    /// The batch level of every step: one past the latest level it depends on.
    fn levels(steps: &[Step], ind: &Indirector) -> Vec<u32> {
        let mut deps = Dependencies {
            home: PagedTable::new(),
            slot: PagedTable::new(),
            entry: PagedTable::new(),
            owner: PagedTable::new(),
        };
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        steps
            .iter()
            .map(|step| {
                reads.clear();
                writes.clear();
                deps.touches(step, ind, &mut reads, &mut writes);
                let level = deps.level_of(&reads, &writes);
                for &k in &reads {
                    let s = deps.seen_mut(k);
                    s.read_after = s.read_after.max(level + 1);
                }
                for &k in &writes {
                    let s = deps.seen_mut(k);
                    s.write_after = s.write_after.max(level + 1);
                }
                level
            })
            .collect()
    }

    fn table(&self, k: Key) -> (&PagedTable<Seen>, u64) {
        match k {
            Key::Home(p) => (&self.home, p),
            Key::Slot(s) => (&self.slot, s),
            Key::Entry(p) => (&self.entry, p),
        }
    }

    fn seen(&self, k: Key) -> Seen {
        let (table, at) = self.table(k);
        table.get(at)
    }

    fn seen_mut(&mut self, k: Key) -> &mut Seen {
        match k {
            Key::Home(p) => self.home.get_mut(p),
            Key::Slot(s) => self.slot.get_mut(s),
            Key::Entry(p) => self.entry.get_mut(p),
        }
    }

    fn level_of(&self, reads: &[Key], writes: &[Key]) -> u32 {
        let mut level = 0;
        for &k in reads {
            level = level.max(self.seen(k).write_after);
        }
        for &k in writes {
            let s = self.seen(k);
            level = level.max(s.read_after).max(s.write_after);
        }
        level
    }

    fn owner_of(&self, slot: u64, ind: &Indirector) -> Option<u64> {
        match self.owner.get(slot) {
            Owner::Now(o) => o,
            Owner::Map => ind.map().fs_page_of(slot as u32),
        }
    }

    fn set_owner(&mut self, slot: u64, owner: Option<u64>) {
        *self.owner.get_mut(slot) = Owner::Now(owner);
    }

    /// The locations `step` reads and writes (a step's own source and destination may
    /// overlap: it reads all before writing), and the map effect on slot owners.
    fn touches(
        &mut self,
        step: &Step,
        ind: &Indirector,
        reads: &mut Vec<Key>,
        writes: &mut Vec<Key>,
    ) {
        match step {
            Step::Drop(run) => {
                for s in run.first..run.end() {
                    if let Some(p) = self.owner_of(s, ind) {
                        writes.push(Key::Entry(p));
                    }
                    writes.push(Key::Slot(s));
                    self.set_owner(s, None);
                }
            }
            Step::Copy(op) => {
                let key = |region, page| match region {
                    Region::Bopt => Key::Slot(page),
                    Region::Data => Key::Home(page),
                };
                let owners: Vec<Option<u64>> = (0..op.pages())
                    .map(|i| match op.src.region {
                        Region::Bopt => self.owner_of(op.src.first + i, ind),
                        Region::Data => Some(op.src.first + i),
                    })
                    .collect();
                for i in 0..op.pages() {
                    reads.push(key(op.src.region, op.src.first + i));
                    writes.push(key(op.dst.region, op.dst.first + i));
                    writes.extend(owners[i as usize].map(Key::Entry));
                }
                self.move_owners(op.kind, &op.src, &op.dst, &owners);
            }
        }
    }

    fn move_owners(
        &mut self,
        kind: CopyKind,
        src: &PageRun,
        dst: &PageRun,
        owners: &[Option<u64>],
    ) {
        match kind {
            CopyKind::WriteBack => {}
            CopyKind::Evict => {
                for s in src.first..src.end() {
                    self.set_owner(s, None);
                }
            }
            CopyKind::Relocate => {
                for s in src.first..src.end() {
                    self.set_owner(s, None);
                }
                for (i, &o) in owners.iter().enumerate() {
                    self.set_owner(dst.first + i as u64, o);
                }
            }
            CopyKind::Incoming => {
                for (i, &o) in owners.iter().enumerate() {
                    self.set_owner(dst.first + i as u64, o);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_merge_through_short_gaps_only() {
        let mut e = vec![
            Extent::new(100, 8),
            Extent::new(0, 8),
            Extent::new(8, 8),
            Extent::new(40, 8),
        ];
        assert_eq!(
            merge_extents(&mut e.clone(), 0),
            vec![Extent::new(0, 16), Extent::new(40, 8), Extent::new(100, 8)]
        );
        assert_eq!(
            merge_extents(&mut e, 24),
            vec![Extent::new(0, 48), Extent::new(100, 8)]
        );
    }

    /// A head on a line of sectors that serves a request in `gap` sectors of travel and
    /// then sits at its end; `backward` makes going back cheaper than going forward.
    struct Line {
        head: u64,
        backward: bool,
        issued: Vec<CopyRequest>,
    }

    impl Positioning for Line {
        fn positioning_ns(&self, req: &CopyRequest) -> u64 {
            let at = req.extent.start_sector;
            match (at >= self.head, self.backward) {
                (true, false) | (false, true) => at.abs_diff(self.head),
                _ => 10 * at.abs_diff(self.head),
            }
        }
        fn issue(&mut self, req: &CopyRequest) {
            self.head = req.extent.end_sector();
            self.issued.push(*req);
        }
    }

    fn batch() -> CopyBatch {
        let moves = [(0, 100), (40, 108), (80, 116), (120, 124)]
            .map(|(src, dst)| ExtentMove {
                src: Extent::new(src, 8),
                dst_sector: dst,
            })
            .to_vec();
        CopyBatch::of_moves(moves, &ScheduleOptions::default())
    }

    #[test]
    fn positioned_reads_take_the_nearest_of_the_window_and_writes_stay_last() {
        let b = batch();
        let plain = b.requests(2048);
        let mut fwd = Line {
            head: 0,
            backward: false,
            issued: Vec::new(),
        };
        assert_eq!(b.requests_positioned(2048, &mut fwd, 16), plain);
        assert_eq!(fwd.issued, plain, "every request reaches the model");
        let mut back = Line {
            head: 200,
            backward: true,
            issued: Vec::new(),
        };
        let got = b.requests_positioned(2048, &mut back, 16);
        let starts: Vec<(u64, bool)> = got
            .iter()
            .map(|r| (r.extent.start_sector, r.write))
            .collect();
        assert_eq!(
            starts,
            vec![
                (120, false),
                (80, false),
                (40, false),
                (0, false),
                (100, true)
            ]
        );
        // A window of two only ever looks at the next two reads in address order.
        let mut back = Line {
            head: 200,
            backward: true,
            issued: Vec::new(),
        };
        let got = b.requests_positioned(2048, &mut back, 2);
        let starts: Vec<u64> = got.iter().map(|r| r.extent.start_sector).collect();
        assert_eq!(starts, vec![40, 0, 80, 120, 100]);
    }

    #[test]
    fn reads_are_reordered_only_between_writes() {
        let req = |at: u64, write: bool| CopyRequest {
            extent: Extent::new(at, 8),
            write,
        };
        let given = [
            req(40, false),
            req(0, false),
            req(100, true),
            req(80, false),
            req(60, false),
            req(20, true),
            req(10, false),
        ];
        let mut fwd = Line {
            head: 0,
            backward: false,
            issued: Vec::new(),
        };
        let got = position_reads(&given, &mut fwd, 16);
        let starts: Vec<u64> = got.iter().map(|r| r.extent.start_sector).collect();
        // After the write the head is past both: the nearer one behind it goes first.
        assert_eq!(starts, vec![0, 40, 100, 80, 60, 20, 10]);
        assert_eq!(fwd.issued, got);
    }

    #[test]
    fn requests_are_cut_to_the_largest_io() {
        let mut out = Vec::new();
        push_cut(&mut out, Extent::new(10, 5000), true, 2048);
        let sizes: Vec<u64> = out.iter().map(|r| r.extent.sectors).collect();
        assert_eq!(sizes, vec![2048, 2048, 904]);
        assert_eq!(out[2].extent.start_sector, 10 + 4096);
    }
}
