//! The JSON contract of `reblock evaluate --json` (kept here so later tools, such as the
//! parallel-array optimizer, read and write the same shape).
//!
//! One [`Evaluation`]: `policies` maps each policy name to a [`PolicyResult`]; with a
//! sweep, `runs` holds one [`SweepRun`] per parameter point, each with its own
//! `policies` map. Normal-phase figures are the workload's own requests; reconfiguration
//! phases (seed 000 §6: R_i) hold only the copy I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use reblock_analyze::figures::LogHistogram;

use crate::planner::PlanCost;
pub use crate::replay::AccessTime;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Normal,
    Reconfig,
}

/// One phase: N_i (normal) or R_i (reconfiguration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// "N0", "R1", "N1", ...
    pub name: String,
    pub kind: PhaseKind,
    /// Device busy time (sum of service times, idle excluded), all of the phase's I/O.
    pub busy_time_s: f64,
    /// Energy of the phase's devices over its makespan (idle included), from the device
    /// model's power states; none when the model has no power figures.
    #[serde(default)]
    pub energy_j: Option<f64>,
    /// The busy time as seek + rotation + transfer (+ other), all of the phase's I/O.
    #[serde(default)]
    pub access_time: AccessTime,
    /// Of `busy_time_s`, the time spent writing FS2's replicas (their cached writes'
    /// write-back included), in a normal phase: reconfiguration, counted in the policy's
    /// `reconfig_busy_time_s`.
    #[serde(default)]
    pub replica_busy_time_s: f64,
    /// Of `busy_time_s`, the guard's copies in a normal phase (dirty read-cache pages
    /// written home, a permutation sent home): reconfiguration too.
    #[serde(default)]
    pub copy_busy_time_s: f64,
    /// Of `energy_j`, the reconfiguration's: the whole of a reconfiguration phase's; in
    /// a normal phase, what its replica writes and copies drew above idle power.
    #[serde(default)]
    pub reconfig_energy_j: Option<f64>,
    /// FS2's T_A = T_s + T_r + T_t (+ other) of the workload's own requests alone
    /// (zero in a reconfiguration phase): its parts add up to `busy_time_s` less
    /// `replica_busy_time_s` and `copy_busy_time_s`.
    #[serde(default)]
    pub client_access_time: AccessTime,
    /// Logical requests: the workload's (normal) or the copy I/Os (reconfiguration).
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// Device I/Os after splitting and merging.
    pub ios: u64,
    /// Fraction of requests served entirely by the optimized layout (normal phases).
    pub hit_rate: f64,
    pub mean_response_ms: f64,
    pub read_mean_response_ms: Option<f64>,
    pub write_mean_response_ms: Option<f64>,
    pub non_sequential_fraction: f64,
    pub mean_seek_cylinders: f64,
    /// Bytes copied (reconfiguration phases).
    pub bytes_moved: u64,
    /// Pages copied by the plan diff, and to empty the write buffer.
    pub diff_pages: u64,
    pub destage_pages: u64,
    /// The plan made for this reconfiguration.
    pub plan: Option<PlanCost>,
    /// Index range of the trace's requests in this normal phase.
    pub first_request: u64,
    pub end_request: u64,
    /// Guard epochs in this phase and how many of them ran guarded (seed 001 §5.2.2).
    pub guard_epochs: u64,
    pub guarded_epochs: u64,
    /// What the admission rule decided at this reconfiguration, and from which
    /// predictions (with the guard on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// Response times (ns) of this normal phase's requests (the policy's
    /// `response` summarizes them).
    #[serde(skip)]
    pub response_ns: LogHistogram,
}

/// The admission rule lives in the layout crate, shared with the online engine.
pub use reblock_layout::admission::{Admission, Choice};

/// Response times of the normal phases' requests: percentiles and the CDF the report
/// draws, in milliseconds (each value a bucket's upper end, within about 9 %).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseSummary {
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// (response ms, share of requests at or below).
    pub cdf_ms: Vec<(f64, f64)>,
}

