//! A map from keys to accumulated values, for entries that carry a value of their own.

use std::borrow::Cow;

use crate::sort::radix_sort;
use crate::{Key, MIN_BATCH};

/// A value accumulated per key.
pub trait Count: Copy {
    /// Adds `other` into `self` (saturating where the type is bounded).
    fn absorb(&mut self, other: Self);
}

impl Count for u64 {
    #[inline]
    fn absorb(&mut self, other: u64) {
        *self = self.saturating_add(other);
    }
}

impl Count for u32 {
    #[inline]
    fn absorb(&mut self, other: u32) {
        *self = self.saturating_add(other);
    }
}

/// No value: the tally gathers its keys sorted and distinct.
impl Count for () {
    #[inline]
    fn absorb(&mut self, _: ()) {}
}

/// The merged values are at most this many times the pending entries: the memory of a
/// tally is its values and up to three such shares (the pending entries, the sort's
/// scratch, and the values' growth at a merge), where a batch as large as the values
/// cost four times the values. Each merge reads the values once: about this many passes
/// over them in all, streaming.
const PENDING_SHARE: usize = 4;

/// A map from keys to accumulated values, built by [`Tally::add`].
#[derive(Clone, Debug)]
pub struct Tally<K, V> {
    /// Distinct keys, strictly increasing, with their values.
    merged: Vec<(K, V)>,
    /// Entries added since the last merge, in arrival order: at most a quarter of the
    /// merged values (or one minimum batch).
    pending: Vec<(K, V)>,
    /// The radix sort's scratch, kept between batches (see the module doc).
    spare: Vec<(K, V)>,
    min_batch: usize,
}

impl<K: Key, V: Count> Default for Tally<K, V> {
    fn default() -> Self {
        Tally::with_min_batch(MIN_BATCH)
    }
}

impl<K: Key, V: Count> Tally<K, V> {
    /// A tally whose first merge happens after `min_batch` entries (tests use tiny ones
    /// to exercise merging).
    pub fn with_min_batch(min_batch: usize) -> Self {
        Tally {
            merged: Vec::new(),
            pending: Vec::new(),
            spare: Vec::new(),
            min_batch: min_batch.max(1),
        }
    }

    /// A tally holding `counts`, distinct keys strictly increasing (a tally's
    /// [`Tally::counts`] read back).
    pub fn from_counts(counts: Vec<(K, V)>) -> Self {
        debug_assert!(counts.windows(2).all(|w| w[0].0 < w[1].0));
        Tally {
            merged: counts,
            ..Tally::default()
        }
    }

    /// Adds `value` to `key`'s value.
    #[inline]
    pub fn add(&mut self, key: K, value: V) {
        self.pending.push((key, value));
        if self.pending.len() >= self.min_batch.max(self.merged.len() / PENDING_SHARE) {
            self.merge_pending();
        }
    }

    /// Folds the pending entries into the sorted values.
    pub fn merge_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        sort_and_combine(&mut self.pending, &mut self.spare);
        merge_from_the_back(&mut self.merged, &self.pending);
        self.pending.clear();
    }

    /// Merges what is pending and gives back the buffers only adding needs (the pending
    /// batch and the merge's scratch, each up to as large as the merged values): for a
    /// tally that is complete and only read from now on.
    pub fn shrink_to_fit(&mut self) {
        self.merge_pending();
        self.pending = Vec::new();
        self.spare = Vec::new();
        self.merged.shrink_to_fit();
    }

    /// Every distinct key with its value, sorted by key. Borrowed when nothing is pending
    /// (always so after [`Tally::merge_pending`]); otherwise merged into a copy.
    pub fn counts(&self) -> Cow<'_, [(K, V)]> {
        if self.pending.is_empty() {
            return Cow::Borrowed(&self.merged);
        }
        let mut pending = self.pending.clone();
        sort_and_combine(&mut pending, &mut Vec::new());
        let mut out = Vec::with_capacity(self.merged.len() + pending.len());
        out.extend_from_slice(&self.merged);
        merge_from_the_back(&mut out, &pending);
        Cow::Owned(out)
    }

    /// [`Tally::counts`] of a tally not needed afterwards: its sorted array is handed
    /// over, every other buffer given back.
    pub fn into_counts(mut self) -> Vec<(K, V)> {
        self.merge_pending();
        self.merged
    }

    /// `key`'s value, if it was ever added.
    pub fn get(&self, key: K) -> Option<V> {
        let mut found = self
            .merged
            .binary_search_by_key(&key, |e| e.0)
            .ok()
            .map(|i| self.merged[i].1);
        for &(k, v) in &self.pending {
            if k == key {
                match &mut found {
                    Some(f) => f.absorb(v),
                    None => found = Some(v),
                }
            }
        }
        found
    }

    /// Distinct keys added.
    pub fn distinct(&self) -> usize {
        if self.pending.is_empty() {
            self.merged.len()
        } else {
            self.counts().len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.merged.is_empty() && self.pending.is_empty()
    }
}

/// Sorts `v` by key and combines entries of equal keys in place.
fn sort_and_combine<K: Key, V: Count>(v: &mut Vec<(K, V)>, scratch: &mut Vec<(K, V)>) {
    radix_sort(v, scratch);
    let mut w = 0;
    for r in 1..v.len() {
        if v[r].0 == v[w].0 {
            let x = v[r].1;
            v[w].1.absorb(x);
        } else {
            w += 1;
            v[w] = v[r];
        }
    }
    v.truncate(w + usize::from(!v.is_empty()));
}

/// Merges the sorted, distinct-keyed `add` into `merged` (the same) in place, values of
/// equal keys combined: `merged` grows by `add`'s length and is written from the back,
/// so the write position never overtakes the unread values; equal keys leave a gap at
/// the front, closed by one move at the end.
fn merge_from_the_back<K: Key, V: Count>(merged: &mut Vec<(K, V)>, add: &[(K, V)]) {
    let (a, b) = (merged.len(), add.len());
    if b == 0 {
        return;
    }
    merged.reserve_exact(b);
    merged.extend_from_slice(add);
    let (mut i, mut j, mut w) = (a, b, a + b);
    while i > 0 && j > 0 {
        let (x, y) = (merged[i - 1], add[j - 1]);
        w -= 1;
        merged[w] = if x.0 > y.0 {
            i -= 1;
            x
        } else if y.0 > x.0 {
            j -= 1;
            y
        } else {
            let mut sum = x;
            sum.1.absorb(y.1);
            (i, j) = (i - 1, j - 1);
            sum
        };
    }
    // What is left of one input goes below, in order.
    if j > 0 {
        merged[w - j..w].copy_from_slice(&add[..j]);
        w -= j;
    } else {
        merged.copy_within(..i, w - i);
        w -= i;
    }
    if w > 0 {
        merged.copy_within(w.., 0);
        merged.truncate(a + b - w);
    }
}
