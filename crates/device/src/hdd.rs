//! The disk drive model (DESIGN.md "Device models"; seed 001 §2.5).
//!
//! A media access costs: command overhead; a seek from the head's cylinder (the seek
//! curve or measured table, plus settle), or a head switch when only the surface changes;
//! the rotational wait until the first sector comes under the head; then the transfer at
//! the zone's rate, with a head switch or one-cylinder seek (hidden by track/cylinder
//! skew) at each track boundary the request crosses.
//!
//! The spindle never stops: its angle is `(t mod T_rot) / T_rot` of absolute time, so the
//! rotational wait depends on when the seek ends. Semi-sequential accesses (seed 001
//! §2.3: the next block placed where the head lands after the seek) and track-aligned
//! accesses come out right, and a sequential request that arrives after the sector passed
//! waits most of a revolution (the Cheetah "sequential, no cache" case of the models
//! README, ~half a revolution on average).
//!
//! With the on-board cache ([`crate::cache`]) reads may hit read-ahead segments.
//!
//! Write caching (write-back): a write is acknowledged once it is in the cache, after the
//! command overhead, and waits there, with at most the cache's size of data waiting. The
//! media work is not skipped, only moved: whenever the drive is idle it writes the oldest
//! waiting write back (seek, rotation and transfer, timed like any media access), and a
//! write that finds the cache full waits until enough has been written back to make room
//! (its response grows to the media's pace). Every write-back counts as busy time, once:
//! inside the service of the request that waited for it, or, when it ran while the drive
//! was idle, in [`Service::background_ns`] of the next request (and in [`Device::drain`]
//! after the last one). A media access waits for a write-back in progress; a read of data
//! still waiting in the cache is a hit. Waits for the media are reported in `overhead_ns`.

use std::cell::{Cell, RefCell};

use crate::cache::Cache;
use crate::energy::{Activity, PowerModel};
use crate::geometry::{fract_of_positive, Geometry, Location};
use crate::least::least_cost;
use crate::params::{HddParams, LoadedModel, ModelParams, OverheadParams};
use crate::seek::SeekModel;
use crate::{DevRequest, Device, Drain, Service, WriteBackWork};

/// Rotational waits this close (ns) to a full turn are rounding noise around zero: a
/// request issued at the (rounded) end of the previous one must not lose a revolution.
const FULL_TURN_EPS_NS: f64 = 10.0;

#[derive(Clone, Debug)]
pub struct Hdd {
    name: String,
    geom: Geometry,
    seek: SeekModel,
    rot_ns: f64,
    head_switch_ns: f64,
    settle_ns: f64,
    write_settle_ns: f64,
    overheads: Overheads,
    /// Commands the drive's own queue holds (1: no queue).
    queue_depth: usize,
    /// Whether the last command served was a write (overheads depend on it).
    last_write: bool,
    cache: Option<Cache>,
    power: Option<PowerModel>,
    activity: Activity,
    cyl: u32,
    head: u32,
    /// (start, end) of the last write-back of a cached write.
    write_back: (f64, f64),
    /// The write of `write_back`, while part of it may still count in a later service.
    write_back_req: Option<DevRequest>,
    /// The write-backs the last service or drain counted ([`Device::take_write_backs`]).
    written_back: Vec<WriteBackWork>,
    /// The write-backs of the plan being served: (start, end, seek ns, transfer ns),
    /// oldest first (a buffer kept between services so that none allocates).
    spans: RefCell<Vec<(f64, f64, f64, f64)>>,
    /// End of the last service: busy time is counted up to here.
    served_until_ns: f64,
    places: Places,
    /// [`Device::nearest`]'s candidates (place and head move of each queued command),
    /// kept between calls so that a dispatch does not allocate.
    candidates: RefCell<Vec<(Location, (f64, u64))>>,
}

/// Where the first sectors of recent requests lie. A drive's queue times the same few
/// commands again at every dispatch (up to its depth), and its write cache orders the
/// same waiting writes again after every service; `Geometry::locate`, with its zone
/// search and divisions, was the model's largest cost (17 % of an evaluation). A
/// remembered place is the place `locate` gives, so no figure changes.
#[derive(Clone, Debug)]
struct Places([Cell<Option<(u64, Location)>>; PLACES]);

const PLACES: usize = 64;

