//! `reblock pairs`: the frequent block pairs of a trace, as the parallel-array optimizer
//! mines them (sessions, then pairs seen in at least `--support` sessions), streamed over
//! the whole trace. The Python package's Spark job prints the same JSON on a cluster.

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use reblock_parallel::pairs::{mine_pairs, PairMining, DEFAULT_PAIR_WINDOW};
use reblock_parallel::session::{Blocking, SessionConfig};

use super::evaluate_array::{parse_ops, parse_session, sectors_of};
use crate::input::{report_bad_lines, TraceInput};

/// `reblock pairs trace.parquet --support 5 --json`
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: TraceInput,
    /// Keep the pairs of blocks that share at least N sessions.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub support: u32,
    /// Sessions: `request` (the blocks of one request) or a time window of arrivals
    /// handled together, measured from the session's first request (`100us`, `1ms`).
    #[arg(long, default_value = "100us", value_name = "S")]
    pub session: String,
    /// Which requests form sessions: reads, writes or both.
    #[arg(long, default_value = "both", value_name = "OPS")]
    pub mine: String,
    /// Block size: the unit paired (512 B blocks, as the optimizer's evaluation uses).
    #[arg(long, default_value = "512", value_name = "SIZE")]
    pub block_size: String,
    /// Pair each block with the next K blocks of its session (K = disks - 1 loses nothing
    /// a placement on that many disks can use; 13 suits the default 14-disk array).
    #[arg(long, default_value_t = DEFAULT_PAIR_WINDOW, value_name = "K")]
    pub window: usize,
    /// Print `{"pairs": [{"a", "b", "support"}, ...]}` on stdout (blocks a < b, sorted).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<()> {
    if args.support == 0 {
        bail!("--support 0: must be at least 1");
    }
    if args.window == 0 {
        bail!("--window 0: must be at least 1");
    }
    let cfg = PairMining {
        sessions: SessionConfig {
            blocking: Blocking {
                block_sectors: sectors_of("block-size", &args.block_size)?.max(1),
                wrap_sectors: None,
            },
            mode: parse_session(&args.session)?,
            ops: parse_ops(&args.mine)?,
        },
        window: args.window,
        support: args.support,
    };
    let mut reader = args.input.open()?;
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {human_pos} requests mined ({per_sec})")
            .expect("valid template"),
    );
    let mined = mine_pairs(&mut reader, &cfg, |n| bar.set_position(n))?;
    bar.finish_and_clear();
    report_bad_lines(&reader);
    if args.json {
        println!("{}", serde_json::to_string(&mined)?);
        return Ok(());
    }
    println!(
        "{} requests, {} sessions, {} distinct pairs; {} seen in at least {} session(s):",
        mined.requests,
        mined.sessions,
        mined.distinct_pairs,
        mined.pairs.len(),
        args.support
    );
    for p in &mined.pairs {
        println!("{:>14} {:>14} {:>8}", p.a, p.b, p.support);
    }
    Ok(())
}
