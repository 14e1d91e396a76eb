//! Seeding the engine's free-space map at `serve` start: from the holes of a freshly
//! formatted image file (never written: they read as zeros), and with `--free-from ext4`
//! from the block bitmaps of the file system on the image, read through the engine so
//! that blocks whose newest copy sits in the BOPT are read from there.

use anyhow::{bail, Context};
use reblock_engine::Engine;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Where `serve --free-from` learns which blocks are free.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeFrom {
    /// The ext2/3/4 block bitmaps on the image (the file system must be cleanly unmounted).
    Ext4,
}

/// The holes of `path` within its first `len` bytes, as (offset, length) byte ranges.
/// Empty where the file system cannot tell (no SEEK_HOLE support): nothing is assumed.
pub fn file_holes(path: &Path, len: u64) -> std::io::Result<Vec<(u64, u64)>> {
    let f = File::open(path)?;
    let fd = f.as_raw_fd();
    let seek = |at: u64, whence| {
        // SAFETY: lseek on a file descriptor this function owns; no memory is passed.
        let r = unsafe { libc::lseek(fd, at as libc::off_t, whence) };
        (r >= 0).then_some(r as u64)
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at < len {
        let Some(hole) = seek(at, libc::SEEK_HOLE) else {
            break;
        };
        if hole >= len {
            break;
        }
        let data = seek(hole, libc::SEEK_DATA).unwrap_or(len).min(len);
        out.push((hole, data - hole));
        at = data;
    }
    Ok(out)
}

/// Marks the never-written holes of a freshly formatted image free; returns the pages.
pub fn seed_from_holes(engine: &Engine, image: &Path) -> anyhow::Result<u64> {
    if !engine.has_free_map() || engine.is_read_only() {
        return Ok(0);
    }
    let holes = file_holes(image, engine.layout().data_bytes)
        .with_context(|| format!("find the holes of {}", image.display()))?;
    // Committed with the first flush: until then a crash merely forgets that these
    // pages are free (they read as zeros either way).
    Ok(engine.seed_free(&holes)?)
}

/// `--free-from ext4`: the free blocks of the file system on the served image become free
/// pages. Returns the pages newly marked free.
pub fn seed_from_ext4(engine: &Engine, image: &Path) -> anyhow::Result<u64> {
    if engine.is_read_only() {
        bail!("--free-from ext4: the export is read-only, so its free-space map cannot change");
    }
    if !engine.has_free_map() {
        bail!(
            "--free-from ext4: {} was formatted before reblock kept a free-space map; it has no room for one",
            image.display()
        );
    }
    let read = |buf: &mut [u8], at: u64| engine.read_bytes(buf, at);
    let fs = reblock_freespace::ext4::read_ext4_free_with(image, &read)?;
    let extents: Vec<(u64, u64)> = fs
        .free
        .iter()
        .map(|r| (r.start * fs.block_size, (r.end - r.start) * fs.block_size))
        .filter(|&(start, _)| start < engine.layout().data_bytes)
        .map(|(start, len)| (start, len.min(engine.layout().data_bytes - start)))
        .collect();
    // Committed with the first flush (until then a crash forgets it: no harm).
    Ok(engine.seed_free(&extents)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_of_a_sparse_file_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        let f = File::create(&p).unwrap();
        f.set_len(8 << 20).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_all_at(&[1u8; 4096], 4 << 20).unwrap();
        f.sync_all().unwrap();
        let holes = file_holes(&p, 8 << 20).unwrap();
        let total: u64 = holes.iter().map(|h| h.1).sum();
        // Whatever the file system's block size, the written 4 KiB is not a hole and
        // most of the rest is.
        assert!((7 << 20..=(8 << 20) - 4096).contains(&total), "{holes:?}");
        assert!(holes
            .iter()
            .all(|&(o, l)| o + l <= 4 << 20 || o >= (4 << 20) + 4096));
    }
}