impl Default for Places {
    fn default() -> Places {
        Places(std::array::from_fn(|_| Cell::new(None)))
    }
}

/// The slot of `sector` in [`Places`] (Fibonacci hashing: nearby sectors spread out).
#[inline]
fn places_slot(sector: u64) -> usize {
    (sector.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PLACES.trailing_zeros())) as usize
}

/// Controller time per command in ns, indexed `[write][hit][after write]`.
#[derive(Clone, Copy, Debug)]
struct Overheads([[[f64; 2]; 2]; 2]);

impl Overheads {
    fn from_params(p: &HddParams) -> Overheads {
        let o = p.overheads.unwrap_or_else(|| {
            let (read, write) = (p.overhead_read_ms, p.overhead_write_ms);
            let hit = p.cache.as_ref().map_or(read, |c| c.read_hit_overhead_ms);
            OverheadParams {
                read_hit_after_read_ms: hit,
                read_hit_after_write_ms: hit,
                read_miss_after_read_ms: read,
                read_miss_after_write_ms: read,
                write_hit_after_read_ms: write,
                write_hit_after_write_ms: write,
                write_miss_after_read_ms: write,
                write_miss_after_write_ms: write,
            }
        });
        Overheads(
            [
                [
                    [o.read_miss_after_read_ms, o.read_miss_after_write_ms],
                    [o.read_hit_after_read_ms, o.read_hit_after_write_ms],
                ],
                [
                    [o.write_miss_after_read_ms, o.write_miss_after_write_ms],
                    [o.write_hit_after_read_ms, o.write_hit_after_write_ms],
                ],
            ]
            .map(|a| a.map(|b| b.map(|ms| ms * 1e6))),
        )
    }

    #[inline]
    fn ns(&self, write: bool, hit: bool, after_write: bool) -> f64 {
        self.0[write as usize][hit as usize][after_write as usize]
    }
}

/// The timing of one media access.
#[derive(Clone, Copy, Debug, Default)]
struct Media {
    seek_ns: f64,
    rotate_ns: f64,
    transfer_ns: f64,
    end_ns: f64,
    cylinders: u64,
    end: (u32, u32),
    ns_per_sector: f64,
}

/// What serving a request will do, computed without changing the drive.
#[derive(Clone, Copy, Debug)]
enum Plan {
    /// A read served from the cache: a read-ahead segment, or data waiting to be written.
    Hit(Option<usize>),
    /// A media access starting at `start_ns`.
    Media { start_ns: f64, media: Media },
    /// A write taken into the cache (`absorbed`: it rewrites data still waiting there).
    Cached { absorbed: bool, appends: bool },
}

/// The write-backs of cached writes a service runs: in the idle time before it, and to
/// make room for a write. Computed without changing the drive.
#[derive(Clone, Copy, Debug, Default)]
struct WriteBacks {
    /// Whether to keep each write-back's span in [`Hdd::spans`] (a service, not an
    /// estimate).
    record: bool,
    /// How many of the oldest waiting writes, and their sectors.
    count: usize,
    sectors: u64,
    /// When the first of them started: the head leaves any read-ahead then.
    first_start_ns: Option<f64>,
    /// (start, end) of the last write-back started, this service or before.
    last: (f64, f64),
    /// Where the head is after them.
    head: (u32, u32),
    /// Their media time while the drive was idle: busy time outside the service.
    idle_ns: f64,
    seek_ns: f64,
    transfer_ns: f64,
    cylinders: u64,
}

/// Length of `[a, b)` within `[from, to)`.
#[inline]
fn overlap((a, b): (f64, f64), from: f64, to: f64) -> f64 {
    (b.min(to) - a.max(from)).max(0.0)
}

impl Hdd {
    /// Builds a drive from a loaded parameter file.
    pub fn new(model: &LoadedModel) -> Option<Hdd> {
        let ModelParams::Hdd(p) = &model.params else {
            return None;
        };
        Some(Self::from_params(p, &model.seek_points))
    }

