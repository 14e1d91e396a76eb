//! `fs2` and `borg+fs2`: FS2's replicas of hot blocks in the disk's free space (dynamic
//! data replication in free disk space; docs/references.md).
//!
//! FS2 finds the *hot area*, the part of the disk with the most activity, and replicates
//! blocks from outside it that are used together with it into free space inside or next
//! to it, so the head stays where it already works. Here the hot area is the aligned
//! window of [`HOT_AREA_BYTES`] with the most requests of the training graph, its centre
//! the request-weighted mean page inside it; "used together" is BORG's grouping of the
//! access graph (ranges joined by heavy edges, in group order). Related ranges inside the
//! hot area are replicated too: laid out in the order they are used, next to the ranges
//! from outside, a start-up reads them as one stream instead of paying a rotation for
//! each (application start-up capture, hdd:wd2500aaks: total busy 0.848 of vanilla's
//! with them, 0.860 without, both with ranges capped at 512 KiB). The placement only names pages and where they should be near;
//! which free pages take them is decided by whoever knows the free space (the simulator's
//! layout, later the engine), so a policy never needs the free-space map.
//!
//! `borg+fs2` makes BORG's read-cache placement and the same replicas: both run together.

use rustc_hash::FxHashMap;

use super::{claim_pages, Borg, Policy};
use crate::group::{form_groups, GroupLimits};
use crate::master::MasterGraph;
use crate::placement::{PlacedRange, Placement, PlanParams, TargetSpace};

/// Size of one hot-area window: an ext4 block group (32768 blocks of 4 KiB), the unit in
/// which a file system keeps related blocks together.
pub const HOT_AREA_BYTES: u64 = 128 << 20;

/// Requests a range needs in training to be worth a replica (at most the plan's
/// edge-weight floor: a trial planned from a share of the training data lowers that
/// floor, and a range read once a day must count in a trial planned from one day).
///
/// Ranges of any size qualify: replicas are written from the application's own reads
/// (no copy reads them), so a large range costs its write once, and laid in use order
/// it saves the seek and rotation in front of it on every later start-up. Capped at
/// 512 KiB, the start-up capture (hdd:wd2500aaks) ended at 0.848 of vanilla's total;
/// without the cap at 0.813.
const MIN_HITS: u64 = 2;

pub struct Fs2;
pub struct BorgFs2;

impl Policy for Fs2 {
    fn name(&self) -> &'static str {
        "fs2"
    }
    fn about(&self) -> &'static str {
        "FS2 replicas: blocks used with the hot area copied into free space next to it; \
         reads go to the copy closest to the head"
    }
    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            places: None,
            replicates: true,
        }
    }
    fn plan(&self, graph: &MasterGraph, params: &PlanParams) -> Placement {
        let mut placement = Placement::empty(self.name(), params);
        placement.replicas = replica_ranges(graph, params);
        placement
    }
}

impl Policy for BorgFs2 {
    fn name(&self) -> &'static str {
        "borg+fs2"
    }
    fn about(&self) -> &'static str {
        "BORG's read-cache placement and FS2 replicas in free space, together"
    }
    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            places: Some(TargetSpace::ReadCache),
            replicates: true,
        }
    }
    fn plan(&self, graph: &MasterGraph, params: &PlanParams) -> Placement {
        let mut placement = Borg.plan(graph, params);
        placement.policy = self.name().to_string();
        placement.replicas = replica_ranges(graph, params);
        placement
    }
}

/// The hot area of `graph`: (first page, end page, centre page), or `None` without
/// requests.
fn hot_area(graph: &MasterGraph, params: &PlanParams) -> Option<(u64, u64, u64)> {
    let ps = params.page_sectors();
    let window = (HOT_AREA_BYTES / (ps * 512)).max(1);
    let mut per_window: FxHashMap<u64, u64> = FxHashMap::default();
    for v in graph.vertices() {
        *per_window
            .entry(v.extent.start_sector / ps / window)
            .or_default() += v.hits;
    }
    let (&w, _) = per_window
        .iter()
        .max_by_key(|(&w, &hits)| (hits, std::cmp::Reverse(w)))?;
    let (lo, hi) = (w * window, (w + 1) * window);
    let (mut sum, mut weight) = (0u128, 0u128);
    for v in graph.vertices() {
        let page = v.extent.start_sector / ps;
        if (lo..hi).contains(&page) {
            sum += u128::from(page) * u128::from(v.hits);
            weight += u128::from(v.hits);
        }
    }
    let centre = (sum / weight.max(1)) as u64;
    Some((lo, hi, centre.clamp(lo, hi - 1)))
}

