//! `reblock check IMAGE`: verify the on-disk BOPT offline (superblock, checksums, map
//! entries against segments, no FS page mapped twice); `--repair` rebuilds what it can.

use anyhow::Context;
use reblock_engine::check::check;
use reblock_engine::FileStore;
use std::fs::OpenOptions;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image (or, with --bopt-device, its data device).
    pub image: PathBuf,
    /// The separate BOPT device, if the image was formatted with one.
    #[arg(long)]
    pub bopt_device: Option<PathBuf>,
    /// Rewrite damaged metadata from what survives (summaries, superblock copies).
    #[arg(long)]
    pub repair: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let open = |p: &PathBuf| {
        OpenOptions::new()
            .read(true)
            .write(a.repair)
            .open(p)
            .with_context(|| format!("{}", p.display()))
    };
    let data = open(&a.image)?;
    reblock_engine::image::lock_exclusive(&data, &a.image).map_err(anyhow::Error::msg)?;
    let bopt = a.bopt_device.as_ref().map(open).transpose()?;
    let store = FileStore::new(data, bopt);
    let rep = check(&store, a.repair).map_err(|e| anyhow::anyhow!("{}: {e}", a.image.display()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        println!(
            "{}: data {} bytes, BOPT {} pages in {} segments, generation {}, commit {}, {} pages mapped, flags [{}]",
            a.image.display(), rep.data_bytes, rep.bopt_pages, rep.segments, rep.generation, rep.commit, rep.mapped_pages, rep.flags.join(",")
        );
        println!(
            "data checksums: {} mapped pages verified, {} damaged, {} unverifiable after an unclean stop",
            rep.data_pages_verified,
            rep.damaged_data_pages.len(),
            rep.unverifiable_data_pages.len()
        );
        for n in &rep.notes {
            println!("note: {n}");
        }
        for p in &rep.problems {
            println!("problem: {p}");
        }
        if rep.repaired {
            println!("repaired: summaries and superblock rewritten");
        }
        for r in &rep.recovered {
            println!("recovered: {r}");
        }
        for u in &rep.unrecoverable {
            println!("not recovered: {u}");
        }
    }
    if !rep.is_clean() && !rep.repaired {
        anyhow::bail!("{} problem(s) found; run with --repair", rep.problems.len());
    }
    Ok(())
}
