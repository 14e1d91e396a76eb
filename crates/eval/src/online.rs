//! The admission rule's predictions for a running server (`serve`): the same candidates,
//! shadow replays and scheduled copy costs as `evaluate`'s reconfigurations
//! ([`crate::run`]), over the server's recent requests, decided by the layout crate's
//! [`Admission::choose`] that `evaluate` uses.

use reblock_layout::admission::{paired_stderr_s, recurrence};
use reblock_layout::{Admission, Choice, Indirector, ScheduleOptions};
use reblock_plan::Placement;
use reblock_trace::Request;

use crate::layout::Layout;
use crate::{replay, EvalError};

/// Predicts, on one device model, what each candidate layout would cost.
#[derive(Clone, Debug)]
pub struct AdmissionModel {
    device: String,
    schedule: ScheduleOptions,
}

/// The requests the decision is judged on, and how they stand for the next phase.
pub struct Backtest<'a> {
    /// Recent requests (FS sectors of the data area) replayed on each candidate.
    pub tail: &'a [Request],
    /// The requests before them that the trial was planned from: how much of the tail
    /// they had seen is the evidence that the workload recurs
    /// ([`Admission::recurrence`]).
    pub before: &'a [Request],
    /// Next phase's expected length over the tail's (predictions are scaled by it).
    pub scale: f64,
}

/// Re-plans ahead a layout installed online is counted over at most (each discounted by
/// the workload's recurrence, see [`Admission::horizon`]): a server does not know how long
/// it will run, and a later re-plan replaces the layout anyway.
pub const ONLINE_PHASES_AHEAD: u64 = 3;

impl AdmissionModel {
    /// `device`: a spec as `evaluate --device` takes it (e.g. `hdd:wd2500aaks`).
    pub fn new(device: &str) -> Result<AdmissionModel, EvalError> {
        Ok(AdmissionModel {
            device: device.to_string(),
            schedule: ScheduleOptions {
                read_gap_sectors: replay::read_through_gap_sectors(device)?,
                ..ScheduleOptions::default()
            },
        })
    }

    pub fn device(&self) -> &str {
        &self.device
    }

    /// The admission decision for replacing the read cache of `current` with `plan`:
    /// `trial` is the policy's plan made without the tail (as the plan will meet
    /// requests it was not made from), judged on the tail; `plan`'s own copies are the
    /// plan's cost. Per-group admission: leading shares of the plan (in plan order)
    /// compete as `evaluate`'s do; on [`Choice::Plan`] the caller installs
    /// `plan.leading(admission.plan_share)`.
    pub fn admit(
        &self,
        current: &Indirector,
        plan: &Placement,
        trial: &Placement,
        b: &Backtest,
    ) -> Result<Admission, EvalError> {
        let now = Layout::Bopt(current.clone());
        let shadow = |l: Layout| replay::shadow_profile(&self.device, 1.0, b.tail, l);
        let plain = shadow(Layout::Home(*current.geometry()))?;
        let keep = shadow(now.clone())?;
        let mut home = plan.clone();
        home.ranges.clear();
        let extent = |r: &Request| (r.sector, r.sectors);
        let page_sectors = current.geometry().page.sectors_u32();
        let recurrence = recurrence(
            b.before.iter().map(extent),
            b.tail.iter().map(extent),
            page_sectors,
        );
        let keep_only = Admission {
            choice: Choice::Keep,
            predicted_plan_busy_s: keep.busy_s * b.scale,
            predicted_keep_busy_s: keep.busy_s * b.scale,
            predicted_plain_busy_s: plain.busy_s * b.scale,
            plan_copy_busy_s: 0.0,
            home_copy_busy_s: self.copy_busy_s(&now, &home)?,
            horizon_phases: Admission::horizon(ONLINE_PHASES_AHEAD, recurrence),
            plan_saving_stderr_s: 0.0,
            plain_saving_stderr_s: paired_stderr_s(&plain.service_ns, &keep.service_ns) * b.scale,
            plan_share: 0.0,
            plan_trust: 1.0,
            recurrence,
            backtest_requests: b.tail.len() as u64,
            next_phase_share: 1.0,
        };
        let mut shares = Vec::new();
        for share in Admission::PLAN_SHARES {
            let mut tried = now.clone();
            tried.reconfigure(&trial.leading(share), &self.schedule)?;
            let tried = shadow(tried)?;
            shares.push(Admission {
                predicted_plan_busy_s: tried.busy_s * b.scale,
                plan_copy_busy_s: self.copy_busy_s(&now, &plan.leading(share))?,
                plan_saving_stderr_s: paired_stderr_s(&tried.service_ns, &keep.service_ns)
                    * b.scale,
                plan_share: share,
                ..keep_only
            });
        }
        let best = Admission::best_share(&shares).unwrap_or(0);
        Ok(shares.get(best).copied().unwrap_or(keep_only).decided())
    }

    /// Busy seconds of the scheduled copies that turn `layout` into `placement`'s.
    fn copy_busy_s(&self, layout: &Layout, placement: &Placement) -> Result<f64, EvalError> {
        let mut l = layout.clone();
        let io = l.reconfigure(placement, &self.schedule)?;
        Ok(replay::copies(&self.device, &io.requests)?
            .summary
            .busy_time_s)
    }
}
