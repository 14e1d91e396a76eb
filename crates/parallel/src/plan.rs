//! One planning round of seed 003 (Figure 3): frequent pairs -> correlation graph of
//! blocks or groups -> Algorithm 1 colouring -> minimum-movement colour-to-disk mapping.
//! The plan is a decision only (a disk per block); the caller applies it.

use serde::{Deserialize, Serialize};

use crate::colouring::{colour, Bins, ColouringConfig, ColouringStats};
use crate::graph::Graph;
use crate::reorganize::{map_colours, Movement};

/// What the planner is given. Blocks are dense ids `0..disk.len()`.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// Current disk of each block.
    pub disk: &'a [u32],
    /// Group of each block (`0..groups`); every block of a group is on one disk.
    pub group_of: &'a [u32],
    pub groups: usize,
    pub disks: usize,
    pub block_bytes: u64,
    /// Largest load of a disk in bytes (`W` of Algorithm 1).
    pub capacity_bytes: u64,
    /// Frequent pairs `(block id, block id, count)` after support.
    pub pairs: &'a [(u32, u32, u32)],
    pub colouring: ColouringConfig,
}

/// Figures of one plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanStats {
    pub pairs: usize,
    /// Vertices of the correlation graph (blocks or groups with at least one edge).
    pub vertices: usize,
    pub edges: usize,
    pub colouring: ColouringStats,
    pub bytes_moved: u64,
}

/// The new disk of every block, and the plan's figures.
pub fn plan(input: &PlanInput) -> (Vec<u32>, PlanStats) {
    let (n, g, bb) = (input.disk.len(), input.groups, input.block_bytes);
    let mut weight = vec![0u64; g];
    let mut colours = vec![0u32; g];
    for b in 0..n {
        let grp = input.group_of[b] as usize;
        weight[grp] += bb;
        colours[grp] = input.disk[b]; // P1: the current placement
    }
    let graph = Graph::from_edges(
        g,
        input
            .pairs
            .iter()
            .map(|&(a, b, c)| (input.group_of[a as usize], input.group_of[b as usize], c)),
    );
    let mut bins = Bins {
        load_bytes: vec![0; input.disks],
        capacity_bytes: input.capacity_bytes,
    };
    for v in 0..g {
        bins.load_bytes[colours[v] as usize] += weight[v];
    }
    let initial = colours.clone();
    let stats = colour(&graph, &weight, &mut colours, &mut bins, &input.colouring);
    let in_graph: Vec<bool> = (0..g as u32)
        .map(|v| !graph.neighbours(v).is_empty())
        .collect();
    let mapping = map_colours(&movement(input, &initial, &colours, &weight, &in_graph));
    let mut group_disk = initial;
    for v in 0..g {
        if in_graph[v] {
            group_disk[v] = mapping[colours[v] as usize] as u32;
        }
    }
    let new_disk: Vec<u32> = (0..n)
        .map(|b| group_disk[input.group_of[b] as usize])
        .collect();
    let moved = (0..n).filter(|&b| new_disk[b] != input.disk[b]).count() as u64;
    let out = PlanStats {
        pairs: input.pairs.len(),
        vertices: in_graph.iter().filter(|&&x| x).count(),
        edges: graph.edges(),
        colouring: stats,
        bytes_moved: moved * bb,
    };
    (new_disk, out)
}

/// The §IV-D cost table over the graph's vertices (the others stay where they are): bytes
/// of colour `c` now on disk `d`, and which mappings keep every disk within `W` (the
/// identity always allowed: the colouring itself never overfilled a disk).
fn movement(
    input: &PlanInput,
    initial: &[u32],
    colours: &[u32],
    weight: &[u64],
    in_graph: &[bool],
) -> Movement {
    let k = input.disks;
    let mut stay = vec![vec![0u64; k]; k];
    let (mut fixed, mut graph_load) = (vec![0u64; k], vec![0u64; k]);
    for v in 0..weight.len() {
        if in_graph[v] {
            stay[colours[v] as usize][initial[v] as usize] += weight[v];
            graph_load[colours[v] as usize] += weight[v];
        } else {
            fixed[initial[v] as usize] += weight[v];
        }
    }
    let allowed = (0..k)
        .map(|c| {
            (0..k)
                .map(|d| c == d || fixed[d] + graph_load[c] <= input.capacity_bytes)
                .collect()
        })
        .collect();
    Movement { stay, allowed }
}
