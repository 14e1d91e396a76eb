//! `hot`: hot-block caching, the strawman BORG is compared with (seed 001 §3.6.6).
//!
//! Pages are ranked by how many requests touched them, access patterns ignored, and the
//! most popular ones get consecutive read-cache slots in that order ("a sorted list of
//! LBAs in the order of frequency of block accesses ... allocates sequential LBAs for the
//! most popular blocks"). Equally popular pages go in LBA order, which keeps runs of a
//! sequentially read file together. A page's count is that of its most requested sector:
//! exact when requests are page aligned, a lower bound when two vertices share a page.

use super::Policy;
use crate::master::MasterGraph;
use crate::placement::{Placement, PlanParams};
use std::cmp::Reverse;

pub struct Hot;

/// `pages` pages from `first`, each touched by `hits` requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    first: u64,
    pages: u64,
    hits: u64,
}

impl Policy for Hot {
    fn name(&self) -> &'static str {
        "hot"
    }
    fn about(&self) -> &'static str {
        "most frequently accessed pages first, ignoring order (the dissertation's hot-block caching baseline)"
    }
    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            places: Some(crate::placement::TargetSpace::ReadCache),
            replicates: false,
        }
    }
    fn plan(&self, graph: &MasterGraph, params: &PlanParams) -> Placement {
        let mut runs = page_runs(graph, params.page_sectors());
        runs.sort_unstable_by_key(|r| (Reverse(r.hits), r.first));
        let mut left = params.read_cache_pages.unwrap_or(u64::MAX);
        let mut placement = Placement::empty(self.name(), params);
        let mut slot = 0;
        for r in runs {
            let n = r.pages.min(left);
            if n == 0 {
                break;
            }
            placement.push(r.first, n, slot);
            slot += n;
            left -= n;
        }
        placement
    }
}

/// Disjoint page runs in LBA order with their access counts. Vertices are disjoint and
/// sorted, so two of them overlap in at most their boundary page, which takes the larger
/// count.
fn page_runs(graph: &MasterGraph, page_sectors: u64) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for v in graph.vertices() {
        let mut first = v.extent.start_sector / page_sectors;
        let end = v.extent.end_sector().div_ceil(page_sectors);
        if let Some(last) = runs.last_mut() {
            if last.first + last.pages > first {
                if v.hits <= last.hits {
                    first += 1;
                } else {
                    last.pages -= 1;
                    if last.pages == 0 {
                        runs.pop();
                    }
                }
            }
        }
        if first == end {
            continue;
        }
        match runs.last_mut() {
            Some(last) if last.first + last.pages == first && last.hits == v.hits => {
                last.pages += end - first;
            }
            _ => runs.push(Run {
                first,
                pages: end - first,
                hits: v.hits,
            }),
        }
    }
    runs
}
