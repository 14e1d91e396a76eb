//! The on-disk BOPT format (docs/format.md is the byte-by-byte reference; the comments on
//! each encoder repeat it). Seed 000 §3.3 and Table 2: a superblock, then fixed-size
//! segments whose summaries hold their map entries (FS page, BOPT page, valid).
//!
//! BOPT device (the image itself, after the data area, or a device of its own):
//!
//! ```text
//! bopt_offset_bytes
//! | summaries: segment s, copy c at (2 s + c) * summary_bytes     (meta_bytes)
//! | slots: slot k at meta_bytes + k * page_bytes                    (bopt_pages pages)
//! | padding (block devices only)
//! | superblock copy 0 at device_bytes - 8192, copy 1 at device_bytes - 4096
//! ```
//!
//! Superblocks sit at the device's end so that `reblock check IMAGE` finds them without
//! being told any size. Every structure has two copies written alternately and carries a
//! sequence number and a CRC-32C: a torn write leaves the other copy, one commit older,
//! intact.

use crate::crc::crc32c;
use reblock_layout::{BoptConfig, BoptPosition, Geometry};
use thiserror::Error;

pub const SUPERBLOCK_MAGIC: &[u8; 8] = b"RBLKSUPR";
pub const SUMMARY_MAGIC: &[u8; 8] = b"RBLKSEGS";
/// The version `format` writes. Version 3: every summary entry carries the CRC-32C of
/// the page its slot holds ([`summary_at::ENTRY_DATA_CRC`], docs/format.md "Data
/// checksums"). Version 2: the superblock's pending-commit field (a commit in progress,
/// see docs/format.md "Ordering") and both summary copies written at format, so a
/// summary copy that does not decode is damage, never "not written yet"; version 2
/// images still open and serve, without data checksums. Version 1 images are refused:
/// they leave copy 1 zeroed, which version 2 would report as damage.
pub const FORMAT_VERSION: u32 = 3;
/// The oldest version this build opens.
pub const OLDEST_FORMAT_VERSION: u32 = 2;
/// The first version whose summary entries carry data-page checksums.
pub const DATA_CRC_VERSION: u32 = 3;
/// Version of the free-space area's blocks (free-map chunks, replica table): unchanged
/// since they appeared in format version 2.
pub const FREE_AREA_VERSION: u32 = 2;
/// One superblock copy's block; two copies end the BOPT device.
pub const SUPERBLOCK_BYTES: u64 = 4096;

/// Byte offsets of the superblock's fields (docs/format.md "Superblock"; one 4096-byte
/// block, every integer little-endian).
pub mod sb_at {
    /// 8 bytes: `RBLKSUPR`.
    pub const MAGIC: usize = 0;
    /// u32: the image's format version, [`super::OLDEST_FORMAT_VERSION`] ..=
    /// [`super::FORMAT_VERSION`]; its summaries have the same version.
    pub const VERSION: usize = 8;
    /// u32: `FLAG_*` bits.
    pub const FLAGS: usize = 12;
    /// u64: +1 on every superblock write; copy `generation % 2` holds it.
    pub const GENERATION: usize = 16;
    /// u64: random at format; every summary repeats it.
    pub const IMAGE_ID: usize = 24;
    /// u64: bytes of the data area (the export).
    pub const DATA_BYTES: usize = 32;
    /// u64: where the BOPT region starts on its device.
    pub const BOPT_OFFSET_BYTES: usize = 40;
    /// u64: size of the BOPT device; the superblocks are its last 8 KiB.
    pub const DEVICE_BYTES: usize = 48;
    /// u64: bytes of the summary area.
    pub const META_BYTES: usize = 56;
    /// u32: page bytes (a power of two >= 512).
    pub const PAGE_BYTES: usize = 64;
    /// u32: pages per segment.
    pub const SEGMENT_PAGES: usize = 68;
    /// u32: slots in the BOPT.
    pub const BOPT_PAGES: usize = 72;
    /// u32: slots of the read cache (the first ones).
    pub const READ_CACHE_PAGES: usize = 76;
    /// u32: slots of the write buffer (the rest, whole segments).
    pub const WRITE_BUFFER_PAGES: usize = 80;
    /// u32: bytes of one summary copy.
    pub const SUMMARY_BYTES: usize = 84;
    /// u64: the last metadata commit that completed.
    pub const COMMIT: usize = 88;
    /// u64: the commit in progress when this superblock was written (`COMMIT + 1`), or
    /// 0. Written before the summaries of that commit, so a summary copy that does not
    /// decode may be a torn write of it only while this names a commit never completed.
    pub const PENDING_COMMIT: usize = 96;
    /// u64: bytes of the free-space map area (two copies of every chunk, see
    /// [`super::freemap_at`]), right after the slots; 0 on images formatted before the
    /// map existed, which then serve without one.
    pub const FREEMAP_BYTES: usize = 104;
    /// 12 bytes that must be zero.
    pub const RESERVED: usize = 112;
    /// u32: CRC-32C of bytes `0..CRC`.
    pub const CRC: usize = 124;
    /// Bytes in use; the rest of the block must be zero.
    pub const USED: usize = 128;
}

/// Byte offsets of a segment summary's header fields and entries (docs/format.md
/// "Segment summary").
pub mod summary_at {
    /// 8 bytes: `RBLKSEGS`.
    pub const MAGIC: usize = 0;
    /// u32: the superblock's version.
    pub const VERSION: usize = 8;
    /// u32: the segment this copy belongs to.
    pub const SEGMENT: usize = 12;
    /// u64: the commit that wrote it.
    pub const COMMIT: usize = 16;
    /// u64: the superblock's image id.
    pub const IMAGE_ID: usize = 24;
    /// u32: entries (= segment pages).
    pub const ENTRIES: usize = 32;
    /// 24 bytes that must be zero.
    pub const RESERVED: usize = 36;
    /// u32: CRC-32C of bytes `0..CRC` followed by the entry bytes.
    pub const CRC: usize = 60;
    /// First entry; entry `i` is at `HEADER + entry_bytes(version) * i`.
    pub const HEADER: usize = 64;
    /// Bytes per entry in version 2: FS page u64, BOPT slot u32, flags u32.
    pub const ENTRY_BYTES: usize = 16;
    /// Bytes per entry from version 3: version 2's, then the data CRC u32.
    pub const ENTRY_BYTES_V3: usize = 20;
    /// Within an entry: u64 FS page.
    pub const ENTRY_FS_PAGE: usize = 0;
    /// Within an entry: u32 BOPT slot (= segment * segment_pages + i).
    pub const ENTRY_SLOT: usize = 8;
    /// Within an entry: u32 `ENTRY_*` flags.
    pub const ENTRY_FLAGS: usize = 12;
    /// Within an entry (version 3): u32 CRC-32C of the whole page the slot holds, as of
    /// the commit that wrote the summary; meaningful with `ENTRY_CRC`, else zero.
    pub const ENTRY_DATA_CRC: usize = 16;

