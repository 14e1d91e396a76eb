//! Piggybacking: a page a reconfiguration is about to bring into the BOPT that the
//! foreground reads anyway (a miss, served from home) is written to its slot from the
//! data just read, without the copier reading it a second time.
//!
//! [`PendingIncoming`] holds the incoming pages of a reconfiguration not yet copied. After a
//! foreground read from home completes, [`PendingIncoming::take_read`] hands back the incoming
//! copies that read carries, as ordinary [`Step`]s: the caller writes the read's data for
//! `src` to `dst` (no read), then reports the step with [`Indirector::apply`]. A page is
//! handed out only when its step validates against the map at that moment (its slot is
//! free, the page still unmapped, so the home data just read is current); a page whose
//! slot still waits for an earlier step of the reconfiguration (a relocation chain, an
//! eviction) stays pending for the copier. [`PendingIncoming::remaining`] is what the copier
//! still has to do, in slot order.

use std::collections::BTreeMap;

use crate::bopt::Region;
use crate::copy::{CopyKind, CopyOp, PageRun, Step};
use crate::indirector::Indirector;

/// Incoming pages of a reconfiguration not yet in their slots: FS page -> slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingIncoming {
    slot_of: BTreeMap<u64, u64>,
}

impl PendingIncoming {
    /// The incoming pages of `steps` (a diff's or a schedule's steps).
    pub fn from_steps(steps: &[Step]) -> PendingIncoming {
        let mut slot_of = BTreeMap::new();
        for step in steps {
            if let Step::Copy(op) = step {
                if op.kind == CopyKind::Incoming {
                    for i in 0..op.pages() {
                        slot_of.insert(op.src.first + i, op.dst.first + i);
                    }
                }
            }
        }
        PendingIncoming { slot_of }
    }

    /// Pages still waiting for their slot.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    /// Stops waiting for FS pages `first .. first + pages` (the copier has placed them,
    /// or found their step stale).
    pub fn forget(&mut self, first: u64, pages: u64) {
        let gone: Vec<u64> = self
            .slot_of
            .range(first..first.saturating_add(pages))
            .map(|(&p, _)| p)
            .collect();
        for p in gone {
            self.slot_of.remove(&p);
        }
    }

    /// The incoming copies a foreground read of FS pages `first .. first + pages` from
    /// home carries, taken out of the pending set: write-only steps, merged where both
    /// the FS pages and the slots run on. Pages whose step does not validate against
    /// `ind`'s map now stay pending.
    pub fn take_read(&mut self, ind: &Indirector, first: u64, pages: u64) -> Vec<Step> {
        let hits: Vec<(u64, u64)> = self
            .slot_of
            .range(first..first.saturating_add(pages))
            .map(|(&p, &s)| (p, s))
            .collect();
        let mut out: Vec<Step> = Vec::new();
        for (page, slot) in hits {
            let step = incoming(page, slot, 1);
            if ind.validate(&step).is_err() {
                continue;
            }
            self.slot_of.remove(&page);
            match out.last_mut() {
                Some(Step::Copy(op)) if op.src.end() == page && op.dst.end() == slot => {
                    op.src.pages += 1;
                    op.dst.pages += 1;
                }
                _ => out.push(step),
            }
        }
        out
    }

    /// The incoming copies still to be made by the copier, one page each, in slot order.
    pub fn remaining(&self) -> Vec<Step> {
        let mut pairs: Vec<(u64, u64)> = self.slot_of.iter().map(|(&p, &s)| (p, s)).collect();
        pairs.sort_unstable_by_key(|&(_, s)| s);
        pairs.into_iter().map(|(p, s)| incoming(p, s, 1)).collect()
    }
}

fn incoming(page: u64, slot: u64, pages: u64) -> Step {
    Step::Copy(CopyOp {
        kind: CopyKind::Incoming,
        src: PageRun::new(Region::Data, page, pages),
        dst: PageRun::new(Region::Bopt, slot, pages),
    })
}
