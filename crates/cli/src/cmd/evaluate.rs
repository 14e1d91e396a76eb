//! `reblock evaluate`: compare layout policies by replaying a trace with periodic
//! reconfiguration (seed 000 §6): N0 with an empty BOPT, then at each boundary plan from
//! the training data, copy (R_i, at speed 1) and replay N_i through the indirector.

use std::path::PathBuf;

use anyhow::{Context, Result};
use reblock_eval::options::{EvalProgress, TraceOrigin};
use reblock_eval::sizing::DEFAULT_DISK;
use reblock_eval::{evaluate_trace, evaluation_json, EvalOptions, Evaluation, PolicyResult, Sweep};

use super::evaluate_array::{self, ArrayArgs};
use crate::input::{report_bad_lines, TraceInput};
use crate::progress::Progress;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: TraceInput,
    /// Policies to compare, comma separated, in report order [default:
    /// vanilla,hot,borg,dlr-seq,dlr-frag]. vanilla (no reorganization) is the baseline the
    /// others are measured against; fs2 keeps FS2 replicas in free space, borg+fs2 does
    /// both BORG's placement and FS2's replicas. With --array: static, parallel, parallel-hdd
    /// [default: static,parallel].
    #[arg(long, value_name = "LIST")]
    pub policies: Option<String>,
    /// Device holding both the data and the BOPT: `hdd:barracuda`, `hdd:cheetah15k5`,
    /// `hdd:wd2500aaks`, `ssd:k9`, a parameter file, or an array (`raid0:4xhdd:cheetah15k5`).
    /// [default: sized from the data: the data area is the traced device's size from the
    /// trace's .meta.json, or else the trace's address span; the drive is the one the
    /// .meta.json names in `device_model` (a spec such as `hdd:cheetah15k5`, or the model
    /// string the kernel reports, e.g. `WDC WD2500AAKS-00B3A0`), else hdd:wd2500aaks, the
    /// 7200 rpm desktop drive of BORG's evaluation, when it holds the data and the BOPT,
    /// else the largest built-in drive with the addresses folded. The choice and why are
    /// printed and given in the JSON (`config.device`, `config.device_why`, `device_choice`)]
    #[arg(long, value_name = "SPEC")]
    pub device: Option<String>,
    /// Where the BOPT sits: auto (at the median address of the requests, where the
    /// expected seek to it is least), start, middle or end of the data area, or before a
    /// given sector (LBA).
    #[arg(long, default_value = "auto", value_name = "WHERE")]
    pub bopt_at: String,
    /// Size of the BOPT (read cache + write buffer): auto (every page the trace reads more
    /// than once, plus the write buffer's share, 4 MiB to a tenth of the device), or a
    /// size: 64MiB, 1G, ...
    #[arg(long, default_value = "auto", value_name = "SIZE")]
    pub bopt_size: String,
    /// Share of the BOPT given to the write buffer, 0..1 (BORG's evaluation gives 0.2 of a
    /// fixed 64 MiB region; with the region sized from the read working set, 0.1).
    #[arg(long, default_value = "0.1", value_name = "F")]
    pub write_buffer: String,
    /// Time between reconfigurations: a duration of trace time (1d, 6h, 30m, 90s) or a
    /// bare count of reconfigurations equally spaced over the trace (BORG's evaluation: 4).
    #[arg(long, default_value = "4", value_name = "I")]
    pub interval: String,
    /// Training data of each plan: cumulative (everything so far) or partial (the last
    /// interval only), as BORG's evaluation compares them.
    #[arg(long, default_value = "cumulative", value_name = "T")]
    pub training: String,
    /// Learn each plan from a decayed learning state kept across phases instead of
    /// --training: the phase just ended counts fully, the one before it D times, the one
    /// before that D² times...; 1 keeps everything (as cumulative), 0 forgets each phase
    /// (as partial). The same state `serve` keeps across re-plans and restarts.
    #[arg(long, value_name = "D")]
    pub learning_decay: Option<f64>,
    /// Normal phases replay at the trace's pace sped up this much [default: 168, as BORG's
    /// evaluation replays a week in an hour]; reconfiguration copies always replay at 1x. With --array, the testing
    /// part replays at this speed-up [default: 1].
    #[arg(long, value_name = "X")]
    pub speed: Option<f64>,
    /// Sensitivity sweep (as BORG's sensitivity study), one parameter at a time around the base run:
    /// `bopt-size=32MiB,64MiB;write-buffer=0,0.2,0.5;interval=2,4,8`.
    #[arg(long, value_name = "SPEC")]
    pub sweep: Option<String>,
    /// The degradation guard (the dissertation's future-work proposal), ON by default: every new plan must first
    /// win a trial on requests it was not trained on, and after each epoch the layout is
    /// compared with the plain one on a shadow replay; while the layout is slower, reads
    /// go home (dirty pages excepted) and writes go home too (a stale BOPT copy is
    /// dropped), so absorbed writes cannot cost more than they save.
    #[arg(long, overrides_with = "no_guard")]
    pub guard: bool,
    /// Turn the degradation guard off (the seeds' BORG).
    #[arg(long)]
    pub no_guard: bool,
    /// Requests per guard epoch.
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub guard_epoch: usize,
    /// What ends a normal phase: auto, interval, idle:SECS or hit-rate:DROP. auto: for a
    /// workload that runs in sessions separated by idle time and repeats them (a
    /// start-up capture's days), with a count --interval, the first reconfiguration
    /// right after the first session (256 requests or more between arrival gaps of at
    /// least 1% of the trace's span) of which 90% of the pages were read before it, the
    /// others at the longest such gaps after it, every phase at least half an interval
    /// long (fewer points when fewer fit); a trace with fewer such gaps than
    /// reconfigurations, or no such session, as interval. interval: equally spaced in trace time, as
    /// BORG's evaluation. idle:SECS: the first arrival gap of SECS once half an interval
    /// passed. hit-rate:DROP: the BOPT hit rate of a window falls DROP below the phase's
    /// first window's. The text and the JSON (`geometry.phase_boundaries`) say where the
    /// reconfigurations fell and by which rule.
    #[arg(long, default_value = "auto", value_name = "T")]
    pub trigger: String,
    /// Size of the data area: device (capacity minus the BOPT), trace (its address range)
    /// or a size (8G) [default: device with --device, else sized from the data].
    #[arg(long, value_name = "A")]
    pub data_area: Option<String>,
    /// Fold addresses past the data area back into it (a trace of a larger disk).
    #[arg(long)]
    pub wrap: bool,
    /// Free space FS2's replicas (policies fs2, borg+fs2) may use: `untouched` (every
    /// data-area page the trace never touches: an assumption, stated in the output), a
    /// fraction of the data area (`0.3`, spread over the untouched pages), `discards`
    /// (what the trace's discards freed: blkparse and tracefs captures of a file system
    /// mounted with `discard` or trimmed with fstrim), or a file holding
    /// `reblock freemap IMAGE --json` of the traced file system (without --data-area,
    /// the data area is then that file system's size, which the file states).
    #[arg(long, default_value = "untouched", value_name = "SPEC")]
    pub free_space: String,
    /// Page size in bytes (a multiple of 512).
    #[arg(long, default_value_t = 4096, value_name = "BYTES")]
    pub page_size: u32,
    /// Planning threshold: the least edge weight that joins a group (BORG's planner threshold).
    /// The default 2 keeps transitions seen once out of BORG's groups: on the bundled real
    /// traces they are mostly noise, and with 1 BORG lost to hot-block caching.
    #[arg(long, default_value_t = 2, value_name = "W")]
    pub min_edge_weight: u64,
    /// Write an HTML report with SVG plots into this directory (index.html).
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Print the results as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(
        flatten,
        next_help_heading = "Parallel-array evaluation (the parallel-I/O layout optimizer)"
    )]
    pub array: ArrayArgs,
}