    /// Bytes per entry in a summary of `version`.
    pub fn entry_bytes(version: u32) -> usize {
        if version >= super::DATA_CRC_VERSION {
            ENTRY_BYTES_V3
        } else {
            ENTRY_BYTES
        }
    }
}

const SUPERBLOCK_USED: usize = sb_at::USED;
const SUMMARY_HEADER: usize = summary_at::HEADER;

/// Superblock flag: the engine is (or was, at a crash) serving; recovery must treat every
/// map entry as dirty (seed 001 §3.5.1). The seed's REQUIRE flag.
pub const FLAG_DIRTY: u32 = 1;
/// A metadata commit failed; the map on disk may be behind. Run `reblock check`.
pub const FLAG_NEEDS_CHECK: u32 = 2;
/// The BOPT lives on its own device; the data device holds the data area alone.
pub const FLAG_SEPARATE: u32 = 4;
const KNOWN_FLAGS: u32 = FLAG_DIRTY | FLAG_NEEDS_CHECK | FLAG_SEPARATE;

/// Entry flag: the slot holds `fs_page`.
pub const ENTRY_VALID: u32 = 1;
/// Entry flag: the slot is newer than home. Trusted only after a clean stop.
pub const ENTRY_DIRTY: u32 = 2;
/// Entry flag (version 3): the entry's data CRC holds the CRC-32C of the slot's page.
/// Absent when the engine served with data checksums off.
pub const ENTRY_CRC: u32 = 4;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FormatError {
    #[error("{what}: bad magic (not a reblock {what})")]
    Magic { what: &'static str },
    #[error("{what}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        what: &'static str,
        stored: u32,
        computed: u32,
    },
    #[error("{what}: field {field}: {why}")]
    Field {
        what: &'static str,
        field: &'static str,
        why: String,
    },
    #[error("{what}: {len} bytes is too short (need {need})")]
    Short {
        what: &'static str,
        len: usize,
        need: usize,
    },
}

fn field(what: &'static str, field: &'static str, why: impl Into<String>) -> FormatError {
    FormatError::Field {
        what,
        field,
        why: why.into(),
    }
}

/// Sizes and places of everything on the BOPT device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The image's format version (2: no data checksums; 3: summary entries carry them).
    pub version: u32,
    pub data_bytes: u64,
    pub page_bytes: u32,
    pub segment_pages: u32,
    pub bopt_pages: u32,
    pub read_cache_pages: u32,
    pub write_buffer_pages: u32,
    /// Bytes of one summary copy (a multiple of 4096).
    pub summary_bytes: u32,
    /// Where the BOPT region starts on its device (`data_bytes` on a shared image, 0 on
    /// a separate device).
    pub bopt_offset_bytes: u64,
    /// Bytes of the free-space map area after the slots (0: the image has none).
    pub freemap_bytes: u64,
    /// Size of the BOPT device; the superblocks are its last 8 KiB.
    pub device_bytes: u64,
    pub separate: bool,
}

