//! `reblock detach`: ask a running server to copy every dirty page home and empty its
//! BOPT (seed 001 §3.5.5); afterwards the data area alone is the complete image.
//! The detach stays done: nothing new is absorbed and `serve --replan-policy` plans
//! nothing until the operator re-enables the BOPT with `reblock reconfigure --plan`.

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
    let v = reblock_engine::control::request(&path, &serde_json::json!({"cmd": "detach"}))
        .map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "detached: {} bytes copied home; the data area is the complete image \
             (the BOPT stays empty until 'reblock reconfigure --plan' re-enables it)",
            v["bytes_moved"]
        );
    }
    Ok(())
}
