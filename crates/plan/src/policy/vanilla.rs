//! `vanilla`: no reorganization, the baseline every other policy is measured against.

use super::Policy;
use crate::master::MasterGraph;
use crate::placement::{Placement, PlanParams};

pub struct Vanilla;

impl Policy for Vanilla {
    fn name(&self) -> &'static str {
        "vanilla"
    }
    fn about(&self) -> &'static str {
        "no reorganization: every request goes to its original location"
    }
    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            places: None,
            replicates: false,
        }
    }
    fn plan(&self, _graph: &MasterGraph, params: &PlanParams) -> Placement {
        Placement::empty(self.name(), params)
    }
}