/// What `format` is asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayoutRequest {
    pub data_bytes: u64,
    /// The whole BOPT region's budget: summaries, slots and superblocks.
    pub bopt_bytes: u64,
    pub page_bytes: u32,
    pub segment_pages: u32,
    pub write_buffer_fraction: f64,
    pub separate: bool,
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl Layout {
    /// The largest layout whose region fits `bopt_bytes`.
    pub fn plan(r: &LayoutRequest) -> Result<Layout, FormatError> {
        const W: &str = "layout";
        if r.page_bytes < 512 || !r.page_bytes.is_power_of_two() {
            return Err(field(W, "page_bytes", "must be a power of two >= 512"));
        }
        if r.segment_pages == 0 {
            return Err(field(W, "segment_pages", "must be at least 1"));
        }
        if r.data_bytes == 0 || !r.data_bytes.is_multiple_of(u64::from(r.page_bytes)) {
            return Err(field(
                W,
                "data_bytes",
                format!(
                    "{} is not a positive multiple of the page ({} bytes)",
                    r.data_bytes, r.page_bytes
                ),
            ));
        }
        let summary_bytes = summary_bytes_for(r.segment_pages, FORMAT_VERSION);
        // Per segment: two summary copies and its pages; the meta area is page-rounded.
        let seg_bytes =
            2 * u64::from(summary_bytes) + u64::from(r.segment_pages) * u64::from(r.page_bytes);
        let freemap_bytes = freemap_bytes_for(r.data_bytes, r.page_bytes);
        let avail = r
            .bopt_bytes
            .saturating_sub(2 * SUPERBLOCK_BYTES + u64::from(r.page_bytes) + freemap_bytes);
        let segments = (avail / seg_bytes).min(u64::from(u32::MAX / r.segment_pages));
        if segments == 0 {
            return Err(field(
                W,
                "bopt_bytes",
                format!(
                    "{} bytes is too small for one segment ({} bytes with its summaries and superblocks)",
                    r.bopt_bytes,
                    seg_bytes + 2 * SUPERBLOCK_BYTES + u64::from(r.page_bytes) + freemap_bytes
                ),
            ));
        }
        let bopt_pages = segments as u32 * r.segment_pages;
        let mut l = Layout {
            version: FORMAT_VERSION,
            data_bytes: r.data_bytes,
            page_bytes: r.page_bytes,
            segment_pages: r.segment_pages,
            bopt_pages,
            read_cache_pages: 0,
            write_buffer_pages: 0,
            summary_bytes,
            bopt_offset_bytes: if r.separate { 0 } else { r.data_bytes },
            freemap_bytes,
            device_bytes: 0,
            separate: r.separate,
        };
        let geo = l
            .geometry_with_fraction(r.write_buffer_fraction)
            .map_err(|e| field(W, "geometry", e.to_string()))?;
        l.read_cache_pages = geo.read_cache_pages;
        l.write_buffer_pages = geo.write_buffer_pages;
        l.device_bytes = l.slots_end_bytes() + freemap_bytes + 2 * SUPERBLOCK_BYTES;
        Ok(l)
    }

    pub fn segments(&self) -> u32 {
        self.bopt_pages / self.segment_pages
    }
    /// Summaries (two copies per segment), rounded up to a page so slots stay aligned.
    pub fn meta_bytes(&self) -> u64 {
        round_up(
            2 * u64::from(self.segments()) * u64::from(self.summary_bytes),
            u64::from(self.page_bytes),
        )
    }
    pub fn summary_offset(&self, segment: u32, copy: u32) -> u64 {
        self.bopt_offset_bytes
            + (2 * u64::from(segment) + u64::from(copy)) * u64::from(self.summary_bytes)
    }
    pub fn slot_offset(&self, slot: u32) -> u64 {
        self.bopt_offset_bytes + self.meta_bytes() + u64::from(slot) * u64::from(self.page_bytes)
    }
    pub fn slots_end_bytes(&self) -> u64 {
        self.slot_offset(self.bopt_pages)
    }
    pub fn superblock_offset(&self, copy: u32) -> u64 {
        superblock_offset(self.device_bytes, copy)
    }
    /// Chunks of the free-space map (0 when the image has none).
    pub fn freemap_chunks(&self) -> u32 {
        let blocks = self.freemap_bytes / (2 * FREEMAP_CHUNK_BYTES);
        blocks.saturating_sub(u64::from(REPLICA_TABLE_BLOCKS)) as u32
    }
    /// Blocks of the replica table (0 when the image has no free-space area).
    pub fn replica_blocks(&self) -> u32 {
        if self.freemap_bytes == 0 {
            0
        } else {
            REPLICA_TABLE_BLOCKS
        }
    }
    /// Where copy `copy` of replica-table block `block` starts: after the free-map chunks,
    /// block `k`, copy `c` at `slots_end + (2 (chunks + k) + c) * 4096`.
    pub fn replica_block_offset(&self, block: u32, copy: u32) -> u64 {
        self.freemap_offset(self.freemap_chunks() + block, copy)
    }
    /// Where copy `copy` of free-map chunk `chunk` starts: chunk `k`, copy `c` at
    /// `slots_end + (2 k + c) * 4096`.
    pub fn freemap_offset(&self, chunk: u32, copy: u32) -> u64 {
        self.slots_end_bytes() + (2 * u64::from(chunk) + u64::from(copy)) * FREEMAP_CHUNK_BYTES
    }

    fn geometry_with_fraction(
        &self,
        fraction: f64,
    ) -> Result<Geometry, reblock_layout::GeometryError> {
        let page_sectors = self.page_bytes / 512;
        Geometry::new(&BoptConfig {
            page_sectors,
            data_sectors: self.data_bytes / 512,
            bopt_pages: self.bopt_pages,
            segment_pages: self.segment_pages,
            write_buffer_fraction: fraction,
            position: if self.separate {
                BoptPosition::Separate {
                    start_sector: self.bopt_offset_bytes / 512,
                }
            } else {
                BoptPosition::End
            },
            meta_sectors: self.meta_bytes() / 512,
        })
    }

    /// The layout crate's geometry for this format (the read-cache/write-buffer split as
    /// stored, not recomputed).
    pub fn geometry(&self) -> Result<Geometry, FormatError> {
        let segs = self.segments();
        let wb_segs = self.write_buffer_pages / self.segment_pages;
        // The split is stored in whole segments; a fraction of exactly wb/segs rounds back.
        let fraction = if segs == 0 {
            0.0
        } else {
            f64::from(wb_segs) / f64::from(segs)
        };
        let g = self
            .geometry_with_fraction(fraction)
            .map_err(|e| field("superblock", "geometry", e.to_string()))?;
        if g.write_buffer_pages != self.write_buffer_pages {
            return Err(field(
                "superblock",
                "write_buffer_pages",
                "split does not match",
            ));
        }
        Ok(g)
    }
}

/// Offset of superblock copy `copy` on a BOPT device of `device_bytes`.
pub fn superblock_offset(device_bytes: u64, copy: u32) -> u64 {
    device_bytes - (2 - u64::from(copy)) * SUPERBLOCK_BYTES
}

/// Bytes of one summary copy for `segment_pages` entries of format `version`, a
/// multiple of 4096.
pub fn summary_bytes_for(segment_pages: u32, version: u32) -> u32 {
    let entries = summary_at::entry_bytes(version) as u64 * u64::from(segment_pages);
    round_up(SUMMARY_HEADER as u64 + entries, 4096) as u32
}

/// Bytes of the free-space area for a data area: two copies of one
/// [`FREEMAP_CHUNK_BYTES`] chunk per [`FREEMAP_CHUNK_PAGES`] data pages, then two copies
/// of each of the [`REPLICA_TABLE_BLOCKS`] blocks of the replica table.
pub fn freemap_bytes_for(data_bytes: u64, page_bytes: u32) -> u64 {
    let pages = data_bytes / u64::from(page_bytes.max(1));
    let blocks = pages.div_ceil(FREEMAP_CHUNK_PAGES) + u64::from(REPLICA_TABLE_BLOCKS);
    2 * blocks * FREEMAP_CHUNK_BYTES
}

