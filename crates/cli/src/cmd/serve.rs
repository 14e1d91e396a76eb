//! `reblock serve`: export the data area of a backing image over NBD through the online
//! engine (docs/format.md), with a control socket for `status`, `detach` and
//! `reconfigure`, and an optional recorder of the served requests.

use anyhow::{bail, Context};
use reblock_engine::background::{Background, BackgroundOptions};
use reblock_engine::control::ControlServer;
use reblock_engine::emulate::{DiskPlacement, EmulatedStore};
use reblock_engine::image::{open_image, ImageOptions};
use reblock_engine::recorder::Recorder;
use reblock_engine::replan::{Every, ReplanOptions, Replanner, RequestWindow};
use reblock_engine::{Engine, EngineOptions, Layout, LayoutRequest, Store};
use reblock_nbd::{Bound, ExportSet, Listen, Server, ServerConfig, TlsPolicy};
use serde::Deserialize;
use std::path::{Path, PathBuf};
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
    /// Listen on TCP: PORT (127.0.0.1) or ADDR:PORT. An address beyond loopback (0.0.0.0,
    /// a LAN address) without --tls lets anyone who can reach it read and write the image
    /// in clear text: reblock warns.
    #[arg(long)]
    pub tcp: Option<String>,
    /// Mode of the --unix socket file, whatever the umask: 0600 (only this user) or 0660
    /// (this user's group too) [default: 0600]. The control socket is always 0600.
    #[arg(long, value_name = "MODE", value_parser = parse_socket_mode)]
    pub socket_mode: Option<u32>,
    /// Connections served at once; more are closed at once with a log line [default: 64].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// TLS: off (STARTTLS refused), on (offered; plain text allowed too) or require
    /// (every client must start TLS) [default: off, or require when --tls-cert is given].
    /// Clients: qemu-img/qemu-io with `--object tls-creds-x509,id=tls0,dir=DIR,endpoint=client`
    /// and `--image-opts driver=nbd,...,tls-creds=tls0` (DIR holds the CA as ca-cert.pem);
    /// nbdinfo with `nbds://HOST:PORT/NAME?tls-certificates=DIR`.
    #[arg(long, value_name = "MODE")]
    pub tls: Option<TlsMode>,
    /// The server's certificate chain, PEM (what qemu calls server-cert.pem).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM (PKCS#8, PKCS#1 or SEC1; server-key.pem).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
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
    /// Background reconfiguration copy rate, MiB/s [default: 64]. A reconfiguration cut
    /// by a crash or a stop resumes at the next start: its plan is kept beside the image as
    /// IMAGE.reconfig until its last copy, and pages it had already placed are not copied
    /// again.
    #[arg(long)]
    pub rate_mib_s: Option<u64>,
    /// Sequential cutoff: a write that finds none of its pages in the BOPT and is larger
    /// than this goes straight home instead of into the write buffer. The write buffer
    /// turns scattered small writes into sequential ones; a large write is sequential
    /// already and absorbing it only costs a destage copy later. `0` absorbs every
    /// write that fits, as the dissertation's indirection algorithm is written [default: 256K].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub sequential_cutoff: Option<u64>,
    /// Learning: re-plan online with this policy (hot, borg, dlr-seq): the served
    /// requests are kept in memory, turned into an access graph, placed into the read
    /// cache and applied by the background reconfiguration, each plan only when the
    /// admission guard predicts it saves more than its copies cost (see --no-guard).
    /// `vanilla` turns learning off. `fs2` (FS2's replicas of pages used with the hot
    /// area, copied into free space next to it in idle time, within the free-space
    /// watermarks) and `borg+fs2` (both) need free space the map knows (TRIM, or
    /// --free-from ext4). Triggers below; with none of them, every 2500
    /// requests [default: borg].
    #[arg(long)]
    pub replan_policy: Option<String>,
    /// Install every plan the policy makes, without the admission guard.
    #[arg(long)]
    pub no_guard: bool,
    /// Do not compute or verify the CRC-32C kept for every page of the optimized region
    /// (kept by images formatted by this version: a damaged slot is then detected on
    /// read and by 'reblock check' instead of served). Pages written meanwhile get a
    /// checksum again at the next open with checksums on.
    #[arg(long)]
    pub no_data_checksums: bool,
    /// The guard's device model, as `evaluate --device` takes it [default: the --emulate
    /// model, else hdd:wd2500aaks].
    #[arg(long, value_name = "SPEC")]
    pub guard_device: Option<String>,
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
    /// What learning remembers: each re-plan learns from the access graphs learnt before
    /// (their counts multiplied by D at every re-plan, the coldest dropped beyond a
    /// bound) plus the requests served since. 1 remembers everything, 0.5 halves the
    /// weight of older re-plans' requests each time, 0 keeps no learning state (each plan
    /// learns from the recent-request window alone). The state is written beside the
    /// image as IMAGE.learned at every re-plan and at a clean stop, and read back at
    /// start, so a restarted server's first plan uses what was learnt before; a torn,
    /// corrupted or other-version file fails its checksum and is ignored with a warning.
    /// `status --json` shows learned_pages and learned_from [default: 1].
    #[arg(long, value_name = "D")]
    pub learning_decay: Option<f64>,
    /// Behave like this disk model (hdd:wd2500aaks, hdd:barracuda, ...): every backing
    /// I/O is held until its completion time on the model, computed from where it lands
    /// (the data area, then the optimized region right after it, as the image holds them
    /// and as `evaluate --bopt-at end` lays them out; one disk, requests in order). `status --json`
    /// reports the emulated busy time as `emulated_busy_s`. Measure a layout end to end
    /// with `reblock replay` on a machine without such a disk.
    #[arg(long, value_name = "SPEC")]
    pub emulate: Option<String>,
    /// Run emulated time this many times faster than real time (holds shorter by that
    /// factor; busy time stays in emulated seconds) [default: 1].
    #[arg(long, value_name = "X", requires = "emulate")]
    pub emulate_speed: Option<f64>,
    /// TOML file with any of these options but --format and --log (keys as the flags, with
    /// '_': `create = "4G"`, `replan_policy = "fs2"`, `free_from = "ext4"`); flags win.
    /// --format, which lets a BOPT be written over existing data, is taken only as a flag.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Seed the free-space map at start from the file system on the image (ext4: its
    /// block bitmaps; it must be cleanly unmounted). Free blocks then read as zeros, hold
    /// no BOPT copy, and show as holes to BLOCK_STATUS (nbdinfo --map, qemu-img) until
    /// written. Without it the map holds what clients trimmed or zeroed (and, on a freshly
    /// formatted image, the never-written holes of its file).
    #[arg(long, value_enum, value_name = "FS")]
    pub free_from: Option<super::serve_free::FreeFrom>,
}

