//! `reblock evaluate --array ...`: the parallel-array evaluation of seed 003 §V. The
//! blocks start on the array's disks by a Zipf-like skew, pairs are mined on the first
//! part of the trace, and the rest is replayed on the array with the static placement
//! and with each optimized one.

use std::path::PathBuf;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use reblock_eval::array_options::ArrayOptions;
use reblock_parallel::report::{text_summary, write_html};
use reblock_parallel::{evaluate_array_with_pairs, ArrayEvalConfig, PairsFile};
use reblock_trace::Trace;

/// The flags of the array evaluation; `--array` switches `evaluate` to it.
#[derive(clap::Args, Debug, Default)]
pub struct ArrayArgs {
    /// Evaluate the parallel-array layout optimizer (dynamic data layout for parallel I/O) on an array with an
    /// explicit block-to-disk placement instead of BORG-style policies: `ssd:14` (the
    /// Samsung K9XXG08UXM SSD of that paper), `hdd:100` (Cheetah 15K.5, write cache off so
    /// writes show their media latency as in that paper), or `NxDEVICE` (`8xhdd:barracuda`,
    /// `100xhdd:cheetah15k5` for write-back). Policies are then static, parallel and
    /// parallel-hdd.
    #[arg(
        long,
        value_name = "SPEC",
        conflicts_with_all = [
            "device", "bopt_at", "bopt_size", "write_buffer", "interval", "training",
            "sweep", "guard", "no_guard", "guard_epoch", "trigger", "data_area", "wrap",
            "page_size", "min_edge_weight",
        ]
    )]
    pub array: Option<String>,
    /// Initial placement of blocks over the disks: `zipf:ALPHA` with one or more alphas
    /// (`zipf:0,0.5,1`); alpha 0 is uniform, 1 strongly skewed towards the first disks.
    #[arg(
        long,
        default_value = "zipf:0,0.2,0.4,0.6,0.8,1",
        value_name = "zipf:A,..",
        requires = "array"
    )]
    pub initial: String,
    /// Share of the trace that trains the optimizer; the rest is replayed (as the paper's evaluation).
    #[arg(long, default_value_t = 0.5, value_name = "F", requires = "array")]
    pub train_fraction: f64,
    /// Minimum supports of the mined pairs, one run per value (the paper studies cost against support).
    #[arg(
        long,
        default_value = "1,5,10",
        value_name = "LIST",
        requires = "array"
    )]
    pub support: String,
    /// Sessions (requests mined together for correlated pairs): `request` (the blocks of one request) or a time window
    /// of arrivals handled together (`100us`, `1ms`).
    #[arg(long, default_value = "100us", value_name = "S", requires = "array")]
    pub session: String,
    /// Which requests the miner watches: reads, writes or both.
    #[arg(long, default_value = "both", value_name = "OPS", requires = "array")]
    pub mine: String,
    /// Block size: the unit placed on a disk (the paper used 512 B blocks).
    #[arg(long, default_value = "512", value_name = "SIZE", requires = "array")]
    pub block_size: String,
    /// Largest group of sequential blocks the HDD optimization (parallel-hdd: sequential
    /// blocks grouped for disks) places as one vertex.
    #[arg(long, default_value = "64KiB", value_name = "SIZE", requires = "array")]
    pub max_group: String,
    /// Capacity W of a disk in the optimizer's colouring (Algorithm 1's bin size): no
    /// disk is given more blocks than this (`64MiB`, `1GiB`); default: a member's size.
    #[arg(long, value_name = "SIZE", requires = "array")]
    pub capacity: Option<String>,
    /// Seed of the initial placement's random draws.
    #[arg(long, default_value_t = 3, value_name = "N", requires = "array")]
    pub seed: u64,
    /// Take the optimizer's pairs from this file instead of mining the training part: the
    /// `{"pairs": [{"a", "b", "support"}, ...]}` that `reblock pairs --json` or the Python
    /// package's Spark job prints, mined from the training part (the first
    /// `--train-fraction` of the requests) with the same --block-size, --session, --mine
    /// and a --window of the disks less one. Each --support keeps the file's pairs seen
    /// at least that often, so mine with --support 1 (or the least value asked here).
    #[arg(long, value_name = "PAIRS.json", requires = "array")]
    pub pairs: Option<PathBuf>,
}

pub(crate) use reblock_eval::array_options::{parse_ops, parse_session, sectors_of};

/// The flags as the library's options: one path for the CLI and the Python package
/// (`policies`: `--policies` if given).
pub fn options(
    spec: &str,
    a: &ArrayArgs,
    policies: Option<&str>,
    speed: Option<f64>,
) -> ArrayOptions {
    ArrayOptions {
        array: spec.to_string(),
        policies: policies.map(str::to_string),
        speed,
        initial: a.initial.clone(),
        train_fraction: a.train_fraction,
        support: a.support.clone(),
        session: a.session.clone(),
        mine: a.mine.clone(),
        block_size: a.block_size.clone(),
        max_group: a.max_group.clone(),
        capacity: a.capacity.clone(),
        seed: a.seed,
    }
}

/// Reads `--pairs`, if given (before the trace, so that a bad file fails at once), and
/// notes a `--support` below every support in it: the file may have been mined with a
/// higher one and then lacks pairs such a run would use (it cannot say how it was mined).
pub fn read_pairs(a: &ArrayArgs, supports: &[u32]) -> Result<Option<PairsFile>> {
    let Some(file) = a.pairs.as_deref().map(PairsFile::read).transpose()? else {
        return Ok(None);
    };
    if let Some(note) = file.support_note(supports) {
        eprintln!("reblock: note: {note}");
    }
    Ok(Some(file))
}

/// Runs the evaluation (on `pairs` when given) and prints or writes what was asked.
pub fn run(
    cfg: &ArrayEvalConfig,
    pairs: Option<&PairsFile>,
    trace: &Trace,
    name: &str,
    report: Option<&PathBuf>,
    json: bool,
) -> Result<()> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} replays  {msg}")
            .expect("valid template"),
    );
    let out = evaluate_array_with_pairs(trace, name, cfg, pairs, |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(p.step);
    })
    .with_context(|| format!("evaluating {name} on {}", cfg.array.device_spec(1)))?;
    bar.finish_and_clear();
    if let Some(dir) = report {
        let path = write_html(dir, &out).with_context(|| format!("writing {}", dir.display()))?;
        eprintln!("reblock: report written to {}", path.display());
    }
    if json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        println!(
            "trace      {} ({} requests: {} training, {} testing; {} sessions, {} distinct pairs)",
            out.trace,
            out.requests,
            out.train_requests,
            out.test_requests,
            out.training_sessions,
            out.distinct_pairs
        );
        if let Some(file) = &out.pairs_file {
            println!("pairs      from {file} (not mined here)");
        }
        println!("array      {} ({} B blocks)", out.array, out.block_bytes);
        println!();
        print!("{}", text_summary(&out));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_defaults_are_the_librarys() {
        let argv = ["evaluate", "t.trace", "--array", "ssd:14"];
        let f: super::super::evaluate::Args = super::super::parse_flags(&argv);
        let want = ArrayOptions {
            array: "ssd:14".into(),
            ..ArrayOptions::default()
        };
        assert_eq!(
            options("ssd:14", &f.array, f.policies.as_deref(), f.speed),
            want
        );
    }
}