/// The superblock: the layout plus flags, generation and identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub flags: u32,
    /// Incremented on every superblock write; copy `generation % 2` holds it.
    pub generation: u64,
    /// Random at format; every summary carries it so a stale summary of an older format
    /// is never read as current.
    pub image_id: u64,
    /// The highest summary commit number when this superblock was written.
    pub commit: u64,
    /// `commit + 1` while that commit is in progress (written before its summaries), else
    /// 0: only then may a summary copy that does not decode be a torn write.
    pub pending_commit: u64,
    pub layout: Layout,
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Superblock {
    /// Encodes one 4096-byte superblock block, all integers little-endian:
    ///
    /// | offset | size | field |
    /// |---|---|---|
    /// | 0 | 8 | magic `RBLKSUPR` |
    /// | 8 | 4 | version (2 or 3) |
    /// | 12 | 4 | flags: 1 DIRTY, 2 NEEDS_CHECK, 4 SEPARATE |
    /// | 16 | 8 | generation |
    /// | 24 | 8 | image id |
    /// | 32 | 8 | data-area bytes |
    /// | 40 | 8 | BOPT offset bytes (on the BOPT device) |
    /// | 48 | 8 | BOPT device bytes |
    /// | 56 | 8 | meta (summary area) bytes |
    /// | 64 | 4 | page bytes |
    /// | 68 | 4 | segment pages |
    /// | 72 | 4 | BOPT pages |
    /// | 76 | 4 | read-cache pages |
    /// | 80 | 4 | write-buffer pages |
    /// | 84 | 4 | summary bytes (one copy) |
    /// | 88 | 8 | commit number |
    /// | 96 | 8 | pending commit (commit + 1 while it is in progress, else 0) |
    /// | 104 | 8 | free-space area bytes (0: none) |
    /// | 112 | 12 | zero |
    /// | 124 | 4 | CRC-32C of bytes 0..124 |
    /// | 128 | 3968 | zero |
    pub fn encode(&self) -> Vec<u8> {
        use sb_at as at;
        let mut b = vec![0u8; SUPERBLOCK_BYTES as usize];
        let l = &self.layout;
        b[at::MAGIC..at::MAGIC + 8].copy_from_slice(SUPERBLOCK_MAGIC);
        put_u32(&mut b, at::VERSION, l.version);
        put_u32(&mut b, at::FLAGS, self.flags);
        put_u64(&mut b, at::GENERATION, self.generation);
        put_u64(&mut b, at::IMAGE_ID, self.image_id);
        put_u64(&mut b, at::DATA_BYTES, l.data_bytes);
        put_u64(&mut b, at::BOPT_OFFSET_BYTES, l.bopt_offset_bytes);
        put_u64(&mut b, at::DEVICE_BYTES, l.device_bytes);
        put_u64(&mut b, at::FREEMAP_BYTES, l.freemap_bytes);
        put_u64(&mut b, at::META_BYTES, l.meta_bytes());
        put_u32(&mut b, at::PAGE_BYTES, l.page_bytes);
        put_u32(&mut b, at::SEGMENT_PAGES, l.segment_pages);
        put_u32(&mut b, at::BOPT_PAGES, l.bopt_pages);
        put_u32(&mut b, at::READ_CACHE_PAGES, l.read_cache_pages);
        put_u32(&mut b, at::WRITE_BUFFER_PAGES, l.write_buffer_pages);
        put_u32(&mut b, at::SUMMARY_BYTES, l.summary_bytes);
        put_u64(&mut b, at::COMMIT, self.commit);
        put_u64(&mut b, at::PENDING_COMMIT, self.pending_commit);
        let crc = crc32c(&[&b[..at::CRC]]);
        put_u32(&mut b, at::CRC, crc);
        b
    }

    /// Decodes and validates one copy; every inconsistency is an error naming its field.
    pub fn decode(b: &[u8]) -> Result<Superblock, FormatError> {
        use sb_at as at;
        const W: &str = "superblock";
        if b.len() < SUPERBLOCK_USED {
            return Err(FormatError::Short {
                what: W,
                len: b.len(),
                need: SUPERBLOCK_USED,
            });
        }
        if &b[at::MAGIC..at::MAGIC + 8] != SUPERBLOCK_MAGIC {
            return Err(FormatError::Magic { what: W });
        }
        let (stored, computed) = (get_u32(b, at::CRC), crc32c(&[&b[..at::CRC]]));
        if stored != computed {
            return Err(FormatError::Checksum {
                what: W,
                stored,
                computed,
            });
        }
        let version = get_u32(b, at::VERSION);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(field(
                W,
                "version",
                format!(
                    "{version} is not supported (this build reads {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
                ),
            ));
        }
        if b[at::RESERVED..at::CRC].iter().any(|&x| x != 0) {
            return Err(field(W, "reserved", "bytes 112..124 must be zero"));
        }
        let flags = get_u32(b, at::FLAGS);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(field(
                W,
                "flags",
                format!("unknown bits {:#x}", flags & !KNOWN_FLAGS),
            ));
        }
        let layout = Layout {
            version,
            data_bytes: get_u64(b, at::DATA_BYTES),
            bopt_offset_bytes: get_u64(b, at::BOPT_OFFSET_BYTES),
            freemap_bytes: get_u64(b, at::FREEMAP_BYTES),
            device_bytes: get_u64(b, at::DEVICE_BYTES),
            page_bytes: get_u32(b, at::PAGE_BYTES),
            segment_pages: get_u32(b, at::SEGMENT_PAGES),
            bopt_pages: get_u32(b, at::BOPT_PAGES),
            read_cache_pages: get_u32(b, at::READ_CACHE_PAGES),
            write_buffer_pages: get_u32(b, at::WRITE_BUFFER_PAGES),
            summary_bytes: get_u32(b, at::SUMMARY_BYTES),
            separate: flags & FLAG_SEPARATE != 0,
        };
        validate_layout(&layout, get_u64(b, at::META_BYTES))?;
        let commit = get_u64(b, at::COMMIT);
        let pending_commit = get_u64(b, at::PENDING_COMMIT);
        if pending_commit != 0 && Some(pending_commit) != commit.checked_add(1) {
            return Err(field(
                W,
                "pending_commit",
                format!("{pending_commit} is neither 0 nor commit {commit} + 1"),
            ));
        }
        Ok(Superblock {
            flags,
            generation: get_u64(b, at::GENERATION),
            image_id: get_u64(b, at::IMAGE_ID),
            commit,
            pending_commit,
            layout,
        })
    }
}

