//! Data-page checksums in the optimized region (docs/format.md "Data checksums").
//!
//! Every slot's page has a CRC-32C, kept in memory per slot and written into the slot's
//! summary entry by each commit that rewrites the segment (format version 3). A write
//! computes the new checksum of each page it puts into a slot; a read from a slot, a
//! copy out of one and `reblock check` compare. Slots are overwritten in place (a write
//! to a mapped page goes to its slot), so after an unclean stop a slot written since the
//! last FLUSH may hold old, new or mixed bytes, none of which the durable checksum has to
//! match: opening after an unclean stop re-reads every mapped slot and takes the
//! checksum of what it finds, listing the pages that disagreed as unverifiable (a write
//! not flushed and damage cannot be told apart there). After a clean stop every durable
//! checksum is current, so a mismatch is damage.

use super::{lock, Engine};
use crate::crc::crc32c;
use crate::format::{Layout, DATA_CRC_VERSION};
use crate::meta::{self, LoadedSummaries, MetaError};
use crate::store::{Dev, Store};
use reblock_layout::{Map, PhysIo, Region};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Set in a [`SlotSums`] word when its low 32 bits are the slot's checksum.
const KNOWN: u64 = 1 << 32;

/// Per slot, the CRC-32C of the page the slot holds now (when known).
pub(crate) struct SlotSums {
    on: bool,
    sums: Vec<AtomicU64>,
}

