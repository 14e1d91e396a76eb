//! Diffing a new plan against the current map into the reconfigurator's three stages
//! (seed 000 §4.4, §5.2; seed 001 §3.4.4, §3.5.3), and ordering the moves so no page is
//! overwritten before it is copied.
//!
//! Each planned page is **static** (already in its slot), **relocate** (mapped in another
//! slot, read cache or write buffer), or **incoming** (not mapped). A read-cache page the
//! plan no longer holds is **outgoing**: dirty ones are copied home first (write-back),
//! clean ones are just dropped. Write-buffer pages the plan does not name stay where they
//! are; destaging them is the write buffer's business.
//!
//! Steps come in the seed's order: outgoing, relocate, incoming. Relocations form chains
//! (each move's destination is the source of the next one to wait for, ending at a free
//! slot) and cycles. A chain runs from its free end backwards. A cycle is broken as the
//! seed does: one member (the clean one with the lowest slot, else the lowest slot) leaves
//! the BOPT — copied home if dirty — the others then form a chain, and the member comes
//! back as an incoming page at the end.

use crate::bopt::Region;
use crate::copy::{self, CopyKind, PageMove, Step};
use crate::indirector::Indirector;
use crate::plan::{Plan, PlanError};
use std::collections::HashMap;

/// Knobs of the diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiffOptions {
    /// Largest single copy, in pages (the executor buffers a whole copy in memory).
    pub max_copy_pages: u64,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            max_copy_pages: 256,
        }
    }
}

/// What a diff found and what executing it moves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiffStats {
    pub static_pages: u64,
    pub relocate_pages: u64,
    pub incoming_pages: u64,
    pub outgoing_dirty_pages: u64,
    pub outgoing_clean_pages: u64,
    /// Relocation chains of two moves or more.
    pub chains: u64,
    pub cycles: u64,
    /// Bytes copied by all steps (each byte is read once and written once).
    pub bytes_moved: u64,
}

/// The ordered steps that turn the current map into the plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconfiguration {
    pub steps: Vec<Step>,
    pub stats: DiffStats,
}

#[derive(Clone, Copy, Debug)]
struct Relocation {
    src: u32,
    dst: u32,
    fs_page: u64,
}

/// Diffs `plan` against the indirector's map. The map is not changed: execute the steps
/// in order, calling [`Indirector::apply`] after each one's I/O.
pub fn diff(
    plan: &Plan,
    ind: &Indirector,
    opts: DiffOptions,
) -> Result<Reconfiguration, PlanError> {
    let g = ind.geometry();
    plan.validate(g)?;
    let map = ind.map();
    let max = opts.max_copy_pages.max(1);
    let mut stats = DiffStats::default();
    let mut planned: HashMap<u64, u32> = HashMap::with_capacity(plan.pages() as usize);
    let (mut rels, mut incoming) = (Vec::new(), Vec::new());
    for (fs_page, slot) in plan.pairs() {
        let slot = slot as u32;
        planned.insert(fs_page, slot);
        match map.lookup(fs_page) {
            Some(s) if s == slot => stats.static_pages += 1,
            Some(src) => rels.push(Relocation {
                src,
                dst: slot,
                fs_page,
            }),
            None => incoming.push(PageMove {
                src: fs_page,
                dst: u64::from(slot),
            }),
        }
    }
    let (mut out_clean, mut out_dirty) = (Vec::new(), Vec::new());
    for slot in 0..g.read_cache_pages {
        let Some(p) = map.fs_page_of(slot) else {
            continue;
        };
        if !planned.contains_key(&p) {
            if map.is_dirty(slot) {
                out_dirty.push(PageMove {
                    src: u64::from(slot),
                    dst: p,
                });
            } else {
                out_clean.push(slot);
            }
        }
    }
    stats.relocate_pages = rels.len() as u64;
    stats.outgoing_clean_pages = out_clean.len() as u64;
    stats.outgoing_dirty_pages = out_dirty.len() as u64;

    let mut steps = Vec::new();
    copy::drops(&out_clean, &mut steps);
    copy::coalesce(
        CopyKind::Evict,
        Region::Bopt,
        Region::Data,
        &out_dirty,
        max,
        &mut steps,
    );
    order_relocations(&rels, ind, max, &mut steps, &mut incoming, &mut stats);
    stats.incoming_pages = incoming.len() as u64;
    incoming.sort_unstable_by_key(|m| m.dst);
    copy::coalesce(
        CopyKind::Incoming,
        Region::Data,
        Region::Bopt,
        &incoming,
        max,
        &mut steps,
    );
    stats.bytes_moved = steps.iter().map(|s| s.bytes_moved(g)).sum();
    Ok(Reconfiguration { steps, stats })
}

