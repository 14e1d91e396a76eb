//! Records the requests a block device receives, with the issuing process, as a native
//! trace (`<ts_ns> <pid> <command> <sector> <sectors> <R|W>`, DESIGN.md "Units and formats").
//!
//! Backends:
//! - `tracefs` (preferred): a private tracefs instance with the `block:block_bio_queue`
//!   event filtered to the device (see [`tracefs`]); timestamps are CLOCK_MONOTONIC ns
//!   (trace clock `mono`, microsecond precision), so they are comparable with other
//!   monotonic timestamps taken on the same machine while it has not rebooted.
//! - `blktrace`: `blktrace -d DEV -o - | blkparse -i -`, queue ('Q') events only;
//!   timestamps are ns since blktrace started. Many kernels refuse it (EPERM under
//!   lockdown or in VMs); the error says so.
//!
//! The tracing state is always restored: the instance (or the blktrace children) is torn
//! down by guards on success, error and SIGINT/SIGTERM alike.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

pub mod blktrace;
pub mod device;
pub mod error;
pub mod loopdev;
mod pipe;
mod sink;
pub mod stop;
pub mod tracefs;

pub use device::BlockDevice;
pub use error::RecordError;
pub use stop::StopReason;

use pipe::Ready;
use reblock_trace::{LineFormat, ParseState, Parsed};
use sink::Sink;

/// Which kernel facility records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// tracefs, falling back to blktrace when tracefs is unavailable.
    #[default]
    Auto,
    Tracefs,
    Blktrace,
}

/// How to record.
#[derive(Clone, Debug)]
pub struct Options {
    pub backend: Backend,
    /// Stop after this long; `None` records until SIGINT/SIGTERM.
    pub duration: Option<Duration>,
    /// Stop on SIGINT/SIGTERM (installs handlers for the recording's duration).
    pub handle_signals: bool,
    /// tracefs ring buffer per CPU, KiB: larger loses fewer events under bursts.
    pub buffer_kb: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: Backend::Auto,
            duration: None,
            handle_signals: true,
            buffer_kb: 4096,
        }
    }
}

/// What a recording captured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub device: String,
    /// The device's size in 512-byte sectors (what the trace's .meta.json records).
    pub device_sectors: u64,
    /// The drive's model as the kernel reports it (none for a loop or device-mapper
    /// device): `evaluate` without --device models the drive it names when it knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_model: Option<String>,
    /// The backend that recorded (never `auto`).
    pub backend: Option<Backend>,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes: u64,
    /// Events without data (flushes, discards, empty preflushes), not in the trace.
    pub skipped_events: u64,
    /// Events the kernel lost because its buffer overflowed: the trace misses requests.
    pub lost_events: u64,
    pub duration_s: f64,
    pub stopped_by: Option<StopReason>,
}

/// How often the recorder checks its stop condition and reports progress.
const TICK: Duration = Duration::from_millis(100);

/// Records `device` into `out` until the duration passes or a signal arrives.
pub fn record(device: &Path, out: impl Write, opts: &Options) -> Result<Summary, RecordError> {
    record_with(device, out, opts, |_| {})
}

/// [`record`], calling `progress` once when recording has begun (all counts zero), then
/// about every 100 ms with the counts so far.
pub fn record_with(
    device: &Path,
    out: impl Write,
    opts: &Options,
    mut progress: impl FnMut(&Summary),
) -> Result<Summary, RecordError> {
    let dev = BlockDevice::resolve(device)?;
    let summary = Summary {
        device: dev.path.display().to_string(),
        device_sectors: dev.sectors()?,
        device_model: dev.model(),
        ..Summary::default()
    };
    let sink = Sink::new(out, dev.trace_dev(), summary);
    let stop = stop::Stop::new(opts.duration, opts.handle_signals)?;
    match opts.backend {
        Backend::Tracefs => record_tracefs(&dev, sink, opts, &stop, &mut progress),
        Backend::Blktrace => blktrace::record(&dev, sink, &stop, &mut progress),
        Backend::Auto => match tracefs::find_root() {
            Ok(_) => record_tracefs(&dev, sink, opts, &stop, &mut progress),
            Err(tracefs_err) => match blktrace::record(&dev, sink, &stop, &mut progress) {
                Err(RecordError::BlktraceUnavailable { why }) => Err(RecordError::NoBackend {
                    tracefs: tracefs_err.to_string(),
                    blktrace: why,
                }),
                other => other,
            },
        },
    }
}

fn parse_tracefs(line: &str, state: &mut ParseState) -> Result<Parsed, String> {
    reblock_trace::format::tracefs::Tracefs
        .parse(line, state)
        .map_err(|e| e.to_string())
}

fn record_tracefs<W: Write>(
    dev: &BlockDevice,
    mut sink: Sink<W>,
    opts: &Options,
    stop: &stop::Stop,
    progress: &mut impl FnMut(&Summary),
) -> Result<Summary, RecordError> {
    let root = tracefs::find_root()?;
    let config = tracefs::InstanceConfig {
        trace_dev: dev.trace_dev(),
        buffer_kb: opts.buffer_kb,
    };
    let instance = tracefs::Instance::start(&root, config)?;
    let pipe_path = instance.pipe_path();
    let open_err = |e| RecordError::io(format!("open {}", pipe_path.display()), e);
    let mut pipe = std::fs::File::open(&pipe_path).map_err(open_err)?;
    pipe::set_nonblocking(&pipe).map_err(open_err)?;
    let started = Instant::now();
    stop.begin();
    sink.summary.backend = Some(Backend::Tracefs);
    progress(&sink.summary);
    let mut buf = vec![0u8; 1 << 16];
    let read_err = |e| RecordError::io(format!("read {}", pipe_path.display()), e);
    let reason = loop {
        if let Some(reason) = stop.reason() {
            break reason;
        }
        if let Ready::Data(n) =
            pipe::read_ready(&mut pipe, &mut buf, stop.wait(TICK)).map_err(read_err)?
        {
            sink.feed(&buf[..n], "trace_pipe", parse_tracefs)?;
        }
        sink.summary.duration_s = started.elapsed().as_secs_f64();
        progress(&sink.summary);
    };
    // Stop new events, then drain what the buffer still holds.
    instance.stop_event()?;
    while let Ready::Data(n) = pipe::read_now(&mut pipe, &mut buf).map_err(read_err)? {
        sink.feed(&buf[..n], "trace_pipe", parse_tracefs)?;
    }
    let lost = instance.lost_events();
    drop(pipe);
    drop(instance);
    let mut summary = sink.finish("trace_pipe", parse_tracefs)?;
    summary.lost_events = summary.lost_events.max(lost);
    summary.duration_s = started.elapsed().as_secs_f64();
    summary.stopped_by = Some(reason);
    Ok(summary)
}
