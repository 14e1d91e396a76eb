//! `reblock status`: a running server's state over its control socket, as one line for
//! humans (like `dmsetup status` or `lvs`), `--long` for the details, or `--json` with
//! every field numeric where it is a number.

use std::path::PathBuf;

use reblock_analyze::units::format_bytes;
use serde::Deserialize;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The server's control socket.
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// The server's NBD Unix socket (its control socket is SOCK.ctl).
    #[arg(long)]
    pub unix: Option<PathBuf>,
    /// Also print the details under the summary line: the map, the requests, the
    /// background copier and the re-planner.
    #[arg(long, short = 'l')]
    pub long: bool,
    /// Print the server's state as one JSON object: uptime_s, connections, reads,
    /// read_hits, read_misses, hit_rate, write_buffer_fill (0..1),
    /// destage_backlog_pages, promotions, mode, reconfiguration (the background
    /// copier), replan, the map's sizes, free_pages (the free-space map: trimmed,
    /// zeroed or never written), FS2's replicas, replica_hits and replica_marks (the
    /// free-space watermarks and what they ask), and emulated_busy_s under --emulate.
    #[arg(long)]
    pub json: bool,
}

/// The fields of the engine's status the human form shows (missing ones read as zero,
/// so an older server still answers).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Shown {
    mode: String,
    free_pages: u64,
    replicas: u64,
    replica_hits: u64,
    data_checksums: bool,
    data_checksum_errors: u64,
    read_only: bool,
    needs_check: bool,
    uptime_s: f64,
    connections: u64,
    data_bytes: u64,
    page_bytes: u64,
    bopt_pages: u64,
    mapped_pages: u64,
    mapped_write_buffer_pages: u64,
    reads: u64,
    writes: u64,
    flushes: u64,
    bytes_read: u64,
    bytes_written: u64,
    read_hits: u64,
    read_misses: u64,
    hit_rate: f64,
    write_buffer_fill: f64,
    destage_backlog_pages: u64,
    promotions: u64,
    bytes_moved: u64,
    steps_done: u64,
    steps_refused: u64,
    reconfiguration: Copier,
    replan: Option<Replan>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Copier {
    state: String,
    policy: Option<String>,
    steps_total: u64,
    steps_pending: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Replan {
    policy: String,
    plans: u64,
    last_trigger: Option<String>,
    last_planned_pages: u64,
    requests_seen: u64,
    last_error: Option<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let path = super::serve::control_path(&a.control, &a.unix)?;
    let v = reblock_engine::control::request(&path, &serde_json::json!({"cmd": "status"}))
        .map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let s: Shown = serde_json::from_value(v)?;
    println!("{}", summary_line(&s));
    if a.long {
        for line in detail_lines(&s) {
            println!("{line}");
        }
    }
    Ok(())
}

/// `3 s`, `4m12s`, `2h05m`, `3d04h`.
fn uptime(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

/// What the background copier does, in a few words.
fn copier(c: &Copier) -> String {
    match (c.state.as_str(), c.steps_pending) {
        ("" | "idle", 0) => "copier idle".into(),
        (state, 0) => format!("copier {state}"),
        (state, pending) => format!(
            "copier {state}, {} of {} steps left",
            pending, c.steps_total
        ),
    }
}

/// One line, as `dmsetup status` prints one line per device.
fn summary_line(s: &Shown) -> String {
    let mut flags = Vec::new();
    if s.read_only {
        flags.push("read-only");
    }
    if s.needs_check {
        flags.push("NEEDS CHECK");
    }
    let flags = if flags.is_empty() {
        String::new()
    } else {
        format!(" ({})", flags.join(", "))
    };
    format!(
        "{mode}{flags}, up {up}, {conns} connection{plural}; reads {reads} ({hit:.1} % hits, \
         {misses} misses), writes {writes}; write buffer {fill:.1} % full, {backlog} pages to \
         destage; {promotions} pages promoted; {copier}",
        mode = if s.mode.is_empty() {
            "unknown"
        } else {
            &s.mode
        },
        up = uptime(s.uptime_s),
        conns = s.connections,
        plural = if s.connections == 1 { "" } else { "s" },
        reads = s.reads,
        hit = 100.0 * s.hit_rate,
        misses = s.read_misses,
        writes = s.writes,
        fill = 100.0 * s.write_buffer_fill,
        backlog = s.destage_backlog_pages,
        promotions = s.promotions,
        copier = copier(&s.reconfiguration),
    )
}

fn detail_lines(s: &Shown) -> Vec<String> {
    let page = s.page_bytes.max(1);
    let mut out = vec![
        format!(
            "  data area   {} in pages of {}",
            format_bytes(s.data_bytes),
            format_bytes(page)
        ),
        format!(
            "  BOPT        {} of {} pages mapped ({} in the write buffer), {} dirty",
            s.mapped_pages, s.bopt_pages, s.mapped_write_buffer_pages, s.destage_backlog_pages
        ),
        format!(
            "  requests    {} reads ({}), {} writes ({}), {} flushes",
            s.reads,
            format_bytes(s.bytes_read),
            s.writes,
            format_bytes(s.bytes_written),
            s.flushes
        ),
        format!(
            "  copier      {}; {} moved in {} steps ({} refused by racing writes){}",
            copier(&s.reconfiguration),
            format_bytes(s.bytes_moved),
            s.steps_done,
            s.steps_refused,
            s.reconfiguration
                .policy
                .as_ref()
                .map(|p| format!(", plan from {p}"))
                .unwrap_or_default()
        ),
        format!(
            "  free space  {} pages free (trimmed, zeroed or never written: read as zeros); \
             {} FS2 replicas of hot pages, {} reads served from a replica",
            s.free_pages, s.replicas, s.replica_hits
        ),
        format!(
            "  checksums   {}",
            if s.data_checksums {
                format!(
                    "every BOPT page verified on read; {} damaged pages found while serving",
                    s.data_checksum_errors
                )
            } else {
                "off for data pages (--no-data-checksums, or an image of format version 2)".into()
            }
        ),
    ];
    if let Some(r) = &s.replan {
        out.push(format!(
            "  re-planning {} plans with {} from {} requests seen; last planned {} pages{}{}",
            r.plans,
            r.policy,
            r.requests_seen,
            r.last_planned_pages,
            r.last_trigger
                .as_ref()
                .map(|t| format!(" (trigger: {t})"))
                .unwrap_or_default(),
            r.last_error
                .as_ref()
                .map(|e| format!("; last error: {e}"))
                .unwrap_or_default()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_one_plain_line() {
        let s: Shown = serde_json::from_value(serde_json::json!({
            "mode": "normal", "uptime_s": 252.4, "connections": 1, "reads": 120,
            "read_hits": 30, "read_misses": 90, "hit_rate": 0.25, "writes": 2,
            "write_buffer_fill": 0.125, "destage_backlog_pages": 16, "promotions": 48,
            "bytes_read": 491520,
            "reconfiguration": {"state": "running", "steps_pending": 3, "steps_total": 10}
        }))
        .unwrap();
        let line = summary_line(&s);
        assert_eq!(
            line,
            "normal, up 4m12s, 1 connection; reads 120 (25.0 % hits, 90 misses), writes 2; \
             write buffer 12.5 % full, 16 pages to destage; 48 pages promoted; copier \
             running, 3 of 10 steps left"
        );
        assert!(!line.contains('"') && !line.contains('\n'));
        let details = detail_lines(&s).join("\n");
        assert!(details.contains("480.0 KiB"), "{details}");
        assert!(!details.contains('"'), "{details}");
    }

    #[test]
    fn uptime_reads_like_lvs() {
        assert_eq!(uptime(3.2), "3s");
        assert_eq!(uptime(7500.0), "2h05m");
        assert_eq!(uptime(3.0 * 86400.0 + 4.0 * 3600.0), "3d04h");
    }
}
