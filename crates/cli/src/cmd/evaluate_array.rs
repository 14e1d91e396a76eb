//! `reblock evaluate --array ...`: the parallel-array evaluation of seed 003 §V. The
//! blocks start on the array's disks by a Zipf-like skew, pairs are mined on the first
//! part of the trace, and the rest is replayed on the array with the static placement
//! and with each optimized one.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use reblock_eval::config::{parse_duration_ns, parse_size_bytes};
use reblock_parallel::report::{text_summary, write_html};
use reblock_parallel::session::{OpFilter, SessionMode};
use reblock_parallel::{evaluate_array, ArrayEvalConfig, ArraySpec, Policy};
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
}

/// The array policies when `--policies` is not given.
const DEFAULT_POLICIES: &str = "static,parallel";

fn parse_alphas(s: &str) -> Result<Vec<f64>> {
    let Some(list) = s.strip_prefix("zipf:") else {
        bail!("--initial `{s}`: expected zipf:ALPHA[,ALPHA...], e.g. zipf:0,0.5,1");
    };
    list.split(',')
        .map(|a| {
            a.trim()
                .parse::<f64>()
                .ok()
                .filter(|a| a.is_finite() && *a >= 0.0)
                .with_context(|| format!("--initial `{s}`: alpha `{a}` is not a number >= 0"))
        })
        .collect()
}

fn parse_supports(s: &str) -> Result<Vec<u32>> {
    s.split(',')
        .map(|v| {
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|&v| v >= 1)
                .with_context(|| format!("--support `{s}`: `{v}` is not a whole number >= 1"))
        })
        .collect()
}

pub(crate) fn parse_session(s: &str) -> Result<SessionMode> {
    if s == "request" {
        return Ok(SessionMode::Request);
    }
    parse_duration_ns(s)
        .map(SessionMode::WindowNs)
        .map_err(|e| anyhow::anyhow!("--session: {e}; or `request`"))
}

pub(crate) fn parse_ops(s: &str) -> Result<OpFilter> {
    OpFilter::parse(s).with_context(|| format!("--mine `{s}`: expected reads, writes or both"))
}

/// Bytes to whole 512-byte sectors, refusing sizes that are not a multiple.
pub(crate) fn sectors_of(flag: &str, s: &str) -> Result<u64> {
    let bytes = parse_size_bytes(flag, s)?;
    if !bytes.is_multiple_of(512) {
        bail!("--{flag} `{s}`: must be a multiple of 512 bytes");
    }
    Ok(bytes / 512)
}

/// `--capacity`: a size of at least one block.
fn capacity_bytes(s: &str, block_size: &str) -> Result<u64> {
    let bytes = parse_size_bytes("capacity", s)?;
    let block = sectors_of("block-size", block_size)? * 512;
    if bytes < block {
        bail!("--capacity `{s}`: must hold at least one block ({block} bytes)");
    }
    Ok(bytes)
}

/// The evaluation's configuration from the flags (`policies`: `--policies` if given).
pub fn config(
    spec: &str,
    a: &ArrayArgs,
    policies: Option<&str>,
    speed: Option<f64>,
) -> Result<ArrayEvalConfig> {
    let policies = policies
        .unwrap_or(DEFAULT_POLICIES)
        .split(',')
        .map(Policy::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let speed = speed.unwrap_or(1.0);
    if !(speed.is_finite() && speed > 0.0) {
        bail!("--speed {speed}: must be a positive number");
    }
    Ok(ArrayEvalConfig {
        array: ArraySpec::parse(spec)?,
        block_sectors: sectors_of("block-size", &a.block_size)?,
        alphas: parse_alphas(&a.initial)?,
        train_fraction: a.train_fraction,
        supports: parse_supports(&a.support)?,
        policies,
        session: parse_session(&a.session)?,
        ops: parse_ops(&a.mine)?,
        max_group_sectors: sectors_of("max-group", &a.max_group)?,
        seed: a.seed,
        speed,
        capacity_bytes: a
            .capacity
            .as_deref()
            .map(|c| capacity_bytes(c, a.block_size.as_str()))
            .transpose()?,
        ..ArrayEvalConfig::default()
    })
}

/// Runs the evaluation and prints or writes what was asked.
pub fn run(
    cfg: &ArrayEvalConfig,
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
    let out = evaluate_array(trace, name, cfg, |p| {
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
    fn lists_parse_and_bad_values_name_their_flag() {
        assert_eq!(parse_alphas("zipf:0,0.5, 1").unwrap(), vec![0.0, 0.5, 1.0]);
        let e = parse_alphas("uniform").unwrap_err().to_string();
        assert!(e.contains("--initial"), "{e}");
        let e = parse_alphas("zipf:0,-1").unwrap_err().to_string();
        assert!(e.contains("`-1`"), "{e}");
        assert_eq!(parse_supports("1,5,10").unwrap(), vec![1, 5, 10]);
        let e = parse_supports("1,0").unwrap_err().to_string();
        assert!(e.contains("--support") && e.contains("`0`"), "{e}");
        assert_eq!(parse_session("request").unwrap(), SessionMode::Request);
        assert_eq!(
            parse_session("1ms").unwrap(),
            SessionMode::WindowNs(1_000_000)
        );
        assert!(parse_session("soon").is_err());
        assert_eq!(parse_ops("reads").unwrap(), OpFilter::Reads);
        assert!(parse_ops("all").is_err());
        assert_eq!(sectors_of("block-size", "4KiB").unwrap(), 8);
        assert!(sectors_of("block-size", "1000").is_err());
    }
}
