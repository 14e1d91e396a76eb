//! The simulator against DiskSim 4.0's behaviour: the drive's own queue, SSD parallelism
//! under a queue of commands, and one model per device of the trace.

mod common;

use common::*;
use reblock_device::{parse_spec, DevRequest, Device};
use reblock_sim::{
    require_single_device, Config, DeviceFactory, IterSource, Pacing, Phase, Replay, Report,
    SimError, Submission,
};

/// splitmix64: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Exponential with mean `mean`.
    fn exp(&mut self, mean: f64) -> f64 {
        let u = ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        -mean * u.ln()
    }
}

/// `n` random 4 KiB reads below `limit` on trace device `device`, Poisson arrivals
/// `mean_gap_ns` apart.
fn random_reads(n: usize, limit: u64, mean_gap_ns: f64, device: u32, seed: u64) -> Vec<Submission> {
    let mut rng = Rng(seed);
    let mut t = 0.0;
    (0..n)
        .map(|i| {
            t += rng.exp(mean_gap_ns);
            Submission {
                number: i as u64 + 1,
                ts_ns: t as u64,
                req: DevRequest {
                    sector: rng.below(limit / 8 - 1) * 8,
                    sectors: 8,
                    write: false,
                },
                device,
                phase: Phase::Normal,
                physical: false,
            }
        })
        .collect()
}

fn factory(spec: &'static str) -> DeviceFactory {
    Box::new(move || {
        let b = parse_spec(spec).unwrap();
        (b.array, b.members)
    })
}

fn run(replay: Replay, subs: Vec<Submission>) -> Report {
    let mut done = Collect::default();
    replay
        .run(&mut IterSource(subs.into_iter()), &mut done)
        .unwrap()
}

fn replay_spec(spec: &'static str, config: Config, subs: Vec<Submission>) -> Report {
    run(
        Replay::per_trace_device(factory(spec), config).unwrap(),
        subs,
    )
}

const CHEETAH_SECTORS: u64 = 286_749_487;

#[test]
fn the_cheetahs_own_queue_serves_the_nearest_command_first() {
    // Random 4 KiB reads, Poisson 8 ms apart (about 70% busy): DiskSim gives 10.19 ms
    // with the drive's 8-deep shortest-positioning-time-first queue behind a FCFS host
    // queue; one command at a time in arrival order gives about 13.8 ms (+35%).
    let subs = random_reads(10_000, CHEETAH_SECTORS, 8e6, 0, 3);
    let queued = replay_spec("hdd:cheetah15k5", Config::default(), subs.clone());
    assert_close(queued.overall.mean_response_ms, 10.19, 0.05);
    let b = parse_spec("hdd:cheetah15k5").unwrap();
    let plain: Vec<Box<dyn Device>> = b
        .members
        .into_iter()
        .map(|d| Box::new(Logged(d, Log::default())) as Box<dyn Device>)
        .collect();
    let one_at_a_time = run(
        Replay::new(b.array, plain, Config::default()).unwrap(),
        subs,
    );
    assert!(
        one_at_a_time.overall.mean_response_ms > 1.2 * queued.overall.mean_response_ms,
        "{} vs {}",
        one_at_a_time.overall.mean_response_ms,
        queued.overall.mean_response_ms
    );
}

#[test]
fn ssd_k9_serves_over_40k_random_4k_reads_per_second_at_queue_depth_32() {
    let subs = random_reads(40_000, 56_157_696, 1.0, 0, 5);
    let config = Config {
        pacing: Pacing::Closed { depth: 32 },
        ..Config::default()
    };
    let r = replay_spec("ssd:k9", config, subs);
    assert!(r.throughput_iops >= 40_000.0, "{}", r.throughput_iops);
    // Busy time counts overlapping I/Os once: never more than the run lasted.
    assert!(r.overall.busy_time_s <= r.makespan_s * 1.000_001, "{r:?}");
}

#[test]
fn each_device_of_the_trace_gets_its_own_model() {
    // Two disks of one trace, interleaved: replayed whole, each keeps its own model
    // (its own head, cache and queue), so the mean response is what the two give one by
    // one (within 2%; only the absolute arrival times, hence rotational positions, of
    // the second differ), and nothing of one lands on the other's model.
    let a = random_reads(3_000, CHEETAH_SECTORS, 20e6, 0, 7);
    let b = random_reads(3_000, CHEETAH_SECTORS, 20e6, 1, 8);
    let mut both: Vec<Submission> = a.iter().chain(&b).copied().collect();
    both.sort_by_key(|s| s.ts_ns);
    for (i, s) in both.iter_mut().enumerate() {
        s.number = i as u64 + 1;
    }
    let whole = replay_spec("hdd:cheetah15k5", Config::default(), both);
    let ra = replay_spec("hdd:cheetah15k5", Config::default(), a);
    let rb = replay_spec("hdd:cheetah15k5", Config::default(), b);
    let one_by_one = (ra.overall.mean_response_ms + rb.overall.mean_response_ms) / 2.0;
    assert_close(whole.overall.mean_response_ms, one_by_one, 0.02);
    assert_eq!(whole.devices.len(), 2);
    let devices: Vec<u32> = whole.trace_devices.iter().map(|t| t.trace_device).collect();
    assert_eq!(devices, [0, 1]);
    for t in &whole.trace_devices {
        assert_eq!(t.summary.requests, 3_000);
        assert_eq!(t.members.len(), 1);
        assert_eq!(
            whole.devices[t.members[0]].trace_device,
            Some(t.trace_device)
        );
        assert_eq!(whole.devices[t.members[0]].member_ios, 3_000);
    }
    // One disk alone at this pace barely queues.
    assert!(
        ra.overall.mean_response_ms < 7.0,
        "{}",
        ra.overall.mean_response_ms
    );
}

#[test]
fn laying_out_a_trace_of_several_devices_is_refused_naming_them() {
    assert!(require_single_device([3, 3, 3]).is_ok());
    assert!(require_single_device([]).is_ok());
    let e = require_single_device([2, 2, 5, 9, 5]).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::SeveralDevices {
                count: 3,
                first: 2,
                other: 5
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("3 devices") && msg.contains("device column"),
        "{msg}"
    );
}