/// FS2's replicas for `graph`: the page ranges of BORG's groups (temporally related
/// ranges, in group order), each to be copied near the hot area's centre. At most `read_cache_pages` pages (the working set worth placing) when
/// given.
pub fn replica_ranges(graph: &MasterGraph, params: &PlanParams) -> Vec<PlacedRange> {
    let Some((_, _, centre)) = hot_area(graph, params) else {
        return Vec::new();
    };
    let limits = GroupLimits {
        page_sectors: params.page_sectors(),
        capacity_pages: u64::MAX,
        min_edge_weight: params.min_edge_weight,
        k_window: 0,
    };
    let groups = form_groups(graph, &limits);
    // A range used once in training gains nothing from a replica that costs a write:
    // only ranges requested at least `min_hits` times are replicated.
    let min_hits = params.min_edge_weight.clamp(1, MIN_HITS);
    let order = groups
        .iter()
        .flat_map(|g| g.order.iter().copied())
        .filter(|&v| graph.vertex(v).hits >= min_hits);
    let mut left = params.read_cache_pages.unwrap_or(u64::MAX);
    let mut out: Vec<PlacedRange> = Vec::new();
    for (first, end) in claim_pages(graph, order, params) {
        let n = (end - first).min(left);
        if n == 0 {
            continue;
        }
        left -= n;
        match out.last_mut() {
            Some(r) if r.fs_page + r.pages == first => r.pages += n,
            _ => out.push(PlacedRange {
                fs_page: first,
                pages: n,
                target: centre,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::Vertex;
    use crate::Extent;

    /// Pages 0-1 and 900_000 are used with the hot area around page 70_000.
    #[test]
    fn replicas_are_the_related_ranges_placed_near_the_hot_area() {
        let v = |page: u64, pages: u32, hits: u64| Vertex {
            extent: Extent::new(page * 8, pages * 8),
            hits,
        };
        let vertices = vec![
            v(0, 2, 3),
            v(70_000, 4, 9),
            v(70_100, 1, 9),
            v(900_000, 1, 3),
        ];
        let edges = vec![(0, 1, 3), (1, 2, 9), (2, 3, 3), (3, 0, 3)];
        let g = MasterGraph::from_edges(vertices, edges);
        let params = PlanParams {
            min_edge_weight: 2,
            ..PlanParams::default()
        };
        let (lo, hi, centre) = hot_area(&g, &params).unwrap();
        assert_eq!((lo, hi), (65_536, 98_304));
        assert_eq!(centre, 70_050);
        let r = Fs2.plan(&g, &params);
        assert!(r.ranges.is_empty());
        let mut pages: Vec<(u64, u64)> = r.replicas.iter().map(|r| (r.fs_page, r.pages)).collect();
        pages.sort_unstable();
        assert_eq!(pages, vec![(0, 2), (70_000, 4), (70_100, 1), (900_000, 1)]);
        // A range read once in training is not replicated, unless the plan's floor is 1
        // (a trial planned from part of the training data).
        let mut once = g.vertices().to_vec();
        once[3].hits = 1;
        let g1 = MasterGraph::from_edges(once, vec![(0, 1, 3), (1, 2, 9), (2, 3, 3), (3, 0, 3)]);
        let named = |p: &PlanParams| -> Vec<u64> {
            Fs2.plan(&g1, p)
                .replicas
                .iter()
                .map(|r| r.fs_page)
                .collect()
        };
        assert!(!named(&params).contains(&900_000));
        let trial = PlanParams {
            min_edge_weight: 1,
            ..params
        };
        assert!(named(&trial).contains(&900_000));
        assert!(r.replicas.iter().all(|r| r.target == centre));
        let both = BorgFs2.plan(&g, &params);
        assert_eq!(both.replicas, r.replicas);
        assert_eq!(both.ranges, Borg.plan(&g, &params).ranges);
        assert!(Fs2.capabilities().online() && Fs2.capabilities().replicates);
    }
}
