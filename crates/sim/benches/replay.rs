//! Replay speed: simulated requests per second of wall time on one core, for one HDD with
//! FCFS (the bar: at least one million per second). Baseline in the same run: the
//! HDD's `service()` calls alone on the same requests, i.e. what the device model costs
//! without queues, events and metrics.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use reblock_device::{parse_spec, Array, DevRequest, Device, Service};
use reblock_sim::{Config, IterSource, Pacing, Phase, Replay, SchedulerKind, Submission};

const REQUESTS: u64 = 200_000;
const DEVICE: &str = "hdd:barracuda";

/// A generated workload, streamed: 8-sector requests, 70% continuing the previous one,
/// 30% at a random place, a third of them writes, one every 20 ms of trace time.
fn workload(capacity_sectors: u64) -> impl Iterator<Item = Submission> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut sector = 0;
    (0..REQUESTS).map(move |i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sector = if x % 10 < 7 {
            (sector + 8) % (capacity_sectors - 8)
        } else {
            (x >> 20) % (capacity_sectors - 8)
        };
        Submission {
            number: i + 1,
            ts_ns: i * 20_000_000,
            req: DevRequest {
                sector,
                sectors: 8,
                write: x.is_multiple_of(3),
            },
            device: 0,
            phase: Phase::Normal,
            physical: false,
        }
    })
}

/// A device costing nothing to model: what remains is the replay engine's own cost.
struct Instant(u64);

impl Device for Instant {
    fn name(&self) -> &str {
        "instant"
    }
    fn capacity_sectors(&self) -> u64 {
        self.0
    }
    fn service(&mut self, _start_ns: u64, _req: &DevRequest) -> Service {
        Service {
            total_ns: 1_000_000,
            ..Service::default()
        }
    }
    fn estimate_ns(&self, _start_ns: u64, _req: &DevRequest) -> u64 {
        1_000_000
    }
    fn position_key(&self, sector: u64) -> u64 {
        sector
    }
    fn head_key(&self) -> u64 {
        0
    }
    fn energy_j(&self, _elapsed_ns: u64) -> Option<f64> {
        None
    }
}

fn engine_only(c: &mut Criterion) {
    let cap = parse_spec(DEVICE).unwrap().array.capacity_sectors();
    let mut g = c.benchmark_group("replay_engine");
    g.throughput(Throughput::Elements(REQUESTS));
    g.bench_function("fcfs_open_loop_1x_instant_device", |b| {
        b.iter_batched(
            || {
                let array: Box<dyn Array> = parse_spec(DEVICE).unwrap().array;
                let dev: Box<dyn Device> = Box::new(Instant(cap));
                Replay::new(array, vec![dev], Config::default()).unwrap()
            },
            |r| {
                r.run(&mut IterSource(workload(cap)), &mut ())
                    .unwrap()
                    .overall
                    .requests
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn replay(c: &mut Criterion) {
    let capacity = parse_spec(DEVICE).unwrap().array.capacity_sectors();
    let mut g = c.benchmark_group("replay_hdd");
    g.throughput(Throughput::Elements(REQUESTS));
    g.bench_function("baseline_service_calls_only", |b| {
        b.iter_batched(
            || parse_spec(DEVICE).unwrap().members.pop().unwrap(),
            |mut dev| {
                let mut t = 0;
                for s in workload(capacity) {
                    t = t.max(s.ts_ns) + dev.service(t.max(s.ts_ns), &s.req).total_ns;
                }
                t
            },
            BatchSize::LargeInput,
        )
    });
    for (name, pacing) in [
        ("fcfs_open_loop_1x", Pacing::Open { speed: 1.0 }),
        ("fcfs_closed_loop_qd4", Pacing::Closed { depth: 4 }),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let built = parse_spec(DEVICE).unwrap();
                    let config = Config {
                        pacing,
                        scheduler: SchedulerKind::Fcfs,
                        ..Config::default()
                    };
                    Replay::new(built.array, built.members, config).unwrap()
                },
                |r| {
                    r.run(&mut IterSource(workload(capacity)), &mut ())
                        .unwrap()
                        .overall
                        .requests
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, replay, engine_only);
criterion_main!(benches);
