//! Edge counts of the process graphs: a key of two vertex ids and a count, in whole
//! requests (32 bits, 12 bytes an edge) or, for a learning state that decays, in fixed
//! point (64 bits, 16 bytes). At 2·10^7 requests there are 1.4·10^7 process edges: the
//! narrower count is ~56 MB less while they are counted (docs/scale.md "Planning's
//! memory").
//!
//! Whole counts saturate at 2^32 - 1, as the master graph's weights do; a master weight
//! is a sum of process counts (and chain weights, each at least any count it covers), so
//! saturating each count first gives the same master graph as counting in 64 bits.

use std::borrow::Cow;

use reblock_tally::{Count, Key, Tally};

/// An edge `from -> to` as a key ordered by source, then target: two 32-bit halves, so
/// that with a 32-bit count an entry takes 12 bytes (a `u64` key pads it to 16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EdgeKey {
    pub from: u32,
    pub to: u32,
}

impl EdgeKey {
    pub fn new(from: u32, to: u32) -> EdgeKey {
        EdgeKey { from, to }
    }
    /// The key as one integer, `from << 32 | to` (the same order).
    fn wide(self) -> u64 {
        (u64::from(self.from) << 32) | u64::from(self.to)
    }
    fn of_wide(w: u64) -> EdgeKey {
        EdgeKey::new((w >> 32) as u32, w as u32)
    }
}

impl Key for EdgeKey {
    const BYTES: usize = 8;
    #[inline(always)]
    fn digit(self, i: usize) -> u8 {
        self.wide().digit(i)
    }
    #[inline(always)]
    fn xor(self, other: Self) -> Self {
        EdgeKey::of_wide(self.wide() ^ other.wide())
    }
    #[inline(always)]
    fn or(self, other: Self) -> Self {
        EdgeKey::of_wide(self.wide() | other.wide())
    }
    #[inline(always)]
    fn bit_len(self) -> u32 {
        self.wide().bit_len()
    }
    #[inline(always)]
    fn bucket(self, shift: u32, mask: usize) -> usize {
        self.wide().bucket(shift, mask)
    }
}

/// A count an edge list may hold: 32-bit whole requests or 64-bit fixed point.
pub trait Weight: Count + Default + PartialEq + std::fmt::Debug {
    /// `w`, saturating at this type's largest value.
    fn of(w: u64) -> Self;
    fn get(self) -> u64;
}

impl Weight for u32 {
    #[inline]
    fn of(w: u64) -> u32 {
        u32::try_from(w).unwrap_or(u32::MAX)
    }
    #[inline]
    fn get(self) -> u64 {
        u64::from(self)
    }
}

impl Weight for u64 {
    #[inline]
    fn of(w: u64) -> u64 {
        w
    }
    #[inline]
    fn get(self) -> u64 {
        self
    }
}

/// Times `to` followed `from`, counted by sorted batches rather than in a hash map, so
/// recording an edge is a sequential write (see [`Tally`]).
#[derive(Clone, Debug)]
pub(crate) enum EdgeCounts {
    /// Whole requests (graphs built from a trace, a learning state that never decays).
    Whole(Tally<EdgeKey, u32>),
    /// Fixed-point counts (a learning state that decays).
    Fixed(Tally<EdgeKey, u64>),
}

impl Default for EdgeCounts {
    fn default() -> Self {
        EdgeCounts::Whole(Tally::default())
    }
}

/// Every edge with its count, sorted by key, as the master graph takes them over.
pub(crate) enum EdgeList {
    Whole(Vec<(EdgeKey, u32)>),
    Fixed(Vec<(EdgeKey, u64)>),
}

/// `counts` as (key, count in 64 bits).
fn widened<W: Weight>(
    counts: Cow<'_, [(EdgeKey, W)]>,
) -> impl Iterator<Item = (EdgeKey, u64)> + '_ {
    (0..counts.len()).map(move |i| (counts[i].0, counts[i].1.get()))
}

impl EdgeCounts {
    /// Empty counts of the same kind.
    pub(crate) fn empty_like(&self) -> EdgeCounts {
        match self {
            EdgeCounts::Whole(_) => EdgeCounts::Whole(Tally::default()),
            EdgeCounts::Fixed(_) => EdgeCounts::Fixed(Tally::default()),
        }
    }

