//! One plan from a whole trace, as `reblock plan` and the Python package both make it:
//! the settings spelled as the command line's flags ([`PlanOptions`]), the BOPT they
//! describe at the end of the trace's address range, and the summary `--json` prints.

use std::num::NonZeroU32;

use reblock_layout::{BoptConfig, BoptPosition, Geometry};
use reblock_plan::{Placement, PlanParams, TargetSpace};
use reblock_trace::Request;
use serde::Serialize;

use crate::config::{bad, parse_fraction, parse_size_bytes};
use crate::planner::{self, PlanCost};
use crate::EvalError;

/// The plan's settings as the command line spells them; [`Default`] is the command
/// line's.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanOptions {
    pub policy: String,
    /// Size of the BOPT (`64MiB`, `1G`).
    pub bopt_size: String,
    /// Share of the BOPT given to the write buffer (0..1).
    pub write_buffer: String,
    pub page_size: u32,
    pub min_edge_weight: u64,
    pub k_window: usize,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            policy: "borg".into(),
            bopt_size: "64MiB".into(),
            write_buffer: "0.2".into(),
            page_size: 4096,
            min_edge_weight: 2,
            k_window: 0,
        }
    }
}

/// A plan and what it cost.
pub struct TracePlan {
    /// The policy as the options named it.
    pub policy: String,
    pub placement: Placement,
    pub cost: PlanCost,
    /// The BOPT geometry the plan was sized for.
    pub geometry: Geometry,
}

/// The summary `reblock plan --json` prints.
#[derive(Serialize)]
pub struct PlanSummary<'a> {
    pub trace: String,
    pub policy: &'a str,
    pub read_cache_pages: u64,
    #[serde(flatten)]
    pub cost: &'a PlanCost,
    /// Where the plan was written, if it was.
    pub out: Option<String>,
}

impl PlanOptions {
    /// Checks the settings before a trace is read: the errors [`plan_trace`] would give.
    pub fn check(&self) -> Result<(), EvalError> {
        reblock_plan::by_name(&self.policy).map_err(|e| EvalError::Setup(e.to_string()))?;
        self.setup(u64::from(self.page_size / 512).max(1) * 1024)
            .map(|_| ())
    }

    /// The BOPT geometry for a trace reaching `data_sectors`, and the planner's
    /// parameters.
    fn setup(&self, data_sectors: u64) -> Result<(Geometry, PlanParams), EvalError> {
        let Some(page_sectors) =
            NonZeroU32::new(self.page_size / 512).filter(|_| self.page_size.is_multiple_of(512))
        else {
            let why = format!("{} is not a positive multiple of 512", self.page_size);
            return Err(bad("page-size", why).into());
        };
        let bopt_bytes = parse_size_bytes("bopt-size", &self.bopt_size)?;
        let wb = parse_fraction("write-buffer", &self.write_buffer)?;
        let (bopt_pages, seg) = crate::workload::bopt_pages(bopt_bytes, page_sectors.get());
        let geo = Geometry::new(&BoptConfig {
            page_sectors: page_sectors.get(),
            data_sectors,
            bopt_pages: bopt_pages as u32,
            segment_pages: seg as u32,
            write_buffer_fraction: wb,
            position: BoptPosition::End,
            meta_sectors: 0,
        })
        .map_err(|e| EvalError::Setup(format!("BOPT geometry: {e}")))?;
        let params = PlanParams {
            page_sectors,
            read_cache_pages: Some(u64::from(geo.read_cache_pages)),
            min_edge_weight: self.min_edge_weight,
            k_window: self.k_window,
        };
        Ok((geo, params))
    }
}

/// Plans the requests of the trace `name` (one device's) with `opts`: the BOPT at the
/// end of the trace's address range.
pub fn plan_trace(
    requests: &[Request],
    name: &str,
    opts: &PlanOptions,
) -> Result<TracePlan, EvalError> {
    reblock_sim::require_single_device(requests.iter().map(|r| r.device))
        .map_err(|e| EvalError::Setup(e.to_string()))?;
    if requests.is_empty() {
        return Err(EvalError::Setup(format!(
            "{name}: the trace holds no requests"
        )));
    }
    let ps = u64::from(opts.page_size / 512).max(1);
    let trace_end = requests.iter().map(|r| r.end_sector()).max().unwrap_or(0);
    let (geometry, params) = opts.setup(trace_end.div_ceil(ps) * ps)?;
    let (placement, cost) = planner::plan(&opts.policy, requests, &params)?;
    Ok(TracePlan {
        policy: opts.policy.clone(),
        placement,
        cost,
        geometry,
    })
}

impl TracePlan {
    /// The plan file's text: plan.json (docs/layout.md) for a read-cache plan, checked
    /// against the geometry; for a data-area permutation (dlr-frag), the placement itself.
    pub fn file_text(&self) -> Result<String, EvalError> {
        if self.placement.space != TargetSpace::ReadCache {
            let text = serde_json::to_string_pretty(&self.placement).expect("serializes");
            return Ok(text);
        }
        let plan = crate::layout::to_layout_plan(&self.placement);
        plan.validate(&self.geometry)
            .map_err(|e| EvalError::Setup(format!("the planned layout does not fit: {e}")))?;
        Ok(plan.to_json())
    }

    /// The summary of this plan of `trace`, written to `out` if it was.
    pub fn summary<'a>(&'a self, trace: String, out: Option<String>) -> PlanSummary<'a> {
        PlanSummary {
            trace,
            policy: &self.policy,
            read_cache_pages: u64::from(self.geometry.read_cache_pages),
            cost: &self.cost,
            out,
        }
    }
}