fn validate_layout(l: &Layout, meta_bytes: u64) -> Result<(), FormatError> {
    const W: &str = "superblock";
    if l.page_bytes < 512 || !l.page_bytes.is_power_of_two() {
        return Err(field(
            W,
            "page_bytes",
            format!("{} is not a power of two >= 512", l.page_bytes),
        ));
    }
    if l.segment_pages == 0 || !l.bopt_pages.is_multiple_of(l.segment_pages) {
        return Err(field(
            W,
            "segment_pages",
            format!(
                "{} does not divide bopt_pages {}",
                l.segment_pages, l.bopt_pages
            ),
        ));
    }
    if u64::from(l.read_cache_pages) + u64::from(l.write_buffer_pages) != u64::from(l.bopt_pages)
        || !l.write_buffer_pages.is_multiple_of(l.segment_pages)
    {
        return Err(field(
            W,
            "write_buffer_pages",
            "read cache + write buffer must be bopt_pages, in whole segments",
        ));
    }
    if l.summary_bytes != summary_bytes_for(l.segment_pages, l.version) {
        return Err(field(
            W,
            "summary_bytes",
            format!(
                "{} does not match segment_pages {}",
                l.summary_bytes, l.segment_pages
            ),
        ));
    }
    if !l.data_bytes.is_multiple_of(u64::from(l.page_bytes)) || l.data_bytes == 0 {
        return Err(field(
            W,
            "data_bytes",
            format!("{} is not a positive multiple of the page", l.data_bytes),
        ));
    }
    if !l.separate && l.bopt_offset_bytes != l.data_bytes {
        return Err(field(
            W,
            "bopt_offset_bytes",
            "a shared image's BOPT starts where the data area ends",
        ));
    }
    if meta_bytes != l.meta_bytes() {
        return Err(field(
            W,
            "meta_bytes",
            format!(
                "{meta_bytes} does not match the layout ({})",
                l.meta_bytes()
            ),
        ));
    }
    if l.freemap_bytes != 0 && l.freemap_bytes != freemap_bytes_for(l.data_bytes, l.page_bytes) {
        return Err(field(
            W,
            "freemap_bytes",
            format!(
                "{} is neither 0 nor {} (the free-space map of the data area)",
                l.freemap_bytes,
                freemap_bytes_for(l.data_bytes, l.page_bytes)
            ),
        ));
    }
    // In u128 so a forged superblock cannot overflow the arithmetic.
    let need = u128::from(l.bopt_offset_bytes)
        + u128::from(meta_bytes)
        + u128::from(l.bopt_pages) * u128::from(l.page_bytes)
        + u128::from(l.freemap_bytes)
        + 2 * u128::from(SUPERBLOCK_BYTES);
    let need = u64::try_from(need).ok();
    if need.is_none_or(|n| n > l.device_bytes) {
        return Err(field(
            W,
            "device_bytes",
            format!("{} is smaller than the region it describes", l.device_bytes),
        ));
    }
    Ok(())
}

/// One map entry of a segment summary (seed 000 Figure 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub fs_page: u64,
    pub slot: u32,
    pub flags: u32,
    /// CRC-32C of the slot's page (version 3, with `ENTRY_CRC`), else 0.
    pub data_crc: u32,
}

impl Entry {
    pub fn valid(&self) -> bool {
        self.flags & ENTRY_VALID != 0
    }
    pub fn dirty(&self) -> bool {
        self.flags & ENTRY_DIRTY != 0
    }
    /// The checksum of the slot's page, if the entry carries one.
    pub fn checksum(&self) -> Option<u32> {
        (self.flags & ENTRY_CRC != 0).then_some(self.data_crc)
    }
}

/// One segment's summary: its map entries, one per slot, in slot order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub segment: u32,
    /// The commit that wrote it: a global counter, so between two copies, and between two
    /// segments claiming one FS page after a torn commit, the higher one is the newer.
    pub commit: u64,
    pub image_id: u64,
    pub entries: Vec<Entry>,
}

impl Summary {
    /// Encodes a `summary_bytes` block, little-endian:
    ///
    /// | offset | size | field |
    /// |---|---|---|
    /// | 0 | 8 | magic `RBLKSEGS` |
    /// | 8 | 4 | version (the superblock's: 2 or 3) |
    /// | 12 | 4 | segment index |
    /// | 16 | 8 | commit number |
    /// | 24 | 8 | image id (the superblock's) |
    /// | 32 | 4 | entry count (= segment pages) |
    /// | 36 | 24 | zero |
    /// | 60 | 4 | CRC-32C of bytes 0..60 then of the entries |
    /// | 64 + E i | 8 | entry i: FS page (E = 16 in version 2, 20 from version 3) |
    /// | 72 + E i | 4 | entry i: BOPT slot (= segment * segment_pages + i) |
    /// | 76 + E i | 4 | entry i: flags (1 VALID, 2 DIRTY, 4 CRC from version 3) |
    /// | 80 + E i | 4 | entry i (version 3): CRC-32C of the slot's page, 0 without CRC |
    ///
    /// Entries are encoded as given: a version 2 layout drops their data CRCs and CRC
    /// flags, since version 2 has no room for them.
    pub fn encode(&self, l: &Layout) -> Vec<u8> {
        use summary_at as at;
        let mut b = vec![0u8; l.summary_bytes as usize];
        let entry_bytes = at::entry_bytes(l.version);
        let with_crc = l.version >= DATA_CRC_VERSION;
        b[at::MAGIC..at::MAGIC + 8].copy_from_slice(SUMMARY_MAGIC);
        put_u32(&mut b, at::VERSION, l.version);
        put_u32(&mut b, at::SEGMENT, self.segment);
        put_u64(&mut b, at::COMMIT, self.commit);
        put_u64(&mut b, at::IMAGE_ID, self.image_id);
        put_u32(&mut b, at::ENTRIES, self.entries.len() as u32);
        for (i, e) in self.entries.iter().enumerate() {
            let x = at::HEADER + entry_bytes * i;
            put_u64(&mut b, x + at::ENTRY_FS_PAGE, e.fs_page);
            put_u32(&mut b, x + at::ENTRY_SLOT, e.slot);
            match e.checksum().filter(|_| with_crc) {
                Some(crc) => {
                    put_u32(&mut b, x + at::ENTRY_FLAGS, e.flags);
                    put_u32(&mut b, x + at::ENTRY_DATA_CRC, crc);
                }
                None => put_u32(&mut b, x + at::ENTRY_FLAGS, e.flags & !ENTRY_CRC),
            }
        }
        let end = at::HEADER + entry_bytes * self.entries.len();
        let crc = crc32c(&[&b[..at::CRC], &b[at::HEADER..end]]);
        put_u32(&mut b, at::CRC, crc);
        b
    }

