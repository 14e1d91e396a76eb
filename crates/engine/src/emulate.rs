//! A backing store that behaves like a modelled disk (`serve --emulate hdd:MODEL`): every
//! I/O the engine issues is served by the real store, then held until its completion
//! time on the named device model (reblock-device's service-time code: seek, rotation,
//! transfer, on-board cache), computed from where the I/O lands on that disk. The data
//! area and the optimized region are laid onto the one disk as `evaluate` lays them: the
//! region inserted inside the data area at a chosen position (`serve` puts it right
//! after the data area, where the image holds it), the data area's later part shifted
//! past it. Requests wait in the host queue the simulator uses (`reblock_sim`'s
//! [`Queue`] with the replay's default scheduler and merge limit: first come, first
//! served, and contiguous requests of one direction that wait together are merged into
//! one disk request, as the block layer does), and the disk serves them one at a time.
//! The sum of service times is the emulated busy time `status`
//! reports, so a layout's effect can be measured end to end on a machine without such a
//! disk.

use crate::format::Layout;
use crate::store::{Dev, Store};
use reblock_device::{DevRequest, Device};
use reblock_sim::scheduler::{Queue, NO_OP};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why emulation cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum EmulationError {
    #[error("--emulate {spec}: {source}")]
    Spec {
        spec: String,
        #[source]
        source: reblock_device::SpecError,
    },
    #[error("--emulate {0}: an array cannot be emulated; name one disk model (hdd:MODEL)")]
    Array(String),
    #[error(
        "--emulate {spec}: the image ({needed} sectors of data area and region) does not fit \
         the model's {capacity} sectors"
    )]
    TooBig {
        spec: String,
        needed: u64,
        capacity: u64,
    },
    #[error("--emulate: a region on a separate device cannot be emulated on one disk")]
    Separate,
    #[error("--emulate-speed {0}: must be a positive number")]
    Speed(f64),
}

/// Where the engine's two address spaces land on the emulated disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskPlacement {
    /// Data-area sector at which the region is inserted.
    pub region_at: u64,
    /// Sectors of the whole region (summaries, slots, superblocks).
    pub region_sectors: u64,
    /// Byte offset on the BOPT device where the region starts.
    pub region_offset_bytes: u64,
}

impl DiskPlacement {
    /// The region in the middle of the data area (page aligned), as `evaluate
    /// --bopt-at middle` places it.
    pub fn middle(layout: &Layout) -> DiskPlacement {
        let ps = u64::from(layout.page_bytes / 512).max(1);
        let data = layout.data_bytes / 512;
        DiskPlacement::at(layout, data / ps / 2 * ps)
    }

    /// The region inserted at data-area sector `at` (clamped to the data area).
    pub fn at(layout: &Layout, at: u64) -> DiskPlacement {
        DiskPlacement {
            region_at: at.min(layout.data_bytes / 512),
            region_sectors: (layout.device_bytes - layout.bopt_offset_bytes).div_ceil(512),
            region_offset_bytes: layout.bopt_offset_bytes,
        }
    }

    /// Sectors the disk must hold.
    pub fn sectors(&self, layout: &Layout) -> u64 {
        layout.data_bytes / 512 + self.region_sectors
    }

    /// The disk requests of `len` bytes at `offset` on `dev`: one, or two when a data
    /// run crosses the region.
    pub fn map(&self, dev: Dev, offset: u64, len: usize, write: bool, out: &mut Vec<DevRequest>) {
        let first = offset / 512;
        let end = (offset + len as u64).div_ceil(512);
        let req = |sector: u64, sectors: u64| DevRequest {
            sector,
            sectors: sectors.max(1) as u32,
            write,
        };
        match dev {
            Dev::Bopt => {
                let s = self.region_at + first.saturating_sub(self.region_offset_bytes / 512);
                out.push(req(s, end - first));
            }
            Dev::Data if end <= self.region_at => out.push(req(first, end - first)),
            Dev::Data if first >= self.region_at => {
                out.push(req(first + self.region_sectors, end - first))
            }
            Dev::Data => {
                out.push(req(first, self.region_at - first));
                out.push(req(
                    self.region_at + self.region_sectors,
                    end - self.region_at,
                ));
            }
        }
    }
}

