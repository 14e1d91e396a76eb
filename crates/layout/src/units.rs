//! Sectors, pages and extents, and the splitting of a sector request into pages.
//!
//! Traces address 512-byte sectors; the map and plans work in pages (4 KiB = 8 sectors by
//! default, configurable). A request that is not page aligned, or whose length is not a
//! multiple of the page, is split into per-page pieces and its first and last pieces may be
//! *partial* (seed 000 §5.3, seed 001 §3.5.4): the indirector handles those explicitly.

use thiserror::Error;

/// Bytes in one sector, the unit every trace and device address uses.
pub const SECTOR_BYTES: u64 = 512;

/// Default page: 4 KiB = 8 sectors (seed 000 §4.6: "For every page of 4KB ...").
pub const DEFAULT_PAGE_SECTORS: u32 = 8;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum UnitError {
    #[error("page_sectors: must be at least 1 (got 0)")]
    ZeroPage,
}

/// The page size, in sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageSize {
    sectors: u32,
}

impl Default for PageSize {
    fn default() -> Self {
        PageSize {
            sectors: DEFAULT_PAGE_SECTORS,
        }
    }
}

impl PageSize {
    pub fn new(sectors: u32) -> Result<PageSize, UnitError> {
        if sectors == 0 {
            return Err(UnitError::ZeroPage);
        }
        Ok(PageSize { sectors })
    }
    pub fn sectors(self) -> u64 {
        u64::from(self.sectors)
    }
    pub fn sectors_u32(self) -> u32 {
        self.sectors
    }
    pub fn bytes(self) -> u64 {
        self.sectors() * SECTOR_BYTES
    }
    /// The page holding `sector`.
    pub fn page_of(self, sector: u64) -> u64 {
        sector / self.sectors()
    }
    /// First sector of `page`.
    pub fn first_sector(self, page: u64) -> u64 {
        page * self.sectors()
    }
    /// Pages touched by `sectors` sectors from `sector` (0 for an empty request).
    pub fn pages_spanned(self, sector: u64, sectors: u64) -> u64 {
        if sectors == 0 {
            return 0;
        }
        self.page_of(sector + sectors - 1) - self.page_of(sector) + 1
    }
    /// Splits `sectors` sectors from `sector` into per-page pieces, in address order.
    pub fn split(self, sector: u64, sectors: u64) -> PagePieces {
        PagePieces {
            page_sectors: self.sectors(),
            next_sector: sector,
            end_sector: sector + sectors,
            buf_offset_sectors: 0,
        }
    }
}

/// A contiguous run of sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Extent {
    pub start_sector: u64,
    pub sectors: u64,
}

impl Extent {
    pub fn new(start_sector: u64, sectors: u64) -> Extent {
        Extent {
            start_sector,
            sectors,
        }
    }
    /// One past the last sector.
    pub fn end_sector(&self) -> u64 {
        self.start_sector + self.sectors
    }
    pub fn bytes(&self) -> u64 {
        self.sectors * SECTOR_BYTES
    }
}

/// The part of one page a request touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagePiece {
    pub page: u64,
    /// First sector touched, counted from the start of the page.
    pub offset_sectors: u32,
    pub sectors: u32,
    /// Where this piece starts in the request's own buffer.
    pub buf_offset_sectors: u64,
}

impl PagePiece {
    /// True when the piece covers its whole page.
    pub fn is_full(&self, page: PageSize) -> bool {
        self.offset_sectors == 0 && self.sectors == page.sectors_u32()
    }
}

/// Iterator returned by [`PageSize::split`].
#[derive(Clone, Debug)]
pub struct PagePieces {
    page_sectors: u64,
    next_sector: u64,
    end_sector: u64,
    buf_offset_sectors: u64,
}

impl Iterator for PagePieces {
    type Item = PagePiece;
    fn next(&mut self) -> Option<PagePiece> {
        if self.next_sector >= self.end_sector {
            return None;
        }
        let page = self.next_sector / self.page_sectors;
        let offset = self.next_sector % self.page_sectors;
        let page_end = (page + 1) * self.page_sectors;
        let end = page_end.min(self.end_sector);
        let piece = PagePiece {
            page,
            offset_sectors: offset as u32,
            sectors: (end - self.next_sector) as u32,
            buf_offset_sectors: self.buf_offset_sectors,
        };
        self.buf_offset_sectors += end - self.next_sector;
        self.next_sector = end;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_request_splits_into_full_pages() {
        let ps = PageSize::default();
        let pieces: Vec<_> = ps.split(16, 16).collect();
        assert_eq!(pieces.len(), 2);
        assert_eq!((pieces[0].page, pieces[1].page), (2, 3));
        assert!(pieces.iter().all(|p| p.is_full(ps)));
        assert_eq!(pieces[1].buf_offset_sectors, 8);
    }

    #[test]
    fn unaligned_request_has_partial_head_and_tail() {
        // Sectors 5..19 with 8-sector pages: page 0 sectors 5..8 (3), page 1 full (8),
        // page 2 sectors 16..19 (3).
        let ps = PageSize::default();
        let pieces: Vec<_> = ps.split(5, 14).collect();
        let shape: Vec<_> = pieces
            .iter()
            .map(|p| (p.page, p.offset_sectors, p.sectors, p.buf_offset_sectors))
            .collect();
        assert_eq!(shape, vec![(0, 5, 3, 0), (1, 0, 8, 3), (2, 0, 3, 11)]);
        assert!(!pieces[0].is_full(ps) && pieces[1].is_full(ps) && !pieces[2].is_full(ps));
        assert_eq!(ps.pages_spanned(5, 14), 3);
    }

    #[test]
    fn request_inside_one_page_is_one_partial_piece() {
        let ps = PageSize::new(8).unwrap();
        let pieces: Vec<_> = ps.split(9, 2).collect();
        assert_eq!(pieces.len(), 1);
        assert_eq!(
            (pieces[0].page, pieces[0].offset_sectors, pieces[0].sectors),
            (1, 1, 2)
        );
    }

    #[test]
    fn zero_page_size_is_an_error() {
        assert_eq!(PageSize::new(0), Err(UnitError::ZeroPage));
    }
}
