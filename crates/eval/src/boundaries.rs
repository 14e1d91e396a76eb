//! Where a run's reconfigurations fall when `--interval` is a count (docs/layout.md
//! "Phase boundaries"). BORG's evaluation spaces them equally in trace time; a workload
//! that runs in sessions separated by idle time (a start-up capture's days, the programs
//! within a day) that repeat is better cut at its idle gaps: the first boundary right
//! after the first session that repeats what came before it (before that no plan can
//! show a saving, after it every request served plain is a loss), the others at the
//! longest idle gaps after it. `--trigger auto` (the default) does so when the trace has
//! such a session, else it spaces the boundaries equally. Equal spacing cut the start-up
//! capture's first day in two halves that share few pages, or put the first boundary at
//! the end of day 1 where nothing had repeated yet, and the first plan waited.

use reblock_trace::RequestSpan;
use serde::{Deserialize, Serialize};

/// How a run's reconfiguration points were placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoundaryRule {
    /// After the first repeating session, then at the longest idle gaps
    /// ([`at_idle_gaps`]).
    IdleGaps,
    /// Equally spaced in trace time (BORG's evaluation).
    EqualTime,
}

/// One reconfiguration point: the request that starts the phase after it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoundaryPoint {
    /// Index of the first request after the boundary.
    pub request: u64,
    /// Its arrival, seconds after the trace's first request.
    pub at_s: f64,
    /// The idle time before it (its arrival gap), seconds.
    pub idle_s: f64,
}

/// Where every policy's reconfigurations fell (the same for all of them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseBoundaries {
    pub rule: BoundaryRule,
    pub points: Vec<BoundaryPoint>,
}

impl PhaseBoundaries {
    /// The first point after request `start` (exclusive end of its phase), if any.
    pub fn next_after(&self, start: usize) -> Option<usize> {
        (self.points.iter())
            .map(|p| p.request as usize)
            .find(|&r| r > start)
    }
}

/// An arrival gap counts as idle when it is at least this share of the trace's span:
/// the start-up capture's days are 2-3.5% of its span apart (7 days, 77 s, gaps of
/// 1.7-2.8 s) and its programs 1-2% (0.8-1.5 s), while the requests of a busy trace
/// arrive far closer (a gap of 1% of the span is 150 mean arrival gaps on a
/// 15 000-request trace). At most 1/share gaps can be that long, so collecting them holds
/// at most a hundred.
pub const IDLE_GAP_SHARE: f64 = 0.01;

/// A session repeats what came before it when at least this share of its pages had been
/// touched before it began: the start-up captures' second days repeat 97-99% of their
/// first. Half was not enough: MSR hm_0, rsrch_1 and UMass Financial1's devices have
/// sessions that repeat 50-74%, and cut after them they lost (hm_0 borg 0.916 -> 0.932,
/// Financial1 device 3 borg 1.000 -> 1.044 of vanilla's total).
pub const REPEATED_SHARE: f64 = 0.9;

/// Fewest requests a session must hold to count as repeating. The start-up captures'
/// first repeating sessions hold 1800 requests; shorter ones that repeated 97-100% (71
/// requests of windows-mssql, 33 of UMass Financial1's device 13) put the first plan on
/// too little and lost (dlr-seq 1.007 -> 1.018, borg 0.953 -> 1.018 of vanilla's total).
const MIN_SESSION_REQUESTS: usize = 256;

/// An arrival gap: the request after it, its arrival and the gap before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gap {
    pub request: usize,
    pub at_ns: u64,
    pub gap_ns: u64,
}