    /// Decodes one copy of a format `version` image, checking magic, checksum, version,
    /// and that the entry count and slots match the expected segment.
    pub fn decode(
        b: &[u8],
        segment: u32,
        segment_pages: u32,
        version: u32,
    ) -> Result<Summary, FormatError> {
        use summary_at as at;
        const W: &str = "segment summary";
        let need = at::HEADER + at::entry_bytes(version) * segment_pages as usize;
        if b.len() < need {
            return Err(FormatError::Short {
                what: W,
                len: b.len(),
                need,
            });
        }
        if &b[at::MAGIC..at::MAGIC + 8] != SUMMARY_MAGIC {
            return Err(FormatError::Magic { what: W });
        }
        let n = get_u32(b, at::ENTRIES);
        if n != segment_pages {
            return Err(field(
                W,
                "entries",
                format!("{n}, expected {segment_pages}"),
            ));
        }
        let (stored, computed) = (
            get_u32(b, at::CRC),
            crc32c(&[&b[..at::CRC], &b[at::HEADER..need]]),
        );
        if stored != computed {
            return Err(FormatError::Checksum {
                what: W,
                stored,
                computed,
            });
        }
        if b[at::RESERVED..at::CRC].iter().any(|&x| x != 0) {
            return Err(field(W, "reserved", "bytes 36..60 must be zero"));
        }
        if get_u32(b, at::VERSION) != version {
            return Err(field(
                W,
                "version",
                format!(
                    "{} in an image of version {version}",
                    get_u32(b, at::VERSION)
                ),
            ));
        }
        if get_u32(b, at::SEGMENT) != segment {
            return Err(field(
                W,
                "segment",
                format!(
                    "{} stored where segment {segment} belongs",
                    get_u32(b, at::SEGMENT)
                ),
            ));
        }
        let entries = (0..n)
            .map(|i| decode_entry(b, segment, segment_pages, version, i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Summary {
            segment,
            commit: get_u64(b, at::COMMIT),
            image_id: get_u64(b, at::IMAGE_ID),
            entries,
        })
    }

    /// The FS pages a damaged copy still seems to name: every entry whose slot and flags
    /// look right and that is marked valid, read without trusting the checksum. Only
    /// used to know which pages a lost segment may have held, so that they answer EIO
    /// rather than stale data; never to serve data.
    pub fn salvage_pages(b: &[u8], segment: u32, segment_pages: u32, version: u32) -> Vec<u64> {
        let need = summary_at::HEADER + summary_at::entry_bytes(version) * segment_pages as usize;
        if b.len() < need {
            return Vec::new();
        }
        (0..segment_pages)
            .filter_map(|i| decode_entry(b, segment, segment_pages, version, i).ok())
            .filter(|e| e.valid())
            .map(|e| e.fs_page)
            .collect()
    }
}

/// Entry `i` of a summary of `segment`, checked for its slot and flag bits.
fn decode_entry(
    b: &[u8],
    segment: u32,
    segment_pages: u32,
    version: u32,
    i: u32,
) -> Result<Entry, FormatError> {
    use summary_at as at;
    const W: &str = "segment summary";
    let x = at::HEADER + at::entry_bytes(version) * i as usize;
    let with_crc = version >= DATA_CRC_VERSION;
    let e = Entry {
        fs_page: get_u64(b, x + at::ENTRY_FS_PAGE),
        slot: get_u32(b, x + at::ENTRY_SLOT),
        flags: get_u32(b, x + at::ENTRY_FLAGS),
        data_crc: if with_crc {
            get_u32(b, x + at::ENTRY_DATA_CRC)
        } else {
            0
        },
    };
    let want = u64::from(segment) * u64::from(segment_pages) + u64::from(i);
    if u64::from(e.slot) != want {
        return Err(field(
            W,
            "slot",
            format!("entry {i} names slot {}, expected {want}", e.slot),
        ));
    }
    let known = ENTRY_VALID | ENTRY_DIRTY | if with_crc { ENTRY_CRC } else { 0 };
    if e.flags & !known != 0 {
        return Err(field(
            W,
            "flags",
            format!("entry {i} has unknown bits {:#x}", e.flags & !known),
        ));
    }
    if e.checksum().is_none() && e.data_crc != 0 {
        return Err(field(
            W,
            "data_crc",
            format!("entry {i} has a data CRC without the CRC flag"),
        ));
    }
    Ok(e)
}

pub const FREEMAP_MAGIC: &[u8; 8] = b"RBLKFREE";
/// Magic of a replica-table block (same header as a free-map chunk, [`freemap_at`]).
pub const REPLICA_MAGIC: &[u8; 8] = b"RBLKREPL";
/// Blocks of the replica table, each with two copies, after the free-map chunks.
pub const REPLICA_TABLE_BLOCKS: u32 = 16;
/// Bytes of one replica-table entry (see [`replica_at`]).
pub const REPLICA_ENTRY_BYTES: usize = 24;
/// Entries one block holds after its 64-byte header.
pub const REPLICAS_PER_BLOCK: usize =
    (FREEMAP_CHUNK_BYTES as usize - freemap_at::BITS) / REPLICA_ENTRY_BYTES;

/// One replica-table entry, at `BITS + i * REPLICA_ENTRY_BYTES` of its block: a copy of
/// data page `ORIGINAL` kept in the free data page `REPLICA` (FS2's replica table). An
/// entry whose `ORIGINAL` equals its `REPLICA` is empty.
pub mod replica_at {
    /// u64: the data page copied.
    pub const ORIGINAL: usize = 0;
    /// u64: the free data page holding the copy.
    pub const REPLICA: usize = 8;
    /// u32: seconds since the Unix epoch of the last read served from the copy (or its
    /// creation).
    pub const LAST_ACCESS: usize = 16;
    /// u32: reads served from the copy.
    pub const REFCOUNT: usize = 20;
}
/// One copy of one free-space map chunk.
pub const FREEMAP_CHUNK_BYTES: u64 = 4096;
/// Data pages one chunk covers: one bit each after the 64-byte header.
pub const FREEMAP_CHUNK_PAGES: u64 = (FREEMAP_CHUNK_BYTES - freemap_at::BITS as u64) * 8;

/// Byte offsets of a free-space map chunk copy (docs/format.md "Free-space map"). The
/// chunks sit after the slots, chunk `k` copy `c` at `slots_end + (2 k + c) * 4096`;
/// like summaries, the two copies alternate and the newer committed one counts.
pub mod freemap_at {
    /// 8 bytes: `RBLKFREE`.
    pub const MAGIC: usize = 0;
    /// u32: [`super::FREE_AREA_VERSION`].
    pub const VERSION: usize = 8;
    /// u32: the chunk this copy belongs to.
    pub const CHUNK: usize = 12;
    /// u64: the commit that wrote it.
    pub const COMMIT: usize = 16;
    /// u64: the superblock's image id.
    pub const IMAGE_ID: usize = 24;
    /// 28 bytes that must be zero.
    pub const RESERVED: usize = 32;
    /// u32: CRC-32C of bytes `0..CRC` followed by the bitmap.
    pub const CRC: usize = 60;
    /// The bitmap: bit `i % 8` of byte `BITS + i / 8` set when data page
    /// `chunk * FREEMAP_CHUNK_PAGES + i` is free (trimmed or zeroed: it reads as zeros).
    pub const BITS: usize = 64;
}

/// One chunk of the free-space map as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreeChunk {
    pub chunk: u32,
    pub commit: u64,
    pub image_id: u64,
    /// `FREEMAP_CHUNK_PAGES` bits, least significant bit of byte 0 first.
    pub bits: Vec<u8>,
}

