//! `reblock plan` (being built).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("'reblock plan' is not built yet")
}