    pub fn from_params(p: &HddParams, seek_points: &[(f64, f64)]) -> Hdd {
        let cylinders = p.zones.last().map_or(0, |z| z.last_cylinder + 1);
        let seek = SeekModel::new(&p.seek, seek_points, cylinders);
        let geom = Geometry::new(p, seek.seek_ns(1) / 1e6);
        let cache = p.cache.as_ref().filter(|c| c.enabled).map(|c| {
            let mut cache = Cache::new(c.segments, c.segment_sectors, c.write_caching);
            cache.flush_before_non_append = c.flush_before_non_append;
            if let Some(n) = c.write_segments {
                cache.dirty.set_max_writes(n as usize);
            }
            cache
        });
        Hdd {
            name: format!("hdd:{}", p.name),
            geom,
            seek,
            rot_ns: 60e9 / p.rpm,
            head_switch_ns: p.head_switch_ms * 1e6,
            settle_ns: p.settle_ms * 1e6,
            write_settle_ns: p.write_settle_ms * 1e6,
            overheads: Overheads::from_params(p),
            queue_depth: p.queue.as_ref().map_or(1, |q| q.depth as usize),
            last_write: false,
            cache,
            power: p.power.as_ref().map(PowerModel::from),
            activity: Activity::default(),
            cyl: 0,
            head: 0,
            write_back: (0.0, 0.0),
            write_back_req: None,
            written_back: Vec::new(),
            spans: RefCell::default(),
            served_until_ns: 0.0,
            places: Places::default(),
            candidates: RefCell::default(),
        }
    }

    /// Turns the on-board cache off (the "cache disabled" runs of the models README).
    pub fn without_cache(mut self) -> Hdd {
        self.cache = None;
        self
    }

    /// The same drive with write-back caching off (write-through): every write waits for
    /// the media, as a drive with its write cache disabled (WCE=0) does. Reads still use
    /// the cache and read-ahead.
    pub fn without_write_caching(mut self) -> Hdd {
        if let Some(c) = self.cache.as_mut() {
            c.write_caching = false;
        }
        self
    }

    pub fn has_cache(&self) -> bool {
        self.cache.is_some()
    }
    pub fn geometry(&self) -> &Geometry {
        &self.geom
    }
    pub fn seek_model(&self) -> &SeekModel {
        &self.seek
    }
    /// Command overhead of a read in ns: it passes before the seek starts, so placements
    /// that aim for a rotational position must count it.
    pub fn read_overhead_ns(&self) -> f64 {
        self.overheads.ns(false, false, false)
    }
    /// One revolution in ns.
    pub fn rotation_ns(&self) -> f64 {
        self.rot_ns
    }
    /// (cylinder, head) where the head is.
    pub fn head_position(&self) -> (u32, u32) {
        (self.cyl, self.head)
    }
    /// Puts the head at `sector`'s track (tests and warm starts).
    pub fn set_head(&mut self, sector: u64) {
        let l = self.geom.locate(sector);
        (self.cyl, self.head) = (l.cylinder, l.head);
    }

    /// Where `sector` lies ([`Geometry::locate`]), remembered for the next calls.
    #[inline]
    fn place(&self, sector: u64) -> Location {
        let slot = &self.places.0[places_slot(sector)];
        match slot.get() {
            Some((s, l)) if s == sector => l,
            _ => {
                let l = self.geom.locate(sector);
                slot.set(Some((sector, l)));
                l
            }
        }
    }

    /// Spindle angle at absolute time `t_ns`, in revolutions.
    #[inline]
    fn angle(&self, t_ns: f64) -> f64 {
        // `%` on f64 is a slow library fmod; the fractional part of turns is the same.
        fract_of_positive(t_ns / self.rot_ns)
    }

    /// Time until `angle` comes under the head at `t_ns`.
    #[inline]
    fn wait_for(&self, angle: f64, t_ns: f64) -> f64 {
        let w = turn_rem(angle - self.angle(t_ns)) * self.rot_ns;
        if w > self.rot_ns - FULL_TURN_EPS_NS {
            0.0
        } else {
            w
        }
    }

    /// Time to move from (`cyl`, `head`) to `to`: seek plus settle, or a head switch.
    #[inline]
    fn position_ns(&self, cyl: u32, head: u32, to: &Location) -> (f64, u64) {
        let d = cyl.abs_diff(to.cylinder);
        if d > 0 {
            (self.seek.seek_ns(d) + self.settle_ns, d as u64)
        } else if head != to.head {
            (self.head_switch_ns, 0)
        } else {
            (0.0, 0)
        }
    }

