//! `reblock replay`: send a trace's reads and writes to an NBD export (reblock serve,
//! nbdkit, qemu-nbd, ...) and report what it took: requests, bytes, elapsed time and
//! latency percentiles. With `serve --emulate` it measures a layout's effect end to end.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use reblock_nbd::client::{self, Command, ExportInfo, Receiver, Sender};
use reblock_trace::{Op, Request};
use serde::Serialize;

use crate::input::{report_bad_lines, TraceInput};
use crate::progress::Progress;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: TraceInput,
    /// The export's Unix socket (e.g. what `reblock serve --unix SOCK` listens on).
    #[arg(
        long,
        value_name = "SOCK",
        conflicts_with = "tcp",
        required_unless_present = "tcp"
    )]
    pub unix: Option<PathBuf>,
    /// The export's TCP address: HOST:PORT, or PORT for 127.0.0.1.
    #[arg(long, value_name = "ADDR")]
    pub tcp: Option<String>,
    /// Export name to open ("" asks for the server's default export).
    #[arg(long, default_value = "", value_name = "NAME")]
    pub export: String,
    /// Open loop: send each request at its trace timestamp divided by X (1 is real time),
    /// whatever is still outstanding.
    #[arg(long, value_name = "X", conflicts_with = "queue_depth")]
    pub speed: Option<f64>,
    /// Closed loop: keep N requests outstanding, ignoring timestamps [default: 1, one
    /// request at a time in trace order, which is what an emulated disk measures best].
    #[arg(long, value_name = "N")]
    pub queue_depth: Option<usize>,
    /// Fold addresses beyond the export's end back modulo its size; without it such a
    /// request is an error naming it.
    #[arg(long)]
    pub wrap: bool,
    /// Print the results as one JSON object on stdout (for scripts).
    #[arg(long)]
    pub json: bool,
}

/// Requests in flight at most in open-loop (`--speed`) replay.
const OPEN_LOOP_MAX_OUTSTANDING: usize = 1024;

/// What the replay measured.
#[derive(Serialize, Debug, Default)]
struct Output {
    trace: String,
    target: String,
    pacing: &'static str,
    speed: Option<f64>,
    queue_depth: Option<usize>,
    requests: u64,
    reads: u64,
    writes: u64,
    bytes_read: u64,
    bytes_written: u64,
    errors: u64,
    elapsed_s: f64,
    requests_per_s: f64,
    mib_per_s: f64,
    latency_mean_us: f64,
    latency_p50_us: f64,
    latency_p90_us: f64,
    latency_p99_us: f64,
    latency_max_us: f64,
}

/// One request as sent: byte offset and length.
#[derive(Clone, Copy, Debug)]
struct Sent {
    offset: u64,
    length: u32,
    write: bool,
    ts_ns: u64,
}

pub fn run(args: Args) -> Result<()> {
    if let Some(s) = args.speed {
        if !(s.is_finite() && s > 0.0) {
            bail!("--speed {s}: must be a positive number");
        }
    }
    if args.queue_depth == Some(0) {
        bail!("--queue-depth 0: must be at least 1");
    }
    let (target, connected) = connect(&args)?;
    let (info, sender, receiver) = connected;
    let requests = load(&args, &info)?;
    if requests.is_empty() {
        bail!(
            "{}: the trace holds no requests",
            args.input.trace.display()
        );
    }
    if info.read_only() && requests.iter().any(|r| r.write) {
        bail!("{target}: the export is read-only and the trace writes");
    }
    let depth = args.queue_depth.unwrap_or(if args.speed.is_some() {
        OPEN_LOOP_MAX_OUTSTANDING
    } else {
        1
    });
    let flush = info.tx_flags & reblock_nbd::proto::TX_SEND_FLUSH != 0;
    let mut out = drive(&requests, sender, receiver, depth, args.speed, flush)
        .with_context(|| format!("replaying to {target}"))?;
    out.trace = args.input.trace.display().to_string();
    out.target = target;
    out.pacing = if args.speed.is_some() {
        "open"
    } else {
        "closed"
    };
    out.speed = args.speed;
    out.queue_depth = args.speed.is_none().then_some(depth);
    if args.json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print_text(&out);
    }
    if out.errors > 0 {
        bail!("{} of {} requests failed", out.errors, out.requests);
    }
    Ok(())
}

type Connected = (ExportInfo, Sender, Receiver);

