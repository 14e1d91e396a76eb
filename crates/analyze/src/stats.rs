//! Plain counters (seed 000 Table 1: requests, reads, writes, bytes) and the value
//! distribution used for request sizes and inter-arrival times.

use reblock_trace::{Op, Request};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Request and byte totals by operation (seed 000 Table 1, "Reads/Writes Total"), and
/// the page accesses by operation (each request counts every page it touches).
#[derive(Clone, Debug, Default)]
pub struct Counters {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_pages: u64,
    pub write_pages: u64,
}

impl Counters {
    /// Counts `pages` page accesses by `op` (the page-rounded totals).
    #[inline]
    pub fn observe_pages(&mut self, op: Op, pages: u64) {
        match op {
            Op::Read => self.read_pages += pages,
            Op::Write => self.write_pages += pages,
        }
    }

    pub fn observe(&mut self, req: &Request) {
        self.requests += 1;
        match req.op {
            Op::Read => {
                self.reads += 1;
                self.read_bytes += req.bytes();
            }
            Op::Write => {
                self.writes += 1;
                self.write_bytes += req.bytes();
            }
        }
    }
}

/// How many distinct values [`Distribution`] keeps exactly before it falls back to
/// log-linear buckets; bounds its memory whatever the trace's length.
const EXACT_LIMIT: usize = 4096;
/// Log-linear buckets: each power of two is cut into 2^SUB_BITS equal buckets, so a value
/// read back from a bucket (its lower bound) is low by less than 1/128 of itself.
const SUB_BITS: u32 = 7;

/// A distribution of non-negative integers with exact nearest-rank percentiles while it
/// holds at most 4096 distinct values (request sizes nearly always do), and percentiles
/// within 1/128 relative error (reported as the bucket's lower bound) beyond that.
#[derive(Clone, Debug, Default)]
pub struct Distribution {
    exact: FxHashMap<u64, u64>,
    /// Counts by bucket index (see [`bucket_index`]): a dense array, so counting a value
    /// once bucketed is an index computation, not a hash lookup.
    buckets: Option<Vec<u64>>,
    n: u64,
    /// Exact sums of the values and of their squares, in integers: one add each per
    /// value, where float sums cost a conversion and a slower add on every request (and
    /// round). Squares that would overflow 128 bits move to `sum_sq_spill`.
    sum: u128,
    sum_sq: u128,
    sum_sq_spill: f64,
    /// Counts of the last few distinct values, not yet in `exact` (count 0: a free
    /// slot): request sizes mostly repeat one of a few values, and counting them here
    /// saves a hash lookup per request. Replaced round-robin.
    recent: [(u64, u64); RECENT],
    victim: usize,
}

/// Values [`Distribution`] counts before its map.
const RECENT: usize = 4;

impl Distribution {
    #[inline]
    pub fn observe(&mut self, v: u64) {
        self.n += 1;
        self.sum += u128::from(v);
        let sq = u128::from(v) * u128::from(v);
        match self.sum_sq.checked_add(sq) {
            Some(s) => self.sum_sq = s,
            None => {
                self.sum_sq_spill += self.sum_sq as f64 + sq as f64;
                self.sum_sq = 0;
            }
        }
        if let Some(b) = &mut self.buckets {
            b[bucket_index(v)] += 1;
            return;
        }
        if let Some(slot) = self.recent.iter_mut().find(|s| s.1 > 0 && s.0 == v) {
            slot.1 += 1;
            return;
        }
        self.flush_slot(self.victim);
        self.recent[self.victim] = (v, 1);
        self.victim = (self.victim + 1) % RECENT;
    }

    /// Counts every value held in `recent`.
    fn flush_run(&mut self) {
        for i in 0..RECENT {
            self.flush_slot(i);
        }
    }