/// Up to `count` boundaries at idle gaps of `reqs` (arrivals from `t0_ns` to `t1_ns`,
/// pages of `page_sectors`), in trace order: the first where the first repeating session
/// ends ([`first_repeated_session`]), the others at the longest idle gaps after it (fewer
/// when fewer fit: a boundary before the first repeat pays nothing). Each phase spans at
/// least half an equally spaced interval (a gap right after another, or just before the
/// trace ends, would make a phase too short to learn from or to judge a plan on). None
/// when the trace has fewer idle gaps than `count` or no repeating session.
pub(crate) fn at_idle_gaps(
    reqs: RequestSpan<'_>,
    count: u32,
    (t0_ns, t1_ns): (u64, u64),
    page_sectors: u32,
) -> Option<Vec<Gap>> {
    let span_ns = t1_ns.saturating_sub(t0_ns);
    if count == 0 || span_ns == 0 {
        return None;
    }
    let min_gap_ns = ((span_ns as f64 * IDLE_GAP_SHARE) as u64).max(1);
    let mut gaps = Vec::new();
    let mut prev_ns = None;
    for (i, r) in reqs.iter().enumerate() {
        if let Some(p) = prev_ns {
            let gap_ns = r.ts_ns.saturating_sub(p);
            if gap_ns >= min_gap_ns {
                gaps.push(Gap {
                    request: i,
                    at_ns: r.ts_ns,
                    gap_ns,
                });
            }
        }
        prev_ns = Some(r.ts_ns);
    }
    let min_phase_ns = span_ns / (u64::from(count) + 1) / 2;
    if gaps.len() < count as usize {
        return None;
    }
    let first = first_repeated_session(reqs, &gaps, page_sectors, t0_ns + min_phase_ns);
    if let Some(j) = first.filter(|&j| t1_ns - gaps[j].at_ns >= min_phase_ns) {
        // As many as fit after it: a boundary before the first repeat pays nothing.
        let after = (gaps[j].at_ns, t1_ns);
        let rest = pick_separated(
            gaps[j + 1..].to_vec(),
            count as usize - 1,
            after,
            min_phase_ns,
        );
        return Some([gaps[j]].into_iter().chain(rest).collect());
    }
    None
}

/// The index in `gaps` (idle gaps in trace order) of the first gap at or after
/// `not_before_ns` that ends a session (the requests since the previous idle gap) of at
/// least [`MIN_SESSION_REQUESTS`] of which [`REPEATED_SHARE`] of the pages had been
/// touched before it. Pages are counted in fixed-size bit sets ([`PageBits`]): the memory
/// stays the same whatever the trace, at the price of a few hash collisions.
fn first_repeated_session(
    reqs: RequestSpan<'_>,
    gaps: &[Gap],
    page_sectors: u32,
    not_before_ns: u64,
) -> Option<usize> {
    let ps = u64::from(page_sectors.max(1));
    let (mut before, mut session) = (PageBits::new(), PageBits::new());
    let (mut j, mut held) = (0, 0usize);
    for (i, r) in reqs.iter().enumerate() {
        if i == gaps.get(j)?.request {
            // The bit-set scans last: short or early sessions skip them.
            let repeats =
                || session.overlap(&before) as f64 >= REPEATED_SHARE * session.count() as f64;
            if held >= MIN_SESSION_REQUESTS && gaps[j].at_ns >= not_before_ns && repeats() {
                return Some(j);
            }
            before.absorb(&mut session);
            (j, held) = (j + 1, 0);
        }
        let last = (r.sector + u64::from(r.sectors.max(1)) - 1) / ps;
        for page in r.sector / ps..=last {
            session.insert(page);
        }
        held += 1;
    }
    None
}

/// A set of pages hashed into a fixed 2^[`PageBits::BITS`] bits (2 MiB).
struct PageBits(Vec<u64>);

impl PageBits {
    const BITS: u32 = 24;

    fn new() -> PageBits {
        PageBits(vec![0; 1 << (Self::BITS - 6)])
    }

    fn insert(&mut self, page: u64) {
        let h = page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - Self::BITS);
        self.0[(h >> 6) as usize] |= 1 << (h & 63);
    }

    fn count(&self) -> u64 {
        self.0.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Pages in both sets.
    fn overlap(&self, other: &PageBits) -> u64 {
        (self.0.iter().zip(&other.0))
            .map(|(a, b)| u64::from((a & b).count_ones()))
            .sum()
    }

    /// Moves every page of `other` into this set, leaving `other` empty.
    fn absorb(&mut self, other: &mut PageBits) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter_mut()) {
            *a |= std::mem::take(b);
        }
    }
}

