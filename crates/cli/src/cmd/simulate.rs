//! `reblock simulate`: replay a trace on a modelled HDD, SSD or array and report disk busy
//! time (seed 000 §6's primary metric), response times, seeks and energy.

use std::path::PathBuf;

use anyhow::{Context, Result};
use reblock_sim::{
    Completion, Config, Observer, Pacing, PerRequestWriter, Replay, Report, SchedulerKind,
    SimError, Summary, TraceSource, Window,
};

use crate::input::{report_bad_lines, TraceInput};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: TraceInput,
    /// Device to simulate: a model (`hdd:barracuda`, `hdd:cheetah15k5`, `ssd:k9`), a
    /// parameter file (`drive.toml`), or an array (`raid0:4xhdd:cheetah15k5:stripe=128`,
    /// `raid1:2xssd:k9`, `raid5:5xhdd:cheetah15k5`). A wrong name lists the known ones.
    /// Every device of the trace (MSR disk number, SPC ASU, blkparse major,minor, the
    /// native device column) gets its own copy: figures per device and in total.
    #[arg(long, value_name = "SPEC")]
    pub device: String,
    /// Open loop: requests arrive at the trace's timestamps divided by X (BORG's evaluation
    /// replays a week in an hour at 168); 1 is real time. The default when --queue-depth is absent.
    #[arg(long, value_name = "X", conflicts_with = "queue_depth")]
    pub speed: Option<f64>,
    /// Closed loop: keep N requests outstanding whatever the timestamps (a benchmark's
    /// view: how fast could the device go).
    #[arg(long, value_name = "N")]
    pub queue_depth: Option<usize>,
    /// Order of each device's queue: fcfs (arrival order), sstf (nearest to the head
    /// first) or clook (ascending sweep from the head, then wrap to the lowest).
    #[arg(long, default_value = "fcfs", value_name = "NAME")]
    pub scheduler: SchedulerKind,
    /// Merge queued requests of the same direction with contiguous sectors up to this many
    /// sectors (256 = 128 KiB); 0 disables merging.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_merge_sectors: u32,
    /// Also report metrics per window of arrivals: a duration of simulated time (`60s`,
    /// `500ms`, `5m`) or a number of requests (`10000`).
    #[arg(long, value_name = "W")]
    pub window: Option<Window>,
    /// Fold addresses beyond the device's capacity back modulo the capacity (to replay a
    /// trace of a larger disk); without it such a request is an error.
    #[arg(long)]
    pub wrap: bool,
    /// Write each request's arrival, start, completion, member device and service time to
    /// FILE: CSV, or Parquet when FILE ends in `.parquet`.
    #[arg(long, value_name = "FILE")]
    pub per_request: Option<PathBuf>,
    /// Print the results as one JSON object on stdout (for scripts).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<()> {
    // Each device of the trace gets its own copy.
    let factory = reblock_sim::device_factory(&args.device)?;
    let config = Config {
        pacing: match args.queue_depth {
            Some(depth) => Pacing::Closed { depth },
            None => Pacing::Open {
                speed: args.speed.unwrap_or(1.0),
            },
        },
        scheduler: args.scheduler,
        max_merge_sectors: args.max_merge_sectors,
        window: args.window,
        wrap: args.wrap,
    };
    let replay = Replay::per_trace_device(factory, config.clone())?;
    let (reader, bar) = args.input.open_with_progress("simulating")?;
    let mut source = TraceSource::new(reader);
    let per_request = match &args.per_request {
        Some(path) => Some(PerRequestWriter::create(path)?),
        None => None,
    };
    let mut observer = Completions {
        bar,
        per_request,
        done: 0,
    };
    let report = replay
        .run(&mut source, &mut observer)
        .with_context(|| format!("simulating {}", args.input.trace.display()))?;
    observer.bar.finish();
    if let Some(out) = observer.per_request {
        out.finish()?;
    }
    report_bad_lines(source.reader());
    if report.overall.requests == 0 {
        anyhow::bail!(
            "{}: the trace holds no requests",
            args.input.trace.display()
        );
    }
    if args.json {
        let trace = args.input.trace.display().to_string();
        let out = reblock_sim::SimulationOutput::new(trace, &args.device, &config, &report);
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print_table(&args, &report);
    }
    Ok(())
}

/// Ticks the progress (a bar on a terminal, plain lines elsewhere) and feeds the
/// per-request file.
struct Completions {
    bar: crate::progress::Progress,
    per_request: Option<PerRequestWriter>,
    done: u64,
}

/// Completions between progress updates: the replay runs at millions per second.
const TICK: u64 = 1 << 14;

