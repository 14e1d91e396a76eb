//! `reblock check`: verifies the on-disk BOPT offline — superblock copies, every summary
//! copy's checksum and fields, map entries against their segments, no FS page mapped
//! twice — and with `repair` rewrites what it can: the damaged superblock copy, every
//! segment summary from the rebuilt map (newest commit wins a doubly mapped page; every
//! entry dirty, since nothing says which are clean), and clears NEEDS_CHECK.

use crate::format::{Summary, FLAG_DIRTY, FLAG_NEEDS_CHECK};
use crate::freemap::Area;
use crate::meta::{self, MetaError};
use crate::store::{Dev, Store};
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    pub data_bytes: u64,
    pub bopt_pages: u32,
    pub segments: u32,
    pub generation: u64,
    pub commit: u64,
    pub flags: Vec<&'static str>,
    pub mapped_pages: u64,
    /// Data pages the free-space map holds as free (0 on images without one).
    pub free_pages: u64,
    /// FS2 replicas the replica table holds (entries that passed the checks).
    pub replicas: u64,
    /// Problems found; empty means clean.
    pub problems: Vec<String>,
    /// Things only worth knowing (an unclean stop, a rolled-back commit).
    pub notes: Vec<String>,
    pub repaired: bool,
    /// What `--repair` brought back, one line each.
    pub recovered: Vec<String>,
    /// What `--repair` could not bring back, one line each.
    pub unrecoverable: Vec<String>,
    /// Mapped pages of the optimized region whose data was checked against its
    /// checksum (format version 3).
    pub data_pages_verified: u64,
    /// FS pages whose slot failed its checksum after a clean stop: damaged.
    pub damaged_data_pages: Vec<u64>,
    /// FS pages whose slot failed its checksum after an unclean stop: written since the
    /// last FLUSH or damaged (cannot be told apart; the next open takes them as found).
    pub unverifiable_data_pages: Vec<u64>,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

pub fn check(store: &dyn Store, repair: bool) -> Result<CheckReport, MetaError> {
    let found = meta::read_superblock(store)?;
    let mut sb = found.sb;
    let l = sb.layout;
    let mut rep = CheckReport {
        data_bytes: l.data_bytes,
        bopt_pages: l.bopt_pages,
        segments: l.segments(),
        generation: sb.generation,
        commit: sb.commit,
        ..Default::default()
    };
    for (bit, name) in [
        (FLAG_DIRTY, "dirty"),
        (FLAG_NEEDS_CHECK, "needs-check"),
        (crate::format::FLAG_SEPARATE, "separate"),
    ] {
        if sb.flags & bit != 0 {
            rep.flags.push(name);
        }
    }
    for (copy, e) in found.copy_errors.iter().enumerate() {
        if let Some(e) = e {
            rep.problems.push(format!("superblock copy {copy}: {e}"));
        }
    }
    if sb.flags & FLAG_NEEDS_CHECK != 0 {
        rep.problems
            .push("flag NEEDS_CHECK: a metadata commit failed while serving".into());
    }
    if sb.flags & FLAG_DIRTY != 0 {
        rep.notes.push(
            "flag DIRTY: not stopped cleanly; serving will treat every entry as dirty".into(),
        );
    }
    let loaded = meta::load_summaries(store, &sb)?;
    for (seg, copy, why) in &loaded.bad_copies {
        if loaded.lost.contains(seg) || loaded.stale.contains(seg) {
            rep.problems
                .push(format!("segment {seg} summary copy {copy}: {why}"));
        } else {
            rep.notes.push(format!(
                "segment {seg} summary copy {copy}: {why} (a torn write of the commit cut short; the next open erases it)"
            ));
        }
    }
    describe_untrusted(&loaded, &mut rep);
    if loaded.uncommitted > 0 {
        rep.notes.push(format!(
            "{} summary copies belong to a commit cut short (ignored)",
            loaded.uncommitted
        ));
    }
    let (free, free_rep) = crate::freemap::load(store, &sb)?;
    rep.free_pages = free.free_pages();
    crate::freemap::describe(Area::FreeMap, &free_rep, &mut rep.problems, &mut rep.notes);
    let (mut map, rb) = meta::rebuild_map(&l, &loaded, sb.flags & FLAG_DIRTY == 0)?;
    let damaged = check_data(store, &sb, &loaded, &map, &mut rep)?;
    let (table, table_rep) = crate::replicas::load(store, &sb, |o, r| {
        !free.is_free(o) && free.is_free(r) && map.lookup(r).is_none()
    })?;
    rep.replicas = table.len() as u64;
    let (problems, notes) = (&mut rep.problems, &mut rep.notes);
    crate::freemap::describe(Area::Replicas, &table_rep.blocks, problems, notes);
    problems.extend(table_rep.bad_entries.iter().cloned());
    rep.mapped_pages = rb.entries;
    if rb.conflicts > 0 {
        rep.problems.push(format!(
            "{} FS pages are mapped twice across segments",
            rb.conflicts
        ));
    }
    if rb.out_of_range > 0 {
        rep.problems.push(format!(
            "{} entries name FS pages past the data area",
            rb.out_of_range
        ));
    }
    if repair && !rep.is_clean() {
        // A damaged page's slot is dropped: home holds a clean page's bytes, and for a
        // dirty one the older home copy is all that is left (said below).
        for &(_, slot, _) in &damaged {
            map.remove_slot(slot)?;
        }
        let sums = stored_checksums(&l, &loaded);
        let blocks: Vec<Vec<u8>> = (0..l.segments())
            .map(|seg| {
                Summary {
                    segment: seg,
                    commit: sb.commit + 1,
                    image_id: sb.image_id,
                    entries: meta::segment_entries(&l, &map, seg, |slot| sums[slot as usize]),
                }
                .encode(&l)
            })
            .collect();
        // First the copies not chosen (the chosen ones stay a valid fallback), commit
        // them with the superblock, then the other copies: at every moment one copy of
        // each segment is valid and committed. The free-space map's chunks go along, so
        // no copy a commit cut short left behind counts under the new commit number.
        crate::freemap::write_all(store, &sb, (&free, &table), sb.commit + 1, false)?;
        write_copies(store, &l, &blocks, |seg| 1 - loaded.copy[seg as usize])?;
        sb.commit += 1;
        // Entries were rebuilt without trustworthy dirty bits: keep DIRTY so the next
        // open treats them all as dirty.
        sb.flags = (sb.flags & !FLAG_NEEDS_CHECK) | FLAG_DIRTY;
        sb.pending_commit = 0;
        meta::write_superblock(store, &mut sb)?;
        crate::freemap::write_all(store, &sb, (&free, &table), sb.commit, true)?;
        write_copies(store, &l, &blocks, |seg| loaded.copy[seg as usize])?;
        // A second generation so both superblock copies are current and valid.
        meta::write_superblock(store, &mut sb)?;
        rep.repaired = true;
        say_what_repair_did(&loaded, &rb, &mut rep);
        say_what_data_repair_did(&damaged, &mut rep);
    }
    Ok(rep)
}

