//! `reblock freemap IMAGE`: the free extents of an ext2/3/4 image, read from its block
//! bitmaps without mounting it: what `serve --free-from ext4` would seed its free-space map
//! with, and what FS2-style replicas may use.

use reblock_freespace::read_ext4_free;
use serde::Serialize;
use std::path::PathBuf;

/// Print the free extents of an ext2/3/4 file system image (read from its block bitmaps).
///
/// The image must be cleanly unmounted: an image whose journal needs recovery, or that is
/// mounted, may have stale bitmaps, and reblock refuses it rather than take a used block for
/// free. Extents are printed in 512-byte sectors of the image (`--unit` to change).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device holding the file system.
    pub image: PathBuf,
    /// Unit of the printed extents.
    #[arg(long, value_enum, default_value_t = Unit::Sectors)]
    pub unit: Unit,
    /// Print a summary only, not every extent.
    #[arg(long)]
    pub summary: bool,
    /// Print JSON: {"block_size", "blocks", "groups", "free_blocks", "free_bytes", "unit",
    /// "extents": [{"start", "len"}...]}.
    #[arg(long)]
    pub json: bool,
}

/// Unit of printed extents.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// 512-byte sectors (the unit of traces).
    Sectors,
    /// File system blocks.
    Blocks,
    /// Bytes.
    Bytes,
}

#[derive(Serialize)]
struct Extent {
    start: u64,
    len: u64,
}

#[derive(Serialize)]
struct Report {
    image: String,
    block_size: u64,
    blocks: u64,
    groups: u64,
    free_blocks: u64,
    free_bytes: u64,
    free_extents: usize,
    count_mismatch_groups: Vec<u64>,
    unit: Unit,
    #[serde(skip_serializing_if = "Option::is_none")]
    extents: Option<Vec<Extent>>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let fs = read_ext4_free(&a.image)?;
    let factor = match a.unit {
        Unit::Sectors => fs.block_size / 512,
        Unit::Blocks => 1,
        Unit::Bytes => fs.block_size,
    };
    let extents = (!a.summary).then(|| {
        fs.free
            .iter()
            .map(|r| Extent {
                start: r.start * factor,
                len: (r.end - r.start) * factor,
            })
            .collect::<Vec<_>>()
    });
    let rep = Report {
        image: a.image.display().to_string(),
        block_size: fs.block_size,
        blocks: fs.blocks,
        groups: fs.groups,
        free_blocks: fs.free.total(),
        free_bytes: fs.free.total() * fs.block_size,
        free_extents: fs.free.len(),
        count_mismatch_groups: fs.count_mismatches.clone(),
        unit: a.unit,
        extents,
    };
    if !rep.count_mismatch_groups.is_empty() {
        tracing::warn!(
            "{}: {} group(s) whose descriptor free count disagrees with the bitmap (the bitmap is used): {:?}",
            rep.image,
            rep.count_mismatch_groups.len(),
            rep.count_mismatch_groups
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(());
    }
    println!(
        "{}: {} blocks of {} bytes in {} groups; {} free blocks ({:.1}%, {} bytes) in {} extents",
        rep.image,
        rep.blocks,
        rep.block_size,
        rep.groups,
        rep.free_blocks,
        100.0 * rep.free_blocks as f64 / rep.blocks.max(1) as f64,
        rep.free_bytes,
        rep.free_extents
    );
    if let Some(ex) = &rep.extents {
        let unit = match a.unit {
            Unit::Sectors => "sectors",
            Unit::Blocks => "blocks",
            Unit::Bytes => "bytes",
        };
        println!("start_{unit}\tlen_{unit}");
        for e in ex {
            println!("{}\t{}", e.start, e.len);
        }
    }
    Ok(())
}
