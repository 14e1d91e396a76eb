//! Sorting integer keys: the step every counter here is built on.
//!
//! Written here rather than taken from a crate: the radix crates allocate their scratch
//! buffer on every call, and faulting in a fresh multi-megabyte buffer per batch cost more
//! than the sort itself. These keep their scratch between batches and skip the digits all
//! keys share, so keys over a small range sort in a few passes.

use crate::Key;

/// Sorts `v` by key: LSB radix sort on bytes, stable, skipping the bytes on which every
/// key agrees. `scratch` is reused between calls.
pub fn radix_sort<K: Key, V: Copy>(v: &mut Vec<(K, V)>, scratch: &mut Vec<(K, V)>) {
    if v.len() <= 64 {
        v.sort_by_key(|e| e.0);
        return;
    }
    let first = v[0].0;
    let differ = v.iter().fold(first.xor(first), |d, e| d.or(e.0.xor(first)));
    let bytes: Vec<usize> = (0..K::BYTES).filter(|&d| differ.digit(d) != 0).collect();
    scratch.clear();
    scratch.extend_from_slice(v);
    if lsd(v, scratch, &bytes, |e| e.0) {
        // The sorted run ended in the scratch buffer: hand the buffers over, no copy.
        std::mem::swap(v, scratch);
    }
}

/// Below this many keys the standard library's sort is used as is.
const SMALL: usize = 256;
/// Keys per bucket the most-significant-digit pass aims at: a bucket this size sorts
/// inside the L1 cache with few comparisons.
const BUCKET_KEYS: usize = 64;
/// At most 2^14 buckets per pass: more scatter targets than that thrash the TLB.
const MAX_BUCKET_BITS: u32 = 14;
/// A bucket larger than this (skewed keys) is split again rather than sorted whole.
const SPLIT_AGAIN: usize = 1 << 14;

/// Sorts plain keys (not stable: equal keys are indistinguishable). `scratch` is kept
/// between calls so its pages are faulted in once.
///
/// Keys that differ in at most three bytes (page numbers of a few GiB, say) take an LSD
/// radix sort of those bytes: three sequential passes. Wider keys take one
/// most-significant-digit pass into about n/64 buckets by their highest differing bits,
/// then each bucket, now inside the cache, is sorted by the standard library: two passes
/// over memory however wide the keys are, where an LSD sort of a 51-bit key takes seven.
pub fn sort_keys<K: Key>(v: &mut Vec<K>, scratch: &mut Vec<K>) {
    let n = v.len();
    if n <= SMALL {
        v.sort_unstable();
        return;
    }
    let diff = differing_bits(v);
    if diff.bit_len() == 0 {
        return;
    }
    if scratch.len() < n {
        scratch.resize(n, K::default());
    }
    let bytes: Vec<usize> = (0..K::BYTES).filter(|&d| diff.digit(d) != 0).collect();
    let in_scratch = if bytes.len() <= 3 {
        lsd(v, &mut scratch[..n], &bytes, |&k| k)
    } else {
        msd_keys(v, &mut scratch[..n], diff);
        true
    };
    if in_scratch {
        // The sorted keys are in the scratch buffer: hand the buffers over, no copy.
        std::mem::swap(v, scratch);
        v.truncate(n);
    }
}

/// The bits in which some key differs from the first.
fn differing_bits<K: Key>(v: &[K]) -> K {
    let first = v[0];
    v.iter().fold(first.xor(first), |d, &k| d.or(k.xor(first)))
}

/// LSD radix sort of `v` by the given bytes of each entry's key, stable, all histograms
/// counted in one pass; `s` is scratch of the same length. Whether the result ended in
/// `s` (otherwise in `v`).
fn lsd<T: Copy, K: Key>(v: &mut [T], s: &mut [T], bytes: &[usize], key: impl Fn(&T) -> K) -> bool {
    let mut hist = vec![[0usize; 256]; bytes.len()];
    for e in v.iter() {
        let k = key(e);
        for (h, &d) in hist.iter_mut().zip(bytes) {
            h[usize::from(k.digit(d))] += 1;
        }
    }
    let (mut src, mut dst) = (v, s);
    for (h, &d) in hist.iter_mut().zip(bytes) {
        let mut sum = 0;
        for c in h.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for e in src.iter() {
            let b = usize::from(key(e).digit(d));
            dst[h[b]] = *e;
            h[b] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    bytes.len() % 2 == 1
}

/// Scatters `v` into `s` by the highest bits of `diff`, then sorts each bucket in `s`:
/// the result is in `s`.
fn msd_keys<K: Key>(v: &mut [K], s: &mut [K], diff: K) {
    let n = v.len();
    let top = diff.bit_len();
    let want = (usize::BITS - (n / BUCKET_KEYS).leading_zeros()).clamp(1, MAX_BUCKET_BITS);
    let bits = want.min(top);
    let (shift, mask) = (top - bits, (1usize << bits) - 1);
    let mut starts = vec![0usize; mask + 2];
    for &k in v.iter() {
        starts[k.bucket(shift, mask) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut next = starts.clone();
    for &k in v.iter() {
        let b = k.bucket(shift, mask);
        s[next[b]] = k;
        next[b] += 1;
    }
    for w in starts.windows(2) {
        let r = w[0]..w[1];
        if r.len() > SPLIT_AGAIN {
            let diff = differing_bits(&s[r.clone()]);
            if diff.bit_len() > 0 {
                // Sorted into v's part of the range, then copied back.
                msd_keys(&mut s[r.clone()], &mut v[r.clone()], diff);
                s[r.clone()].copy_from_slice(&v[r]);
            }
        } else if r.len() > 1 {
            s[r].sort_unstable();
        }
    }
}
