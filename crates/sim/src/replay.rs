//! The event-driven replay core: arrivals (open loop at the trace's pace sped up, or a
//! closed loop holding N requests outstanding), per-member queues and schedulers, array
//! requests split into phases of member I/Os, and the metrics of every completion.
//!
//! Memory is bounded by the requests outstanding, never by the trace's length: the
//! source is pulled one submission at a time and completed requests are freed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use reblock_device::energy::PowerModel;
use reblock_device::{Array, DevRequest, Device, MemberIo, Service, WriteBackWork};
use slab::Slab;

use crate::error::SimError;
use crate::mapper::{Identity, Mapper};
use crate::metrics::{Metrics, Phase, Report, Window};
use crate::purpose::{split_by, CachedPurposes, Purpose};
use crate::scheduler::{Queue, Queued, SchedulerKind, NO_OP, OWN_OP};
use crate::source::{Source, Submission};

/// When requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// At the trace's timestamps divided by `speed` (seed 000 §6.1 replays at 168x);
    /// 1 is real time. Arrivals never wait for completions.
    Open { speed: f64 },
    /// `depth` requests outstanding at all times, timestamps ignored.
    Closed { depth: usize },
}

#[derive(Clone, Debug)]
pub struct Config {
    pub pacing: Pacing,
    pub scheduler: SchedulerKind,
    /// Largest merged request in sectors; 0 disables merging.
    pub max_merge_sectors: u32,
    pub window: Option<Window>,
    /// Fold addresses beyond the capacity back modulo the capacity instead of failing.
    pub wrap: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            pacing: Pacing::Open { speed: 1.0 },
            scheduler: SchedulerKind::Fcfs,
            max_merge_sectors: 256,
            window: None,
            wrap: false,
        }
    }
}

/// [`Logical::number`] of a request whose number is kept in [`Replay::far_numbers`].
const FAR_NUMBER: u32 = u32::MAX;

/// One logical request, completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub number: u64,
    pub phase: Phase,
    pub write: bool,
    /// Where it was served (after `--wrap`), in the array's logical space.
    pub sector: u64,
    pub sectors: u32,
    /// The trace's device number.
    pub trace_device: u32,
    /// The first member that served any of it.
    pub member: u32,
    pub arrival_ns: u64,
    /// When its first device I/O started.
    pub start_ns: u64,
    /// When it responded: its last device I/O, but for extents that go on behind it
    /// (a replica written from its data, [`crate::Purpose::holds_response`]).
    pub completion_ns: u64,
    /// Its share of the service time of the device I/Os that served it (a merged I/O's
    /// time is shared by sectors), those that went on behind it included.
    pub service_ns: u64,
}

/// Receives every completed request (per-request output, progress).
pub trait Observer {
    fn on_completion(&mut self, c: &Completion) -> Result<(), SimError>;
}

impl Observer for () {
    fn on_completion(&mut self, _c: &Completion) -> Result<(), SimError> {
        Ok(())
    }
}

/// One logical request, from its arrival to its completion. Only what its completion
/// reports is kept (32 bytes; what its service adds is in [`Started`] from its first
/// I/O on; its trace device is an index into [`Replay::devices`], its number is kept
/// from the first one's, its window is found from its arrival or, for windows of a
/// count of requests, kept beside it): an open-loop replay of a fast trace holds a
/// whole phase of these at once (docs/scale.md).
struct Logical {
    /// Its number minus [`Replay::first_number`], or [`FAR_NUMBER`] when that does not
    /// fit (the number is then in [`Replay::far_numbers`]).
    number: u32,
    arrival_ns: u64,
    /// Where it is served (after `--wrap`).
    sector: u64,
    sectors: u32,
    write: bool,
    /// The trace's device number, as its index in [`Replay::devices`].
    device: u16,
    /// What it still waits for: its extents of several phases not finished yet, and the
    /// member I/Os not done yet of its extents of one phase when all its extents are
    /// client data (these have no [`Extent`] record: see [`OWN_EXTENT`]).
    left: u32,
    phase: Phase,
}

/// A logical request's service so far, from when its first device I/O started: kept
/// beside the [`Logical`]s because only the few requests in service need it.
struct Started {
    start_ns: u64,
    /// Its share of the service time of the device I/Os done so far.
    service_ns: u64,
    /// The first member that served any of it.
    member: u32,
}

/// One physical extent of a logical request, working through its array phases.
struct Extent {
    logical: u32,
    phase: u32,
    left: u32,
    /// Its phases; freed once the last one is issued.
    phases: reblock_device::Phases,
    /// What it is for: whether it holds its request's response back.
    purpose: Purpose,
}

/// A logical request some of whose extents go on behind it (a read whose data is also
/// written to replicas, [`Purpose::holds_response`]): it responds once the others are
/// done and is freed once all are (its service time then includes the rest).
struct Foreground {
    /// Its extents that hold its response, not done yet.
    holding: u32,
    responded_ns: Option<u64>,
}

/// Set in [`Op::extent`] when the op's extent has one phase and every extent of its request
/// is client data: the rest of the field is then the logical request's id, and no
/// [`Extent`] is kept (a request with a replica write keeps a record per extent, which
/// carries its purpose and whether it holds the response; the common case: one
/// request, one disk; and each piece of a request an indirected layout splits, whose
/// records were 40 bytes each beside the queue of a phase replay).
const OWN_EXTENT: u32 = 1 << 31;

struct Op {
    /// The [`Extent`] id, or [`OWN_EXTENT`] and the logical request's id.
    extent: u32,
    sectors: u32,
    /// When it joined its member's queue: the start of its per-device response time.
    queued_ns: u64,
}

