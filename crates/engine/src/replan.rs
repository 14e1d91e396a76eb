//! Online re-planning: the served requests feed the next plan (DESIGN.md: "its recorder
//! feeds the next plan"). A bounded window keeps the most recent requests; on a trigger
//! (a period, a request count, an idle spell, or a drop of the hit rate) the master
//! access graph is rebuilt from the window (seed 000 §4.2), a policy places pages into
//! the read cache (seed 000 §4.3, seed 001 §3.6.6), and the plan is handed to the
//! engine's background reconfiguration, which copies rate-limited and yields to
//! foreground I/O (seed 001 §3.5.2). Policy (which pages) stays in the plan crate; this
//! module only decides *when*.

use crate::engine::Engine;
use crate::learned::Learner;
use reblock_eval::layout::Layout;
use reblock_eval::online::{trial_params, AdmissionModel, Backtest};
use reblock_layout::{Admission, Choice, Plan};
use reblock_nbd::{Op as NbdOp, RequestEvent, RequestObserver};
use reblock_plan::{build_graphs, by_name, policies, Placement, PlanParams, Policy};
use reblock_trace::{Op, Request};
use serde::Serialize;
use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A periodic trigger: wall-clock time or served requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Every {
    Time(Duration),
    Requests(u64),
}

/// Why re-planning could not be set up or did not produce a plan.
#[derive(Debug, thiserror::Error)]
pub enum ReplanError {
    #[error("{input:?}: expected a period (10m, 30s) or a request count (5000)")]
    EveryNotANumber { input: String },
    #[error("{input:?}: must be positive")]
    EveryZero { input: String },
    #[error("{input:?}: unknown unit {unit:?} (ms, s, m, h, requests)")]
    EveryUnit { input: String, unit: String },
    #[error(transparent)]
    UnknownPolicy(#[from] reblock_plan::UnknownPolicy),
    #[error("policy `{name}` cannot run online: {why}; policies that work online: {online}")]
    NotOnline {
        name: String,
        why: &'static str,
        online: String,
    },
    #[error("hit-rate drop {0}: must be within (0, 1)")]
    HitRateDrop(f64),
    #[error("page size {0} is below a sector")]
    PageSize(u32),
    #[error(transparent)]
    NotReadCache(#[from] reblock_plan::NotReadCache),
    #[error(transparent)]
    Reconfigure(#[from] crate::engine::ReconfigureError),
    #[error("admission: {0}")]
    Admission(reblock_eval::EvalError),
    #[error("guard device: {0}")]
    GuardDevice(reblock_eval::EvalError),
    #[error(transparent)]
    Learning(#[from] reblock_plan::LearningError),
    #[error("spawn re-planning thread: {0}")]
    Spawn(std::io::Error),
}

/// Parses `10m`, `30s`, `500ms`, `1h` (a period) or `5000`, `5000req`, `5000-requests`
/// (a request count).
pub fn parse_every(s: &str) -> Result<Every, ReplanError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let input = || s.to_string();
    let n: u64 = num
        .parse()
        .map_err(|_| ReplanError::EveryNotANumber { input: input() })?;
    if n == 0 {
        return Err(ReplanError::EveryZero { input: input() });
    }
    let ms = match unit.trim_start_matches('-') {
        "" | "req" | "reqs" | "requests" | "r" => return Ok(Every::Requests(n)),
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        u => {
            return Err(ReplanError::EveryUnit {
                input: input(),
                unit: u.to_string(),
            })
        }
    };
    Ok(Every::Time(Duration::from_millis(n.saturating_mul(ms))))
}

/// When and how to re-plan.
#[derive(Clone, Debug)]
pub struct ReplanOptions {
    /// Policy name (`reblock_plan::by_name`).
    pub policy: String,
    pub every: Option<Every>,
    /// Re-plan once foreground I/O has been idle this long (after new requests).
    pub on_idle: Option<Duration>,
    /// Re-plan when the hit rate of the last poll interval falls below (1 - this) times
    /// the best interval hit rate seen since the last plan.
    pub on_hit_rate_drop: Option<f64>,
    /// Requests kept for planning (the ring's capacity).
    pub window_requests: usize,
    /// New requests needed since the last plan before any trigger fires.
    pub min_new_requests: u64,
    /// How often triggers are checked.
    pub poll: Duration,
    /// The admission guard's device model (`evaluate --device` spec): each plan is
    /// installed only when the busy time it is predicted to save on the model exceeds
    /// what its copies cost there. `None`: every plan is installed.
    pub guard_device: Option<String>,
    /// Decay of the learning state kept across re-plans (see `reblock_plan::learning`):
    /// each re-plan learns from what was learnt before, multiplied by this, plus the
    /// requests since. 0: no learning state, each plan learns from the window alone.
    pub learning_decay: f64,
    /// Where the learning state is kept across restarts (`IMAGE.learned`); `None`: in
    /// memory only.
    pub learned_file: Option<crate::learned::LearnedFile>,
}

/// The learning decay `serve` uses unless told otherwise.
pub const DEFAULT_LEARNING_DECAY: f64 = 1.0;

impl ReplanOptions {
    pub fn new(policy: &str) -> ReplanOptions {
        ReplanOptions {
            policy: policy.to_string(),
            every: None,
            on_idle: None,
            on_hit_rate_drop: None,
            window_requests: 1 << 20,
            min_new_requests: 64,
            poll: Duration::from_millis(100),
            guard_device: None,
            learning_decay: DEFAULT_LEARNING_DECAY,
            learned_file: None,
        }
    }
}

/// What `reblock status` shows of re-planning.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplanStatus {
    pub policy: String,
    pub plans: u64,
    /// Unix time (ms) of the last plan handed to the engine.
    pub last_plan_unix_ms: Option<u64>,
    /// The trigger that caused it: "every", "requests", "idle", "hit-rate-drop", "manual".
    pub last_trigger: Option<String>,
    pub last_planned_pages: u64,
    /// Requests the last plan was built from.
    pub last_window_requests: u64,
    pub last_planning_ms: f64,
    pub requests_seen: u64,
    pub last_error: Option<String>,
    /// The admission guard's device model; absent when every plan is installed.
    pub guard_device: Option<String>,
    /// The guard's last decision (plan, keep or home) and the predictions behind it.
    pub last_admission: Option<Admission>,
    /// The last decision in words: which candidate won and by how much.
    pub last_admission_reason: Option<String>,
    /// Decisions so far: plans installed, plans refused (kept), sent home.
    pub admitted: u64,
    pub refused: u64,
    pub sent_home: u64,
    /// The learning state's decay per re-plan; absent when plans learn from the window
    /// alone.
    pub learning_decay: Option<f64>,
    /// Distinct pages the learning state covers, as of its last checkpoint.
    pub learned_pages: u64,
    /// Requests it holds (decayed counts) and re-plans (epochs) it has been through.
    pub learned_requests: u64,
    pub learned_epochs: u64,
    /// Where the learning state came from: its file (read back at start) or "fresh".
    pub learned_from: Option<String>,
}

/// The most recent served requests, as trace records (connection id as pid), in a ring
/// of fixed capacity. Forwards every event to `next` (e.g. the on-disk recorder).
pub struct RequestWindow {
    ring: Mutex<VecDeque<Request>>,
    capacity: usize,
    seen: AtomicU64,
    next: Option<Arc<dyn RequestObserver>>,
}

impl RequestWindow {
    pub fn new(capacity: usize, next: Option<Arc<dyn RequestObserver>>) -> RequestWindow {
        RequestWindow {
            ring: Mutex::new(VecDeque::with_capacity(capacity.min(1 << 16))),
            capacity: capacity.max(1),
            seen: AtomicU64::new(0),
            next,
        }
    }
    /// Requests observed so far (not only those still in the ring).
    pub fn seen(&self) -> u64 {
        self.seen.load(Relaxed)
    }
    pub fn snapshot(&self) -> Vec<Request> {
        self.newest(u64::MAX)
    }
    /// The newest `n` requests (all the ring holds when fewer). Only they are copied:
    /// every served request waits on this lock to be recorded.
    pub fn newest(&self, n: u64) -> Vec<Request> {
        let r = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let keep = r.len().min(usize::try_from(n).unwrap_or(usize::MAX));
        r.range(r.len() - keep..).copied().collect()
    }
    fn push(&self, req: Request) {
        let mut r = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        if r.len() == self.capacity {
            r.pop_front();
        }
        r.push_back(req);
        self.seen.fetch_add(1, Relaxed);
    }
}

/// The trace record of a served event, or `None` for requests that move no data.
pub fn request_of(e: &RequestEvent) -> Option<Request> {
    let op = match e.op {
        NbdOp::Read => Op::Read,
        NbdOp::Write => Op::Write,
        _ => return None,
    };
    if e.errno != 0 || e.length_bytes == 0 {
        return None;
    }
    let sector = e.offset_bytes / 512;
    let end = (e.offset_bytes + u64::from(e.length_bytes)).div_ceil(512);
    Some(Request {
        ts_ns: e.ts_ns,
        pid: Some(e.connection_id as u32),
        command: 0,
        device: 0,
        sector,
        sectors: (end - sector) as u32,
        op,
    })
}

impl RequestObserver for RequestWindow {
    fn observe(&self, e: &RequestEvent) {
        if let Some(r) = request_of(e) {
            self.push(r);
        }
        if let Some(n) = &self.next {
            n.observe(e);
        }
    }
}

/// True when `p` places pages into the read cache, the only placement the engine can
/// apply online (a data-area permutation such as dlr-frag has no plan.json form:
/// reblock-plan's `Plan::try_from` refuses it). Asked of the policy itself, on an empty
/// graph, so a new policy is classified without a list kept here.
fn places_into_read_cache(p: &dyn Policy) -> bool {
    p.capabilities().online()
}

/// The policies online re-planning can apply, in the plan crate's order.
pub fn online_policies() -> Vec<&'static str> {
    policies()
        .iter()
        .filter(|p| places_into_read_cache(**p))
        .map(|p| p.name())
        .collect()
}

/// Checks that `name` is a policy the engine can re-plan with online; the error names
/// the ones that work.
pub fn check_online_policy(name: &str) -> Result<(), ReplanError> {
    let p = by_name(name)?;
    let Some(why) = p.capabilities().offline_only_reason() else {
        return Ok(());
    };
    Err(ReplanError::NotOnline {
        name: name.to_string(),
        why,
        online: online_policies().join(", "),
    })
}

/// The read-cache placement `policy` makes from `requests` (within the data area: see
/// [`in_data_area`]), sized to the engine's read cache, with the edge-weight floor of a
/// trial made from `share` of the training ([`trial_params`], the function `evaluate`
/// plans its trials with; 1.0: no trial).
fn placement_with(
    engine: &Engine,
    (policy, learnt): (&str, Option<&Learner>),
    requests: &[Request],
    share: f64,
) -> Result<Placement, ReplanError> {
    let p = by_name(policy)?;
    let layout = engine.layout();
    let page_sectors =
        NonZeroU32::new(layout.page_bytes / 512).ok_or(ReplanError::PageSize(layout.page_bytes))?;
    let graph = match learnt {
        Some(l) => l.graph_with(requests),
        None => build_graphs(requests.iter().copied()),
    };
    let params = PlanParams {
        page_sectors,
        read_cache_pages: Some(u64::from(layout.read_cache_pages)),
        ..PlanParams::default()
    };
    let placement = p.plan(&graph, &trial_params(params, share));
    // Pages already in the read cache keep their slots, as `evaluate` makes its plans:
    // BORG's order shifts as training grows, and a plan taken as it came relocated every
    // placed page, so the re-plan after an admitted one was priced (and would have been
    // executed) as a whole new region: 57.9 s of copies on a 3-day start-up capture.
    Ok(Layout::Bopt(engine.indirector()).stable(&placement))
}

/// The requests that lie within the data area (the server refuses the others anyway).
fn in_data_area(engine: &Engine, requests: &[Request]) -> Vec<Request> {
    let data_sectors = engine.layout().data_bytes / 512;
    let page_sectors = u64::from(engine.layout().page_bytes / 512).max(1);
    let end = data_sectors / page_sectors * page_sectors;
    (requests.iter().copied())
        .filter(|r| r.sector + u64::from(r.sectors) <= end)
        .collect()
}

/// Starts the engine's background reconfiguration toward `placement`; its pages.
fn install(engine: &Engine, placement: &Placement) -> Result<u64, ReplanError> {
    let plan = Plan::try_from(placement)?;
    let pages = plan.pages();
    engine.reconfigure_unless_detached(plan)?;
    Ok(pages)
}

/// Builds a read-cache plan from `requests` with `policy`, sized to the engine's read
/// cache, and starts the engine's background reconfiguration toward it.
pub fn plan_and_apply(
    engine: &Engine,
    policy: &str,
    requests: Vec<Request>,
) -> Result<u64, ReplanError> {
    let requests = in_data_area(engine, &requests);
    let placement = placement_with(engine, (policy, None), &requests, 1.0)?;
    engine.want_replicas(&placement.replicas);
    install(engine, &placement)
}

/// What one guarded re-plan did.
#[derive(Clone, Debug)]
pub struct Guarded {
    pub admission: Admission,
    /// Pages of the plan installed (0 when kept).
    pub pages: u64,
}

/// Plans from `requests` and lets the admission rule (the one `evaluate` applies) decide
/// between the plan, the layout in place and the plain layout: each is replayed on
/// `model` over the last part of the window (the backtest: a plan made without it is
/// judged on it), scaled to `next_requests`, plus its scheduled copy cost. `history`:
/// the requests served before `requests` (the older window), evidence of recurrence only.
pub fn plan_guarded(
    engine: &Engine,
    how: (&str, Option<&Learner>),
    (history, requests): (&[Request], &[Request]),
    model: &AdmissionModel,
    next_requests: u64,
) -> Result<Guarded, ReplanError> {
    let requests = in_data_area(engine, requests);
    guarded_in_data_area(engine, how, (history, &requests), model, next_requests)
}

/// [`plan_guarded`] of requests already within the data area. `history` only answers
/// "was this page seen before?", which a page past the data area never is for a backtest
/// page inside it, so it needs no filtering (nor a second copy of the window).
fn guarded_in_data_area(
    engine: &Engine,
    (policy, learnt): (&str, Option<&Learner>),
    (history, requests): (&[Request], &[Request]),
    model: &AdmissionModel,
    next_requests: u64,
) -> Result<Guarded, ReplanError> {
    let tail_len = (requests.len() / 4).clamp(1, next_requests.max(1) as usize);
    let split = requests.len().saturating_sub(tail_len);
    let tail = &requests[split..];
    // The plan placed is the plan tried: both with the trial's floor, as `evaluate`.
    let share = split as f64 / requests.len().max(1) as f64;
    let plan = placement_with(engine, (policy, learnt), requests, share)?;
    // FS2 replicas are made page by page in idle time under the copier's rate limit and
    // the free-space watermarks; the admission below weighs the BOPT part.
    engine.want_replicas(&plan.replicas);
    let trial = placement_with(engine, (policy, learnt), &requests[..split], share)?;
    let b = Backtest {
        tail,
        before: &requests[..split],
        history,
        scale: next_requests as f64 / tail.len().max(1) as f64,
    };
    let admission = model
        .admit(&engine.indirector(), &plan, &trial, &b)
        .map_err(ReplanError::Admission)?;
    let pages = match admission.choice {
        Choice::Keep => 0,
        Choice::Plan => install(engine, &plan.leading(admission.plan_share))?,
        Choice::Home => {
            let mut home = plan;
            home.ranges.clear();
            install(engine, &home)?
        }
    };
    Ok(Guarded { admission, pages })
}

/// Trigger state between polls.
struct Triggers {
    o: ReplanOptions,
    last_plan: Instant,
    seen_at_plan: u64,
    reads_prev: u64,
    hits_prev: u64,
    best_rate: f64,
}

/// Fewer reads than this in a poll interval say nothing about the hit rate.
const MIN_INTERVAL_READS: u64 = 32;

impl Triggers {
    /// The trigger due now, if any.
    fn due(&mut self, engine: &Engine, seen: u64) -> Option<&'static str> {
        let st = engine.status();
        let (reads, hits) = (st.reads - self.reads_prev, st.read_hits - self.hits_prev);
        (self.reads_prev, self.hits_prev) = (st.reads, st.read_hits);
        let new = seen - self.seen_at_plan;
        // After `reblock detach` the BOPT stays empty until the operator re-enables it.
        if new < self.o.min_new_requests || engine.reconfig_pending() || engine.is_detached() {
            return None;
        }
        match self.o.every {
            Some(Every::Time(d)) if self.last_plan.elapsed() >= d => return Some("every"),
            Some(Every::Requests(n)) if new >= n => return Some("requests"),
            _ => {}
        }
        if let Some(d) = self.o.on_idle {
            if engine.idle_ns() >= d.as_nanos() as u64 {
                return Some("idle");
            }
        }
        if let (Some(drop), true) = (self.o.on_hit_rate_drop, reads >= MIN_INTERVAL_READS) {
            let rate = hits as f64 / reads as f64;
            if self.best_rate > 0.0 && rate < self.best_rate * (1.0 - drop) {
                return Some("hit-rate-drop");
            }
            self.best_rate = self.best_rate.max(rate);
        }
        None
    }
    fn planned(&mut self, seen: u64) {
        self.last_plan = Instant::now();
        self.seen_at_plan = seen;
        self.best_rate = 0.0;
    }
}

