//! The admission rule's predictions for a running server (`serve`): the same candidates,
//! shadow replays and scheduled copy costs as `evaluate`'s reconfigurations
//! ([`crate::run`]), over the server's recent requests, decided by the layout crate's
//! [`Admission::choose`] that `evaluate` uses.

use reblock_layout::admission::{paired_block_stderr_s, recurrence};
use reblock_layout::{Admission, Choice, Indirector, ScheduleOptions};
use reblock_plan::{Placement, PlanParams};
use reblock_trace::Request;

use crate::layout::Layout;
use crate::replay::Profile;
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
    /// Requests served before `before` that the plan did not learn from anew (a server's
    /// older history): what they touched counts as seen too. A start-up's day repeats the
    /// day before it, not its own first hours, so judged on `before` alone (the spell since
    /// the last plan) a recurring workload looked new (a 5-day capture: 63% instead of
    /// nearly all, and every plan refused).
    pub history: &'a [Request],
    /// Next phase's expected length over the tail's (predictions are scaled by it).
    pub scale: f64,
}

/// Re-plans ahead a layout installed online is counted over at most (each discounted by
/// the workload's recurrence, see [`Admission::horizon`]): a server does not know how long
/// it will run, and a later re-plan replaces the layout anyway.
pub const ONLINE_PHASES_AHEAD: u64 = 3;

/// The parameters of a plan tried on a backtest, made from the `share` of the training
/// weight before it, and of the plan placed after it: `base`'s edge-weight floor scaled
/// down with `share` (at least 1), so that a transition seen once in each of two days is
/// kept by both (with the full floor, the start-up capture's first trial, one day of
/// training, placed nothing). The plan placed takes the same floor: made with the full
/// one, it placed half of what its trial was judged with at the capture's first boundary
/// (a trial predicted 4.26 s against 9.76 s kept; the plan placed reached 6.86 s against
/// 9.38 s, its next phase's hit rate 37%), and the rest waited for a second round of
/// copies. `evaluate` and `serve` both plan with it.
pub fn trial_params(base: PlanParams, share: f64) -> PlanParams {
    let floor = (base.min_edge_weight as f64 * share).round() as u64;
    PlanParams {
        min_edge_weight: floor.max(1),
        ..base
    }
}

/// The evidence a backtest gives before any plan is tried, as `evaluate` and `serve`
/// both weigh it: the layout in place (`keep`) and the plain layout (`plain`) replayed
/// on the `tail_len` requests of the backtest, scaled by `scale` to the next phase; the
/// copies home cost; what keeping owes once (`keep_copy_busy_s`: FS2 replicas reserved
/// but unwritten, see [`Admission::keep_copy_busy_s`]); the `phases_left` and the backtest's `recurrence`
/// ([`tail_recurrence`]), which set the horizon and the drift ([`Admission::horizon`],
/// [`Admission::drift`]); the policy's `trust` ([`Admission::plan_trust`]). The plan
/// candidate is still keeping; [`with_trial`] puts a plan's trial in.
pub(crate) fn unplanned(
    (keep, plain): (&Profile, &Profile),
    (tail_len, recurrence): (usize, f64),
    (scale, phases_left): (f64, f64),
    (home_copy_busy_s, keep_copy_busy_s, trust): (f64, f64, f64),
) -> Admission {
    let (next_phase_share, per_phase) = Admission::drift(recurrence, scale);
    Admission {
        choice: Choice::Keep,
        predicted_plan_busy_s: keep.busy_s * scale,
        predicted_keep_busy_s: keep.busy_s * scale,
        predicted_plain_busy_s: plain.busy_s * scale,
        plan_copy_busy_s: 0.0,
        home_copy_busy_s,
        keep_copy_busy_s,
        horizon_phases: Admission::horizon(phases_left, per_phase),
        plan_saving_stderr_s: 0.0,
        plain_saving_stderr_s: paired_block_stderr_s(
            &plain.service_blocks_ns,
            &keep.service_blocks_ns,
        ) * scale,
        plan_share: 0.0,
        plan_trust: trust,
        recurrence,
        backtest_requests: tail_len as u64,
        next_phase_share,
    }
}