/// When `serve` offers or demands TLS.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    Off,
    On,
    Require,
}

/// Parses an octal socket mode; bits for other users are refused (they would let every
/// account on the machine read and write the device).
fn parse_socket_mode(s: &str) -> Result<u32, String> {
    let m = u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .map_err(|_| format!("{s:?} is not an octal mode (e.g. 0600, 0660)"))?;
    if m & !0o770 != 0 || m & 0o600 != 0o600 {
        return Err(format!(
            "{s:?}: a socket mode must give its owner read and write and give others \
             nothing (0600 or 0660)"
        ));
    }
    Ok(m)
}

/// The TOML configuration: the same knobs as the flags.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    create: Option<String>,
    free_from: Option<String>,
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
    learning_decay: Option<f64>,
    socket_mode: Option<String>,
    max_connections: Option<usize>,
    tls: Option<TlsMode>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    emulate: Option<String>,
    emulate_speed: Option<f64>,
    no_guard: Option<bool>,
    no_data_checksums: Option<bool>,
    guard_device: Option<String>,
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
    a.create = a.create.or(size(c.create, "create")?);
    if a.free_from.is_none() {
        a.free_from = c
            .free_from
            .map(|s| <super::serve_free::FreeFrom as clap::ValueEnum>::from_str(&s, true))
            .transpose()
            .map_err(|e| anyhow::anyhow!("{}: key free_from: {e}", path.display()))?;
    }
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
    a.learning_decay = a.learning_decay.or(c.learning_decay);
    if a.socket_mode.is_none() {
        a.socket_mode = c
            .socket_mode
            .map(|m| parse_socket_mode(&m))
            .transpose()
            .map_err(|e| anyhow::anyhow!("{}: key socket_mode: {e}", path.display()))?;
    }
    a.max_connections = a.max_connections.or(c.max_connections);
    a.emulate = a.emulate.or(c.emulate);
    a.emulate_speed = a.emulate_speed.or(c.emulate_speed);
    a.no_guard |= c.no_guard.unwrap_or(false);
    a.no_data_checksums |= c.no_data_checksums.unwrap_or(false);
    a.guard_device = a.guard_device.or(c.guard_device);
    a.tls = a.tls.or(c.tls);
    if a.tls_cert.is_none() && a.tls_key.is_none() {
        a.tls_cert = c.tls_cert;
        a.tls_key = c.tls_key;
    }
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

