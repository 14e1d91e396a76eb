//! The free-space map: one bit per data page, set when the client trimmed or zeroed the
//! page (NBD TRIM / WRITE_ZEROES) or the image's file system says it is free, so that the
//! page reads as zeros, holds no copy in the BOPT, and BLOCK_STATUS reports it as a hole.
//! A client write takes a page back at once.
//!
//! On disk (docs/format.md "Free-space map", [`crate::format::freemap_at`]) the bits are
//! cut into chunks of [`FREEMAP_CHUNK_PAGES`] pages; every chunk has two copies written
//! alternately by the same commits as the segment summaries, so a chunk copy counts only
//! once the superblock naming its commit is durable.

use crate::format::{
    FreeChunk, Layout, Superblock, FREEMAP_CHUNK_BYTES, FREEMAP_CHUNK_PAGES, FREEMAP_MAGIC,
    REPLICA_MAGIC,
};
use crate::meta::{io_err, MetaError};
use crate::store::{Dev, Store};
use serde::Serialize;

/// The in-memory free-space map and which of its chunks the next commit must write.
#[derive(Clone, Debug, Default)]
pub struct FreeMap {
    words: Vec<u64>,
    /// The bits as the last completed commit left them on disk: a replica may only go
    /// into a page whose freedom is durable, or a crash could bring back the page's data
    /// with a replica written over it.
    durable: Vec<u64>,
    pages: u64,
    free: u64,
    /// Chunks changed since the last commit.
    dirty: Vec<bool>,
    /// Per chunk, the copy holding its last durable version.
    durable_copy: Vec<u32>,
}

/// What loading the map found wrong (empty when all is well).
#[derive(Clone, Debug, Default, Serialize)]
pub struct FreeMapReport {
    /// (chunk, copy, why) for every copy that did not decode.
    pub bad_copies: Vec<(u32, u32, String)>,
    /// Copies written by a commit cut short (ignored, rewritten by the next commit).
    pub uncommitted: u64,
    /// Chunks whose newest committed copy may be lost: none of their pages is taken
    /// as free, so they read what the data area holds.
    pub untrusted_chunks: Vec<u32>,
}

/// Which copy of one chunk to trust.
enum ChunkRead {
    Committed(FreeChunk),
    Uncommitted,
    Bad(String),
}

impl FreeMap {
    /// A map of `pages` data pages, none free; `chunks` 0 means the image stores none
    /// (and then no page can be free, so none is held in memory either).
    pub fn new(pages: u64, chunks: u32) -> FreeMap {
        let pages = if chunks == 0 { 0 } else { pages };
        FreeMap {
            words: vec![0; pages.div_ceil(64) as usize],
            durable: vec![0; pages.div_ceil(64) as usize],
            pages,
            free: 0,
            dirty: vec![false; chunks as usize],
            durable_copy: vec![0; chunks as usize],
        }
    }

    /// True when the image has room to persist the map (images formatted before it
    /// existed have none, and serve without one: TRIM stays a hint there).
    pub fn persistent(&self) -> bool {
        !self.dirty.is_empty()
    }

    pub fn free_pages(&self) -> u64 {
        self.free
    }

    pub fn is_free(&self, page: u64) -> bool {
        page < self.pages && self.words[(page / 64) as usize] & (1 << (page % 64)) != 0
    }

    /// True when `page` is free and its last commit says so too.
    pub fn durably_free(&self, page: u64) -> bool {
        self.is_free(page) && self.durable[(page / 64) as usize] & (1 << (page % 64)) != 0
    }

    /// True when any page of `first..end` is free.
    pub fn any_free(&self, first: u64, end: u64) -> bool {
        self.free > 0 && (first..end.min(self.pages)).any(|p| self.is_free(p))
    }

    /// Marks `first..end` free or in use; returns how many pages changed.
    pub fn set(&mut self, first: u64, end: u64, free: bool) -> u64 {
        let mut changed = 0;
        for p in first..end.min(self.pages) {
            if self.is_free(p) == free {
                continue;
            }
            self.words[(p / 64) as usize] ^= 1 << (p % 64);
            changed += 1;
            if let Some(d) = self.dirty.get_mut((p / FREEMAP_CHUNK_PAGES) as usize) {
                *d = true;
            }
        }
        if free {
            self.free += changed;
        } else {
            self.free -= changed;
        }
        changed
    }

