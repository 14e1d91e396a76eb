//! Reading and writing the metadata: superblock pairs, segment summaries, formatting, and
//! rebuilding the map from the summaries (seed 001 §3.5.1).

use crate::format::{
    Entry, FormatError, Layout, Summary, Superblock, ENTRY_CRC, ENTRY_DIRTY, ENTRY_VALID,
    FLAG_DIRTY, FLAG_SEPARATE, SUPERBLOCK_BYTES, SUPERBLOCK_MAGIC,
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
    put_superblock(store, sb)?;
    store
        .sync(Dev::Bopt)
        .map_err(io_err("sync after superblock"))
}

/// Writes the next generation of `sb` without syncing: the caller's next sync of the
/// BOPT device makes it durable (the pending-commit superblock rides on the data sync).
pub fn put_superblock(store: &dyn Store, sb: &mut Superblock) -> Result<(), MetaError> {
    sb.generation += 1;
    let copy = (sb.generation % 2) as u32;
    let off = sb.layout.superblock_offset(copy);
    store
        .write_at(Dev::Bopt, &sb.encode(), off)
        .map_err(io_err(format!("superblock copy {copy}")))
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
        // Both copies, so that a copy which does not decode is always damage (or a torn
        // write of a commit the superblock marks pending), never "not written yet".
        let bytes = s.encode(layout);
        for copy in 0..2 {
            store
                .write_at(Dev::Bopt, &bytes, layout.summary_offset(seg, copy))
                .map_err(io_err(format!("summary copy {copy} of segment {seg}")))?;
        }
    }
    crate::freemap::format(store, layout, image_id)?;
    store
        .sync(Dev::Bopt)
        .map_err(io_err("sync after summaries"))?;
    let mut sb = Superblock {
        flags: if layout.separate { FLAG_SEPARATE } else { 0 },
        generation: 0,
        image_id,
        commit: 0,
        pending_commit: 0,
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
            data_crc: 0,
        })
        .collect()
}

/// The entries of one segment as the map holds them now; `checksum` gives the CRC-32C
/// of a mapped slot's page, when known (format version 3, docs/format.md "Data
/// checksums").
pub fn segment_entries(
    layout: &Layout,
    map: &Map,
    seg: u32,
    checksum: impl Fn(u32) -> Option<u32>,
) -> Vec<Entry> {
    (0..layout.segment_pages)
        .map(|i| {
            let slot = seg * layout.segment_pages + i;
            match map.fs_page_of(slot) {
                Some(p) => {
                    let crc = checksum(slot);
                    Entry {
                        fs_page: p,
                        slot,
                        flags: ENTRY_VALID
                            | if map.is_dirty(slot) { ENTRY_DIRTY } else { 0 }
                            | if crc.is_some() { ENTRY_CRC } else { 0 },
                        data_crc: crc.unwrap_or(0),
                    }
                }
                None => Entry {
                    fs_page: 0,
                    slot,
                    flags: 0,
                    data_crc: 0,
                },
            }
        })
        .collect()
}

/// Per segment, the newest valid summary copy of a commit the superblock records, and
/// what could not be trusted.
#[derive(Clone, Debug, Default)]
pub struct LoadedSummaries {
    pub chosen: Vec<Option<Summary>>,
    /// Which copy holds the chosen summary (the next commit writes the other one).
    pub copy: Vec<u32>,
    /// (segment, copy, why) for every copy that did not decode or belongs elsewhere.
    pub bad_copies: Vec<(u32, u32, String)>,
    /// Copies newer than the superblock's commit number (a commit cut short).
    pub uncommitted: u64,
    /// (segment, copy) left by a commit cut short, whole or torn: a writable open
    /// overwrites each with its segment's chosen copy before anything else, so that no
    /// later commit reusing the number can make it count (docs/format.md "Ordering").
    pub leftovers: Vec<(u32, u32)>,
    /// Segments with no valid committed copy: their map is lost.
    pub lost: Vec<u32>,
    /// Segments with one valid copy and one damaged copy that may have been the newer:
    /// the valid copy cannot be proven current.
    pub stale: Vec<u32>,
    /// FS pages the lost and stale segments may map (from their readable entries).
    pub untrusted_pages: std::collections::BTreeSet<u64>,
    /// A lost or stale segment has a copy so damaged that its pages are unknown.
    pub untrusted_unknown: bool,
}

/// One summary copy as read.
enum CopyRead {
    Committed(Summary),
    Uncommitted,
    Bad(String),
}

fn read_copy(
    store: &dyn Store,
    sb: &Superblock,
    seg: u32,
    copy: u32,
    buf: &mut [u8],
) -> Result<CopyRead, MetaError> {
    let off = sb.layout.summary_offset(seg, copy);
    store
        .read_at(Dev::Bopt, buf, off)
        .map_err(io_err(format!("summary of segment {seg} copy {copy}")))?;
    Ok(
        match Summary::decode(buf, seg, sb.layout.segment_pages, sb.layout.version) {
            Ok(s) if s.image_id != sb.image_id => CopyRead::Bad(format!(
                "image id {:#x} is not this image's {:#x}",
                s.image_id, sb.image_id
            )),
            // Written by a commit whose superblock never became durable: rolled back.
            Ok(s) if s.commit > sb.commit => CopyRead::Uncommitted,
            Ok(s) => CopyRead::Committed(s),
            Err(e) => CopyRead::Bad(e.to_string()),
        },
    )
}