/// The flags as the library's options: one path for the CLI and the Python package.
fn options(args: &Args) -> EvalOptions {
    EvalOptions {
        policies: args.policies.clone(),
        device: args.device.clone(),
        bopt_at: args.bopt_at.clone(),
        bopt_size: args.bopt_size.clone(),
        write_buffer: args.write_buffer.clone(),
        interval: args.interval.clone(),
        training: args.training.clone(),
        learning_decay: args.learning_decay,
        speed: args.speed,
        sweep: args.sweep.clone(),
        guard: !args.no_guard,
        guard_epoch: args.guard_epoch,
        trigger: args.trigger.clone(),
        data_area: args.data_area.clone(),
        wrap: args.wrap,
        free_space: args.free_space.clone(),
        page_size: args.page_size,
        min_edge_weight: args.min_edge_weight,
    }
}

pub fn run(args: Args) -> Result<()> {
    if let Some(spec) = &args.array.array {
        return run_array(spec, &args);
    }
    let opts = options(&args);
    // Bad flags are reported before the trace is read.
    opts.config(opts.device.as_deref().unwrap_or(DEFAULT_DISK))?;
    if let Some(s) = &opts.sweep {
        Sweep::parse(s)?;
    }
    let (mut reader, mut progress) = args.input.open_with_progress("reading")?;
    // Held encoded (about a quarter of a `Request` each), never as a vector; past
    // 4 MiB the log moves to a temporary file and is read back in windows.
    let mut requests = reblock_trace::RequestLog::new();
    while let Some(r) = reader.next_request()? {
        requests.push(r);
        if requests.len().is_multiple_of(65_536) {
            progress.set_position(requests.len() as u64);
        }
    }
    progress.finish();
    report_bad_lines(&reader);
    if let Some(e) = requests.spill_failure() {
        eprintln!(
            "reblock: warning: could not move the trace's requests to a temporary file \
             ({e}); they stay in memory (set TMPDIR to a writable directory)"
        );
    }
    let origin = TraceOrigin {
        path: &args.input.trace,
        footer_sectors: reader.parquet_meta().and_then(|m| m.device_sectors),
        discards: reader.discards(),
    };
    let trace = args.input.trace.display().to_string();
    let mut bar = None;
    let evals = evaluate_trace(requests, &origin, &opts, &mut |p| show(&mut bar, &trace, p))
        .with_context(|| format!("evaluating {trace}"))?;
    if let Some(b) = bar {
        b.finish();
    }
    for e in &evals {
        let dir = match e.trace_device {
            Some(dev) => args
                .report
                .as_ref()
                .map(|d| d.join(format!("device-{dev}"))),
            None => args.report.clone(),
        };
        write_report(dir.as_deref(), &e.evaluation)?;
        if args.json {
            continue;
        }
        if let Some(dev) = e.trace_device {
            println!("== trace device {dev}");
        }
        print_tables(&e.evaluation);
        if e.trace_device.is_some() {
            println!();
        }
    }
    if args.json {
        println!("{}", evaluation_json(&trace, &evals));
    }
    Ok(())
}