/// Member I/Os by id: 16 bytes each (a slab's entry for one is 24) and the ids freed.
#[derive(Default)]
struct Ops {
    ops: Vec<Op>,
    free: Vec<u32>,
}

impl Ops {
    fn insert(&mut self, op: Op) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.ops[id as usize] = op;
                id
            }
            None => {
                self.ops.push(op);
                u32::try_from(self.ops.len() - 1).expect("fewer than 2^32 member I/Os queued")
            }
        }
    }

    fn get(&self, id: u32) -> &Op {
        &self.ops[id as usize]
    }

    fn remove(&mut self, id: u32) {
        self.free.push(id);
    }
}

struct InService {
    io: Queued,
    total_ns: u64,
    done_ns: u64,
}

struct Member {
    dev: Box<dyn Device>,
    /// The host's queue (the configured scheduler).
    queue: Queue,
    /// The device's own queue: commands taken from the host's queue, up to the device's
    /// depth, served shortest positioning time first (unused by parallel devices).
    drive: Vec<Queued>,
    /// The requests of `drive`, in order (a reused buffer for [`Device::nearest`]).
    drive_reqs: Vec<DevRequest>,
    depth: usize,
    parallel: bool,
    /// Whether it is its array's only member, so that its sectors are the array's
    /// logical ones and the mapper may choose a read's copy at dispatch.
    sole: bool,
    /// I/Os in service: at most one, or up to `depth` on a parallel device.
    in_service: Slab<InService>,
    /// End of the busy period so far (busy time of a parallel device is the union of
    /// its I/Os' service intervals).
    busy_until_ns: u64,
    prev_end: Option<u64>,
    dirty: bool,
    served_ns: u64,
    served_ios: u64,
    /// Its model's power figures (energy above idle by purpose).
    power: Option<PowerModel>,
    /// Sectors waiting in its write-back cache that are not client data.
    cached: CachedPurposes,
}

impl Member {
    /// Expected wait before a request needing `est_ns` could start: the rest of the
    /// current service plus the queue, each queued I/O counted at this member's mean
    /// service time so far (or at `est_ns` before it has served anything).
    fn backlog_ns(&self, now_ns: u64, est_ns: u64) -> u64 {
        let rest = self
            .in_service
            .iter()
            .map(|(_, b)| b.done_ns - now_ns)
            .max()
            .unwrap_or(0);
        let per_io = self
            .served_ns
            .checked_div(self.served_ios)
            .unwrap_or(est_ns);
        let waiting = (self.queue.len() + self.drive.len()) as u64;
        rest + per_io * waiting / self.depth.max(1) as u64
    }
}

/// Builds the array and member devices for one device of the trace.
pub type DeviceFactory = Box<dyn FnMut() -> (Box<dyn Array>, Vec<Box<dyn Device>>) + Send>;

/// One array of members serving one device of the trace (or the whole trace).
struct Group {
    array: Box<dyn Array>,
    /// Index of its first member in `Replay::members`.
    first_member: usize,
}

/// A replay of submissions on an array of modelled devices.
pub struct Replay {
    groups: Vec<Group>,
    /// With a factory: one group per trace device, made when the device first appears.
    factory: Option<DeviceFactory>,
    /// Trace device -> group (per-device replays only).
    group_of: rustc_hash::FxHashMap<u32, usize>,
    members: Vec<Member>,
    mapper: Box<dyn Mapper>,
    config: Config,
    logical: Slab<Logical>,
    /// The trace device numbers of the logical requests so far ([`Logical::device`]),
    /// each with its member group: looked up once, on the device's first request.
    devices: Vec<(u32, usize)>,
    /// The index in `devices` of each device number.
    device_index: rustc_hash::FxHashMap<u32, u16>,
    /// The number of the first request admitted: [`Logical::number`] counts from it.
    first_number: Option<u64>,
    /// The numbers too far from the first one for [`Logical::number`], by logical id.
    far_numbers: rustc_hash::FxHashMap<u32, u64>,
    /// With windows of a count of requests: each logical request's window, by id.
    counted_windows: rustc_hash::FxHashMap<u32, u32>,
    /// The logical requests in service, by id.
    started: rustc_hash::FxHashMap<u32, Started>,
    extents: Slab<Extent>,
    ops: Ops,
    /// Device completions: (time, member, slot in the member's `in_service`).
    events: BinaryHeap<Reverse<(u64, usize, usize)>>,
    dirty: Vec<usize>,
    metrics: Metrics,
    ts0_ns: Option<u64>,
    last_arrival_ns: u64,
    last_completion_ns: u64,
    admitted: u64,
    /// Closed loop: completions not yet replaced by a new submission.
    refill: usize,
    scratch: Vec<DevRequest>,
    /// The purposes of `scratch`'s extents.
    purposes: Vec<Purpose>,
    /// The write-backs a service reported (a reused buffer).
    written_back: Vec<WriteBackWork>,
    /// Requests with extents that go on behind them, by logical id.
    foreground: rustc_hash::FxHashMap<u32, Foreground>,
    /// Extents in flight that are not client data: while there are none, every I/O's
    /// time is the client's without looking at its requests.
    tagged_extents: usize,
}

