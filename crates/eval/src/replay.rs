//! Replays one phase on fresh devices of the configured spec: a normal phase's requests
//! through a policy's layout (the sim's [`Mapper`] hook), or a reconfiguration's copy I/O
//! as physical requests at speed 1 (seed 000 §6.1: "reverted to 1X during each
//! reconfiguration").

use std::sync::{Arc, Mutex};

use reblock_analyze::figures::LogHistogram;
use reblock_device::{DevRequest, Device, Drain, Service};
use reblock_layout::admission::STDERR_BLOCK_REQUESTS;
use reblock_layout::{position_reads, CopyRequest, Extent, Positioning, POSITIONED_WINDOW};
use reblock_sim::{
    Completion, Config, IterSource, Observer, Pacing, Phase, Purpose, PurposeReport, Replay,
    SimError, Source, Submission, Summary,
};
use reblock_trace::Request;
use serde::{Deserialize, Serialize};

use crate::layout::{dev_request, share, Layout, Shared, SharedMapper};
use crate::EvalError;

/// What one replay measured, plus the layout's hit counts.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    pub summary: Summary,
    /// The devices' energy over the replay (see [`Replayed::energy_j`]).
    pub energy_j: Option<f64>,
    pub requests: u64,
    pub hits: u64,
    /// Pages the guard wrote home: dirty BOPT pages, or a whole permutation sent home
    /// (their copies are in `summary`).
    pub written_back_pages: u64,
    /// Response times (ns) of the workload's requests, for the report's CDFs.
    pub response_ns: LogHistogram,
    pub access: AccessTime,
    /// The busy time by what it was for.
    pub purposes: Purposes,
    /// Device nanoseconds the replay's requests took, summed in blocks of
    /// [`STDERR_BLOCK_REQUESTS`] in order (the paired differences of the admission's
    /// backtests need no more; a nanosecond count per request cost 8 bytes a request
    /// of every backtest kept): each request's share of the device I/Os that served
    /// it (write-backs the guard added are not included).
    pub service_blocks_ns: Vec<u64>,
}

/// One replay's figures over all its requests.
#[derive(Clone, Debug, Default)]
pub struct Replayed {
    pub summary: Summary,
    /// The devices' energy from their power states: over the replay's makespan, idle
    /// included, for a normal phase; above idle power only for copies ([`Energy`]);
    /// none when the device model has no power figures.
    pub energy_j: Option<f64>,
    /// The busy time split into its parts.
    pub access: AccessTime,
    /// The busy time by what it was for.
    pub purposes: Purposes,
}

/// A replay's device time by what it was for (the simulator's [`Purpose`]): the
/// workload's own requests, FS2's replica writes, the guard's copies.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Purposes {
    /// Busy seconds writing replicas (including the write-back of those the drive
    /// cached), and making the guard's copies: reconfiguration done inside a normal phase.
    pub replica_busy_s: f64,
    pub copy_busy_s: f64,
    /// What those two drew above idle power (none without power figures).
    pub reconfig_energy_j: Option<f64>,
    /// FS2's T_A of the workload's own requests alone: their seeks, rotational waits and
    /// transfers, and the rest of their busy time (overhead, write-back of their cached
    /// writes).
    pub client_access: AccessTime,
}

impl Purposes {
    fn from_reports(reports: &[PurposeReport]) -> Purposes {
        let of = |p: Purpose| reports.iter().find(|r| r.purpose == p);
        let busy = |p: Purpose| of(p).map_or(0.0, |r| r.busy_time_s);
        let energy = |p: Purpose| of(p).map_or(Some(0.0), |r| r.energy_above_idle_j);
        let client_access = of(Purpose::Client).map_or(AccessTime::default(), |r| AccessTime {
            seek_s: r.seek_s,
            rotation_s: r.rotation_s,
            transfer_s: r.transfer_s,
            other_s: r.other_s,
        });
        Purposes {
            replica_busy_s: busy(Purpose::Replica),
            copy_busy_s: busy(Purpose::Copy),
            reconfig_energy_j: energy(Purpose::Replica)
                .zip(energy(Purpose::Copy))
                .map(|(a, b)| a + b),
            client_access,
        }
    }
}

