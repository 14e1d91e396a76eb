//! Reading and writing the metadata: superblock pairs, segment summaries, formatting, and
//! rebuilding the map from the summaries (seed 001 §3.5.1).

use crate::format::{
    Entry, FormatError, Layout, Summary, Superblock, ENTRY_DIRTY, ENTRY_VALID, FLAG_DIRTY,
    FLAG_SEPARATE, SUPERBLOCK_BYTES, SUPERBLOCK_MAGIC,
};
use crate::store::{Dev, Store};
use reblock_layout::{Map, MapError};
use serde::Serialize;
use std::io;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum MetaError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("no reblock superblock at the end of the BOPT device (not formatted)")]
    NotFormatted,
    #[error("both superblock copies are damaged (copy 0: {0}; copy 1: {1}); run 'reblock check --repair'")]
    Corrupt(FormatError, FormatError),
    #[error("the BOPT device is {actual} bytes but the superblock describes {expected}")]
    Size { actual: u64, expected: u64 },
    #[error(transparent)]
    Map(#[from] MapError),
}

pub fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> MetaError {
    let what = what.into();
    move |source| MetaError::Io { what, source }
}

/// The superblock found, and which copies were readable.
#[derive(Clone, Debug)]
pub struct FoundSuperblock {
    pub sb: Superblock,
    /// Per copy: `None` when it decoded, else why not.
    pub copy_errors: [Option<FormatError>; 2],
}

/// Reads both superblock copies at the end of the BOPT device and returns the valid one
/// with the higher generation. No valid copy and no magic anywhere: not formatted.
pub fn read_superblock(store: &dyn Store) -> Result<FoundSuperblock, MetaError> {
    let len = store.len(Dev::Bopt).map_err(io_err("BOPT device size"))?;
    if len < 2 * SUPERBLOCK_BYTES {
        return Err(MetaError::NotFormatted);
    }
    let mut decoded = Vec::with_capacity(2);
    let mut magic_seen = false;
    for copy in 0..2 {
        let mut b = vec![0u8; SUPERBLOCK_BYTES as usize];
        let off = crate::format::superblock_offset(len, copy);
        store
            .read_at(Dev::Bopt, &mut b, off)
            .map_err(io_err(format!("superblock copy {copy} at byte {off}")))?;
        magic_seen |= &b[0..8] == SUPERBLOCK_MAGIC;
        decoded.push(Superblock::decode(&b));
    }
    let best = decoded
        .iter()
        .filter_map(|d| d.as_ref().ok())
        .max_by_key(|sb| sb.generation)
        .copied();
    let copy_errors = [decoded[0].clone().err(), decoded[1].clone().err()];
    match best {
        Some(sb) => {
            if sb.layout.device_bytes != len {
                return Err(MetaError::Size {
                    actual: len,
                    expected: sb.layout.device_bytes,
                });
            }
            Ok(FoundSuperblock { sb, copy_errors })
        }
        None if magic_seen => {
            let [a, b] = copy_errors;
            Err(MetaError::Corrupt(a.expect("failed"), b.expect("failed")))
        }
        None => Err(MetaError::NotFormatted),
    }
}

/// Writes the next generation of `sb` to the copy it selects (`generation % 2`), then
/// syncs: the other copy keeps the previous generation until this one is durable.
pub fn write_superblock(store: &dyn Store, sb: &mut Superblock) -> Result<(), MetaError> {
    sb.generation += 1;
    let copy = (sb.generation % 2) as u32;
    let off = sb.layout.superblock_offset(copy);
    store
        .write_at(Dev::Bopt, &sb.encode(), off)
        .map_err(io_err(format!("superblock copy {copy}")))?;
    store
        .sync(Dev::Bopt)
        .map_err(io_err("sync after superblock"))
}

/// Writes an empty BOPT: every segment's summary (copy 0, commit 0) and both superblock
/// copies. The data area is not touched. Returns the superblock.
pub fn format(store: &dyn Store, layout: &Layout, image_id: u64) -> Result<Superblock, MetaError> {
    for seg in 0..layout.segments() {
        let s = Summary {
            segment: seg,
            commit: 0,
            image_id,
            entries: empty_entries(layout, seg),
        };
        let off = layout.summary_offset(seg, 0);
        store
            .write_at(Dev::Bopt, &s.encode(layout.summary_bytes), off)
            .map_err(io_err(format!("summary of segment {seg}")))?;
        // Copy 1 is zeroed so leftovers of an older format can never decode as current.
        let zero = vec![0u8; layout.summary_bytes as usize];
        store
            .write_at(Dev::Bopt, &zero, layout.summary_offset(seg, 1))
            .map_err(io_err(format!("summary copy 1 of segment {seg}")))?;
    }
    store
        .sync(Dev::Bopt)
        .map_err(io_err("sync after summaries"))?;
    let mut sb = Superblock {
        flags: if layout.separate { FLAG_SEPARATE } else { 0 },
        generation: 0,
        image_id,
        commit: 0,
        layout: *layout,
    };
    write_superblock(store, &mut sb)?;
    write_superblock(store, &mut sb)?;
    Ok(sb)
}

fn empty_entries(layout: &Layout, seg: u32) -> Vec<Entry> {
    (0..layout.segment_pages)
        .map(|i| Entry {
            fs_page: 0,
            slot: seg * layout.segment_pages + i,
            flags: 0,
        })
        .collect()
}