    /// Runs of `first..end` as (pages, free), in order, for BLOCK_STATUS.
    pub fn runs(&self, first: u64, end: u64) -> Vec<(u64, bool)> {
        let mut out: Vec<(u64, bool)> = Vec::new();
        for p in first..end {
            let f = self.is_free(p);
            match out.last_mut() {
                Some((n, last)) if *last == f => *n += 1,
                _ => out.push((1, f)),
            }
        }
        out
    }

    /// The bits of one chunk as stored.
    fn chunk_bits(&self, chunk: u32) -> Vec<u8> {
        let first = u64::from(chunk) * FREEMAP_CHUNK_PAGES;
        let mut bits = vec![0u8; (FREEMAP_CHUNK_PAGES / 8) as usize];
        for i in 0..FREEMAP_CHUNK_PAGES.min(self.pages.saturating_sub(first)) {
            if self.is_free(first + i) {
                bits[(i / 8) as usize] |= 1 << (i % 8);
            }
        }
        bits
    }

    /// Encodes every changed chunk under `commit`, clearing its mark: (offset, bytes).
    pub fn snapshot(&mut self, sb: &Superblock, commit: u64) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        for chunk in 0..self.dirty.len() as u32 {
            if !std::mem::take(&mut self.dirty[chunk as usize]) {
                continue;
            }
            let bits = self.chunk_bits(chunk);
            out.push((
                chunk,
                Area::FreeMap.encode(chunk, commit, sb.image_id, bits),
            ));
        }
        out
    }

    /// Marks every chunk changed (a clean close rewrites them all).
    pub fn touch_all(&mut self) {
        self.dirty.iter_mut().for_each(|d| *d = true);
    }

    /// Marks the chunks of a snapshot changed again after its commit failed.
    pub fn retouch(&mut self, snap: &[(u32, Vec<u8>)]) {
        for (chunk, _) in snap {
            self.dirty[*chunk as usize] = true;
        }
    }

    /// Where the next commit writes chunk `chunk` (the copy not holding its durable one).
    pub fn next_offset(&self, sb: &Superblock, chunk: u32) -> u64 {
        sb.layout
            .freemap_offset(chunk, 1 - self.durable_copy[chunk as usize])
    }

    /// After a commit of `snap` became durable, its copies are the durable ones.
    pub fn committed(&mut self, snap: &[(u32, Vec<u8>)]) {
        for (chunk, bytes) in snap {
            let c = &mut self.durable_copy[*chunk as usize];
            *c = 1 - *c;
            self.set_durable(*chunk, &bytes[crate::format::freemap_at::BITS..]);
        }
    }

    /// Copies one chunk's stored bits into the durable view.
    fn set_durable(&mut self, chunk: u32, bits: &[u8]) {
        let first = u64::from(chunk) * FREEMAP_CHUNK_PAGES;
        for i in 0..FREEMAP_CHUNK_PAGES.min(self.pages.saturating_sub(first)) {
            let (p, on) = (first + i, bits[(i / 8) as usize] & (1 << (i % 8)) != 0);
            let w = &mut self.durable[(p / 64) as usize];
            if on {
                *w |= 1 << (p % 64);
            } else {
                *w &= !(1 << (p % 64));
            }
        }
    }
}

/// Writes every free-map chunk and replica-table block under `commit`, unsynced, to the
/// copy holding its durable version (`durable`) or to the other one (`reblock check
/// --repair`).
pub fn write_all(
    store: &dyn Store,
    sb: &Superblock,
    (map, table): (&FreeMap, &crate::replicas::ReplicaTable),
    commit: u64,
    durable: bool,
) -> Result<(), MetaError> {
    for area in [Area::FreeMap, Area::Replicas] {
        for block in 0..area.blocks(&sb.layout) {
            let (bits, held) = match area {
                Area::FreeMap => (map.chunk_bits(block), map.durable_copy[block as usize]),
                Area::Replicas => (table.block_bytes(block), table.durable_copy(block)),
            };
            let copy = if durable { held } else { 1 - held };
            let bytes = area.encode(block, commit, sb.image_id, bits);
            store
                .write_at(Dev::Bopt, &bytes, area.offset(&sb.layout, block, copy))
                .map_err(io_err(format!(
                    "rewrite {} {block} copy {copy}",
                    area.label()
                )))?;
        }
    }
    Ok(())
}

