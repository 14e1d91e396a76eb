//! The background copier: a reconfiguration's steps executed as the copy scheduler's
//! batches (the same `CopySchedule` evaluate costs them with), and piggybacking.
//!
//! Executing a plan's steps one at a time in plan order paid two long seeks per step: on
//! the start-up capture under `serve --emulate hdd:wd2500aaks` the copies cost 31 s of
//! emulated busy where the guard, costing them as scheduled batches, predicted 6.8 s.
//! Here the whole queue is put in the scheduler's batch order when the plan is admitted,
//! and each background round takes the next staging buffer's worth of steps and runs
//! them as batches: every source read merged and ascending, every destination written
//! merged and ascending (reblock_layout::execute), then the map effects and, when slots
//! were freed, one commit. The gate is held for one batch only, and a batch moves at most
//! [`STAGING_BYTES`], so foreground requests wait for a few megabytes of copying at most.
//!
//! Crash safety is that of one step: a batch's destinations are free slots or home
//! copies the map does not use until the batch's map update, and a batch that frees
//! slots commits before the next batch may write into them.
//!
//! Piggybacking (docs/layout.md "Piggybacking online"): a foreground read that missed,
//! of a page the running plan brings into a slot, keeps the data it just read; the
//! copier's next round writes every page so kept to its slot in one ascending pass and
//! maps them, so the copier never reads them again. Writing each read's pages at once
//! cost one trip into the region per read miss: on the start-up capture under
//! `serve --emulate hdd:wd2500aaks` holding them cut the pass from 0.91-0.94x to
//! 0.79-0.84x vanilla's emulated busy. A page written (or trimmed, destaged) after the
//! read that carried it is never placed from the old bytes: every exclusive hold of a
//! stripe counts, and a carried run whose stripes were held since is dropped.

use super::{lock, rofs, Engine, State};
use crate::store::Store;
use reblock_layout::{
    read_sources, write_destinations, BatchIo, CopyDevice, CopyKind, CopyOp, CopySchedule, Extent,
    Indirector, PageRun, PendingIncoming, Region, ScheduleOptions, Step,
};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Bytes of pages one batch of the copier moves (and the gate is held for): small
/// enough that a foreground request never waits long, large enough to merge a plan's
/// nearby sources. On the start-up capture under `serve --emulate hdd:wd2500aaks` 8 MiB
/// batches gave 0.91-0.94x vanilla's emulated busy in one pass, 4 MiB 0.93x, 16-64 MiB
/// 0.87-1.02x (single runs on a shared machine: differences within the noise).
pub const STAGING_BYTES: u64 = 8 << 20;

/// Two sources of a batch this close (sectors) are read as one request, gap included:
/// on a disk, skipping 128 KiB costs about as much rotation as reading it, and a
/// start-up working set of many small files has many such gaps. It bounds what a batch
/// stages beyond its pages to 128 KiB per source extent.
pub const READ_GAP_SECTORS: u64 = 256;

/// Bytes of carried pages held at most before the reader that reaches it writes them
/// out itself (a start-up day carries hundreds of megabytes and may leave the copier no
/// idle moment).
pub const CARRIED_BYTES: u64 = 4 * STAGING_BYTES;

/// Pages foreground reads carried for the running plan, held until written together.
pub(super) struct Carried {
    held: Mutex<HeldRuns>,
    /// Per stripe: how often it was held for writing (its pages' bytes may have changed).
    generations: Vec<AtomicU64>,
    /// True while the running plan has incoming pages waiting for their slots: a
    /// foreground read looks for pages to carry (under the state lock) only then, so
    /// with no plan running a read takes no lock for piggybacking. A hint only: a read
    /// that sees it stale carries nothing, and the copier copies its pages.
    waiting: AtomicBool,
}

/// The carried runs and their bytes in all (kept as they come, so that a reader checks
/// the [`CARRIED_BYTES`] bound without summing every run).
#[derive(Default)]
struct HeldRuns {
    runs: Vec<CarriedRun>,
    bytes: u64,
}

/// One incoming step's pages, as a foreground read found them.
struct CarriedRun {
    /// The reconfiguration queue's generation when it was carried.
    queue_gen: u64,
    op: CopyOp,
    bytes: Vec<u8>,
    /// The stripes of its pages and their generations when read.
    generations: Vec<(usize, u64)>,
}

impl Carried {
    pub(super) fn new(stripes: usize) -> Carried {
        Carried {
            held: Mutex::new(HeldRuns::default()),
            generations: (0..stripes).map(|_| AtomicU64::new(0)).collect(),
            waiting: AtomicBool::new(false),
        }
    }

    /// Notes whether the running plan's incoming pages all found their slots.
    pub(super) fn note_waiting(&self, pending: &PendingIncoming) {
        self.waiting.store(!pending.is_empty(), Relaxed);
    }

