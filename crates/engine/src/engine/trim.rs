//! TRIM and WRITE_ZEROES made real: the free-space map ([`crate::freemap`]) records the
//! pages a client gave up; their copies in the BOPT are dropped, they read as zeros,
//! BLOCK_STATUS reports them as holes, and a client write takes them back at once.
//!
//! Durability follows the rest of the metadata: the map's changed chunks are written by
//! the same commits as the segment summaries (see `persist_inner`). A trim that drops
//! BOPT copies commits at once, like a copy step that frees slots, so a freed slot is
//! never reused while the durable map still names it.

use super::{lock, rofs, Engine};
use crate::freemap::FreeMap;
use std::borrow::Cow;
use std::io;

/// Most extents one BLOCK_STATUS reply describes (the client asks again for the rest).
const MAX_STATUS_EXTENTS: usize = 1 << 16;

impl Engine {
    fn page_bytes_u64(&self) -> u64 {
        u64::from(self.layout.page_bytes)
    }

    /// Data pages the free-space map holds as free (trimmed, zeroed or seeded).
    pub fn free_pages(&self) -> u64 {
        lock(&self.free).free_pages()
    }

    /// True when the image persists a free-space map (images formatted before the map
    /// existed serve without one: TRIM stays a hint, WRITE_ZEROES writes zeros).
    pub fn has_free_map(&self) -> bool {
        lock(&self.free).persistent()
    }

    /// A copy of the free-space map (for checks in tests and reports).
    pub fn free_map(&self) -> FreeMap {
        lock(&self.free).clone()
    }

    /// Zeroes the parts of a read buffer (starting at `sector`) that belong to free
    /// pages: what the data area or the BOPT still holds there was given up.
    pub(super) fn zero_free_pages(&self, buf: &mut [u8], sector: u64) {
        let free = lock(&self.free);
        if free.free_pages() == 0 {
            return;
        }
        let ps = self.geo.page.sectors();
        let end = sector + buf.len() as u64 / 512;
        for page in sector / ps..end.div_ceil(ps) {
            if !free.is_free(page) {
                continue;
            }
            let (a, b) = ((page * ps).max(sector), ((page + 1) * ps).min(end));
            buf[((a - sector) * 512) as usize..((b - sector) * 512) as usize].fill(0);
        }
    }

