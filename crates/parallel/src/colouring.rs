//! The placement planning heuristic, seed 003 Algorithm 1: min-conflict bin packing
//! (§IV-C) tailored by properties P1-P4.
//!
//! - P1: start from the current placement (colour = the disk a vertex is on now);
//! - P2: visit vertices in decreasing total correlation frequency;
//! - P3: conflicts are weighted by correlation frequency;
//! - P4: among equally good colours, prefer the one with more free capacity.
//!
//! Passes repeat until the weighted conflicts improve by less than `epsilon` (5%, the
//! seed's choice) of the previous pass, or reach zero, or `max_passes` is hit (the bound
//! the seed mentions as optional for line 19).
//!
//! Capacity: a vertex moves onto colour `c` only if `c`'s load stays at most `W` after the
//! move (the seed writes `caps[c] + w < W`; "at most" makes `W` the largest load allowed,
//! and a tie move additionally needs the target to end strictly emptier than the source,
//! as line 15 says). A disk therefore never grows past `W`; one that starts above `W`
//! (a skewed initial placement) can only shrink.

use serde::{Deserialize, Serialize};

use crate::graph::Graph;

/// Settings of Algorithm 1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColouringConfig {
    /// Stop when a pass improves the weighted conflicts by less than this fraction.
    pub epsilon: f64,
    /// Upper bound on passes.
    pub max_passes: usize,
}

impl Default for ColouringConfig {
    fn default() -> Self {
        ColouringConfig {
            epsilon: 0.05,
            max_passes: 50,
        }
    }
}

/// What a colouring run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColouringStats {
    pub passes: usize,
    pub conflicts_before: u64,
    pub conflicts_after: u64,
    /// Vertex moves made (a vertex moved twice counts twice).
    pub moves: u64,
}

/// The bins: load per colour (disk) in bytes, and the largest load allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bins {
    pub load_bytes: Vec<u64>,
    pub capacity_bytes: u64,
}

/// Recolours `colours` (initially the current placement, P1) to reduce weighted
/// conflicts, moving vertex loads (`weight_bytes`) between `bins`. Vertices without
/// edges are not in the correlation graph and keep their colour.
pub fn colour(
    graph: &Graph,
    weight_bytes: &[u64],
    colours: &mut [u32],
    bins: &mut Bins,
    cfg: &ColouringConfig,
) -> ColouringStats {
    let n = graph.vertices();
    assert_eq!(colours.len(), n, "one colour per vertex");
    assert_eq!(weight_bytes.len(), n, "one weight per vertex");
    let order = visiting_order(graph);
    let mut confs = vec![0u64; bins.load_bytes.len()];
    let mut stats = ColouringStats {
        conflicts_before: graph.conflicts(colours),
        ..Default::default()
    };
    let mut prev = stats.conflicts_before;
    stats.conflicts_after = prev;
    while prev > 0 && stats.passes < cfg.max_passes {
        for &v in &order {
            stats.moves += recolour(
                graph,
                v,
                weight_bytes[v as usize],
                colours,
                bins,
                &mut confs,
            );
        }
        stats.passes += 1;
        let now = graph.conflicts(colours);
        stats.conflicts_after = now;
        let improved = prev.saturating_sub(now) as f64;
        if improved < cfg.epsilon * prev as f64 {
            break;
        }
        prev = now;
    }
    stats
}

/// Vertices with edges, by decreasing total correlation frequency (P2); ties by id so
/// that runs are reproducible.
fn visiting_order(graph: &Graph) -> Vec<u32> {
    let mut order: Vec<(u64, u32)> = (0..graph.vertices() as u32)
        .map(|v| (graph.tcf(v), v))
        .filter(|&(tcf, _)| tcf > 0)
        .collect();
    order.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    order.into_iter().map(|(_, v)| v).collect()
}

/// Lines 11-18 of Algorithm 1 for one vertex; returns the moves made.
fn recolour(
    graph: &Graph,
    v: u32,
    w: u64,
    colours: &mut [u32],
    bins: &mut Bins,
    confs: &mut [u64],
) -> u64 {
    confs.fill(0);
    for &(u, weight) in graph.neighbours(v) {
        confs[colours[u as usize] as usize] += weight as u64;
    }
    let caps = &mut bins.load_bytes;
    let mut moves = 0;
    for c in 0..confs.len() {
        let cur = colours[v as usize] as usize;
        if c == cur || caps[c] + w > bins.capacity_bytes {
            continue;
        }
        let better = confs[c] < confs[cur];
        let tie_emptier = confs[c] == confs[cur] && caps[c] + w < caps[cur];
        if better || tie_emptier {
            caps[cur] -= w;
            caps[c] += w;
            colours[v as usize] = c as u32;
            moves += 1;
        }
    }
    moves
}