impl ResponseSummary {
    pub fn from_histogram(h: &LogHistogram) -> ResponseSummary {
        let ms = |ns: f64| ns / 1e6;
        ResponseSummary {
            p50_ms: h.quantile(0.50).map(ms),
            p95_ms: h.quantile(0.95).map(ms),
            p99_ms: h.quantile(0.99).map(ms),
            cdf_ms: h.cdf().into_iter().map(|(x, f)| (ms(x), f)).collect(),
        }
    }
}

/// One policy's run over the whole trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// normal + reconfig: the busy time of every phase.
    pub busy_time_s: f64,
    /// The workload's own requests: the normal phases less their replica writes and
    /// the guard's copies.
    pub normal_busy_time_s: f64,
    /// The reconfiguration phases' copies, plus the replica writes and the guard's copies
    /// made inside normal phases.
    pub reconfig_busy_time_s: f64,
    /// Of `reconfig_busy_time_s`, FS2's replica writes (made from the application's
    /// reads in normal phases).
    #[serde(default)]
    pub replica_busy_time_s: f64,
    /// Energy over all phases, normal and reconfiguration (none when any phase has none).
    #[serde(default)]
    pub energy_j: Option<f64>,
    /// Of `energy_j`, the reconfiguration's (see [`PhaseResult::reconfig_energy_j`]).
    #[serde(default)]
    pub reconfig_energy_j: Option<f64>,
    /// Busy time over all phases as seek + rotation + transfer (+ other): all I/O,
    /// copies and replica writes included; adds up to `busy_time_s`.
    #[serde(default)]
    pub access_time: AccessTime,
    /// FS2's T_A = T_s + T_r + T_t (+ other) of the workload's own requests in the
    /// normal phases: adds up to `normal_busy_time_s`.
    #[serde(default)]
    pub client_access_time: AccessTime,
    /// Total busy time (normal and reconfiguration phases) over vanilla's: the headline
    /// (when vanilla was evaluated too).
    #[serde(default)]
    pub busy_vs_vanilla: Option<f64>,
    /// Normal-phase busy time over vanilla's (when vanilla was evaluated too).
    pub normal_busy_vs_vanilla: Option<f64>,
    /// Over the normal phases' requests.
    pub mean_response_ms: f64,
    pub read_mean_response_ms: Option<f64>,
    pub write_mean_response_ms: Option<f64>,
    pub hit_rate: f64,
    pub bytes_moved: u64,
    /// Over the normal phases' device I/Os.
    pub non_sequential_fraction: f64,
    pub mean_seek_cylinders: f64,
    pub reconfigurations: u64,
    pub planning_cpu_s: f64,
    pub planning_peak_graph_bytes: u64,
    pub guarded_epochs: u64,
    pub phases: Vec<PhaseResult>,
    /// Response times over the normal phases.
    #[serde(default)]
    pub response: ResponseSummary,
}