/// The entries of one segment as the map holds them now.
pub fn segment_entries(layout: &Layout, map: &Map, seg: u32) -> Vec<Entry> {
    (0..layout.segment_pages)
        .map(|i| {
            let slot = seg * layout.segment_pages + i;
            match map.fs_page_of(slot) {
                Some(p) => Entry {
                    fs_page: p,
                    slot,
                    flags: ENTRY_VALID | if map.is_dirty(slot) { ENTRY_DIRTY } else { 0 },
                },
                None => Entry {
                    fs_page: 0,
                    slot,
                    flags: 0,
                },
            }
        })
        .collect()
}

/// Per segment, the newest valid summary copy of a commit the superblock records.
#[derive(Clone, Debug, Default)]
pub struct LoadedSummaries {
    pub chosen: Vec<Option<Summary>>,
    /// Which copy holds the chosen summary (the next commit writes the other one).
    pub copy: Vec<u32>,
    /// (segment, copy, why) for every copy that did not decode or belongs elsewhere.
    pub bad_copies: Vec<(u32, u32, String)>,
    /// Copies newer than the superblock's commit number (a commit cut short).
    pub uncommitted: u64,
}

pub fn load_summaries(store: &dyn Store, sb: &Superblock) -> Result<LoadedSummaries, MetaError> {
    let l = &sb.layout;
    let mut out = LoadedSummaries::default();
    let mut buf = vec![0u8; l.summary_bytes as usize];
    for seg in 0..l.segments() {
        let mut best: Option<(u32, Summary)> = None;
        for copy in 0..2 {
            let off = l.summary_offset(seg, copy);
            store
                .read_at(Dev::Bopt, &mut buf, off)
                .map_err(io_err(format!("summary of segment {seg} copy {copy}")))?;
            match Summary::decode(&buf, seg, l.segment_pages) {
                Ok(s) if s.image_id != sb.image_id => out.bad_copies.push((
                    seg,
                    copy,
                    format!(
                        "image id {:#x} is not this image's {:#x}",
                        s.image_id, sb.image_id
                    ),
                )),
                // Written by a commit whose superblock never became durable: rolled back.
                Ok(s) if s.commit > sb.commit => out.uncommitted += 1,
                Ok(s) => {
                    if best.as_ref().is_none_or(|(_, b)| s.commit > b.commit) {
                        best = Some((copy, s));
                    }
                }
                // A never-written second copy is all zeros: not worth reporting.
                Err(_) if buf.iter().all(|&b| b == 0) => {}
                Err(e) => out.bad_copies.push((seg, copy, e.to_string())),
            }
        }
        out.copy.push(best.as_ref().map_or(1, |(c, _)| *c));
        out.chosen.push(best.map(|(_, s)| s));
    }
    Ok(out)
}

/// What rebuilding the map found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RebuildReport {
    pub entries: u64,
    pub dirty: u64,
    /// Segments with no valid summary copy (treated as empty).
    pub lost_segments: Vec<u32>,
    /// Valid entries naming an FS page past the data area (ignored).
    pub out_of_range: u64,
    /// Entries that lost to a newer commit's entry for the same FS page (a torn commit
    /// moved the page; the newer copy is current).
    pub conflicts: u64,
    /// Segments whose on-disk summary differs from the rebuilt map and must be rewritten.
    pub rewrite_segments: Vec<u32>,
}

/// Rebuilds the map from the chosen summaries. With `trust_dirty` false (an unclean stop)
/// every entry is dirty (seed 001 §3.5.1); after a clean stop the stored dirty bits hold.
/// Where two segments claim one FS page, the newer commit wins.
pub fn rebuild_map(
    layout: &Layout,
    loaded: &LoadedSummaries,
    trust_dirty: bool,
) -> Result<(Map, RebuildReport), MetaError> {
    let fs_pages = layout.data_bytes / u64::from(layout.page_bytes);
    let mut map = Map::new(fs_pages, layout.bopt_pages)?;
    let mut rep = RebuildReport::default();
    let mut all: Vec<(u64, Entry)> = Vec::new();
    for (seg, s) in loaded.chosen.iter().enumerate() {
        match s {
            Some(s) => all.extend(
                s.entries
                    .iter()
                    .filter(|e| e.valid())
                    .map(|e| (s.commit, *e)),
            ),
            None => rep.lost_segments.push(seg as u32),
        }
    }
    all.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut rewrite = std::collections::BTreeSet::new();
    for (_, e) in all {
        let seg = e.slot / layout.segment_pages;
        if e.fs_page >= fs_pages {
            rep.out_of_range += 1;
            rewrite.insert(seg);
            continue;
        }
        if map.lookup(e.fs_page).is_some() {
            rep.conflicts += 1;
            rewrite.insert(seg);
            continue;
        }
        let dirty = !trust_dirty || e.dirty();
        map.insert(e.fs_page, e.slot, dirty)?;
        rep.entries += 1;
        rep.dirty += u64::from(dirty);
    }
    rewrite.extend(rep.lost_segments.iter().copied());
    rep.rewrite_segments = rewrite.into_iter().collect();
    Ok((map, rep))
}

/// True when the superblock says the engine stopped uncleanly.
pub fn was_unclean(sb: &Superblock) -> bool {
    sb.flags & FLAG_DIRTY != 0
}