impl Observer for Completions {
    fn on_completion(&mut self, c: &Completion) -> Result<(), SimError> {
        self.done += 1;
        if self.done.is_multiple_of(TICK) {
            self.bar.set_position(self.done);
        }
        match &mut self.per_request {
            Some(out) => out.on_completion(c),
            None => Ok(()),
        }
    }
}

fn print_table(args: &Args, r: &Report) {
    let pacing = match args.queue_depth {
        Some(n) => format!("closed loop, queue depth {n}"),
        None => format!("open loop, speed {}x", args.speed.unwrap_or(1.0)),
    };
    println!("trace      {}", args.input.trace.display());
    println!("device     {}", args.device);
    println!(
        "replay     {pacing}, {} scheduler, merge up to {} sectors",
        args.scheduler.name(),
        args.max_merge_sectors
    );
    println!(
        "simulated  {:.3} s, {:.1} requests/s",
        r.makespan_s, r.throughput_iops
    );
    print_summary(&r.overall);
    if let Some(e) = r.energy_j {
        println!("energy               {e:.3} J");
    }
    print_trace_devices(r);
    println!();
    println!(
        "{:<6} {:<8} {:<24} {:>12} {:>6} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "member",
        "trace",
        "device",
        "busy s",
        "util",
        "I/Os",
        "resp ms",
        "p99 ms",
        "seek cyl",
        "non-seq",
        "cache"
    );
    for d in &r.devices {
        println!(
            "{:<6} {:<8} {:<24} {:>12.3} {:>5.1}% {:>10} {:>10.3} {:>10.3} {:>10.1} {:>7.1}% {:>7.1}%",
            d.member,
            d.trace_device.map_or("-".to_string(), |t| t.to_string()),
            d.name,
            d.busy_time_s,
            100.0 * d.utilization,
            d.ios,
            d.mean_response_ms,
            d.p99_response_ms,
            d.mean_seek_cylinders,
            100.0 * d.non_sequential_fraction,
            100.0 * d.cache_hit_fraction
        );
    }
    print_windows(r);
}

/// One line per device of the trace (each replayed on its own model), when there are
/// several; the totals above cover them all.
fn print_trace_devices(r: &Report) {
    if r.trace_devices.len() < 2 {
        return;
    }
    println!();
    println!(
        "{:<8} {:>10} {:>12} {:>10} {:>10} {:>10}",
        "trace", "requests", "busy s", "mean ms", "p95 ms", "p99 ms"
    );
    for t in &r.trace_devices {
        let s = &t.summary;
        println!(
            "{:<8} {:>10} {:>12.3} {:>10.3} {:>10.3} {:>10.3}",
            t.trace_device,
            s.requests,
            s.busy_time_s,
            s.mean_response_ms,
            s.p95_response_ms,
            s.p99_response_ms
        );
    }
}

fn print_summary(s: &Summary) {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3} ms"));
    println!(
        "requests   {} ({} reads, {} writes), {} device I/Os",
        s.requests, s.reads, s.writes, s.ios
    );
    println!("busy time            {:.3} s", s.busy_time_s);
    println!(
        "response             mean {:.3} ms, p50 {:.3}, p95 {:.3}, p99 {:.3}, max {:.3} ms",
        s.mean_response_ms,
        s.p50_response_ms,
        s.p95_response_ms,
        s.p99_response_ms,
        s.max_response_ms
    );
    println!(
        "read / write mean    {} / {}",
        ms(s.read_mean_response_ms),
        ms(s.write_mean_response_ms)
    );
    println!(
        "seek                 {:.1} cylinders per I/O, {:.1}% non-sequential, {:.1}% cache hits",
        s.mean_seek_cylinders,
        100.0 * s.non_sequential_fraction,
        100.0 * s.cache_hit_fraction
    );
}

fn print_windows(r: &Report) {
    if r.windows.is_empty() {
        return;
    }
    println!();
    println!(
        "{:>6} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "window", "start", "requests", "busy s", "mean ms", "p95 ms", "non-seq"
    );
    for w in &r.windows {
        let start = match (w.start_s, w.first_request) {
            (Some(s), _) => format!("{s:.1}s"),
            (None, Some(n)) => format!("#{n}"),
            _ => String::new(),
        };
        let s = &w.summary;
        println!(
            "{:>6} {:>12} {:>10} {:>10.3} {:>10.3} {:>10.3} {:>7.1}%",
            w.index,
            start,
            s.requests,
            s.busy_time_s,
            s.mean_response_ms,
            s.p95_response_ms,
            100.0 * s.non_sequential_fraction
        );
    }
}
