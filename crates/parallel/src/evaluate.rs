//! The evaluation of seed 003 §V: a Zipf-like initial placement per alpha, pairs mined on
//! the first part of the trace, the rest replayed on the array with the static (initial)
//! placement and with each optimized one.

use reblock_device::{parse_spec, Built};
use reblock_sim::{Config, IterSource, Pacing, Replay, Report, SchedulerKind, Submission};
use reblock_trace::{Trace, SECTOR_BYTES};
use rustc_hash::FxHashMap;

use crate::colouring::ColouringConfig;
use crate::grouping::group_sequential;
use crate::mining::PairCounts;
use crate::output::{ArrayEvalOutput, ArrayRun, PolicyResult};
use crate::pairs::{PairsFile, PairsFileError};
use crate::plan::{plan, PlanInput};
use crate::session::{for_each_session, Blocking, OpFilter, SessionConfig, SessionMode};
use crate::zipf::ZipfPlacement;
use crate::Error;

/// A layout policy compared by the evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    /// The initial placement, never reorganized.
    Static,
    /// Seed 003's optimizer on single blocks ("dynamic").
    Parallel,
    /// The optimizer on groups of sequential blocks (§IV-E, "dynamic+hdd opt.").
    ParallelHdd,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Static => "static",
            Policy::Parallel => "parallel",
            Policy::ParallelHdd => "parallel-hdd",
        }
    }
    pub fn parse(s: &str) -> Result<Policy, Error> {
        match s.trim() {
            "static" => Ok(Policy::Static),
            "parallel" => Ok(Policy::Parallel),
            "parallel-hdd" | "parallel+hdd" => Ok(Policy::ParallelHdd),
            other => Err(Error::Config(format!(
                "--policies: unknown array policy `{other}`; known: static, parallel, parallel-hdd"
            ))),
        }
    }
}

/// The array: how many members of which device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArraySpec {
    pub disks: usize,
    /// Member device spec, e.g. `ssd:k9xxg08uxm`.
    pub member: String,
}

impl ArraySpec {
    /// `ssd:N` (the K9XXG08UXM of seed 003), `hdd:N` (Cheetah 15K.5 with its write cache
    /// off, so that write latencies are the media's, as seed 003 reports them; a
    /// write-back cache that never fills would acknowledge every write at once), or
    /// `NxDEVICE` for any other member (`100xhdd:cheetah15k5` for write-back).
    pub fn parse(s: &str) -> Result<ArraySpec, Error> {
        let bad = |why: &str| Error::Config(format!("--array `{s}`: {why}"));
        let (count, member) = match s.split_once(':') {
            Some(("ssd", n)) => (n, "ssd:k9xxg08uxm".to_string()),
            Some(("hdd", n)) => (n, "hdd:cheetah15k5:write-cache=off".to_string()),
            _ => match s.split_once('x') {
                Some((n, dev)) => (n, dev.to_string()),
                None => return Err(bad("expected ssd:N, hdd:N or NxDEVICE")),
            },
        };
        let disks = count
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| bad("the disk count is not a positive number"))?;
        Ok(ArraySpec { disks, member })
    }
    /// The explicit-placement array spec for `reblock_device::parse_spec`.
    pub fn device_spec(&self, block_sectors: u64) -> String {
        format!("place:{}x{}:block={block_sectors}", self.disks, self.member)
    }
}

/// Everything an array evaluation needs.
#[derive(Clone, Debug)]
pub struct ArrayEvalConfig {
    pub array: ArraySpec,
    /// Block size in sectors (1: the seed's 512 B blocks; 8: 4 KiB pages).
    pub block_sectors: u64,
    pub alphas: Vec<f64>,
    pub train_fraction: f64,
    pub supports: Vec<u32>,
    pub policies: Vec<Policy>,
    pub session: SessionMode,
    pub ops: OpFilter,
    /// Pair window (see [`crate::mining`]); `None`: disks - 1.
    pub pair_window: Option<usize>,
    /// Largest group of the HDD optimization, in sectors.
    pub max_group_sectors: u64,
    /// `W` of Algorithm 1 in bytes; `None`: a member's capacity.
    pub capacity_bytes: Option<u64>,
    pub colouring: ColouringConfig,
    /// Seed of the initial placement's draws.
    pub seed: u64,
    /// Open-loop replay speed-up (1 = the trace's own pace).
    pub speed: f64,
}

