//! Device models for trace replay (DESIGN.md "Device models").
//!
//! A [`Device`] serves one request at a time and says how long it took and why (seek,
//! rotation, transfer); queueing, scheduling and merging belong to the simulator. An
//! [`Array`] turns one logical request into the member I/Os it costs (RAID-0 split,
//! RAID-1 choice of copy, RAID-5 read-modify-write), in phases that run one after the
//! other.
//!
//! Models: [`hdd::Hdd`] (zoned geometry, seek curve or table, rotation as a function of
//! absolute time, transfer, read-ahead cache), [`ssd::Ssd`] (parallel flash elements, a
//! page-mapped FTL with greedy GC), arrays in [`array`], power in [`energy`], the seed 001
//! §2.5 formulas in [`analytic`]. [`parse_spec`] builds devices from a spec string such as
//! `raid5:5xhdd:cheetah15k5:stripe=128`; parameter files live in `crates/device/models/`.

pub mod analytic;
pub mod array;
pub mod cache;
pub mod energy;
pub mod geometry;
pub mod hdd;
mod least;
pub mod params;
pub mod seek;
pub mod spec;
pub mod ssd;

pub use array::Placement;
pub use hdd::Hdd;
pub use params::ModelError;
pub use spec::{parse_spec, Built, SpecError};
pub use ssd::Ssd;

/// One I/O at one device, in 512-byte sectors of that device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevRequest {
    pub sector: u64,
    pub sectors: u32,
    pub write: bool,
}

/// Where the time of one service went. All times in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Service {
    /// Total service time: the request's response on an idle device. Disk busy time
    /// adds these up, plus `background_ns`.
    pub total_ns: u64,
    pub overhead_ns: u64,
    pub seek_ns: u64,
    pub rotate_ns: u64,
    pub transfer_ns: u64,
    /// Media work the device did while idle before this request (a disk writing cached
    /// writes back): busy time, but not part of this request's service or response.
    pub background_ns: u64,
    /// Cylinders the head travelled, including for `background_ns` work (0 for SSDs).
    pub seek_cylinders: u64,
    /// Served from the on-board cache without touching the media.
    pub cache_hit: bool,
    /// A write taken into the on-board write-back cache: its media work comes later, as
    /// [`WriteBackWork`] of a later service (or of [`Device::drain`]).
    pub write_cached: bool,
}

/// Media work of one cached write written back, counted in the busy time of the last
/// service (or drain): who pays for it is the simulator's business, so the device says
/// which write it was. A write-back may run across two services (acknowledged writes
/// go on while the drive takes the next command); each service reports its part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteBackWork {
    /// The write as it waited in the cache (sequential writes appended into one).
    pub req: DevRequest,
    /// Of the service's busy time (`total_ns + background_ns`, or the drain's), the part
    /// this write-back took.
    pub busy_ns: u64,
    /// Its seeking and transferring (the power states of [`energy`]), reported once, with
    /// its first part.
    pub seek_ns: u64,
    pub transfer_ns: u64,
    /// Its last part: the write is on the media.
    pub done: bool,
}

/// What a device still does after its last request, e.g. a disk writing back the writes
/// waiting in its cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drain {
    /// Busy time that no [`Service`] reported.
    pub busy_ns: u64,
    /// When the device is done (no later than its last service if it had nothing left).
    pub end_ns: u64,
}

/// A device that serves one request at a time.
pub trait Device: Send {
    /// A short name for reports, e.g. "hdd:barracuda".
    fn name(&self) -> &str;
    /// Capacity in 512-byte sectors.
    fn capacity_sectors(&self) -> u64;
    /// Serves `req` starting at `start_ns` (the device is idle then) and moves the device's
    /// state (head position, spindle angle is a function of time, cache contents) to where
    /// the request leaves it.
    fn service(&mut self, start_ns: u64, req: &DevRequest) -> Service;
    /// Estimated service time of `req` if it started at `start_ns`, without changing state;
    /// used by schedulers (SSTF) and by RAID-1 to pick the copy that finishes first.
    fn estimate_ns(&self, start_ns: u64, req: &DevRequest) -> u64;
    /// A position key that orders requests the way the head sweeps (the cylinder for an
    /// HDD, the sector for others); C-LOOK and SSTF sort by it.
    fn position_key(&self, sector: u64) -> u64;
    /// The position key where the head is now.
    fn head_key(&self) -> u64;
    /// Commands the device holds at once (its own queue, behind the host's); 1: none.
    fn queue_depth(&self) -> usize {
        1
    }
    /// Whether every command it holds is in service at once, each waiting only for the
    /// parts it needs (flash elements), rather than one at a time in the order of
    /// shortest positioning time (a disk's queue).
    fn serves_in_parallel(&self) -> bool {
        false
    }
    /// Time before `req`'s data would start to move if it started at `start_ns` (seek
    /// plus rotational wait for a disk): what a drive's queue serves shortest first.
    fn positioning_ns(&self, start_ns: u64, req: &DevRequest) -> u64 {
        self.estimate_ns(start_ns, req)
    }
    /// The request of `reqs` with the shortest [`Device::positioning_ns`] from
    /// `start_ns`, ties to the earliest: what a drive's own queue serves next. `None`
    /// when `reqs` is empty. A model may skip requests it can show are no nearer, as
    /// long as the answer is the one this default gives.
    fn nearest(&self, start_ns: u64, reqs: &[DevRequest]) -> Option<usize> {
        (0..reqs.len()).min_by_key(|&i| (self.positioning_ns(start_ns, &reqs[i]), i))
    }
    /// Energy in joules spent over `elapsed_ns` of wall time, of which the services so far
    /// were busy; `None` when the model has no power figures.
    fn energy_j(&self, elapsed_ns: u64) -> Option<f64>;
    /// Finishes the work still pending after the last request (the replay calls it once
    /// at the end, and counts its busy time). Nothing by default.
    fn drain(&mut self) -> Drain {
        Drain::default()
    }
    /// Appends to `out` the write-backs of cached writes that the last `service` or
    /// `drain` counted in its busy time (nothing for a device without a write-back cache).
    fn take_write_backs(&mut self, out: &mut Vec<WriteBackWork>) {
        let _ = out;
    }
    /// The power figures behind [`Device::energy_j`], if any.
    fn power(&self) -> Option<energy::PowerModel> {
        None
    }
    /// The disk model behind this device, for placements that need its geometry (the
    /// tree layouts' semi-sequential placement); `None` for other devices.
    fn as_hdd(&self) -> Option<&Hdd> {
        None
    }
}

/// One member I/O of an array request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberIo {
    /// This I/O at this member.
    At { member: usize, req: DevRequest },
    /// The same data on any of these members (RAID-1 reads): the simulator sends it to
    /// the one that would finish first.
    AnyOf(Vec<(usize, DevRequest)>),
}

/// The member I/Os of one logical request: phases run in order, the I/Os of one phase in
/// parallel (RAID-5 small write: read old data and parity, then write both).
pub type Phases = Vec<Vec<MemberIo>>;

/// How logical sectors land on member devices.
pub trait Array: Send {
    fn name(&self) -> &str;
    /// Logical capacity in sectors.
    fn capacity_sectors(&self) -> u64;
    fn members(&self) -> usize;
    /// The member I/Os `req` costs.
    fn map(&self, req: &DevRequest) -> Phases;
    /// The explicit placement behind this array, for the layout optimizer to move blocks.
    fn as_placement_mut(&mut self) -> Option<&mut Placement> {
        None
    }
    fn as_placement(&self) -> Option<&Placement> {
        None
    }
}