/// The re-planning thread.
pub struct Replanner {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Replanner {
    /// Checks the policy name, then polls the triggers until [`Replanner::stop`].
    pub fn start(
        engine: Arc<Engine>,
        window: Arc<RequestWindow>,
        o: ReplanOptions,
    ) -> Result<Replanner, ReplanError> {
        check_online_policy(&o.policy)?;
        if let Some(d) = o.on_hit_rate_drop {
            if !(0.0..1.0).contains(&d) || d == 0.0 {
                return Err(ReplanError::HitRateDrop(d));
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let model = o
            .guard_device
            .as_deref()
            .map(|d| AdmissionModel::new(d).map(AdmissionModel::carrying))
            .transpose()
            .map_err(ReplanError::GuardDevice)?;
        let page_sectors = u64::from(engine.layout().page_bytes / 512);
        let learner = (o.learning_decay > 0.0)
            .then(|| Learner::open(o.learning_decay, o.learned_file.clone(), page_sectors))
            .transpose()
            .map_err(ReplanError::Learning)?;
        let mut planner = Planner {
            model,
            every: o.every,
            learner,
        };
        let mut status = ReplanStatus {
            policy: o.policy.clone(),
            guard_device: o.guard_device.clone(),
            ..Default::default()
        };
        planner.report_learning(&mut status);
        engine.set_replan_status(status.clone());
        let thread = std::thread::Builder::new()
            .name("replan".into())
            .spawn(move || {
                let poll = o.poll;
                let mut t = Triggers {
                    o,
                    last_plan: Instant::now(),
                    seen_at_plan: 0,
                    reads_prev: 0,
                    hits_prev: 0,
                    best_rate: 0.0,
                };
                while !stop2.load(Relaxed) {
                    std::thread::sleep(poll);
                    let seen = window.seen();
                    status.requests_seen = seen;
                    if let Some(trigger) = t.due(&engine, seen) {
                        let since = seen - t.seen_at_plan;
                        replan_once(&engine, &window, &mut planner, &mut status, trigger, since);
                        t.planned(seen);
                    }
                    engine.set_replan_status(status.clone());
                }
                // A clean stop keeps what was learnt since the last plan.
                let since = window.seen() - t.seen_at_plan;
                if since > 0 {
                    planner.checkpoint(&in_data_area(&engine, &window.newest(since)));
                }
            })
            .map_err(ReplanError::Spawn)?;
        Ok(Replanner {
            stop,
            thread: Some(thread),
        })
    }

    pub fn stop(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How the re-planner plans: the policy, the guard when it is on, and the learning
/// state when plans learn from more than the window.
struct Planner {
    model: Option<AdmissionModel>,
    /// The periodic trigger, which fixes how many requests the next plan serves.
    every: Option<Every>,
    learner: Option<Learner>,
}

/// Requests the next plan is expected to serve: a request-count trigger's period; for
/// any other trigger (time, idle, hit-rate drop) the number served since the last plan,
/// the best guess of the next spell. (Scaling to the whole window instead made an idle
/// trigger on the start-up capture predict 3888 s a phase for 2500 requests.)
fn expected_period(every: Option<Every>, since_last_plan: u64) -> u64 {
    match every {
        Some(Every::Requests(n)) => n,
        _ => since_last_plan.max(1),
    }
}

impl Planner {
    /// Plans once, guarded or not, from `requests` within the data area (with the
    /// learning state: the requests since the last plan; without: the window); the
    /// pages installed.
    fn run(
        &self,
        engine: &Engine,
        s: &mut ReplanStatus,
        (history, requests): (&[Request], &[Request]),
        since_last_plan: u64,
    ) -> Result<u64, ReplanError> {
        let learnt = self.learner.as_ref();
        let Some(model) = &self.model else {
            let placement = placement_with(engine, (&s.policy, learnt), requests, 1.0)?;
            return install(engine, &placement);
        };
        let next = expected_period(self.every, since_last_plan);
        let g = guarded_in_data_area(
            engine,
            (&s.policy, learnt),
            (history, requests),
            model,
            next,
        )?;
        match g.admission.choice {
            Choice::Plan => s.admitted += 1,
            Choice::Keep => s.refused += 1,
            Choice::Home => s.sent_home += 1,
        }
        s.last_admission_reason = Some(g.admission.reason());
        s.last_admission = Some(g.admission);
        Ok(g.pages)
    }

    /// The requests since the last plan (within the data area) join the learning
    /// state, which is kept.
    fn checkpoint(&mut self, new: &[Request]) {
        if let Some(l) = &mut self.learner {
            l.checkpoint(new);
        }
    }

    /// The learning state's figures for `status`.
    fn report_learning(&self, s: &mut ReplanStatus) {
        if let Some(l) = &self.learner {
            s.learning_decay = Some(l.state().decay());
            s.learned_pages = l.learned_pages;
            s.learned_requests = l.state().requests();
            s.learned_epochs = l.state().epochs();
            s.learned_from = Some(l.origin.clone());
        }
    }
}

fn replan_once(
    engine: &Engine,
    window: &RequestWindow,
    planner: &mut Planner,
    s: &mut ReplanStatus,
    trigger: &str,
    since_last_plan: u64,
) {
    // With a learning state the plan learns the requests since the last plan; the older
    // window is still the admission's evidence of what recurs (a start-up's day repeats
    // the day before it, not its own first hours). Without the admission guard nothing
    // reads that evidence: only the newest requests are copied under the window's lock.
    let all = match (&planner.learner, &planner.model) {
        (Some(_), None) => window.newest(since_last_plan),
        _ => window.snapshot(),
    };
    let planned_from = match planner.learner {
        Some(_) => (all.len()).min(usize::try_from(since_last_plan).unwrap_or(usize::MAX)),
        None => all.len(),
    };
    let (history, requests) = all.split_at(all.len() - planned_from);
    // Filtered once here: the plan, the guard's trial and the learning state all use them.
    let requests = in_data_area(engine, requests);
    let n = requests.len() as u64;
    let t0 = Instant::now();
    let planned = planner.run(engine, s, (history, &requests), since_last_plan);
    planner.checkpoint(&requests);
    planner.report_learning(s);
    match planned {
        Ok(pages) => {
            s.plans += 1;
            s.last_planned_pages = pages;
            s.last_error = None;
            tracing::info!(trigger, pages, requests = n, decision = ?s.last_admission_reason, "re-planned");
        }
        Err(e) => {
            tracing::warn!(trigger, error = %e, "re-planning failed");
            s.last_error = Some(e.to_string());
        }
    }
    s.last_planning_ms = t0.elapsed().as_secs_f64() * 1e3;
    s.last_window_requests = n;
    s.last_trigger = Some(trigger.to_string());
    s.last_plan_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `serve --replan-policy dlr-frag` was accepted and then every re-plan
    /// failed (a data-area permutation has no read-cache plan); it is refused up front,
    /// naming the policies that work online.
    #[test]
    fn data_area_policies_are_refused_for_online_replanning() {
        let err = check_online_policy("dlr-frag").unwrap_err();
        assert!(matches!(err, ReplanError::NotOnline { .. }), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("dlr-frag") && err.contains("borg"), "{err}");
        let online = online_policies();
        assert!(!online.contains(&"dlr-frag"), "{online:?}");
        for name in ["vanilla", "hot", "borg", "dlr-seq", "fs2", "borg+fs2"] {
            assert!(online.contains(&name), "{name} missing from {online:?}");
            check_online_policy(name).unwrap();
        }
        assert!(check_online_policy("nope")
            .unwrap_err()
            .to_string()
            .contains("unknown policy"));
    }

    #[test]
    fn the_guard_judges_a_plan_over_the_period_it_will_serve() {
        assert_eq!(expected_period(Some(Every::Requests(2500)), 9000), 2500);
        let spell = Some(Every::Time(Duration::from_secs(60)));
        assert_eq!(expected_period(spell, 2200), 2200);
        // An idle or hit-rate trigger alone: the spell since the last plan, never 0.
        assert_eq!(expected_period(None, 2200), 2200);
        assert_eq!(expected_period(None, 0), 1);
    }

    #[test]
    fn periods_and_counts_parse() {
        assert_eq!(
            parse_every("10m").ok(),
            Some(Every::Time(Duration::from_secs(600)))
        );
        assert_eq!(
            parse_every("250ms").ok(),
            Some(Every::Time(Duration::from_millis(250)))
        );
        assert_eq!(parse_every("5000").ok(), Some(Every::Requests(5000)));
        assert_eq!(parse_every("300-requests").ok(), Some(Every::Requests(300)));
        assert!(matches!(
            parse_every("0"),
            Err(ReplanError::EveryZero { .. })
        ));
        let unit = parse_every("3 weeks").unwrap_err();
        assert!(matches!(&unit, ReplanError::EveryUnit { unit, .. } if unit == " weeks"));
        assert!(unit.to_string().contains("unit"));
        assert!(matches!(
            parse_every("m"),
            Err(ReplanError::EveryNotANumber { .. })
        ));
    }

    #[test]
    fn window_keeps_the_newest_requests_and_covers_unaligned_bytes() {
        let w = RequestWindow::new(2, None);
        let ev = |off: u64| RequestEvent {
            connection_id: 7,
            op: NbdOp::Read,
            offset_bytes: off,
            length_bytes: 100,
            fua: false,
            ts_ns: off,
            duration_ns: 0,
            errno: 0,
        };
        for off in [0, 1000, 4096] {
            w.observe(&ev(off));
        }
        w.observe(&RequestEvent {
            op: NbdOp::Flush,
            ..ev(0)
        });
        let s = w.snapshot();
        assert_eq!(w.seen(), 3);
        // Bytes 1000..1100 touch sectors 1 and 2; 4096..4196 sector 8 only.
        assert_eq!(
            s.iter().map(|r| (r.sector, r.sectors)).collect::<Vec<_>>(),
            vec![(1, 2), (8, 1)]
        );
        assert_eq!(s[0].pid, Some(7));
        // The newest n: only the tail, all of the ring when it holds fewer.
        assert_eq!(w.newest(1), s[1..]);
        assert_eq!(w.newest(5), s);
        assert!(w.newest(0).is_empty());
    }
}
