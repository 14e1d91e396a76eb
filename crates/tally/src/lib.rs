//! Counting of integer keys by sorted batches instead of a hash map.
//!
//! Trace statistics count something per request: an occurrence per transition pair, an
//! edge per request pair. A hash map touches a random cache line per key, and once the
//! map outgrows the cache every request waits on memory. Here entries are appended to a
//! buffer (a sequential write); when the buffer holds as many entries as there are
//! distinct keys so far (a quarter of them for [`Tally`]; at least a minimum batch), it
//! is radix sorted, equal keys are combined, and the result is merged into a sorted
//! array of distinct keys with their values, in place. Every step streams through
//! memory.
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
//!
//! Modules: [`Tally`] for entries that carry a value, [`Counter`] for bare keys counted
//! one at a time, and the sorts they share.

mod counter;
mod key;
mod sort;
mod tally;

pub use counter::Counter;
pub use key::Key;
pub use sort::{radix_sort, sort_keys};
pub use tally::{Count, Tally};

/// Entries appended before the first merge: large enough that sorting amortizes, small
/// enough that a batch sorts inside the cache.
pub const MIN_BATCH: usize = 1 << 16;

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
    fn shrunk_tallies_keep_their_counts_and_still_add() {
        let mut t: Tally<u64, u64> = Tally::with_min_batch(2);
        for k in [5, 3, 5, 9, 3] {
            t.add(k, 1);
        }
        t.shrink_to_fit();
        assert_eq!(t.counts().as_ref(), &[(3, 2), (5, 2), (9, 1)]);
        t.add(5, 1);
        t.add(1, 4);
        t.merge_pending();
        assert_eq!(t.counts().as_ref(), &[(1, 4), (3, 2), (5, 3), (9, 1)]);
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

    fn map_counts(keys: &[u64]) -> Vec<(u64, u32)> {
        let mut m = BTreeMap::new();
        for &k in keys {
            *m.entry(k).or_insert(0u32) += 1;
        }
        m.into_iter().collect()
    }

    fn pairs<K: Copy>(t: (&[K], &[u32])) -> Vec<(K, u32)> {
        t.0.iter().copied().zip(t.1.iter().copied()).collect()
    }

    #[test]
    fn counter_by_hand_across_merges() {
        // Batch of 2: merges happen mid-stream; the in-place merge grows the arrays.
        let mut c: Counter<u64> = Counter::with_min_batch(2);
        for k in [5, 3, 5, 9, 3, 5, 1] {
            c.add(k);
        }
        assert_eq!(pairs(c.sorted()), vec![(1, 1), (3, 2), (5, 3), (9, 1)]);
        // Keys re-packed wider keep their counts and order, pending ones included.
        c.add(3);
        c.map_keys(|k| k << 8);
        c.add(3 << 8);
        assert_eq!(
            pairs(c.sorted()),
            vec![(256, 1), (768, 4), (1280, 3), (2304, 1)]
        );
    }

    #[test]
    fn merged_counts_saturate() {
        let (mut keys, mut counts) = (vec![4u32], vec![u32::MAX - 1]);
        counter::merge_counts(&mut keys, &mut counts, &[1, 4], &[1, 5]);
        assert_eq!((keys, counts), (vec![1, 4], vec![1, u32::MAX]));
    }

    /// Keys for the sort: few bytes (the LSD path), many (MSD), skewed (a bucket split
    /// again), equal, and mixed widths with gaps.
    fn key_sets() -> Vec<Vec<u64>> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let n = 100_000;
        vec![
            (0..n).map(|_| next() % (1 << 22)).collect(),
            (0..n).map(|_| next() >> 7).collect(),
            (0..n)
                .map(|_| {
                    if next() % 4 == 0 {
                        next()
                    } else {
                        next() % 1000
                    }
                })
                .collect(),
            vec![42; n],
            (0..n)
                .map(|_| ((next() % 3) << 60) | (next() % (1 << 20)))
                .collect(),
            (0..300).map(|_| next()).collect(),
        ]
    }

    #[test]
    fn sort_keys_sorts_every_shape() {
        let mut scratch = Vec::new();
        for keys in key_sets() {
            let mut want = keys.clone();
            want.sort_unstable();
            let mut got = keys.clone();
            sort_keys(&mut got, &mut scratch);
            assert_eq!(got, want);
            let mut wide: Vec<u128> = keys.iter().map(|&k| u128::from(k) << 40 | 7).collect();
            let want: Vec<u128> = want.iter().map(|&k| u128::from(k) << 40 | 7).collect();
            sort_keys(&mut wide, &mut Vec::new());
            assert_eq!(wide, want);
        }
    }

    proptest! {
        #[test]
        fn counter_equals_a_map(keys in proptest::collection::vec(
                prop_oneof![0u64..50, any::<u64>(), (0u64..4).prop_map(|k| k << 62)], 0..2000),
                batch in 1usize..400) {
            let mut c: Counter<u64> = Counter::with_min_batch(batch);
            for &k in &keys {
                c.add(k);
            }
            prop_assert_eq!(pairs(c.sorted()), map_counts(&keys));
        }

        #[test]
        fn merge_equals_a_map(a in proptest::collection::btree_map(0u64..200, 1u32..9, 0..80),
                              b in proptest::collection::btree_map(0u64..200, 1u32..9, 0..80)) {
            let (mut keys, mut counts): (Vec<u64>, Vec<u32>) = a.clone().into_iter().unzip();
            let (bk, bc): (Vec<u64>, Vec<u32>) = b.clone().into_iter().unzip();
            counter::merge_counts(&mut keys, &mut counts, &bk, &bc);
            let mut m = a;
            for (k, c) in b {
                *m.entry(k).or_insert(0) += c;
            }
            let want: Vec<(u64, u32)> = m.into_iter().collect();
            prop_assert_eq!(keys.into_iter().zip(counts).collect::<Vec<_>>(), want);
        }
    }
}