/// FS2's access-time decomposition T_A = T_s + T_r + T_t of the devices' busy time:
/// seek, rotational wait and transfer summed over every device I/O, plus the rest
/// (controller overhead, and media work a disk did in the background, such as writing
/// back cached writes), so that the four parts add up to the busy time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AccessTime {
    pub seek_s: f64,
    pub rotation_s: f64,
    pub transfer_s: f64,
    pub other_s: f64,
}

impl AccessTime {
    fn add_service(&mut self, s: &Service) {
        self.seek_s += s.seek_ns as f64 * 1e-9;
        self.rotation_s += s.rotate_ns as f64 * 1e-9;
        self.transfer_s += s.transfer_ns as f64 * 1e-9;
        let parts = s.seek_ns + s.rotate_ns + s.transfer_ns;
        self.other_s += (s.total_ns + s.background_ns).saturating_sub(parts) as f64 * 1e-9;
    }

    /// The sum of both.
    pub fn plus(&self, o: &AccessTime) -> AccessTime {
        AccessTime {
            seek_s: self.seek_s + o.seek_s,
            rotation_s: self.rotation_s + o.rotation_s,
            transfer_s: self.transfer_s + o.transfer_s,
            other_s: self.other_s + o.other_s,
        }
    }
}

/// A member device whose services are added up into an [`AccessTime`]; everything else
/// is the device's own, but for its energy when `above_idle`.
struct Timed {
    inner: Box<dyn Device>,
    access: Arc<Mutex<AccessTime>>,
    /// Energy is counted above idle power only ([`Energy::AboveIdle`]).
    above_idle: bool,
}

/// How a replay's energy is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Energy {
    /// Idle power over the replay's makespan plus what each activity draws above it: a
    /// normal phase, whose span every policy spends spinning (on a trace the drive keeps
    /// up with, the phase's arrivals set the makespan, and a policy that is busy less
    /// saves only the power above idle).
    OverMakespan,
    /// Only what seeking and transferring draw above idle power: a reconfiguration's
    /// copies, made in the idle time between phases that the drive spends spinning
    /// anyway, whatever the policy (the models have no standby state to wake from).
    /// Counted over their own makespan at idle power too, a second of copies cost 9.4 J
    /// on the desktop drive where a second less busy in a normal phase of a sparse trace
    /// saved 0.75 J, and BORG's 8% less busy time on MSR rsrch_1 came out as more energy
    /// than vanilla's.
    AboveIdle,
}

impl Device for Timed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn capacity_sectors(&self) -> u64 {
        self.inner.capacity_sectors()
    }
    fn service(&mut self, start_ns: u64, req: &DevRequest) -> Service {
        let s = self.inner.service(start_ns, req);
        self.access.lock().expect("access lock").add_service(&s);
        s
    }
    fn estimate_ns(&self, start_ns: u64, req: &DevRequest) -> u64 {
        self.inner.estimate_ns(start_ns, req)
    }
    fn position_key(&self, sector: u64) -> u64 {
        self.inner.position_key(sector)
    }
    fn head_key(&self) -> u64 {
        self.inner.head_key()
    }
    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }
    fn serves_in_parallel(&self) -> bool {
        self.inner.serves_in_parallel()
    }
    fn positioning_ns(&self, start_ns: u64, req: &DevRequest) -> u64 {
        self.inner.positioning_ns(start_ns, req)
    }
    fn nearest(&self, start_ns: u64, reqs: &[DevRequest]) -> Option<usize> {
        self.inner.nearest(start_ns, reqs)
    }
    fn energy_j(&self, elapsed_ns: u64) -> Option<f64> {
        // The power model charges idle power over `elapsed_ns` and the activities above
        // it: over no time, only what they draw above idle.
        let over_ns = if self.above_idle { 0 } else { elapsed_ns };
        self.inner.energy_j(over_ns)
    }
    fn drain(&mut self) -> Drain {
        let d = self.inner.drain();
        self.access.lock().expect("access lock").other_s += d.busy_ns as f64 * 1e-9;
        d
    }
    fn as_hdd(&self) -> Option<&reblock_device::Hdd> {
        self.inner.as_hdd()
    }
    fn take_write_backs(&mut self, out: &mut Vec<reblock_device::WriteBackWork>) {
        self.inner.take_write_backs(out)
    }
    fn power(&self) -> Option<reblock_device::energy::PowerModel> {
        self.inner.power()
    }
}

