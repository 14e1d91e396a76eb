//! A read-cache placement as the layout crate's [`Plan`] (plan.json), which the
//! reconfigurator diffs and applies.

use crate::placement::{Placement, TargetSpace};
use reblock_layout::Plan;

/// The placement moves pages within the data area (dlr-frag); a plan places pages into
/// read-cache slots and cannot express that.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy `{policy}` permutes pages inside the data area; a read-cache plan cannot hold it")]
pub struct NotReadCache {
    pub policy: String,
}

impl TryFrom<&Placement> for Plan {
    type Error = NotReadCache;

    fn try_from(p: &Placement) -> Result<Plan, NotReadCache> {
        if p.space != TargetSpace::ReadCache {
            return Err(NotReadCache {
                policy: p.policy.clone(),
            });
        }
        let mut plan = Plan::new(p.page_sectors, &p.policy);
        for r in &p.ranges {
            plan.push(r.fs_page, r.pages, r.target);
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::{MasterGraph, Vertex};
    use crate::{by_name, Extent, PlanParams};

    /// Three one-page vertices at pages 1, 2, 3 and the edges 3->1 (2), 1->2 (1): borg
    /// gives [3 1 2] (pages 3, 1, 2 in slots 0, 1, 2); as a plan, [3] then [1..3).
    fn graph() -> MasterGraph {
        let v = |page: u64| Vertex {
            extent: Extent::new(8 * page, 8),
            hits: 1,
        };
        MasterGraph::from_edges(vec![v(1), v(2), v(3)], vec![(2, 0, 2), (0, 1, 1)])
    }

    #[test]
    fn read_cache_placement_becomes_a_plan() {
        let p = by_name("borg")
            .unwrap()
            .plan(&graph(), &PlanParams::default());
        let plan = Plan::try_from(&p).unwrap();
        assert_eq!(
            plan.pairs().collect::<Vec<_>>(),
            vec![(3, 0), (1, 1), (2, 2)]
        );
        assert_eq!(plan.ranges.len(), 2);
        assert_eq!((plan.page_sectors, plan.policy.as_str()), (8, "borg"));
        let back = Plan::from_json(&plan.to_json(), "plan.json").unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn data_area_placement_is_refused() {
        let p = by_name("dlr-frag")
            .unwrap()
            .plan(&graph(), &PlanParams::default());
        let err = Plan::try_from(&p).unwrap_err();
        assert_eq!(err.policy, "dlr-frag");
    }
}
