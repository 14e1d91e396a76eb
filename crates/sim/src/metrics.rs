//! The metrics of DESIGN.md "Metrics", defined once: disk busy time (sum of service
//! times, idle excluded; seed 000 §6's primary metric), response time (completion minus
//! arrival), non-sequential fraction, seek distance, cache hits and energy, overall, per
//! device, per phase (normal vs reconfiguration, seed 000 §6.1's N_i and R_i) and per
//! window. Response times go to a log-bucketed histogram, so memory does not grow with
//! the trace.

use hdrhistogram::Histogram;
use reblock_device::{Drain, Service};
use serde::Serialize;

use crate::purpose::{Purpose, PurposeTime};

const NS_PER_MS: f64 = 1e6;
const NS_PER_S: f64 = 1e9;

/// What a request is for: the workload's own I/O or the copies of a reconfiguration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Normal,
    Reconfiguration,
}

impl Phase {
    pub const ALL: [Phase; 2] = [Phase::Normal, Phase::Reconfiguration];
    fn index(self) -> usize {
        self as usize
    }
}

/// How requests are grouped into windows: by arrival time, or by arrival order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    Time { ns: u64 },
    Requests { n: u64 },
}

impl std::str::FromStr for Window {
    type Err = String;
    /// `60s`, `500ms`, `2m`, `1h`, or a bare count of requests (`10000`).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("bad window '{s}': expected a duration (60s, 500ms, 2m, 1h) or a request count (10000)")
        };
        let split = s
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let value: f64 = num.parse().map_err(|_| bad())?;
        let ns_per = match unit {
            "" => {
                let n: u64 = num.parse().map_err(|_| bad())?;
                return if n == 0 {
                    Err(bad())
                } else {
                    Ok(Window::Requests { n })
                };
            }
            "ns" => 1.0,
            "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        let ns = (value * ns_per) as u64;
        if ns == 0 {
            return Err(bad());
        }
        Ok(Window::Time { ns })
    }
}

/// One group's running sums.
pub(crate) struct Acc {
    requests: u64,
    reads: u64,
    read_response_ns: u128,
    write_response_ns: u128,
    response: Histogram<u64>,
    busy_ns: u64,
    ios: u64,
    non_sequential_ios: u64,
    seek_cylinders: u64,
    cache_hits: u64,
}

impl Acc {
    fn new(significant_digits: u8) -> Acc {
        Acc {
            requests: 0,
            reads: 0,
            read_response_ns: 0,
            write_response_ns: 0,
            response: Histogram::new(significant_digits).expect("1 to 5 significant digits"),
            busy_ns: 0,
            ios: 0,
            non_sequential_ios: 0,
            seek_cylinders: 0,
            cache_hits: 0,
        }
    }

    fn record_response(&mut self, write: bool, response_ns: u64) {
        self.requests += 1;
        if write {
            self.write_response_ns += u128::from(response_ns);
        } else {
            self.reads += 1;
            self.read_response_ns += u128::from(response_ns);
        }
        // The histogram grows to fit; should growing ever fail, clamp rather than lose
        // the count.
        if self.response.record(response_ns).is_err() {
            self.response.saturating_record(response_ns);
        }
    }

    fn record_io(&mut self, svc: &Service, non_sequential: bool) {
        self.ios += 1;
        self.non_sequential_ios += u64::from(non_sequential);
        self.seek_cylinders += svc.seek_cylinders;
        self.cache_hits += u64::from(svc.cache_hit);
    }

    fn summary(&self) -> Summary {
        let writes = self.requests - self.reads;
        let total_ns = self.read_response_ns + self.write_response_ns;
        let pct = |q: f64| {
            if self.requests == 0 {
                0.0
            } else {
                self.response.value_at_quantile(q) as f64 / NS_PER_MS
            }
        };
        Summary {
            requests: self.requests,
            reads: self.reads,
            writes,
            busy_time_s: self.busy_ns as f64 / NS_PER_S,
            mean_response_ms: mean_ms(total_ns, self.requests).unwrap_or(0.0),
            p50_response_ms: pct(0.50),
            p95_response_ms: pct(0.95),
            p99_response_ms: pct(0.99),
            max_response_ms: pct(1.0),
            read_mean_response_ms: mean_ms(self.read_response_ns, self.reads),
            write_mean_response_ms: mean_ms(self.write_response_ns, writes),
            ios: self.ios,
            mean_seek_cylinders: ratio(self.seek_cylinders, self.ios),
            non_sequential_fraction: ratio(self.non_sequential_ios, self.ios),
            cache_hit_fraction: ratio(self.cache_hits, self.ios),
        }
    }
}