/// Collects the response time of every normal-phase request, and the device time they
/// took in blocks of [`STDERR_BLOCK_REQUESTS`] (by submission number, from 1).
#[derive(Default)]
struct Responses {
    /// The first submission's number.
    first_number: u64,
    response_ns: LogHistogram,
    service_blocks_ns: Vec<u64>,
}

impl Observer for Responses {
    fn on_completion(&mut self, c: &Completion) -> Result<(), SimError> {
        if c.phase == Phase::Normal {
            self.response_ns
                .record(c.completion_ns.saturating_sub(c.arrival_ns));
            let i = c.number.saturating_sub(self.first_number) as usize;
            let block = i / STDERR_BLOCK_REQUESTS;
            if self.service_blocks_ns.len() <= block {
                self.service_blocks_ns.resize(block + 1, 0);
            }
            self.service_blocks_ns[block] += c.service_ns;
        }
        Ok(())
    }
}

fn sim_config(speed: f64) -> Config {
    Config {
        pacing: Pacing::Open { speed },
        ..Config::default()
    }
}

fn run(
    device: &str,
    speed: f64,
    source: &mut dyn Source,
    mapper: Option<Shared>,
    first_number: u64,
    energy: Energy,
) -> Result<(Replayed, Responses), EvalError> {
    let built = reblock_device::parse_spec(device).map_err(EvalError::Device)?;
    let access = Arc::new(Mutex::new(AccessTime::default()));
    let members = built
        .members
        .into_iter()
        .map(|inner| {
            Box::new(Timed {
                inner,
                access: access.clone(),
                above_idle: energy == Energy::AboveIdle,
            }) as Box<dyn Device>
        })
        .collect();
    let mut replay = Replay::new(built.array, members, sim_config(speed))?;
    if let Some(m) = mapper {
        replay = replay.with_mapper(Box::new(SharedMapper(m)));
    }
    let mut responses = Responses {
        first_number,
        ..Responses::default()
    };
    let report = replay.run(source, &mut responses)?;
    let replayed = Replayed {
        purposes: Purposes::from_reports(&report.purposes),
        summary: report.overall,
        energy_j: report.energy_j,
        access: *access.lock().expect("access lock"),
    };
    Ok((replayed, responses))
}

/// The workload's requests `reqs` through `layout` (which they change: absorbed writes),
/// guarded or not per epoch of `epoch` requests as `guarded` says (none: never).
pub fn normal(
    device: &str,
    speed: f64,
    reqs: impl ExactSizeIterator<Item = Request>,
    first_number: u64,
    layout: Shared,
    guarded: &[bool],
    epoch: usize,
) -> Result<Measured, EvalError> {
    {
        let mut cell = layout.lock().expect("layout lock");
        cell.requests = 0;
        cell.hits = 0;
        cell.guarded = false;
        cell.written_back_pages = 0;
    }
    let len = reqs.len();
    let mut source = PhaseSource {
        reqs,
        next: 0,
        first_number,
        layout: layout.clone(),
        guarded,
        epoch: epoch.max(1),
    };
    let (replayed, responses) = run(
        device,
        speed,
        &mut source,
        Some(layout.clone()),
        first_number,
        Energy::OverMakespan,
    )?;
    let cell = layout.lock().expect("layout lock");
    let mut service_blocks_ns = responses.service_blocks_ns;
    service_blocks_ns.resize(len.div_ceil(STDERR_BLOCK_REQUESTS), 0);
    Ok(Measured {
        summary: replayed.summary,
        energy_j: replayed.energy_j,
        requests: cell.requests,
        hits: cell.hits,
        written_back_pages: cell.written_back_pages,
        response_ns: responses.response_ns,
        access: replayed.access,
        purposes: replayed.purposes,
        service_blocks_ns,
    })
}

/// Busy seconds of `reqs` on `layout` unguarded (the guard's shadow replays).
pub fn shadow(
    device: &str,
    speed: f64,
    reqs: impl ExactSizeIterator<Item = Request>,
    layout: Layout,
) -> Result<f64, EvalError> {
    Ok(shadow_profile(device, speed, reqs, layout)?.busy_s)
}

