//! Picking the cheapest of a few candidates when each has a cheap floor under its cost:
//! a drive's queue choosing its next command, or ordering its waiting writes, times a
//! full media access per candidate, and most candidates can be ruled out by their seek
//! alone (the rotational wait only adds to it).

use std::cmp::Ordering;

/// The index of the least `cost` among candidates `0..n`, ties to the lowest index, with
/// what `cost` returned beside it; exactly what evaluating every `cost` would pick.
/// `floor(i)` must never order above candidate `i`'s cost under `cmp`: the candidate
/// with the lowest floor is timed first, and after it `cost` is called only for those
/// whose floor leaves them a chance of winning.
pub(crate) fn least_cost<T: Copy, X>(
    n: usize,
    floor: impl Fn(usize) -> T,
    cmp: impl Fn(&T, &T) -> Ordering,
    mut cost: impl FnMut(usize) -> (T, X),
) -> Option<(usize, X)> {
    let first = (0..n).min_by(|&a, &b| cmp(&floor(a), &floor(b)))?;
    let (c, x) = cost(first);
    let mut best = (first, c, x);
    for i in (0..n).filter(|&i| i != first) {
        match cmp(&floor(i), &best.1) {
            Ordering::Greater => continue,
            Ordering::Equal if i > best.0 => continue,
            _ => {}
        }
        let (c, x) = cost(i);
        let wins = match cmp(&c, &best.1) {
            Ordering::Less => true,
            Ordering::Equal => i < best.0,
            Ordering::Greater => false,
        };
        if wins {
            best = (i, c, x);
        }
    }
    Some((best.0, best.2))
}

#[cfg(test)]
mod tests {
    use super::least_cost;

    /// splitmix64, for reproducible cases without a dependency.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn picks_what_evaluating_every_cost_picks_and_skips_hopeless_ones() {
        let mut s = 7;
        let mut skipped = 0;
        for _ in 0..5_000 {
            let n = (next(&mut s) % 12) as usize;
            // Small ranges make ties (in costs and floors) common.
            let costs: Vec<u64> = (0..n).map(|_| next(&mut s) % 6).collect();
            let floors: Vec<u64> = costs.iter().map(|&c| c - next(&mut s) % (c + 1)).collect();
            let want = (0..n).min_by_key(|&i| (costs[i], i));
            let mut calls = 0;
            let got = least_cost(
                n,
                |i| floors[i],
                u64::cmp,
                |i| {
                    calls += 1;
                    (costs[i], i)
                },
            );
            assert_eq!(got, want.map(|i| (i, i)), "{costs:?} {floors:?}");
            skipped += n - calls;
        }
        assert!(skipped > 0, "the floors ruled nothing out");
    }

    #[test]
    fn compares_floats_with_the_given_order() {
        let costs = [3.0, 1.5, 1.5, 0.25f64];
        let floors = [3.0, 0.0, 1.0, 0.25];
        let got = least_cost(4, |i| floors[i], f64::total_cmp, |i| (costs[i], ()));
        assert_eq!(got.map(|g| g.0), Some(3));
        assert!(least_cost(0, |_| 0.0, f64::total_cmp, |_| (0.0, ())).is_none());
    }
}