/// [`Admission::recurrence`] of the backtest `tail` over the requests `before` it: the
/// one reading of requests into extents for `serve` (slices) and `evaluate` (spans of its
/// request log).
pub(crate) fn tail_recurrence<T, B>(
    tail: impl IntoIterator<Item = T>,
    before: impl IntoIterator<Item = B>,
    page_sectors: u32,
) -> f64
where
    T: std::borrow::Borrow<Request>,
    B: std::borrow::Borrow<Request>,
{
    recurrence(
        before.into_iter().map(|r| extent(r.borrow())),
        tail.into_iter().map(|r| extent(r.borrow())),
        page_sectors,
    )
}

fn extent(r: &Request) -> (u64, u32) {
    (r.sector, r.sectors)
}

/// `unplanned` with a plan's trial (`tried`, replayed on the same tail as `keep`, scaled
/// by the same `scale`) as the plan candidate: `share` of the plan's pages, `copy_busy_s`
/// to put them in place. `paired`: whether `tried`'s requests pair with `keep`'s, so that
/// their spread measures doubt in the saving. An FS2 trial replayed after a first pass
/// that wrote its replicas does not pair (the first pass left the drive's arm and cache
/// elsewhere): on a 16-page read loop its spread put ±0.059 s on a 0.104 s saving that
/// every later phase then realized.
pub(crate) fn with_trial(
    unplanned: &Admission,
    (keep, tried, scale): (&Profile, &Profile, f64),
    (share, copy_busy_s): (f64, f64),
    paired: bool,
) -> Admission {
    let stderr_s = match paired {
        true => paired_block_stderr_s(&tried.service_blocks_ns, &keep.service_blocks_ns) * scale,
        false => 0.0,
    };
    Admission {
        predicted_plan_busy_s: tried.busy_s * scale,
        plan_copy_busy_s: copy_busy_s,
        plan_saving_stderr_s: stderr_s,
        plan_share: share,
        ..*unplanned
    }
}

/// [`Admission::best_part`] of a plan's parts, largest first, whose trials `tried`
/// (each with whether it pairs with the others' requests, as for [`with_trial`]) were
/// replayed on the same backtest and scaled by `scale`: the doubt between two parts is
/// the standard error of their trials' difference over the horizon (0 when one does not
/// pair). `evaluate` and `serve` both pick with it.
pub(crate) fn best_part(
    shares: &[Admission],
    tried: &[(Profile, bool)],
    scale: f64,
) -> Option<usize> {
    Admission::best_part(shares, |i, j| match (&tried[i], &tried[j]) {
        ((a, true), (b, true)) => {
            let per_phase = paired_block_stderr_s(&a.service_blocks_ns, &b.service_blocks_ns);
            per_phase * scale * shares[i].horizon_phases
        }
        _ => 0.0,
    })
}

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
        let shadow =
            |l: Layout| replay::shadow_profile(&self.device, 1.0, b.tail.iter().copied(), l);
        let plain = shadow(Layout::Home(*current.geometry()))?;
        let keep = shadow(now.clone())?;
        let mut home = plan.clone();
        home.ranges.clear();
        let page_sectors = current.geometry().page.sectors_u32();
        let keep_only = unplanned(
            (&keep, &plain),
            (
                b.tail.len(),
                tail_recurrence(b.tail, b.history.iter().chain(b.before), page_sectors),
            ),
            (b.scale, ONLINE_PHASES_AHEAD as f64),
            (self.copy_busy_s(&now, &home)?, 0.0, 1.0),
        );
        let (mut shares, mut trials) = (Vec::new(), Vec::new());
        for share in Admission::PLAN_SHARES {
            let mut tried = now.clone();
            tried.reconfigure(&trial.leading(share), &self.schedule)?;
            let tried = shadow(tried)?;
            let copy_s = self.copy_busy_s(&now, &plan.leading(share))?;
            shares.push(with_trial(
                &keep_only,
                (&keep, &tried, b.scale),
                (share, copy_s),
                true,
            ));
            trials.push((tried, true));
        }
        let best = best_part(&shares, &trials, b.scale).unwrap_or(0);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trial_from_part_of_the_training_lowers_the_floor_to_its_share() {
        let base = PlanParams {
            min_edge_weight: 2,
            ..PlanParams::default()
        };
        assert_eq!(trial_params(base, 1.0).min_edge_weight, 2);
        assert_eq!(trial_params(base, 0.75).min_edge_weight, 2);
        // One day of two: a transition seen once that day is kept.
        assert_eq!(trial_params(base, 0.5).min_edge_weight, 1);
        // Never below 1: a floor of 0 would place every page seen once, isolated ones too.
        assert_eq!(trial_params(base, 0.0).min_edge_weight, 1);
    }
}
