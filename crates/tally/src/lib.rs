//! Counting of integer keys by sorted batches instead of a hash map.
//!
//! Trace statistics count something per request: an occurrence per transition pair, an
//! edge per request pair. A hash map touches a random cache line per key, and once the
//! map outgrows the cache every request waits on memory. Here entries are appended to a
//! buffer (a sequential write); when the buffer holds as many entries as there are
//! distinct keys so far (and at least a minimum batch), it is radix sorted, equal keys
//! are combined, and the result is merged into a sorted array of distinct keys with
//! their values. Every step streams through memory.
//!
//! Memory stays proportional to the distinct keys: the merged array, a pending buffer no
//! larger than it (or one minimum batch), and a scratch array of the same order. The
//! amortized cost per entry is one push, its share of one radix sort of its batch, and
//! its share of one linear merge (the merged array is at most as large as the batch that
//! triggers the merge, so each merge costs O(batch)).
//!
//! The radix sort is written here rather than taken from a crate: the radix crates
//! allocate their scratch buffer on every call, and faulting in a fresh multi-megabyte
//! buffer per batch cost more than the sort itself. This one keeps its scratch between
//! batches and skips the digits all keys share, so keys over a small range sort in a few
//! passes.

use std::borrow::Cow;

/// Entries appended before the first merge: large enough that sorting amortizes, small
/// enough that a batch sorts inside the cache.
pub const MIN_BATCH: usize = 1 << 16;

/// A key: an unsigned integer whose order is the order the counts come out in.
pub trait Key: Copy + Ord {
    /// Bytes of the key (radix digits).
    const BYTES: usize;
    /// Digit `i` (0 = least significant byte).
    fn digit(self, i: usize) -> u8;
    /// Bitwise xor, to find the digits all keys share.
    fn xor(self, other: Self) -> Self;
    /// Bitwise or.
    fn or(self, other: Self) -> Self;
}

macro_rules! key {
    ($t:ty) => {
        impl Key for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn digit(self, i: usize) -> u8 {
                (self >> (8 * i)) as u8
            }
            #[inline(always)]
            fn xor(self, other: Self) -> Self {
                self ^ other
            }
            #[inline(always)]
            fn or(self, other: Self) -> Self {
                self | other
            }
        }
    };
}
key!(u32);
key!(u64);
key!(u128);

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

/// A map from keys to accumulated values, built by [`Tally::add`].
#[derive(Clone, Debug)]
pub struct Tally<K, V> {
    /// Distinct keys, strictly increasing, with their values.
    merged: Vec<(K, V)>,
    /// Entries added since the last merge, in arrival order.
    pending: Vec<(K, V)>,
    /// Where the next merge writes, and the radix sort's scratch: kept between batches
    /// (see the module doc).
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

    /// Adds `value` to `key`'s value.
    #[inline]
    pub fn add(&mut self, key: K, value: V) {
        self.pending.push((key, value));
        if self.pending.len() >= self.min_batch.max(self.merged.len()) {
            self.merge_pending();
        }
    }

    /// Folds the pending entries into the sorted values.
    pub fn merge_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        sort_and_combine(&mut self.pending, &mut self.spare);
        self.spare.clear();
        merge_into(&self.merged, &self.pending, &mut self.spare);
        std::mem::swap(&mut self.merged, &mut self.spare);
        self.pending.clear();
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
        merge_into(&self.merged, &pending, &mut out);
        Cow::Owned(out)
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

/// Sorts `v` by key: LSB radix sort on bytes, stable, skipping the bytes on which every
/// key agrees. `scratch` is reused between calls.
pub fn radix_sort<K: Key, V: Copy>(v: &mut Vec<(K, V)>, scratch: &mut Vec<(K, V)>) {
    if v.len() <= 64 {
        v.sort_by_key(|e| e.0);
        return;
    }
    let first = v[0].0;
    let mut differ = first.xor(first);
    for e in v.iter() {
        differ = differ.or(e.0.xor(first));
    }
    scratch.clear();
    scratch.extend_from_slice(v);
    let (mut src, mut dst) = (&mut *v, &mut *scratch);
    let mut in_scratch = false;
    for d in 0..K::BYTES {
        if differ.digit(d) == 0 {
            continue;
        }
        let mut offsets = [0usize; 256];
        for e in src.iter() {
            offsets[usize::from(e.0.digit(d))] += 1;
        }
        let mut sum = 0;
        for c in offsets.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        for e in src.iter() {
            let b = usize::from(e.0.digit(d));
            dst[offsets[b]] = *e;
            offsets[b] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
        in_scratch = !in_scratch;
    }
    if in_scratch {
        // The sorted run ended in the scratch buffer: hand the buffers over, no copy.
        std::mem::swap(v, scratch);
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

/// Appends the union of two sorted, distinct-keyed lists to `out`, values of equal keys
/// combined.
fn merge_into<K: Key, V: Count>(a: &[(K, V)], b: &[(K, V)], out: &mut Vec<(K, V)>) {
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        if x.0 < y.0 {
            out.push(x);
            i += 1;
        } else if y.0 < x.0 {
            out.push(y);
            j += 1;
        } else {
            let mut s = x;
            s.1.absorb(y.1);
            out.push(s);
            i += 1;
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn counts_by_hand_across_merges() {
        // Batch of 2: the merges happen mid-stream, and the result is the same as a map's.
        let mut t: Tally<u64, u64> = Tally::with_min_batch(2);
        for k in [5, 3, 5, 9, 3, 5] {
            t.add(k, 1);
        }
        assert_eq!(t.counts().as_ref(), &[(3, 2), (5, 3), (9, 1)]);
        assert_eq!(t.get(5), Some(3));
        assert_eq!(t.get(4), None);
        assert_eq!(t.distinct(), 3);
        t.add(4, 10);
        assert_eq!(t.get(4), Some(10));
        t.merge_pending();
        assert_eq!(t.counts().as_ref(), &[(3, 2), (4, 10), (5, 3), (9, 1)]);
    }

    #[test]
    fn values_saturate() {
        let mut t: Tally<u32, u32> = Tally::with_min_batch(1);
        t.add(1, u32::MAX);
        t.add(1, 5);
        assert_eq!(t.get(1), Some(u32::MAX));
    }

    #[test]
    fn radix_sort_is_stable_and_skips_shared_digits() {
        let mut v: Vec<(u64, u32)> = (0..1000u32)
            .map(|i| {
                (
                    u64::from(i.wrapping_mul(2_654_435_761) % 97) << 40 | 0xAB,
                    i,
                )
            })
            .collect();
        let mut expect = v.clone();
        expect.sort_by_key(|e| e.0); // std's sort is stable too
        radix_sort(&mut v, &mut Vec::new());
        assert_eq!(v, expect);
    }

    proptest! {
        #[test]
        fn equals_a_map(keys in proptest::collection::vec((0u128..50, 1u64..4), 0..300),
                        batch in 1usize..100) {
            let mut t: Tally<u128, u64> = Tally::with_min_batch(batch);
            let mut m = BTreeMap::new();
            for &(k, v) in &keys {
                // Spread keys over high and low bytes so every radix digit is exercised.
                let k = k << 70 | k;
                t.add(k, v);
                *m.entry(k).or_insert(0u64) += v;
            }
            let expect: Vec<(u128, u64)> = m.into_iter().collect();
            prop_assert_eq!(t.counts().into_owned(), expect.clone());
            t.merge_pending();
            prop_assert_eq!(t.counts().into_owned(), expect);
        }
    }
}