impl FreeChunk {
    /// Encodes one 4096-byte copy of a free-map chunk.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_as(FREEMAP_MAGIC)
    }

    /// Decodes one copy of free-map chunk `chunk`.
    pub fn decode(b: &[u8], chunk: u32) -> Result<FreeChunk, FormatError> {
        Self::decode_as(b, chunk, FREEMAP_MAGIC)
    }

    /// Encodes one 4096-byte copy under `magic` (a free-map chunk or a replica-table
    /// block; `bits` is then the entries).
    pub fn encode_as(&self, magic: &[u8; 8]) -> Vec<u8> {
        use freemap_at as at;
        let mut b = vec![0u8; FREEMAP_CHUNK_BYTES as usize];
        b[at::MAGIC..at::MAGIC + 8].copy_from_slice(magic);
        put_u32(&mut b, at::VERSION, FREE_AREA_VERSION);
        put_u32(&mut b, at::CHUNK, self.chunk);
        put_u64(&mut b, at::COMMIT, self.commit);
        put_u64(&mut b, at::IMAGE_ID, self.image_id);
        let n = self.bits.len().min(b.len() - at::BITS);
        b[at::BITS..at::BITS + n].copy_from_slice(&self.bits[..n]);
        let crc = crc32c(&[&b[..at::CRC], &b[at::BITS..]]);
        put_u32(&mut b, at::CRC, crc);
        b
    }

    /// Decodes one copy, checking magic, checksum, version and chunk number.
    pub fn decode_as(b: &[u8], chunk: u32, magic: &[u8; 8]) -> Result<FreeChunk, FormatError> {
        use freemap_at as at;
        const W: &str = "free-space area block";
        let need = FREEMAP_CHUNK_BYTES as usize;
        if b.len() < need {
            return Err(FormatError::Short {
                what: W,
                len: b.len(),
                need,
            });
        }
        if &b[at::MAGIC..at::MAGIC + 8] != magic {
            return Err(FormatError::Magic { what: W });
        }
        let (stored, computed) = (
            get_u32(b, at::CRC),
            crc32c(&[&b[..at::CRC], &b[at::BITS..need]]),
        );
        if stored != computed {
            return Err(FormatError::Checksum {
                what: W,
                stored,
                computed,
            });
        }
        if get_u32(b, at::VERSION) != FREE_AREA_VERSION {
            let v = get_u32(b, at::VERSION);
            return Err(field(W, "version", format!("{v} is not supported")));
        }
        if b[at::RESERVED..at::CRC].iter().any(|&x| x != 0) {
            return Err(field(W, "reserved", "bytes 32..60 must be zero"));
        }
        if get_u32(b, at::CHUNK) != chunk {
            let c = get_u32(b, at::CHUNK);
            return Err(field(
                W,
                "chunk",
                format!("{c} stored where chunk {chunk} belongs"),
            ));
        }
        Ok(FreeChunk {
            chunk,
            commit: get_u64(b, at::COMMIT),
            image_id: get_u64(b, at::IMAGE_ID),
            bits: b[at::BITS..need].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::plan(&LayoutRequest {
            data_bytes: 1 << 20,
            // The free-space area (free map and replica table) comes on top.
            bopt_bytes: (256 << 10) + 17 * 8192,
            page_bytes: 4096,
            segment_pages: 16,
            write_buffer_fraction: 0.25,
            separate: false,
        })
        .unwrap()
    }

    #[test]
    fn plan_fits_the_budget_and_matches_the_geometry() {
        let l = layout();
        // Per segment: 2 summaries of 4096 (64 + 16*16 = 320 -> 4096) + 16 pages = 73728.
        // Budget 262144 - 8192 - 4096 = 249856 -> 3 segments = 48 pages.
        assert_eq!((l.bopt_pages, l.summary_bytes), (48, 4096));
        assert_eq!(l.meta_bytes(), 6 * 4096);
        assert_eq!((l.read_cache_pages, l.write_buffer_pages), (32, 16));
        // One free-map chunk (256 pages) and 16 replica-table blocks, two copies each,
        // after the slots.
        assert_eq!(l.freemap_bytes, 17 * 2 * 4096);
        assert_eq!((l.freemap_chunks(), l.replica_blocks()), (1, 16));
        assert_eq!(l.freemap_offset(0, 1), l.slots_end_bytes() + 4096);
        assert_eq!(l.replica_block_offset(0, 0), l.slots_end_bytes() + 2 * 4096);
        let free_area = 17 * 8192;
        assert_eq!(
            l.device_bytes,
            (1 << 20) + 6 * 4096 + 48 * 4096 + free_area + 8192
        );
        assert!(l.device_bytes - (1 << 20) <= (256 << 10) + free_area);
        let g = l.geometry().unwrap();
        assert_eq!(g.bopt_sector(0, 0) * 512, l.slot_offset(0));
        assert_eq!(g.write_buffer_pages, 16);
    }

    #[test]
    fn superblock_round_trips_and_detects_corruption() {
        let sb = Superblock {
            flags: FLAG_DIRTY,
            generation: 7,
            image_id: 0xfeed,
            commit: 42,
            pending_commit: 43,
            layout: layout(),
        };
        let mut b = sb.encode();
        assert_eq!(&b[0..8], b"RBLKSUPR");
        assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 7);
        assert_eq!(Superblock::decode(&b).unwrap(), sb);
        b[40] ^= 1;
        assert!(matches!(
            Superblock::decode(&b),
            Err(FormatError::Checksum { .. })
        ));
        b[0] = b'X';
        assert!(matches!(
            Superblock::decode(&b),
            Err(FormatError::Magic { .. })
        ));
    }

    #[test]
    fn superblock_with_inconsistent_layout_names_the_field() {
        let mut sb = Superblock {
            flags: 0,
            generation: 1,
            image_id: 1,
            commit: 0,
            pending_commit: 0,
            layout: layout(),
        };
        sb.layout.write_buffer_pages += 1;
        let e = Superblock::decode(&sb.encode()).unwrap_err().to_string();
        assert!(e.contains("write_buffer_pages"), "{e}");
    }

    fn summary_of_segment_1() -> Summary {
        let entries = (0..16)
            .map(|i| Entry {
                fs_page: 100 + u64::from(i),
                slot: 16 + i,
                flags: if i % 2 == 0 {
                    ENTRY_VALID | ENTRY_CRC
                } else {
                    0
                },
                data_crc: if i % 2 == 0 { 0xc0de_0000 + i } else { 0 },
            })
            .collect();
        Summary {
            segment: 1,
            commit: 9,
            image_id: 3,
            entries,
        }
    }

    #[test]
    fn summary_round_trips_and_checks_its_slots() {
        let s = summary_of_segment_1();
        let b = s.encode(&layout());
        // Entry 1 (slot 17) at 64 + 20: FS page 101; entry 2's data CRC at 64 + 40 + 16.
        assert_eq!(u64::from_le_bytes(b[84..92].try_into().unwrap()), 101);
        assert_eq!(
            u32::from_le_bytes(b[120..124].try_into().unwrap()),
            0xc0de_0002
        );
        assert_eq!(Summary::decode(&b, 1, 16, 3).unwrap(), s);
        assert!(Summary::decode(&b, 2, 16, 3)
            .unwrap_err()
            .to_string()
            .contains("segment"));
        let mut torn = b.clone();
        torn[64 + 20 * 5] ^= 0xff;
        assert!(matches!(
            Summary::decode(&torn, 1, 16, 3),
            Err(FormatError::Checksum { .. })
        ));
    }

    #[test]
    fn version_2_summaries_keep_16_byte_entries_without_data_crcs() {
        let mut l = layout();
        l.version = 2;
        let s = summary_of_segment_1();
        let b = s.encode(&l);
        // Entry 1 at 64 + 16, as version 2 wrote it; the CRC flag is not stored.
        assert_eq!(u64::from_le_bytes(b[80..88].try_into().unwrap()), 101);
        let back = Summary::decode(&b, 1, 16, 2).unwrap();
        assert!(back.entries.iter().all(|e| e.checksum().is_none()));
        assert_eq!(back.entries[2].flags, ENTRY_VALID);
        // A version 2 copy in a version 3 image is refused by name.
        let e = Summary::decode(&b, 1, 16, 3).unwrap_err().to_string();
        assert!(e.contains("checksum") || e.contains("version"), "{e}");
        assert_eq!(summary_bytes_for(256, 2), summary_bytes_for(256, 3));
    }

    #[test]
    fn free_chunk_round_trips_and_detects_corruption() {
        let mut bits = vec![0u8; (FREEMAP_CHUNK_PAGES / 8) as usize];
        bits[0] = 0b101;
        bits[100] = 0xff;
        let c = FreeChunk {
            chunk: 3,
            commit: 11,
            image_id: 5,
            bits,
        };
        let b = c.encode();
        assert_eq!(&b[0..8], b"RBLKFREE");
        assert_eq!(b[freemap_at::BITS], 0b101);
        assert_eq!(FreeChunk::decode(&b, 3).unwrap(), c);
        assert!(FreeChunk::decode(&b, 4)
            .unwrap_err()
            .to_string()
            .contains("chunk"));
        let mut torn = b.clone();
        torn[2000] ^= 1;
        assert!(matches!(
            FreeChunk::decode(&torn, 3),
            Err(FormatError::Checksum { .. })
        ));
    }

    #[test]
    fn superblock_without_a_free_map_still_opens() {
        let mut l = layout();
        l.freemap_bytes = 0;
        l.device_bytes -= 17 * 8192;
        let sb = Superblock {
            flags: 0,
            generation: 1,
            image_id: 1,
            commit: 0,
            pending_commit: 0,
            layout: l,
        };
        let mut b = sb.encode();
        assert_eq!(Superblock::decode(&b).unwrap().layout.freemap_chunks(), 0);
        // Bytes 104..112 were reserved (zero) before the map existed: an older image
        // reads as one without a map.
        assert!(b[104..112].iter().all(|&x| x == 0));
        b[104] = 1;
        let crc = crc32c(&[&b[..124]]);
        b[124..128].copy_from_slice(&crc.to_le_bytes());
        let e = Superblock::decode(&b).unwrap_err().to_string();
        assert!(e.contains("freemap_bytes"), "{e}");
    }
}
