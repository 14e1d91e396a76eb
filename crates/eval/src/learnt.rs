//! What a phase boundary's plan learns from: the training requests `--training` picks, or
//! the decayed learning state kept across phases (`--learning-decay`, the state `serve`
//! keeps across re-plans and restarts).
//!
//! Both are one [`LearningState`], never copied. A boundary needs two graphs, the trial's
//! (the training without the backtest at its end) and the plan's (all of it): the state
//! learns up to the trial's end, gives its graph, then learns the backtest and gives the
//! plan's, so each request is learnt once per boundary (it was twice, and the decayed
//! state was copied twice and learnt the phase three times).
//!
//! The training requests are learnt into a state that never decays (decay 1, no bound on
//! its vertices, so its graph is exactly the graph of those requests built afresh), made
//! at the boundary and dropped after it. Cumulative training could keep it from one
//! boundary to the next and learn each request once in the whole run, but then the state
//! of the whole history would stay in memory through every phase replay, on top of the
//! simulator's queue: 35 MB more peak at 10^6 requests (185 -> 220 MB) for about 2 % of
//! the CPU time.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use reblock_plan::{LearningState, MasterGraph, ParkedState, Placement, PlanParams};
use reblock_trace::RequestSpan;

use crate::config::Training;
use crate::planner::{self, PlanCost};
use crate::EvalError;

/// The learning of one policy's run, kept across its phase boundaries.
pub(crate) struct Learner {
    training: Training,
    /// Whether the state decays at each boundary (`--learning-decay`).
    decayed: bool,
    state: LearningState,
    /// The trace's requests before `to` have been learnt into `state` (those of the
    /// training, or since the run began when decayed).
    to: usize,
    /// `state` while a trial's graph, built from its memory, is planned: read back
    /// before the state learns again.
    parked: Option<ParkedState>,
    /// Where a state is parked: an unnamed temporary file (tests give one that fails).
    park_file: fn() -> io::Result<File>,
    /// Why the last state could not be parked (it then stayed in memory).
    park_failure: Option<io::Error>,
}

/// Whether the warning that a learning state stays in memory was printed (once a run).
static PARK_WARNED: AtomicBool = AtomicBool::new(false);

impl Learner {
    /// The learning `training` asks for, or a state decaying by `decay` at each boundary.
    pub(crate) fn new(training: Training, decay: Option<f64>) -> Result<Learner, EvalError> {
        let state = match decay {
            Some(d) => LearningState::new(d, LearningState::DEFAULT_MAX_VERTICES)
                .map_err(|e| EvalError::Setup(e.to_string()))?,
            None => Self::undecayed(),
        };
        Ok(Learner {
            training,
            decayed: decay.is_some(),
            state,
            to: 0,
            parked: None,
            park_file: tempfile::tempfile,
            park_failure: None,
        })
    }

    /// A state that keeps every count and every vertex: the graph of what it learnt, as
    /// a graph built from those requests afresh (counted in whole requests: the smaller
    /// state).
    fn undecayed() -> LearningState {
        LearningState::whole()
    }

    /// The training of the boundary at `end` of `reqs`, the phase having begun at `start`.
    pub(crate) fn boundary<'l, 'r>(
        &'l mut self,
        reqs: RequestSpan<'r>,
        (start, end): (usize, usize),
    ) -> Learnt<'l, 'r> {
        if !self.decayed {
            self.state = Self::undecayed();
            self.to = match self.training {
                Training::Cumulative => 0,
                Training::Partial => start,
            };
        }
        // A learnt history counts as its decayed request count.
        let len = match (self.decayed, self.training) {
            (true, _) => end - start + self.state.requests() as usize,
            (false, Training::Cumulative) => end,
            (false, Training::Partial) => end - start,
        };
        Learnt {
            learner: self,
            reqs,
            phase: (start, end),
            len,
        }
    }

    /// The boundary at `end` is passed: a decayed state learns the whole phase (whether
    /// or not a plan asked for it) and decays into the next epoch.
    pub(crate) fn passed(&mut self, reqs: RequestSpan<'_>, end: usize) {
        if self.decayed {
            self.learn_to(reqs, end);
            self.state.next_epoch();
        }
    }