impl Default for ArrayEvalConfig {
    fn default() -> Self {
        ArrayEvalConfig {
            array: ArraySpec {
                disks: 14,
                member: "ssd:k9xxg08uxm".into(),
            },
            block_sectors: 1,
            alphas: vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
            train_fraction: 0.5,
            supports: vec![1, 5, 10],
            policies: vec![Policy::Static, Policy::Parallel],
            // 100 us: most of the seed's requests arrive closer than that (§V-B3).
            session: SessionMode::WindowNs(100_000),
            ops: OpFilter::Both,
            pair_window: None,
            // 64 KiB: ~0.5 ms of Cheetah transfer against ~5.5 ms of positioning.
            max_group_sectors: 128,
            capacity_bytes: None,
            colouring: ColouringConfig::default(),
            seed: 3,
            speed: 1.0,
        }
    }
}

/// Where an evaluation is: `done` of `total` steps, the step just finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
    pub step: String,
}

/// The blocks of the whole trace, sorted, with their dense ids.
struct Universe {
    blocks: Vec<u64>,
    index: FxHashMap<u64, u32>,
}

fn universe(trace: &Trace, blocking: &Blocking) -> Universe {
    let mut blocks: Vec<u64> = (0..trace.len())
        .flat_map(|i| blocking.blocks(trace.sector[i], trace.sectors[i]))
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    let index = blocks
        .iter()
        .enumerate()
        .map(|(i, &b)| (b, i as u32))
        .collect();
    Universe { blocks, index }
}

fn validate(trace: &Trace, cfg: &ArrayEvalConfig) -> Result<usize, Error> {
    let bad = |m: String| Err(Error::Config(m));
    if !(cfg.train_fraction > 0.0 && cfg.train_fraction < 1.0) {
        return bad(format!(
            "--train-fraction {} must be between 0 and 1",
            cfg.train_fraction
        ));
    }
    if let Some(a) = cfg.alphas.iter().find(|a| !(a.is_finite() && **a >= 0.0)) {
        return bad(format!(
            "--initial zipf alpha {a} must be a non-negative number"
        ));
    }
    if cfg.supports.contains(&0) {
        return bad("--support values must be at least 1".into());
    }
    if cfg.block_sectors == 0 {
        return bad("--block-sectors must be at least 1".into());
    }
    let train = (trace.len() as f64 * cfg.train_fraction).round() as usize;
    if train == 0 || train >= trace.len() {
        return bad(format!(
            "the trace has {} requests: too few to split into training and testing",
            trace.len()
        ));
    }
    Ok(train)
}

/// Frequent pairs `(block, block, count)` in universe ids, per support.
type PairsBySupport = Vec<(u32, Vec<(u32, u32, u32)>)>;

/// The training part's pairs per support, with the summary counts of the output.
struct Training {
    pairs: PairsBySupport,
    sessions: u64,
    distinct_pairs: usize,
}

/// Mines the training part once; support is applied per value afterwards.
fn mine(ctx: &Ctx) -> Training {
    let mut counts = PairCounts::new(ctx.cfg.pair_window.unwrap_or(ctx.cfg.array.disks - 1));
    for_each_session(ctx.trace, 0..ctx.train, &ctx.sessions, |s| {
        counts.add_session(s)
    });
    let to_uni: Vec<u32> = counts
        .ids()
        .blocks()
        .iter()
        .map(|b| ctx.uni.index[b])
        .collect();
    let pairs = ctx
        .cfg
        .supports
        .iter()
        .map(|&s| {
            let kept = counts
                .frequent_ids(s)
                .into_iter()
                .map(|(a, b, c)| (to_uni[a as usize], to_uni[b as usize], c))
                .collect();
            (s, kept)
        })
        .collect();
    Training {
        pairs,
        sessions: counts.sessions(),
        distinct_pairs: counts.distinct_pairs(),
    }
}

