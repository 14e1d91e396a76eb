//! `borg`: BORG's greedy planner (seed 000 §4.3, seed 001 §3.4.3).
//!
//! Groups are formed from the most connected vertex outwards (see [`crate::group`]) until
//! the read cache is full or the remaining edges weigh less than the threshold; each
//! disconnected component is its own group. Groups are laid one after another in the read
//! cache from slot 0, each in its own left-to-right order. BORG scores against the whole
//! group; `k_window` does not apply.

use super::{claim_pages, place_consecutively, Policy};
use crate::group::{form_groups, GroupLimits};
use crate::master::MasterGraph;
use crate::placement::{Placement, PlanParams};

pub struct Borg;

impl Policy for Borg {
    fn name(&self) -> &'static str {
        "borg"
    }
    fn about(&self) -> &'static str {
        "BORG greedy placement of correlated ranges into the read cache"
    }
    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            places: Some(crate::placement::TargetSpace::ReadCache),
            replicates: false,
        }
    }
    fn plan(&self, graph: &MasterGraph, params: &PlanParams) -> Placement {
        let limits = GroupLimits {
            page_sectors: params.page_sectors(),
            capacity_pages: params.read_cache_pages.unwrap_or(u64::MAX),
            min_edge_weight: params.min_edge_weight,
            k_window: 0,
        };
        let groups = form_groups(graph, &limits);
        let order = groups.iter().flat_map(|g| g.order.iter().copied());
        let spans = claim_pages(graph, order, params);
        let mut placement = Placement::empty(self.name(), params);
        place_consecutively(&mut placement, &spans, 0);
        placement
    }
}