fn connect(args: &Args) -> Result<(String, Connected)> {
    match (&args.unix, &args.tcp) {
        (Some(p), _) => {
            let target = format!("unix:{}", p.display());
            let c = client::connect_unix(p, &args.export).with_context(|| target.clone())?;
            Ok((target, c))
        }
        (None, Some(t)) => {
            let addr = if t.contains(':') {
                t.clone()
            } else {
                format!("127.0.0.1:{t}")
            };
            let c =
                client::connect_tcp(&addr, &args.export).with_context(|| format!("tcp:{addr}"))?;
            Ok((format!("tcp:{addr}"), c))
        }
        (None, None) => bail!("say where the export is: --unix SOCK or --tcp [HOST:]PORT"),
    }
}

/// Reads the whole trace and turns its reads and writes into byte ranges of the export.
fn load(args: &Args, info: &ExportInfo) -> Result<Vec<Sent>> {
    let reader = args.input.open()?;
    let mut reader = reader;
    let mut out = Vec::new();
    let size = info.size_bytes;
    for (i, r) in (&mut reader).enumerate() {
        let r: Request = r?;
        let write = r.op == Op::Write;
        let length = r.sectors.saturating_mul(512);
        let mut offset = r.sector * 512;
        if offset + u64::from(length) > size {
            if !args.wrap || u64::from(length) > size {
                bail!(
                    "{}: request {} (sector {}, {} sectors) ends past the export's {} bytes \
                     (--wrap folds it back)",
                    args.input.trace.display(),
                    i + 1,
                    r.sector,
                    r.sectors,
                    size
                );
            }
            offset = (offset % size).min(size - u64::from(length)) / 512 * 512;
        }
        out.push(Sent {
            offset,
            length,
            write,
            ts_ns: r.ts_ns,
        });
    }
    report_bad_lines(&reader);
    Ok(out)
}

