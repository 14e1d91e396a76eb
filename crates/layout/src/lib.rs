//! The layout core of reblock: units, the indirection map, the BOPT's regions and
//! segments, the I/O indirector (seed 001 Algorithm 5), plans (`plan.json`) and plan
//! diffs with ordered copy steps (seed 000 §3.3-§5, seed 001 §3.4-§3.5).
//!
//! No I/O happens here: the indirector says which physical extents a request becomes, a
//! diff, destage or flush-back says which copies to make in which order, and the caller
//! (the simulator or the online engine) performs them and reports each step back with
//! [`Indirector::apply`]. docs/layout.md describes the address spaces, the map's memory
//! layout, the mapping table of Algorithm 5, the destage policy, the plan.json schema
//! and the move ordering.
//!
//! ```
//! use reblock_layout::*;
//!
//! let geo = Geometry::new(&BoptConfig {
//!     data_sectors: 8 * 1000, bopt_pages: 64, segment_pages: 16,
//!     write_buffer_fraction: 0.25, ..BoptConfig::default()
//! }).unwrap();
//! let mut ind = Indirector::new(geo).unwrap();
//! let mut out = Vec::new();
//! // A write to two unmapped pages is absorbed by the write buffer (Algorithm 5 line 9).
//! let b = ind.indirect(IoRequest { op: Op::Write, sector: 80, sectors: 16 }, &mut out).unwrap();
//! assert_eq!(b, Branch::NoneMappedWriteAbsorbed);
//! assert_eq!(out.len(), 1);
//! assert_eq!(out[0].region, Region::Bopt);
//! ```

pub mod admission;
mod apply;
pub mod bopt;
pub mod copy;
pub mod diff;
pub mod execute;
pub mod indirector;
pub mod map;
pub mod piggyback;
pub mod plan;
pub mod schedule;
pub mod sealed;
pub mod units;

pub use admission::{Admission, Choice};
pub use bopt::{Area, BoptConfig, BoptPosition, Geometry, GeometryError, Region, Segments};
pub use copy::{CopyKind, CopyOp, PageRun, Step};
pub use diff::{diff, DiffOptions, DiffStats, Reconfiguration};
pub use execute::{read_sources, write_destinations, BatchIo, CopyDevice, RegionMove, Staged};
pub use indirector::{ApplyError, Branch, Indirector, IoRequest, Mode, Op, PhysIo, RequestError};
pub use map::{Map, MapError, SegmentEntry};
pub use piggyback::PendingIncoming;
pub use plan::{Plan, PlanError, PlanRange, PLAN_VERSION};
pub use schedule::{
    plan_order_requests, position_reads, CopyBatch, CopyRequest, CopySchedule, ExtentMove,
    Positioning, ScheduleOptions, POSITIONED_WINDOW,
};
pub use sealed::{SealError, SealKind};
pub use units::{Extent, PagePiece, PageSize, UnitError, DEFAULT_PAGE_SECTORS, SECTOR_BYTES};
