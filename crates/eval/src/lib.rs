//! Offline evaluation of layout policies (seed 000 §6): each policy replays the trace on a
//! modelled device with periodic reconfiguration — normal phases N_i at the trace's pace
//! sped up, reconfiguration phases R_i holding the copy I/O at speed 1 — and the busy
//! time, response time, BOPT hit rate, data moved, sequentiality and seek distance of each
//! phase are reported. Beyond the seeds: the degradation guard of seed 001 §5.2.2,
//! reconfiguration on idle time or on a falling hit rate, and sensitivity sweeps (§6.5).
//!
//! The layout decisions are the layout crate's (the indirector, plan diffs) and the plan
//! crate's (graphs, policies); the device models and replay are the device and sim
//! crates'. This crate only sequences them and accounts.

pub mod array_options;
pub mod boundaries;
pub mod config;
pub mod free;
pub mod html;
pub mod layout;
mod learnt;
pub mod online;
pub mod options;
pub mod plan_trace;
pub mod planner;
pub mod ranked;
pub mod replay;
pub mod replicas;
pub mod results;
pub mod run;
pub mod sizing;
pub mod sweep;
pub mod workload;

use std::collections::BTreeMap;

pub use config::{BoptAt, BoptSize, DataArea, EvalConfig, Interval, ParamError, Training, Trigger};
pub use options::{evaluate_trace, evaluation_json, EvalOptions};
pub use plan_trace::{plan_trace, PlanOptions, TracePlan};
pub use results::{
    Admission, Choice, Evaluation, GeometrySummary, PhaseKind, PhaseResult, PolicyResult, SweepRun,
};
pub use sweep::Sweep;

use reblock_trace::{AsRequestLog, RequestLog};

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Param(#[from] ParamError),
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Device(reblock_device::SpecError),
    /// A capture's .meta.json beside the trace that cannot be read (path and why).
    #[error("{0}")]
    Sidecar(String),
    #[error(transparent)]
    FreeSpace(#[from] free::FreeSpaceError),
    #[error("replay: {0}")]
    Sim(#[from] reblock_sim::SimError),
    /// The learning state, moved to a temporary file while a trial was planned, could not
    /// be read back.
    #[error("reading back the learning state from its temporary file: {0}")]
    LearningFile(std::io::Error),
}

/// Progress events: (point label, policy, phase name).
pub type Progress<'a> = &'a mut dyn FnMut(&str, &str, &str);

/// Every policy of `cfg` at one parameter point, and the geometry it used. `requests`:
/// a [`RequestLog`] (a slice or vector of requests is encoded into one first).
pub fn evaluate_point(
    requests: &(impl AsRequestLog + ?Sized),
    cfg: &EvalConfig,
    label: &str,
    progress: Progress,
) -> Result<(BTreeMap<String, PolicyResult>, GeometrySummary), EvalError> {
    cfg.validate()?;
    let capacity = reblock_device::parse_spec(&cfg.device)
        .map_err(EvalError::Device)?
        .array
        .capacity_sectors();
    let log = requests.as_request_log();
    let w = workload::prepare(&log, cfg, capacity)?;
    let runner = run::Runner::new(cfg, &w)?;
    let mut geometry = w.summary.clone();
    if cfg
        .policies
        .iter()
        .any(|p| reblock_plan::by_name(p).is_ok_and(|p| p.capabilities().replicates))
    {
        geometry.free_pages = Some(runner.free_pages());
        geometry.free_space = Some(cfg.free_space.assumption());
    }
    geometry.phase_boundaries = runner.boundaries().cloned();
    let mut out = BTreeMap::new();
    for p in &cfg.policies {
        let r = runner.policy(p, &mut |phase| progress(label, p, phase))?;
        out.insert(p.clone(), r);
    }
    results::relate_to_vanilla(&mut out);
    Ok((out, geometry))
}

/// The base run and, with a sweep, one run per sweep point.
pub fn evaluate(
    requests: &(impl AsRequestLog + ?Sized),
    trace: &str,
    cfg: &EvalConfig,
    sweep: Option<&Sweep>,
    progress: Progress,
) -> Result<Evaluation, EvalError> {
    let requests: &RequestLog = &requests.as_request_log();
    if requests.is_empty() {
        return Err(EvalError::Setup(format!(
            "{trace}: the trace holds no requests"
        )));
    }
    let (policies, geometry) = evaluate_point(requests, cfg, "base", progress)?;
    let mut runs = Vec::new();
    for (param, values) in sweep.map(|s| s.points.as_slice()).unwrap_or(&[]) {
        for v in values {
            let point = sweep::apply(cfg, param, v)?;
            let label = format!("{param}={v}");
            let (policies, _) = evaluate_point(requests, &point, &label, progress)?;
            runs.push(SweepRun {
                parameter: param.clone(),
                value: v.clone(),
                policies,
            });
        }
    }
    Ok(Evaluation {
        trace: trace.to_string(),
        requests: requests.len() as u64,
        config: serde_json::to_value(cfg).expect("the config serializes"),
        geometry,
        policy_order: cfg.policies.clone(),
        policies,
        runs,
    })
}