impl Replay {
    /// A replay of `array` over `devices` (its members, in member order).
    pub fn new(
        array: Box<dyn Array>,
        devices: Vec<Box<dyn Device>>,
        config: Config,
    ) -> Result<Replay, SimError> {
        if devices.len() != array.members() {
            return Err(SimError::Config(format!(
                "array {} has {} members but {} devices were given",
                array.name(),
                array.members(),
                devices.len()
            )));
        }
        match config.pacing {
            Pacing::Open { speed } if !(speed.is_finite() && speed > 0.0) => {
                return Err(SimError::Config(format!(
                    "speed must be a positive number, not {speed}"
                )))
            }
            Pacing::Closed { depth: 0 } => {
                return Err(SimError::Config("queue depth must be at least 1".into()))
            }
            _ => {}
        }
        let mut replay = Replay {
            groups: Vec::new(),
            factory: None,
            group_of: Default::default(),
            members: Vec::new(),
            mapper: Box::new(Identity),
            metrics: Metrics::new(config.window),
            config,
            logical: Slab::new(),
            devices: Vec::new(),
            device_index: Default::default(),
            first_number: None,
            far_numbers: Default::default(),
            counted_windows: Default::default(),
            started: Default::default(),
            extents: Slab::new(),
            ops: Ops::default(),
            events: BinaryHeap::new(),
            dirty: Vec::new(),
            ts0_ns: None,
            last_arrival_ns: 0,
            last_completion_ns: 0,
            admitted: 0,
            refill: 0,
            scratch: Vec::new(),
            purposes: Vec::new(),
            written_back: Vec::new(),
            foreground: Default::default(),
            tagged_extents: 0,
        };
        replay.add_group(array, devices, None);
        Ok(replay)
    }

    /// A replay that gives every device of the trace (its device column) its own array,
    /// made by `factory` when the device first appears: no device's requests ever land
    /// on another's model. The report has per-device figures and the total.
    pub fn per_trace_device(factory: DeviceFactory, config: Config) -> Result<Replay, SimError> {
        let mut factory = factory;
        let (array, devices) = factory();
        let mut replay = Replay::new(array, devices, config)?;
        // The first group is only a template until a device claims it.
        replay.groups.clear();
        replay.members.clear();
        replay.metrics = Metrics::new(replay.config.window);
        replay.factory = Some(factory);
        Ok(replay)
    }

    /// Adds an array and its members (for `trace_device`, if per device).
    fn add_group(
        &mut self,
        array: Box<dyn Array>,
        devices: Vec<Box<dyn Device>>,
        trace_device: Option<u32>,
    ) -> usize {
        let first_member = self.members.len();
        let group = self.groups.len();
        let sole = array.members() == 1;
        self.groups.push(Group {
            array,
            first_member,
        });
        for dev in devices {
            self.metrics
                .add_device(dev.name().to_string(), trace_device, group);
            let power = dev.power();
            self.metrics.all_powered &= power.is_some();
            self.members.push(Member {
                power,
                cached: CachedPurposes::default(),
                depth: dev.queue_depth().max(1),
                parallel: dev.serves_in_parallel(),
                sole,
                dev,
                queue: Queue::new(self.config.scheduler, self.config.max_merge_sectors),
                drive: Vec::new(),
                drive_reqs: Vec::new(),
                in_service: Slab::new(),
                busy_until_ns: 0,
                prev_end: None,
                dirty: false,
                served_ns: 0,
                served_ios: 0,
            });
        }
        group
    }

    /// The group serving trace device `device`, made on its first request.
    fn group_for(&mut self, device: u32) -> usize {
        let Some(factory) = self.factory.as_mut() else {
            return 0;
        };
        if let Some(&g) = self.group_of.get(&device) {
            return g;
        }
        let (array, devices) = factory();
        let g = self.add_group(array, devices, Some(device));
        self.group_of.insert(device, g);
        g
    }

    /// Replaces the identity layout with `mapper` (e.g. the layout's indirector).
    pub fn with_mapper(mut self, mapper: Box<dyn Mapper>) -> Replay {
        self.mapper = mapper;
        self
    }

    /// Replays every submission of `source`, telling `observer` of each completion, and
    /// returns the metrics.
    pub fn run(
        mut self,
        source: &mut dyn Source,
        observer: &mut dyn Observer,
    ) -> Result<Report, SimError> {
        match self.config.pacing {
            Pacing::Open { speed } => self.run_open(speed, source, observer)?,
            Pacing::Closed { depth } => self.run_closed(depth, source, observer)?,
        }
        if self.members.is_empty() {
            // Nothing arrived: report the template's devices, idle.
            if let Some(mut factory) = self.factory.take() {
                let (array, devices) = factory();
                self.add_group(array, devices, None);
            }
        }
        let makespan_ns = self.last_completion_ns;
        let merged = self.members.iter().map(|m| m.queue.merges()).sum();
        // Work the devices still owe (a disk's write-back cache emptying) is busy time
        // too; each device's energy covers it.
        let mut energy = Vec::with_capacity(self.members.len());
        for i in 0..self.members.len() {
            let drain = self.members[i].dev.drain();
            self.metrics.record_drain(i, drain);
            self.account_write_backs(i, drain.busy_ns);
            energy.push(self.members[i].dev.energy_j(makespan_ns.max(drain.end_ns)));
        }
        Ok(self.metrics.report(makespan_ns, merged, energy))
    }

    fn run_open(
        &mut self,
        speed: f64,
        source: &mut dyn Source,
        observer: &mut dyn Observer,
    ) -> Result<(), SimError> {
        let mut next = self.pull_open(speed, source)?;
        loop {
            let t_dev = self.events.peek().map(|Reverse((t, _, _))| *t);
            let t_arr = next.as_ref().map(|(t, _)| *t);
            let now_ns = match (t_dev, t_arr) {
                (Some(d), Some(a)) => d.min(a),
                (Some(t), None) | (None, Some(t)) => t,
                (None, None) => return Ok(()),
            };
            self.complete_at(now_ns, observer)?;
            // Everything arriving at the same instant is queued before any dispatch, so
            // the scheduler sees the whole batch.
            while let Some((at_ns, sub)) = next.take_if(|(at, _)| *at == now_ns) {
                self.admit(sub, at_ns, observer)?;
                next = self.pull_open(speed, source)?;
            }
            self.dispatch_dirty(now_ns);
        }
    }