fn mean_ms(sum_ns: u128, n: u64) -> Option<f64> {
    (n > 0).then(|| sum_ns as f64 / n as f64 / NS_PER_MS)
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The metrics of one group of requests. Requests are logical requests (as the trace
/// issued them); `ios` are the device I/Os they cost after array mapping and merging,
/// and seek, non-sequential and cache figures are per device I/O.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// Sum of device service times, idle excluded.
    pub busy_time_s: f64,
    pub mean_response_ms: f64,
    pub p50_response_ms: f64,
    pub p95_response_ms: f64,
    pub p99_response_ms: f64,
    pub max_response_ms: f64,
    pub read_mean_response_ms: Option<f64>,
    pub write_mean_response_ms: Option<f64>,
    pub ios: u64,
    pub mean_seek_cylinders: f64,
    /// Device I/Os not starting where the previous I/O on that device ended, over all
    /// device I/Os (the first I/O on a device counts as non-sequential).
    pub non_sequential_fraction: f64,
    pub cache_hit_fraction: f64,
}

/// One member device's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceReport {
    pub member: usize,
    pub name: String,
    /// The trace device it served, when each trace device had its own model.
    pub trace_device: Option<u32>,
    pub busy_time_s: f64,
    /// Busy time over the replay's duration (to the end of the work it still owed after
    /// the last request, if later).
    pub utilization: f64,
    pub ios: u64,
    /// Member I/Os before merging: the pieces of requests this member served.
    pub member_ios: u64,
    /// Per member I/O: completion minus the time it joined this member's queue (queue
    /// wait plus service), in ms.
    pub mean_response_ms: f64,
    pub p95_response_ms: f64,
    pub p99_response_ms: f64,
    pub read_mean_response_ms: Option<f64>,
    pub write_mean_response_ms: Option<f64>,
    pub mean_seek_cylinders: f64,
    pub non_sequential_fraction: f64,
    pub cache_hit_fraction: f64,
    pub energy_j: Option<f64>,
}

/// The figures of one device of the trace, served by its own model (`members`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceDeviceReport {
    /// The trace's device number (MSR disk number, SPC ASU, blkparse major:minor packed
    /// as `major << 20 | minor`, or the native device column).
    pub trace_device: u32,
    /// Indices into `devices` of the members that served it.
    pub members: Vec<usize>,
    #[serde(flatten)]
    pub summary: Summary,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseReport {
    pub phase: Phase,
    #[serde(flatten)]
    pub summary: Summary,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowReport {
    pub index: u64,
    /// Start of the window in simulated seconds (time windows).
    pub start_s: Option<f64>,
    /// Number of the window's first request, from 1 (request-count windows).
    pub first_request: Option<u64>,
    #[serde(flatten)]
    pub summary: Summary,
}

/// Everything a replay measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub overall: Summary,
    /// Simulated time from the first arrival to the last completion.
    pub makespan_s: f64,
    pub throughput_iops: f64,
    /// Member I/Os that were merged into a queued neighbour.
    pub merged_ios: u64,
    /// Sum over members; `None` when a member's model has no power figures.
    pub energy_j: Option<f64>,
    pub devices: Vec<DeviceReport>,
    /// Per device of the trace (its device column), when each had its own model; empty
    /// when the whole trace was replayed on one.
    pub trace_devices: Vec<TraceDeviceReport>,
    pub phases: Vec<PhaseReport>,
    pub windows: Vec<WindowReport>,
    /// The busy time split by what the I/O was for (client data, replicas, copies),
    /// each purpose's parts adding up to its busy time and the purposes to the total;
    /// left out of the JSON when all of it was the client's.
    #[serde(skip_serializing_if = "all_client")]
    pub purposes: Vec<PurposeReport>,
}

/// The device time spent for one [`Purpose`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PurposeReport {
    pub purpose: Purpose,
    /// Its share of the busy time: its requests' shares of the I/Os that served them,
    /// and the write-back of its cached writes whenever the drive did it.
    pub busy_time_s: f64,
    /// Seek, rotational wait and transfer of its own I/Os (FS2's T_s, T_r, T_t), and
    /// the rest: controller overhead and the write-back of its cached writes.
    pub seek_s: f64,
    pub rotation_s: f64,
    pub transfer_s: f64,
    pub other_s: f64,
    /// What its seeking and transferring drew above idle power (none when a model has
    /// no power figures).
    pub energy_above_idle_j: Option<f64>,
}

fn all_client(purposes: &[PurposeReport]) -> bool {
    purposes
        .iter()
        .all(|p| p.purpose == Purpose::Client || p.busy_time_s == 0.0)
}