    /// Stripe `i` is held for writing.
    pub(super) fn touch(&self, i: usize) {
        self.generations[i].fetch_add(1, Relaxed);
    }

    fn generation(&self, i: usize) -> u64 {
        self.generations[i].load(Relaxed)
    }

    /// True when no stripe of the run was held for writing since it was read.
    fn unchanged(&self, run: &CarriedRun) -> bool {
        run.generations
            .iter()
            .all(|&(i, g)| self.generation(i) == g)
    }
}

/// The engine's backing store as the layout crate's copy device.
struct StoreDevice<'a> {
    engine: &'a Engine,
    store: &'a dyn Store,
}

impl CopyDevice for StoreDevice<'_> {
    type Error = io::Error;
    fn read(&mut self, region: Region, e: Extent, buf: &mut [u8]) -> io::Result<()> {
        self.store
            .read_at(Engine::dev_of(region), buf, e.start_sector * 512)
            .map_err(|err| self.engine.io_failed(err, "copy read"))
    }
    fn write(&mut self, region: Region, e: Extent, buf: &[u8]) -> io::Result<()> {
        self.store
            .write_at(Engine::dev_of(region), buf, e.start_sector * 512)
            .map_err(|err| self.engine.io_failed(err, "copy write"))
    }
}

/// What one round of the copier did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopierRound {
    /// Steps (or parts of steps) copied and applied.
    pub done: usize,
    /// Steps (or pages of incoming steps) refused as stale.
    pub refused: usize,
    /// Bytes the steps applied copied.
    pub bytes: u64,
}

impl Engine {
    /// Replaces the reconfiguration queue with `steps` in the copy scheduler's batch
    /// order (a step never runs before one it depends on), and notes their incoming
    /// pages for piggybacking.
    pub(super) fn queue_scheduled(&self, st: &mut State, steps: &[Step]) {
        let sched = CopySchedule::new(steps, &st.ind, ScheduleOptions::default());
        st.queue.clear();
        st.queue.extend(sched.steps().copied());
        st.queue_gen += 1;
        st.pending = PendingIncoming::from_steps(steps);
        self.carried.note_waiting(&st.pending);
        // Pages carried for the plan replaced are not this plan's to place.
        *lock(&self.carried.held) = HeldRuns::default();
    }

    /// The staging buffer's size in pages.
    fn staging_pages(&self) -> u64 {
        (self.opts.copier_staging_bytes / self.geo.page.bytes()).max(1)
    }

    /// The queue's next steps, up to one staging buffer of pages, and the queue's
    /// generation. They stay queued until run (the reconfiguration is pending until its
    /// last step is done).
    fn next_queued_steps(&self) -> (Vec<Step>, u64) {
        let st = lock(&self.state);
        let (mut out, mut pages) = (Vec::new(), 0);
        for step in &st.queue {
            let n = step_pages(step);
            if !out.is_empty() && pages + n > self.staging_pages() {
                break;
            }
            pages += n;
            out.push(*step);
        }
        (out, st.queue_gen)
    }

    /// One round of reconfiguration: the next staging buffer's worth of queued steps.
    /// Returns the number of steps taken from the queue.
    pub(super) fn copier_tick(&self) -> io::Result<usize> {
        // Carried pages first: the batches below then skip them as done.
        let carried = self.place_carried()?;
        let (steps, generation) = self.next_queued_steps();
        if steps.is_empty() {
            return Ok(usize::from(carried > 0));
        }
        let round = self.run_batches(&steps);
        {
            // Taken off the queue even after a failure, as a failed step was before.
            let mut st = lock(&self.state);
            if st.queue_gen == generation {
                st.queue.drain(..steps.len());
            }
        }
        self.after_reconfig_step(round?.refused == 0);
        Ok(steps.len())
    }

    /// Executes `steps` (valid in their order when they were computed) as the copy
    /// scheduler's batches of at most [`STAGING_BYTES`], each under one hold of the
    /// gate. Steps made stale meanwhile by foreground writes are refused (an incoming
    /// step only for its stale pages). The one executor of copy steps under the gate:
    /// a reconfiguration's rounds and a detach's flush back; a destage holds stripes
    /// instead (engine/destage.rs).
    pub fn run_batches(&self, steps: &[Step]) -> io::Result<CopierRound> {
        if self.is_read_only() {
            return Err(rofs());
        }
        let opts = ScheduleOptions {
            staging_pages: self.staging_pages(),
            ..ScheduleOptions::default()
        };
        let sched = CopySchedule::new(steps, &lock(&self.state).ind, opts);
        let mut total = CopierRound::default();
        for batch in &sched.batches {
            let r = self.run_batch(&batch.steps)?;
            total.done += r.done;
            total.refused += r.refused;
            total.bytes += r.bytes;
        }
        Ok(total)
    }

