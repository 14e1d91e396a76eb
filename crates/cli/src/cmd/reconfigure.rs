//! `reblock reconfigure` (being built).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("'reblock reconfigure' is not built yet")
}