    /// The next submission and its arrival: trace time since the first request divided
    /// by the speed-up, never before the previous arrival (traces are not always sorted).
    fn pull_open(
        &mut self,
        speed: f64,
        source: &mut dyn Source,
    ) -> Result<Option<(u64, Submission)>, SimError> {
        let Some(sub) = source.next_submission()? else {
            return Ok(None);
        };
        let ts0 = *self.ts0_ns.get_or_insert(sub.ts_ns);
        let at_ns = (sub.ts_ns.saturating_sub(ts0) as f64 / speed) as u64;
        self.last_arrival_ns = self.last_arrival_ns.max(at_ns);
        Ok(Some((self.last_arrival_ns, sub)))
    }

    fn run_closed(
        &mut self,
        depth: usize,
        source: &mut dyn Source,
        observer: &mut dyn Observer,
    ) -> Result<(), SimError> {
        self.refill = depth;
        let mut now_ns = 0;
        loop {
            while self.refill > 0 {
                let Some(sub) = source.next_submission()? else {
                    self.refill = 0;
                    break;
                };
                self.refill -= 1;
                self.admit(sub, now_ns, observer)?;
            }
            self.dispatch_dirty(now_ns);
            let Some(&Reverse((t, _, _))) = self.events.peek() else {
                return Ok(());
            };
            now_ns = t;
            self.complete_at(now_ns, observer)?;
        }
    }

    /// Completes every device I/O finishing at `now_ns`.
    fn complete_at(&mut self, now_ns: u64, observer: &mut dyn Observer) -> Result<(), SimError> {
        while let Some(&Reverse((t, member, slot))) = self.events.peek() {
            if t != now_ns {
                break;
            }
            self.events.pop();
            self.complete_io(member, slot, now_ns, observer)?;
        }
        Ok(())
    }

    /// Where `sub` is served: as addressed, or folded modulo the capacity with `--wrap`.
    fn place(&self, group: usize, sub: &Submission) -> Result<DevRequest, SimError> {
        let cap = self.groups[group].array.capacity_sectors();
        let r = sub.req;
        let end = r.sector.checked_add(u64::from(r.sectors));
        if end.is_some_and(|e| e <= cap) {
            return Ok(r);
        }
        if !self.config.wrap {
            return Err(SimError::BeyondCapacity {
                number: sub.number,
                sector: r.sector,
                end_sector: r.sector.saturating_add(u64::from(r.sectors)),
                capacity_sectors: cap,
            });
        }
        let n = u64::from(r.sectors);
        if n > cap {
            return Err(SimError::LargerThanDevice {
                number: sub.number,
                sectors: r.sectors,
                capacity_sectors: cap,
            });
        }
        // A request straddling the end is moved back whole rather than split: a split
        // would invent a seek the workload never made.
        let sector = (r.sector % cap).min(cap - n);
        Ok(DevRequest { sector, ..r })
    }
}