/// Data-page checksums (format version 3): reads every mapped slot whose entry carries
/// a checksum and compares. After a clean stop every durable checksum is current, so a
/// mismatch is damage (a problem); after an unclean stop a slot written since the last
/// FLUSH may legitimately differ, so a mismatch is only a note. Returns the damaged
/// (FS page, slot, dirty) after a clean stop.
fn check_data(
    store: &dyn Store,
    sb: &crate::format::Superblock,
    loaded: &meta::LoadedSummaries,
    map: &reblock_layout::Map,
    rep: &mut CheckReport,
) -> Result<Vec<(u64, u32, bool)>, MetaError> {
    let l = &sb.layout;
    let clean = sb.flags & FLAG_DIRTY == 0;
    let mut page = vec![0u8; l.page_bytes as usize];
    let mut damaged = Vec::new();
    let entries = loaded.chosen.iter().flatten().flat_map(|s| &s.entries);
    for e in entries.filter(|e| e.valid() && map.fs_page_of(e.slot) == Some(e.fs_page)) {
        let Some(stored) = e.checksum() else { continue };
        store
            .read_at(Dev::Bopt, &mut page, l.slot_offset(e.slot))
            .map_err(meta::io_err(format!("slot {}", e.slot)))?;
        rep.data_pages_verified += 1;
        let found = crate::crc::crc32c(&[&page]);
        if found == stored {
            continue;
        }
        let what = format!(
            "FS page {} (slot {}): data checksum mismatch (stored {stored:#010x}, computed {found:#010x})",
            e.fs_page, e.slot
        );
        if clean {
            let serving = if e.dirty() {
                "the slot held its only current copy; serving answers EIO for it"
            } else {
                "the page is clean; serving reads its home copy"
            };
            rep.problems.push(format!("{what}: damaged; {serving}"));
            rep.damaged_data_pages.push(e.fs_page);
            damaged.push((e.fs_page, e.slot, e.dirty()));
        } else {
            rep.notes.push(format!(
                "{what}: written since the last flush before the unclean stop, or damaged (cannot be told apart); the next open takes it as found"
            ));
            rep.unverifiable_data_pages.push(e.fs_page);
        }
    }
    Ok(damaged)
}