/// A shadow replay's busy seconds and what each request took.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub busy_s: f64,
    /// Device nanoseconds of the requests in blocks (see [`Measured::service_blocks_ns`]).
    pub service_blocks_ns: Vec<u64>,
}

/// Busy seconds of `reqs` on `layout` unguarded, and each request's device time (the
/// admission rule's backtests: how sure a predicted saving is).
pub fn shadow_profile(
    device: &str,
    speed: f64,
    reqs: impl ExactSizeIterator<Item = Request>,
    layout: Layout,
) -> Result<Profile, EvalError> {
    let m = normal(device, speed, reqs, 1, share(layout), &[], 1)?;
    Ok(Profile {
        busy_s: m.summary.busy_time_s,
        service_blocks_ns: m.service_blocks_ns,
    })
}

/// The copy I/O of a reconfiguration, all issued at once at speed 1: each run of reads
/// between two writes in the order the drive serves fastest (the copy scheduler's
/// positioned sweep, see `reblock_layout::position_reads`), the writes where they are.
pub fn copies(device: &str, requests: &[DevRequest]) -> Result<Replayed, EvalError> {
    let Some(mut model) = DevicePositioning::new(device)? else {
        return copies_in_order(device, requests);
    };
    let reqs: Vec<CopyRequest> = requests
        .iter()
        .map(|r| CopyRequest {
            extent: Extent::new(r.sector, u64::from(r.sectors)),
            write: r.write,
        })
        .collect();
    let positioned = position_reads(&reqs, &mut model, POSITIONED_WINDOW);
    let positioned: Vec<DevRequest> = positioned.iter().map(dev_request).collect();
    copies_in_order(device, &positioned)
}

/// [`copies`] with every request issued in the order given.
pub fn copies_in_order(device: &str, requests: &[DevRequest]) -> Result<Replayed, EvalError> {
    if requests.is_empty() {
        // No copy takes no time and so spends no energy.
        return Ok(Replayed {
            summary: Summary::default(),
            energy_j: Some(0.0),
            access: AccessTime::default(),
            purposes: Purposes::default(),
        });
    }
    let subs = requests.iter().enumerate().map(|(i, r)| Submission {
        number: i as u64 + 1,
        ts_ns: 0,
        req: *r,
        device: 0,
        phase: Phase::Reconfiguration,
        physical: true,
    });
    let source = &mut IterSource(subs);
    Ok(run(device, 1.0, source, None, 1, Energy::AboveIdle)?.0)
}

/// The copy scheduler's view of a fresh single-disk device of a spec: each request's
/// positioning time from where the requests issued so far, back to back, left the head
/// (reconfiguration copies run at speed 1 with the queue full).
pub struct DevicePositioning {
    device: Box<dyn Device>,
    now_ns: u64,
}

impl DevicePositioning {
    /// The model of `device`; none for an array of several members (a request's member
    /// is the array's business, not one head's).
    pub fn new(device: &str) -> Result<Option<DevicePositioning>, EvalError> {
        let mut built = reblock_device::parse_spec(device).map_err(EvalError::Device)?;
        if built.members.len() != 1 {
            return Ok(None);
        }
        Ok(Some(DevicePositioning {
            device: built.members.remove(0),
            now_ns: 0,
        }))
    }
}

impl Positioning for DevicePositioning {
    fn positioning_ns(&self, req: &CopyRequest) -> u64 {
        self.device.positioning_ns(self.now_ns, &dev_request(req))
    }
    fn issue(&mut self, req: &CopyRequest) {
        self.now_ns += self.device.service(self.now_ns, &dev_request(req)).total_ns;
    }
}