    /// One batch: validate against the current map, read every source, write every
    /// destination, apply the map effects, and commit when slots were freed (also after
    /// a failure, for the steps applied before it). The gate is held until that commit,
    /// so no slot freed here is reused while the durable map still names it.
    ///
    /// The steps are validated on the live map, each as if alone: a batch's steps are
    /// independent (the copy scheduler's contract, checked by the layout crate's
    /// `a_batch_validates_on_the_map_before_it_under_foreground_writes`), so applying
    /// one never changes what another's validation reads. A scratch copy of the map to
    /// apply them to in turn cost a clone of the whole map per batch, under the gate.
    fn run_batch(&self, steps: &[Step]) -> io::Result<CopierRound> {
        let mut c = lock(&self.commit);
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        let (valid, refused) = valid_parts(steps, &lock(&self.state).ind);
        if refused > 0 {
            tracing::debug!(refused, "stale reconfiguration steps refused");
            self.counters
                .steps_refused
                .fetch_add(refused as u64, Relaxed);
        }
        for step in &valid {
            self.forget_replicas_of_step(step);
        }
        let (mut done, mut frees) = (0, false);
        let ran = self.copy_batch(&valid).and_then(|()| {
            for step in &valid {
                self.apply_step(step, false)?;
                frees |= frees_slots(step);
                done += 1;
            }
            Ok(())
        });
        let mut st = lock(&self.state);
        for op in copy_ops(steps).filter(|op| op.kind == CopyKind::Incoming) {
            st.pending.forget(op.src.first, op.pages());
        }
        self.carried.note_waiting(&st.pending);
        drop(st);
        if frees {
            let snap = self.snapshot(&c);
            self.persist(&mut c, snap)?;
        }
        ran?;
        Ok(CopierRound {
            done,
            refused,
            bytes: copy_ops(&valid).map(|op| op.bytes(&self.geo)).sum(),
        })
    }

    /// Copies a batch of validated, independent steps: sources merged and ascending into
    /// one buffer, checked against their checksums, then destinations merged and
    /// ascending. The caller holds the commit lock and the gate.
    fn copy_batch(&self, steps: &[Step]) -> io::Result<()> {
        let io = BatchIo::of_steps(steps, &self.geo, READ_GAP_SECTORS);
        let mut dev = StoreDevice {
            engine: self,
            store: self.store.as_ref(),
        };
        let staged = read_sources(&io, &mut dev)?;
        for op in copy_ops(steps).filter(|op| op.src.region == Region::Bopt) {
            self.verify_copy_source(op.src.first as u32, &staged.run_bytes(&op.src, &self.geo))?;
        }
        write_destinations(&io, &staged, &mut dev)?;
        let mut moved = 0;
        for op in copy_ops(steps) {
            if op.dst.region == Region::Bopt {
                self.sum_copied_pages(op.dst.first as u32, &staged.run_bytes(&op.src, &self.geo));
            }
            moved += op.bytes(&self.geo);
        }
        self.counters.bytes_moved.fetch_add(moved, Relaxed);
        self.counters
            .copier_requests
            .fetch_add(io.requests() as u64, Relaxed);
        Ok(())
    }

    /// Piggybacking: after a foreground read of whole sectors `buf` at `sector` (the
    /// caller still shares their stripes, so no write to those pages ran since the read),
    /// keeps every page of it the running plan brings in, to be written to its slot with
    /// the others at the copier's next round ([`Engine::place_carried`]). Holding them
    /// costs no foreground time, and their slot writes then go out as one ascending
    /// stream instead of one write into the region per read miss. When the pages held
    /// reach [`CARRIED_BYTES`], this reader writes them out itself.
    pub(super) fn piggyback_read(&self, buf: &[u8], sector: u64) {
        let ps = self.geo.page.sectors();
        let first = sector.div_ceil(ps);
        let end = (sector + buf.len() as u64 / 512) / ps;
        if end <= first || !self.carried.waiting.load(Relaxed) || self.is_read_only() {
            return;
        }
        // One lock: `take_read` finds nothing (and allocates nothing) when no page of the
        // read waits, which is the common case on this foreground path.
        let (steps, queue_gen) = {
            let mut st = lock(&self.state);
            let State {
                ind,
                pending,
                queue_gen,
                ..
            } = &mut *st;
            let steps = pending.take_read(ind, first, end - first);
            self.carried.note_waiting(pending);
            (steps, *queue_gen)
        };
        if steps.is_empty() {
            return;
        }
        let page = self.geo.page.bytes() as usize;
        let mut held = lock(&self.carried.held);
        for step in &steps {
            let Step::Copy(op) = step else { continue };
            let at =
                ((op.src.first - first) as usize) * page + ((first * ps - sector) * 512) as usize;
            let stripes = self.stripe_ids(op.src.first * ps, (op.src.first + op.pages()) * ps);
            held.bytes += op.bytes(&self.geo);
            held.runs.push(CarriedRun {
                queue_gen,
                op: *op,
                bytes: buf[at..at + op.pages() as usize * page].to_vec(),
                generations: stripes
                    .iter()
                    .map(|&i| (i, self.carried.generation(i)))
                    .collect(),
            });
        }
        let full = held.bytes >= CARRIED_BYTES;
        drop(held);
        if full {
            if let Err(e) = self.place_carried() {
                tracing::warn!(error = %e, "carried pages not placed; the copier will copy them");
            }
        }
    }

