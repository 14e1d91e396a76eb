//! Greedy grouping of master vertices: the placement heuristic shared by BORG's planner
//! (seed 000 §4.3, seed 001 §3.4.3) and the data layout reconfigurator (seed 002 §4,
//! Figure 6).
//!
//! A group starts from the most connected unplaced vertex (largest sum of incoming and
//! outgoing weights). Then, repeatedly, the unplaced vertex most connected to the group in
//! one direction joins it: `to_left` is the weight of its edges *into* the group, and it
//! goes before the group; `from_right` is the weight of the group's edges *into it*, and it
//! goes after. The larger of the two is its score; the best score wins. A group ends when
//! no unplaced vertex scores at least the threshold (or scores 0: another component), and
//! the next group starts from the most connected vertex left that has an edge at least as
//! heavy as the threshold.
//!
//! With a k-window (seed 002 §4, last paragraph) `to_left` only counts edges into the `k`
//! left-most members and `from_right` only edges from the `k` right-most ones, so that a
//! vertex is pulled by the neighbours it will actually sit next to.
//!
//! Scores live in arrays and a max-heap with lazy deletion: placing a vertex changes the
//! scores of its neighbours only, so planning costs O((n + m) log m). Only scores that
//! reach the threshold enter the heap.
//!
//! Ties are broken towards the lower vertex id (the lower LBA), and a vertex whose two
//! scores are equal goes after the group, so results are deterministic.

use crate::master::{MasterGraph, VertexId};
use crate::placement::PageClaims;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// One group: vertices from the lowest target position to the highest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub order: Vec<VertexId>,
    /// Index in `order` of the vertex the group started from.
    pub seed_index: usize,
}

/// Limits of one grouping run.
#[derive(Clone, Copy, Debug)]
pub struct GroupLimits {
    pub page_sectors: u64,
    /// Pages the groups may occupy in total; `u64::MAX` for no limit.
    pub capacity_pages: u64,
    pub min_edge_weight: u64,
    /// 0 = score against the whole group.
    pub k_window: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Unplaced,
    Placed,
    /// Did not fit in the space left; out of the run for good (space only shrinks).
    Rejected,
}

/// Groups in the order they were formed.
pub fn form_groups(g: &MasterGraph, limits: &GroupLimits) -> Vec<Group> {
    groups_grown_by(g, limits, Run::grow)
}

/// The groups `grow` forms from each seed in turn (the seed already claimed).
fn groups_grown_by<'g>(
    g: &'g MasterGraph,
    limits: &GroupLimits,
    mut grow: impl FnMut(&mut Run<'g>, VertexId) -> Group,
) -> Vec<Group> {
    let mut run = Run::new(g, limits);
    // A vertex none of whose edges reaches the threshold never starts a group: the run
    // stops once every edge left is lighter than the threshold (seed 000 §4.3).
    let mut seeds: Vec<(u64, VertexId)> = (0..g.len() as VertexId)
        .filter(|&v| heaviest_edge(g, v) >= limits.min_edge_weight)
        .map(|v| (g.degree(v), v))
        .collect();
    seeds.sort_unstable_by_key(|&(d, v)| (Reverse(d), v));
    let mut groups = Vec::new();
    for (_, seed) in seeds {
        if run.remaining_pages == 0 {
            break;
        }
        if run.state[seed as usize] != State::Unplaced || !run.try_claim(seed) {
            continue;
        }
        groups.push(grow(&mut run, seed));
    }
    groups
}

fn heaviest_edge(g: &MasterGraph, v: VertexId) -> u64 {
    let out = g.out_edges(v).iter();
    out.chain(g.in_edges(v))
        .map(|e| u64::from(e.1))
        .max()
        .unwrap_or(0)
}