/// Marks an op that still waits in the queue.
const QUEUED: u64 = u64::MAX;

/// The modelled disk, its host queue and when it is next free (emulated ns since start).
struct Disk {
    device: Box<dyn Device>,
    free_at_ns: u64,
    queue: Queue,
    /// Per op id: its completion time once the disk has taken it, else [`QUEUED`].
    done_ns: Vec<u64>,
    /// Op ids whose waiter has left, for reuse (the queue indexes by op id).
    spare_ops: Vec<u32>,
    busy_ns: u64,
    ios: u64,
}

impl Disk {
    fn new(device: Box<dyn Device>) -> Disk {
        // The simulator's host queue with the replay's defaults, so that `evaluate` and
        // the emulated drive serve the same requests the same way.
        let config = reblock_sim::Config::default();
        Disk {
            device,
            free_at_ns: 0,
            queue: Queue::new(config.scheduler, config.max_merge_sectors),
            done_ns: Vec::new(),
            spare_ops: Vec::new(),
            busy_ns: 0,
            ios: 0,
        }
    }

    /// Queues the disk requests of one I/O arriving at `now_ns`; returns their op ids.
    fn submit(&mut self, now_ns: u64, reqs: &[DevRequest]) -> Vec<u32> {
        self.advance(now_ns);
        // An idle disk starts the next request when it arrives.
        self.free_at_ns = self.free_at_ns.max(now_ns);
        let ops: Vec<u32> = reqs
            .iter()
            .map(|r| {
                let op = self.spare_ops.pop().unwrap_or(self.done_ns.len() as u32);
                if op as usize == self.done_ns.len() {
                    self.done_ns.push(QUEUED);
                }
                self.done_ns[op as usize] = QUEUED;
                self.queue.push(op, *r, &*self.device);
                op
            })
            .collect();
        self.advance(now_ns);
        ops
    }

    /// Serves queued requests the disk starts by `now_ns`: each starts when the one
    /// before it completes (it waited while the disk was busy).
    fn advance(&mut self, now_ns: u64) {
        while self.free_at_ns <= now_ns {
            let Some(q) = self.queue.pop(self.device.head_key()) else {
                break;
            };
            let s = self.device.service(self.free_at_ns, &q.req);
            self.busy_ns += s.total_ns + s.background_ns;
            self.ios += 1;
            self.free_at_ns += s.total_ns;
            let mut op = q.first_op;
            while op != NO_OP {
                self.done_ns[op as usize] = self.free_at_ns;
                op = self.queue.next_op(op);
            }
        }
    }

    /// When all of `ops` complete, once the disk has taken them (their ids are then
    /// given back); else `Err` with the time to look again.
    fn completion(&mut self, now_ns: u64, ops: &[u32]) -> Result<u64, u64> {
        self.advance(now_ns);
        let mut done = 0;
        for &op in ops {
            match self.done_ns[op as usize] {
                QUEUED => return Err(self.free_at_ns),
                t => done = done.max(t),
            }
        }
        self.spare_ops.extend_from_slice(ops);
        Ok(done)
    }
}

/// A [`Store`] that holds each I/O until its completion time on a disk model.
pub struct EmulatedStore {
    inner: Arc<dyn Store>,
    placement: DiskPlacement,
    disk: Mutex<Disk>,
    start: Instant,
    /// Emulated time runs this many times faster than the wall clock.
    speed: f64,
    /// Busy ns and disk requests so far, mirrored out of the lock for `status`.
    busy_ns: AtomicU64,
    ios: AtomicU64,
}