impl PolicyResult {
    /// Totals over the phases.
    pub fn from_phases(phases: Vec<PhaseResult>) -> PolicyResult {
        let normal: Vec<&PhaseResult> = phases
            .iter()
            .filter(|p| p.kind == PhaseKind::Normal)
            .collect();
        // Folded from +0.0: `Sum for f64` starts at -0.0, so a policy with no
        // reconfiguration phase would print `-0.000` reconfiguration seconds.
        let sum = |f: fn(&PhaseResult) -> f64, kind| {
            phases
                .iter()
                .filter(|p| p.kind == kind)
                .map(f)
                .fold(0.0, |a, b| a + b)
        };
        let normal_busy = sum(|p| p.busy_time_s, PhaseKind::Normal);
        let reconfig_busy = sum(|p| p.busy_time_s, PhaseKind::Reconfig);
        // The total is summed as it always was, so it stays the same to the last digit;
        // the work inside normal phases that is reconfiguration moves between the two.
        let moved = sum(
            |p| p.replica_busy_time_s + p.copy_busy_time_s,
            PhaseKind::Normal,
        );
        let replica_busy = sum(|p| p.replica_busy_time_s, PhaseKind::Normal);
        let requests: u64 = normal.iter().map(|p| p.requests).sum();
        let ios: u64 = normal.iter().map(|p| p.ios).sum();
        let by = |w: fn(&PhaseResult) -> f64, v: fn(&PhaseResult) -> f64| {
            weighted(normal.iter().map(|p| (w(p), v(p))))
        };
        let opt_by = |w: fn(&PhaseResult) -> u64, v: fn(&PhaseResult) -> Option<f64>| {
            let pts: Vec<(f64, f64)> = normal
                .iter()
                .filter_map(|p| v(p).map(|x| (w(p) as f64, x)))
                .collect();
            (!pts.is_empty()).then(|| weighted(pts.into_iter()))
        };
        let plans: Vec<&PlanCost> = phases.iter().filter_map(|p| p.plan.as_ref()).collect();
        let mut response_ns = LogHistogram::default();
        for p in &normal {
            response_ns.merge(&p.response_ns);
        }
        PolicyResult {
            response: ResponseSummary::from_histogram(&response_ns),
            busy_time_s: normal_busy + reconfig_busy,
            normal_busy_time_s: if moved > 0.0 {
                normal_busy - moved
            } else {
                normal_busy
            },
            reconfig_busy_time_s: if moved > 0.0 {
                reconfig_busy + moved
            } else {
                reconfig_busy
            },
            replica_busy_time_s: replica_busy,
            energy_j: phases.iter().map(|p| p.energy_j).sum::<Option<f64>>(),
            reconfig_energy_j: phases
                .iter()
                .map(|p| p.reconfig_energy_j)
                .sum::<Option<f64>>(),
            access_time: phases
                .iter()
                .fold(AccessTime::default(), |a, p| a.plus(&p.access_time)),
            client_access_time: phases
                .iter()
                .fold(AccessTime::default(), |a, p| a.plus(&p.client_access_time)),
            busy_vs_vanilla: None,
            normal_busy_vs_vanilla: None,
            mean_response_ms: by(|p| p.requests as f64, |p| p.mean_response_ms),
            read_mean_response_ms: opt_by(|p| p.reads, |p| p.read_mean_response_ms),
            write_mean_response_ms: opt_by(|p| p.writes, |p| p.write_mean_response_ms),
            hit_rate: if requests == 0 {
                0.0
            } else {
                by(|p| p.requests as f64, |p| p.hit_rate)
            },
            bytes_moved: phases.iter().map(|p| p.bytes_moved).sum(),
            non_sequential_fraction: by(|p| p.ios as f64, |p| p.non_sequential_fraction),
            mean_seek_cylinders: if ios == 0 {
                0.0
            } else {
                by(|p| p.ios as f64, |p| p.mean_seek_cylinders)
            },
            reconfigurations: phases
                .iter()
                .filter(|p| p.kind == PhaseKind::Reconfig)
                .count() as u64,
            planning_cpu_s: plans.iter().map(|c| c.cpu_s).sum::<f64>() + 0.0,
            planning_peak_graph_bytes: plans.iter().map(|c| c.graph_bytes).max().unwrap_or(0),
            guarded_epochs: phases.iter().map(|p| p.guarded_epochs).sum(),
            phases,
        }
    }
}

/// Weighted mean of (weight, value) pairs; 0 without weight.
fn weighted(pts: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut w, mut s) = (0.0, 0.0);
    for (wi, v) in pts {
        w += wi;
        s += wi * v;
    }
    if w > 0.0 {
        s / w
    } else {
        0.0
    }
}

/// One point of a sensitivity sweep (seed 000 §6.5): one parameter changed from the base.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRun {
    /// `bopt-size`, `write-buffer` or `interval`.
    pub parameter: String,
    pub value: String,
    pub policies: BTreeMap<String, PolicyResult>,
}