struct Run<'g> {
    g: &'g MasterGraph,
    limits: GroupLimits,
    state: Vec<State>,
    to_left: Vec<u64>,
    from_right: Vec<u64>,
    touched: Vec<VertexId>,
    heap: BinaryHeap<(u64, Reverse<VertexId>)>,
    group: VecDeque<VertexId>,
    claims: PageClaims,
    remaining_pages: u64,
}

impl<'g> Run<'g> {
    fn new(g: &'g MasterGraph, limits: &GroupLimits) -> Run<'g> {
        Run {
            g,
            limits: *limits,
            state: vec![State::Unplaced; g.len()],
            to_left: vec![0; g.len()],
            from_right: vec![0; g.len()],
            touched: Vec::new(),
            heap: BinaryHeap::new(),
            group: VecDeque::new(),
            claims: PageClaims::new(limits.page_sectors),
            remaining_pages: limits.capacity_pages,
        }
    }

    /// Claims the pages of `v` if they fit in the space left; otherwise rejects `v`.
    fn try_claim(&mut self, v: VertexId) -> bool {
        let (lo, hi) = self.claims.unclaimed(self.g, v);
        if hi - lo > self.remaining_pages {
            self.state[v as usize] = State::Rejected;
            return false;
        }
        self.claims.claim(self.g, v);
        self.remaining_pages -= hi - lo;
        true
    }

    /// Grows one group from `seed` (already claimed) until nothing strong enough is left.
    fn grow(&mut self, seed: VertexId) -> Group {
        self.state[seed as usize] = State::Placed;
        self.group.push_back(seed);
        self.enter_left(seed);
        self.enter_right(seed);
        let mut seed_index = 0;
        while let Some(v) = self.best() {
            if self.remaining_pages == 0 {
                break; // the read cache is full (seed 000 §4.3)
            }
            if !self.try_claim(v) {
                continue;
            }
            self.state[v as usize] = State::Placed;
            if self.to_left[v as usize] > self.from_right[v as usize] {
                seed_index += 1;
                self.place_front(v);
            } else {
                self.place_back(v);
            }
        }
        for v in self.touched.drain(..) {
            self.to_left[v as usize] = 0;
            self.from_right[v as usize] = 0;
        }
        self.heap.clear();
        Group {
            order: self.group.drain(..).collect(),
            seed_index,
        }
    }

    /// The unplaced vertex with the best score, if it reaches the threshold.
    fn best(&mut self) -> Option<VertexId> {
        while let Some((score, Reverse(v))) = self.heap.pop() {
            let i = v as usize;
            if self.state[i] != State::Unplaced || score != self.score(v) {
                continue; // stale entry
            }
            // Only scores that reach the threshold are pushed (see `adjust`).
            return Some(v);
        }
        None
    }

    fn score(&self, v: VertexId) -> u64 {
        self.to_left[v as usize].max(self.from_right[v as usize])
    }

    fn window_full(&self) -> bool {
        self.limits.k_window != 0 && self.group.len() > self.limits.k_window
    }

    fn place_front(&mut self, v: VertexId) {
        self.group.push_front(v);
        self.enter_left(v);
        if self.window_full() {
            self.leave_left(self.group[self.limits.k_window]);
        } else {
            self.enter_right(v);
        }
    }

    fn place_back(&mut self, v: VertexId) {
        self.group.push_back(v);
        self.enter_right(v);
        if self.window_full() {
            self.leave_right(self.group[self.group.len() - 1 - self.limits.k_window]);
        } else {
            self.enter_left(v);
        }
    }

    /// `v` is now among the left-most members: unplaced vertices with edges into it gain.
    fn enter_left(&mut self, v: VertexId) {
        self.adjust(v, true, true);
    }
    fn leave_left(&mut self, v: VertexId) {
        self.adjust(v, true, false);
    }
    /// `v` is now among the right-most members: vertices its edges reach gain.
    fn enter_right(&mut self, v: VertexId) {
        self.adjust(v, false, true);
    }
    fn leave_right(&mut self, v: VertexId) {
        self.adjust(v, false, false);
    }

    fn adjust(&mut self, v: VertexId, left: bool, add: bool) {
        let g = self.g;
        let edges = if left { g.in_edges(v) } else { g.out_edges(v) };
        for &(u, w) in edges {
            let w = u64::from(w);
            if self.state[u as usize] != State::Unplaced {
                continue;
            }
            let slot = if left {
                &mut self.to_left[u as usize]
            } else {
                &mut self.from_right[u as usize]
            };
            if add {
                *slot += w;
            } else {
                *slot -= w;
            }
            self.touched.push(u);
            // `best` ends the group at the first current score below the threshold, so a
            // score below it only matters when nothing above it is left: the same end
            // as an empty heap. Such scores (most edges weigh 1) are not pushed.
            let score = self.score(u);
            if score >= self.limits.min_edge_weight.max(1) {
                self.heap.push((score, Reverse(u)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Extent;
    use crate::master::Vertex;

    /// The greedy rule of the module doc, every score summed afresh over the windows at
    /// every step: what the heap with lazy deletion must reproduce.
    fn grow_by_rescoring(run: &mut Run, seed: VertexId) -> Group {
        let (g, limits) = (run.g, run.limits);
        run.state[seed as usize] = State::Placed;
        let mut group = VecDeque::from([seed]);
        let mut seed_index = 0;
        loop {
            let k = if limits.k_window == 0 {
                group.len()
            } else {
                limits.k_window.min(group.len())
            };
            let left: Vec<VertexId> = group.iter().take(k).copied().collect();
            let right: Vec<VertexId> = group.iter().rev().take(k).copied().collect();
            let weight = |a: VertexId, b: VertexId| g.edge_weight(a, b);
            let best = (0..g.len() as VertexId)
                .filter(|&u| run.state[u as usize] == State::Unplaced)
                .map(|u| {
                    let to_left: u64 = left.iter().map(|&m| weight(u, m)).sum();
                    let from_right: u64 = right.iter().map(|&m| weight(m, u)).sum();
                    (to_left.max(from_right), Reverse(u), to_left > from_right)
                })
                .max_by_key(|&(s, u, _)| (s, u));
            let Some((score, Reverse(v), front)) = best else {
                break;
            };
            if score == 0 || score < limits.min_edge_weight || run.remaining_pages == 0 {
                break;
            }
            if !run.try_claim(v) {
                continue;
            }
            run.state[v as usize] = State::Placed;
            if front {
                seed_index += 1;
                group.push_front(v);
            } else {
                group.push_back(v);
            }
        }
        Group {
            order: group.into_iter().collect(),
            seed_index,
        }
    }

    /// A random graph of `n` one-page vertices, a few heavy edges among many light ones.
    fn random_graph(seed: u64, n: u32) -> MasterGraph {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let vertices = (0..n)
            .map(|i| Vertex {
                extent: Extent::new(u64::from(i) * 16, 8 * (1 + next(2) as u32)),
                hits: 1,
            })
            .collect();
        let edges = (0..3 * n)
            .map(|_| {
                let w = if next(4) == 0 { 1 + next(6) } else { 1 };
                (next(u64::from(n)) as u32, next(u64::from(n)) as u32, w)
            })
            .collect();
        MasterGraph::from_edges(vertices, edges)
    }

    #[test]
    fn the_heap_forms_the_groups_rescoring_forms() {
        for seed in 0..300 {
            let g = random_graph(seed, 4 + (seed % 40) as u32);
            let limits = GroupLimits {
                page_sectors: 8,
                capacity_pages: [u64::MAX, 12][(seed / 3 % 2) as usize],
                min_edge_weight: seed % 4,
                k_window: (seed / 7 % 4) as usize,
            };
            assert_eq!(
                form_groups(&g, &limits),
                groups_grown_by(&g, &limits, grow_by_rescoring),
                "seed {seed} {limits:?}"
            );
        }
    }
}