    /// Empty counts of the same kind, merging after `batch` entries at the least.
    #[cfg(test)]
    pub(crate) fn with_min_batch(&self, batch: usize) -> EdgeCounts {
        match self {
            EdgeCounts::Whole(_) => EdgeCounts::Whole(Tally::with_min_batch(batch)),
            EdgeCounts::Fixed(_) => EdgeCounts::Fixed(Tally::with_min_batch(batch)),
        }
    }

    #[inline]
    pub(crate) fn add(&mut self, key: EdgeKey, w: u64) {
        match self {
            EdgeCounts::Whole(t) => t.add(key, u32::of(w)),
            EdgeCounts::Fixed(t) => t.add(key, w),
        }
    }

    pub(crate) fn merge_pending(&mut self) {
        match self {
            EdgeCounts::Whole(t) => t.merge_pending(),
            EdgeCounts::Fixed(t) => t.merge_pending(),
        }
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        match self {
            EdgeCounts::Whole(t) => t.shrink_to_fit(),
            EdgeCounts::Fixed(t) => t.shrink_to_fit(),
        }
    }

    pub(crate) fn distinct(&self) -> usize {
        match self {
            EdgeCounts::Whole(t) => t.distinct(),
            EdgeCounts::Fixed(t) => t.distinct(),
        }
    }

    pub(crate) fn get(&self, key: EdgeKey) -> Option<u64> {
        match self {
            EdgeCounts::Whole(t) => t.get(key).map(u64::from),
            EdgeCounts::Fixed(t) => t.get(key),
        }
    }

    /// Every edge with its count, sorted by key.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = (EdgeKey, u64)> + '_> {
        match self {
            EdgeCounts::Whole(t) => Box::new(widened(t.counts())),
            EdgeCounts::Fixed(t) => Box::new(widened(t.counts())),
        }
    }

    /// The sorted counts, this tally's buffer handed over.
    pub(crate) fn into_list(self) -> EdgeList {
        match self {
            EdgeCounts::Whole(t) => EdgeList::Whole(t.into_counts()),
            EdgeCounts::Fixed(t) => EdgeList::Fixed(t.into_counts()),
        }
    }

    /// Counts of the same kind holding the `len` `counts` (sorted, distinct keys; a
    /// whole count beyond 32 bits saturates).
    pub(crate) fn like_from(
        &self,
        len: usize,
        counts: impl Iterator<Item = (EdgeKey, u64)>,
    ) -> Self {
        fn collect<W: Weight>(
            len: usize,
            c: impl Iterator<Item = (EdgeKey, u64)>,
        ) -> Tally<EdgeKey, W> {
            let mut v = Vec::with_capacity(len);
            v.extend(c.map(|(k, w)| (k, W::of(w))));
            Tally::from_counts(v)
        }
        match self {
            EdgeCounts::Whole(_) => EdgeCounts::Whole(collect(len, counts)),
            EdgeCounts::Fixed(_) => EdgeCounts::Fixed(collect(len, counts)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An edge with a 32-bit count takes 12 bytes, and keys sort as `from << 32 | to`.
    #[test]
    fn whole_edges_take_twelve_bytes_and_sort_by_source_then_target() {
        assert_eq!(std::mem::size_of::<(EdgeKey, u32)>(), 12);
        let mut t: Tally<EdgeKey, u32> = Tally::with_min_batch(3);
        let keys = [(7, 1), (1, u32::MAX), (u32::MAX, 0), (1, 2), (7, 1), (0, 9)];
        for (a, b) in keys {
            t.add(EdgeKey::new(a, b), u32::MAX - 1);
        }
        let got: Vec<(u64, u32)> = t.counts().iter().map(|e| (e.0.wide(), e.1)).collect();
        let mut want: Vec<u64> = keys
            .iter()
            .map(|&(a, b)| EdgeKey::new(a, b).wide())
            .collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(got.iter().map(|e| e.0).collect::<Vec<_>>(), want);
        assert_eq!(t.get(EdgeKey::new(7, 1)), Some(u32::MAX), "saturated");
    }
}
