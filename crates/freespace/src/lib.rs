//! Free-space knowledge: which parts of a block device hold no live data.
//!
//! FS2 (dynamic replication in free disk space, see docs/references.md) keeps copies of hot
//! blocks in the disk's free space. It needed a modified file system to learn which blocks
//! are free; reblock works at the block layer and learns it without touching the file
//! system, from three sources that all produce the same [`FreeExtents`]:
//!
//! - TRIM / discard requests (online: NBD TRIM and WRITE_ZEROES; offline: the discards a
//!   trace holds);
//! - an ext4 image's group descriptors and block bitmaps ([`ext4`]);
//! - an assumption stated by the user for offline evaluation (pages a trace never touches,
//!   or a fraction of the device).
//!
//! One component serves the simulator and the engine, so a replica placed offline is placed
//! the way the engine would place it.

pub mod ext4;
pub mod extents;
pub mod replica;

pub use ext4::{read_ext4_free, Ext4Error, Ext4Free};
pub use extents::FreeExtents;
pub use replica::{
    closest_whole_copy, hot_area, replica_candidates, MarkVerdict, Replica, ReplicaSet,
    ReplicaState, ServedRun, Watermarks,
};
