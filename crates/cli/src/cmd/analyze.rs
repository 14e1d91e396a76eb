//! `reblock analyze`: characterize a workload in one streaming pass (seed 000 §2: Table 1,
//! Figure 1; partial determinism; working-set overlap) and advise a layout strategy (seed
//! 001 Table 4.1). `--report DIR` writes an HTML page with the plots.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use reblock_analyze::units;
use reblock_analyze::{analyze_trace, device_bytes, sidecar, Analysis, Config, Interval};
use reblock_trace::TraceReader;

use crate::input::{report_bad_lines, TraceInput};
use crate::progress::Progress;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: TraceInput,
    /// Print the whole analysis as one JSON object on stdout (for scripts).
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML report (index.html plus SVG plots) into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Page size the statistics count in: bytes, or with a K/M suffix (BORG uses 4 KiB).
    #[arg(long, default_value = "4096", value_parser = units::parse_size_bytes)]
    pub page_size: u64,
    /// Working-set interval: a duration (`1d`, `1h`, `30m`, `10s`), a plain N for every N
    /// requests, or `days` for the "DAY N START" markers of the trace's .meta.json.
    #[arg(long, default_value = "1d")]
    pub interval: String,
    /// Size of the traced device (bytes or K/M/G/T), for the fraction touched. Default:
    /// `device_sectors` of the trace's .meta.json if there is one, else unknown.
    #[arg(long, value_name = "BYTES|SIZE", value_parser = units::parse_size_bytes)]
    pub device_size: Option<u64>,
    /// Gaps between arrivals at least this long count as idle periods.
    #[arg(long, default_value = "100ms", value_parser = units::parse_duration_ns)]
    pub idle_threshold: u64,
    /// Window over which burstiness (index of dispersion) counts arrivals.
    #[arg(long, default_value = "1s", value_parser = units::parse_duration_ns)]
    pub burst_window: u64,
}

pub fn run(args: Args) -> Result<()> {
    let meta = sidecar::find(&args.input.trace).map_err(anyhow::Error::msg)?;
    if !args.page_size.is_multiple_of(512) {
        bail!(
            "--page-size {}: must be a whole number of 512-byte sectors",
            args.page_size
        );
    }
    let (mut reader, mut progress) = args.input.open_with_progress("analyzing")?;
    let config = Config {
        page_bytes: args.page_size,
        interval: interval(&args.interval, meta.as_ref())?,
        device_bytes: device_bytes(args.device_size, meta.as_ref(), &reader),
        idle_threshold_ns: args.idle_threshold,
        burst_window_ns: args.burst_window,
    };
    let analysis = analyze(&mut reader, config, &mut progress)?;
    progress.finish();
    report_bad_lines(&reader);
    if analysis.requests == 0 {
        bail!(
            "{}: the trace holds no requests",
            args.input.trace.display()
        );
    }
    if let Some(dir) = &args.report {
        let index = write_report(dir, &analysis, &args.input.trace)?;
        eprintln!("reblock: report written to {}", index.display());
    }
    if args.json {
        println!("{}", serde_json::to_string(&analysis)?);
    } else {
        print_table(&analysis, &args.input.trace, reader.format_name());
    }
    Ok(())
}

/// Parses `--interval` (see [`sidecar::interval`]).
pub fn interval(spec: &str, meta: Option<&sidecar::Sidecar>) -> Result<Interval> {
    sidecar::interval(spec, meta).map_err(anyhow::Error::msg)
}

/// Streams every request of `reader` through the analyzer, ticking `progress`.
pub fn analyze(
    reader: &mut TraceReader,
    config: Config,
    progress: &mut Progress,
) -> Result<Analysis> {
    let analysis = analyze_trace(reader, config, |n| progress.set_position(n))?;
    Ok(analysis)
}

pub fn write_report(dir: &Path, a: &Analysis, trace: &Path) -> Result<PathBuf> {
    let title = format!("reblock analysis of {}", trace.display());
    reblock_analyze::report::write(dir, a, &title)
        .with_context(|| format!("writing the report into {}", dir.display()))
}

fn print_table(a: &Analysis, trace: &Path, format: &str) {
    println!("{:<38} {} ({format})", "trace", trace.display());
    for (k, v) in reblock_analyze::report::summary_rows(a) {
        println!("{k:<38} {v}");
    }
    println!(
        "{:<38} {} intervals ({}), overlap with the first: {}",
        "working sets",
        a.intervals.len(),
        a.interval,
        a.working_set_overlap
            .iter()
            .map(|o| format!("{o:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (k, v) in reblock_analyze::report::timing_rows(a) {
        println!("{k:<38} {v}");
    }
    println!("{:<38} {}", "advice", a.advice.summary);
    for r in &a.advice.reasons {
        println!("{:<38}   - {r}", "");
    }
}
