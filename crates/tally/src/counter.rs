//! Counting occurrences of keys, one key at a time.
//!
//! Where a count is all an entry carries, the pending buffer holds bare keys (8 bytes for
//! a `u64` key, where a key-count pair takes 16) and the counts live in their own array
//! beside the keys: half the memory traffic of [`crate::Tally`], and half the pages to
//! fault in.

use crate::sort::sort_keys;
use crate::{Key, MIN_BATCH};

/// Occurrences of keys, sorted by key on demand. Counts saturate at `u32::MAX`.
///
/// Memory: the distinct keys with their counts (12 bytes per `u64` key), a pending buffer
/// of at most as many keys (or one minimum batch), and the sort's scratch buffer of the
/// same size.
#[derive(Clone, Debug)]
pub struct Counter<K> {
    /// Distinct keys, strictly increasing, and their counts.
    keys: Vec<K>,
    counts: Vec<u32>,
    /// Keys added since the last merge, in arrival order.
    pending: Vec<K>,
    /// The sort's scratch buffer and the pending keys' run counts, kept between merges.
    scratch: Vec<K>,
    run_counts: Vec<u32>,
    min_batch: usize,
    /// Pending length that triggers a merge: max(min_batch, distinct keys).
    threshold: usize,
}

impl<K: Key> Default for Counter<K> {
    fn default() -> Self {
        Counter::with_min_batch(MIN_BATCH)
    }
}

impl<K: Key> Counter<K> {
    /// A counter whose first merge happens after `min_batch` keys (tests use tiny ones to
    /// exercise merging).
    pub fn with_min_batch(min_batch: usize) -> Self {
        let min_batch = min_batch.max(1);
        Counter {
            keys: Vec::new(),
            counts: Vec::new(),
            pending: Vec::new(),
            scratch: Vec::new(),
            run_counts: Vec::new(),
            min_batch,
            threshold: min_batch,
        }
    }

    /// Counts one occurrence of `key`.
    #[inline]
    pub fn add(&mut self, key: K) {
        self.pending.push(key);
        if self.pending.len() >= self.threshold {
            self.merge_pending();
        }
    }

    /// Folds the pending keys into the sorted counts.
    pub fn merge_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        sort_keys(&mut self.pending, &mut self.scratch);
        let distinct = run_lengths(&mut self.pending, &mut self.run_counts);
        merge_counts(
            &mut self.keys,
            &mut self.counts,
            &self.pending[..distinct],
            &self.run_counts,
        );
        self.pending.clear();
        self.threshold = self.min_batch.max(self.keys.len());
    }

    /// Every distinct key, increasing, and its count.
    pub fn sorted(&mut self) -> (&[K], &[u32]) {
        self.merge_pending();
        (&self.keys, &self.counts)
    }

    /// Replaces every key `k` by `f(k)`; `f` must be strictly increasing (a re-packing
    /// of the key into wider fields), so the counts stay sorted.
    pub fn map_keys(&mut self, f: impl Fn(K) -> K) {
        for k in self.keys.iter_mut().chain(self.pending.iter_mut()) {
            *k = f(*k);
        }
        debug_assert!(self.keys.windows(2).all(|w| w[0] < w[1]));
    }

    /// Heap bytes held (all buffers' capacities).
    pub fn heap_bytes(&self) -> usize {
        let k = std::mem::size_of::<K>();
        (self.keys.capacity() + self.pending.capacity() + self.scratch.capacity()) * k
            + (self.counts.capacity() + self.run_counts.capacity()) * 4
    }
}

/// Collapses the sorted `keys` in place to their distinct values (the first `n`, returned)
/// and puts each one's number of occurrences in `counts`.
fn run_lengths<K: Key>(keys: &mut [K], counts: &mut Vec<u32>) -> usize {
    counts.clear();
    counts.resize(keys.len(), 0);
    let mut n = 0;
    for i in 0..keys.len() {
        let k = keys[i];
        if n > 0 && keys[n - 1] == k {
            counts[n - 1] = counts[n - 1].saturating_add(1);
        } else {
            keys[n] = k;
            counts[n] = 1;
            n += 1;
        }
    }
    counts.truncate(n);
    n
}

/// Merges the run (`add_keys`, `add_counts`) into (`keys`, `counts`), both strictly
/// increasing, in place: equal keys add their counts (saturating).
///
/// The arrays grow by the run's length and the merge writes from the back, so no second
/// array is needed (the write position never overtakes the unread part of `keys`); equal
/// keys leave a gap at the front, closed by one move at the end. Each step picks its
/// output by comparisons turned into selects rather than branches: merging keys of a
/// random trace, a branch would be mispredicted every other step.
pub(crate) fn merge_counts<K: Key>(
    keys: &mut Vec<K>,
    counts: &mut Vec<u32>,
    add_keys: &[K],
    add_counts: &[u32],
) {
    assert_eq!(add_keys.len(), add_counts.len());
    debug_assert!(add_keys.windows(2).all(|w| w[0] < w[1]));
    let (a, b) = (keys.len(), add_keys.len());
    if b == 0 {
        return;
    }
    keys.resize(a + b, K::default());
    counts.resize(a + b, 0);
    let (mut i, mut j, mut w) = (a, b, a + b);
    while i > 0 && j > 0 {
        let (x, y) = (keys[i - 1], add_keys[j - 1]);
        let (take_x, take_y) = (x >= y, y >= x);
        w -= 1;
        keys[w] = if take_x { x } else { y };
        let cx = if take_x { counts[i - 1] } else { 0 };
        let cy = if take_y { add_counts[j - 1] } else { 0 };
        counts[w] = cx.saturating_add(cy);
        i -= usize::from(take_x);
        j -= usize::from(take_y);
    }
    // What is left of one input goes below, in order.
    if j > 0 {
        keys[w - j..w].copy_from_slice(&add_keys[..j]);
        counts[w - j..w].copy_from_slice(&add_counts[..j]);
        w -= j;
    } else if w > i {
        keys.copy_within(..i, w - i);
        counts.copy_within(..i, w - i);
        w -= i;
    } else {
        w = 0;
    }
    // Equal keys made the result shorter than a + b: it starts at w.
    if w > 0 {
        keys.copy_within(w.., 0);
        counts.copy_within(w.., 0);
        keys.truncate(a + b - w);
        counts.truncate(a + b - w);
    }
}
