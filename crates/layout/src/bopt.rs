//! The BOPT (BORG OPtimized Target) region: where it lives on the device, its split into a
//! read cache and a write buffer, its fixed-size segments and their valid counts
//! (seed 000 §3.3, Figure 3, Table 2; seed 001 §3.3.3).
//!
//! Address spaces (docs/layout.md §1):
//!
//! * **FS sectors / FS pages**: the exported data area, `0 .. data_sectors`. Requests and
//!   plans speak this space.
//! * **BOPT slots**: page-sized slots `0 .. bopt_pages`; the read cache is slots
//!   `0 .. read_cache_pages`, the write buffer the rest.
//! * **Device sectors**: where each lives physically. The BOPT occupies
//!   `meta_sectors + bopt_pages * page_sectors` sectors starting at `bopt_at`, either on the
//!   same device as the data area (the data area then skips over it: a data sector at or
//!   past `bopt_at` moves up by the BOPT's size) or on a device of its own.

use crate::units::{Extent, PageSize};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where the BOPT sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoptPosition {
    /// Before the data area on the same device.
    Start,
    /// In the middle of the data area (at its middle page), the data area split around it:
    /// the placement seed 002 §4 favours, closest on average to everything.
    Middle,
    /// After the data area on the same device.
    End,
    /// On the same device, inserted before this FS sector (page aligned).
    AtFsSector(u64),
    /// On a separate device (e.g. a faster one used as the cache), from this sector.
    Separate { start_sector: u64 },
}

/// Which device region an address belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Region {
    /// The data area (FS home locations).
    Data,
    /// The BOPT.
    Bopt,
}

/// Which part of the BOPT a slot belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    ReadCache,
    WriteBuffer,
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum GeometryError {
    #[error("page_sectors: must be at least 1 (got 0)")]
    ZeroPage,
    #[error("data_sectors: {data_sectors} is not a multiple of page_sectors {page_sectors}")]
    DataUnaligned {
        data_sectors: u64,
        page_sectors: u64,
    },
    #[error("segment_pages: must be at least 1")]
    ZeroSegment,
    #[error("bopt_pages: {bopt_pages} is not a multiple of segment_pages {segment_pages}")]
    BoptUnaligned { bopt_pages: u32, segment_pages: u32 },
    #[error("write_buffer_fraction: {0} is not within [0, 1]")]
    Fraction(f64),
    #[error("bopt position: FS sector {at} is past the data area or not page aligned")]
    Position { at: u64 },
}

/// What a caller chooses; [`Geometry::new`] validates it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoptConfig {
    pub page_sectors: u32,
    /// Size of the exported data area.
    pub data_sectors: u64,
    /// Total BOPT slots (read cache + write buffer).
    pub bopt_pages: u32,
    /// Pages per segment (seed 000 §3.3: fixed-length segments).
    pub segment_pages: u32,
    /// Share of the BOPT's segments given to the write buffer (seed 000 §6.5 studies it).
    pub write_buffer_fraction: f64,
    pub position: BoptPosition,
    /// Sectors reserved at the BOPT's start for metadata (superblock, segment maps); the
    /// slots follow them. The on-disk format owns their contents.
    pub meta_sectors: u64,
}

impl Default for BoptConfig {
    fn default() -> Self {
        BoptConfig {
            page_sectors: 8,
            data_sectors: 0,
            bopt_pages: 0,
            segment_pages: 256,
            write_buffer_fraction: 0.1,
            position: BoptPosition::End,
            meta_sectors: 0,
        }
    }
}

/// Validated sizes and positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geometry {
    pub page: PageSize,
    pub fs_pages: u64,
    pub bopt_pages: u32,
    pub segment_pages: u32,
    pub read_cache_pages: u32,
    pub write_buffer_pages: u32,
    /// Device sector of slot 0.
    pub bopt_start_sector: u64,
    /// First FS sector that is shifted up past the BOPT (`u64::MAX`: none is).
    pub data_hole_at: u64,
    /// Sectors the shifted part of the data area moves by.
    pub data_hole_sectors: u64,
    pub bopt_separate: bool,
}