/// The longest gap, in sectors, that a copy's reads should read through rather than
/// skip on `device`: the largest power of two up to 4 MiB for which reading two 4 KiB
/// pieces that far apart as one request costs the model no more than reading them as
/// two (probed in the middle of the device, each way on a fresh device).
pub fn read_through_gap_sectors(device: &str) -> Result<u64, EvalError> {
    let capacity = reblock_device::parse_spec(device)
        .map_err(EvalError::Device)?
        .array
        .capacity_sectors();
    let at = capacity / 2 / 8 * 8;
    let read = |sector: u64, sectors: u64| DevRequest {
        sector,
        sectors: sectors as u32,
        write: false,
    };
    let mut best = 0;
    for shift in 3..=13 {
        let gap = 1u64 << shift;
        if at + 16 + gap > capacity {
            break;
        }
        let two = copies_in_order(device, &[read(at, 8), read(at + 8 + gap, 8)])?
            .summary
            .busy_time_s;
        let one = copies_in_order(device, &[read(at, 16 + gap)])?
            .summary
            .busy_time_s;
        if one <= two {
            best = gap;
        }
    }
    Ok(best)
}

/// A normal phase's requests as submissions; sets the guard at each epoch. Replay pulls
/// a submission only after admitting (mapping) the one before, so the guard set here
/// applies exactly from this request on.
struct PhaseSource<'a, I> {
    reqs: I,
    next: usize,
    first_number: u64,
    layout: Shared,
    guarded: &'a [bool],
    epoch: usize,
}

impl<I: Iterator<Item = Request>> Source for PhaseSource<'_, I> {
    fn next_submission(&mut self) -> Result<Option<Submission>, SimError> {
        let Some(r) = self.reqs.next() else {
            return Ok(None);
        };
        if self.next.is_multiple_of(self.epoch) {
            if let Some(&g) = self.guarded.get(self.next / self.epoch) {
                self.layout.lock().expect("layout lock").guarded = g;
            }
        }
        self.next += 1;
        Ok(Some(Submission {
            number: self.first_number + self.next as u64 - 1,
            ts_ns: r.ts_ns,
            req: DevRequest {
                sector: r.sector,
                sectors: r.sectors,
                write: r.op.is_write(),
            },
            device: r.device,
            phase: Phase::Normal,
            physical: false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_layout::admission::block_sums;

    #[test]
    fn copies_are_charged_only_the_power_above_idle() {
        // Worked example (docs/fs2.md "Access time and energy"): the desktop drive idles
        // at 8.4 W, seeks at 10.0 W and transfers at 8.8 W. Eight 32 KiB copy reads
        // spread over the disk cost 1.6 W over their seeks and 0.4 W over their
        // transfers, nothing for their rotational waits and nothing for idle power: the
        // drive spins through the idle time they are made in whatever the policy.
        let reads: Vec<DevRequest> = (0..8u64)
            .map(|k| DevRequest {
                sector: k * 50_000_000,
                sectors: 64,
                write: false,
            })
            .collect();
        let r = copies_in_order("hdd:wd2500aaks", &reads).unwrap();
        let a = r.access;
        assert!(a.seek_s > 0.0 && a.rotation_s > 0.0 && a.transfer_s > 0.0);
        let above = (10.0 - 8.4) * a.seek_s + (8.8 - 8.4) * a.transfer_s;
        let e = r.energy_j.unwrap();
        assert!((e - above).abs() < 1e-6, "{e} J, {above} J above idle");
        // Over their makespan at idle power too they would cost many times more.
        assert!(8.4 * r.summary.busy_time_s > 5.0 * e, "{e} J");
    }

    /// The blocks the observer sums as requests complete (in any order, several
    /// completions of one number adding up) are the blocks of each request's time.
    #[test]
    fn service_blocks_are_the_block_sums_of_each_request() {
        let per_request: Vec<u64> = (0..29u64).map(|i| i * 1_000 + (i % 3) * 7).collect();
        let mut r = Responses {
            first_number: 5,
            ..Responses::default()
        };
        for i in (0..per_request.len()).rev() {
            for part in [per_request[i] / 2, per_request[i] - per_request[i] / 2] {
                let c = Completion {
                    number: 5 + i as u64,
                    phase: Phase::Normal,
                    write: false,
                    sector: 0,
                    sectors: 8,
                    trace_device: 0,
                    member: 0,
                    arrival_ns: 0,
                    start_ns: 0,
                    completion_ns: 1,
                    service_ns: part,
                };
                r.on_completion(&c).unwrap();
            }
        }
        assert_eq!(r.service_blocks_ns, block_sums(&per_request));
        assert_eq!(r.service_blocks_ns.len(), 4);
    }
}