/// The pairs of a file instead of mining (`--pairs`): each support keeps the file's
/// pairs seen at least that often, blocks folded as the array folds them. The sessions
/// are still counted, for the output's summary.
fn given(ctx: &Ctx, file: &PairsFile) -> Result<Training, Error> {
    let mut sessions = 0u64;
    for_each_session(ctx.trace, 0..ctx.train, &ctx.sessions, |_| sessions += 1);
    let blocking = &ctx.sessions.blocking;
    let id = |index: usize, field: &'static str, block: u64| {
        let folded = blocking.blocks(block * blocking.block_sectors, 1).next();
        folded
            .and_then(|b| ctx.uni.index.get(&b).copied())
            .ok_or_else(|| PairsFileError::NotInTrace {
                path: file.path.clone(),
                index,
                field,
                block,
                block_bytes: blocking.block_sectors * SECTOR_BYTES,
            })
    };
    let ids = (file.pairs.iter().enumerate())
        .map(|(i, p)| Ok((id(i, "a", p.a)?, id(i, "b", p.b)?, p.support)))
        .collect::<Result<Vec<_>, PairsFileError>>()?;
    let pairs = (ctx.cfg.supports.iter())
        .map(|&s| (s, ids.iter().copied().filter(|p| p.2 >= s).collect()))
        .collect();
    Ok(Training {
        pairs,
        sessions,
        distinct_pairs: file.pairs.len(),
    })
}

/// Runs the evaluation; `progress` hears of every finished step.
pub fn evaluate_array(
    trace: &Trace,
    trace_name: &str,
    cfg: &ArrayEvalConfig,
    progress: impl FnMut(Progress),
) -> Result<ArrayEvalOutput, Error> {
    evaluate_array_with_pairs(trace, trace_name, cfg, None, progress)
}

/// Runs the evaluation on the pairs of `pairs` when given (mined elsewhere, from the
/// training part), else on the pairs it mines from the training part itself.
pub fn evaluate_array_with_pairs(
    trace: &Trace,
    trace_name: &str,
    cfg: &ArrayEvalConfig,
    pairs: Option<&PairsFile>,
    mut progress: impl FnMut(Progress),
) -> Result<ArrayEvalOutput, Error> {
    let train = validate(trace, cfg)?;
    let spec = cfg.array.device_spec(cfg.block_sectors);
    let probe = build(&spec)?;
    let blocking = Blocking {
        block_sectors: cfg.block_sectors,
        wrap_sectors: Some(probe.array.capacity_sectors()),
    };
    let uni = universe(trace, &blocking);
    let ctx = Ctx {
        trace,
        cfg,
        spec: &spec,
        train,
        uni: &uni,
        sessions: SessionConfig {
            blocking,
            mode: cfg.session,
            ops: cfg.ops,
        },
        capacity_bytes: cfg
            .capacity_bytes
            .unwrap_or(probe.members[0].capacity_sectors() * SECTOR_BYTES),
    };
    let training = match pairs {
        Some(file) => given(&ctx, file)?,
        None => mine(&ctx),
    };
    let optimizers = cfg
        .policies
        .iter()
        .filter(|&&p| p != Policy::Static)
        .count();
    let mut step = Step {
        done: 0,
        total: cfg.alphas.len() * (1 + optimizers * cfg.supports.len()),
        progress: &mut progress,
    };
    let mut runs = Vec::new();
    for &alpha in &cfg.alphas {
        runs.extend(ctx.alpha_runs(alpha, &training.pairs, &mut step)?);
    }
    Ok(ArrayEvalOutput {
        trace: trace_name.to_string(),
        array: spec.clone(),
        disks: cfg.array.disks,
        block_bytes: cfg.block_sectors * SECTOR_BYTES,
        requests: trace.len(),
        train_requests: train,
        test_requests: trace.len() - train,
        training_sessions: training.sessions,
        distinct_pairs: training.distinct_pairs,
        pairs_file: pairs.map(|f| f.path.display().to_string()),
        runs,
    })
}

/// Counts finished steps for the progress callback.
struct Step<'p> {
    done: usize,
    total: usize,
    progress: &'p mut dyn FnMut(Progress),
}

impl Step<'_> {
    fn finish(&mut self, step: String) {
        self.done += 1;
        (self.progress)(Progress {
            done: self.done,
            total: self.total,
            step,
        });
    }
}

fn build(spec: &str) -> Result<Built, Error> {
    parse_spec(spec).map_err(|e| Error::Config(format!("--array: {e}")))
}

fn result(r: &Report, bytes_moved: u64, plan: Option<crate::plan::PlanStats>) -> PolicyResult {
    PolicyResult {
        requests: r.overall.requests,
        mean_response_ms: r.overall.mean_response_ms,
        read_mean_response_ms: r.overall.read_mean_response_ms,
        write_mean_response_ms: r.overall.write_mean_response_ms,
        p95_response_ms: r.overall.p95_response_ms,
        busy_time_s: r.overall.busy_time_s,
        bytes_moved,
        plan,
    }
}

