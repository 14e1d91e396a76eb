//! `dlr-frag`: the data layout reconfigurator's fragmented layout (seed 002 §6.1).
//!
//! No extra region is assumed: the pages the placed vertices already occupy are reused.
//! The vertices keep the order `dlr-seq` gives them (seed 002: "the order in which the
//! blocks are placed remains the same"), and the i-th page of that order moves to the
//! i-th lowest of those pages. Targets are therefore FS pages of the data area
//! ([`TargetSpace::DataArea`]) and the placement is a permutation of its own pages: the
//! same set of pages, reordered. The read-cache size does not bound it (it uses no cache).

use super::{claim_pages, dlr_seq::middle_out, Policy};
use crate::master::MasterGraph;
use crate::placement::{Placement, PlanParams, TargetSpace};

pub struct DlrFrag;

impl Policy for DlrFrag {
    fn name(&self) -> &'static str {
        "dlr-frag"
    }
    fn about(&self) -> &'static str {
        "dlr-seq's order laid into the pages the workload already uses (the self-optimizing file system's fragmented layout)"
    }
    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            places: Some(crate::placement::TargetSpace::DataArea),
            replicates: false,
        }
    }
    fn plan(&self, graph: &MasterGraph, params: &PlanParams) -> Placement {
        let (order, _) = middle_out(graph, params, u64::MAX);
        let sources = claim_pages(graph, order, params);
        let mut targets: Vec<(u64, u64)> = sources.iter().copied().filter(|s| s.1 > s.0).collect();
        targets.sort_unstable();
        let mut placement = Placement::empty(self.name(), params);
        placement.space = TargetSpace::DataArea;
        let mut t = targets.iter().copied();
        let mut slot = (0, 0);
        for (mut lo, hi) in sources {
            while lo < hi {
                if slot.0 == slot.1 {
                    slot = t.next().expect("as many target pages as source pages");
                }
                let n = (hi - lo).min(slot.1 - slot.0);
                placement.push(lo, n, slot.0);
                lo += n;
                slot.0 += n;
            }
        }
        placement
    }
}
