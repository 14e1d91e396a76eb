//! Partial plans ranked by what a copied page saves (docs/layout.md "Admission", "Partial
//! plans"). A request placed in the region saves about one positioning (a seek and a
//! rotation) whatever its length, while copying it costs every page it holds. So a page
//! is weighed by the requests that touched it, each request's weight spread over its
//! pages: `sum(1 / pages(r))`. A page a program reads four kilobytes at a time weighs a
//! whole request per read; a page of a 1 MiB read-ahead weighs 1/256 of one, and placing
//! it saves little more than its transfer while its copy costs a read and a write. On the
//! 5-day start-up capture the whole first plan (54,741 pages, 6.1 s of copies) saved
//! 13.9 s; the pages read in requests of at most 64 pages (1.9 s of copies) saved 11.5 s.

use std::ops::RangeInclusive;

use reblock_plan::{PlacedRange, Placement, TargetSpace};
use reblock_trace::Request;
use rustc_hash::FxHashMap;

/// The weight floors a partial plan is cut at, as the request length (in pages) whose
/// pages, read once, just make the cut: a page stays when it weighs at least
/// `1 / pages`. The whole plan is always a candidate too (see [`PageWeights::at_least`]).
pub const PARTIAL_REQUEST_PAGES: [u64; 3] = [256, 64, 16];

/// Whose requests a page's weight counts: the plan's (every request up to the boundary)
/// or its trial's (those before the backtest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weighed {
    Plan,
    Trial,
}

/// Each placed page's weight: the requests that touched it, each counted `1 / pages` of
/// the request (see the module docs), over the plan's requests and over its trial's. Only
/// the pages of the plan and its trial are held, so memory follows the plan, not the
/// trace; the two share one table and one pass over the requests (they were two tables,
/// each from its own pass, the trial's a copy of the plan's when it had none).
#[derive(Clone, Debug, Default)]
pub struct PageWeights {
    /// Per page of either placement: its weight over the plan's and the trial's requests.
    weights: FxHashMap<u64, [f64; 2]>,
}

/// The pages `r` touches (of `page_sectors` sectors): a request of no length touches the
/// page it addresses.
pub(crate) fn pages_touched(r: &Request, page_sectors: u64) -> RangeInclusive<u64> {
    let ps = page_sectors.max(1);
    r.sector / ps..=(r.sector + u64::from(r.sectors.max(1)) - 1) / ps
}

impl PageWeights {
    /// The weights of `plan`'s pages over `requests`, and when `trial` is given, of its
    /// placement's pages over the first of its count of them (otherwise the trial's
    /// weights are the plan's), in one pass (pages of `page_sectors`).
    pub fn of<R>(
        plan: &Placement,
        trial: Option<(&Placement, usize)>,
        requests: impl IntoIterator<Item = R>,
        page_sectors: u32,
    ) -> PageWeights
    where
        R: std::borrow::Borrow<Request>,
    {
        // FS2's replicas are weighed too: a replica copied at a reconfiguration is cut
        // by the same weights ([`PageWeights::replicas_at_least`]).
        let of_placement = |p: &Placement| {
            let replicated = crate::replicas::replica_pages(p).map(|(page, _)| page);
            (p.page_pairs().map(|(page, _)| page))
                .chain(replicated)
                .collect::<Vec<_>>()
        };
        let trial_pages = trial.map(|(t, _)| of_placement(t)).unwrap_or_default();
        let mut weights: FxHashMap<u64, [f64; 2]> = (of_placement(plan).into_iter())
            .chain(trial_pages)
            .map(|page| (page, [0.0; 2]))
            .collect();
        let trial_len = trial.map(|(_, n)| n);
        for (i, r) in requests.into_iter().enumerate() {
            let r = r.borrow();
            let pages = pages_touched(r, u64::from(page_sectors));
            let share = 1.0 / (pages.end() - pages.start() + 1) as f64;
            let in_trial = trial_len.is_none_or(|n| i < n);
            for page in pages {
                if let Some(w) = weights.get_mut(&page) {
                    w[0] += share;
                    if in_trial {
                        w[1] += share;
                    }
                }
            }
        }
        PageWeights { weights }
    }

