//! What `reblock evaluate --array` reports, in the shape of the evaluate command's JSON:
//! a list of `runs`, each with a `policies` object mapping a policy name to its figures.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::PlanStats;

/// One policy's figures on the testing part of the trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    pub requests: u64,
    pub mean_response_ms: f64,
    pub read_mean_response_ms: Option<f64>,
    pub write_mean_response_ms: Option<f64>,
    pub p95_response_ms: f64,
    pub busy_time_s: f64,
    /// Bytes the reorganization copied between disks before the test (0 for static).
    pub bytes_moved: u64,
    /// The plan behind the placement (absent for static).
    pub plan: Option<PlanStats>,
}

/// One (alpha, support) point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrayRun {
    /// Skew of the initial Zipf-like placement.
    pub alpha: f64,
    /// Minimum support of the mined pairs.
    pub support: u32,
    pub policies: BTreeMap<String, PolicyResult>,
}

/// A whole array evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrayEvalOutput {
    pub trace: String,
    /// The replayed array, e.g. `place:14xssd:k9xxg08uxm:block=1`.
    pub array: String,
    pub disks: usize,
    pub block_bytes: u64,
    pub requests: usize,
    pub train_requests: usize,
    pub test_requests: usize,
    pub training_sessions: u64,
    /// Distinct block pairs counted in training, before support (with `--pairs`: the
    /// pairs the file lists).
    pub distinct_pairs: usize,
    /// The pairs file the optimizer used instead of mining (`--pairs`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs_file: Option<String>,
    pub runs: Vec<ArrayRun>,
}

/// Improvement of `policy` over `base` in percent: how much faster, `base / policy - 1`
/// (the seed's "+170%" means 2.7 times faster).
pub fn improvement_pct(base: f64, policy: f64) -> Option<f64> {
    (policy > 0.0 && base.is_finite()).then(|| (base / policy - 1.0) * 100.0)
}

/// Overall, read and write improvement of `policy` over `static` in one run.
pub fn run_improvements(run: &ArrayRun, policy: &str) -> Option<[Option<f64>; 3]> {
    let (s, p) = (run.policies.get("static")?, run.policies.get(policy)?);
    let both = |a: Option<f64>, b: Option<f64>| improvement_pct(a?, b?);
    Some([
        improvement_pct(s.mean_response_ms, p.mean_response_ms),
        both(s.read_mean_response_ms, p.read_mean_response_ms),
        both(s.write_mean_response_ms, p.write_mean_response_ms),
    ])
}

/// Mean of the values present.
pub fn mean(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for v in values.into_iter().flatten() {
        sum += v;
        n += 1;
    }
    (n > 0).then(|| sum / n as f64)
}