/// The whole output of one evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub trace: String,
    pub requests: u64,
    /// The parameters of the base run, as given.
    pub config: serde_json::Value,
    /// Sizes the run derived: data area, BOPT, read cache and write buffer in pages.
    pub geometry: GeometrySummary,
    /// Policies in the order they were asked for.
    pub policy_order: Vec<String>,
    pub policies: BTreeMap<String, PolicyResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<SweepRun>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GeometrySummary {
    pub device_capacity_sectors: u64,
    pub data_sectors: u64,
    pub page_bytes: u64,
    pub bopt_pages: u64,
    pub read_cache_pages: u64,
    pub write_buffer_pages: u64,
    pub segment_pages: u64,
    pub bopt_start_sector: u64,
    /// Requests whose address was folded into the data area (--wrap).
    pub wrapped_requests: u64,
    /// Data-area pages taken as free for FS2's replicas, and where that came from (an
    /// assumption unless read from the file system); present when a policy replicates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_pages: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_space: Option<String>,
    /// Where the reconfigurations fell and by which rule (a count `--interval` with the
    /// `auto` or `interval` trigger; other triggers end phases per policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_boundaries: Option<crate::boundaries::PhaseBoundaries>,
}

/// Fills `busy_vs_vanilla` and `normal_busy_vs_vanilla` for every policy when vanilla is present.
pub fn relate_to_vanilla(policies: &mut BTreeMap<String, PolicyResult>) {
    let Some((base, total)) = policies
        .get("vanilla")
        .map(|v| (v.normal_busy_time_s, v.busy_time_s))
    else {
        return;
    };
    for r in policies.values_mut() {
        r.normal_busy_vs_vanilla = (base > 0.0).then(|| r.normal_busy_time_s / base);
        r.busy_vs_vanilla = (total > 0.0).then(|| r.busy_time_s / total);
    }
}

#[cfg(test)]
mod admission_tests {
    use super::*;

    fn admission(keep: f64, plan: f64, copy: f64, horizon: f64) -> Admission {
        Admission {
            choice: Choice::Keep,
            predicted_plan_busy_s: plan,
            predicted_keep_busy_s: keep,
            predicted_plain_busy_s: keep,
            plan_copy_busy_s: copy,
            home_copy_busy_s: 0.1,
            keep_copy_busy_s: 0.0,
            horizon_phases: horizon,
            plan_saving_stderr_s: 0.0,
            plain_saving_stderr_s: 0.0,
            plan_share: 1.0,
            plan_trust: 1.0,
            recurrence: 0.5,
            backtest_requests: 100,
            next_phase_share: 1.0,
        }
    }

    #[test]
    fn horizon_counts_the_phases_left_as_far_as_the_workload_recurs() {
        assert_eq!(Admission::horizon(0.0, 0.5), 1.0);
        assert_eq!(Admission::horizon(1.0, 0.9), 1.0);
        assert_eq!(Admission::horizon(3.0, 0.5), 1.75);
        assert_eq!(Admission::horizon(40.0, 1.0), 40.0);
        // Nothing seen before: the next phase only.
        assert_eq!(Admission::horizon(40.0, 0.0), 1.0);
        // At most 1 / (1 - r) however many phases are left.
        assert!((Admission::horizon(10_000.0, 0.75) - 4.0).abs() < 1e-9);
        // Half a phase more counts half the next term: 1 + 0.5 + 0.25 / 2.
        assert_eq!(Admission::horizon(2.5, 0.5), 1.625);
    }

    #[test]
    fn a_large_saving_pays_its_copies_over_the_horizon() {
        // The start-up capture's second boundary: 2.1 s saved per phase, 3.1 s of copies.
        assert_eq!(admission(6.86, 4.73, 3.08, 1.75).choose(), Choice::Plan);
        // One phase alone does not pay for them.
        assert_eq!(admission(6.86, 4.73, 3.08, 1.0).choose(), Choice::Keep);
    }

    #[test]
    fn a_small_saving_counts_one_phase_only() {
        // 5% predicted: over 1.75 phases it would pay, over the one phase it does not.
        assert_eq!(admission(2.52, 2.40, 0.17, 1.75).choose(), Choice::Keep);
        assert_eq!(admission(2.52, 2.40, 0.10, 1.75).choose(), Choice::Plan);
    }

    #[test]
    fn a_tie_keeps_what_is_in_place() {
        assert_eq!(admission(5.0, 5.0, 0.0, 1.75).choose(), Choice::Keep);
    }
}