    /// Times a media access of `req` that starts at `t_ns` with the head at `from`.
    fn media(&self, t_ns: f64, from: (u32, u32), req: &DevRequest) -> Media {
        let loc = self.place(req.sector);
        let reach = self.reach_start(from, &loc, req.write);
        self.media_from(t_ns, reach, loc, req)
    }

    /// The head's move from `from` to `to`'s track before a media access (seek or head
    /// switch, and a write's settle) and the cylinders crossed: the first part of
    /// [`Hdd::media`]'s seek time, which the rest only adds to.
    #[inline]
    fn reach_start(&self, from: (u32, u32), to: &Location, write: bool) -> (f64, u64) {
        let (mut seek_ns, cylinders) = self.position_ns(from.0, from.1, to);
        if write {
            seek_ns += self.write_settle_ns;
        }
        (seek_ns, cylinders)
    }

    /// [`Hdd::media`] once the head's move (`reach_start`) and the first sector's place
    /// (`loc`) are known.
    fn media_from(
        &self,
        t_ns: f64,
        (mut seek_ns, cylinders): (f64, u64),
        mut loc: Location,
        req: &DevRequest,
    ) -> Media {
        let mut t = t_ns + seek_ns;
        let mut rotate_ns = self.wait_for(loc.angle, t);
        t += rotate_ns;
        let mut transfer_ns = 0.0;
        let mut sector = req.sector;
        let mut left = req.sectors as u64;
        loop {
            let spt = loc.sectors_per_track as u64;
            let n = left.min(spt - loc.sector as u64);
            let x = n as f64 * self.rot_ns / spt as f64;
            transfer_ns += x;
            t += x;
            left -= n;
            if left == 0 {
                break;
            }
            // Crossing a track boundary: the skew hides the switch when it is a plain
            // head switch or one-cylinder seek (seed 001 §2.3's track skew).
            sector += n;
            let next = self.geom.locate(sector);
            let (switch_ns, _) = self.position_ns(loc.cylinder, loc.head, &next);
            seek_ns += switch_ns;
            t += switch_ns;
            let w = self.wait_for(next.angle, t);
            rotate_ns += w;
            t += w;
            loc = next;
        }
        Media {
            seek_ns,
            rotate_ns,
            transfer_ns,
            end_ns: t,
            cylinders,
            end: (loc.cylinder, loc.head),
            ns_per_sector: self.rot_ns / loc.sectors_per_track as f64,
        }
    }

    /// Where the head is at `t_ns`: a running read-ahead may have carried it on.
    fn head_at(&self, t_ns: f64) -> (u32, u32) {
        match self.cache.as_ref().and_then(|c| c.reach_at(t_ns)) {
            Some(end) => {
                let l = self.place(end - 1);
                (l.cylinder, l.head)
            }
            None => (self.cyl, self.head),
        }
    }

    /// Adds the write-back of the next waiting write, started at `at_ns` or when the
    /// previous write-back ends, to `wb`; returns its (start, end).
    fn write_back_next(&self, wb: &mut WriteBacks, at_ns: f64, req: &DevRequest) -> (f64, f64) {
        let start = at_ns.max(wb.last.1);
        let from = if wb.count == 0 {
            self.head_at(start)
        } else {
            wb.head
        };
        let m = self.media(start, from, req);
        wb.count += 1;
        wb.sectors += req.sectors as u64;
        wb.first_start_ns.get_or_insert(start);
        wb.last = (start, m.end_ns);
        wb.head = m.end;
        wb.seek_ns += m.seek_ns;
        wb.transfer_ns += m.transfer_ns;
        wb.cylinders += m.cylinders;
        if wb.record {
            (self.spans.borrow_mut()).push((start, m.end_ns, m.seek_ns, m.transfer_ns));
        }
        wb.last
    }

    /// The write-backs the drive runs while idle before `start`: from the end of the last
    /// service, oldest first, each once the previous one is done.
    fn idle_write_backs(&self, start: f64, record: bool) -> WriteBacks {
        if record {
            self.spans.borrow_mut().clear();
        }
        let mut wb = WriteBacks {
            record,
            last: self.write_back,
            head: (self.cyl, self.head),
            // What a write-back in progress did past the end of the last service.
            idle_ns: overlap(self.write_back, self.served_until_ns, start),
            ..WriteBacks::default()
        };
        let Some(c) = self.cache.as_ref() else {
            return wb;
        };
        while let Some(w) = c.dirty.get(wb.count) {
            if wb.last.1.max(self.served_until_ns) >= start {
                break;
            }
            let span = self.write_back_next(&mut wb, self.served_until_ns, w);
            wb.idle_ns += overlap(span, self.served_until_ns, start);
        }
        wb
    }