    /// A write that covers a free page only in part is widened to the whole page with
    /// zeros, so the rest of the page keeps reading zeros once the write takes it back.
    /// The caller holds the stripes of the pages, which the widened write stays within.
    pub(super) fn pad_free_edges<'a>(&self, buf: &'a [u8], sector: u64) -> (Cow<'a, [u8]>, u64) {
        let ps = self.geo.page.sectors();
        let end = sector + buf.len() as u64 / 512;
        let (first_page, last_page) = (sector / ps, (end.max(sector + 1) - 1) / ps);
        let free = lock(&self.free);
        let pad_head = !sector.is_multiple_of(ps) && free.is_free(first_page);
        let pad_tail = !end.is_multiple_of(ps) && free.is_free(last_page);
        drop(free);
        if !pad_head && !pad_tail {
            return (Cow::Borrowed(buf), sector);
        }
        let start = if pad_head { first_page * ps } else { sector };
        let stop = if pad_tail { (last_page + 1) * ps } else { end };
        let mut out = vec![0u8; ((stop - start) * 512) as usize];
        let at = ((sector - start) * 512) as usize;
        out[at..at + buf.len()].copy_from_slice(buf);
        (Cow::Owned(out), start)
    }

    /// A completed client write takes its pages back from the free-space map. Called
    /// with the gate held, so the next commit's snapshot sees the write and this change
    /// together.
    pub(super) fn claim_pages(&self, sector: u64, sectors: u64) {
        let ps = self.geo.page.sectors();
        let mut free = lock(&self.free);
        if free.free_pages() > 0 {
            free.set(sector / ps, (sector + sectors).div_ceil(ps), false);
        }
    }

    /// NBD TRIM: the whole pages of `offset..offset + len` become free; their BOPT copies
    /// are dropped (committed at once when there were any). Partial pages at the edges
    /// keep their data (TRIM is a hint). Durable with the next FLUSH.
    pub fn trim_bytes(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.is_read_only() {
            return Err(rofs());
        }
        let pb = self.page_bytes_u64();
        let (first, end) = (offset.div_ceil(pb), (offset + len) / pb);
        if first >= end || !self.has_free_map() {
            return Ok(());
        }
        let ps = self.geo.page.sectors();
        // `commit` before the stripes: the engine's lock order (see lock_stripes_for_write).
        let mut c = lock(&self.commit);
        let _stripes = self.lock_stripes(first * ps, end * ps);
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        let dropped = {
            let mut st = lock(&self.state);
            let mapped: Vec<_> = st
                .ind
                .mapping_of(first * ps, (end - first) * ps)
                .into_iter()
                .filter_map(|(page, m)| m.map(|(slot, _)| (page, slot)))
                .collect();
            for &(_, slot) in &mapped {
                st.dirty_segments[self.geo.segment_of(slot) as usize] = true;
            }
            let unmap: Vec<_> = mapped.iter().map(|&(p, _)| (p, None)).collect();
            st.ind.restore(&unmap);
            lock(&self.free).set(first, end, true);
            // A trimmed original's replica would read back what the trim gave up.
            let replicas = lock(&self.replicas).drop_touching(first, end);
            !mapped.is_empty() || replicas > 0
        };
        if dropped {
            let snap = self.snapshot(&c);
            self.persist(&mut c, snap)?;
        }
        Ok(())
    }

    /// NBD WRITE_ZEROES: with `may_trim` and a free-space map, whole pages are trimmed
    /// (they read as zeros from then on) and only the partial edges are written; else
    /// zeros are written through the indirector like any write, in 1 MiB pieces.
    pub fn zero_bytes(&self, offset: u64, len: u64, may_trim: bool) -> io::Result<()> {
        let pb = self.page_bytes_u64();
        let (first, end) = (offset.div_ceil(pb), (offset + len) / pb);
        if !may_trim || first >= end || !self.has_free_map() {
            return self.write_zero_run(offset, len);
        }
        self.write_zero_run(offset, first * pb - offset)?;
        self.trim_bytes(first * pb, (end - first) * pb)?;
        self.write_zero_run(end * pb, offset + len - end * pb)
    }

    fn write_zero_run(&self, offset: u64, len: u64) -> io::Result<()> {
        const CHUNK: u64 = 1 << 20;
        let zero = vec![0u8; CHUNK.min(len) as usize];
        let mut done = 0;
        while done < len {
            let n = CHUNK.min(len - done);
            self.write_bytes(&zero[..n as usize], offset + done)?;
            done += n;
        }
        Ok(())
    }

    /// Marks whole pages free on the word of the image's file system (`serve
    /// --free-from ext4`): like a TRIM of each extent, in bytes of the data area.
    pub fn seed_free(&self, extents: &[(u64, u64)]) -> io::Result<u64> {
        let before = self.free_pages();
        for &(offset, len) in extents {
            self.trim_bytes(offset, len)?;
        }
        Ok(self.free_pages() - before)
    }

    /// Allocation of `offset..offset + len` for NBD BLOCK_STATUS: (bytes, free) runs in
    /// order, a free run reading as zeros. Covers at least the first page asked for.
    pub fn allocation(&self, offset: u64, len: u64) -> Vec<(u64, bool)> {
        let pb = self.page_bytes_u64();
        let stop = (offset + len).min(self.layout.data_bytes);
        let free = lock(&self.free);
        let mut at = offset;
        let mut out = Vec::new();
        for (pages, is_free) in free.runs(offset / pb, stop.div_ceil(pb)) {
            let run_end = ((at / pb + pages) * pb).min(stop);
            out.push((run_end - at, is_free));
            at = run_end;
            if out.len() == MAX_STATUS_EXTENTS {
                break;
            }
        }
        out
    }
}