impl SlotSums {
    fn new(on: bool, slots: u32) -> SlotSums {
        SlotSums {
            on,
            sums: (0..if on { slots } else { 0 })
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
    /// True when this engine computes and verifies data checksums.
    pub(crate) fn enabled(&self) -> bool {
        self.on
    }
    pub(crate) fn get(&self, slot: u32) -> Option<u32> {
        let w = self.sums.get(slot as usize)?.load(Relaxed);
        (w & KNOWN != 0).then_some(w as u32)
    }
    fn set(&self, slot: u32, crc: u32) {
        if let Some(w) = self.sums.get(slot as usize) {
            w.store(KNOWN | u64::from(crc), Relaxed);
        }
    }
    fn forget(&self, slot: u32) {
        if let Some(w) = self.sums.get(slot as usize) {
            w.store(0, Relaxed);
        }
    }
}

/// What loading the checksums found.
pub(crate) struct LoadedSums {
    pub sums: SlotSums,
    /// (FS page, slot) whose page did not match its durable checksum after an unclean
    /// stop: written since the last FLUSH, or damaged.
    pub unverifiable: Vec<(u64, u32)>,
    /// Segments whose summaries must be rewritten with the checksums taken at open.
    pub rewrite_segments: Vec<u32>,
}

/// The checksums of the mapped slots, from their summaries. After an unclean stop (and
/// for entries written with checksums off) every mapped slot is read and its checksum
/// taken as found; see the module comment for why that is all an unclean stop allows.
pub(crate) fn load(
    store: &dyn Store,
    layout: &Layout,
    loaded: &LoadedSummaries,
    map: &Map,
    unclean: bool,
    on: bool,
) -> Result<LoadedSums, MetaError> {
    let on = on && layout.version >= DATA_CRC_VERSION;
    let mut out = LoadedSums {
        sums: SlotSums::new(on, layout.bopt_pages),
        unverifiable: Vec::new(),
        rewrite_segments: Vec::new(),
    };
    if !on {
        return Ok(out);
    }
    let page = layout.page_bytes as usize;
    let mut buf = vec![0u8; page * layout.segment_pages as usize];
    for (seg, s) in loaded.chosen.iter().enumerate() {
        let Some(s) = s else { continue };
        let current =
            |e: &&crate::format::Entry| e.valid() && map.fs_page_of(e.slot) == Some(e.fs_page);
        let mapped: Vec<_> = s.entries.iter().filter(current).collect();
        if !unclean && mapped.iter().all(|e| e.checksum().is_some()) {
            mapped.iter().for_each(|e| out.sums.set(e.slot, e.data_crc));
            continue;
        }
        if mapped.is_empty() {
            continue;
        }
        let first = seg as u32 * layout.segment_pages;
        store
            .read_at(Dev::Bopt, &mut buf, layout.slot_offset(first))
            .map_err(meta::io_err(format!("slots of segment {seg}")))?;
        for e in mapped {
            let i = (e.slot - first) as usize;
            let found = crc32c(&[&buf[i * page..(i + 1) * page]]);
            if e.checksum().is_some_and(|c| c != found) {
                out.unverifiable.push((e.fs_page, e.slot));
            }
            out.sums.set(e.slot, found);
        }
        out.rewrite_segments.push(seg as u32);
    }
    Ok(out)
}

/// One slot's share of a physical I/O to the BOPT.
struct SlotPiece {
    slot: u32,
    /// Byte offset of the piece within the slot's page.
    in_page: usize,
    /// Byte range of the piece within the I/O's buffer.
    at: std::ops::Range<usize>,
}

impl Engine {
    /// Splits a BOPT I/O at page boundaries into the slots it touches.
    fn slot_pieces(&self, io: &PhysIo) -> Vec<SlotPiece> {
        let per_page = self.geo.page.sectors();
        let rel = io.device_sector - self.geo.bopt_start_sector;
        let mut out = Vec::with_capacity(1);
        let mut s = rel;
        while s < rel + io.sectors {
            let end = ((s / per_page + 1) * per_page).min(rel + io.sectors);
            let at = ((s - rel) * 512) as usize..((end - rel) * 512) as usize;
            out.push(SlotPiece {
                slot: (s / per_page) as u32,
                in_page: ((s % per_page) * 512) as usize,
                at,
            });
            s = end;
        }
        out
    }

    fn page_bytes(&self) -> usize {
        self.layout.page_bytes as usize
    }

    /// Reads slot `slot`'s whole page.
    fn read_slot_page(&self, slot: u32) -> io::Result<Vec<u8>> {
        let mut page = vec![0u8; self.page_bytes()];
        self.store
            .read_at(Dev::Bopt, &mut page, self.layout.slot_offset(slot))?;
        Ok(page)
    }

    /// True when `page` (a whole page) matches slot `slot`'s checksum, or none is known.
    fn slot_page_matches(&self, slot: u32, page: &[u8]) -> bool {
        self.sums.get(slot).is_none_or(|c| c == crc32c(&[page]))
    }

    /// Checks the pages a read took from slots (`ios` as routed, `buf` filled). A clean
    /// page that fails its checksum is read again from home, which holds the same bytes;
    /// a dirty one has no other copy and fails the read with EIO. Both are logged as
    /// errors and counted (`status.data_checksum_errors`).
    pub(super) fn verify_slot_reads(&self, ios: &[PhysIo], buf: &mut [u8]) -> io::Result<()> {
        if !self.sums.enabled() {
            return Ok(());
        }
        for io in ios.iter().filter(|io| io.region == Region::Bopt) {
            let at = (io.buf_offset_sectors * 512) as usize;
            let part = &mut buf[at..at + (io.sectors * 512) as usize];
            for p in self.slot_pieces(io) {
                let ok = if p.at.len() == self.page_bytes() {
                    self.slot_page_matches(p.slot, &part[p.at.clone()])
                } else {
                    let page = self.read_slot_page(p.slot)?;
                    self.slot_page_matches(p.slot, &page)
                };
                if !ok {
                    self.read_around_damage(&p, &mut part[p.at.clone()])?;
                }
            }
        }
        Ok(())
    }

    /// A slot's page failed its checksum during a read: serve the piece from home when
    /// the page is clean there, else EIO.
    fn read_around_damage(&self, p: &SlotPiece, dst: &mut [u8]) -> io::Result<()> {
        self.counters.data_checksum_errors.fetch_add(1, Relaxed);
        let (page, dirty) = {
            let st = lock(&self.state);
            let map = st.ind.map();
            (map.fs_page_of(p.slot), map.is_dirty(p.slot))
        };
        match page {
            Some(fs_page) if !dirty => {
                tracing::error!(
                    fs_page,
                    slot = p.slot,
                    "data page checksum mismatch in the optimized region: damaged slot; served from the page's home copy (the page is clean, home holds the same bytes)"
                );
                let at = fs_page * self.page_bytes() as u64 + p.in_page as u64;
                self.store.read_at(Dev::Data, dst, at)
            }
            _ => {
                tracing::error!(
                    fs_page = page,
                    slot = p.slot,
                    "data page checksum mismatch in the optimized region: the slot holds the only current copy and it is damaged; the read fails with EIO ('reblock check' lists it)"
                );
                Err(io::Error::from_raw_os_error(libc::EIO))
            }
        }
    }

    /// The checksums the slots a write touches will have once it lands: a whole page's
    /// from the buffer; a partial page's from the slot's current page (which must pass
    /// its own checksum first, or the write would bless damage) with the write patched
    /// in. Empty when checksums are off.
    pub(super) fn sums_of_write(&self, ios: &[PhysIo], buf: &[u8]) -> io::Result<Vec<(u32, u32)>> {
        let mut out = Vec::new();
        if !self.sums.enabled() {
            return Ok(out);
        }
        for io in ios.iter().filter(|io| io.region == Region::Bopt) {
            let at = (io.buf_offset_sectors * 512) as usize;
            let part = &buf[at..at + (io.sectors * 512) as usize];
            for p in self.slot_pieces(io) {
                let new = &part[p.at.clone()];
                if new.len() == self.page_bytes() {
                    out.push((p.slot, crc32c(&[new])));
                    continue;
                }
                let mut page = self.read_slot_page(p.slot)?;
                if !self.slot_page_matches(p.slot, &page) {
                    self.counters.data_checksum_errors.fetch_add(1, Relaxed);
                    tracing::error!(
                        slot = p.slot,
                        "data page checksum mismatch in the optimized region: a write to part of a damaged page fails with EIO (a write of the whole page replaces it)"
                    );
                    return Err(io::Error::from_raw_os_error(libc::EIO));
                }
                page[p.in_page..p.in_page + new.len()].copy_from_slice(new);
                out.push((p.slot, crc32c(&[&page])));
            }
        }
        Ok(out)
    }

    /// Records checksums computed by [`Engine::sums_of_write`] once the write landed.
    pub(super) fn set_sums(&self, sums: &[(u32, u32)]) {
        sums.iter()
            .for_each(|&(slot, crc)| self.sums.set(slot, crc));
    }

    /// After a failed write, the slots it touched hold unknown bytes: take the checksum
    /// of what they hold now (the request's own bytes are undefined after its failure;
    /// the rest of each page was not written), or forget it if even that read fails.
    pub(super) fn resum_after_failed_write(&self, ios: &[PhysIo]) {
        if !self.sums.enabled() {
            return;
        }
        for io in ios.iter().filter(|io| io.region == Region::Bopt) {
            for p in self.slot_pieces(io) {
                match self.read_slot_page(p.slot) {
                    Ok(page) => self.sums.set(p.slot, crc32c(&[&page])),
                    Err(_) => self.sums.forget(p.slot),
                }
            }
        }
    }

    /// Checks whole pages read out of slots `first..` for a copy (destage, relocation,
    /// a replica). A mismatch stops the copy, so damage is never spread or made to look
    /// current: the export turns read-only with an error line.
    pub(super) fn verify_copy_source(&self, first_slot: u32, pages: &[u8]) -> io::Result<()> {
        if !self.sums.enabled() {
            return Ok(());
        }
        for (i, page) in pages.chunks(self.page_bytes()).enumerate() {
            let slot = first_slot + i as u32;
            if !self.slot_page_matches(slot, page) {
                self.counters.data_checksum_errors.fetch_add(1, Relaxed);
                self.fail_persistently(&format!(
                    "data page checksum mismatch in slot {slot} while copying it out of the optimized region: the copy is refused so the damage is not spread; run 'reblock check'"
                ));
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
        }
        Ok(())
    }

    /// Records the checksums of whole pages just copied into slots `first..`.
    pub(super) fn sum_copied_pages(&self, first_slot: u32, pages: &[u8]) {
        if !self.sums.enabled() {
            return;
        }
        for (i, page) in pages.chunks(self.page_bytes()).enumerate() {
            self.sums.set(first_slot + i as u32, crc32c(&[page]));
        }
    }
}
