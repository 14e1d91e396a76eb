//! Free blocks of an ext4 (or ext2/ext3) image, read from its group descriptors and block
//! bitmaps.
//!
//! Written by hand: the maintained ext4 crates read files and directories, none exposes the
//! allocation bitmaps. The reader is small and checked against `dumpe2fs` on images made by
//! `mkfs.ext4` (tests/ext4_images.rs). Offsets follow the kernel's `struct ext4_super_block`
//! and `struct ext4_group_desc` (Documentation/filesystems/ext4); each is a named constant
//! below.
//!
//! Safety rule: a block reported free here may receive a replica, overwriting what it
//! holds. So the reader refuses an image whose bitmaps may be stale (journal needing
//! recovery, file system not marked clean) or that uses a layout it does not understand
//! (bigalloc clusters), rather than guess.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::FreeExtents;

/// Byte offset of the primary superblock.
const SUPERBLOCK_OFFSET: u64 = 1024;
/// Bytes of the superblock we read.
const SUPERBLOCK_SIZE: usize = 1024;
/// `s_blocks_count_lo`: u32, total blocks (low half).
const SB_BLOCKS_COUNT_LO: usize = 0x04;
/// `s_first_data_block`: u32, 1 for 1 KiB blocks, else 0.
const SB_FIRST_DATA_BLOCK: usize = 0x14;
/// `s_log_block_size`: u32, block size is 1024 << this.
const SB_LOG_BLOCK_SIZE: usize = 0x18;
/// `s_blocks_per_group`: u32.
const SB_BLOCKS_PER_GROUP: usize = 0x20;
/// `s_inodes_per_group`: u32.
const SB_INODES_PER_GROUP: usize = 0x28;
/// `s_magic`: u16, 0xEF53.
const SB_MAGIC: usize = 0x38;
/// `s_state`: u16, bit 0 = cleanly unmounted, bit 1 = errors detected.
const SB_STATE: usize = 0x3A;
/// `s_rev_level`: u32, 0 = original format with 128-byte inodes.
const SB_REV_LEVEL: usize = 0x4C;
/// `s_inode_size`: u16 (revision 1 and later).
const SB_INODE_SIZE: usize = 0x58;
/// `s_feature_compat`: u32.
const SB_FEATURE_COMPAT: usize = 0x5C;
/// `s_feature_incompat`: u32.
const SB_FEATURE_INCOMPAT: usize = 0x60;
/// `s_feature_ro_compat`: u32.
const SB_FEATURE_RO_COMPAT: usize = 0x64;
/// `s_reserved_gdt_blocks`: u16, blocks kept after the descriptors for online resize.
const SB_RESERVED_GDT_BLOCKS: usize = 0xCE;
/// `s_desc_size`: u16, descriptor size when the 64bit feature is on.
const SB_DESC_SIZE: usize = 0xFE;
/// `s_first_meta_bg`: u32, first meta block group (meta_bg feature).
const SB_FIRST_META_BG: usize = 0x104;
/// `s_blocks_count_hi`: u32, total blocks (high half, 64bit feature).
const SB_BLOCKS_COUNT_HI: usize = 0x150;
/// `s_backup_bgs`: two u32, the only groups with superblock backups (sparse_super2).
const SB_BACKUP_BGS: usize = 0x24C;

const EXT4_MAGIC: u16 = 0xEF53;
const STATE_VALID: u16 = 0x1;
const STATE_ERROR: u16 = 0x2;
const COMPAT_SPARSE_SUPER2: u32 = 0x200;
const INCOMPAT_RECOVER: u32 = 0x4;
const INCOMPAT_META_BG: u32 = 0x10;
const INCOMPAT_64BIT: u32 = 0x80;
const RO_COMPAT_SPARSE_SUPER: u32 = 0x1;
const RO_COMPAT_BIGALLOC: u32 = 0x200;

/// `bg_block_bitmap_lo`: u32, block holding this group's block bitmap.
const GD_BLOCK_BITMAP_LO: usize = 0x00;
/// `bg_inode_bitmap_lo`: u32.
const GD_INODE_BITMAP_LO: usize = 0x04;
/// `bg_inode_table_lo`: u32, first block of the inode table.
const GD_INODE_TABLE_LO: usize = 0x08;
/// `bg_free_blocks_count_lo`: u16.
const GD_FREE_BLOCKS_LO: usize = 0x0C;
/// `bg_flags`: u16; 0x2 = BLOCK_UNINIT (bitmap never written, computed instead).
const GD_FLAGS: usize = 0x12;
/// `bg_block_bitmap_hi`: u32 (64-byte descriptors).
const GD_BLOCK_BITMAP_HI: usize = 0x20;
/// `bg_inode_bitmap_hi`: u32.
const GD_INODE_BITMAP_HI: usize = 0x24;
/// `bg_inode_table_hi`: u32.
const GD_INODE_TABLE_HI: usize = 0x28;
/// `bg_free_blocks_count_hi`: u16.
const GD_FREE_BLOCKS_HI: usize = 0x2C;
const GD_FLAG_BLOCK_UNINIT: u16 = 0x2;
/// Descriptor size without the 64bit feature.
const GD_SIZE_32: usize = 32;