struct DeviceAcc {
    name: String,
    trace_device: Option<u32>,
    group: usize,
    busy_ns: u64,
    /// When the member finished its work after the last I/O (see `record_drain`).
    end_ns: u64,
    acc: Acc,
}

/// The running metrics of one replay.
pub(crate) struct Metrics {
    overall: Acc,
    phases: [Acc; 2],
    window: Option<Window>,
    windows: Vec<Acc>,
    devices: Vec<DeviceAcc>,
    /// Per array of members (one per trace device when replayed per device).
    groups: Vec<(Option<u32>, Acc)>,
    /// Busy time by purpose.
    pub(crate) purposes: PurposeTime,
    /// Whether every member's model has power figures.
    pub(crate) all_powered: bool,
}

/// Windows keep fewer digits: there may be thousands of them.
const WINDOW_DIGITS: u8 = 2;
const OVERALL_DIGITS: u8 = 3;
/// Per member: enough for percentiles within 1%, small enough for arrays of 100 members.
const DEVICE_DIGITS: u8 = 2;

impl Metrics {
    pub(crate) fn new(window: Option<Window>) -> Metrics {
        Metrics {
            overall: Acc::new(OVERALL_DIGITS),
            phases: [Acc::new(OVERALL_DIGITS), Acc::new(OVERALL_DIGITS)],
            window,
            windows: Vec::new(),
            devices: Vec::new(),
            groups: Vec::new(),
            purposes: PurposeTime::default(),
            all_powered: true,
        }
    }

    /// A member device of group `group` (groups are added in order, from 0).
    pub(crate) fn add_device(&mut self, name: String, trace_device: Option<u32>, group: usize) {
        if self.groups.len() <= group {
            self.groups.push((trace_device, Acc::new(OVERALL_DIGITS)));
        }
        self.devices.push(DeviceAcc {
            name,
            trace_device,
            group,
            busy_ns: 0,
            end_ns: 0,
            acc: Acc::new(DEVICE_DIGITS),
        });
    }

    /// The window of a request that arrived at `arrival_ns` as the `index`-th (from 0).
    pub(crate) fn window_of(&self, arrival_ns: u64, index: u64) -> u32 {
        match self.window {
            None => 0,
            Some(Window::Time { ns }) => (arrival_ns / ns) as u32,
            Some(Window::Requests { n }) => (index / n) as u32,
        }
    }

    fn window_mut(&mut self, w: u32) -> Option<&mut Acc> {
        self.window?;
        let w = w as usize;
        while self.windows.len() <= w {
            self.windows.push(Acc::new(WINDOW_DIGITS));
        }
        Some(&mut self.windows[w])
    }

    pub(crate) fn record_response(
        &mut self,
        phase: Phase,
        window: u32,
        group: usize,
        write: bool,
        ns: u64,
    ) {
        self.overall.record_response(write, ns);
        self.groups[group].1.record_response(write, ns);
        self.phases[phase.index()].record_response(write, ns);
        if let Some(acc) = self.window_mut(window) {
            acc.record_response(write, ns);
        }
    }

    /// One device I/O dispatched on `member`, counted in the group of its first request.
    pub(crate) fn record_io(
        &mut self,
        member: usize,
        phase: Phase,
        window: u32,
        svc: &Service,
        non_sequential: bool,
    ) {
        self.overall.record_io(svc, non_sequential);
        self.phases[phase.index()].record_io(svc, non_sequential);
        let dev = &mut self.devices[member];
        dev.busy_ns += svc.total_ns + svc.background_ns;
        dev.acc.record_io(svc, non_sequential);
        self.groups[dev.group].1.record_io(svc, non_sequential);
        if let Some(acc) = self.window_mut(window) {
            acc.record_io(svc, non_sequential);
        }
        // Media work the device did while idle before this I/O (cached writes written
        // back) is busy time no request's service holds: counted in this I/O's group.
        if svc.background_ns > 0 {
            self.record_busy(phase, window, svc.background_ns);
        }
    }

    /// Busy time a member spent after its last I/O (its write-back cache emptying).
    pub(crate) fn record_drain(&mut self, member: usize, drain: Drain) {
        let ns = drain.busy_ns;
        let dev = &mut self.devices[member];
        dev.busy_ns += ns;
        dev.end_ns = drain.end_ns;
        self.overall.busy_ns += ns;
        self.phases[Phase::Normal.index()].busy_ns += ns;
        if let Some(acc) = self.windows.last_mut() {
            acc.busy_ns += ns;
        }
    }

    /// A member I/O (one piece of a request) completed on `member` `ns` after it was
    /// queued there.
    pub(crate) fn record_device_response(&mut self, member: usize, write: bool, ns: u64) {
        self.devices[member].acc.record_response(write, ns);
    }

