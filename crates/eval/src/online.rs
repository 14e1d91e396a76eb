//! The admission rule's predictions for a running server (`serve`): the same candidates,
//! shadow replays and scheduled copy costs as `evaluate`'s reconfigurations
//! ([`crate::run`]), over the server's recent requests, decided by the layout crate's
//! [`Admission::choose`] that `evaluate` uses.

use reblock_layout::admission::{paired_block_stderr_s, recurrence};
use reblock_layout::{Admission, Choice, Indirector, ScheduleOptions};
use reblock_plan::{Placement, PlanParams};
use reblock_trace::{Op, Request};
use rustc_hash::FxHashSet;

use crate::layout::Layout;
use crate::ranked::pages_touched;
use crate::replay::Profile;
use crate::{replay, EvalError};

/// Predicts, on one device model, what each candidate layout would cost.
#[derive(Clone, Debug)]
pub struct AdmissionModel {
    device: String,
    schedule: ScheduleOptions,
    /// Whether foreground reads carry a plan's incoming pages (a server's copier
    /// piggybacks; `evaluate`'s replay does not): see [`AdmissionModel::carrying`].
    carrying: bool,
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
            carrying: false,
        })
    }

    /// The model for a server whose foreground reads carry a plan's incoming pages into
    /// their slots (piggybacking): a page the next phase is expected to read (one of the
    /// pages the backtest's last phase-length of requests read, [`next_phase_reads`])
    /// costs only its write. Costed as if the copier read every page, a 55,000-page plan
    /// of a 5-day start-up capture cost 6.0-6.1 s on the model while foreground reads
    /// carried most of it, and the plan was admitted only at the 3rd or 4th re-plan.
    pub fn carrying(self) -> AdmissionModel {
        AdmissionModel {
            carrying: true,
            ..self
        }
    }

    pub fn device(&self) -> &str {
        &self.device
    }

    /// The admission decision for replacing the read cache of `current` with `plan`:
    /// `trial` is the policy's plan made without the tail (as the plan will meet
    /// requests it was not made from), judged on the tail; `plan`'s own copies are the
    /// plan's cost, with pages the next phase is expected to read carried by those reads
    /// (when the engine carries them). The whole plan is judged (`plan_share` 1).
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
        let carried = self
            .carrying
            .then(|| next_phase_reads(b, u64::from(page_sectors)));
        // The whole plan only: weighing its leading quarter and half too, each on its own
        // trial, made the corpus' worst figures worse (borg on UMass Financial1's device 9:
        // 1.000 -> 1.053, hot on device 4: 1.000 -> 1.130), as a share's trial is judged on
        // the same few dozen requests and more candidates give more chances to a lucky one.
        let mut tried = now.clone();
        tried.reconfigure(trial, &self.schedule)?;
        let tried = shadow(tried)?;
        let full_s = self.copy_busy_s(&now, plan)?;
        // Carrying only takes reads away, so it never costs more than copying all: the
        // split schedule (two sweeps) is bounded by the whole one.
        let copy_s = match &carried {
            Some(pages) => full_s.min(self.carried_copy_busy_s(&now, plan, pages)?),
            None => full_s,
        };
        Ok(with_trial(&keep_only, (&keep, &tried, b.scale), (1.0, copy_s), true).decided())
    }

    /// Busy seconds of the scheduled copies that turn `layout` into `placement`'s.
    fn copy_busy_s(&self, layout: &Layout, placement: &Placement) -> Result<f64, EvalError> {
        let mut l = layout.clone();
        let io = l.reconfigure(placement, &self.schedule)?;
        Ok(replay::copies(&self.device, &io.requests)?
            .summary
            .busy_time_s)
    }

    /// [`AdmissionModel::copy_busy_s`] when foreground reads carry the incoming pages in
    /// `carried` ([`Layout::carried_copy_requests`]).
    fn carried_copy_busy_s(
        &self,
        layout: &Layout,
        placement: &Placement,
        carried: &FxHashSet<u64>,
    ) -> Result<f64, EvalError> {
        let requests =
            layout.carried_copy_requests(placement, &self.schedule, &|p| carried.contains(&p))?;
        Ok(replay::copies(&self.device, &requests)?.summary.busy_time_s)
    }
}

