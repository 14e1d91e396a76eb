//! `reblock serve`: export the data area of a backing image over NBD through the online
//! engine (docs/format.md), with a control socket for `status`, `detach` and
//! `reconfigure`, and an optional recorder of the served requests.

use anyhow::{bail, Context};
use reblock_engine::background::{Background, BackgroundOptions};
use reblock_engine::control::ControlServer;
use reblock_engine::image::{open_image, ImageOptions};
use reblock_engine::recorder::Recorder;
use reblock_engine::replan::{Every, ReplanOptions, Replanner, RequestWindow};
use reblock_engine::{Engine, EngineOptions};
use reblock_nbd::{ExportSet, Listen, Server, ServerConfig};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// Backing image (file or block device). A plain image without a BOPT keeps its bytes
    /// as the data area; the BOPT is appended to a file. Formatting a BOPT onto an image
    /// that already holds data needs --format (its BOPT may live on a separate device).
    pub image: PathBuf,
    /// BOPT size for formatting a fresh image (e.g. 64M, 1G): summaries, slots, superblocks.
    #[arg(long, value_parser = parse_size)]
    pub bopt_size: Option<u64>,
    /// Put the BOPT on this separate device or file (a faster one, as a cache).
    #[arg(long)]
    pub bopt_device: Option<PathBuf>,
    /// Share of the BOPT's segments given to the write buffer when formatting [default: 0.2].
    #[arg(long)]
    pub write_buffer: Option<f64>,
    /// Page size in bytes when formatting [default: 4096].
    #[arg(long, value_parser = parse_size)]
    pub page_size: Option<u64>,
    /// Pages per segment when formatting [default: 256].
    #[arg(long)]
    pub segment_pages: Option<u32>,
    /// Allow formatting a new BOPT onto an image or BOPT device that holds data but no
    /// superblock (a block device gives its end to the BOPT). Without it only fresh files
    /// (created by --create, or empty) are formatted; a forgotten --bopt-device
    /// must not hide the BOPT that holds the image's flushed writes.
    #[arg(long)]
    pub format: bool,
    /// Create IMAGE with this data-area size if it does not exist (e.g. 1G).
    #[arg(long, value_parser = parse_size)]
    pub create: Option<u64>,
    /// Listen on this Unix socket.
    #[arg(long, conflicts_with = "tcp")]
    pub unix: Option<PathBuf>,
    /// Listen on TCP: PORT (127.0.0.1) or ADDR:PORT.
    #[arg(long)]
    pub tcp: Option<String>,
    /// Export name [default: the image's file name]; clients asking for "" get it too.
    #[arg(long)]
    pub name: Option<String>,
    /// Serve read-only (nothing on the image changes, not even the superblock).
    #[arg(long)]
    pub read_only: bool,
    /// Control socket [default: the NBD socket path + ".ctl", or IMAGE + ".ctl" for TCP].
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// Record served requests as a native trace here (connection id as pid, command "nbd").
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// On SIGINT/SIGTERM, copy every dirty page home before exiting (see `reblock detach`).
    #[arg(long)]
    pub detach_on_exit: bool,
    /// Background reconfiguration copy rate, MiB/s [default: 64].
    #[arg(long)]
    pub rate_mib_s: Option<u64>,
    /// Sequential cutoff: a write that finds none of its pages in the BOPT and is larger
    /// than this goes straight home instead of into the write buffer. The write buffer
    /// turns scattered small writes into sequential ones; a large write is sequential
    /// already and absorbing it only costs a destage copy later. `0` absorbs every
    /// write that fits, as the dissertation's indirection algorithm is written [default: 256K].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub sequential_cutoff: Option<u64>,
    /// Re-plan online with this policy (vanilla, hot, borg, dlr-seq): the served requests
    /// are kept in memory, turned into an access graph, placed into the read cache and
    /// applied by the background reconfiguration. Off unless given. Triggers below; with
    /// none of them, every 100000 requests.
    #[arg(long)]
    pub replan_policy: Option<String>,
    /// Re-plan periodically: a period (30s, 10m, 1h) or a request count (5000).
    #[arg(long, value_parser = reblock_engine::replan::parse_every)]
    pub replan_every: Option<reblock_engine::replan::Every>,
    /// Re-plan once foreground I/O has been idle this many seconds (after new requests).
    #[arg(long)]
    pub replan_on_idle: Option<f64>,
    /// Re-plan when the hit rate of the last 100 ms falls by this fraction (e.g. 0.3)
    /// below the best seen since the last plan.
    #[arg(long)]
    pub replan_on_hit_rate_drop: Option<f64>,
    /// Served requests kept in memory for re-planning [default: 1000000].
    #[arg(long)]
    pub replan_window: Option<usize>,
    /// TOML file with any of these options (keys as the flags, with '_'); flags win.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The TOML configuration: the same knobs as the flags.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    bopt_size: Option<String>,
    bopt_device: Option<PathBuf>,
    write_buffer: Option<f64>,
    page_size: Option<String>,
    segment_pages: Option<u32>,
    unix: Option<PathBuf>,
    tcp: Option<String>,
    name: Option<String>,
    read_only: Option<bool>,
    control: Option<PathBuf>,
    record: Option<PathBuf>,
    detach_on_exit: Option<bool>,
    rate_mib_s: Option<u64>,
    sequential_cutoff: Option<String>,
    replan_policy: Option<String>,
    replan_every: Option<String>,
    replan_on_idle: Option<f64>,
    replan_on_hit_rate_drop: Option<f64>,
    replan_window: Option<usize>,
}

