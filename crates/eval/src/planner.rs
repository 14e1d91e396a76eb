//! Planning one layout from training requests: graph building (seed 000 §4.2) and a
//! policy (seed 000 §4.3), with the cost DESIGN.md "Metrics" asks for (CPU seconds and
//! memory of analyze + plan).

use std::time::Instant;

use reblock_plan::{build_graphs, by_name, MasterGraph, Placement, PlanParams};
use reblock_trace::Request;
use serde::{Deserialize, Serialize};

use crate::EvalError;

/// What planning cost and produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanCost {
    pub training_requests: u64,
    pub graph_vertices: u64,
    pub graph_edges: u64,
    pub pages_placed: u64,
    /// Placement ranges (runs of consecutive pages), a proxy for groups laid out.
    pub ranges: u64,
    /// CPU time of graph building and planning on this thread.
    pub cpu_s: f64,
    pub wall_s: f64,
    /// Heap held by the master graph, the planner's largest structure.
    pub graph_bytes: u64,
    /// The process's peak resident set so far (includes everything else it holds).
    pub peak_rss_bytes: u64,
}

/// Builds the graphs of `training` and runs `policy` with `params`.
pub fn plan(
    policy: &str,
    training: &[Request],
    params: &PlanParams,
) -> Result<(Placement, PlanCost), EvalError> {
    plan_from(policy, params, training.len(), || {
        build_graphs(training.iter().copied())
    })
}

/// Runs `policy` with `params` on the graph `graph` makes (from `training_requests`
/// requests), its cost counted with the plan's.
pub fn plan_from(
    policy: &str,
    params: &PlanParams,
    training_requests: usize,
    graph: impl FnOnce() -> MasterGraph,
) -> Result<(Placement, PlanCost), EvalError> {
    let p = by_name(policy).map_err(|e| EvalError::Setup(e.to_string()))?;
    let (cpu0, wall0) = (thread_cpu_s(), Instant::now());
    let graph = graph();
    let placement = p.plan(&graph, params);
    let cost = PlanCost {
        training_requests: training_requests as u64,
        graph_vertices: graph.len() as u64,
        graph_edges: graph.edge_count() as u64,
        pages_placed: placement.pages_with_replicas(),
        ranges: placement.ranges.len() as u64,
        cpu_s: thread_cpu_s() - cpu0,
        wall_s: wall0.elapsed().as_secs_f64(),
        graph_bytes: graph.heap_bytes() as u64,
        peak_rss_bytes: peak_rss_bytes(),
    };
    Ok((placement, cost))
}

/// CPU seconds this thread has used.
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Peak resident set size of this process in bytes (0 where unknown).
pub fn peak_rss_bytes() -> u64 {
    // SAFETY: getrusage fills a zeroed rusage through a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return 0;
    }
    // Linux reports kilobytes.
    (ru.ru_maxrss.max(0) as u64) * 1024
}