/// Everything `serve` needs that can be checked before the image is touched.
struct Checked {
    listen: Listen,
    write_buffer: f64,
    page_bytes: u32,
    control: PathBuf,
    tls: TlsPolicy,
    replan: Option<ReplanOptions>,
}

fn check_args(a: &Args) -> anyhow::Result<Checked> {
    let listen = listen_of(a)?;
    let write_buffer = a.write_buffer.unwrap_or(0.2);
    if !(0.0..=1.0).contains(&write_buffer) {
        bail!("--write-buffer {write_buffer}: must be within [0, 1]");
    }
    let page_bytes = u32::try_from(a.page_size.unwrap_or(4096)).context("--page-size")?;
    if a.max_connections == Some(0) {
        bail!("--max-connections 0: must be at least 1");
    }
    if a.read_only && a.create.is_some() && !a.image.exists() {
        bail!(
            "{}: does not exist, and --read-only cannot create it (drop --read-only to create \
             it with --create, then serve it read-only)",
            a.image.display()
        );
    }
    let control = a.control.clone().unwrap_or_else(|| default_control(a));
    check_control_path(&control)?;
    let tls = tls_policy(a)?;
    warn_if_exposed(&listen, &tls);
    let replan = replan_options(a)?;
    Ok(Checked {
        listen,
        write_buffer,
        page_bytes,
        control,
        tls,
        replan,
    })
}

/// The control socket must be creatable and not be another server's.
fn check_control_path(p: &Path) -> anyhow::Result<()> {
    if std::os::unix::net::UnixStream::connect(p).is_ok() {
        bail!("control socket {}: in use by a running server", p.display());
    }
    match p.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => bail!(
            "control socket {}: directory {} does not exist",
            p.display(),
            dir.display()
        ),
        _ => Ok(()),
    }
}

fn tls_policy(a: &Args) -> anyhow::Result<TlsPolicy> {
    let given = a.tls_cert.is_some() || a.tls_key.is_some();
    let mode = a.tls.unwrap_or(if given {
        TlsMode::Require
    } else {
        TlsMode::Off
    });
    let config = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => Some(reblock_nbd::tls_server_config(c, k)?),
        (None, None) => None,
        _ => bail!("TLS needs both --tls-cert PEM and --tls-key PEM"),
    };
    Ok(match (mode, config) {
        (TlsMode::Off, None) => TlsPolicy::Off,
        (TlsMode::Off, Some(_)) => {
            bail!(
                "--tls off with --tls-cert: say --tls on or --tls require, or drop the certificate"
            )
        }
        (TlsMode::On, Some(c)) => TlsPolicy::On(c),
        (TlsMode::Require, Some(c)) => TlsPolicy::Require(c),
        (m, None) => bail!(
            "--tls {}: needs --tls-cert PEM and --tls-key PEM",
            if m == TlsMode::On { "on" } else { "require" }
        ),
    })
}