/// What went wrong reading an ext4 image.
#[derive(Debug, thiserror::Error)]
pub enum Ext4Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not an ext2/3/4 file system (superblock magic {magic:#06x} at byte 1080, expected 0xef53)")]
    NotExt4 { path: PathBuf, magic: u16 },
    #[error("{path}: unsupported ext4 layout: {what}")]
    Unsupported { path: PathBuf, what: String },
    #[error("{path}: the block bitmaps may be stale ({why}); run e2fsck (or mount and unmount it once) first, since a block wrongly taken for free could be overwritten")]
    NotClean { path: PathBuf, why: &'static str },
    #[error("{path}: group {group}: {what}")]
    Corrupt {
        path: PathBuf,
        group: u64,
        what: String,
    },
}

/// The free blocks of one image.
#[derive(Clone, Debug)]
pub struct Ext4Free {
    /// File system block size in bytes.
    pub block_size: u64,
    /// Blocks in the file system.
    pub blocks: u64,
    /// Block groups.
    pub groups: u64,
    /// Free blocks, in file system blocks.
    pub free: FreeExtents,
    /// Groups whose descriptor's free count disagrees with their bitmap (the bitmap is what
    /// [`Ext4Free::free`] holds; a disagreement is reported, not guessed around).
    pub count_mismatches: Vec<u64>,
}

impl Ext4Free {
    /// The free extents in 512-byte sectors of the image.
    pub fn free_sectors(&self) -> FreeExtents {
        self.free
            .scaled(self.block_size / 512)
            .expect("an ext4 block count times its block size fits in u64 bytes")
    }
}

/// The superblock fields the reader uses.
struct Geometry {
    block_size: u64,
    blocks: u64,
    first_data_block: u64,
    blocks_per_group: u64,
    groups: u64,
    desc_size: usize,
    reserved_gdt: u64,
    first_meta_bg: u64,
    compat: u32,
    incompat: u32,
    ro_compat: u32,
    backup_bgs: [u64; 2],
    /// Blocks of one group's inode table (inodes per group times inode size).
    inode_table_blocks: u64,
}

impl Geometry {
    fn descs_per_block(&self) -> u64 {
        self.block_size / self.desc_size as u64
    }

    fn group_first_block(&self, g: u64) -> u64 {
        self.first_data_block + g * self.blocks_per_group
    }

    fn group_blocks(&self, g: u64) -> u64 {
        let start = self.group_first_block(g);
        self.blocks_per_group.min(self.blocks - start)
    }

    /// Whether group `g` holds a superblock backup (the kernel's `ext4_bg_has_super`).
    fn has_super(&self, g: u64) -> bool {
        if g == 0 {
            return true;
        }
        if self.compat & COMPAT_SPARSE_SUPER2 != 0 {
            return g == self.backup_bgs[0] || g == self.backup_bgs[1];
        }
        if self.ro_compat & RO_COMPAT_SPARSE_SUPER == 0 || g == 1 {
            return true;
        }
        [3u64, 5, 7].iter().any(|&b| is_power_of(g, b))
    }

    fn meta_bg(&self) -> bool {
        self.incompat & INCOMPAT_META_BG != 0
    }

    /// Number of descriptor-table blocks in the classic (non meta_bg) layout.
    fn gdt_blocks(&self) -> u64 {
        if self.meta_bg() {
            self.first_meta_bg
        } else {
            self.groups.div_ceil(self.descs_per_block())
        }
    }

    /// Blocks at the start of group `g` taken by the superblock backup, descriptors and
    /// reserved descriptors (the kernel's `ext4_num_base_meta_blocks`).
    fn base_meta_blocks(&self, g: u64) -> u64 {
        let sup = u64::from(self.has_super(g));
        let dpb = self.descs_per_block();
        if !self.meta_bg() || g < self.first_meta_bg * dpb {
            if sup == 1 {
                sup + self.gdt_blocks() + self.reserved_gdt
            } else {
                0
            }
        } else {
            let in_meta = g % dpb;
            sup + u64::from(in_meta == 0 || in_meta == 1 || in_meta == dpb - 1)
        }
    }

    /// Byte offset of group `g`'s descriptor.
    fn descriptor_offset(&self, g: u64) -> u64 {
        let dpb = self.descs_per_block();
        let mg = g / dpb;
        let block = if !self.meta_bg() || mg < self.first_meta_bg {
            self.first_data_block + 1 + mg
        } else {
            let first = mg * dpb;
            self.group_first_block(first) + u64::from(self.has_super(first))
        };
        block * self.block_size + (g % dpb) * self.desc_size as u64
    }
}

fn is_power_of(mut n: u64, b: u64) -> bool {
    while n > 1 && n.is_multiple_of(b) {
        n /= b;
    }
    n == 1
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads the free blocks of the ext2/3/4 file system in `path` (an image file or a block
/// device).
pub fn read_ext4_free(path: &Path) -> Result<Ext4Free, Ext4Error> {
    let file = File::open(path).map_err(|source| Ext4Error::Io {
        path: path.to_owned(),
        source,
    })?;
    read_ext4_free_with(path, &|buf, at| file.read_exact_at(buf, at))
}

/// Like [`read_ext4_free`], reading the file system's bytes through `read_at` (for an
/// image served by the engine, whose current blocks may sit in its BOPT); `path` names
/// it in errors.
pub fn read_ext4_free_with(
    path: &Path,
    read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
) -> Result<Ext4Free, Ext4Error> {
    let io = |source| Ext4Error::Io {
        path: path.to_owned(),
        source,
    };
    let mut sb = vec![0u8; SUPERBLOCK_SIZE];
    read_at(&mut sb, SUPERBLOCK_OFFSET).map_err(io)?;
    let geo = read_geometry(path, &sb)?;
    let mut free = FreeExtents::new();
    let mut count_mismatches = Vec::new();
    let mut desc = vec![0u8; geo.desc_size];
    let mut bitmap = vec![0u8; geo.block_size as usize];
    for g in 0..geo.groups {
        read_at(&mut desc, geo.descriptor_offset(g)).map_err(io)?;
        let expected_free = group_free_count(&geo, &desc);
        let found = if le16(&desc, GD_FLAGS) & GD_FLAG_BLOCK_UNINIT != 0 {
            uninit_group_free(&geo, g, &desc, &mut free)
        } else {
            let at = descriptor_block(&geo, &desc, GD_BLOCK_BITMAP_LO, GD_BLOCK_BITMAP_HI);
            if at >= geo.blocks {
                return Err(Ext4Error::Corrupt {
                    path: path.to_owned(),
                    group: g,
                    what: format!("block bitmap at block {at}, past the {} blocks", geo.blocks),
                });
            }
            read_at(&mut bitmap, at * geo.block_size).map_err(io)?;
            bitmap_group_free(&geo, g, &bitmap, &mut free)
        };
        if found != expected_free {
            count_mismatches.push(g);
        }
    }
    Ok(Ext4Free {
        block_size: geo.block_size,
        blocks: geo.blocks,
        groups: geo.groups,
        free,
        count_mismatches,
    })
}

fn read_geometry(path: &Path, sb: &[u8]) -> Result<Geometry, Ext4Error> {
    let magic = le16(sb, SB_MAGIC);
    if magic != EXT4_MAGIC {
        return Err(Ext4Error::NotExt4 {
            path: path.to_owned(),
            magic,
        });
    }
    let unsupported = |what: String| Ext4Error::Unsupported {
        path: path.to_owned(),
        what,
    };
    let incompat = le32(sb, SB_FEATURE_INCOMPAT);
    let ro_compat = le32(sb, SB_FEATURE_RO_COMPAT);
    if ro_compat & RO_COMPAT_BIGALLOC != 0 {
        return Err(unsupported(
            "bigalloc (bitmaps count clusters, not blocks)".into(),
        ));
    }
    let not_clean = |why| Ext4Error::NotClean {
        path: path.to_owned(),
        why,
    };
    if incompat & INCOMPAT_RECOVER != 0 {
        return Err(not_clean("its journal needs recovery"));
    }
    let state = le16(sb, SB_STATE);
    if state & STATE_VALID == 0 {
        return Err(not_clean("it is mounted or was not unmounted cleanly"));
    }
    if state & STATE_ERROR != 0 {
        return Err(not_clean("it is marked as having errors"));
    }
    let log = le32(sb, SB_LOG_BLOCK_SIZE);
    if log > 6 {
        return Err(unsupported(format!("block size 1024 << {log}")));
    }
    let block_size = 1024u64 << log;
    let is64 = incompat & INCOMPAT_64BIT != 0;
    let mut blocks = u64::from(le32(sb, SB_BLOCKS_COUNT_LO));
    if is64 {
        blocks |= u64::from(le32(sb, SB_BLOCKS_COUNT_HI)) << 32;
    }
    let desc_size = if is64 {
        usize::from(le16(sb, SB_DESC_SIZE)).max(GD_SIZE_32)
    } else {
        GD_SIZE_32
    };
    if !desc_size.is_power_of_two() || desc_size as u64 > block_size {
        return Err(unsupported(format!("group descriptor size {desc_size}")));
    }
    let first_data_block = u64::from(le32(sb, SB_FIRST_DATA_BLOCK));
    let blocks_per_group = u64::from(le32(sb, SB_BLOCKS_PER_GROUP));
    if blocks_per_group == 0 || blocks_per_group > block_size * 8 || blocks <= first_data_block {
        return Err(unsupported(format!(
            "{blocks_per_group} blocks per group, {blocks} blocks"
        )));
    }
    let inode_size = if le32(sb, SB_REV_LEVEL) == 0 {
        128
    } else {
        u64::from(le16(sb, SB_INODE_SIZE))
    };
    let inode_table_bytes = u64::from(le32(sb, SB_INODES_PER_GROUP)) * inode_size;
    Ok(Geometry {
        inode_table_blocks: inode_table_bytes.div_ceil(block_size),
        block_size,
        blocks,
        first_data_block,
        blocks_per_group,
        groups: (blocks - first_data_block).div_ceil(blocks_per_group),
        desc_size,
        reserved_gdt: u64::from(le16(sb, SB_RESERVED_GDT_BLOCKS)),
        first_meta_bg: u64::from(le32(sb, SB_FIRST_META_BG)),
        compat: le32(sb, SB_FEATURE_COMPAT),
        incompat,
        ro_compat,
        backup_bgs: [
            u64::from(le32(sb, SB_BACKUP_BGS)),
            u64::from(le32(sb, SB_BACKUP_BGS + 4)),
        ],
    })
}

/// A block number split over a descriptor's `_lo` and (64-byte descriptors) `_hi` fields.
fn descriptor_block(geo: &Geometry, desc: &[u8], lo: usize, hi: usize) -> u64 {
    let mut b = u64::from(le32(desc, lo));
    if geo.desc_size >= 64 {
        b |= u64::from(le32(desc, hi)) << 32;
    }
    b
}

fn group_free_count(geo: &Geometry, desc: &[u8]) -> u64 {
    let mut n = u64::from(le16(desc, GD_FREE_BLOCKS_LO));
    if geo.desc_size >= 64 {
        n |= u64::from(le16(desc, GD_FREE_BLOCKS_HI)) << 16;
    }
    n
}

/// Adds the free runs of an initialised group's bitmap; returns how many blocks are free.
fn bitmap_group_free(geo: &Geometry, g: u64, bitmap: &[u8], free: &mut FreeExtents) -> u64 {
    let base = geo.group_first_block(g);
    let n = geo.group_blocks(g);
    let mut count = 0;
    let mut run_start: Option<u64> = None;
    for i in 0..n {
        let used = bitmap[(i / 8) as usize] & (1 << (i % 8)) != 0;
        match (used, run_start) {
            (false, None) => run_start = Some(i),
            (true, Some(s)) => {
                free.insert(base + s, base + i);
                count += i - s;
                run_start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = run_start {
        free.insert(base + s, base + n);
        count += n - s;
    }
    count
}

/// A BLOCK_UNINIT group has no bitmap on disk: everything is free except its base
/// metadata and its own bitmaps and inode table where they lie inside it (what the
/// kernel's `ext4_init_block_bitmap` marks). Returns how many blocks are free.
fn uninit_group_free(geo: &Geometry, g: u64, desc: &[u8], free: &mut FreeExtents) -> u64 {
    let base = geo.group_first_block(g);
    let n = geo.group_blocks(g);
    let mut group = FreeExtents::new();
    group.insert(base + geo.base_meta_blocks(g).min(n), base + n);
    for (lo, hi, len) in [
        (GD_BLOCK_BITMAP_LO, GD_BLOCK_BITMAP_HI, 1),
        (GD_INODE_BITMAP_LO, GD_INODE_BITMAP_HI, 1),
        (GD_INODE_TABLE_LO, GD_INODE_TABLE_HI, geo.inode_table_blocks),
    ] {
        let at = descriptor_block(geo, desc, lo, hi);
        group.remove(at, at.saturating_add(len));
    }
    for r in group.iter() {
        free.insert(r.start, r.end);
    }
    group.total()
}
