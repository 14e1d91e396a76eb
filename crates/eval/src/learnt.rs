//! What a phase boundary's plan learns from: the training requests `--training` picks
//! (built into a graph afresh each time), or the decayed learning state kept across
//! phases (`--learning-decay`, the state `serve` keeps across re-plans and restarts).

use reblock_plan::{build_graphs, LearningState, Placement, PlanParams};
use reblock_trace::RequestSpan;

use crate::config::Training;
use crate::planner::{self, PlanCost};
use crate::EvalError;

/// The training of one boundary's plan.
pub(crate) enum Learnt<'r> {
    /// Requests learnt afresh.
    Requests(RequestSpan<'r>),
    /// The learning state as it stood before the phase just ended (already decayed),
    /// and that phase's requests.
    State {
        before: &'r LearningState,
        phase: RequestSpan<'r>,
    },
}

impl<'r> Learnt<'r> {
    /// The training of the boundary at `end`, the phase having begun at `start`.
    pub(crate) fn of(
        training: Training,
        state: Option<&'r LearningState>,
        reqs: RequestSpan<'r>,
        (start, end): (usize, usize),
    ) -> Learnt<'r> {
        match (state, training) {
            (Some(before), _) => Learnt::State {
                before,
                phase: reqs.sub(start..end),
            },
            (None, Training::Cumulative) => Learnt::Requests(reqs.sub(..end)),
            (None, Training::Partial) => Learnt::Requests(reqs.sub(start..end)),
        }
    }

    /// Requests trained on; a learnt history counts as its decayed request count.
    pub(crate) fn len(&self) -> usize {
        match self {
            Learnt::Requests(r) => r.len(),
            Learnt::State { before, phase } => phase.len() + before.requests() as usize,
        }
    }

    /// The part of the training weight left when the last `without` requests are left out.
    pub(crate) fn share(&self, without: usize) -> f64 {
        (self.len() - without) as f64 / self.len().max(1) as f64
    }

    /// `policy`'s plan from this training, leaving out its last `without` requests (the
    /// trial of a plan judged on them).
    pub(crate) fn plan(
        &self,
        policy: &str,
        params: &PlanParams,
        without: usize,
    ) -> Result<(Placement, PlanCost), EvalError> {
        match *self {
            Learnt::Requests(r) => {
                let r = r.sub(..r.len() - without);
                planner::plan_from(policy, params, r.len(), || build_graphs(r))
            }
            Learnt::State { before, phase } => {
                let phase = phase.sub(..phase.len() - without);
                planner::plan_from(policy, params, phase.len(), || before.graph_with(phase))
            }
        }
    }
}
