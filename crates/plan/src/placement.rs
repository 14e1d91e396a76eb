//! What a policy decides: which file-system pages go where, in which order.
//!
//! A policy returns a [`Placement`] and performs nothing (DESIGN.md: policy is separate
//! from mechanism); the layout crate turns it into a plan and the engine or simulator
//! carries it out.

use crate::master::{MasterGraph, VertexId};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;

/// Inputs every policy shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanParams {
    /// Sectors per page: plans work in pages (DESIGN.md "Units"); 8 = 4 KiB.
    pub page_sectors: NonZeroU32,
    /// Size of the read cache (the region placed into), in pages; `None` = unbounded.
    pub read_cache_pages: Option<u64>,
    /// A vertex joins a group only if its connection to the group weighs at least this,
    /// and starts one only if one of its edges does (seed 000 §4.3: stop when "the edges
    /// connecting to the unplaced vertices ... have weight below a chosen threshold").
    /// 0 places every vertex, isolated ones as groups of their own.
    pub min_edge_weight: u64,
    /// dlr-seq / dlr-frag: score a candidate only against the `k_window` left-most (for its
    /// outgoing edges) or right-most (for its incoming edges) placed vertices (seed 002 §4,
    /// the refinement after the example). 0 = against the whole placed list, as in Figure 6.
    pub k_window: usize,
}

impl Default for PlanParams {
    fn default() -> Self {
        PlanParams {
            page_sectors: NonZeroU32::new(8).expect("8 is not zero"),
            read_cache_pages: None,
            min_edge_weight: 1,
            k_window: 0,
        }
    }
}

impl PlanParams {
    pub fn page_sectors(&self) -> u64 {
        u64::from(self.page_sectors.get())
    }
}

/// Where [`PlacedRange::target`] points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetSpace {
    /// Targets are read-cache slots (page index from the start of the BOPT read cache).
    ReadCache,
    /// Targets are file-system pages of the data area itself: the placement permutes the
    /// pages the workload already uses, with no extra region (dlr-frag, seed 002 §6.1).
    DataArea,
}

/// `pages` consecutive FS pages from `fs_page`, to go to `target .. target + pages`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedRange {
    pub fs_page: u64,
    pub pages: u64,
    pub target: u64,
}

/// The ordered page ranges a policy chose. Ranges come in placement order; no FS page
/// appears twice and no target page is used twice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub policy: String,
    pub page_sectors: u32,
    pub space: TargetSpace,
    pub ranges: Vec<PlacedRange>,
    /// FS2 replicas to keep in free data-area space: each range's FS pages get a copy in
    /// free pages as close as possible to data-area page `target` (the hot area's centre),
    /// consecutive pages in consecutive free pages. Placement order; empty for policies
    /// that do not replicate (see [`crate::Capabilities::replicates`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<PlacedRange>,
}