/// Parses `4096`, `64K`, `64M`, `1G`, `2T` (binary units; `KiB`/`MB` spellings too).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 4096, 64M, 1G)"))?;
    let mult: u64 = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (K, M, G, T)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} overflows"))
}

fn merge(mut a: Args) -> anyhow::Result<Args> {
    let Some(path) = a.config.clone() else {
        return Ok(a);
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let c: FileConfig =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let size = |v: Option<String>, key: &str| -> anyhow::Result<Option<u64>> {
        v.map(|s| parse_size(&s).map_err(|e| anyhow::anyhow!("{}: key {key}: {e}", path.display())))
            .transpose()
    };
    a.bopt_size = a.bopt_size.or(size(c.bopt_size, "bopt_size")?);
    a.page_size = a.page_size.or(size(c.page_size, "page_size")?);
    a.bopt_device = a.bopt_device.or(c.bopt_device);
    a.write_buffer = a.write_buffer.or(c.write_buffer);
    a.segment_pages = a.segment_pages.or(c.segment_pages);
    if a.unix.is_none() && a.tcp.is_none() {
        a.unix = c.unix;
        a.tcp = c.tcp;
    }
    a.name = a.name.or(c.name);
    a.read_only |= c.read_only.unwrap_or(false);
    a.control = a.control.or(c.control);
    a.record = a.record.or(c.record);
    a.detach_on_exit |= c.detach_on_exit.unwrap_or(false);
    a.rate_mib_s = a.rate_mib_s.or(c.rate_mib_s);
    a.sequential_cutoff = a
        .sequential_cutoff
        .or(size(c.sequential_cutoff, "sequential_cutoff")?);
    a.replan_policy = a.replan_policy.or(c.replan_policy);
    if a.replan_every.is_none() {
        a.replan_every = c
            .replan_every
            .map(|s| reblock_engine::replan::parse_every(&s))
            .transpose()
            .map_err(|e| anyhow::anyhow!("{}: key replan_every: {e}", path.display()))?;
    }
    a.replan_on_idle = a.replan_on_idle.or(c.replan_on_idle);
    a.replan_on_hit_rate_drop = a.replan_on_hit_rate_drop.or(c.replan_on_hit_rate_drop);
    a.replan_window = a.replan_window.or(c.replan_window);
    Ok(a)
}

fn listen_of(a: &Args) -> anyhow::Result<Listen> {
    if let Some(p) = &a.unix {
        return Ok(Listen::Unix(p.clone()));
    }
    let Some(t) = &a.tcp else {
        bail!("say where to listen: --unix SOCK or --tcp [ADDR:]PORT")
    };
    let addr = if t.contains(':') {
        t.clone()
    } else {
        format!("127.0.0.1:{t}")
    };
    let sa = addr
        .parse()
        .map_err(|e| anyhow::anyhow!("--tcp {t:?}: {e}"))?;
    Ok(Listen::Tcp(sa))
}

/// The control socket's default path for these arguments.
pub fn default_control(a: &Args) -> PathBuf {
    let base = a.unix.clone().unwrap_or_else(|| a.image.clone());
    let mut s = base.into_os_string();
    s.push(".ctl");
    PathBuf::from(s)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let a = merge(args)?;
    let listen = listen_of(&a)?;
    let write_buffer = a.write_buffer.unwrap_or(0.2);
    if !(0.0..=1.0).contains(&write_buffer) {
        bail!("--write-buffer {write_buffer}: must be within [0, 1]");
    }
    let page_bytes = u32::try_from(a.page_size.unwrap_or(4096)).context("--page-size")?;
    let opened = open_image(&ImageOptions {
        image: a.image.clone(),
        bopt_device: a.bopt_device.clone(),
        read_only: a.read_only,
        bopt_bytes: a.bopt_size,
        page_bytes,
        segment_pages: a.segment_pages.unwrap_or(256),
        write_buffer_fraction: write_buffer,
        format: a.format,
        create_bytes: a.create,
    })
    .map_err(anyhow::Error::msg)?;
    if let Some(l) = &opened.formatted {
        eprintln!(
            "reblock: formatted {}: data {} bytes, BOPT {} pages ({} read cache, {} write buffer)",
            a.image.display(),
            l.data_bytes,
            l.bopt_pages,
            l.read_cache_pages,
            l.write_buffer_pages
        );
    }
    let cutoff = a.sequential_cutoff.unwrap_or(256 << 10);
    let opts = EngineOptions {
        read_only: a.read_only,
        sequential_cutoff_bytes: (cutoff > 0).then_some(cutoff),
        ..EngineOptions::default()
    };
    let (engine, report) = Engine::open(opened.store.clone(), opts)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.image.display()))?;
    if report.unclean {
        eprintln!(
            "reblock: recovered after an unclean stop: {} map entries, all marked dirty",
            report.rebuild.entries
        );
    }
    let engine = Arc::new(engine);
    serve_engine(&a, listen, engine)
}

