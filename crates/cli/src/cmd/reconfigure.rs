//! `reblock reconfigure --plan plan.json`: hand an offline plan to a running server,
//! which diffs it against its map and moves pages in the background. On a detached
//! server (`reblock detach`) this re-enables the BOPT, and automatic re-planning with it.

use anyhow::Context;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The plan (docs/layout.md describes plan.json), e.g. from `reblock plan`.
    #[arg(long)]
    pub plan: PathBuf,
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
    let text = std::fs::read_to_string(&a.plan).with_context(|| format!("{}", a.plan.display()))?;
    // Parse here too, so a bad plan is reported with its own file name, line and column.
    reblock_layout::Plan::from_json(&text, &a.plan.display().to_string())?;
    let path = super::serve::control_path(&a.control, &a.unix)?;
    let v = reblock_engine::control::request(
        &path,
        &serde_json::json!({"cmd": "reconfigure", "plan": text}),
    )
    .map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "reconfiguration started: {} steps, {} bytes to move",
            v["steps"], v["bytes_to_move"]
        );
    }
    Ok(())
}