impl Placement {
    pub fn empty(policy: &str, params: &PlanParams) -> Placement {
        Placement {
            policy: policy.to_string(),
            page_sectors: params.page_sectors.get(),
            space: TargetSpace::ReadCache,
            ranges: Vec::new(),
            replicas: Vec::new(),
        }
    }
    /// Total pages placed.
    pub fn pages(&self) -> u64 {
        self.ranges.iter().map(|r| r.pages).sum()
    }
    /// The pages placed and the FS2 replicas reserved: what a plan asks to be copied or
    /// written.
    pub fn pages_with_replicas(&self) -> u64 {
        self.pages() + self.replicas.iter().map(|r| r.pages).sum::<u64>()
    }
    /// Every (FS page, target page) pair in order.
    pub fn page_pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges
            .iter()
            .flat_map(|r| (0..r.pages).map(move |i| (r.fs_page + i, r.target + i)))
    }
    /// The FS pages in placement order.
    pub fn fs_pages(&self) -> Vec<u64> {
        self.page_pairs().map(|p| p.0).collect()
    }
    /// This placement made incremental against what is in place: `in_place` maps each FS
    /// page now in the read cache to its slot. Every page of this placement already in
    /// the read cache keeps its slot (pages in their slot never move); the others take the
    /// free slots below `slots` in placement order, the empty ones first, then those of
    /// pages this placement no longer holds. A re-plan thus copies only what is new:
    /// BORG's order, re-made from more training each epoch, shifts every page and a
    /// fresh plan re-copied the whole region (the start-up capture: 17 s of copies to
    /// add a few MiB, against 3.7 s for the first placement). A data-area permutation is
    /// returned unchanged.
    pub fn stable_against(&self, in_place: &FxHashMap<u64, u64>, slots: u64) -> Placement {
        if self.space != TargetSpace::ReadCache || in_place.is_empty() {
            return self.clone();
        }
        let planned: FxHashSet<u64> = self.page_pairs().map(|(p, _)| p).collect();
        let mut taken = vec![false; slots as usize];
        let mut dropped = Vec::new();
        for (&page, &slot) in in_place {
            if slot >= slots {
                continue;
            }
            taken[slot as usize] = true;
            if !planned.contains(&page) {
                dropped.push(slot);
            }
        }
        dropped.sort_unstable();
        let empty = (0..slots).filter(|&s| !taken[s as usize]);
        let mut free = empty.chain(dropped);
        let mut out = Placement {
            ranges: Vec::with_capacity(self.ranges.len()),
            ..self.clone()
        };
        for (page, _) in self.page_pairs() {
            let slot = match in_place.get(&page) {
                Some(&s) if s < slots => s,
                _ => free
                    .next()
                    .expect("a placement within the slots has a slot for every page"),
            };
            out.push(page, 1, slot);
        }
        out
    }

    /// The first ranges of this placement, in placement order, up to at least `share`
    /// (0..=1) of its pages: the groups a policy ranks first (BORG places its heaviest
    /// groups first). Per-group admission weighs such leading shares of a plan against
    /// each other. A data-area permutation is returned whole: part of a permutation
    /// would move pages onto pages that stay.
    pub fn leading(&self, share: f64) -> Placement {
        if self.space != TargetSpace::ReadCache || share >= 1.0 {
            return self.clone();
        }
        let want = (self.pages() as f64 * share.max(0.0)).ceil() as u64;
        let mut out = Placement {
            ranges: Vec::new(),
            ..self.clone()
        };
        let mut pages = 0;
        for r in &self.ranges {
            if pages >= want {
                break;
            }
            out.ranges.push(*r);
            pages += r.pages;
        }
        out
    }

    /// Appends a range, merging it into the previous one when both sides continue it.
    pub(crate) fn push(&mut self, fs_page: u64, pages: u64, target: u64) {
        if pages == 0 {
            return;
        }
        if let Some(last) = self.ranges.last_mut() {
            if last.fs_page + last.pages == fs_page && last.target + last.pages == target {
                last.pages += pages;
                return;
            }
        }
        self.ranges.push(PlacedRange {
            fs_page,
            pages,
            target,
        });
    }
}

/// Pages of master vertices, each counted once: neighbouring vertices that are not page
/// aligned share their boundary page, and only the first vertex to claim it gets it.
/// Only pages at an unaligned start or end can be shared (vertices are disjoint), so only
/// those are remembered.
#[derive(Clone, Debug, Default)]
pub(crate) struct PageClaims {
    page_sectors: u64,
    shared: FxHashSet<u64>,
}

impl PageClaims {
    pub fn new(page_sectors: u64) -> PageClaims {
        PageClaims {
            page_sectors,
            shared: FxHashSet::default(),
        }
    }

    /// The pages `[first, end)` of `v` not yet claimed (a shared page can only be at
    /// either end, so the rest stays one range), without claiming them.
    pub fn unclaimed(&self, g: &MasterGraph, v: VertexId) -> (u64, u64) {
        let (first, end, head, tail) = self.span(g, v);
        let mut lo = first;
        let mut hi = end;
        if head && self.shared.contains(&first) {
            lo += 1;
        }
        if tail && hi > lo && self.shared.contains(&(end - 1)) {
            hi -= 1;
        }
        (lo, hi.max(lo))
    }