    /// Counts the value held in `recent[i]`.
    fn flush_slot(&mut self, i: usize) {
        let (v, c) = std::mem::take(&mut self.recent[i]);
        if c == 0 {
            return;
        }
        if let Some(b) = &mut self.buckets {
            b[bucket_index(v)] += c;
            return;
        }
        *self.exact.entry(v).or_insert(0) += c;
        if self.exact.len() > EXACT_LIMIT {
            let mut b = vec![0u64; BUCKETS];
            for (&v, &c) in &self.exact {
                b[bucket_index(v)] += c;
            }
            self.exact = FxHashMap::default();
            self.buckets = Some(b);
        }
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn is_exact(&self) -> bool {
        if self.pending() {
            return self.flushed().is_exact();
        }
        self.buckets.is_none()
    }

    /// Whether `recent` holds counts not yet in `exact`.
    fn pending(&self) -> bool {
        self.recent.iter().any(|s| s.1 > 0)
    }

    /// A copy with the pending run counted.
    fn flushed(&self) -> Distribution {
        let mut d = self.clone();
        d.flush_run();
        d
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }

    /// Coefficient of variation: population standard deviation over the mean.
    pub fn cv(&self) -> Option<f64> {
        let mean = self.mean()?;
        if mean == 0.0 {
            return None;
        }
        let sum_sq = self.sum_sq as f64 + self.sum_sq_spill;
        let var = (sum_sq / self.n as f64 - mean * mean).max(0.0);
        Some(var.sqrt() / mean)
    }

    /// Values and their counts, ascending.
    pub fn sorted(&self) -> Vec<(u64, u64)> {
        if self.pending() {
            return self.flushed().sorted();
        }
        if let Some(b) = &self.buckets {
            // Bucket indices ascend with their lower bounds: no sort needed.
            return b
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(|(i, &c)| (bucket_lower(i), c))
                .collect();
        }
        let mut v: Vec<(u64, u64)> = self.exact.iter().map(|(&k, &c)| (k, c)).collect();
        v.sort_unstable();
        v
    }

    /// Nearest-rank percentile: the smallest value v such that at least ceil(q * n) of the
    /// n observations are <= v (q in (0, 1]).
    pub fn quantile(&self, q: f64) -> Option<u64> {
        quantile_of(&self.sorted(), self.n, q)
    }

    pub fn min(&self) -> Option<u64> {
        self.sorted().first().map(|&(v, _)| v)
    }

    pub fn max(&self) -> Option<u64> {
        self.sorted().last().map(|&(v, _)| v)
    }
}

fn quantile_of(sorted: &[(u64, u64)], n: u64, q: f64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut cum = 0;
    for &(v, c) in sorted {
        cum += c;
        if cum >= rank {
            return Some(v);
        }
    }
    sorted.last().map(|&(v, _)| v)
}

/// The lower bound of the log-linear bucket holding `v` (values below 2^SUB_BITS are exact);
/// the definition `bucket_lower(bucket_index(v))` is tested against.
#[cfg(test)]
fn bucket_floor(v: u64) -> u64 {
    let bits = 64 - v.leading_zeros();
    if bits <= SUB_BITS {
        return v;
    }
    let shift = bits - SUB_BITS;
    (v >> shift) << shift
}

/// Values below 2^SUB_BITS have a bucket each; every later power of two has 2^(SUB_BITS-1)
/// buckets (its values share the top SUB_BITS bits).
const HALF: usize = 1 << (SUB_BITS - 1);
const BUCKETS: usize = (1 << SUB_BITS) + (64 - SUB_BITS as usize) * HALF;

/// Dense index of the bucket holding `v`, ascending with the bucket's lower bound.
fn bucket_index(v: u64) -> usize {
    let bits = 64 - v.leading_zeros();
    if bits <= SUB_BITS {
        return v as usize;
    }
    let shift = bits - SUB_BITS;
    let top = (v >> shift) as usize; // in [HALF, 2 * HALF)
    (1 << SUB_BITS) + (shift as usize - 1) * HALF + (top - HALF)
}

/// The lower bound of bucket `i` (inverse of [`bucket_index`] composed with the floor).
fn bucket_lower(i: usize) -> u64 {
    if i < 1 << SUB_BITS {
        return i as u64;
    }
    let j = i - (1 << SUB_BITS);
    let shift = j / HALF + 1;
    (((j % HALF) + HALF) as u64) << shift
}

/// Mean, nearest-rank percentiles and extremes of a [`Distribution`].
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean: Option<f64>,
    pub min: Option<u64>,
    pub p50: Option<u64>,
    pub p95: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
    /// Standard deviation over the mean (population).
    pub cv: Option<f64>,
    /// False once more than 4096 distinct values forced 1/128-precision buckets.
    pub exact: bool,
}

impl Distribution {
    pub fn summary(&self) -> Summary {
        let sorted = self.sorted();
        Summary {
            count: self.n,
            mean: self.mean(),
            min: sorted.first().map(|&(v, _)| v),
            p50: quantile_of(&sorted, self.n, 0.50),
            p95: quantile_of(&sorted, self.n, 0.95),
            p99: quantile_of(&sorted, self.n, 0.99),
            max: sorted.last().map(|&(v, _)| v),
            cv: self.cv(),
            exact: self.is_exact(),
        }
    }
}

/// One bar of the request-size histogram: sizes in [lower_bytes, upper_bytes).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SizeBucket {
    pub lower_bytes: u64,
    pub upper_bytes: u64,
    pub requests: u64,
}