/// Reads both copies of every segment and decides which to trust. A copy that does not
/// decode is forgiven (taken as a torn write of the commit in progress) only while the
/// superblock names a pending commit and the other copy is valid; otherwise its segment
/// is lost or stale, and the FS pages its readable entries name are collected.
pub fn load_summaries(store: &dyn Store, sb: &Superblock) -> Result<LoadedSummaries, MetaError> {
    let l = &sb.layout;
    let mut out = LoadedSummaries::default();
    let mut bufs = [
        vec![0u8; l.summary_bytes as usize],
        vec![0u8; l.summary_bytes as usize],
    ];
    let pending = sb.pending_commit != 0;
    for seg in 0..l.segments() {
        let [b0, b1] = &mut bufs;
        let reads = [
            read_copy(store, sb, seg, 0, b0)?,
            read_copy(store, sb, seg, 1, b1)?,
        ];
        let mut best: Option<(u32, &Summary)> = None;
        for (copy, r) in reads.iter().enumerate() {
            match r {
                CopyRead::Committed(s) if best.is_none_or(|(_, b)| s.commit > b.commit) => {
                    best = Some((copy as u32, s));
                }
                CopyRead::Committed(_) => {}
                CopyRead::Uncommitted => out.uncommitted += 1,
                CopyRead::Bad(why) => out.bad_copies.push((seg, copy as u32, why.clone())),
            }
        }
        let damaged = reads.iter().any(|r| matches!(r, CopyRead::Bad(_)));
        match best {
            Some((c, s)) if !damaged || pending => {
                let other = 1 - c;
                if !matches!(reads[other as usize], CopyRead::Committed(_)) {
                    out.leftovers.push((seg, other));
                }
                out.copy.push(c);
                out.chosen.push(Some(s.clone()));
            }
            Some((c, s)) => {
                out.stale.push(seg);
                out.untrusted_pages
                    .extend(s.entries.iter().filter(|e| e.valid()).map(|e| e.fs_page));
                note_salvage(&mut out, &bufs[(1 - c) as usize], seg, l);
                out.copy.push(c);
                out.chosen.push(Some(s.clone()));
            }
            None => {
                out.lost.push(seg);
                let salvaged: Vec<u64> = bufs
                    .iter()
                    .flat_map(|b| Summary::salvage_pages(b, seg, l.segment_pages, l.version))
                    .collect();
                out.untrusted_unknown |= salvaged.is_empty();
                out.untrusted_pages.extend(salvaged);
                out.copy.push(1);
                out.chosen.push(None);
            }
        }
    }
    Ok(out)
}

/// Adds the pages a damaged copy still names; none readable means they are unknown.
fn note_salvage(out: &mut LoadedSummaries, bytes: &[u8], seg: u32, l: &Layout) {
    let pages = Summary::salvage_pages(bytes, seg, l.segment_pages, l.version);
    out.untrusted_unknown |= pages.is_empty();
    out.untrusted_pages.extend(pages);
}

/// Overwrites every leftover copy of a commit cut short with its segment's chosen copy
/// (not synced: the superblock write that follows syncs it).
pub fn erase_leftovers(
    store: &dyn Store,
    sb: &Superblock,
    loaded: &LoadedSummaries,
) -> Result<(), MetaError> {
    let l = &sb.layout;
    for &(seg, copy) in &loaded.leftovers {
        let Some(s) = &loaded.chosen[seg as usize] else {
            continue;
        };
        store
            .write_at(Dev::Bopt, &s.encode(l), l.summary_offset(seg, copy))
            .map_err(io_err(format!(
                "erase summary copy {copy} of segment {seg}"
            )))?;
    }
    Ok(())
}

/// What rebuilding the map found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RebuildReport {
    pub entries: u64,
    pub dirty: u64,
    /// Segments with no valid summary copy: their map is lost, their pages answer EIO.
    pub lost_segments: Vec<u32>,
    /// Segments whose newest committed copy may be the damaged one: the surviving older
    /// copy cannot be proven current, so their pages answer EIO too.
    pub stale_segments: Vec<u32>,
    /// FS pages the lost and stale segments may map (they answer EIO).
    pub untrusted_pages: u64,
    /// Some pages of a lost or stale segment could not be identified: every page not
    /// mapped elsewhere answers EIO.
    pub untrusted_unknown: bool,
    /// Valid entries naming an FS page past the data area (ignored).
    pub out_of_range: u64,
    /// Entries that lost to a newer commit's entry for the same FS page (a torn commit
    /// moved the page; the newer copy is current).
    pub conflicts: u64,
    /// Segments whose on-disk summary differs from the rebuilt map and must be rewritten.
    pub rewrite_segments: Vec<u32>,
    /// Pages of the optimized region whose data did not match its durable checksum after
    /// an unclean stop (written since the last FLUSH, or damaged: cannot be told apart).
    pub unverifiable_data_pages: u64,
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
    rep.stale_segments = loaded.stale.clone();
    rep.untrusted_pages = loaded.untrusted_pages.len() as u64;
    rep.untrusted_unknown = loaded.untrusted_unknown;
    rewrite.extend(rep.lost_segments.iter().copied());
    rep.rewrite_segments = rewrite.into_iter().collect();
    Ok((map, rep))
}

/// True when the superblock says the engine stopped uncleanly.
pub fn was_unclean(sb: &Superblock) -> bool {
    sb.flags & FLAG_DIRTY != 0
}
