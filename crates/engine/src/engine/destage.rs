//! Destage that lets foreground requests run (docs/format.md "Destage").
//!
//! [`Engine::run_steps`] holds the gate exclusively from the first copy to the end of
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
        // The commit lock is taken per step, after the step's stripes (see
        // `destage_step`), and again for the batch's commit: never held while waiting
        // for a stripe.
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
            let mut c = lock(&self.commit);
            let snap = {
                let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
                self.snapshot(&c)
            };
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
        // One step executor at a time (a detach or reconfiguration step, another
        // destage). Taken after the stripes, the engine's lock order (stripes, commit,
        // gate): a client write holds its stripes while `release_replicas` or a TRIM
        // takes the commit lock, so a destage holding commit while waiting for a stripe
        // deadlocked with it (every request and the shutdown hung).
        let _executor = lock(&self.commit);
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

#[cfg(test)]
mod tests {
    use crate::format::LayoutRequest;
    use crate::{Engine, EngineOptions, Layout, MemStore};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// An in-memory engine of 256 data pages with a 16-page write buffer.
    fn small_engine() -> Engine {
        let l = Layout::plan(&LayoutRequest {
            data_bytes: 256 * 4096,
            bopt_bytes: 8 * (2 * 4096 + 8 * 4096)
                + 3 * 4096
                + 34 * crate::format::FREEMAP_CHUNK_BYTES,
            page_bytes: 4096,
            segment_pages: 8,
            write_buffer_fraction: 0.25,
            separate: false,
        })
        .unwrap();
        let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
        Engine::format(store.as_ref(), &l, 1).unwrap();
        Engine::open(store, EngineOptions::default()).unwrap().0
    }

    /// A client write holds its pages' stripes and then takes the commit lock (a write
    /// dropping replicas, a TRIM). A destage waiting for one of those stripes must not
    /// hold the commit lock meanwhile, or neither ever proceeds (the hang that stopped
    /// CI: every request and the server's shutdown waited forever).
    #[test]
    fn a_destage_waiting_for_a_stripe_does_not_hold_the_commit_lock() {
        let e = Arc::new(small_engine());
        let page = vec![7u8; 4096];
        for p in 0..64u64 {
            e.write_bytes(&page, p * 4096).unwrap();
        }
        let steps = {
            let st = super::lock(&e.state);
            assert!(st.ind.wants_destage(), "the write buffer is full");
            st.ind.destage_oldest(e.opts.max_copy_pages)
        };
        let reblock_layout::Step::Copy(op) = &steps[0] else {
            panic!("a destage starts with an eviction: {:?}", steps[0]);
        };
        let per_page = e.geo.page.sectors();
        // A client write's stripes, held as release_replicas holds them.
        let held = e.lock_stripes(op.dst.first * per_page, (op.dst.first + 1) * per_page);
        let bg = {
            let e = Arc::clone(&e);
            std::thread::spawn(move || e.destage(&steps).unwrap())
        };
        std::thread::sleep(Duration::from_millis(200)); // the destage now waits for `held`
        let t = Instant::now();
        let got = loop {
            if let Ok(c) = e.commit.try_lock() {
                break Some(c);
            }
            if t.elapsed() > Duration::from_secs(5) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(
            got.is_some(),
            "the destage held the commit lock while waiting for a stripe: deadlock"
        );
        drop(got);
        drop(held);
        assert!(
            bg.join().unwrap() > 0,
            "the destage ran once the stripe was free"
        );
    }
}
