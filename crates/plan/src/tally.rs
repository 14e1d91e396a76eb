//! Counting of `u64` keys by sorted batches instead of a hash map.
//!
//! Graph building counts one edge key per request. A hash map touches a random cache line
//! per key, and once the map outgrows the cache every request waits on memory. Here keys
//! are appended to a buffer (a sequential write); when the buffer holds as many keys as
//! there are distinct keys so far (and at least a minimum batch), it is sorted, run-length
//! counted and merged into a sorted array of distinct keys with their counts. Memory stays
//! proportional to the distinct keys (at most about twice them, plus one batch), and the
//! cost per key is a buffer push plus its share of one sort and one linear merge.

use std::borrow::Cow;

/// Keys appended before the first merge: large enough that sorting amortizes well, small
/// enough (512 KiB) to sort inside the cache.
const MIN_BATCH: usize = 1 << 16;

/// A multiset of `u64` keys.
#[derive(Clone, Debug)]
pub(crate) struct Tally {
    /// Distinct keys, strictly increasing, with their counts.
    merged: Vec<(u64, u64)>,
    /// Keys added since the last merge, in arrival order.
    pending: Vec<u64>,
    min_batch: usize,
}

impl Default for Tally {
    fn default() -> Self {
        Tally::with_min_batch(MIN_BATCH)
    }
}

impl Tally {
    pub(crate) fn with_min_batch(min_batch: usize) -> Tally {
        Tally {
            merged: Vec::new(),
            pending: Vec::new(),
            min_batch: min_batch.max(1),
        }
    }

    #[inline]
    pub(crate) fn add(&mut self, key: u64) {
        self.pending.push(key);
        if self.pending.len() >= self.min_batch.max(self.merged.len()) {
            self.merge_pending();
        }
    }

    /// Folds the pending keys into the sorted counts.
    pub(crate) fn merge_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.pending.sort_unstable();
        let runs = count_runs(&self.pending);
        self.pending.clear();
        self.merged = merge_counts(&self.merged, &runs);
    }

    /// Every distinct key with its count, sorted by key. Borrowed when nothing is pending
    /// (always the case after [`Tally::merge_pending`]); otherwise merged into a copy.
    pub(crate) fn counts(&self) -> Cow<'_, [(u64, u64)]> {
        if self.pending.is_empty() {
            return Cow::Borrowed(&self.merged);
        }
        let mut pending = self.pending.clone();
        pending.sort_unstable();
        Cow::Owned(merge_counts(&self.merged, &count_runs(&pending)))
    }

    /// Times `key` was added.
    pub(crate) fn count(&self, key: u64) -> u64 {
        let merged = match self.merged.binary_search_by_key(&key, |e| e.0) {
            Ok(i) => self.merged[i].1,
            Err(_) => 0,
        };
        merged + self.pending.iter().filter(|&&k| k == key).count() as u64
    }

    /// Distinct keys added.
    pub(crate) fn distinct(&self) -> usize {
        if self.pending.is_empty() {
            self.merged.len()
        } else {
            self.counts().len()
        }
    }
}

/// Run-length counts of sorted keys.
fn count_runs(sorted: &[u64]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &k in sorted {
        match runs.last_mut() {
            Some(last) if last.0 == k => last.1 += 1,
            _ => runs.push((k, 1)),
        }
    }
    runs
}

/// Union of two sorted count lists, counts of equal keys summed.
fn merge_counts(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
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
            out.push((x.0, x.1 + y.1));
            i += 1;
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Against a BTreeMap, across many merges (batch of 3) and with keys left pending.
    #[test]
    fn counts_match_a_map_across_merges() {
        let mut t = Tally::with_min_batch(3);
        let mut want: BTreeMap<u64, u64> = BTreeMap::new();
        let mut x = 7u64;
        for i in 0..1000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = (x >> 33) % 50 + if i % 7 == 0 { 1 << 40 } else { 0 };
            t.add(k);
            *want.entry(k).or_default() += 1;
            if i % 97 == 0 {
                let got: BTreeMap<u64, u64> = t.counts().iter().copied().collect();
                assert_eq!(got, want, "after {i}");
                assert_eq!(t.count(k), want[&k]);
                assert_eq!(t.distinct(), want.len());
            }
        }
        assert!(!t.pending.is_empty() || t.merged.len() == want.len());
        t.merge_pending();
        assert!(matches!(t.counts(), Cow::Borrowed(_)));
        let got: Vec<(u64, u64)> = t.counts().to_vec();
        assert_eq!(got, want.into_iter().collect::<Vec<_>>());
        assert_eq!(t.count(12345), 0);
    }
}