/// Says so when the image is reachable beyond this machine without TLS.
fn warn_if_exposed(listen: &Listen, tls: &TlsPolicy) {
    let Listen::Tcp(addr) = listen else { return };
    if addr.ip().is_loopback() || tls.required() {
        return;
    }
    let how = match tls {
        TlsPolicy::Off => "without TLS",
        _ => "with TLS optional (--tls on)",
    };
    eprintln!(
        "reblock: warning: listening on {addr} {how}: anyone who can reach this address can \
         read and write the image in clear text. Use --tls require with --tls-cert/--tls-key, \
         or listen on 127.0.0.1"
    );
}

/// `--create SIZE` on an existing plain image that holds another size is an error (the
/// image is never resized behind the operator's back). Formatted images are checked by
/// [`check_existing_layout`].
fn check_create_size(a: &Args) -> anyhow::Result<()> {
    let Some(want) = a.create else { return Ok(()) };
    let Ok(meta) = std::fs::metadata(&a.image) else {
        return Ok(());
    };
    if !meta.is_file() {
        bail!(
            "--create {}: {} exists and is not a regular file",
            size_words(want),
            a.image.display()
        );
    }
    if meta.len() != 0 && meta.len() != want && !formatted_file(&a.image) {
        bail!(
            "--create {}: {} exists with another size, {} (drop --create to serve it as it is)",
            size_words(want),
            a.image.display(),
            size_words(meta.len())
        );
    }
    Ok(())
}

/// True when the file ends with a reblock superblock (its length then includes the BOPT).
fn formatted_file(p: &Path) -> bool {
    let Ok(f) = std::fs::File::open(p) else {
        return false;
    };
    let store = reblock_engine::FileStore::new(f, None);
    reblock_engine::meta::read_superblock(&store).is_ok()
}

/// Formatting options given for an image formatted already must match its layout: a BOPT
/// is never reformatted silently, and a silently ignored option misleads.
fn check_existing_layout(a: &Args, c: &Checked, store: &dyn Store) -> anyhow::Result<()> {
    let found = reblock_engine::meta::read_superblock(store)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.image.display()))?;
    let l = found.sb.layout;
    let name = a.image.display();
    if let Some(want) = a.create.filter(|w| *w != l.data_bytes) {
        bail!(
            "--create {}: {name} exists with a data area of {} (drop --create to serve it as it is)",
            size_words(want),
            size_words(l.data_bytes)
        );
    }
    if a.page_size.is_some() && c.page_bytes != l.page_bytes {
        bail!(
            "--page-size {}: {name} was formatted with pages of {} bytes",
            c.page_bytes,
            l.page_bytes
        );
    }
    if let Some(n) = a.segment_pages.filter(|n| *n != l.segment_pages) {
        bail!(
            "--segment-pages {n}: {name} was formatted with {} pages per segment",
            l.segment_pages
        );
    }
    let Some(bopt_bytes) = a.bopt_size else {
        return Ok(());
    };
    let fraction = a
        .write_buffer
        .unwrap_or(f64::from(l.write_buffer_pages) / f64::from(l.bopt_pages.max(1)));
    let asked = Layout::plan(&LayoutRequest {
        data_bytes: l.data_bytes,
        bopt_bytes,
        page_bytes: l.page_bytes,
        segment_pages: l.segment_pages,
        write_buffer_fraction: fraction,
        separate: l.separate,
    });
    let region = l.device_bytes - l.bopt_offset_bytes;
    match asked {
        Ok(p) if p.bopt_pages == l.bopt_pages && p.write_buffer_pages == l.write_buffer_pages => {
            Ok(())
        }
        Ok(p) if p.bopt_pages == l.bopt_pages => bail!(
            "--write-buffer {fraction}: {name}'s write buffer has {} of its {} BOPT pages \
             ({} asked); a formatted BOPT is not resized",
            l.write_buffer_pages,
            l.bopt_pages,
            p.write_buffer_pages
        ),
        _ => bail!(
            "--bopt-size {}: {name} has a BOPT of {} ({} pages); a formatted BOPT is not \
             resized (drop --bopt-size to serve it as it is)",
            size_words(bopt_bytes),
            size_words(region),
            l.bopt_pages
        ),
    }
}