    /// Claims the pages of `v`, returning the range that was still free.
    pub fn claim(&mut self, g: &MasterGraph, v: VertexId) -> (u64, u64) {
        let range = self.unclaimed(g, v);
        let (first, end, head, tail) = self.span(g, v);
        if head {
            self.shared.insert(first);
        }
        if tail {
            self.shared.insert(end - 1);
        }
        range
    }

    /// Page span of `v` and whether its first / last page may be shared.
    fn span(&self, g: &MasterGraph, v: VertexId) -> (u64, u64, bool, bool) {
        let e = g.vertex(v).extent;
        let ps = self.page_sectors;
        let first = e.start_sector / ps;
        let end = e.end_sector().div_ceil(ps);
        (
            first,
            end,
            !e.start_sector.is_multiple_of(ps),
            !e.end_sector().is_multiple_of(ps),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(pairs: &[(u64, u64)]) -> Placement {
        let mut p = Placement::empty("borg", &PlanParams::default());
        for &(page, target) in pairs {
            p.push(page, 1, target);
        }
        p
    }

    #[test]
    fn stable_keeps_placed_pages_and_fills_empty_slots_first() {
        // In place: page 10 in slot 0, 11 in slot 1, 50 (no longer planned) in slot 2.
        let in_place: FxHashMap<u64, u64> = [(10, 0), (11, 1), (50, 2)].into_iter().collect();
        // The new plan shifts everything: 20, 21 first, then 10, 11.
        let fresh = placement(&[(20, 0), (21, 1), (10, 2), (11, 3)]);
        let stable = fresh.stable_against(&in_place, 5);
        let pairs: Vec<(u64, u64)> = stable.page_pairs().collect();
        // Placed pages keep their slots; new ones take the empty slots 3, 4 in plan
        // order, not slot 2 (page 50's) while an empty one is left.
        assert_eq!(pairs, vec![(20, 3), (21, 4), (10, 0), (11, 1)]);
        assert_eq!(stable.pages(), fresh.pages());
        // Ranges merge where pages and slots both run on.
        assert_eq!(stable.ranges.len(), 2);
    }

    #[test]
    fn stable_reuses_slots_of_dropped_pages_when_no_empty_one_is_left() {
        let in_place: FxHashMap<u64, u64> = [(10, 0), (50, 1), (51, 2)].into_iter().collect();
        let fresh = placement(&[(10, 1), (30, 2), (31, 0)]);
        let pairs: Vec<(u64, u64)> = fresh.stable_against(&in_place, 3).page_pairs().collect();
        assert_eq!(pairs, vec![(10, 0), (30, 1), (31, 2)]);
    }

    #[test]
    fn leading_keeps_whole_ranges_in_plan_order() {
        let mut p = Placement::empty("borg", &PlanParams::default());
        p.push(100, 4, 0);
        p.push(10, 2, 4);
        p.push(50, 2, 6);
        // A quarter is 2 of 8 pages: the first range whole.
        assert_eq!(p.leading(0.25).fs_pages(), vec![100, 101, 102, 103]);
        assert_eq!(p.leading(0.6).pages(), 6);
        assert_eq!(p.leading(1.0), p);
        assert_eq!(p.leading(0.0).pages(), 0);
        // A permutation is never cut.
        let mut perm = p.clone();
        perm.space = TargetSpace::DataArea;
        assert_eq!(perm.leading(0.25), perm);
    }

    #[test]
    fn stable_against_nothing_placed_is_the_plan() {
        let fresh = placement(&[(20, 0), (21, 1)]);
        assert_eq!(fresh.stable_against(&FxHashMap::default(), 4), fresh);
    }
}