    /// The service of `req` at `start_ns` and what it does, without changing the drive
    /// (`record`: keeping each write-back's span for [`Hdd::note_written_back`]).
    fn plan(&self, start_ns: u64, req: &DevRequest, record: bool) -> (Service, WriteBacks, Plan) {
        let start = start_ns as f64;
        let end_sector = req.sector + req.sectors as u64;
        let mut wb = self.idle_write_backs(start, record);
        let after_write = self.last_write;
        let mut overhead = self.overheads.ns(req.write, false, after_write);
        if let Some(c) = self.cache.as_ref() {
            let flushed = self.flush_before(c, req, start, &mut wb);
            // Cache work waits for a flush (its busy time belongs to this service) and
            // for the command overhead, whichever ends later.
            let flush_end = if flushed { wb.last.1 } else { start };
            let ready = |overhead: f64| (start + overhead).max(flush_end) - start;
            if !req.write {
                let hit_overhead = self.overheads.ns(false, true, after_write);
                if c.dirty.covers(req.sector, end_sector, wb.count) {
                    let s = service(ready(hit_overhead), 0.0, 0.0, 0.0, &wb, 0, true);
                    return (s, wb, Plan::Hit(None));
                }
                let found = c.find(req.sector, end_sector).filter(|&i| {
                    // A write-back started since took the head off the read-ahead.
                    match wb.first_start_ns {
                        Some(t) if c.is_pending(i) => end_sector <= c.segment(i).end_at(t),
                        _ => true,
                    }
                });
                if let Some(i) = found {
                    // A hit waits for read-ahead that has not reached its sectors yet.
                    let wait = (c.segment(i).ready_ns(end_sector) - start).max(0.0);
                    let s = service(ready(hit_overhead), 0.0, 0.0, wait, &wb, 0, true);
                    return (s, wb, Plan::Hit(Some(i)));
                }
            } else if c.write_caching && (req.sectors as u64) <= c.dirty.limit() {
                overhead = self.overheads.ns(true, true, after_write);
                let absorbed = c.dirty.covers(req.sector, end_sector, wb.count);
                let mut acked = start + ready(overhead);
                let mut appends = false;
                if !absorbed {
                    // Full: write back the oldest until this write fits.
                    let mut waiting = c.dirty.sectors() - wb.sectors;
                    let mut writes = c.dirty.len() - wb.count;
                    appends = writes > 0 && c.dirty.newest_end() == Some(req.sector);
                    while waiting + req.sectors as u64 > c.dirty.limit()
                        || (!appends && writes >= c.dirty.max_writes())
                    {
                        let w = c.dirty.get(wb.count).expect("waiting data to write back");
                        acked = self.write_back_next(&mut wb, start + overhead, w).1;
                        waiting -= w.sectors as u64;
                        writes -= 1;
                        appends &= writes > 0;
                    }
                }
                let mut s = service(acked - start, 0.0, 0.0, 0.0, &wb, 0, false);
                s.write_cached = true;
                return (s, wb, Plan::Cached { absorbed, appends });
            }
        }
        if let Some(c) = self.cache.as_ref().filter(|c| c.dirty.bounded()) {
            self.write_back_nearer(c, req, start + overhead, &mut wb);
        }
        // A media access waits for a write-back in progress.
        let media_start = (start + overhead).max(wb.last.1);
        let from = if wb.count > 0 {
            wb.head
        } else {
            self.head_at(media_start)
        };
        let media = self.media(media_start, from, req);
        let s = service(
            media_start - start,
            media.seek_ns,
            media.rotate_ns,
            media.transfer_ns,
            &wb,
            media.cylinders,
            false,
        );
        let plan = Plan::Media {
            start_ns: media_start,
            media,
        };
        (s, wb, plan)
    }

    /// Positioning time (seek and rotational wait) of `req` from `from` at `t_ns`.
    fn reach_ns(&self, t_ns: f64, from: (u32, u32), req: &DevRequest) -> f64 {
        let m = self.media(t_ns, from, req);
        m.seek_ns + m.rotate_ns
    }

