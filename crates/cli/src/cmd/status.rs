//! `reblock status`: a running server's state over its control socket.

use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The server's control socket.
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// The server's NBD Unix socket (its control socket is SOCK.ctl).
    #[arg(long)]
    pub unix: Option<PathBuf>,
    /// Print the raw JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let path = super::serve::control_path(&a.control, &a.unix)?;
    let v = reblock_engine::control::request(&path, &serde_json::json!({"cmd": "status"}))
        .map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let g = |k: &str| v.get(k).cloned().unwrap_or_default();
    println!(
        "mode            {} (read-only: {}, needs check: {})",
        g("mode"),
        g("read_only"),
        g("needs_check")
    );
    println!(
        "map             {} of {} pages mapped ({} in the write buffer), {} dirty",
        g("mapped_pages"),
        g("bopt_pages"),
        g("mapped_write_buffer_pages"),
        g("dirty_pages")
    );
    println!(
        "requests        {} ({} reads, {} writes, {} flushes)",
        g("requests_served"),
        g("reads"),
        g("writes"),
        g("flushes")
    );
    println!(
        "hit rate        {:.3} ({} reads served from the BOPT)",
        g("hit_rate").as_f64().unwrap_or(0.0),
        g("read_hits")
    );
    println!(
        "bytes moved     {} (steps {}, refused {}, commits {})",
        g("bytes_moved"),
        g("steps_done"),
        g("steps_refused"),
        g("commits")
    );
    let r = g("reconfiguration");
    println!(
        "reconfiguration {} ({} of {} steps pending)",
        r.get("state").cloned().unwrap_or_default(),
        r.get("steps_pending").cloned().unwrap_or_default(),
        r.get("steps_total").cloned().unwrap_or_default()
    );
    if let Some(rp) = v.get("replan").filter(|r| !r.is_null()) {
        let f = |k: &str| rp.get(k).cloned().unwrap_or_default();
        println!(
            "re-planning     {} plans with {} (last: {} pages, trigger {}, {} requests{})",
            f("plans"),
            f("policy"),
            f("last_planned_pages"),
            f("last_trigger"),
            f("last_window_requests"),
            rp.get("last_error")
                .and_then(|e| e.as_str())
                .map(|e| format!(", error: {e}"))
                .unwrap_or_default()
        );
    }
    Ok(())
}
