//! A set of disjoint half-open extents `[start, end)` in one unit (sectors, pages, file
//! system blocks: the caller chooses and says which).
//!
//! Kept as an ordered map from start to end with neighbours always merged, so that the
//! number of entries is the number of free runs, not of free units: a freshly trimmed
//! 100 GiB device is one entry.

use std::collections::BTreeMap;
use std::ops::Range;

/// Disjoint, merged, half-open extents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FreeExtents {
    /// start -> end; invariant: no two entries overlap or touch.
    runs: BTreeMap<u64, u64>,
    /// Sum of `end - start` over `runs`, kept so `total` is O(1).
    total: u64,
}

impl FreeExtents {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks `[start, end)` free, merging with any run it overlaps or touches.
    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut lo, mut hi) = (start, end);
        // The run starting at or before `start` may overlap or touch.
        if let Some((&s, &e)) = self.runs.range(..=start).next_back() {
            if e >= start {
                lo = s;
                hi = hi.max(e);
            }
        }
        // Every run starting inside [lo, hi] is absorbed.
        let absorbed: Vec<(u64, u64)> = self.runs.range(lo..=hi).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in absorbed {
            hi = hi.max(e);
            self.runs.remove(&s);
            self.total -= e - s;
        }
        self.runs.insert(lo, hi);
        self.total += hi - lo;
    }

    /// Marks `[start, end)` in use: what was free inside it is no longer.
    pub fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let mut touched: Vec<(u64, u64)> = Vec::new();
        if let Some((&s, &e)) = self.runs.range(..start).next_back() {
            if e > start {
                touched.push((s, e));
            }
        }
        touched.extend(self.runs.range(start..end).map(|(&s, &e)| (s, e)));
        for (s, e) in touched {
            self.runs.remove(&s);
            self.total -= e - s;
            if s < start {
                self.runs.insert(s, start);
                self.total += start - s;
            }
            if e > end {
                self.runs.insert(end, e);
                self.total += e - end;
            }
        }
    }

    /// Whether unit `x` is free.
    pub fn contains(&self, x: u64) -> bool {
        self.runs
            .range(..=x)
            .next_back()
            .is_some_and(|(_, &e)| x < e)
    }

    /// Whether every unit of `[start, end)` is free (an empty range is).
    pub fn covers(&self, start: u64, end: u64) -> bool {
        if start >= end {
            return true;
        }
        self.runs
            .range(..=start)
            .next_back()
            .is_some_and(|(_, &e)| end <= e)
    }

    /// How many units of `[start, end)` are free.
    pub fn free_within(&self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let mut n = 0;
        if let Some((_, &e)) = self.runs.range(..start).next_back() {
            n += e.min(end).saturating_sub(start);
        }
        for (&s, &e) in self.runs.range(start..end) {
            n += e.min(end) - s;
        }
        n
    }

    /// Total free units.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Number of free runs.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether nothing is free.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The free runs in address order.
    pub fn iter(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.runs.iter().map(|(&s, &e)| s..e)
    }

    /// The free runs inside `[start, end)`, clipped to it, in address order.
    pub fn iter_within(&self, start: u64, end: u64) -> impl Iterator<Item = Range<u64>> + '_ {
        let first = self
            .runs
            .range(..start)
            .next_back()
            .filter(|(_, &e)| e > start)
            .map(|(&s, &e)| s..e);
        first
            .into_iter()
            .chain(self.runs.range(start..end.max(start)).map(|(&s, &e)| s..e))
            .map(move |r| r.start.max(start)..r.end.min(end))
            .filter(|r| r.start < r.end)
    }

    /// The same extents in a unit `factor` times finer (blocks to sectors: the block size
    /// in sectors). `None` if an address overflows.
    pub fn scaled(&self, factor: u64) -> Option<FreeExtents> {
        let mut out = FreeExtents::new();
        for r in self.iter() {
            out.insert(r.start.checked_mul(factor)?, r.end.checked_mul(factor)?);
        }
        Some(out)
    }

    /// The units that are wholly free at a coarser granularity: a coarse unit of `factor`
    /// fine units counts only if all of it is free (sectors to pages: a page is free only
    /// when all its sectors are).
    pub fn coarsened(&self, factor: u64) -> FreeExtents {
        let mut out = FreeExtents::new();
        if factor == 0 {
            return out;
        }
        for r in self.iter() {
            let s = r.start.div_ceil(factor);
            let e = r.end / factor;
            out.insert(s, e);
        }
        out
    }
}