/// `8 GiB (8589934592 bytes)`, or just the bytes when not a whole binary unit.
fn size_words(b: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{} {unit} ({b} bytes)", b >> shift);
        }
    }
    format!("{b} bytes")
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let a = merge(args)?;
    let checked = check_args(&a)?;
    check_create_size(&a)?;
    // Signals are caught before anything is touched: a SIGTERM while formatting,
    // seeding the free-space map or setting up the guard's device model stops cleanly
    // once serving starts, instead of killing the process halfway through the format.
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    // Listen before the image is touched: a server that cannot listen leaves it as it was.
    let bound = Bound::bind(&checked.listen, a.socket_mode.unwrap_or(0o600))
        .with_context(|| format!("listen on {}", checked.listen.uri("")))?;
    let opened = open_image(&ImageOptions {
        image: a.image.clone(),
        bopt_device: a.bopt_device.clone(),
        read_only: a.read_only,
        bopt_bytes: a.bopt_size.or_else(|| default_region_bytes(&a)),
        page_bytes: checked.page_bytes,
        segment_pages: a.segment_pages.unwrap_or(256),
        write_buffer_fraction: checked.write_buffer,
        format: a.format,
        create_bytes: a.create,
    })
    .map_err(anyhow::Error::msg)?;
    match &opened.formatted {
        Some(l) => eprintln!(
            "reblock: formatted {}: data {} bytes, BOPT {} pages ({} read cache, {} write buffer)",
            a.image.display(),
            l.data_bytes,
            l.bopt_pages,
            l.read_cache_pages,
            l.write_buffer_pages
        ),
        None => check_existing_layout(&a, &checked, opened.store.as_ref())?,
    }
    let cutoff = a.sequential_cutoff.unwrap_or(256 << 10);
    let opts = EngineOptions {
        read_only: a.read_only,
        sequential_cutoff_bytes: (cutoff > 0).then_some(cutoff),
        data_checksums: !a.no_data_checksums,
        // A copier round moves at most a second's worth of the rate limit, so that the
        // limit holds round by round (the worker sleeps each round's bytes / rate).
        copier_staging_bytes: copier_staging_bytes(copy_rate_bytes(&a)),
        ..EngineOptions::default()
    };
    let store = emulated(&a, opened.store.clone())?;
    let (mut engine, report) =
        Engine::open(store, opts).map_err(|e| anyhow::anyhow!("{}: {e}", a.image.display()))?;
    engine.set_head_cost(head_cost(&a)?);
    if report.unclean {
        eprintln!(
            "reblock: recovered after an unclean stop: {} map entries, all marked dirty",
            report.rebuild.entries
        );
    }
    for w in report.warnings() {
        eprintln!("reblock: ERROR: {w}");
    }
    for n in report.notices() {
        eprintln!("reblock: note: {n}");
    }
    seed_free_map(&a, opened.formatted.is_some(), &engine)?;
    resume_reconfiguration(&a, &engine);
    let engine = Arc::new(engine);
    serve_engine(&a, checked, bound, engine, stop)
}

/// The background copy rate in bytes a second (`--rate-mib-s`, 64 MiB/s by default): one
/// figure for the copier's pace and the staging buffer sized from it.
fn copy_rate_bytes(a: &Args) -> u64 {
    a.rate_mib_s.unwrap_or(64) << 20
}

/// The copier's staging buffer under a copy rate limit of `rate` bytes/s: the engine's
/// default, or one second's worth of the rate when that is less.
fn copier_staging_bytes(rate: u64) -> u64 {
    EngineOptions::default()
        .copier_staging_bytes
        .min(rate.max(1))
}

/// The region `--create SIZE` formats when --bopt-size is not given: a tenth of the data
/// area, whole MiB, at least 16 MiB and at most 2 GiB (the planner uses as much of it as
/// pays). `None` when the image exists already (its BOPT, if any, is as formatted).
fn default_region_bytes(a: &Args) -> Option<u64> {
    let create = a.create?;
    let fresh = std::fs::metadata(&a.image).map_or(true, |m| m.len() == 0);
    fresh.then(|| (create / 10).clamp(16 << 20, 2 << 30) >> 20 << 20)
}

