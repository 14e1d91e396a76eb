//! Partial plans ranked by what a copied page saves (docs/layout.md "Admission", "Partial
//! plans"). A request placed in the region saves about one positioning (a seek and a
//! rotation) whatever its length, while copying it costs every page it holds. So a page
//! is weighed by the requests that touched it, each request's weight spread over its
//! pages: `sum(1 / pages(r))`. A page a program reads four kilobytes at a time weighs a
//! whole request per read; a page of a 1 MiB read-ahead weighs 1/256 of one, and placing
//! it saves little more than its transfer while its copy costs a read and a write. On the
//! 5-day start-up capture the whole first plan (54,741 pages, 6.1 s of copies) saved
//! 13.9 s; the pages read in requests of at most 64 pages (1.9 s of copies) saved 11.5 s.

use reblock_plan::{PlacedRange, Placement, TargetSpace};
use reblock_trace::Request;
use rustc_hash::FxHashMap;

/// The weight floors a partial plan is cut at, as the request length (in pages) whose
/// pages, read once, just make the cut: a page stays when it weighs at least
/// `1 / pages`. The whole plan is always a candidate too (see [`PageWeights::at_least`]).
pub const PARTIAL_REQUEST_PAGES: [u64; 3] = [256, 64, 16];

/// Each placed page's weight: the requests that touched it, each counted `1 / pages` of
/// the request (see the module docs). Only the pages of one placement are held, so
/// memory follows the plan, not the trace.
#[derive(Clone, Debug, Default)]
pub struct PageWeights {
    weights: FxHashMap<u64, f64>,
}

impl PageWeights {
    /// The weights of `placement`'s pages over `requests` (pages of `page_sectors`).
    pub fn of<R>(
        placement: &Placement,
        requests: impl IntoIterator<Item = R>,
        page_sectors: u32,
    ) -> PageWeights
    where
        R: std::borrow::Borrow<Request>,
    {
        let replicated = crate::replicas::replica_pages(placement).map(|(page, _)| page);
        let mut weights: FxHashMap<u64, f64> = (placement.page_pairs().map(|(page, _)| page))
            .chain(replicated)
            .map(|page| (page, 0.0))
            .collect();
        let ps = u64::from(page_sectors.max(1));
        for r in requests {
            let r = r.borrow();
            let first = r.sector / ps;
            let last = (r.sector + u64::from(r.sectors.max(1)) - 1) / ps;
            let share = 1.0 / (last - first + 1) as f64;
            for page in first..=last {
                if let Some(w) = weights.get_mut(&page) {
                    *w += share;
                }
            }
        }
        PageWeights { weights }
    }

    /// The weight of `page` (0 for a page not in the placement or never touched).
    pub fn weight(&self, page: u64) -> f64 {
        self.weights.get(&page).copied().unwrap_or(0.0)
    }

    /// `placement` with only the FS2 replicas of pages that weigh at least `floor`, in
    /// the placement's order and each still near its own target (the free space nearest
    /// the target takes them one after another, so those kept stay in use order). A
    /// replica copied at a reconfiguration costs a read and a write, so, as for the
    /// region, a page of a large read-ahead pays less than its copy.
    pub fn replicas_at_least(&self, placement: &Placement, floor: f64) -> Placement {
        let kept =
            crate::replicas::replica_pages(placement).filter(|&(p, _)| self.weight(p) >= floor);
        Placement {
            replicas: crate::replicas::replica_ranges_of(kept),
            ..placement.clone()
        }
    }

    /// The pages of `placement` that weigh at least `floor`, in the placement's order and
    /// packed into its first slots (the region keeps the policy's sequence, without the
    /// holes the dropped pages would leave). A data-area permutation is returned whole:
    /// part of one would move pages onto pages that stay. FS2's replicas are kept whole.
    pub fn at_least(&self, placement: &Placement, floor: f64) -> Placement {
        if placement.space != TargetSpace::ReadCache || floor <= 0.0 {
            return placement.clone();
        }
        let mut kept: Vec<(u64, u64)> = (placement.page_pairs())
            .filter(|&(page, _)| self.weight(page) >= floor)
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
        let w = PageWeights::of(&p, reqs, 8);
        assert_eq!(w.weight(0), 2.25);
        assert_eq!(w.weight(3), 0.25);
        assert_eq!(w.weight(9), 0.0);
    }

    #[test]
    fn a_partial_plan_keeps_the_heavy_pages_in_plan_order_packed_into_the_first_slots() {
        // Plan order: pages 100-101 (slots 0-1), 10-13 (slots 2-5), 50 (slot 6). Pages
        // 100-101 and 50 are read alone, 10-13 only as one 4-page read.
        let p = placement(&[(100, 2, 0), (10, 4, 2), (50, 1, 6)]);
        let reqs = [read(800, 8), read(808, 8), read(80, 32), read(400, 8)];
        let w = PageWeights::of(&p, reqs, 8);
        let part = w.at_least(&p, 0.5);
        assert_eq!(part.ranges, placement(&[(100, 2, 0), (50, 1, 2)]).ranges);
        assert_eq!(w.at_least(&p, 0.0), p);
        assert_eq!(w.at_least(&p, 0.25).pages(), 7);
        assert_eq!(w.at_least(&p, 2.0).pages(), 0);
        // FS2's replicas are cut by the same weights, each keeping its target.
        let mut fs2 = placement(&[]);
        fs2.replicas = placement(&[(100, 2, 7), (10, 4, 7), (50, 1, 9)]).ranges;
        let wr = PageWeights::of(&fs2, reqs, 8);
        let cut = wr.replicas_at_least(&fs2, 0.5);
        assert_eq!(cut.replicas, placement(&[(100, 2, 7), (50, 1, 9)]).ranges);
        assert_eq!(wr.replicas_at_least(&fs2, 0.25), fs2);
        // A permutation is never cut.
        let mut perm = p.clone();
        perm.space = TargetSpace::DataArea;
        assert_eq!(w.at_least(&perm, 0.5), perm);
    }
}