    /// A request's share of a device I/O's service time.
    pub(crate) fn record_busy(&mut self, phase: Phase, window: u32, ns: u64) {
        self.overall.busy_ns += ns;
        self.phases[phase.index()].busy_ns += ns;
        if let Some(acc) = self.window_mut(window) {
            acc.busy_ns += ns;
        }
    }

    /// The report, with each member's energy over `makespan_ns`.
    pub(crate) fn report(
        &self,
        makespan_ns: u64,
        merged_ios: u64,
        energy: Vec<Option<f64>>,
    ) -> Report {
        let overall = self.overall.summary();
        let devices: Vec<DeviceReport> = self
            .devices
            .iter()
            .zip(energy)
            .enumerate()
            .map(|(member, (d, energy_j))| {
                let s = d.acc.summary();
                DeviceReport {
                    member,
                    name: d.name.clone(),
                    trace_device: d.trace_device,
                    busy_time_s: d.busy_ns as f64 / NS_PER_S,
                    utilization: ratio(d.busy_ns, makespan_ns.max(d.end_ns)),
                    ios: s.ios,
                    member_ios: s.requests,
                    mean_response_ms: s.mean_response_ms,
                    p95_response_ms: s.p95_response_ms,
                    p99_response_ms: s.p99_response_ms,
                    read_mean_response_ms: s.read_mean_response_ms,
                    write_mean_response_ms: s.write_mean_response_ms,
                    mean_seek_cylinders: s.mean_seek_cylinders,
                    non_sequential_fraction: s.non_sequential_fraction,
                    cache_hit_fraction: s.cache_hit_fraction,
                    energy_j,
                }
            })
            .collect();
        let energy_j = devices.iter().map(|d| d.energy_j).sum::<Option<f64>>();
        let makespan_s = makespan_ns as f64 / NS_PER_S;
        Report {
            throughput_iops: if makespan_ns == 0 {
                0.0
            } else {
                overall.requests as f64 / makespan_s
            },
            overall,
            makespan_s,
            merged_ios,
            energy_j,
            trace_devices: self.trace_device_reports(),
            devices,
            phases: Phase::ALL
                .iter()
                .map(|&phase| PhaseReport {
                    phase,
                    summary: self.phases[phase.index()].summary(),
                })
                .collect(),
            windows: self.window_reports(),
            purposes: self.purpose_reports(),
        }
    }

    fn purpose_reports(&self) -> Vec<PurposeReport> {
        let t = &self.purposes;
        let s = |ns: u64| ns as f64 / NS_PER_S;
        Purpose::ALL
            .iter()
            .map(|&purpose| {
                let i = purpose.index();
                let parts = t.seek_ns[i] + t.rotate_ns[i] + t.transfer_ns[i];
                PurposeReport {
                    purpose,
                    busy_time_s: s(t.busy_ns[i]),
                    seek_s: s(t.seek_ns[i]),
                    rotation_s: s(t.rotate_ns[i]),
                    transfer_s: s(t.transfer_ns[i]),
                    other_s: s(t.busy_ns[i].saturating_sub(parts)),
                    energy_above_idle_j: self.all_powered.then_some(t.energy_j[i]),
                }
            })
            .collect()
    }

    /// Per trace device: its requests' figures, its members' busy time.
    fn trace_device_reports(&self) -> Vec<TraceDeviceReport> {
        let mut out: Vec<TraceDeviceReport> = self
            .groups
            .iter()
            .enumerate()
            .filter_map(|(g, (trace_device, acc))| {
                let members: Vec<usize> = (0..self.devices.len())
                    .filter(|&m| self.devices[m].group == g)
                    .collect();
                let busy_ns: u64 = members.iter().map(|&m| self.devices[m].busy_ns).sum();
                let mut summary = acc.summary();
                summary.busy_time_s = busy_ns as f64 / NS_PER_S;
                Some(TraceDeviceReport {
                    trace_device: (*trace_device)?,
                    members,
                    summary,
                })
            })
            .collect();
        out.sort_by_key(|r| r.trace_device);
        out
    }

    fn window_reports(&self) -> Vec<WindowReport> {
        self.windows
            .iter()
            .enumerate()
            .map(|(i, acc)| {
                let i = i as u64;
                WindowReport {
                    index: i,
                    start_s: match self.window {
                        Some(Window::Time { ns }) => Some((i * ns) as f64 / NS_PER_S),
                        _ => None,
                    },
                    first_request: match self.window {
                        Some(Window::Requests { n }) => Some(i * n + 1),
                        _ => None,
                    },
                    summary: acc.summary(),
                }
            })
            .collect()
    }
}