/// How FS2 replica reads rate a copy from the head: the emulated disk's model, else the
/// guard's, else the default guard model's.
fn head_cost(a: &Args) -> anyhow::Result<reblock_engine::engine::HeadCost> {
    let spec = (a.emulate.as_deref())
        .or(a.guard_device.as_deref())
        .unwrap_or(DEFAULT_GUARD_DEVICE);
    reblock_engine::engine::HeadCost::of_device(spec).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The backing store, wrapped in the disk emulation when --emulate is given.
fn emulated(a: &Args, store: Arc<reblock_engine::FileStore>) -> anyhow::Result<Arc<dyn Store>> {
    let Some(spec) = &a.emulate else {
        return Ok(store);
    };
    let found = reblock_engine::meta::read_superblock(store.as_ref())
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.image.display()))?;
    let layout = found.sb.layout;
    let placement = DiskPlacement::at(&layout, layout.data_bytes / 512);
    let speed = a.emulate_speed.unwrap_or(1.0);
    let emu = EmulatedStore::new(store, spec, &layout, placement, speed)?;
    eprintln!(
        "reblock: emulating {spec} at {speed}x: data area sectors 0..{}, region of {} sectors \
         inserted at sector {}",
        layout.data_bytes / 512,
        placement.region_sectors,
        placement.region_at
    );
    Ok(Arc::new(emu))
}

/// Seeds the free-space map before serving (engine/trim.rs, cmd/serve_free.rs).
fn seed_free_map(a: &Args, formatted: bool, engine: &Engine) -> anyhow::Result<()> {
    use super::serve_free::{seed_from_ext4, seed_from_holes, FreeFrom};
    if formatted {
        let pages = seed_from_holes(engine, &a.image)?;
        if pages > 0 {
            eprintln!("reblock: {pages} never-written pages marked free (they read as zeros)");
        }
    }
    if a.free_from == Some(FreeFrom::Ext4) {
        let pages = seed_from_ext4(engine, &a.image)?;
        eprintln!(
            "reblock: free-space map seeded from the ext4 block bitmaps: {pages} pages newly free, {} free in all",
            engine.free_pages()
        );
    }
    Ok(())
}