impl Geometry {
    pub fn new(c: &BoptConfig) -> Result<Geometry, GeometryError> {
        let page = PageSize::new(c.page_sectors).map_err(|_| GeometryError::ZeroPage)?;
        let ps = page.sectors();
        if !c.data_sectors.is_multiple_of(ps) {
            return Err(GeometryError::DataUnaligned {
                data_sectors: c.data_sectors,
                page_sectors: ps,
            });
        }
        if c.segment_pages == 0 {
            return Err(GeometryError::ZeroSegment);
        }
        if !c.bopt_pages.is_multiple_of(c.segment_pages) {
            return Err(GeometryError::BoptUnaligned {
                bopt_pages: c.bopt_pages,
                segment_pages: c.segment_pages,
            });
        }
        if !(0.0..=1.0).contains(&c.write_buffer_fraction) {
            return Err(GeometryError::Fraction(c.write_buffer_fraction));
        }
        let segments = c.bopt_pages / c.segment_pages;
        let wb_segments = (f64::from(segments) * c.write_buffer_fraction).round() as u32;
        let write_buffer_pages = wb_segments * c.segment_pages;
        let bopt_sectors = c.meta_sectors + u64::from(c.bopt_pages) * ps;
        let (at, separate_start) = match c.position {
            BoptPosition::Start => (Some(0), 0),
            BoptPosition::Middle => (Some(c.data_sectors / ps / 2 * ps), 0),
            BoptPosition::End => (Some(c.data_sectors), 0),
            BoptPosition::AtFsSector(at) => (Some(at), 0),
            BoptPosition::Separate { start_sector } => (None, start_sector),
        };
        if let Some(at) = at {
            if at > c.data_sectors || !at.is_multiple_of(ps) {
                return Err(GeometryError::Position { at });
            }
        }
        Ok(Geometry {
            page,
            fs_pages: c.data_sectors / ps,
            bopt_pages: c.bopt_pages,
            segment_pages: c.segment_pages,
            read_cache_pages: c.bopt_pages - write_buffer_pages,
            write_buffer_pages,
            bopt_start_sector: at.unwrap_or(separate_start) + c.meta_sectors,
            data_hole_at: at.unwrap_or(u64::MAX),
            data_hole_sectors: bopt_sectors,
            bopt_separate: at.is_none(),
        })
    }

    pub fn data_sectors(&self) -> u64 {
        self.fs_pages * self.page.sectors()
    }
    pub fn segments(&self) -> u32 {
        self.bopt_pages.checked_div(self.segment_pages).unwrap_or(0)
    }
    /// First slot of the write buffer.
    pub fn write_buffer_start(&self) -> u32 {
        self.read_cache_pages
    }
    pub fn area_of(&self, slot: u32) -> Area {
        if slot < self.read_cache_pages {
            Area::ReadCache
        } else {
            Area::WriteBuffer
        }
    }
    pub fn segment_of(&self, slot: u32) -> u32 {
        slot / self.segment_pages
    }

    /// Device sector of `offset` sectors into BOPT slot `slot`.
    #[inline]
    pub fn bopt_sector(&self, slot: u32, offset_sectors: u64) -> u64 {
        self.bopt_start_sector + u64::from(slot) * self.page.sectors() + offset_sectors
    }

    /// Device sector of FS sector `fs_sector`.
    #[inline]
    pub fn data_sector(&self, fs_sector: u64) -> u64 {
        if fs_sector >= self.data_hole_at {
            fs_sector + self.data_hole_sectors
        } else {
            fs_sector
        }
    }

    /// Device extents of FS sectors `fs_sector .. fs_sector + sectors`: one, or two when
    /// the run crosses a BOPT placed inside the data area. Each comes with its offset in
    /// sectors from `fs_sector`.
    pub fn data_extents(
        &self,
        fs_sector: u64,
        sectors: u64,
    ) -> impl Iterator<Item = (Extent, u64)> {
        let end = fs_sector + sectors;
        let split = if fs_sector < self.data_hole_at && self.data_hole_at < end {
            self.data_hole_at
        } else {
            end
        };
        let first = (
            Extent::new(self.data_sector(fs_sector), split - fs_sector),
            0,
        );
        let second = (split < end).then(|| {
            (
                Extent::new(self.data_sector(split), end - split),
                split - fs_sector,
            )
        });
        std::iter::once(first).chain(second)
    }
}

