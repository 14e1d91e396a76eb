//! `dlr-seq`: the data layout reconfigurator's sequential layout (seed 002 §4, Figure 6;
//! §6.1 "sequential layout").
//!
//! The greedy order is the same as BORG's, optionally refined with the k-window, but the
//! placement starts from the middle of a fresh contiguous region S (here the read cache)
//! and grows outwards: the most connected vertex goes to the middle page `S / 2`, vertices
//! joining on the left take the pages below it and those joining on the right the pages
//! above. Later components start "at a fresh LBA in S": we put them alternately right and
//! left of what is already placed (g4 g2 g0 g1 g3), keeping the layout centred. When a
//! side would run past the region's edge the whole run is shifted inwards, so nothing is
//! dropped that the capacity admitted. Targets are read-cache slots.

use super::{claim_pages, Policy};
use crate::group::{form_groups, Group, GroupLimits};
use crate::master::{MasterGraph, VertexId};
use crate::placement::{Placement, PlanParams};

pub struct DlrSeq;

impl Policy for DlrSeq {
    fn name(&self) -> &'static str {
        "dlr-seq"
    }
    fn about(&self) -> &'static str {
        "greedy layout from the middle of a contiguous region outwards (the self-optimizing file system's placement)"
    }
    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            places: Some(crate::placement::TargetSpace::ReadCache),
            replicates: false,
        }
    }
    fn plan(&self, graph: &MasterGraph, params: &PlanParams) -> Placement {
        let capacity = params.read_cache_pages.unwrap_or(u64::MAX);
        let (order, seed_at) = middle_out(graph, params, capacity);
        let spans = claim_pages(graph, order, params);
        let total: u64 = spans.iter().map(|s| s.1 - s.0).sum();
        let before_seed: u64 = spans[..seed_at].iter().map(|s| s.1 - s.0).sum();
        let region = params.read_cache_pages.unwrap_or(total);
        let start = (region / 2).saturating_sub(before_seed).min(region - total);
        let mut placement = Placement::empty(self.name(), params);
        super::place_consecutively(&mut placement, &spans, start);
        placement
    }
}

/// All groups in their middle-out arrangement, and the index in it of the first group's
/// seed vertex (the one that goes to the middle of the region).
pub(crate) fn middle_out(
    graph: &MasterGraph,
    params: &PlanParams,
    capacity_pages: u64,
) -> (Vec<VertexId>, usize) {
    let limits = GroupLimits {
        page_sectors: params.page_sectors(),
        capacity_pages,
        min_edge_weight: params.min_edge_weight,
        k_window: params.k_window,
    };
    let groups = form_groups(graph, &limits);
    let Some((first, rest)) = groups.split_first() else {
        return (Vec::new(), 0);
    };
    let left: Vec<&Group> = rest.iter().skip(1).step_by(2).collect();
    let mut order = Vec::new();
    for g in left.iter().rev() {
        order.extend_from_slice(&g.order);
    }
    let seed_at = order.len() + first.seed_index;
    order.extend_from_slice(&first.order);
    for g in rest.iter().step_by(2) {
        order.extend_from_slice(&g.order);
    }
    (order, seed_at)
}