/// Per slot, the checksum its chosen summary entry carries.
fn stored_checksums(l: &crate::format::Layout, loaded: &meta::LoadedSummaries) -> Vec<Option<u32>> {
    let mut out = vec![None; l.bopt_pages as usize];
    for e in loaded.chosen.iter().flatten().flat_map(|s| &s.entries) {
        out[e.slot as usize] = e.checksum();
    }
    out
}

/// After a repair: what became of the damaged data pages.
fn say_what_data_repair_did(damaged: &[(u64, u32, bool)], rep: &mut CheckReport) {
    for &(page, slot, dirty) in damaged {
        if dirty {
            rep.unrecoverable.push(format!(
                "FS page {page}: its only current copy (slot {slot}) is damaged; the slot is dropped and the page now reads its home copy, which is older"
            ));
        } else {
            rep.recovered.push(format!(
                "FS page {page}: the damaged slot {slot} is dropped; its home copy holds the same bytes"
            ));
        }
    }
}

/// Problems for the segments whose map cannot be trusted, naming the pages at stake.
fn describe_untrusted(loaded: &meta::LoadedSummaries, rep: &mut CheckReport) {
    let pages = || {
        let list: Vec<String> = loaded
            .untrusted_pages
            .iter()
            .take(16)
            .map(u64::to_string)
            .collect();
        let more = loaded.untrusted_pages.len().saturating_sub(16);
        let unknown = if loaded.untrusted_unknown {
            "; some pages could not be identified, so every page not mapped elsewhere is suspect"
        } else {
            ""
        };
        format!(
            "FS pages at stake: [{}]{}{unknown}",
            list.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    };
    for seg in &loaded.lost {
        rep.problems.push(format!(
            "segment {seg}: no valid summary copy, its part of the map is lost; serving answers EIO for its pages ({})",
            pages()
        ));
    }
    for seg in &loaded.stale {
        rep.problems.push(format!(
            "segment {seg}: one summary copy is damaged and may have been the newer one; the surviving copy cannot be proven current, so serving answers EIO for its pages ({})",
            pages()
        ));
    }
}

/// After a repair: what came back and what could not.
fn say_what_repair_did(
    loaded: &meta::LoadedSummaries,
    rb: &meta::RebuildReport,
    rep: &mut CheckReport,
) {
    for seg in &loaded.stale {
        let commit = loaded.chosen[*seg as usize]
            .as_ref()
            .map_or(0, |s| s.commit);
        rep.recovered.push(format!(
            "segment {seg}: map restored from its surviving copy (commit {commit}); writes flushed after that commit to its pages may be lost"
        ));
    }
    for seg in &loaded.lost {
        rep.unrecoverable.push(format!(
            "segment {seg}: its slots' contents could not be placed (no readable map); its pages now read from their home copies, which may be older than the last flush"
        ));
    }
    if rb.conflicts > 0 {
        rep.recovered.push(format!(
            "{} doubly mapped FS pages: the newer commit's entry kept",
            rb.conflicts
        ));
    }
    if rep.recovered.is_empty() && rep.unrecoverable.is_empty() {
        rep.recovered
            .push("summaries and superblock rewritten from the map".into());
    }
}

fn write_copies(
    store: &dyn Store,
    l: &crate::format::Layout,
    blocks: &[Vec<u8>],
    copy_of: impl Fn(u32) -> u32,
) -> Result<(), MetaError> {
    for (seg, b) in blocks.iter().enumerate() {
        let seg = seg as u32;
        store
            .write_at(Dev::Bopt, b, l.summary_offset(seg, copy_of(seg)))
            .map_err(meta::io_err(format!("rewrite summary of segment {seg}")))?;
    }
    store.sync(Dev::Bopt).map_err(meta::io_err("sync"))
}

/// The format reader on arbitrary bytes: decoders, then the whole offline check on the
/// bytes taken as a shared image. Must never panic (fuzz target and tests).
pub fn fuzz_one(data: &[u8]) {
    let _ = crate::format::Superblock::decode(data);
    if data.len() >= 4 {
        let n = u32::from(data[0] % 32) + 1;
        let version = 2 + u32::from(data[2 % data.len()] % 2);
        let _ = Summary::decode(&data[1..], u32::from(data[1 % data.len()]), n, version);
    }
    let store = crate::store::MemStore::new(data.to_vec(), None);
    let _ = check(&store, false);
    let _ = check(&store, true);
}