    /// The drive schedules its waiting writes with its queue, nearest first: before the
    /// media access of `req` at `at_ns`, writes back each next waiting write that is
    /// nearer than `req` (the cached writes are kept in nearest-first order).
    fn write_back_nearer(&self, c: &Cache, req: &DevRequest, at_ns: f64, wb: &mut WriteBacks) {
        while let Some(w) = c.dirty.get(wb.count) {
            let t = at_ns.max(wb.last.1);
            let from = if wb.count > 0 {
                wb.head
            } else {
                self.head_at(t)
            };
            if self.reach_ns(t, from, w) >= self.reach_ns(t, from, req) {
                break;
            }
            self.write_back_next(wb, at_ns, w);
        }
    }

    /// Orders the waiting writes nearest first from where the head will be at the end of
    /// the last service (a greedy chain, each from where the previous leaves the head).
    fn order_write_backs(&mut self) {
        let Some(c) = self
            .cache
            .as_ref()
            .filter(|c| c.dirty.len() > 1 && c.dirty.bounded())
        else {
            return;
        };
        let mut left: Vec<(DevRequest, Location)> = (0..c.dirty.len())
            .filter_map(|i| c.dirty.get(i))
            .map(|w| (*w, self.place(w.sector)))
            .collect();
        let mut ordered = Vec::with_capacity(left.len());
        let mut reach = Vec::with_capacity(left.len());
        // The next write-back starts after the next command's overhead at the earliest.
        let next_overhead = self.overheads.ns(true, true, self.last_write);
        let mut t = self.write_back.1.max(self.served_until_ns + next_overhead);
        let mut from = (self.cyl, self.head);
        while !left.is_empty() {
            reach.clear();
            reach.extend(left.iter().map(|(w, l)| self.reach_start(from, l, w.write)));
            let (i, m) = least_cost(
                left.len(),
                |i| reach[i].0,
                f64::total_cmp,
                |i| {
                    let (w, l) = &left[i];
                    let m = self.media_from(t, reach[i], *l, w);
                    (m.seek_ns + m.rotate_ns, m)
                },
            )
            .expect("a write left");
            ordered.push(left.swap_remove(i).0);
            (t, from) = (m.end_ns, m.end);
        }
        if let Some(c) = self.cache.as_mut() {
            c.dirty.reorder(ordered);
        }
    }

    /// With DiskSim's "Fast write level 2", writes all cached writes to the media from
    /// `start` on unless `req` is a write appending to the newest of them.
    /// Returns whether it wrote any.
    fn flush_before(&self, c: &Cache, req: &DevRequest, start: f64, wb: &mut WriteBacks) -> bool {
        if !c.flush_before_non_append || (req.write && c.dirty.newest_end() == Some(req.sector)) {
            return false;
        }
        let before = wb.count;
        while let Some(w) = c.dirty.get(wb.count) {
            self.write_back_next(wb, start, w);
        }
        wb.count > before
    }

    /// Applies the write-backs of a plan.
    fn commit_write_backs(&mut self, wb: &WriteBacks) {
        self.write_back = wb.last;
        if wb.count == 0 {
            return;
        }
        if let Some(c) = self.cache.as_mut() {
            if let Some(t) = wb.first_start_ns {
                c.interrupt(t);
            }
            for _ in 0..wb.count {
                self.write_back_req = c.dirty.pop();
            }
        }
        (self.cyl, self.head) = wb.head;
        self.activity.seek_ns += wb.seek_ns as u64;
        self.activity.transfer_ns += wb.transfer_ns as u64;
    }