/// Request sizes in power-of-two buckets: bucket [2^k, 2^(k+1)) bytes.
pub fn size_histogram(sizes_bytes: &Distribution) -> Vec<SizeBucket> {
    let mut out: Vec<SizeBucket> = Vec::new();
    for (v, c) in sizes_bytes.sorted() {
        let lower = if v == 0 {
            0
        } else {
            1u64 << (63 - v.leading_zeros())
        };
        match out.last_mut() {
            Some(b) if b.lower_bytes == lower => b.requests += c,
            _ => out.push(SizeBucket {
                lower_bytes: lower,
                upper_bytes: lower.saturating_mul(2).max(1),
                requests: c,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn dense_bucket_index_matches_floor() {
        let mut prev = 0;
        let mut vs: Vec<u64> = (0..5000).collect();
        for b in 0..64 {
            let p = 1u64 << b;
            vs.extend([p - 1, p, p + 1, p + p / 3, p.wrapping_mul(3) / 2]);
        }
        vs.push(u64::MAX);
        vs.sort_unstable();
        for v in vs {
            let i = bucket_index(v);
            assert!(i < BUCKETS && i >= prev, "{v}");
            assert_eq!(bucket_lower(i), bucket_floor(v), "{v}");
            prev = i;
        }
    }

    use super::*;

    #[test]
    fn nearest_rank_percentiles_by_hand() {
        // Values 1..=10: p50 = ceil(0.5*10) = 5th smallest = 5; p95 = ceil(9.5) = 10th = 10;
        // p99 = ceil(9.9) = 10th = 10. Mean 5.5; population variance = (100-1)/12 = 8.25,
        // so cv = sqrt(8.25)/5.5 = 0.52223.
        let mut d = Distribution::default();
        for v in 1..=10 {
            d.observe(v);
        }
        let s = d.summary();
        assert_eq!((s.p50, s.p95, s.p99), (Some(5), Some(10), Some(10)));
        assert_eq!((s.min, s.max), (Some(1), Some(10)));
        assert!((s.mean.unwrap() - 5.5).abs() < 1e-12);
        assert!((s.cv.unwrap() - 8.25f64.sqrt() / 5.5).abs() < 1e-12);
        assert!(s.exact);
    }

    #[test]
    fn sums_are_exact_and_huge_squares_spill() {
        // 2^53 + 1 three times: a float sum rounds each addend to 2^53, the integer sum
        // does not. u64::MAX twice and 0 twice: the squares overflow 128 bits; mean and
        // standard deviation are both MAX/2, so cv = 1.
        let mut d = Distribution::default();
        for _ in 0..3 {
            d.observe((1 << 53) + 1);
        }
        assert_eq!(d.sum, 3 * ((1u128 << 53) + 1));
        let mut d = Distribution::default();
        for v in [u64::MAX, 0, u64::MAX, 0] {
            d.observe(v);
        }
        assert!(d.sum_sq_spill > 0.0);
        assert_eq!(d.mean(), Some(u64::MAX as f64 / 2.0));
        assert!((d.cv().unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn many_distinct_values_fall_back_to_buckets_within_1_percent() {
        let mut d = Distribution::default();
        for v in 1..=100_000u64 {
            d.observe(v * 1000);
        }
        assert!(!d.is_exact());
        // Exact p50 is 50,000,000; the bucket floor is within 1/128 below it.
        let p50 = d.quantile(0.5).unwrap() as f64;
        assert!((50_000_000.0 * (1.0 - 1.0 / 128.0)..=50_000_000.0).contains(&p50));
    }

    #[test]
    fn size_histogram_groups_powers_of_two() {
        // 512 B -> [512,1024); 4096 and 6144 -> [4096,8192); 8192 -> [8192,16384).
        let mut d = Distribution::default();
        for v in [512, 4096, 6144, 8192, 4096] {
            d.observe(v);
        }
        let h = size_histogram(&d);
        let got: Vec<(u64, u64, u64)> = h
            .iter()
            .map(|b| (b.lower_bytes, b.upper_bytes, b.requests))
            .collect();
        assert_eq!(got, vec![(512, 1024, 1), (4096, 8192, 3), (8192, 16384, 1)]);
    }

    proptest::proptest! {
        #[test]
        fn exact_percentiles_match_a_sorted_copy(
            values in proptest::collection::vec(
                proptest::prop_oneof![0u64..6, 0u64..5000, proptest::prelude::any::<u64>()],
                1..3000)
        ) {
            let mut d = Distribution::default();
            for &v in &values {
                d.observe(v);
            }
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let rank = |q: f64| sorted[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
            let s = d.summary();
            let distinct = sorted.windows(2).filter(|w| w[0] != w[1]).count() + 1;
            proptest::prop_assert_eq!(s.exact, distinct <= EXACT_LIMIT);
            proptest::prop_assert_eq!(s.count, values.len() as u64);
            if s.exact {
                proptest::prop_assert_eq!((s.min, s.max), (Some(sorted[0]), sorted.last().copied()));
                proptest::prop_assert_eq!((s.p50, s.p95, s.p99), (Some(rank(0.5)), Some(rank(0.95)), Some(rank(0.99))));
            }
        }
    }
}
