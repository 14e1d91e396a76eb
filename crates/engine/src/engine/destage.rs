//! Destage that lets foreground requests run (docs/format.md "Destage").
//!
//! [`Engine::run_batches`] holds the gate exclusively from the first copy to the end of
//! the commit (three fdatasyncs), so every read and write waited for a whole segment's
//! destage: random writes wider than the write buffer ran at a third of a plain file's
//! speed. Here each eviction holds only the stripes of the pages it copies (no write to
//! them can slip between the copy and the map change, so none is lost by unmapping the
//! slot), and the slots it frees are held, not reused, until the commit that ends the
//! batch no longer names them. Readers that routed to a slot before it was freed finish
//! before that commit's snapshot (it takes the gate exclusively for a moment), so a held
//! slot is rewritten only once nobody can be reading it.

use super::{lock, rofs, Engine};
use reblock_layout::{CopyKind, Step};
use std::io;
use std::sync::atomic::Ordering::Relaxed;

impl Engine {
    /// Runs a destage's steps (evictions and drops of write-buffer pages) one at a time
    /// with foreground I/O going on, then commits once and frees the slots they emptied.
    /// Steps made stale meanwhile are refused and skipped; after a failed step the
    /// steps already applied are still committed. Returns the number of steps run.
    pub(super) fn destage(&self, steps: &[Step]) -> io::Result<usize> {
        if self.is_read_only() {
            return Err(rofs());
        }
        // One step executor at a time (a detach or reconfiguration step, another
        // destage); a FLUSH waits for the batch's commit.
        let mut c = lock(&self.commit);
        let mut done = 0;
        let mut ran = Ok(());
        for step in steps {
            match self.destage_step(step) {
                Ok(true) => done += 1,
                Ok(false) => {}
                Err(e) => {
                    ran = Err(e);
                    break;
                }
            }
        }
        if done > 0 {
            let snap = self.snapshot_gated(&c);
            self.persist(&mut c, snap)?;
            // The durable map no longer names the freed slots: they may take new data.
            lock(&self.state).ind.release_held();
        }
        ran.map(|()| done)
    }

    /// One destage step with the stripes of its pages held: validate, copy home, apply
    /// the map change holding the freed slots. False when the step is stale.
    fn destage_step(&self, step: &Step) -> io::Result<bool> {
        let (first, pages) = match step {
            Step::Copy(op) if op.kind == CopyKind::Evict => (op.dst.first, op.dst.pages),
            // A drop needs no stripes: it applies only to clean pages, and a write to one
            // marks it dirty when it routes, so a racing write makes the drop stale.
            Step::Drop(_) => (0, 0),
            Step::Copy(op) => {
                return Err(io::Error::other(format!(
                    "destage: unexpected {:?} step",
                    op.kind
                )))
            }
        };
        let per_page = self.geo.page.sectors();
        let _stripes =
            (pages > 0).then(|| self.lock_stripes(first * per_page, (first + pages) * per_page));
        if let Err(e) = lock(&self.state).ind.validate(step) {
            tracing::debug!(error = %e, "destage step refused");
            self.counters.steps_refused.fetch_add(1, Relaxed);
            return Ok(false);
        }
        self.forget_replicas_of_step(step);
        if let Step::Copy(op) = step {
            self.copy_pages(op)?;
        }
        self.apply_step(step, true)?;
        Ok(true)
    }
}