/// What every step of one evaluation shares.
struct Ctx<'a> {
    trace: &'a Trace,
    cfg: &'a ArrayEvalConfig,
    spec: &'a str,
    train: usize,
    uni: &'a Universe,
    sessions: SessionConfig,
    capacity_bytes: u64,
}

impl Ctx<'_> {
    /// The runs of one alpha: static once, each optimizer at each support.
    fn alpha_runs(
        &self,
        alpha: f64,
        pairs: &PairsBySupport,
        step: &mut Step,
    ) -> Result<Vec<ArrayRun>, Error> {
        let cfg = self.cfg;
        let zipf = ZipfPlacement::new(cfg.array.disks, alpha, cfg.seed).map_err(Error::Config)?;
        let disk: Vec<u32> = self
            .uni
            .blocks
            .iter()
            .map(|&b| zipf.disk(b) as u32)
            .collect();
        let base = result(&self.replay(&disk)?, 0, None);
        step.finish(format!("alpha {alpha}: static"));
        let mut runs: Vec<ArrayRun> = pairs
            .iter()
            .map(|(support, _)| ArrayRun {
                alpha,
                support: *support,
                policies: [("static".to_string(), base.clone())].into(),
            })
            .collect();
        for &policy in cfg.policies.iter().filter(|&&p| p != Policy::Static) {
            let (group_of, groups) = self.groups(policy, &disk);
            for (run, (support, kept)) in runs.iter_mut().zip(pairs) {
                let input = PlanInput {
                    disk: &disk,
                    group_of: &group_of,
                    groups,
                    disks: cfg.array.disks,
                    block_bytes: cfg.block_sectors * SECTOR_BYTES,
                    capacity_bytes: self.capacity_bytes,
                    pairs: kept,
                    colouring: cfg.colouring,
                };
                let (new_disk, stats) = plan(&input);
                let report = self.replay(&new_disk)?;
                let res = result(&report, stats.bytes_moved, Some(stats));
                run.policies.insert(policy.name().into(), res);
                step.finish(format!(
                    "alpha {alpha}: {} support {support}",
                    policy.name()
                ));
            }
        }
        Ok(runs)
    }

    /// Groups for `policy`: sequential runs for the HDD optimization, else one per block.
    fn groups(&self, policy: Policy, disk: &[u32]) -> (Vec<u32>, usize) {
        if policy != Policy::ParallelHdd {
            return ((0..disk.len() as u32).collect(), disk.len());
        }
        let max_blocks = (self.cfg.max_group_sectors / self.cfg.block_sectors).max(1);
        group_sequential(
            self.trace,
            0..self.train,
            &self.sessions,
            &self.uni.index,
            disk,
            max_blocks.min(u32::MAX as u64) as u32,
        )
    }

    /// Replays the testing part on the array with block `uni.blocks[i]` on `disk[i]`.
    fn replay(&self, disk: &[u32]) -> Result<Report, Error> {
        let mut built = build(self.spec)?;
        let moves: Vec<(u64, usize)> = self
            .uni
            .blocks
            .iter()
            .zip(disk)
            .map(|(&b, &d)| (b, d as usize))
            .collect();
        built
            .array
            .as_placement_mut()
            .ok_or_else(|| Error::Config(format!("{} is not a placement array", self.spec)))?
            .set_disks(&moves)
            .map_err(Error::Config)?;
        let config = Config {
            pacing: Pacing::Open {
                speed: self.cfg.speed,
            },
            scheduler: SchedulerKind::Fcfs,
            wrap: true,
            ..Config::default()
        };
        let t = self.trace;
        let subs = (self.train..t.len()).map(|i| Submission {
            number: i as u64 + 1,
            ts_ns: t.ts_ns[i],
            req: reblock_device::DevRequest {
                sector: t.sector[i],
                sectors: t.sectors[i],
                write: t.write[i],
            },
            device: t.device[i],
            phase: reblock_sim::Phase::Normal,
            physical: false,
        });
        let replay = Replay::new(built.array, built.members, config)?;
        Ok(replay.run(&mut IterSource(subs), &mut ())?)
    }
}