    fn commit(
        &mut self,
        start_ns: u64,
        req: &DevRequest,
        s: &Service,
        wb: &WriteBacks,
        plan: Plan,
    ) {
        self.commit_write_backs(wb);
        self.last_write = req.write;
        self.served_until_ns = (start_ns + s.total_ns) as f64;
        let end_sector = req.sector + req.sectors as u64;
        let capacity = self.geom.capacity_sectors();
        match plan {
            Plan::Hit(i) => {
                if let (Some(c), Some(i)) = (self.cache.as_mut(), i) {
                    c.touch(i);
                }
            }
            Plan::Cached { absorbed, appends } => {
                if let Some(c) = self.cache.as_mut() {
                    c.invalidate(req.sector, end_sector);
                    if appends {
                        c.dirty.append(*req);
                    } else if !absorbed {
                        c.dirty.push(*req);
                    }
                }
            }
            Plan::Media { start_ns, media } => {
                if let Some(c) = self.cache.as_mut() {
                    c.interrupt(start_ns);
                    if req.write {
                        c.invalidate(req.sector, end_sector);
                    } else {
                        c.fill(
                            req.sector,
                            end_sector,
                            media.end_ns,
                            media.ns_per_sector,
                            capacity,
                        );
                    }
                }
                (self.cyl, self.head) = media.end;
                self.activity.seek_ns += media.seek_ns as u64;
                self.activity.transfer_ns += media.transfer_ns as u64;
            }
        }
        self.order_write_backs();
    }

    /// Keeps, for [`Device::take_write_backs`], the part of each write-back the plan just
    /// made ([`Hdd::spans`]; and of one still running from before) that lies in the busy time of a service from
    /// `start` to `end`: the idle time since the last service, then the service itself.
    /// Called before the plan is committed (the dirty writes it writes back are still
    /// the oldest waiting).
    fn note_written_back(&mut self, start: f64, end: f64) {
        self.written_back.clear();
        let from = self.served_until_ns;
        let busy = |span: (f64, f64)| overlap(span, from, start) + overlap(span, start, end);
        if let Some(req) = self.write_back_req.filter(|_| self.write_back.1 > from) {
            self.written_back.push(WriteBackWork {
                req,
                busy_ns: busy(self.write_back).round() as u64,
                seek_ns: 0,
                transfer_ns: 0,
                done: self.write_back.1 <= end,
            });
        }
        let Some(c) = self.cache.as_ref() else {
            return;
        };
        for (i, &(a, b, seek, transfer)) in self.spans.borrow().iter().enumerate() {
            let req = *c.dirty.get(i).expect("a write-back of a waiting write");
            self.written_back.push(WriteBackWork {
                req,
                busy_ns: busy((a, b)).round() as u64,
                seek_ns: seek as u64,
                transfer_ns: transfer as u64,
                done: b <= end,
            });
        }
    }

    /// Cached writes waiting to be written back, in sectors.
    pub fn dirty_sectors(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.dirty.sectors())
    }

    /// The sector of track (`cyl`, `head`) that comes under the head first when a seek
    /// from `from_cyl` starts at `after_ns`: the next block of a semi-sequential access
    /// (seed 001 §2.6, DiskSim's `findSemiSequential`). `None` past the last track.
    pub fn find_semi_sequential(
        &self,
        after_ns: u64,
        from: (u32, u32),
        cyl: u32,
        head: u32,
    ) -> Option<u64> {
        let (first, spt) = self.geom.track_start(cyl, head)?;
        let to = self.geom.locate(first);
        let (move_ns, _) = self.position_ns(from.0, from.1, &to);
        let landing = self.angle(after_ns as f64 + move_ns);
        let index =
            ((landing - to.angle).rem_euclid(1.0) * spt as f64 - 1e-9).ceil() as u64 % spt as u64;
        Some(first + index)
    }
}

/// `x.rem_euclid(1.0)`, the part of a turn, for the differences of two angles in [0, 1)
/// that `wait_for` takes, without the library `fmod` call: for |x| < 1, `x % 1.0` is `x`
/// exactly, so the result is bit for bit `rem_euclid`'s.
#[inline]
fn turn_rem(x: f64) -> f64 {
    if x.abs() < 1.0 {
        if x < 0.0 {
            x + 1.0
        } else {
            x
        }
    } else {
        x.rem_euclid(1.0)
    }
}

/// A service's figures; the head travel of the write-backs it ran counts in its
/// `seek_cylinders`, their idle-time media work in its `background_ns`.
fn service(
    overhead: f64,
    seek: f64,
    rotate: f64,
    transfer: f64,
    wb: &WriteBacks,
    cylinders: u64,
    hit: bool,
) -> Service {
    let (o, s, r, t) = (
        overhead.round() as u64,
        seek.round() as u64,
        rotate.round() as u64,
        transfer.round() as u64,
    );
    Service {
        total_ns: o + s + r + t,
        overhead_ns: o,
        seek_ns: s,
        rotate_ns: r,
        transfer_ns: t,
        background_ns: wb.idle_ns.round() as u64,
        seek_cylinders: cylinders + wb.cylinders,
        cache_hit: hit,
        write_cached: false,
    }
}

