//! The data reorganization module (seed 003 §IV-D): map colours to disks so that each
//! colour gets its own disk and the fewest bytes move.
//!
//! The seed builds a unit-capacity flow network source -> colour -> disk -> sink whose
//! colour-disk edge costs the bytes that mapping moves, and runs min-cost flow. With
//! unit capacities and as many colours as disks that flow is exactly an assignment
//! problem, solved here by the Hungarian (Kuhn-Munkres) algorithm of the `pathfinding`
//! crate in `O(N^3)`: maximizing the bytes that stay in place is minimizing the bytes
//! moved. [`map_colours_brute_force`] is the seed's `N! / (N - C)!` enumeration, kept for
//! tests.

use pathfinding::prelude::{kuhn_munkres, Matrix};

/// Bytes per colour and current disk: `stay[c][d]` is how many bytes of colour `c` sit on
/// disk `d` now; `allowed[c][d]` says whether colour `c` may go to disk `d` (capacity).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Movement {
    pub stay: Vec<Vec<u64>>,
    pub allowed: Vec<Vec<bool>>,
}

impl Movement {
    /// Every mapping allowed.
    pub fn unconstrained(stay: Vec<Vec<u64>>) -> Movement {
        let allowed = stay.iter().map(|r| vec![true; r.len()]).collect();
        Movement { stay, allowed }
    }
    fn total(&self) -> u64 {
        self.stay.iter().flatten().sum()
    }
    /// Bytes moved when colour `c` goes to disk `mapping[c]`.
    pub fn moved_bytes(&self, mapping: &[usize]) -> u64 {
        let kept: u64 = mapping
            .iter()
            .enumerate()
            .map(|(c, &d)| self.stay[c][d])
            .sum();
        self.total() - kept
    }
}

/// The colour -> disk mapping moving the fewest bytes among the allowed ones (there
/// must be at least as many disks as colours). If no allowed mapping exists the result
/// uses a forbidden pair; callers keep the identity allowed so one always exists.
pub fn map_colours(m: &Movement) -> Vec<usize> {
    let colours = m.stay.len();
    if colours == 0 {
        return Vec::new();
    }
    let disks = m.stay[0].len();
    assert!(
        disks >= colours,
        "{colours} colours need at least as many disks"
    );
    // Forbidden pairs cost more than every byte there is, so they are never chosen
    // while an allowed assignment exists.
    let forbid = -(m.total() as i64) - 1;
    let weights = Matrix::from_fn(colours, disks, |(c, d)| {
        if m.allowed[c][d] {
            m.stay[c][d] as i64
        } else {
            forbid
        }
    });
    kuhn_munkres(&weights).1
}

/// The seed's brute force: every injective mapping, the one moving the fewest bytes.
pub fn map_colours_brute_force(m: &Movement) -> Vec<usize> {
    let colours = m.stay.len();
    let disks = m.stay.first().map_or(0, Vec::len);
    let mut best: Option<(u64, Vec<usize>)> = None;
    let mut current = Vec::with_capacity(colours);
    let mut used = vec![false; disks];
    permute(m, &mut current, &mut used, &mut best);
    best.map(|(_, p)| p).unwrap_or_default()
}

fn permute(
    m: &Movement,
    current: &mut Vec<usize>,
    used: &mut [bool],
    best: &mut Option<(u64, Vec<usize>)>,
) {
    let c = current.len();
    if c == m.stay.len() {
        let cost = m.moved_bytes(current);
        if best.as_ref().is_none_or(|(b, _)| cost < *b) {
            *best = Some((cost, current.clone()));
        }
        return;
    }
    for d in 0..used.len() {
        if !used[d] && m.allowed[c][d] {
            used[d] = true;
            current.push(d);
            permute(m, current, used, best);
            current.pop();
            used[d] = false;
        }
    }
}