    /// Learns the requests up to `upto` (exclusive) not learnt yet.
    fn learn_to(&mut self, reqs: RequestSpan<'_>, upto: usize) {
        assert!(self.parked.is_none(), "a parked state is read back first");
        if upto > self.to {
            self.state.learn(reqs.sub(self.to..upto));
            self.to = upto;
        }
    }

    /// The graph of what was learnt up to `upto`, which must not be before what the
    /// state learnt already (it cannot unlearn). The boundary's `last` graph frees the
    /// training's state before it is planned from: planning and the admission's shadow
    /// replays after it do not hold it beside their own memory.
    fn graph_to(&mut self, reqs: RequestSpan<'_>, upto: usize, last: bool) -> MasterGraph {
        assert!(upto >= self.to, "the learning state cannot unlearn");
        self.learn_to(reqs, upto);
        if last && !self.decayed {
            return std::mem::replace(&mut self.state, Self::undecayed()).into_graph();
        }
        if !last {
            if let Some(graph) = self.parked_graph() {
                return graph;
            }
        }
        self.state.graph()
    }

    /// The state's graph built from the state's own memory, the state written to a
    /// temporary file meanwhile: a trial's graph is built and planned without the state
    /// beside it (at 2·10^7 requests the state is ~300 MB; docs/scale.md). `None` (with
    /// a warning) when the file cannot be made or written: the state stays in memory.
    fn parked_graph(&mut self) -> Option<MasterGraph> {
        match (self.park_file)().and_then(|f| self.state.park(f)) {
            Ok(parked) => {
                self.parked = Some(parked);
                Some(std::mem::replace(&mut self.state, Self::undecayed()).into_graph())
            }
            Err(e) => {
                if !PARK_WARNED.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "reblock: warning: could not write the learning state to a temporary \
                         file ({e}); it stays in memory while trials are planned (set TMPDIR \
                         to a writable directory)"
                    );
                }
                self.park_failure = Some(e);
                None
            }
        }
    }

    /// Reads back a state parked while its trial was planned.
    fn unpark(&mut self) -> Result<(), EvalError> {
        if let Some(parked) = self.parked.take() {
            self.state = parked.restore().map_err(EvalError::LearningFile)?;
        }
        Ok(())
    }
}

/// The training of one boundary's plan.
pub(crate) struct Learnt<'l, 'r> {
    learner: &'l mut Learner,
    reqs: RequestSpan<'r>,
    /// The phase just ended, `start .. end` of `reqs`.
    phase: (usize, usize),
    len: usize,
}

impl Learnt<'_, '_> {
    /// Requests trained on; a learnt history counts as its decayed request count.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The part of the training weight left when the last `without` requests are left out.
    pub(crate) fn share(&self, without: usize) -> f64 {
        (self.len - without) as f64 / self.len.max(1) as f64
    }

    /// `policy`'s plan from this training, and when `trial_without` is given the plan
    /// made leaving out the phase's last `trial_without` requests (the trial of a plan
    /// judged on them), which is learnt first.
    pub(crate) fn plans(
        &mut self,
        policy: &str,
        params: &PlanParams,
        trial_without: Option<usize>,
    ) -> Result<(Placement, PlanCost, Option<Placement>), EvalError> {
        let trial = match trial_without {
            Some(without) => Some(self.plan(policy, params, without, false)?.0),
            None => None,
        };
        let (plan, cost) = self.plan(policy, params, 0, true)?;
        Ok((plan, cost, trial))
    }