impl Replay {
    /// A submission arrives at `now_ns`: map it to extents and issue their first phases.
    fn admit(
        &mut self,
        sub: Submission,
        now_ns: u64,
        observer: &mut dyn Observer,
    ) -> Result<(), SimError> {
        let (device, group) = self.device_index_of(sub.device)?;
        let req = self.place(group, &sub)?;
        let window = self.metrics.window_of(now_ns, self.admitted);
        self.admitted += 1;
        let first = *self.first_number.get_or_insert(sub.number);
        let number = (sub.number.checked_sub(first))
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n != FAR_NUMBER)
            .unwrap_or(FAR_NUMBER);
        let lid = self.logical.insert(Logical {
            number,
            arrival_ns: now_ns,
            sector: req.sector,
            sectors: req.sectors,
            write: req.write,
            device,
            left: 0,
            phase: sub.phase,
        });
        assert!(
            lid < (OWN_EXTENT - 1) as usize,
            "more than 2^31 - 1 requests outstanding"
        );
        if number == FAR_NUMBER {
            self.far_numbers.insert(lid as u32, sub.number);
        }
        if let Some(Window::Requests { .. }) = self.config.window {
            self.counted_windows.insert(lid as u32, window);
        }
        let mut extents = std::mem::take(&mut self.scratch);
        let mut purposes = std::mem::take(&mut self.purposes);
        extents.clear();
        purposes.clear();
        if sub.physical {
            extents.push(req);
        } else {
            self.mapper.map_for(&req, &mut extents, &mut purposes);
        }
        purposes.resize(extents.len(), Purpose::Client);
        self.logical[lid].left = extents.len() as u32;
        if extents.is_empty() {
            self.finish_logical(lid, now_ns, observer)?;
        }
        self.note_foreground(lid, &purposes, now_ns);
        let first_member = self.groups[group].first_member;
        let alone = extents.len() == 1;
        // A request with an extent of another purpose (a replica write behind a read)
        // keeps a record for each extent: its purposes and response are tracked there.
        let all_client = purposes.iter().all(|&p| p == Purpose::Client);
        for (e, &purpose) in extents.iter().zip(&purposes) {
            let mut phases = self.groups[group].array.map(e);
            if first_member > 0 {
                offset_members(&mut phases, first_member);
            }
            if all_client && phases.len() == 1 && !phases[0].is_empty() {
                // The extent's one unit of `left` becomes its member I/Os.
                let ios = phases.pop().expect("one phase");
                self.logical[lid].left += ios.len() as u32 - 1;
                self.queue_ios(ios, OWN_EXTENT | lid as u32, alone, now_ns);
                continue;
            }
            self.tagged_extents += usize::from(purpose != Purpose::Client);
            let eid = self.extents.insert(Extent {
                logical: lid as u32,
                phase: 0,
                left: 0,
                phases,
                purpose,
            });
            self.start_phase(eid, now_ns, observer)?;
        }
        self.scratch = extents;
        self.purposes = purposes;
        Ok(())
    }

    /// Request `lid` has extents of `purposes`: when some go on behind it, its response
    /// waits only for the others (for none: it responds now).
    fn note_foreground(&mut self, lid: usize, purposes: &[Purpose], now_ns: u64) {
        let holding = purposes.iter().filter(|p| p.holds_response()).count();
        if holding == purposes.len() {
            return;
        }
        let f = Foreground {
            holding: holding as u32,
            responded_ns: None,
        };
        self.foreground.insert(lid as u32, f);
        if holding == 0 {
            self.respond(lid, now_ns);
        }
    }

    /// An extent of request `lid` that holds its response is done: the request
    /// responds with the last.
    fn holding_extent_done(&mut self, lid: usize, now_ns: u64) {
        let Some(f) = self.foreground.get_mut(&(lid as u32)) else {
            return;
        };
        f.holding -= 1;
        if f.holding == 0 {
            self.respond(lid, now_ns);
        }
    }

    /// Request `lid` responds at `now_ns`: its response time is counted (and, closed
    /// loop, the next request may come).
    fn respond(&mut self, lid: usize, now_ns: u64) {
        let window = self.window_of(lid);
        let l = &self.logical[lid];
        let group = self.group_of_index(l.device);
        let response_ns = now_ns - l.arrival_ns;
        (self.metrics).record_response(l.phase, window, group, l.write, response_ns);
        self.refill += 1;
        if let Some(f) = self.foreground.get_mut(&(lid as u32)) {
            f.responded_ns = Some(now_ns);
        }
    }

    /// The index of trace device `device` in [`Replay::devices`] and its group, both
    /// given on its first request.
    fn device_index_of(&mut self, device: u32) -> Result<(u16, usize), SimError> {
        if let Some(&i) = self.device_index.get(&device) {
            return Ok((i, self.devices[usize::from(i)].1));
        }
        let i = u16::try_from(self.devices.len()).map_err(|_| {
            SimError::Config(format!(
                "the trace addresses more than {} devices",
                u16::MAX
            ))
        })?;
        let group = self.group_for(device);
        self.devices.push((device, group));
        self.device_index.insert(device, i);
        Ok((i, group))
    }

    /// The window of logical request `lid` (what [`Metrics::window_of`] gave it).
    fn window_of(&self, lid: usize) -> u32 {
        match self.config.window {
            None => 0,
            Some(Window::Time { .. }) => (self.metrics).window_of(self.logical[lid].arrival_ns, 0),
            Some(Window::Requests { .. }) => self.counted_windows[&(lid as u32)],
        }
    }

    /// The group serving the trace device of index `device` in [`Replay::devices`].
    fn group_of_index(&self, device: u16) -> usize {
        self.devices[usize::from(device)].1
    }

    /// Queues the member I/Os of the extent's current phase; an extent with no phase left
    /// is finished.
    fn start_phase(
        &mut self,
        eid: usize,
        now_ns: u64,
        observer: &mut dyn Observer,
    ) -> Result<(), SimError> {
        loop {
            let ext = &mut self.extents[eid];
            let Some(ios) = ext.phases.get_mut(ext.phase as usize).map(std::mem::take) else {
                return self.finish_extent(eid, now_ns, observer);
            };
            if ext.phase as usize + 1 == ext.phases.len() {
                ext.phases = Vec::new();
            }
            ext.left = ios.len() as u32;
            if ios.is_empty() {
                ext.phase += 1;
                continue;
            }
            self.queue_ios(ios, eid as u32, false, now_ns);
            return Ok(());
        }
    }

    /// Queues member I/Os `ios` of extent `extent` (an [`Op::extent`]) on their members;
    /// `sole_extent`: whether it is its logical request's only extent.
    fn queue_ios(&mut self, ios: Vec<MemberIo>, extent: u32, sole_extent: bool, now_ns: u64) {
        // Two own ops of one request would share an id (a write an indirected layout
        // sends to two places): only a request's only extent's only I/O is one.
        let alone = sole_extent && extent & OWN_EXTENT != 0 && ios.len() == 1;
        for io in ios {
            let (member, req) = self.route(io, now_ns);
            let lid = extent & !OWN_EXTENT;
            // The usual request, one I/O as long as itself queued as it arrives, is its
            // own op: no record of 16 bytes (see [`Replay::op_parts`]).
            let own = alone && {
                let l = &self.logical[lid as usize];
                req.sectors == l.sectors && now_ns == l.arrival_ns
            };
            let op = if own {
                OWN_OP | lid
            } else {
                self.ops.insert(Op {
                    extent,
                    sectors: req.sectors,
                    queued_ns: now_ns,
                })
            };
            let m = &mut self.members[member];
            m.queue.push(op, req, m.dev.as_ref());
            self.mark_dirty(member);
        }
    }

    /// The member a member I/O goes to: a copy of the data on several members goes to the
    /// one expected to finish it first (queue backlog plus the device's estimate).
    fn route(&self, io: MemberIo, now_ns: u64) -> (usize, DevRequest) {
        match io {
            MemberIo::At { member, req } => (member, req),
            MemberIo::AnyOf(choices) => choices
                .into_iter()
                .min_by_key(|(member, req)| {
                    let m = &self.members[*member];
                    let wait = m.backlog_ns(now_ns, m.dev.estimate_ns(now_ns, req));
                    wait + m.dev.estimate_ns(now_ns + wait, req)
                })
                .expect("AnyOf names at least one member"),
        }
    }

    fn mark_dirty(&mut self, member: usize) {
        let m = &mut self.members[member];
        if !m.dirty {
            m.dirty = true;
            self.dirty.push(member);
        }
    }

    fn finish_extent(
        &mut self,
        eid: usize,
        now_ns: u64,
        observer: &mut dyn Observer,
    ) -> Result<(), SimError> {
        let ext = self.extents.remove(eid);
        let lid = ext.logical as usize;
        self.tagged_extents -= usize::from(ext.purpose != Purpose::Client);
        if ext.purpose.holds_response() {
            self.holding_extent_done(lid, now_ns);
        }
        let l = &mut self.logical[lid];
        l.left -= 1;
        if l.left == 0 {
            self.finish_logical(lid, now_ns, observer)?;
        }
        Ok(())
    }

    fn finish_logical(
        &mut self,
        lid: usize,
        now_ns: u64,
        observer: &mut dyn Observer,
    ) -> Result<(), SimError> {
        let responded = (self.foreground.remove(&(lid as u32))).and_then(|f| f.responded_ns);
        if responded.is_none() {
            self.respond(lid, now_ns);
        }
        let end_ns = responded.unwrap_or(now_ns);
        self.counted_windows.remove(&(lid as u32));
        let l = self.logical.remove(lid);
        let number = match l.number {
            FAR_NUMBER => self.far_numbers.remove(&(lid as u32)).expect("kept"),
            n => self.first_number.expect("set on the first") + u64::from(n),
        };
        let s = self.started.remove(&(lid as u32)).unwrap_or(Started {
            start_ns: now_ns,
            service_ns: 0,
            member: u32::MAX,
        });
        // The replay lasts until its last I/O, whatever it was for.
        self.last_completion_ns = self.last_completion_ns.max(now_ns);
        observer.on_completion(&Completion {
            number,
            phase: l.phase,
            write: l.write,
            sector: l.sector,
            sectors: l.sectors,
            trace_device: self.devices[usize::from(l.device)].0,
            member: s.member,
            arrival_ns: l.arrival_ns,
            start_ns: s.start_ns.min(end_ns),
            completion_ns: end_ns,
            service_ns: s.service_ns,
        })
    }

    /// Starts queued I/Os on every member that has work and room for it.
    fn dispatch_dirty(&mut self, now_ns: u64) {
        while let Some(member) = self.dirty.pop() {
            self.members[member].dirty = false;
            while let Some(io) = self.next_io(member, now_ns) {
                self.start_io(member, io, now_ns);
            }
        }
    }

    /// The I/O `member` starts now, if it has room and work: a parallel device takes
    /// the host queue's next while it holds fewer than its depth; a disk, when idle,
    /// fills its own queue from the host's and serves the command it can reach first.
    fn next_io(&mut self, member: usize, now_ns: u64) -> Option<Queued> {
        let m = &mut self.members[member];
        if m.parallel {
            if m.in_service.len() >= m.depth {
                return None;
            }
            return m.queue.pop(m.dev.head_key());
        }
        if !m.in_service.is_empty() {
            return None;
        }
        while m.drive.len() < m.depth {
            let Some(io) = m.queue.pop(m.dev.head_key()) else {
                break;
            };
            m.drive.push(io);
        }
        let pick = match m.drive.len() {
            0 => return None,
            1 => 0,
            // Ties go to the oldest command.
            _ => {
                m.drive_reqs.clear();
                m.drive_reqs.extend(m.drive.iter().map(|q| q.req));
                m.dev.nearest(now_ns, &m.drive_reqs).unwrap_or(0)
            }
        };
        Some(m.drive.remove(pick))
    }

    fn start_io(&mut self, member: usize, mut io: Queued, now_ns: u64) {
        if self.members[member].sole {
            // The mapper picks a read's copy now, from where the head really is.
            let dev = self.members[member].dev.as_ref();
            let copy = self
                .mapper
                .dispatch(&io.req, &|r| dev.estimate_ns(now_ns, r));
            debug_assert!(copy.write == io.req.write && copy.sectors == io.req.sectors);
            debug_assert!(!copy.write || copy == io.req, "writes stay where they are");
            io.req = copy;
        }
        let m = &mut self.members[member];
        let mut svc = m.dev.service(now_ns, &io.req);
        let non_sequential = m.prev_end != Some(io.req.sector);
        m.prev_end = Some(io.req.sector + u64::from(io.req.sectors));
        m.served_ns += svc.total_ns;
        m.served_ios += 1;
        let done_ns = now_ns + svc.total_ns;
        if m.parallel {
            // Busy time counts each instant once, however many I/Os overlap in it.
            svc.total_ns = done_ns.saturating_sub(now_ns.max(m.busy_until_ns));
        }
        m.busy_until_ns = m.busy_until_ns.max(done_ns);
        let slot = m.in_service.insert(InService {
            io,
            total_ns: svc.total_ns,
            done_ns,
        });
        self.events.push(Reverse((done_ns, member, slot)));
        self.account_purposes(member, &io, &svc);
        let mut op = io.first_op;
        let first = self.logical_of(op);
        let (phase, window) = (self.logical[first].phase, self.window_of(first));
        self.metrics
            .record_io(member, phase, window, &svc, non_sequential);
        while op != NO_OP {
            // Time never goes back: the first I/O started is the earliest, on the first
            // member that served the request.
            let lid = self.logical_of(op) as u32;
            self.started.entry(lid).or_insert(Started {
                start_ns: now_ns,
                service_ns: 0,
                member: member as u32,
            });
            op = self.members[member].queue.next_op(op);
        }
    }

    /// Sums the busy time of I/O `io` just started on `member` (its service `svc`) by
    /// purpose: the write-backs the drive ran in it are their writes', the rest is
    /// shared among the requests merged into it by their sectors, as their service
    /// times are (so a merged I/O of mixed purposes splits by sectors).
    fn account_purposes(&mut self, member: usize, io: &Queued, svc: &Service) {
        let busy_ns = svc.total_ns + svc.background_ns;
        let own_ns = busy_ns - self.account_write_backs(member, busy_ns);
        let m = &self.members[member];
        if self.tagged_extents == 0 && m.cached.is_empty() {
            // The usual replay: all of it is the client's.
            let parts = (svc.seek_ns, svc.rotate_ns, svc.transfer_ns);
            let activity = (svc.seek_ns, svc.transfer_ns);
            (self.metrics.purposes).add(Purpose::Client, own_ns, parts, activity, m.power.as_ref());
            return;
        }
        let mut sectors = [0u64; 3];
        let mut op = io.first_op;
        while op != NO_OP {
            let (extent, n, _) = self.op_parts(op);
            sectors[self.purpose_of_extent(extent).index()] += u64::from(n);
            op = self.members[member].queue.next_op(op);
        }
        let m = &mut self.members[member];
        let mixed = sectors[Purpose::Client.index()] != u64::from(io.req.sectors);
        if svc.write_cached && (mixed || !m.cached.is_empty()) {
            self.note_cached(member, io);
        }
        let m = &self.members[member];
        let busy = split_by(own_ns, &sectors);
        let seek = split_by(svc.seek_ns, &sectors);
        let rotate = split_by(svc.rotate_ns, &sectors);
        let transfer = split_by(svc.transfer_ns, &sectors);
        for p in Purpose::ALL {
            let i = p.index();
            let parts = (seek[i], rotate[i], transfer[i]);
            (self.metrics.purposes).add(
                p,
                busy[i],
                parts,
                (seek[i], transfer[i]),
                m.power.as_ref(),
            );
        }
    }

    /// The write-backs `member` reported for its last service or drain (of busy time
    /// `busy_ns`), added to their writes' purposes: returns the busy time they took;
    /// after a drain the rest (none on the models) is the client's.
    fn account_write_backs(&mut self, member: usize, busy_ns: u64) -> u64 {
        let mut work = std::mem::take(&mut self.written_back);
        work.clear();
        let m = &mut self.members[member];
        m.dev.take_write_backs(&mut work);
        let took = if work.is_empty() {
            0
        } else {
            (m.cached).account(&work, busy_ns, &mut self.metrics.purposes, m.power.as_ref())
        };
        self.written_back = work;
        took
    }

    /// Cached write `io` on `member`: its sectors are its requests' purposes' until the
    /// drive writes them back (merged requests follow each other in sector order).
    fn note_cached(&mut self, member: usize, io: &Queued) {
        let mut at = io.req.sector;
        let mut op = io.first_op;
        while op != NO_OP {
            let (extent, n, _) = self.op_parts(op);
            let p = self.purpose_of_extent(extent);
            let m = &mut self.members[member];
            m.cached.cache(at, at + u64::from(n), p);
            at += u64::from(n);
            op = m.queue.next_op(op);
        }
    }

    /// What the extent of [`Op::extent`] `extent` is for.
    fn purpose_of_extent(&self, extent: u32) -> Purpose {
        if extent & OWN_EXTENT != 0 {
            Purpose::Client
        } else {
            self.extents[extent as usize].purpose
        }
    }

    fn logical_of(&self, op: u32) -> usize {
        self.logical_of_extent(self.op_parts(op).0)
    }

    /// The [`Op`] fields of op `op`: its extent, sectors and when it was queued (for an
    /// [`OWN_OP`], its logical request's own).
    fn op_parts(&self, op: u32) -> (u32, u32, u64) {
        if op & OWN_OP != 0 {
            let l = &self.logical[(op & !OWN_OP) as usize];
            return (OWN_EXTENT | (op & !OWN_OP), l.sectors, l.arrival_ns);
        }
        let o = self.ops.get(op);
        (o.extent, o.sectors, o.queued_ns)
    }

    /// The logical request of [`Op::extent`] `extent`.
    fn logical_of_extent(&self, extent: u32) -> usize {
        if extent & OWN_EXTENT != 0 {
            (extent & !OWN_EXTENT) as usize
        } else {
            self.extents[extent as usize].logical as usize
        }
    }

    /// The I/O in service on `member` finished at `now_ns`: share its service time among
    /// the requests merged into it, and move each one's extent to its next phase.
    fn complete_io(
        &mut self,
        member: usize,
        slot: usize,
        now_ns: u64,
        observer: &mut dyn Observer,
    ) -> Result<(), SimError> {
        let done = self.members[member].in_service.remove(slot);
        self.mark_dirty(member);
        let mut op = done.io.first_op;
        let mut left_ns = done.total_ns;
        while op != NO_OP {
            // Read the link before the op is freed: its id may be reused below.
            let next = self.members[member].queue.next_op(op);
            let (extent, sectors, queued_ns) = self.op_parts(op);
            if op & OWN_OP == 0 {
                self.ops.remove(op);
            }
            let share_ns = if next == NO_OP {
                left_ns
            } else {
                done.total_ns * u64::from(sectors) / u64::from(done.io.req.sectors)
            };
            left_ns -= share_ns;
            let lid = self.logical_of_extent(extent);
            (self.started.get_mut(&(lid as u32)))
                .expect("a request served is started")
                .service_ns += share_ns;
            let window = self.window_of(lid);
            let l = &mut self.logical[lid];
            let phase = l.phase;
            self.metrics.record_busy(phase, window, share_ns);
            self.metrics
                .record_device_response(member, l.write, now_ns - queued_ns);
            if extent & OWN_EXTENT != 0 {
                // An extent of one phase: the request is done with its last I/O.
                l.left -= 1;
                if l.left == 0 {
                    self.finish_logical(lid, now_ns, observer)?;
                }
            } else {
                let ext = &mut self.extents[extent as usize];
                ext.left -= 1;
                if ext.left == 0 {
                    ext.phase += 1;
                    self.start_phase(extent as usize, now_ns, observer)?;
                }
            }
            op = next;
        }
        Ok(())
    }
}