/// Emits relocation steps, chains first (from their free end back), then cycles broken
/// through the FS; a broken cycle's member is added to `incoming`.
fn order_relocations(
    rels: &[Relocation],
    ind: &Indirector,
    max: u64,
    steps: &mut Vec<Step>,
    incoming: &mut Vec<PageMove>,
    stats: &mut DiffStats,
) {
    let by_src: HashMap<u32, usize> = rels.iter().enumerate().map(|(i, r)| (r.src, i)).collect();
    // blocker[i]: the relocation whose page sits in i's destination and must move first.
    let blocker: Vec<Option<usize>> = rels.iter().map(|r| by_src.get(&r.dst).copied()).collect();
    let mut waiter = vec![None; rels.len()];
    for (i, b) in blocker.iter().enumerate() {
        if let Some(b) = *b {
            waiter[b] = Some(i);
        }
    }
    let mut done = vec![false; rels.len()];
    let mut order: Vec<usize> = Vec::new();
    // Chain heads: nobody waits for them to leave.
    for head in (0..rels.len()).filter(|&i| waiter[i].is_none()) {
        let mut chain = vec![head];
        while let Some(b) = blocker[*chain.last().expect("non-empty")] {
            chain.push(b);
        }
        stats.chains += u64::from(chain.len() >= 2);
        for &i in chain.iter().rev() {
            done[i] = true;
            order.push(i);
        }
    }
    emit_relocations(rels, &order, max, steps);
    // Whatever is left lies on cycles; visit them from their lowest source slot.
    let mut rest: Vec<usize> = (0..rels.len()).filter(|&i| !done[i]).collect();
    rest.sort_unstable_by_key(|&i| rels[i].src);
    for start in rest {
        if done[start] {
            continue;
        }
        let mut cycle = vec![start];
        let mut cur = blocker[start].expect("on a cycle");
        while cur != start {
            cycle.push(cur);
            cur = blocker[cur].expect("on a cycle");
        }
        stats.cycles += 1;
        let map = ind.map();
        let victim = cycle
            .iter()
            .copied()
            .filter(|&i| !map.is_dirty(rels[i].src))
            .min_by_key(|&i| rels[i].src)
            .unwrap_or_else(|| {
                *cycle
                    .iter()
                    .min_by_key(|&&i| rels[i].src)
                    .expect("non-empty")
            });
        break_cycle(rels, &waiter, victim, ind, max, steps, incoming);
        cycle.iter().for_each(|&i| done[i] = true);
    }
}

/// The victim leaves the BOPT (home first if dirty); then the one waiting for its slot
/// moves, then the one waiting for that one's slot, and so on round the cycle; the victim
/// returns as an incoming page (seed 000 §5.2).
fn break_cycle(
    rels: &[Relocation],
    waiter: &[Option<usize>],
    victim: usize,
    ind: &Indirector,
    max: u64,
    steps: &mut Vec<Step>,
    incoming: &mut Vec<PageMove>,
) {
    let v = rels[victim];
    if ind.map().is_dirty(v.src) {
        let home = [PageMove {
            src: u64::from(v.src),
            dst: v.fs_page,
        }];
        copy::coalesce(
            CopyKind::Evict,
            Region::Bopt,
            Region::Data,
            &home,
            max,
            steps,
        );
    } else {
        copy::drops(&[v.src], steps);
    }
    let mut order = Vec::new();
    let mut cur = waiter[victim].expect("on a cycle");
    while cur != victim {
        order.push(cur);
        cur = waiter[cur].expect("on a cycle");
    }
    emit_relocations(rels, &order, max, steps);
    incoming.push(PageMove {
        src: v.fs_page,
        dst: u64::from(v.dst),
    });
}

fn emit_relocations(rels: &[Relocation], order: &[usize], max: u64, steps: &mut Vec<Step>) {
    let moves: Vec<PageMove> = order
        .iter()
        .map(|&i| PageMove {
            src: u64::from(rels[i].src),
            dst: u64::from(rels[i].dst),
        })
        .collect();
    copy::coalesce(
        CopyKind::Relocate,
        Region::Bopt,
        Region::Bopt,
        &moves,
        max,
        steps,
    );
}