/// The data-area pages the next phase is expected to read: those the backtest's last
/// phase-length of requests (`scale` times the tail's length, over `before` then `tail`)
/// read. A recurring workload reads them again while the plan's copies run, and a
/// server's foreground reads then carry them into their slots.
pub fn next_phase_reads(b: &Backtest, page_sectors: u64) -> FxHashSet<u64> {
    let phase = (b.scale * b.tail.len() as f64).round() as usize;
    let from_before = phase.saturating_sub(b.tail.len()).min(b.before.len());
    let recent = b.before[b.before.len() - from_before..]
        .iter()
        .chain(b.tail);
    recent
        .filter(|r| r.op == Op::Read)
        .flat_map(|r| pages_touched(r, page_sectors))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_layout::{BoptConfig, BoptPosition, Geometry};
    use reblock_plan::{PlacedRange, TargetSpace};

    fn read(page: u64, i: usize) -> Request {
        Request {
            ts_ns: i as u64 * 1_000_000,
            pid: None,
            command: reblock_trace::NO_COMMAND,
            device: 0,
            sector: page * 8,
            sectors: 8,
            op: Op::Read,
        }
    }

    /// A fresh read cache of 4096 slots over 200,000 data pages, and a plan placing
    /// `pages` in order.
    fn fresh_and_plan(pages: &[u64]) -> (Indirector, Placement) {
        let geo = Geometry::new(&BoptConfig {
            page_sectors: 8,
            data_sectors: 8 * 200_000,
            bopt_pages: 4096,
            segment_pages: 64,
            write_buffer_fraction: 0.25,
            position: BoptPosition::End,
            meta_sectors: 0,
        })
        .unwrap();
        let plan = Placement {
            policy: "borg".into(),
            page_sectors: 8,
            space: TargetSpace::ReadCache,
            replicas: Vec::new(),
            ranges: (pages.iter().enumerate())
                .map(|(i, &p)| PlacedRange {
                    fs_page: p,
                    pages: 1,
                    target: i as u64,
                })
                .collect(),
        };
        (Indirector::new(geo).unwrap(), plan)
    }

    /// A server's copier does not read a page a foreground read brings anyway: the
    /// admission's copy cost of a plan whose every page the last phase read is that of
    /// its writes alone, far below the cost of reading the scattered pages too; a plan
    /// of pages no read carries costs what it did. The carrying model's decision uses it.
    #[test]
    fn pages_the_next_phase_reads_cost_only_their_writes() {
        let hot: Vec<u64> = (0..300).map(|i| (i * 601 + 7) % 200_000).collect();
        let (ind, plan) = fresh_and_plan(&hot);
        let day: Vec<Request> = hot.iter().enumerate().map(|(i, &p)| read(p, i)).collect();
        let b = Backtest {
            tail: &day[225..],
            before: &day[..225],
            history: &[],
            scale: 4.0,
        };
        let model = AdmissionModel::new("hdd:wd2500aaks").unwrap();
        let now = Layout::Bopt(ind.clone());
        let full = model.copy_busy_s(&now, &plan).unwrap();
        let carried = next_phase_reads(&b, 8);
        assert_eq!(carried.len(), hot.len());
        let written = model.carried_copy_busy_s(&now, &plan, &carried).unwrap();
        assert!(
            written < 0.25 * full,
            "carried {written} s, copied {full} s"
        );
        let unread = FxHashSet::default();
        let same = model.carried_copy_busy_s(&now, &plan, &unread).unwrap();
        assert!((same - full).abs() < 1e-9, "{same} vs {full}");

        let a = model
            .clone()
            .carrying()
            .admit(&ind, &plan, &plan, &b)
            .unwrap();
        let leading = plan.leading(a.plan_share);
        let expect = (model.carried_copy_busy_s(&now, &leading, &carried).unwrap())
            .min(model.copy_busy_s(&now, &leading).unwrap());
        assert!((a.plan_copy_busy_s - expect).abs() < 1e-9, "{a:?}");
    }

    /// A plan already in place costs nothing to install again, carried or not.
    #[test]
    fn a_plan_in_place_costs_no_copies_either_way() {
        let hot: Vec<u64> = (0..300).map(|i| (i * 601 + 7) % 200_000).collect();
        let (ind, plan) = fresh_and_plan(&hot);
        let model = AdmissionModel::new("hdd:wd2500aaks").unwrap();
        let mut now = Layout::Bopt(ind);
        now.reconfigure(&plan, &model.schedule).unwrap();
        let carried: FxHashSet<u64> = hot.iter().copied().collect();
        let full = model.copy_busy_s(&now, &plan).unwrap();
        let written = model.carried_copy_busy_s(&now, &plan, &carried).unwrap();
        assert!(full < 1e-9 && written < 1e-9, "{full} {written}");
    }

    /// The next phase's reads are the last phase-length of requests (the tail and the
    /// end of the requests before it), not the whole window: a page read only earlier is
    /// not expected.
    #[test]
    fn the_next_phase_reads_are_the_last_phase_length_of_requests() {
        let before: Vec<Request> = (0..100).map(|i| read(1000 + i as u64, i)).collect();
        let tail: Vec<Request> = (0..10).map(|i| read(5000 + i as u64, 100 + i)).collect();
        let b = Backtest {
            tail: &tail,
            before: &before,
            history: &[],
            scale: 3.0,
        };
        let pages = next_phase_reads(&b, 8);
        assert_eq!(pages.len(), 30);
        assert!(pages.contains(&5009) && pages.contains(&1080) && pages.contains(&1099));
        assert!(!pages.contains(&1079));
        // Writes bring no data to carry.
        let mut writes = tail.clone();
        writes.iter_mut().for_each(|r| r.op = Op::Write);
        let w = Backtest {
            tail: &writes,
            before: &[],
            history: &[],
            scale: 1.0,
        };
        assert!(next_phase_reads(&w, 8).is_empty());
    }

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