impl Device for Hdd {
    fn name(&self) -> &str {
        &self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.geom.capacity_sectors()
    }
    fn service(&mut self, start_ns: u64, req: &DevRequest) -> Service {
        let (s, wb, plan) = self.plan(start_ns, req, true);
        let start = start_ns as f64;
        self.note_written_back(start, start + s.total_ns as f64);
        self.commit(start_ns, req, &s, &wb, plan);
        s
    }
    fn estimate_ns(&self, start_ns: u64, req: &DevRequest) -> u64 {
        self.plan(start_ns, req, false).0.total_ns
    }
    fn position_key(&self, sector: u64) -> u64 {
        self.place(sector).cylinder as u64
    }
    fn head_key(&self) -> u64 {
        self.cyl as u64
    }
    fn queue_depth(&self) -> usize {
        self.queue_depth
    }
    /// Seek and rotational wait from where the head is at `start_ns`, whatever the cache
    /// holds: DiskSim's drive queue (SPTF, "Scheduling policy = 8") estimates each
    /// command mechanically, without looking in the cache, so a write the cache would
    /// take at once is not served ahead of the reads.
    fn positioning_ns(&self, start_ns: u64, req: &DevRequest) -> u64 {
        let t = start_ns as f64;
        self.reach_ns(t, self.head_at(t), req).round() as u64
    }
    /// [`Device::positioning_ns`]'s choice, timing in full only the commands whose seek
    /// alone is not already longer than the best positioning found.
    fn nearest(&self, start_ns: u64, reqs: &[DevRequest]) -> Option<usize> {
        let t = start_ns as f64;
        let from = self.head_at(t);
        let mut places = self.candidates.borrow_mut();
        places.clear();
        places.extend(reqs.iter().map(|r| {
            let l = self.place(r.sector);
            (l, self.reach_start(from, &l, r.write))
        }));
        let floor = |i: usize| places[i].1 .0.round() as u64;
        let best = least_cost(reqs.len(), floor, u64::cmp, |i| {
            let m = self.media_from(t, places[i].1, places[i].0, &reqs[i]);
            ((m.seek_ns + m.rotate_ns).round() as u64, ())
        });
        best.map(|b| b.0)
    }
    fn energy_j(&self, elapsed_ns: u64) -> Option<f64> {
        self.power.map(|p| p.energy_j(elapsed_ns, self.activity))
    }
    fn as_hdd(&self) -> Option<&Hdd> {
        Some(self)
    }
    fn take_write_backs(&mut self, out: &mut Vec<WriteBackWork>) {
        out.append(&mut self.written_back);
    }
    fn power(&self) -> Option<PowerModel> {
        self.power
    }
    /// Writes back everything still waiting in the cache, as the idle drive does after
    /// its last request.
    fn drain(&mut self) -> Drain {
        let mut wb = self.idle_write_backs(f64::INFINITY, true);
        self.note_written_back(f64::INFINITY, f64::INFINITY);
        // Both parts of a write-back in progress: `idle_write_backs` counts what ran after
        // the last service up to its own end.
        let busy = wb.idle_ns;
        wb.idle_ns = 0.0;
        self.commit_write_backs(&wb);
        let end = self.write_back.1.max(self.served_until_ns);
        self.served_until_ns = end;
        Drain {
            busy_ns: busy.round() as u64,
            end_ns: end.round() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::turn_rem;

    #[test]
    fn turn_rem_is_rem_euclid_bit_for_bit() {
        let mut probes = vec![0.0, -0.0, 0.5, -0.5, 0.999_999, -0.999_999, 1.0, -1.0, 2.5];
        let mut x = 0.1f64;
        for _ in 0..10_000 {
            x = (x * 1.618_033_988 + 0.271_828).fract();
            probes.push(x - 0.5 * (x * 7.0).fract());
            probes.push(-x);
        }
        probes.extend([f64::NAN, f64::INFINITY, 3.7e15]);
        for x in probes {
            assert_eq!(turn_rem(x).to_bits(), x.rem_euclid(1.0).to_bits(), "{x}");
        }
    }
}