    /// Writes the pages foreground reads carried to their slots, ascending, and maps
    /// them, under the gate. A run is dropped (the copier's queue still has its step)
    /// when its pages' stripes were held for writing since it was read (a write, TRIM or
    /// destage may have changed their bytes), and keeps only the pages still valid on
    /// the current map; a run carried for a queue since replaced (a new plan, a detach)
    /// is dropped. Nothing is freed, so no commit: until the next FLUSH the durable
    /// map simply does not name the slots. Returns the pages placed.
    pub(super) fn place_carried(&self) -> io::Result<u64> {
        let mut runs = std::mem::take(&mut *lock(&self.carried.held)).runs;
        if runs.is_empty() {
            return Ok(0);
        }
        runs.sort_by_key(|r| (r.op.dst.region == Region::Data, r.op.dst.first));
        // Lock order: stripes (a reader's, shared), gate, state.
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        let queue_gen = lock(&self.state).queue_gen;
        let page = self.geo.page.bytes() as usize;
        let mut placed = 0;
        // A run of a plan since replaced (or of a detach) is not this queue's to place.
        let current = |r: &&CarriedRun| r.queue_gen == queue_gen && self.carried.unchanged(r);
        for run in runs.iter().filter(current) {
            // Validated on the live map: each run is applied before the next is validated.
            let (valid, _) = valid_parts(&[Step::Copy(run.op)], &lock(&self.state).ind);
            for step in &valid {
                let Step::Copy(op) = step else { continue };
                let at = (op.src.first - run.op.src.first) as usize * page;
                let bytes = &run.bytes[at..at + op.pages() as usize * page];
                let requests = self.write_run(&op.dst, bytes)?;
                self.counters.copier_requests.fetch_add(requests, Relaxed);
                self.forget_replicas_of_step(step);
                self.sum_copied_pages(op.dst.first as u32, bytes);
                self.apply_step(step, false)?;
                placed += op.pages();
            }
        }
        self.counters.piggybacked_pages.fetch_add(placed, Relaxed);
        Ok(placed)
    }
}

fn step_pages(step: &Step) -> u64 {
    match step {
        Step::Copy(op) => op.pages(),
        Step::Drop(_) => 0,
    }
}

fn copy_ops(steps: &[Step]) -> impl Iterator<Item = &CopyOp> {
    steps.iter().filter_map(|s| match s {
        Step::Copy(op) => Some(op),
        Step::Drop(_) => None,
    })
}

pub(super) fn frees_slots(step: &Step) -> bool {
    match step {
        Step::Drop(_) => true,
        Step::Copy(op) => matches!(op.kind, CopyKind::Evict | CopyKind::Relocate),
    }
}

/// The parts of independent `steps` (one batch) still valid on `ind`'s map: a whole step
/// when it validates, else for an incoming step its pages that still do (merged into
/// runs: a foreground write or a piggybacked read placed the others). Returns them and
/// how many were refused.
fn valid_parts(steps: &[Step], ind: &Indirector) -> (Vec<Step>, usize) {
    let (mut out, mut refused) = (Vec::new(), 0);
    for step in steps {
        if ind.validate(step).is_ok() {
            out.push(*step);
            continue;
        }
        let Step::Copy(op) = step else {
            refused += 1;
            continue;
        };
        if op.kind != CopyKind::Incoming {
            refused += 1;
            continue;
        }
        let mut run: Option<CopyOp> = None;
        for i in 0..op.pages() {
            let one = CopyOp {
                src: PageRun::new(op.src.region, op.src.first + i, 1),
                dst: PageRun::new(op.dst.region, op.dst.first + i, 1),
                ..*op
            };
            if ind.validate(&Step::Copy(one)).is_err() {
                // A page a foreground read already carried to its slot is done, not stale.
                if ind.map().lookup(one.src.first) != Some(one.dst.first as u32) {
                    refused += 1;
                }
                out.extend(run.take().map(Step::Copy));
                continue;
            }
            match &mut run {
                Some(r) => {
                    r.src.pages += 1;
                    r.dst.pages += 1;
                }
                None => run = Some(one),
            }
        }
        out.extend(run.map(Step::Copy));
    }
    (out, refused)
}
