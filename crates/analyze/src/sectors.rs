//! Sector-exact unique bytes: the distinct 512-byte sectors read, written and touched, so
//! that "unique" can be set against the request totals at the same granularity (a page-
//! rounded unique count can exceed the bytes requests actually moved when requests are
//! smaller than a page or not aligned to one).
//!
//! Counting every distinct sector would cost a set entry per sector. Instead the page table
//! ([`crate::pages`]) marks the pages some request covered whole (two bits a page: fully
//! read, fully written), and only the pages a request covers in part, the first and last
//! page of an unaligned request, are kept here as sector bitmaps, 128 sectors to a chunk.
//! Aligned traces never come here. A page's distinct sectors are then all of it if it was
//! covered whole, else the bits set here.

use reblock_trace::Op;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::pages::{PageKey, Pages};

/// Sectors per chunk: one `u128` bitmap.
const CHUNK_SECTORS: u64 = 128;

/// Distinct sectors by direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UniqueSectors {
    pub read: u64,
    pub write: u64,
    /// Read or written.
    pub any: u64,
}

/// Sectors of partly covered pages, by device and chunk: (read, written) bitmaps.
#[derive(Default)]
pub struct PartialSectors {
    chunks: FxHashMap<(u32, u64), [u128; 2]>,
}

impl PartialSectors {
    /// Marks `sectors` (within partly covered pages) of `device` as accessed by `op`.
    pub fn add(&mut self, device: u32, sectors: std::ops::Range<u64>, op: Op) {
        let mut at = sectors.start;
        while at < sectors.end {
            let chunk = at / CHUNK_SECTORS;
            let base = chunk * CHUNK_SECTORS;
            let stop = sectors.end.min(base + CHUNK_SECTORS);
            let (lo, hi) = ((at - base) as u32, (stop - base) as u32);
            let bits = (u128::MAX >> (128 - (hi - lo))) << lo;
            self.chunks.entry((device, chunk)).or_default()[usize::from(op == Op::Write)] |= bits;
            at = stop;
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.chunks.capacity() * (std::mem::size_of::<((u32, u64), [u128; 2])>() + 1)
    }

    /// The distinct sectors: whole pages from the page table's full marks, plus the bits
    /// kept here in pages not covered whole in that direction.
    pub fn unique(&self, pages: &Pages, sectors_per_page: u64) -> UniqueSectors {
        let full = pages.full_pages();
        let mut u = UniqueSectors {
            read: full.read * sectors_per_page,
            write: full.write * sectors_per_page,
            any: full.any * sectors_per_page,
        };
        for (&(device, chunk), &[r, w]) in &self.chunks {
            let mut cached: Option<(u64, (bool, bool))> = None;
            let mut bits = r | w;
            while bits != 0 {
                let bit = bits.trailing_zeros();
                bits &= bits - 1;
                let page = (chunk * CHUNK_SECTORS + u64::from(bit)) / sectors_per_page;
                let (full_r, full_w) = match cached {
                    Some((p, f)) if p == page => f,
                    _ => {
                        let f = pages.full_of(PageKey { device, page });
                        cached = Some((page, f));
                        f
                    }
                };
                let (is_r, is_w) = (r >> bit & 1 == 1, w >> bit & 1 == 1);
                u.read += u64::from(is_r && !full_r);
                u.write += u64::from(is_w && !full_w);
                u.any += u64::from(!(full_r || full_w));
            }
        }
        u
    }
}