fn serve_engine(
    a: &Args,
    c: Checked,
    bound: Bound,
    engine: Arc<Engine>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
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
    let window = c
        .replan
        .as_ref()
        .map(|o| Arc::new(RequestWindow::new(o.window_requests, recorder_obs.clone())));
    let config = ServerConfig {
        observer: match &window {
            Some(w) => Some(w.clone() as Arc<dyn reblock_nbd::RequestObserver>),
            None => recorder_obs,
        },
        max_connections: a
            .max_connections
            .unwrap_or(reblock_nbd::server::DEFAULT_MAX_CONNECTIONS),
        tls: c.tls.clone(),
        ..ServerConfig::default()
    };
    let endpoint = bound.endpoint().clone();
    let server = Server::on(bound, exports, config)?.start()?;
    let control_path = c.control.clone();
    let control = ControlServer::start(&control_path, engine.clone())
        .with_context(|| format!("control socket {}", control_path.display()))?;
    let rate = copy_rate_bytes(a);
    let background = Background::start(
        engine.clone(),
        BackgroundOptions {
            rate_bytes_per_s: rate,
            ..Default::default()
        },
    );
    let replanner = match (c.replan, &window) {
        (Some(o), Some(w)) => Some(
            Replanner::start(engine.clone(), w.clone(), o)
                .map_err(|e| anyhow::anyhow!("--replan-policy: {e}"))?,
        ),
        _ => None,
    };
    eprintln!(
        "reblock: serving {} at {}{} (control {})",
        a.image.display(),
        endpoint.uri(&name),
        match c.tls {
            TlsPolicy::Off => "",
            TlsPolicy::On(_) => " (TLS offered)",
            TlsPolicy::Require(_) => " (TLS required)",
        },
        control_path.display()
    );
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

/// Resumes the reconfiguration a previous run left unfinished (its plan kept beside the
/// image), and keeps the plan of every reconfiguration from now on.
fn resume_reconfiguration(a: &Args, engine: &Engine) {
    if a.read_only {
        return;
    }
    let file = reblock_engine::engine::reconfig_file_of(&a.image);
    match engine.resume_reconfiguration(file) {
        Ok(Some(d)) => eprintln!(
            "reblock: resuming an interrupted reconfiguration: {} pages already in place stay, \
             {} to copy",
            d.static_pages,
            d.incoming_pages + d.relocate_pages
        ),
        Ok(None) => {}
        Err(e) => eprintln!("reblock: warning: not resuming the interrupted reconfiguration: {e}"),
    }
}

/// Policy `serve` learns with when --replan-policy is not given.
const DEFAULT_REPLAN_POLICY: &str = "borg";
/// Requests between re-plans when no trigger is given.
const DEFAULT_REPLAN_REQUESTS: u64 = 2500;
/// The guard's model when neither --guard-device nor --emulate names one.
const DEFAULT_GUARD_DEVICE: &str = "hdd:wd2500aaks";

/// The re-planning options, or `None` when learning is off (`--replan-policy vanilla`,
/// or a read-only export).
fn replan_options(a: &Args) -> anyhow::Result<Option<ReplanOptions>> {
    let policy = a.replan_policy.as_deref().unwrap_or(DEFAULT_REPLAN_POLICY);
    if policy == "vanilla" || (a.read_only && a.replan_policy.is_none()) {
        if a.replan_every.is_some()
            || a.replan_on_idle.is_some()
            || a.replan_on_hit_rate_drop.is_some()
        {
            bail!(
                "--replan-every/--replan-on-idle/--replan-on-hit-rate-drop: learning is off \
                 (--replan-policy vanilla or --read-only)"
            );
        }
        return Ok(None);
    }
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
        o.every = Some(Every::Requests(DEFAULT_REPLAN_REQUESTS));
    }
    if !a.no_guard {
        let spec = (a.guard_device.as_deref())
            .or(a.emulate.as_deref())
            .unwrap_or(DEFAULT_GUARD_DEVICE);
        reblock_device::parse_spec(spec).map_err(|e| anyhow::anyhow!("--guard-device: {e}"))?;
        o.guard_device = Some(spec.to_string());
    }
    if let Some(n) = a.replan_window {
        o.window_requests = n.max(1);
    }
    if let Some(d) = a.learning_decay {
        if !(0.0..=1.0).contains(&d) {
            bail!("--learning-decay {d}: must be within 0 (no learning state) and 1 (remember everything)");
        }
        o.learning_decay = d;
    }
    if !a.read_only {
        o.learned_file = Some(reblock_engine::learned::LearnedFile::of_image(&a.image));
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
    use super::{merge, parse_size, Args};
    use crate::cmd::serve_free::FreeFrom;

    /// Every option `--config` advertises is read from the file, flags winning.
    #[test]
    fn the_config_file_takes_create_and_free_from_like_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.toml");
        let toml = "create = \"4G\"\nfree_from = \"ext4\"\nbopt_size = \"64M\"\n";
        std::fs::write(&path, toml).unwrap();
        let a = merge(Args {
            config: Some(path.clone()),
            ..Args::default()
        })
        .unwrap();
        assert_eq!(a.create, Some(4 << 30));
        assert_eq!(a.free_from, Some(FreeFrom::Ext4));
        assert_eq!(a.bopt_size, Some(64 << 20));
        let flagged = merge(Args {
            config: Some(path.clone()),
            create: Some(1 << 30),
            ..Args::default()
        })
        .unwrap();
        assert_eq!(flagged.create, Some(1 << 30), "the flag wins");
        std::fs::write(&path, "free_from = \"xfs\"\n").unwrap();
        let e = merge(Args {
            config: Some(path),
            ..Args::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("free_from") && e.contains("xfs"), "{e}");
    }

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