impl EmulatedStore {
    /// Emulates `spec` (e.g. `hdd:wd2500aaks`) under `inner`, with the engine's `layout`
    /// placed on the disk by `placement`; `speed` > 1 runs emulated time faster than real
    /// time (holds are shorter by that factor; busy time is in emulated seconds).
    pub fn new(
        inner: Arc<dyn Store>,
        spec: &str,
        layout: &Layout,
        placement: DiskPlacement,
        speed: f64,
    ) -> Result<EmulatedStore, EmulationError> {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(EmulationError::Speed(speed));
        }
        if layout.separate {
            return Err(EmulationError::Separate);
        }
        let built = reblock_device::parse_spec(spec).map_err(|source| EmulationError::Spec {
            spec: spec.to_string(),
            source,
        })?;
        let mut members = built.members;
        if members.len() != 1 {
            return Err(EmulationError::Array(spec.to_string()));
        }
        let device = members.remove(0);
        let needed = placement.sectors(layout);
        if needed > device.capacity_sectors() {
            return Err(EmulationError::TooBig {
                spec: spec.to_string(),
                needed,
                capacity: device.capacity_sectors(),
            });
        }
        Ok(EmulatedStore {
            inner,
            placement,
            disk: Mutex::new(Disk::new(device)),
            start: Instant::now(),
            speed,
            busy_ns: AtomicU64::new(0),
            ios: AtomicU64::new(0),
        })
    }

    /// Busy seconds of the emulated disk so far.
    pub fn busy_s(&self) -> f64 {
        self.busy_ns.load(Relaxed) as f64 / 1e9
    }

    /// Disk requests served so far.
    pub fn ios(&self) -> u64 {
        self.ios.load(Relaxed)
    }

    fn now_ns(&self) -> u64 {
        (self.start.elapsed().as_nanos() as f64 * self.speed) as u64
    }

    /// Queues the disk requests of one I/O on the model, and returns their op ids.
    fn submit(&self, dev: Dev, offset: u64, len: usize, write: bool) -> Vec<u32> {
        let mut reqs = Vec::with_capacity(2);
        self.placement.map(dev, offset, len, write, &mut reqs);
        let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        let ops = disk.submit(self.now_ns(), &reqs);
        self.publish(&disk);
        ops
    }

    /// Holds the caller until its requests `ops` have been served on the model.
    fn wait_for(&self, ops: &[u32]) {
        loop {
            let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
            let got = disk.completion(self.now_ns(), ops);
            self.publish(&disk);
            drop(disk);
            match got {
                Ok(done) => return self.hold_until(done),
                // The disk takes the next queued request when its current one is done.
                Err(next) => self.hold_until(next),
            }
        }
    }

    fn publish(&self, disk: &Disk) {
        self.busy_ns.store(disk.busy_ns, Relaxed);
        self.ios.store(disk.ios, Relaxed);
    }

    /// Writes the model's on-board cache out (what a cache flush makes a disk do),
    /// counting its busy time; returns when the disk is done.
    fn drain(&self) -> u64 {
        let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        let d = disk.device.drain();
        disk.busy_ns += d.busy_ns;
        disk.free_at_ns = disk.free_at_ns.max(d.end_ns);
        self.publish(&disk);
        disk.free_at_ns
    }

    /// Sleeps until emulated time `done_ns`.
    fn hold_until(&self, done_ns: u64) {
        let due = self.start + Duration::from_secs_f64(done_ns as f64 / 1e9 / self.speed);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

impl Store for EmulatedStore {
    fn read_at(&self, dev: Dev, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let ops = self.submit(dev, offset, buf.len(), false);
        let read = self.inner.read_at(dev, buf, offset);
        self.wait_for(&ops);
        read
    }
    fn write_at(&self, dev: Dev, buf: &[u8], offset: u64) -> io::Result<()> {
        let ops = self.submit(dev, offset, buf.len(), true);
        let written = self.inner.write_at(dev, buf, offset);
        self.wait_for(&ops);
        written
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        // A durable write needs the disk's cache written out, as a flush makes it do.
        let done = self.drain();
        self.inner.sync(dev)?;
        self.hold_until(done);
        Ok(())
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        self.inner.len(dev)
    }
    fn shared(&self) -> bool {
        self.inner.shared()
    }
    /// What the disk's cache still holds is counted when it is written out: in idle
    /// time, or at a flush (`reblock replay` ends with one). Reading the figure must not
    /// flush the cache: the re-planner polls `status` and would change what it measures.
    fn emulated_busy_s(&self) -> Option<f64> {
        Some(self.busy_s())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Data before the region stays put, data after it shifts past it, a run crossing
    /// it splits, and region offsets land inside it.
    #[test]
    fn data_and_region_land_on_one_disk_as_evaluate_lays_them() {
        let p = DiskPlacement {
            region_at: 1000,
            region_sectors: 100,
            region_offset_bytes: 1 << 20,
        };
        let mut out = Vec::new();
        p.map(Dev::Data, 8 * 512, 4096, false, &mut out);
        p.map(Dev::Data, 2000 * 512, 4096, true, &mut out);
        p.map(Dev::Data, 996 * 512, 4096, false, &mut out);
        p.map(Dev::Bopt, (1 << 20) + 10 * 512, 512, true, &mut out);
        let got: Vec<(u64, u32)> = out.iter().map(|r| (r.sector, r.sectors)).collect();
        assert_eq!(got, vec![(8, 8), (2100, 8), (996, 4), (1100, 4), (1010, 1)]);
        assert!(out[1].write && !out[0].write);
    }

    fn model() -> Box<dyn Device> {
        reblock_device::parse_spec("hdd:wd2500aaks")
            .unwrap()
            .members
            .remove(0)
    }

    fn read(sector: u64) -> DevRequest {
        DevRequest {
            sector,
            sectors: 8,
            write: false,
        }
    }

    /// Requests that wait while the disk is busy and continue one another are served as
    /// one disk request, as the simulator's queue serves them; one arriving at an idle
    /// disk starts at once, and each queued one starts when the one before it is done.
    #[test]
    fn contiguous_requests_that_wait_together_are_served_as_one() {
        let mut disk = Disk::new(model());
        let first = disk.submit(0, &[read(1_000_000)]);
        let busy_until = disk.completion(0, &first).unwrap();
        assert!(busy_until > 1_000_000, "a random read takes milliseconds");
        let a = disk.submit(10, &[read(2_000_000)]);
        let b = disk.submit(20, &[read(2_000_008)]);
        let c = disk.submit(30, &[read(2_000_016)]);
        assert_eq!(
            disk.completion(40, &a),
            Err(busy_until),
            "a waits for the disk"
        );
        let done = disk.completion(u64::MAX / 2, &a).unwrap();
        assert_eq!(disk.completion(u64::MAX / 2, &b), Ok(done));
        assert_eq!(disk.completion(u64::MAX / 2, &c), Ok(done));
        assert_eq!(disk.ios, 2, "three queued reads merged into one");
        assert!(done > busy_until);
        // Apart, the same three reads are three disk requests.
        let mut apart = Disk::new(model());
        for (i, sector) in [1_000_000, 2_000_000, 2_000_008, 2_000_016]
            .into_iter()
            .enumerate()
        {
            let t = i as u64 * 1_000_000_000;
            let ops = apart.submit(t, &[read(sector)]);
            assert!(
                apart.completion(t, &ops).is_ok(),
                "an idle disk starts at once"
            );
        }
        assert_eq!(apart.ios, 4);
        // Op ids are given back, so the table stays as large as the most ever waiting.
        assert!(disk.done_ns.len() <= 4 && apart.done_ns.len() == 1);
    }
}