/// Progress on stderr: the sized device's line, and a bar of phases per device.
fn show(bar: &mut Option<Progress>, trace: &str, p: EvalProgress) {
    match p {
        EvalProgress::Split { devices } => eprintln!(
            "reblock: {trace} addresses {devices} devices; each is evaluated on a device of its own"
        ),
        EvalProgress::Sized(c) => eprintln!("{}", c.describe()),
        EvalProgress::Device { phases } => {
            if let Some(b) = bar.take() {
                b.finish();
            }
            *bar = Some(Progress::new("evaluating", "phases", Some(phases)));
        }
        EvalProgress::Phase(point, policy, phase) => {
            let Some(bar) = bar.as_mut() else { return };
            if bar.position() + 1 >= bar.length().unwrap_or(0) {
                bar.inc_length(1);
            }
            bar.set_message(format!("{point}: {policy} {phase}"));
            bar.inc(1);
        }
    }
}

fn write_report(dir: Option<&std::path::Path>, eval: &Evaluation) -> Result<()> {
    let Some(dir) = dir else { return Ok(()) };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("index.html");
    std::fs::write(&path, reblock_eval::html::render(eval))
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("reblock: report written to {}", path.display());
    Ok(())
}

/// `--array`: the seed 003 evaluation on the whole trace, read columnar.
fn run_array(spec: &str, args: &Args) -> Result<()> {
    let cfg = evaluate_array::options(spec, &args.array, args.policies.as_deref(), args.speed)
        .config()?;
    let pairs = evaluate_array::read_pairs(&args.array, &cfg.supports)?;
    let mut reader = args.input.open()?;
    let mut trace = reblock_trace::Trace::default();
    while let Some(r) = reader.next_request()? {
        trace.push(r);
    }
    report_bad_lines(&reader);
    if trace.is_empty() {
        anyhow::bail!(
            "{}: the trace holds no requests",
            args.input.trace.display()
        );
    }
    reblock_sim::require_single_device(trace.device.iter().copied())?;
    let name = args.input.trace.display().to_string();
    let pairs = pairs.as_ref();
    evaluate_array::run(&cfg, pairs, &trace, &name, args.report.as_ref(), args.json)
}