fn serve_engine(a: &Args, listen: Listen, engine: Arc<Engine>) -> anyhow::Result<()> {
    let recorder = match &a.record {
        Some(p) => Some(Arc::new(
            Recorder::create(p).with_context(|| format!("--record {}", p.display()))?,
        )),
        None => None,
    };
    let name = a.name.clone().unwrap_or_else(|| {
        a.image
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let exports = ExportSet::single(&name, engine.clone())?;
    let recorder_obs = recorder
        .clone()
        .map(|r| r as Arc<dyn reblock_nbd::RequestObserver>);
    let replan = replan_options(a)?;
    let window = replan
        .as_ref()
        .map(|o| Arc::new(RequestWindow::new(o.window_requests, recorder_obs.clone())));
    let config = ServerConfig {
        observer: match &window {
            Some(w) => Some(w.clone() as Arc<dyn reblock_nbd::RequestObserver>),
            None => recorder_obs,
        },
        ..ServerConfig::default()
    };
    let server = Server::bind(&listen, exports, config)
        .with_context(|| format!("listen on {}", listen.uri(&name)))?
        .start()?;
    let control_path = a.control.clone().unwrap_or_else(|| default_control(a));
    let control = ControlServer::start(&control_path, engine.clone())
        .with_context(|| format!("control socket {}", control_path.display()))?;
    let rate = a.rate_mib_s.unwrap_or(64) << 20;
    let background = Background::start(
        engine.clone(),
        BackgroundOptions {
            rate_bytes_per_s: rate,
            ..Default::default()
        },
    );
    let replanner = match (replan, &window) {
        (Some(o), Some(w)) => Some(
            Replanner::start(engine.clone(), w.clone(), o)
                .map_err(|e| anyhow::anyhow!("--replan-policy: {e}"))?,
        ),
        _ => None,
    };
    eprintln!(
        "reblock: serving {} at {} (control {})",
        a.image.display(),
        listen.uri(&name),
        control_path.display()
    );
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if let Some(r) = &recorder {
            let _ = r.flush();
        }
    }
    tracing::info!("stopping");
    server.shutdown();
    control.shutdown();
    if let Some(r) = replanner {
        r.stop();
    }
    background.stop();
    engine.close(a.detach_on_exit).context("clean stop")?;
    if let Some(r) = &recorder {
        r.flush()?;
    }
    eprintln!(
        "reblock: stopped cleanly{}",
        if a.detach_on_exit { " (detached)" } else { "" }
    );
    Ok(())
}

/// The re-planning options, or `None` when --replan-policy is absent.
fn replan_options(a: &Args) -> anyhow::Result<Option<ReplanOptions>> {
    let Some(policy) = &a.replan_policy else {
        if a.replan_every.is_some()
            || a.replan_on_idle.is_some()
            || a.replan_on_hit_rate_drop.is_some()
        {
            bail!("--replan-every/--replan-on-idle/--replan-on-hit-rate-drop need --replan-policy");
        }
        return Ok(None);
    };
    reblock_engine::replan::check_online_policy(policy)
        .map_err(|e| anyhow::anyhow!("--replan-policy: {e}"))?;
    let mut o = ReplanOptions::new(policy);
    o.every = a.replan_every;
    if let Some(Every::Requests(n)) = o.every {
        o.min_new_requests = o.min_new_requests.min(n);
    }
    if let Some(s) = a.replan_on_idle {
        if !(s.is_finite() && s > 0.0) {
            bail!("--replan-on-idle {s}: must be a positive number of seconds");
        }
        o.on_idle = Some(Duration::from_secs_f64(s));
    }
    if let Some(f) = a.replan_on_hit_rate_drop {
        if !(f > 0.0 && f < 1.0) {
            bail!("--replan-on-hit-rate-drop {f}: must be within (0, 1)");
        }
        o.on_hit_rate_drop = Some(f);
    }
    if o.every.is_none() && o.on_idle.is_none() && o.on_hit_rate_drop.is_none() {
        o.every = Some(Every::Requests(100_000));
    }
    if let Some(n) = a.replan_window {
        o.window_requests = n.max(1);
    }
    Ok(Some(o))
}

/// The control socket named by `--control`, or derived from `--unix`.
pub fn control_path(control: &Option<PathBuf>, unix: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match (control, unix) {
        (Some(c), _) => Ok(c.clone()),
        (None, Some(u)) => {
            let mut s = u.clone().into_os_string();
            s.push(".ctl");
            Ok(PathBuf::from(s))
        }
        _ => bail!(
            "say which server: --control PATH or --unix SOCK (its control socket is SOCK.ctl)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("8kb"), Ok(8 << 10));
        assert!(parse_size("12Q").unwrap_err().contains("unit"));
        assert!(parse_size("M").is_err());
    }
}