/// Sends every request, at most `depth` outstanding, paced by `speed` when given; the
/// replies are collected on another thread.
fn drive(
    reqs: &[Sent],
    mut sender: Sender,
    receiver: Receiver,
    depth: usize,
    speed: Option<f64>,
    flush: bool,
) -> Result<Output> {
    let inflight: Arc<Mutex<HashMap<u64, (Instant, Sent)>>> = Arc::default();
    let (done_tx, done_rx) = mpsc::channel::<Result<(u64, bool), String>>();
    let total = reqs.len() as u64;
    let collector = {
        let inflight = inflight.clone();
        let replies = total + u64::from(flush);
        std::thread::spawn(move || collect(receiver, inflight, done_tx, replies))
    };
    let payload = vec![0xa5u8; reqs.iter().map(|r| r.length).max().unwrap_or(0) as usize];
    let mut progress = Progress::new("replaying", "requests", Some(total));
    let (t0, ts0) = (Instant::now(), reqs[0].ts_ns);
    let (mut outstanding, mut latencies, mut errors) = (0usize, Vec::new(), 0u64);
    let settle = |outstanding: &mut usize, lat: &mut Vec<u64>, errors: &mut u64, block| {
        let got = if block {
            done_rx
                .recv()
                .map_err(|_| "reply reader stopped".to_string())
        } else {
            done_rx.try_recv().map_err(|_| String::new())
        };
        match got {
            Ok(Ok((ns, ok))) => {
                *outstanding -= 1;
                lat.push(ns);
                *errors += u64::from(!ok);
                Ok(true)
            }
            Ok(Err(e)) => Err(e),
            Err(e) if block => Err(e),
            Err(_) => Ok(false),
        }
    };
    for (cookie, r) in reqs.iter().enumerate() {
        if let Some(x) = speed {
            let due = t0 + Duration::from_secs_f64(r.ts_ns.saturating_sub(ts0) as f64 / 1e9 / x);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        while outstanding >= depth {
            settle(&mut outstanding, &mut latencies, &mut errors, true)
                .map_err(anyhow::Error::msg)?;
        }
        while settle(&mut outstanding, &mut latencies, &mut errors, false)
            .map_err(anyhow::Error::msg)?
        {}
        let cmd = if r.write {
            Command::Write
        } else {
            Command::Read
        };
        inflight
            .lock()
            .expect("inflight lock")
            .insert(cookie as u64, (Instant::now(), *r));
        sender
            .send(cookie as u64, cmd, r.offset, r.length, &payload)
            .context("send a request")?;
        outstanding += 1;
        progress.set_position(latencies.len() as u64);
    }
    while outstanding > 0 {
        settle(&mut outstanding, &mut latencies, &mut errors, true).map_err(anyhow::Error::msg)?;
        progress.set_position(latencies.len() as u64);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    progress.finish();
    // A final flush makes the writes durable, and a disk (or an emulated one) write out
    // its cache, so that what the export reports afterwards covers the whole replay.
    if flush {
        let cookie = reqs.len() as u64;
        inflight.lock().expect("inflight lock").insert(
            cookie,
            (
                Instant::now(),
                Sent {
                    offset: 0,
                    length: 0,
                    write: true,
                    ts_ns: 0,
                },
            ),
        );
        sender
            .send(cookie, Command::Flush, 0, 0, &[])
            .context("send the final flush")?;
        match done_rx.recv() {
            Ok(Ok((_, true))) => {}
            Ok(Ok((_, false))) => bail!("the final flush failed"),
            Ok(Err(e)) => bail!("the final flush: {e}"),
            Err(_) => bail!("the final flush: reply reader stopped"),
        }
    }
    let _ = sender.disconnect();
    let _ = collector.join();
    Ok(summarize(reqs, latencies, errors, elapsed))
}

/// The reply thread: matches replies to requests by cookie and reports each latency.
fn collect(
    mut receiver: Receiver,
    inflight: Arc<Mutex<HashMap<u64, (Instant, Sent)>>>,
    done: mpsc::Sender<Result<(u64, bool), String>>,
    total: u64,
) {
    let mut buf = Vec::new();
    for _ in 0..total {
        let mut sent = None;
        let got = receiver.recv(
            |cookie| {
                sent = inflight.lock().expect("inflight lock").remove(&cookie);
                sent.filter(|(_, s)| !s.write).map(|(_, s)| s.length)
            },
            &mut buf,
        );
        let msg = match (got, sent) {
            (Ok(reply), Some((at, _))) => Ok((at.elapsed().as_nanos() as u64, reply.errno == 0)),
            (Ok(reply), None) => Err(format!("reply for unknown cookie {}", reply.cookie)),
            (Err(e), _) => Err(e.to_string()),
        };
        let stop = msg.is_err();
        if done.send(msg).is_err() || stop {
            return;
        }
    }
}

fn summarize(reqs: &[Sent], mut lat: Vec<u64>, errors: u64, elapsed_s: f64) -> Output {
    let (mut o, mut bytes) = (Output::default(), 0u64);
    for r in reqs {
        bytes += u64::from(r.length);
        if r.write {
            o.writes += 1;
            o.bytes_written += u64::from(r.length);
        } else {
            o.reads += 1;
            o.bytes_read += u64::from(r.length);
        }
    }
    lat.sort_unstable();
    let pct = |q: f64| lat[((lat.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    o.requests = reqs.len() as u64;
    o.errors = errors;
    o.elapsed_s = elapsed_s;
    o.requests_per_s = o.requests as f64 / elapsed_s.max(1e-9);
    o.mib_per_s = bytes as f64 / (1 << 20) as f64 / elapsed_s.max(1e-9);
    o.latency_mean_us = lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1e3;
    o.latency_p50_us = pct(0.5);
    o.latency_p90_us = pct(0.9);
    o.latency_p99_us = pct(0.99);
    o.latency_max_us = pct(1.0);
    o
}

fn print_text(o: &Output) {
    println!("replayed {} to {}", o.trace, o.target);
    println!(
        "  requests {} ({} reads, {} writes), {} errors",
        o.requests, o.reads, o.writes, o.errors
    );
    println!(
        "  bytes    {:.1} MiB read, {:.1} MiB written",
        o.bytes_read as f64 / (1 << 20) as f64,
        o.bytes_written as f64 / (1 << 20) as f64
    );
    println!(
        "  elapsed  {:.3} s ({:.0} requests/s, {:.2} MiB/s)",
        o.elapsed_s, o.requests_per_s, o.mib_per_s
    );
    println!(
        "  latency  mean {:.0} us, p50 {:.0} us, p90 {:.0} us, p99 {:.0} us, max {:.0} us",
        o.latency_mean_us, o.latency_p50_us, o.latency_p90_us, o.latency_p99_us, o.latency_max_us
    );
}