/// The longest of `gaps` (ties: the earlier), at most `count` of them, each leaving
/// phases of at least `min_phase_ns` between its neighbours (the trace's ends included);
/// in trace order.
fn pick_separated(
    mut gaps: Vec<Gap>,
    count: usize,
    (t0_ns, t1_ns): (u64, u64),
    min_phase_ns: u64,
) -> Vec<Gap> {
    gaps.sort_by(|a, b| b.gap_ns.cmp(&a.gap_ns).then(a.request.cmp(&b.request)));
    let mut chosen: Vec<Gap> = Vec::with_capacity(count);
    for g in gaps {
        if chosen.len() == count {
            break;
        }
        let before = (chosen.iter().map(|c| c.at_ns))
            .filter(|&t| t < g.at_ns)
            .max()
            .unwrap_or(t0_ns);
        let after = (chosen.iter().map(|c| c.at_ns))
            .filter(|&t| t > g.at_ns)
            .min()
            .unwrap_or(t1_ns);
        if g.at_ns - before >= min_phase_ns && after - g.at_ns >= min_phase_ns {
            chosen.push(g);
        }
    }
    chosen.sort_by_key(|g| g.request);
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(request: usize, at_s: u64, gap_ms: u64) -> Gap {
        Gap {
            request,
            at_ns: at_s * 1_000_000_000,
            gap_ns: gap_ms * 1_000_000,
        }
    }

    #[test]
    fn the_longest_gaps_win_unless_they_leave_a_phase_too_short() {
        // A 100 s trace, phases at least 10 s: the 3 s gap at 95 s would leave a 5 s
        // last phase, the 2.5 s gap at 24 s a 4 s phase after the 2.8 s one at 20 s.
        let gaps = vec![
            gap(10, 20, 2800),
            gap(12, 24, 2500),
            gap(40, 50, 2000),
            gap(60, 70, 1500),
            gap(90, 95, 3000),
        ];
        let t = (0, 100_000_000_000);
        let picked = pick_separated(gaps.clone(), 3, t, 10_000_000_000);
        let requests: Vec<usize> = picked.iter().map(|g| g.request).collect();
        assert_eq!(requests, [10, 40, 60]);
        // Four are asked for, three fit.
        assert_eq!(pick_separated(gaps, 4, t, 10_000_000_000).len(), 3);
    }

    #[test]
    fn the_first_boundary_follows_the_first_session_that_repeats() {
        use reblock_trace::{Op, Request, RequestLog};
        // Sessions of 300 requests (3 s). Day 1: A (pages 0..300), 1 s idle, B
        // (1000..1300); 3 s idle; day 2: A, B, C and D (new pages), 1 s idle between.
        // The longest gap ends day 1, where nothing has repeated yet; the first boundary
        // is after day 2's A instead, whose pages day 1 had all seen.
        let (mut reqs, mut t) = (Vec::new(), 0u64);
        let mut session = |reqs: &mut Vec<Request>, first: u64, idle_ns: u64| {
            for p in first..first + 300 {
                reqs.push(Request {
                    ts_ns: t,
                    pid: None,
                    command: 0,
                    device: 0,
                    sector: p * 8,
                    sectors: 8,
                    op: Op::Read,
                });
                t += 10_000_000;
            }
            t += idle_ns;
        };
        session(&mut reqs, 0, 1_000_000_000);
        session(&mut reqs, 1000, 3_000_000_000);
        for first in [0, 1000, 2000] {
            session(&mut reqs, first, 1_000_000_000);
        }
        session(&mut reqs, 3000, 0);
        let span = (reqs[0].ts_ns, reqs.last().unwrap().ts_ns);
        let at = |reqs: &[Request], count: u32| {
            let log = RequestLog::from(reqs.to_vec());
            at_idle_gaps(log.span(), count, span, 8)
                .map(|g| g.iter().map(|g| g.request).collect::<Vec<usize>>())
        };
        assert_eq!(at(&reqs, 1), Some(vec![900]));
        // Two: phases of 4.2 s at least (25 s / 3 / 2) leave no room for a second one
        // after the repeat, and one before it would pay nothing: one boundary.
        assert_eq!(at(&reqs, 2), Some(vec![900]));
        // Day 2 on new pages: nothing repeats, so equal spacing (None) instead.
        let fresh: Vec<Request> = (reqs.iter().enumerate())
            .map(|(i, r)| Request {
                sector: r.sector + if i >= 600 { 1_000_000 } else { 0 },
                ..*r
            })
            .collect();
        assert_eq!(at(&fresh, 1), None);
        // Repeating only 80% of its pages is not a repeat.
        let partly: Vec<Request> = (reqs.iter().enumerate())
            .map(|(i, r)| Request {
                sector: r.sector
                    + if (600..900).contains(&i) && i % 5 == 0 {
                        1_000_000
                    } else {
                        0
                    },
                ..*r
            })
            .collect();
        assert_ne!(at(&partly, 1), Some(vec![900]));
    }
}