    fn plan(
        &mut self,
        policy: &str,
        params: &PlanParams,
        without: usize,
        last: bool,
    ) -> Result<(Placement, PlanCost), EvalError> {
        let (start, end) = self.phase;
        // What a plan reports as its training: the requests trained on, except that a
        // decayed state reports the phase's alone.
        let reported = match (self.learner.decayed, self.learner.training) {
            (false, Training::Cumulative) => end,
            _ => end - start,
        } - without;
        self.learner.unpark()?;
        let (learner, reqs) = (&mut *self.learner, self.reqs);
        planner::plan_from(policy, params, reported, || {
            learner.graph_to(reqs, end - without, last)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_plan::build_graphs;
    use reblock_trace::{Op, Request, RequestLog};

    fn log(n: usize) -> RequestLog {
        let mut log = RequestLog::default();
        for i in 0..n as u64 {
            log.push(Request {
                ts_ns: i,
                pid: Some(1 + (i % 3) as u32),
                command: 0,
                device: 0,
                sector: (i * 7 % 23) * 8,
                // Some zero-length requests: counted as training, never learnt.
                sectors: if i % 11 == 5 { 0 } else { 8 },
                op: Op::Read,
            });
        }
        log
    }

    /// Vertices as (start, sectors, hits), edges as (from, to, weight), and requests.
    type Summary = (Vec<(u64, u32, u64)>, Vec<(u32, u32, u64)>, u64);

    fn summary(g: &MasterGraph) -> Summary {
        let v = g.vertices().iter();
        let v = v.map(|v| (v.extent.start_sector, v.extent.sectors, v.hits));
        (v.collect(), g.edges().collect(), g.requests())
    }

    /// A learning state file that cannot be written (opened read-only).
    fn unwritable() -> io::Result<File> {
        File::open("/dev/null")
    }

    /// Learnt incrementally, boundary after boundary (the trial's graph first, built
    /// while the state waits in its file, or in memory when the file fails), the graphs
    /// are those of the training requests built afresh, as before.
    #[test]
    fn incremental_graphs_equal_graphs_built_afresh() {
        let log = log(300);
        let reqs = log.span();
        for (training, park_file, fails) in [
            (Training::Cumulative, tempfile::tempfile as fn() -> _, false),
            (Training::Partial, tempfile::tempfile, false),
            (Training::Cumulative, unwritable, true),
        ] {
            let mut learner = Learner::new(training, None).unwrap();
            learner.park_file = park_file;
            let mut start = 0;
            for (end, tail) in [(70, 30), (71, 1), (150, 0), (300, 79)] {
                let first = if training == Training::Partial {
                    start
                } else {
                    0
                };
                let b = learner.boundary(reqs, (start, end));
                assert_eq!(b.len(), end - first);
                let trial = b.learner.graph_to(reqs, end - tail, false);
                b.learner.unpark().unwrap();
                let plan = b.learner.graph_to(reqs, end, true);
                let afresh = |to| build_graphs(reqs.sub(first..to));
                assert_eq!(summary(&trial), summary(&afresh(end - tail)));
                assert_eq!(summary(&plan), summary(&afresh(end)));
                learner.passed(reqs, end);
                start = end;
            }
            assert_eq!(learner.park_failure.is_some(), fails);
        }
    }

    /// A decayed state parked for its trial and read back learns on as the state kept in
    /// memory: the same graphs at every boundary, over several epochs.
    #[test]
    fn a_parked_decayed_state_learns_on_as_one_kept_in_memory() {
        let log = log(400);
        let reqs = log.span();
        let mut parked = Learner::new(Training::Cumulative, Some(0.5)).unwrap();
        let mut kept = Learner::new(Training::Cumulative, Some(0.5)).unwrap();
        kept.park_file = unwritable;
        let mut start = 0;
        for (end, tail) in [(90, 40), (200, 3), (310, 100), (400, 50)] {
            let mut graphs = Vec::new();
            for learner in [&mut parked, &mut kept] {
                let b = learner.boundary(reqs, (start, end));
                let trial = b.learner.graph_to(reqs, end - tail, false);
                b.learner.unpark().unwrap();
                let plan = b.learner.graph_to(reqs, end, true);
                graphs.push((summary(&trial), summary(&plan)));
                learner.passed(reqs, end);
            }
            assert_eq!(graphs[0], graphs[1], "boundary at {end}");
            assert!(!graphs[0].1 .0.is_empty());
            start = end;
        }
        assert!(parked.park_failure.is_none() && kept.park_failure.is_some());
    }
}