impl FromIterator<Range<u64>> for FreeExtents {
    fn from_iter<I: IntoIterator<Item = Range<u64>>>(iter: I) -> Self {
        let mut f = FreeExtents::new();
        for r in iter {
            f.insert(r.start, r.end);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_merges_touching_and_overlapping_runs() {
        let mut f = FreeExtents::new();
        f.insert(10, 20);
        f.insert(30, 40);
        f.insert(20, 30);
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![10..40]);
        assert_eq!(f.total(), 30);
        f.insert(5, 12);
        f.insert(35, 50);
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![5..50]);
        assert_eq!(f.total(), 45);
    }

    #[test]
    fn remove_splits_a_run() {
        let mut f: FreeExtents = std::iter::once(0..100).collect();
        f.remove(40, 60);
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![0..40, 60..100]);
        assert_eq!(f.total(), 80);
        assert!(f.contains(39) && !f.contains(40) && !f.contains(59) && f.contains(60));
        assert!(f.covers(60, 100) && !f.covers(30, 70));
        assert_eq!(f.free_within(30, 70), 20);
        assert_eq!(
            f.iter_within(30, 70).collect::<Vec<_>>(),
            vec![30..40, 60..70]
        );
    }

    #[test]
    fn coarsened_keeps_only_whole_units() {
        let f: FreeExtents = [3..17, 24..32].into_iter().collect();
        // factor 8: unit 0 = [0,8) partly free, unit 1 = [8,16) free, [16,24) partly, [24,32) free
        assert_eq!(f.coarsened(8).iter().collect::<Vec<_>>(), vec![1..2, 3..4]);
        assert_eq!(
            f.scaled(2).unwrap().iter().collect::<Vec<_>>(),
            vec![6..34, 48..64]
        );
        assert!(f.scaled(u64::MAX).is_none());
    }

    proptest! {
        /// Any sequence of inserts and removes agrees with a plain bitmap model.
        #[test]
        fn agrees_with_a_bitmap(ops in proptest::collection::vec((any::<bool>(), 0u64..200, 0u64..40), 0..60)) {
            let mut f = FreeExtents::new();
            let mut model = vec![false; 256];
            for (ins, s, len) in ops {
                let e = (s + len).min(256);
                if ins { f.insert(s, e) } else { f.remove(s, e) }
                for b in &mut model[s as usize..e as usize] { *b = ins; }
            }
            let expect: u64 = model.iter().filter(|&&b| b).count() as u64;
            prop_assert_eq!(f.total(), expect);
            for (i, &b) in model.iter().enumerate() {
                prop_assert_eq!(f.contains(i as u64), b);
            }
            // Runs are merged: no two touch.
            let runs: Vec<_> = f.iter().collect();
            for w in runs.windows(2) {
                prop_assert!(w[0].end < w[1].start);
            }
            for s in (0..256u64).step_by(17) {
                let e = (s + 23).min(256);
                let n = model[s as usize..e as usize].iter().filter(|&&b| b).count() as u64;
                prop_assert_eq!(f.free_within(s, e), n);
                prop_assert_eq!(f.covers(s, e), n == e - s);
                prop_assert_eq!(f.iter_within(s, e).map(|r| r.end - r.start).sum::<u64>(), n);
            }
        }
    }
}
