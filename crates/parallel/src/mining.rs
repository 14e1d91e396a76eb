//! Frequent block pairs (seed 003 §IV-B, Figure 4): how often two blocks share a session.
//!
//! The seed mined pairs with Borgelt's Eclat, items per set fixed at two. Pairs are all
//! it needs, so here they are counted directly in one pass: blocks are interned to dense
//! `u32` ids and a pair is one `u64` key (`low id << 32 | high id`) in an FxHash map.
//!
//! **Window cap.** A session of `n` blocks has `n (n - 1) / 2` pairs: one 1 MiB request of
//! 512 B blocks alone has two million. Instead each block is paired with the next
//! `window` blocks of its session in request order, at most `window * n` pairs per
//! session. With `window = N - 1` for `N` disks this loses nothing the placement can use:
//! a proper colouring of the band graph puts every run of `N` consecutive blocks on `N`
//! different disks, the `ceil(n / N)` parallel accesses that are the best any placement
//! achieves for `n` blocks, while pairs further apart than `N` cannot all be kept apart
//! anyway. Sessions of at most `window + 1` blocks keep all their pairs, so Figure 4 is
//! reproduced exactly.
//!
//! **Memory.** The map holds each distinct pair seen once (12 bytes of key and count plus
//! the table's slack), so memory is linear in the distinct pairs of the training part,
//! which the window bounds by `window` times the blocks requested. Support is applied when
//! the pairs are taken out ([`PairCounts::frequent`]), so one pass serves every support
//! value of an evaluation.

use rustc_hash::FxHashMap;

/// Dense ids for the blocks seen, in order of first appearance.
#[derive(Clone, Debug, Default)]
pub struct BlockIds {
    id_of: FxHashMap<u64, u32>,
    blocks: Vec<u64>,
}

impl BlockIds {
    /// The id of `block`, interning it if new.
    pub fn intern(&mut self, block: u64) -> u32 {
        let next = self.blocks.len() as u32;
        let id = *self.id_of.entry(block).or_insert(next);
        if id == next {
            self.blocks.push(block);
        }
        id
    }
    pub fn get(&self, block: u64) -> Option<u32> {
        self.id_of.get(&block).copied()
    }
    /// The block of `id`.
    pub fn block(&self, id: u32) -> u64 {
        self.blocks[id as usize]
    }
    pub fn len(&self) -> usize {
        self.blocks.len()
    }
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
    /// Blocks by id.
    pub fn blocks(&self) -> &[u64] {
        &self.blocks
    }
}

/// One correlated pair: blocks `a < b` (block numbers) seen together `count` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pair {
    pub a: u64,
    pub b: u64,
    pub count: u32,
}

/// Pair counts over sessions.
#[derive(Clone, Debug)]
pub struct PairCounts {
    window: usize,
    ids: BlockIds,
    counts: FxHashMap<u64, u32>,
    scratch: Vec<u32>,
    sessions: u64,
}

fn key(x: u32, y: u32) -> u64 {
    let (lo, hi) = if x < y { (x, y) } else { (y, x) };
    (lo as u64) << 32 | hi as u64
}

impl PairCounts {
    /// Counts pairs of blocks at most `window` apart in a session (at least 1).
    pub fn new(window: usize) -> PairCounts {
        PairCounts {
            window: window.max(1),
            ids: BlockIds::default(),
            counts: FxHashMap::default(),
            scratch: Vec::new(),
            sessions: 0,
        }
    }

    /// Adds one session: distinct blocks in request order.
    pub fn add_session(&mut self, blocks: &[u64]) {
        self.sessions += 1;
        self.scratch.clear();
        for &b in blocks {
            let id = self.ids.intern(b);
            self.scratch.push(id);
        }
        let ids = &self.scratch;
        for (i, &x) in ids.iter().enumerate() {
            for &y in &ids[i + 1..(i + 1 + self.window).min(ids.len())] {
                *self.counts.entry(key(x, y)).or_insert(0) += 1;
            }
        }
    }

    /// Every block seen in any session.
    pub fn ids(&self) -> &BlockIds {
        &self.ids
    }
    /// Distinct pairs counted (before support).
    pub fn distinct_pairs(&self) -> usize {
        self.counts.len()
    }
    pub fn sessions(&self) -> u64 {
        self.sessions
    }

    /// Pairs seen at least `support` times as `(id, id, count)` with the lower id first,
    /// sorted.
    pub fn frequent_ids(&self, support: u32) -> Vec<(u32, u32, u32)> {
        let mut out: Vec<(u32, u32, u32)> = self
            .counts
            .iter()
            .filter(|(_, &c)| c >= support.max(1))
            .map(|(&k, &c)| ((k >> 32) as u32, k as u32, c))
            .collect();
        out.sort_unstable();
        out
    }

    /// Pairs seen at least `support` times, by block number (`a < b`), sorted: the
    /// analysis output of Figure 4(b).
    pub fn frequent(&self, support: u32) -> Vec<Pair> {
        let mut out: Vec<Pair> = self
            .frequent_ids(support)
            .into_iter()
            .map(|(x, y, count)| {
                let (p, q) = (self.ids.block(x), self.ids.block(y));
                Pair {
                    a: p.min(q),
                    b: p.max(q),
                    count,
                }
            })
            .collect();
        out.sort_unstable();
        out
    }
}
