//! Test fixtures: tiny devices whose service times are computed by hand, to check the
//! queueing logic on its own. (The real models are exercised in `models.rs`.)
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use reblock_device::{Array, DevRequest, Device, Drain, MemberIo, Phases, Service};
use reblock_sim::{
    Completion, Config, IterSource, Observer, Phase, Replay, Report, SimError, Submission,
};

pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000_000_000;

/// Every request served so far, in service order, with its start time.
pub type Log = Arc<Mutex<Vec<(u64, DevRequest)>>>;

/// Service time `fixed_ns + per_sector_ns * sectors + per_distance_ns * |sector - head|`;
/// the position key is the sector itself and a "cylinder" is 10 sectors.
pub struct LineDevice {
    pub fixed_ns: u64,
    pub per_sector_ns: u64,
    pub per_distance_ns: u64,
    pub capacity_sectors: u64,
    pub head: u64,
    pub log: Log,
    busy_ns: u64,
}

impl LineDevice {
    pub fn constant(service_ns: u64) -> LineDevice {
        LineDevice::new(service_ns, 0, 0)
    }
    pub fn new(fixed_ns: u64, per_sector_ns: u64, per_distance_ns: u64) -> LineDevice {
        LineDevice {
            fixed_ns,
            per_sector_ns,
            per_distance_ns,
            capacity_sectors: 1 << 30,
            head: 0,
            log: Log::default(),
            busy_ns: 0,
        }
    }
    pub fn with_head(mut self, head: u64) -> Self {
        self.head = head;
        self
    }
    pub fn with_capacity(mut self, capacity_sectors: u64) -> Self {
        self.capacity_sectors = capacity_sectors;
        self
    }
}

impl Device for LineDevice {
    fn name(&self) -> &str {
        "line"
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }
    fn service(&mut self, start_ns: u64, req: &DevRequest) -> Service {
        let total_ns = self.estimate_ns(start_ns, req);
        let seek_cylinders = self.head.abs_diff(req.sector) / 10;
        self.head = req.sector + u64::from(req.sectors);
        self.busy_ns += total_ns;
        self.log.lock().unwrap().push((start_ns, *req));
        Service {
            total_ns,
            seek_cylinders,
            ..Service::default()
        }
    }
    fn estimate_ns(&self, _start_ns: u64, req: &DevRequest) -> u64 {
        self.fixed_ns
            + self.per_sector_ns * u64::from(req.sectors)
            + self.per_distance_ns * self.head.abs_diff(req.sector)
    }
    fn position_key(&self, sector: u64) -> u64 {
        sector
    }
    fn head_key(&self) -> u64 {
        self.head
    }
    /// 10 W busy, 1 W idle.
    fn energy_j(&self, elapsed_ns: u64) -> Option<f64> {
        let idle_ns = elapsed_ns.saturating_sub(self.busy_ns);
        Some((10.0 * self.busy_ns as f64 + idle_ns as f64) / 1e9)
    }
}

/// One device as an array of one member.
pub struct Single(pub u64);

impl Array for Single {
    fn name(&self) -> &str {
        "single"
    }
    fn capacity_sectors(&self) -> u64 {
        self.0
    }
    fn members(&self) -> usize {
        1
    }
    fn map(&self, req: &DevRequest) -> Phases {
        vec![vec![MemberIo::At {
            member: 0,
            req: *req,
        }]]
    }
}

/// Two-way mirror: reads from either copy, writes to both.
pub struct Mirror(pub u64);

impl Array for Mirror {
    fn name(&self) -> &str {
        "mirror"
    }
    fn capacity_sectors(&self) -> u64 {
        self.0
    }
    fn members(&self) -> usize {
        2
    }
    fn map(&self, req: &DevRequest) -> Phases {
        if req.write {
            vec![(0..2)
                .map(|member| MemberIo::At { member, req: *req })
                .collect()]
        } else {
            vec![vec![MemberIo::AnyOf(vec![(0, *req), (1, *req)])]]
        }
    }
}

pub fn read(ts_ns: u64, sector: u64, sectors: u32) -> (u64, u64, u32, bool) {
    (ts_ns, sector, sectors, false)
}

pub fn write(ts_ns: u64, sector: u64, sectors: u32) -> (u64, u64, u32, bool) {
    (ts_ns, sector, sectors, true)
}

/// Normal-phase submissions numbered from 1.
pub fn subs(reqs: &[(u64, u64, u32, bool)]) -> Vec<Submission> {
    reqs.iter()
        .enumerate()
        .map(|(i, &(ts_ns, sector, sectors, write))| Submission {
            number: i as u64 + 1,
            ts_ns,
            req: DevRequest {
                sector,
                sectors,
                write,
            },
            device: 0,
            phase: Phase::Normal,
            physical: false,
        })
        .collect()
}

/// Collects completions.
#[derive(Default)]
pub struct Collect(pub Vec<Completion>);

impl Observer for Collect {
    fn on_completion(&mut self, c: &Completion) -> Result<(), SimError> {
        self.0.push(*c);
        Ok(())
    }
}

/// What a replay gave: the report, the completions and the service log.
pub type Replayed = (Report, Vec<Completion>, Vec<(u64, DevRequest)>);

/// Replays `reqs` on one `dev`, returning the report, the completions and the service log.
pub fn replay_one(
    dev: LineDevice,
    config: Config,
    reqs: &[(u64, u64, u32, bool)],
) -> Result<Replayed, SimError> {
    let log = dev.log.clone();
    let cap = dev.capacity_sectors;
    let replay = Replay::new(Box::new(Single(cap)), vec![Box::new(dev)], config)?;
    let mut done = Collect::default();
    let report = replay.run(&mut IterSource(subs(reqs).into_iter()), &mut done)?;
    let served = log.lock().unwrap().clone();
    Ok((report, done.0, served))
}

pub fn sectors_served(log: &[(u64, DevRequest)]) -> Vec<u64> {
    log.iter().map(|(_, r)| r.sector).collect()
}

pub fn assert_close(got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= rel * want.abs().max(1e-12),
        "got {got}, want {want} (±{rel} relative)"
    );
}

/// Delegates to a real model and logs what it serves. It keeps the default queue of one
/// command at a time, whatever the model's own queue.
pub struct Logged(pub Box<dyn Device>, pub Log);

impl Device for Logged {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn capacity_sectors(&self) -> u64 {
        self.0.capacity_sectors()
    }
    fn service(&mut self, start_ns: u64, req: &DevRequest) -> Service {
        self.1.lock().unwrap().push((start_ns, *req));
        self.0.service(start_ns, req)
    }
    fn estimate_ns(&self, start_ns: u64, req: &DevRequest) -> u64 {
        self.0.estimate_ns(start_ns, req)
    }
    fn position_key(&self, sector: u64) -> u64 {
        self.0.position_key(sector)
    }
    fn head_key(&self) -> u64 {
        self.0.head_key()
    }
    fn energy_j(&self, elapsed_ns: u64) -> Option<f64> {
        self.0.energy_j(elapsed_ns)
    }
    fn drain(&mut self) -> Drain {
        self.0.drain()
    }
    fn take_write_backs(&mut self, out: &mut Vec<reblock_device::WriteBackWork>) {
        self.0.take_write_backs(out)
    }
    fn power(&self) -> Option<reblock_device::energy::PowerModel> {
        self.0.power()
    }
}
