//! `reblock record`: capture a block device's requests, with the process that issued each,
//! as a native trace (`<ts_ns> <pid> <command> <sector> <sectors> <R|W>`).

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use reblock_record::{record_with, Backend, Options, Summary};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// tracefs, else blktrace.
    Auto,
    /// A private tracefs instance with the block:block_bio_queue event (needs root).
    Tracefs,
    /// blktrace | blkparse (needs root, debugfs, and a kernel that allows it).
    Blktrace,
}

/// Record a block device's requests with process context to a native trace.
///
/// Timestamps are CLOCK_MONOTONIC nanoseconds (tracefs; microsecond precision). The
/// tracing state is restored on exit, Ctrl-C included. Example:
/// `reblock record --device /dev/loop0 --out app.trace --duration 60`
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Block device to record, e.g. /dev/sda or /dev/loop0.
    #[arg(long, value_name = "DEV")]
    pub device: PathBuf,
    /// Trace file to write (native text); '-' writes to standard output. The device's
    /// size goes into FILE.meta.json beside it (`device_sectors`), which `analyze` and
    /// `convert` read, with the drive's model as the kernel reports it (`device_model`),
    /// which `evaluate` without --device models when it is a built-in one.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Stop after this many seconds; without it, record until Ctrl-C (SIGINT) or SIGTERM.
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Which kernel facility records.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// tracefs ring buffer per CPU in KiB; raise it if the summary reports lost events.
    #[arg(long, value_name = "KIB", default_value_t = 4096)]
    pub buffer_kb: u32,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let duration = match args.duration {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            anyhow::bail!("--duration {s}: must be a positive number of seconds")
        }
        s => s.map(Duration::from_secs_f64),
    };
    let opts = Options {
        backend: match args.backend {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Tracefs => Backend::Tracefs,
            BackendArg::Blktrace => Backend::Blktrace,
        },
        duration,
        handle_signals: true,
        buffer_kb: args.buffer_kb,
    };
    let to_stdout = args.out.as_os_str() == "-";
    let out: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        let file = File::create(&args.out)
            .with_context(|| format!("--out {}: cannot create", args.out.display()))?;
        Box::new(file)
    };
    let spinner = Spinner::new(&args);
    let summary = record_with(&args.device, BufWriter::new(out), &opts, |s| {
        spinner.tick(s)
    })
    .with_context(|| format!("recording {}", args.device.display()))?;
    spinner.finish();
    if !to_stdout {
        write_meta(&args.out, &summary)?;
    }
    let text = if args.json {
        serde_json::to_string_pretty(&summary)? + "\n"
    } else {
        describe(&summary, &args.out)
    };
    // With the trace on standard output, the summary goes to standard error.
    if to_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    Ok(())
}

/// Writes `<trace>.meta.json` beside the trace: the device size `analyze` and `convert`
/// read from it (`convert` carries it into a Parquet footer as `reblock.device_sectors`).
fn write_meta(trace: &std::path::Path, summary: &Summary) -> Result<()> {
    let path = PathBuf::from(format!("{}.meta.json", trace.display()));
    let mut meta = serde_json::json!({
        "device_sectors": summary.device_sectors,
        "device": summary.device,
        "recorded_by": "reblock record",
    });
    if let Some(model) = &summary.device_model {
        meta["device_model"] = model.as_str().into();
    }
    std::fs::write(&path, serde_json::to_string_pretty(&meta)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// The live request count on a terminal; a single "recording" line otherwise, so that
/// scripts (and tests) can tell when recording has begun.
struct Spinner {
    bar: Option<ProgressBar>,
    announce: String,
    started: std::cell::Cell<bool>,
}

impl Spinner {
    fn new(args: &Args) -> Spinner {
        let until = match args.duration {
            Some(s) => format!("for {s} s (Ctrl-C stops early)"),
            None => "until Ctrl-C".to_string(),
        };
        let announce = format!(
            "reblock: recording {} to {} {until}",
            args.device.display(),
            args.out.display()
        );
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        Spinner {
            bar,
            announce,
            started: std::cell::Cell::new(false),
        }
    }

    fn tick(&self, s: &Summary) {
        if !self.started.replace(true) {
            match &self.bar {
                Some(bar) => bar.println(&self.announce),
                None => eprintln!("{}", self.announce),
            }
        }
        if let Some(bar) = &self.bar {
            bar.set_message(format!(
                "{} requests ({} reads, {} writes), {}",
                s.requests,
                s.reads,
                s.writes,
                human_bytes(s.bytes)
            ));
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn describe(s: &Summary, out: &std::path::Path) -> String {
    let backend = match s.backend {
        Some(Backend::Blktrace) => "blktrace",
        _ => "tracefs",
    };
    let mut text = format!(
        "recorded {} with {backend} for {:.2} s into {}\n  requests: {} ({} reads, {} writes)\n  \
         bytes:    {} ({})\n  skipped:  {} events without data (flushes, discards)\n",
        s.device,
        s.duration_s,
        out.display(),
        s.requests,
        s.reads,
        s.writes,
        s.bytes,
        human_bytes(s.bytes),
        s.skipped_events,
    );
    if s.lost_events > 0 {
        text += &format!(
            "  LOST:     {} events: the kernel's ring buffer overflowed, so the trace misses \
             requests; record again with a larger --buffer-kb\n",
            s.lost_events
        );
    } else {
        text += "  lost:     0 events\n";
    }
    text
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_by_hand() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(12288), "12.0 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }

    #[test]
    fn lost_events_are_called_out() {
        let s = Summary {
            lost_events: 7,
            ..Summary::default()
        };
        let text = describe(&s, std::path::Path::new("t"));
        assert!(text.contains("LOST:     7 events"), "{text}");
        assert!(text.contains("--buffer-kb"), "{text}");
    }
}