/// Valid-entry counts per segment (seed 000 §3.3: the write buffer's segment map carries
/// a "valid entries counter" to track space usage; we keep one for read-cache segments too
/// so reconfiguration and recovery can report occupancy the same way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segments {
    valid: Vec<u32>,
    write_buffer_valid: u32,
    first_wb_segment: u32,
}

impl Segments {
    pub fn new(g: &Geometry) -> Segments {
        Segments {
            valid: vec![0; g.segments() as usize],
            write_buffer_valid: 0,
            first_wb_segment: g.read_cache_pages.checked_div(g.segment_pages).unwrap_or(0),
        }
    }
    pub fn valid(&self, segment: u32) -> u32 {
        self.valid[segment as usize]
    }
    /// Mapped pages in the write buffer.
    pub fn write_buffer_valid(&self) -> u32 {
        self.write_buffer_valid
    }
    pub fn first_write_buffer_segment(&self) -> u32 {
        self.first_wb_segment
    }
    pub(crate) fn add(&mut self, g: &Geometry, slot: u32) {
        let seg = g.segment_of(slot);
        self.valid[seg as usize] += 1;
        debug_assert!(self.valid[seg as usize] <= g.segment_pages);
        if seg >= self.first_wb_segment {
            self.write_buffer_valid += 1;
        }
    }
    pub(crate) fn sub(&mut self, g: &Geometry, slot: u32) {
        let seg = g.segment_of(slot);
        self.valid[seg as usize] -= 1;
        if seg >= self.first_wb_segment {
            self.write_buffer_valid -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(position: BoptPosition) -> BoptConfig {
        BoptConfig {
            page_sectors: 8,
            data_sectors: 800,
            bopt_pages: 20,
            segment_pages: 4,
            write_buffer_fraction: 0.4,
            position,
            meta_sectors: 8,
        }
    }

    #[test]
    fn split_rounds_write_buffer_to_whole_segments() {
        // 5 segments, 40% -> 2 segments = 8 pages of write buffer, 12 of read cache.
        let g = Geometry::new(&config(BoptPosition::End)).unwrap();
        assert_eq!((g.read_cache_pages, g.write_buffer_pages), (12, 8));
        assert_eq!(g.area_of(11), Area::ReadCache);
        assert_eq!(g.area_of(12), Area::WriteBuffer);
    }

    #[test]
    fn bopt_at_end_leaves_data_in_place() {
        let g = Geometry::new(&config(BoptPosition::End)).unwrap();
        assert_eq!(g.data_sector(799), 799);
        // Slot 2 = 800 (end of data) + 8 (metadata) + 2 * 8.
        assert_eq!(g.bopt_sector(2, 0), 824);
    }

    #[test]
    fn bopt_in_middle_splits_the_data_area() {
        // Data = 100 pages; middle = page 50 = sector 400. BOPT = 8 + 160 sectors.
        let g = Geometry::new(&config(BoptPosition::Middle)).unwrap();
        assert_eq!(g.data_sector(399), 399);
        assert_eq!(g.data_sector(400), 400 + 168);
        assert_eq!(g.bopt_sector(0, 0), 408);
        let parts: Vec<_> = g.data_extents(396, 8).collect();
        assert_eq!(
            parts,
            vec![(Extent::new(396, 4), 0), (Extent::new(568, 4), 4)]
        );
    }

    #[test]
    fn separate_device_keeps_both_spaces_whole() {
        let g = Geometry::new(&config(BoptPosition::Separate { start_sector: 0 })).unwrap();
        assert_eq!(g.data_sector(700), 700);
        assert_eq!(g.bopt_sector(1, 3), 8 + 8 + 3);
        assert!(g.bopt_separate);
    }

    #[test]
    fn bad_configs_name_their_field() {
        let mut c = config(BoptPosition::End);
        c.bopt_pages = 21;
        assert!(Geometry::new(&c)
            .unwrap_err()
            .to_string()
            .starts_with("bopt_pages"));
        let mut c = config(BoptPosition::AtFsSector(3));
        c.data_sectors = 800;
        assert!(matches!(
            Geometry::new(&c),
            Err(GeometryError::Position { at: 3 })
        ));
        let mut c = config(BoptPosition::End);
        c.write_buffer_fraction = 1.5;
        assert!(Geometry::new(&c)
            .unwrap_err()
            .to_string()
            .starts_with("write_buffer_fraction"));
    }
}