/// Shifts the member numbers of an array's phases by `first` (the group's first member).
fn offset_members(phases: &mut reblock_device::Phases, first: usize) {
    for io in phases.iter_mut().flatten() {
        match io {
            MemberIo::At { member, .. } => *member += first,
            MemberIo::AnyOf(choices) => {
                for (member, _) in choices.iter_mut() {
                    *member += first;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::IterSource;

    /// What one queued request costs is what an open-loop replay of a fast trace grows
    /// with (a whole phase waits at once): keep the records it takes small.
    #[test]
    fn a_queued_request_takes_few_bytes() {
        use std::mem::size_of;
        assert!(size_of::<Logical>() <= 32, "{}", size_of::<Logical>());
        assert!(size_of::<Op>() <= 16, "{}", size_of::<Op>());
        assert!(size_of::<Queued>() <= 24, "{}", size_of::<Queued>());
    }

    /// A request an indirected layout splits into pieces of one phase each takes no
    /// [`Extent`] record: it waits for its pieces' member I/Os, and completes once, with
    /// the last. Two pieces as long as the request itself (as a write sent to two places)
    /// each take an op record: as own ops they would share one id in the queue.
    #[test]
    fn pieces_of_a_split_request_take_no_extent_record() {
        /// Halves far apart, or the whole request at home and at a second place.
        struct Split(bool);
        impl Mapper for Split {
            fn map(&mut self, r: &DevRequest, out: &mut Vec<DevRequest>) {
                let far = 1_000_000 + r.sector;
                if self.0 {
                    out.extend([*r, DevRequest { sector: far, ..*r }]);
                    return;
                }
                let half = r.sectors / 2;
                out.push(DevRequest {
                    sectors: half,
                    ..*r
                });
                let rest = r.sectors - half;
                out.push(DevRequest {
                    sector: far + u64::from(half),
                    sectors: rest,
                    ..*r
                });
            }
        }
        struct Seen(Vec<Completion>);
        impl Observer for Seen {
            fn on_completion(&mut self, c: &Completion) -> Result<(), SimError> {
                self.0.push(*c);
                Ok(())
            }
        }
        let sub = |i: u64| Submission {
            number: i,
            ts_ns: i,
            req: DevRequest {
                sector: 8 * 5000 * i,
                sectors: 16,
                write: false,
            },
            device: 0,
            phase: Phase::Normal,
            physical: false,
        };
        for mirrored in [false, true] {
            let built = reblock_device::parse_spec("hdd:wd2500aaks").unwrap();
            let mut replay = Replay::new(built.array, built.members, Config::default())
                .unwrap()
                .with_mapper(Box::new(Split(mirrored)));
            let mut seen = Seen(Vec::new());
            for i in 0..3 {
                replay.admit(sub(i), 0, &mut seen).unwrap();
            }
            assert!(replay.extents.is_empty());
            assert!((0..3).all(|lid| replay.logical[lid].left == 2));
            assert_eq!(replay.ops.ops.len(), 6, "every piece has its op record");
            let mut rest = IterSource((3..10).map(sub));
            replay.run_open(1.0, &mut rest, &mut seen).unwrap();
            let mut numbers: Vec<u64> = seen.0.iter().map(|c| c.number).collect();
            numbers.sort_unstable();
            assert_eq!(numbers, (0..10).collect::<Vec<_>>(), "each completes once");
            assert!(seen.0.iter().all(|c| c.service_ns > 0 && c.sectors == 16));
            assert!(replay.logical.is_empty() && replay.started.is_empty());
        }
    }

    /// A request's number is kept as its distance from the first one's when that fits
    /// 32 bits: numbers before the first, far after it, and at the edges come back whole.
    #[test]
    fn completions_carry_every_number_exactly() {
        struct Numbers(Vec<u64>);
        impl Observer for Numbers {
            fn on_completion(&mut self, c: &Completion) -> Result<(), SimError> {
                self.0.push(c.number);
                Ok(())
            }
        }
        let numbers = [
            1u64 << 40,
            0,
            (1 << 40) + u64::from(u32::MAX) - 1,
            (1 << 40) + u64::from(u32::MAX),
            u64::MAX,
            (1 << 40) + 7,
        ];
        let subs = numbers.iter().enumerate().map(|(i, &number)| Submission {
            number,
            ts_ns: i as u64,
            req: DevRequest {
                sector: 8 * 1000 * i as u64,
                sectors: 8,
                write: false,
            },
            device: 0,
            phase: Phase::Normal,
            physical: false,
        });
        let built = reblock_device::parse_spec("hdd:wd2500aaks").unwrap();
        let replay = Replay::new(built.array, built.members, Config::default()).unwrap();
        let mut seen = Numbers(Vec::new());
        replay.run(&mut IterSource(subs), &mut seen).unwrap();
        seen.0.sort_unstable();
        let mut want = numbers.to_vec();
        want.sort_unstable();
        assert_eq!(seen.0, want);
    }
}