/// The two kinds of block of the free-space area: free-map chunks and replica-table
/// blocks. Both have two copies written alternately by the metadata commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    FreeMap,
    Replicas,
}

impl Area {
    fn magic(self) -> &'static [u8; 8] {
        match self {
            Area::FreeMap => FREEMAP_MAGIC,
            Area::Replicas => REPLICA_MAGIC,
        }
    }
    pub fn blocks(self, l: &Layout) -> u32 {
        match self {
            Area::FreeMap => l.freemap_chunks(),
            Area::Replicas => l.replica_blocks(),
        }
    }
    pub fn offset(self, l: &Layout, block: u32, copy: u32) -> u64 {
        match self {
            Area::FreeMap => l.freemap_offset(block, copy),
            Area::Replicas => l.replica_block_offset(block, copy),
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Area::FreeMap => "free-space map chunk",
            Area::Replicas => "replica table block",
        }
    }
    /// Encodes one block's copy.
    pub fn encode(self, block: u32, commit: u64, image_id: u64, bits: Vec<u8>) -> Vec<u8> {
        let c = FreeChunk {
            chunk: block,
            commit,
            image_id,
            bits,
        };
        c.encode_as(self.magic())
    }
}

/// Problems (a block whose newest commit may be lost) and notes (a torn write of a
/// commit cut short) for `reblock check`.
pub fn describe(
    area: Area,
    rep: &FreeMapReport,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let what = area.label();
    for (chunk, copy, why) in &rep.bad_copies {
        let line = format!("{what} {chunk} copy {copy}: {why}");
        if rep.untrusted_chunks.contains(chunk) {
            problems.push(line);
        } else {
            notes.push(format!(
                "{line} (a torn write of the commit cut short; the next commit overwrites it)"
            ));
        }
    }
    for chunk in &rep.untrusted_chunks {
        problems.push(match area {
            Area::FreeMap => {
                let first = u64::from(*chunk) * FREEMAP_CHUNK_PAGES;
                format!(
                    "{what} {chunk} (data pages {first}..{}): its newest commit may be lost; serving takes none of its pages as free",
                    first + FREEMAP_CHUNK_PAGES
                )
            }
            Area::Replicas => format!(
                "{what} {chunk}: its newest commit may be lost; serving drops its replicas (the originals hold the data)"
            ),
        });
    }
    if rep.uncommitted > 0 {
        notes.push(format!(
            "{} {what} copies belong to a commit cut short (ignored)",
            rep.uncommitted
        ));
    }
}

/// Writes both copies of every free-map chunk (nothing free) and replica-table block
/// (no replica) under commit 0 (part of `format`).
pub fn format(store: &dyn Store, l: &Layout, image_id: u64) -> Result<(), MetaError> {
    let pages = l.data_bytes / u64::from(l.page_bytes);
    let map = FreeMap::new(pages, l.freemap_chunks());
    for area in [Area::FreeMap, Area::Replicas] {
        for block in 0..area.blocks(l) {
            let bits = match area {
                Area::FreeMap => map.chunk_bits(block),
                Area::Replicas => crate::replicas::ReplicaTable::default().block_bytes(block),
            };
            let bytes = area.encode(block, 0, image_id, bits);
            for copy in 0..2 {
                store
                    .write_at(Dev::Bopt, &bytes, area.offset(l, block, copy))
                    .map_err(io_err(format!("{} {block} copy {copy}", area.label())))?;
            }
        }
    }
    Ok(())
}

fn read_block(
    store: &dyn Store,
    sb: &Superblock,
    area: Area,
    block: u32,
    copy: u32,
) -> Result<ChunkRead, MetaError> {
    let mut b = vec![0u8; FREEMAP_CHUNK_BYTES as usize];
    store
        .read_at(Dev::Bopt, &mut b, area.offset(&sb.layout, block, copy))
        .map_err(io_err(format!("{} {block} copy {copy}", area.label())))?;
    Ok(match FreeChunk::decode_as(&b, block, area.magic()) {
        Ok(c) if c.image_id != sb.image_id => ChunkRead::Bad(format!(
            "image id {:#x} is not this image's {:#x}",
            c.image_id, sb.image_id
        )),
        Ok(c) if c.commit > sb.commit => ChunkRead::Uncommitted,
        Ok(c) => ChunkRead::Committed(c),
        Err(e) => ChunkRead::Bad(e.to_string()),
    })
}

