//! The HDD optimization of seed 003 §IV-E: blocks that one request reads sequentially
//! from one disk become one group vertex, so that recolouring moves them together and
//! keeps them sequential, up to a maximum group size (larger groups would work against
//! parallelism: their transfer time outgrows the positioning time they save).
//!
//! Sequential on one disk: each disk of the explicit-placement array lays its blocks out
//! in block-number order, so the blocks of one contiguous request that sit on the same
//! disk are neighbours on that disk (the blocks between them are on other disks). Every
//! request therefore chains its blocks per disk; chains of different requests that share
//! blocks join (union-find), as long as the joined group stays within the size limit.

use std::ops::Range;

use reblock_trace::Trace;
use rustc_hash::FxHashMap;

use crate::session::SessionConfig;

/// Union-find with group sizes in blocks.
struct Groups {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl Groups {
    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let p = self.parent[x as usize];
            self.parent[x as usize] = self.parent[p as usize];
            x = p;
        }
        x
    }
    /// Joins the groups of `a` and `b` if the result has at most `max` blocks.
    fn join(&mut self, a: u32, b: u32, max: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb || self.size[ra as usize] + self.size[rb as usize] > max {
            return;
        }
        let (big, small) = if self.size[ra as usize] >= self.size[rb as usize] {
            (ra, rb)
        } else {
            (rb, ra)
        };
        self.parent[small as usize] = big;
        self.size[big as usize] += self.size[small as usize];
    }
}

/// Dense group ids (`0..groups`) for the blocks of `index` (block -> dense block id),
/// grouping per-disk sequential runs of the requests in `trace[range]`; `disk[id]` is
/// each block's disk. Returns `(group of each block id, number of groups)`.
pub fn group_sequential(
    trace: &Trace,
    range: Range<usize>,
    cfg: &SessionConfig,
    index: &FxHashMap<u64, u32>,
    disk: &[u32],
    max_group_blocks: u32,
) -> (Vec<u32>, usize) {
    let n = disk.len();
    let mut g = Groups {
        parent: (0..n as u32).collect(),
        size: vec![1; n],
    };
    // Last block of the current request seen on each disk.
    let mut last_on: FxHashMap<u32, u32> = FxHashMap::default();
    for i in range {
        if !cfg.ops.admits(trace.write[i]) {
            continue;
        }
        last_on.clear();
        for b in cfg.blocking.blocks(trace.sector[i], trace.sectors[i]) {
            let Some(&id) = index.get(&b) else { continue };
            if let Some(prev) = last_on.insert(disk[id as usize], id) {
                g.join(prev, id, max_group_blocks.max(1));
            }
        }
    }
    let mut dense = vec![u32::MAX; n];
    let mut out = Vec::with_capacity(n);
    let mut groups = 0u32;
    for id in 0..n as u32 {
        let root = g.find(id) as usize;
        if dense[root] == u32::MAX {
            dense[root] = groups;
            groups += 1;
        }
        out.push(dense[root]);
    }
    (out, groups as usize)
}
