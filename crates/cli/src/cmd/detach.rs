//! `reblock detach` (being built).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("'reblock detach' is not built yet")
}