fn print_tables(e: &Evaluation) {
    let g = &e.geometry;
    println!("trace      {} ({} requests)", e.trace, e.requests);
    println!(
        "layout     data area {} sectors, BOPT {} pages ({} read cache + {} write buffer) at sector {}{}",
        g.data_sectors,
        g.bopt_pages,
        g.read_cache_pages,
        g.write_buffer_pages,
        g.bopt_start_sector,
        if g.wrapped_requests > 0 { format!(", {} requests wrapped", g.wrapped_requests) } else { String::new() }
    );
    if let (Some(pages), Some(how)) = (g.free_pages, &g.free_space) {
        println!("free space {pages} pages ({how})");
    }
    if let Some(b) = &g.phase_boundaries {
        println!("phases     {}", boundaries_line(b));
    }
    println!();
    print_policies(e, &e.policies);
    println!();
    print_access_times(e);
    println!();
    print_phases(e);
    for run in &e.runs {
        println!();
        println!("sweep {} = {}", run.parameter, run.value);
        print_policies(e, &run.policies);
    }
}

/// Where the reconfigurations fell, in words: the rule, then each point's request,
/// arrival and the idle time before it.
fn boundaries_line(b: &reblock_eval::boundaries::PhaseBoundaries) -> String {
    use reblock_eval::boundaries::BoundaryRule;
    let rule = match b.rule {
        BoundaryRule::IdleGaps => "at the trace's longest idle gaps",
        BoundaryRule::EqualTime => "equally spaced in trace time",
    };
    let points: Vec<String> = (b.points.iter())
        .map(|p| {
            format!(
                "request {} at {:.1} s ({:.2} s idle)",
                p.request, p.at_s, p.idle_s
            )
        })
        .collect();
    format!(
        "{} reconfigurations {rule}: {}",
        b.points.len(),
        points.join(", ")
    )
}

fn print_policies(e: &Evaluation, policies: &std::collections::BTreeMap<String, PolicyResult>) {
    // The headline is the total (normal phases plus the copies that got there) against
    // vanilla's total; the normal phases alone follow.
    println!(
        "{:<9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>8} {:>9} {:>8} {:>7}",
        "policy",
        "total/van",
        "busy s",
        "normal s",
        "reconf s",
        "energy J",
        "normal/van",
        "hit",
        "moved MiB",
        "non-seq",
        "seek cyl",
        "plan s",
        "guarded"
    );
    for p in &e.policy_order {
        let Some(r) = policies.get(p) else { continue };
        println!(
            "{:<9} {:>9} {:>10.3} {:>10.3} {:>10.3} {:>10} {:>10} {:>6.1}% {:>10.1} {:>7.1}% {:>9.0} {:>8.3} {:>7}",
            p,
            r.busy_vs_vanilla.map_or("-".into(), |v| format!("{v:.3}")),
            r.busy_time_s,
            r.normal_busy_time_s,
            r.reconfig_busy_time_s,
            r.energy_j.map_or("-".into(), |v| format!("{v:.1}")),
            r.normal_busy_vs_vanilla.map_or("-".into(), |v| format!("{v:.3}")),
            100.0 * r.hit_rate,
            r.bytes_moved as f64 / 1048576.0,
            100.0 * r.non_sequential_fraction,
            r.mean_seek_cylinders,
            r.planning_cpu_s,
            r.guarded_epochs
        );
    }
}

/// FS2's access-time decomposition T_A of each policy's client requests (the normal
/// busy time: replica writes and copies are reconfiguration).
fn print_access_times(e: &Evaluation) {
    println!(
        "{:<9} {:>10} {:>10} {:>10} {:>10}   (client requests: normal s = seek + rotation + transfer + other)",
        "policy", "seek s", "rotation s", "transfer s", "other s"
    );
    for p in &e.policy_order {
        let Some(r) = e.policies.get(p) else { continue };
        let a = &r.client_access_time;
        println!(
            "{:<9} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            p, a.seek_s, a.rotation_s, a.transfer_s, a.other_s
        );
    }
}

/// Busy seconds per phase (rows) and policy (columns), as seed 000 Figures 6-8 plot them.
fn print_phases(e: &Evaluation) {
    let order: Vec<&PolicyResult> = e
        .policy_order
        .iter()
        .filter_map(|p| e.policies.get(p))
        .collect();
    let Some(longest) = order.iter().map(|r| &r.phases).max_by_key(|p| p.len()) else {
        return;
    };
    print!("{:<6}", "phase");
    for p in &e.policy_order {
        print!(" {p:>10}");
    }
    println!("   (busy s)");
    for (i, ph) in longest.iter().enumerate() {
        print!("{:<6}", ph.name);
        for r in &order {
            match r.phases.get(i) {
                Some(x) => print!(" {:>10.3}", x.busy_time_s),
                None => print!(" {:>10}", "-"),
            }
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_defaults_are_the_librarys() {
        let args: Args = super::super::parse_flags(&["evaluate", "t.trace"]);
        assert_eq!(options(&args), EvalOptions::default());
    }
}