    /// The weight of `page` over the requests of `of` (0 for a page of neither placement
    /// or never touched).
    pub fn weight(&self, page: u64, of: Weighed) -> f64 {
        let w = self.weights.get(&page).copied().unwrap_or_default();
        w[of as usize]
    }

    /// `placement` with only the FS2 replicas of pages that weigh at least `floor` over
    /// the requests of `of`, in the placement's order and each still near its own target
    /// (the free space nearest the target takes them one after another, so those kept stay
    /// in use order). A replica copied at a reconfiguration costs a read and a write, so,
    /// as for the region, a page of a large read-ahead pays less than its copy.
    pub fn replicas_at_least(&self, placement: &Placement, floor: f64, of: Weighed) -> Placement {
        let kept =
            crate::replicas::replica_pages(placement).filter(|&(p, _)| self.weight(p, of) >= floor);
        Placement {
            replicas: crate::replicas::replica_ranges_of(kept),
            ..placement.clone()
        }
    }

    /// The pages of `placement` that weigh at least `floor`, in the placement's order and
    /// packed into its first slots (the region keeps the policy's sequence, without the
    /// holes the dropped pages would leave). A data-area permutation is returned whole:
    /// part of one would move pages onto pages that stay. FS2's replicas are kept whole.
    /// Weights count the requests of `of`.
    pub fn at_least(&self, placement: &Placement, floor: f64, of: Weighed) -> Placement {
        if placement.space != TargetSpace::ReadCache || floor <= 0.0 {
            return placement.clone();
        }
        let mut kept: Vec<(u64, u64)> = (placement.page_pairs())
            .filter(|&(page, _)| self.weight(page, of) >= floor)
            .collect();
        kept.sort_by_key(|&(_, target)| target);
        let mut ranges: Vec<PlacedRange> = Vec::new();
        for (slot, (page, _)) in (0u64..).zip(kept) {
            match ranges.last_mut() {
                Some(r) if r.fs_page + r.pages == page && r.target + r.pages == slot => {
                    r.pages += 1
                }
                _ => ranges.push(PlacedRange {
                    fs_page: page,
                    pages: 1,
                    target: slot,
                }),
            }
        }
        Placement {
            ranges,
            ..placement.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::{Op, NO_COMMAND};

    fn read(sector: u64, sectors: u32) -> Request {
        Request {
            ts_ns: 0,
            pid: None,
            command: NO_COMMAND,
            device: 0,
            sector,
            sectors,
            op: Op::Read,
        }
    }

    fn placement(ranges: &[(u64, u64, u64)]) -> Placement {
        Placement {
            policy: "borg".into(),
            page_sectors: 8,
            space: TargetSpace::ReadCache,
            ranges: (ranges.iter())
                .map(|&(fs_page, pages, target)| PlacedRange {
                    fs_page,
                    pages,
                    target,
                })
                .collect(),
            replicas: Vec::new(),
        }
    }

    #[test]
    fn a_page_weighs_its_requests_spread_over_their_pages() {
        // Pages 0-3 placed; page 0 read alone twice, pages 0-3 once as one 4-page read,
        // page 9 (not placed) read too.
        let p = placement(&[(0, 4, 0)]);
        let reqs = [read(0, 8), read(0, 8), read(0, 32), read(72, 8)];
        let w = PageWeights::of(&p, None, reqs, 8);
        assert_eq!(w.weight(0, Weighed::Plan), 2.25);
        assert_eq!(w.weight(3, Weighed::Plan), 0.25);
        assert_eq!(w.weight(9, Weighed::Plan), 0.0);
        assert_eq!(w.weight(0, Weighed::Trial), 2.25);
    }

    #[test]
    fn a_partial_plan_keeps_the_heavy_pages_in_plan_order_packed_into_the_first_slots() {
        // Plan order: pages 100-101 (slots 0-1), 10-13 (slots 2-5), 50 (slot 6). Pages
        // 100-101 and 50 are read alone, 10-13 only as one 4-page read.
        let p = placement(&[(100, 2, 0), (10, 4, 2), (50, 1, 6)]);
        let reqs = [read(800, 8), read(808, 8), read(80, 32), read(400, 8)];
        let w = PageWeights::of(&p, None, reqs, 8);
        let plan = Weighed::Plan;
        let part = w.at_least(&p, 0.5, plan);
        assert_eq!(part.ranges, placement(&[(100, 2, 0), (50, 1, 2)]).ranges);
        assert_eq!(w.at_least(&p, 0.0, plan), p);
        assert_eq!(w.at_least(&p, 0.25, plan).pages(), 7);
        assert_eq!(w.at_least(&p, 2.0, plan).pages(), 0);
        // FS2's replicas are cut by the same weights, each keeping its target.
        let mut fs2 = placement(&[]);
        fs2.replicas = placement(&[(100, 2, 7), (10, 4, 7), (50, 1, 9)]).ranges;
        let wr = PageWeights::of(&fs2, None, reqs, 8);
        let cut = wr.replicas_at_least(&fs2, 0.5, plan);
        assert_eq!(cut.replicas, placement(&[(100, 2, 7), (50, 1, 9)]).ranges);
        assert_eq!(wr.replicas_at_least(&fs2, 0.25, plan), fs2);
        // A permutation is never cut.
        let mut perm = p.clone();
        perm.space = TargetSpace::DataArea;
        assert_eq!(w.at_least(&perm, 0.5, plan), perm);
    }

    /// 40 random requests over 512 pages (0 to 299 pages long, so that a page's weight
    /// ranges across the floors), a plan and a trial placing overlapping random pages in
    /// random slots.
    fn random_case(seed: u64) -> (Vec<Request>, Placement, Placement) {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let reqs: Vec<Request> = (0..40)
            .map(|_| read(next(512 * 8), next(300 * 8) as u32))
            .collect();
        let mut pick = |count: u64| {
            let mut pages: Vec<u64> = (0..count).map(|_| next(512)).collect();
            pages.sort_unstable();
            pages.dedup();
            let ranges: Vec<(u64, u64, u64)> = (0u64..)
                .zip(pages)
                .map(|(slot, page)| (page, 1, (slot * 7) % 397))
                .collect();
            placement(&ranges)
        };
        let (plan, trial) = (pick(300), pick(200));
        (reqs, plan, trial)
    }

    /// One table over the plan's and the trial's pages, from one pass, cuts both plans as
    /// two tables did, each from its own pass over its own requests: weights equal to the
    /// bit, so every cut keeps the same pages.
    #[test]
    fn one_table_for_plan_and_trial_cuts_as_two_tables_did() {
        let mut cut_sizes = std::collections::BTreeSet::new();
        for seed in 1..40 {
            let (reqs, plan, trial) = random_case(seed);
            let trial_len = (seed as usize * 7) % reqs.len();
            let both = PageWeights::of(&plan, Some((&trial, trial_len)), &reqs, 8);
            let plan_only = PageWeights::of(&plan, None, &reqs, 8);
            let trial_only = PageWeights::of(&trial, None, &reqs[..trial_len], 8);
            let bits = |w: &PageWeights, page, of| w.weight(page, of).to_bits();
            for (page, _) in plan.page_pairs() {
                let w = bits(&both, page, Weighed::Plan);
                assert_eq!(w, bits(&plan_only, page, Weighed::Plan));
            }
            for (page, _) in trial.page_pairs() {
                let w = bits(&both, page, Weighed::Trial);
                assert_eq!(w, bits(&trial_only, page, Weighed::Plan));
            }
            for n in PARTIAL_REQUEST_PAGES.into_iter().chain([1, 4, 32, 128]) {
                let floor = 1.0 / n as f64;
                let cut = |w: &PageWeights, p: &Placement, of| w.at_least(p, floor, of);
                let plan_cut = cut(&both, &plan, Weighed::Plan);
                assert_eq!(plan_cut, cut(&plan_only, &plan, Weighed::Plan));
                let trial_cut = cut(&both, &trial, Weighed::Trial);
                assert_eq!(trial_cut, cut(&trial_only, &trial, Weighed::Plan));
                cut_sizes.insert((seed, n, plan_cut.pages(), trial_cut.pages()));
            }
        }
        // The cases cut: at most floors, some pages go and some stay.
        let partial = |&&(_, _, p, t): &&(u64, u64, u64, u64)| p > 0 && t > 0;
        let kept: std::collections::BTreeSet<_> = cut_sizes.iter().filter(partial).collect();
        let sizes: std::collections::BTreeSet<_> = kept.iter().map(|c| (c.0, c.2)).collect();
        assert!(sizes.len() > 100, "{} distinct cuts", sizes.len());
    }
}