/// Which copy of one block holds its durable version, and its content when trusted.
pub struct BlockChoice {
    pub copy: u32,
    /// `None` when the block cannot be trusted (no valid copy, or the valid one may be
    /// older than a damaged one).
    pub block: Option<FreeChunk>,
    /// The other copy is not a committed one: the next commit must overwrite it.
    pub rewrite: bool,
}

/// Reads both copies of every block of `area` and picks the newer committed one. A
/// block with a copy that does not decode is trusted only while the superblock names a
/// pending commit (the copy is then a torn write of it); otherwise, and when no copy
/// decodes, it is untrusted. Copies of a commit cut short are ignored.
pub fn load_blocks(
    store: &dyn Store,
    sb: &Superblock,
    area: Area,
    rep: &mut FreeMapReport,
) -> Result<Vec<BlockChoice>, MetaError> {
    let pending = sb.pending_commit != 0;
    let mut out = Vec::new();
    for block in 0..area.blocks(&sb.layout) {
        let reads = [
            read_block(store, sb, area, block, 0)?,
            read_block(store, sb, area, block, 1)?,
        ];
        let mut best: Option<(u32, &FreeChunk)> = None;
        for (copy, r) in reads.iter().enumerate() {
            match r {
                ChunkRead::Committed(c) if best.is_none_or(|(_, b)| c.commit > b.commit) => {
                    best = Some((copy as u32, c));
                }
                ChunkRead::Committed(_) => {}
                ChunkRead::Uncommitted => rep.uncommitted += 1,
                ChunkRead::Bad(why) => rep.bad_copies.push((block, copy as u32, why.clone())),
            }
        }
        let damaged = reads.iter().any(|r| matches!(r, ChunkRead::Bad(_)));
        let whole = reads.iter().all(|r| matches!(r, ChunkRead::Committed(_)));
        let choice = match best {
            Some((copy, c)) if !damaged || pending => BlockChoice {
                copy,
                block: Some(c.clone()),
                rewrite: !whole,
            },
            found => {
                rep.untrusted_chunks.push(block);
                BlockChoice {
                    copy: found.map_or(1, |(c, _)| c),
                    block: None,
                    rewrite: true,
                }
            }
        };
        out.push(choice);
    }
    Ok(out)
}

/// Rebuilds the free map from the newer committed copy of each chunk. An untrusted chunk
/// frees none of its pages: they read what the data area holds rather than zeros a lost
/// commit may never have promised. Chunks whose other copy is not a committed one are
/// marked changed, so the next commit overwrites that copy.
pub fn load(store: &dyn Store, sb: &Superblock) -> Result<(FreeMap, FreeMapReport), MetaError> {
    let l = &sb.layout;
    let pages = l.data_bytes / u64::from(l.page_bytes);
    let mut map = FreeMap::new(pages, l.freemap_chunks());
    let mut rep = FreeMapReport::default();
    for (chunk, choice) in load_blocks(store, sb, Area::FreeMap, &mut rep)?
        .into_iter()
        .enumerate()
    {
        map.durable_copy[chunk] = choice.copy;
        if let Some(c) = &choice.block {
            let first = chunk as u64 * FREEMAP_CHUNK_PAGES;
            for i in 0..FREEMAP_CHUNK_PAGES.min(pages.saturating_sub(first)) {
                if c.bits[(i / 8) as usize] & (1 << (i % 8)) != 0 {
                    map.set(first + i, first + i + 1, true);
                }
            }
            map.set_durable(chunk as u32, &c.bits);
        }
        // Setting bits marked the chunk changed; only what the disk lacks must be written.
        map.dirty[chunk] = choice.rewrite;
    }
    Ok((map, rep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_counts_changes_and_runs_follow_the_bits() {
        let mut m = FreeMap::new(100, 1);
        assert_eq!(m.set(10, 20, true), 10);
        assert_eq!(m.set(15, 25, true), 5);
        assert_eq!(m.free_pages(), 15);
        assert_eq!(m.set(12, 13, false), 1);
        assert_eq!(m.free_pages(), 14);
        assert!(m.is_free(11) && !m.is_free(12) && m.is_free(24) && !m.is_free(25));
        assert_eq!(
            m.runs(8, 30),
            vec![(2, false), (2, true), (1, false), (12, true), (5, false)]
        );
        assert!(m.any_free(0, 11) && !m.any_free(25, 100));
    }
}
