//! Queueing sanity: load raises response time, closed-loop depth raises throughput, idle
//! time is not busy time, arrays and mappers fan requests out and in.

mod common;

use common::*;
use reblock_device::DevRequest;
use reblock_sim::{
    Config, Interleave, IterSource, Mapper, Pacing, Phase, Replay, SchedulerKind, Submission,
};

/// 200 reads of 8 sectors every 10 ms, at scattered sectors.
fn steady_trace() -> Vec<(u64, u64, u32, bool)> {
    let mut x: u64 = 12345;
    (0..200)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            read(i * 10 * MS, (x >> 33) % 1_000_000, 8)
        })
        .collect()
}

fn open(speed: f64) -> Config {
    Config {
        pacing: Pacing::Open { speed },
        max_merge_sectors: 0,
        ..Config::default()
    }
}

#[test]
fn open_loop_response_grows_with_speed() {
    let trace = steady_trace();
    let mean = |speed| {
        let (r, _, _) = replay_one(LineDevice::constant(5 * MS), open(speed), &trace).unwrap();
        r.overall.mean_response_ms
    };
    // Real time: a 5 ms service every 10 ms never waits.
    assert_close(mean(1.0), 5.0, 1e-12);
    // 2x: arrivals every 5 ms, exactly the service time: still no wait.
    assert_close(mean(2.0), 5.0, 1e-12);
    // 4x: arrivals every 2.5 ms; request i waits i * 2.5 ms, mean wait 99.5 * 2.5 ms.
    assert_close(mean(4.0), 5.0 + 99.5 * 2.5, 1e-9);
    assert!(mean(8.0) > mean(4.0));
}

#[test]
fn open_loop_idle_time_is_not_busy_time() {
    // Three 1 ms requests ten seconds apart: 3 ms busy over a 20.001 s replay.
    let trace = [read(0, 0, 8), read(10 * S, 0, 8), read(20 * S, 0, 8)];
    let (r, done, _) = replay_one(LineDevice::constant(MS), open(1.0), &trace).unwrap();
    assert_close(r.overall.busy_time_s, 0.003, 1e-12);
    assert_close(r.makespan_s, 20.001, 1e-12);
    assert_close(r.devices[0].utilization, 0.003 / 20.001, 1e-9);
    assert_eq!(
        done.iter().map(|c| c.arrival_ns).collect::<Vec<_>>(),
        [0, 10 * S, 20 * S]
    );
    // Energy of the fixture: 10 W for 3 ms busy, 1 W for the 19.998 s idle.
    assert_close(r.energy_j.unwrap(), 0.03 + 19.998, 1e-9);
}

#[test]
fn speed_divides_the_trace_clock() {
    // Timestamps start at 5 s: arrivals are measured from the first request.
    let trace = [read(5 * S, 0, 8), read(5 * S + 168 * MS, 0, 8)];
    let (_, done, _) = replay_one(LineDevice::constant(MS), open(168.0), &trace).unwrap();
    assert_eq!(done[1].arrival_ns, MS);
}

#[test]
fn out_of_order_timestamps_arrive_no_earlier_than_the_previous() {
    let trace = [read(0, 0, 8), read(10 * MS, 100, 8), read(4 * MS, 200, 8)];
    let (_, done, _) = replay_one(LineDevice::constant(MS), open(1.0), &trace).unwrap();
    let arrivals: Vec<_> = done.iter().map(|c| (c.number, c.arrival_ns)).collect();
    assert_eq!(arrivals, [(1, 0), (2, 10 * MS), (3, 10 * MS)]);
}

fn closed(depth: usize) -> Config {
    Config {
        pacing: Pacing::Closed { depth },
        scheduler: SchedulerKind::Clook,
        max_merge_sectors: 0,
        ..Config::default()
    }
}

#[test]
fn closed_loop_depth_one_is_back_to_back_service() {
    // 200 requests of 5 ms, one at a time: 1 s, 200 IOPS, every response 5 ms.
    let (r, _, _) = replay_one(LineDevice::constant(5 * MS), closed(1), &steady_trace()).unwrap();
    assert_close(r.makespan_s, 1.0, 1e-12);
    assert_close(r.throughput_iops, 200.0, 1e-9);
    assert_close(r.overall.p99_response_ms, 5.0, 1e-3);
}

#[test]
fn closed_loop_deeper_queue_raises_throughput_and_response_time() {
    // On a seeking device, a deeper queue lets C-LOOK shorten the seeks (more
    // throughput) while each request waits behind more others (longer response).
    let run = |depth| {
        let dev = LineDevice::new(MS, 0, 10);
        replay_one(dev, closed(depth), &steady_trace()).unwrap().0
    };
    let (d1, d4, d16) = (run(1), run(4), run(16));
    assert!(d4.throughput_iops > d1.throughput_iops * 1.2);
    assert!(d16.throughput_iops > d4.throughput_iops);
    assert!(d4.overall.mean_response_ms > d1.overall.mean_response_ms);
    assert!(d16.overall.mean_response_ms > d4.overall.mean_response_ms);
    assert_eq!(d16.overall.requests, 200);
}

#[test]
fn mirror_reads_go_to_the_member_that_finishes_first() {
    // Two reads at once on a mirror of 1 ms devices: one per member, both done at 1 ms.
    // A write goes to both members.
    let devs: Vec<Box<dyn reblock_device::Device>> = vec![
        Box::new(LineDevice::constant(MS)),
        Box::new(LineDevice::constant(MS)),
    ];
    let replay = Replay::new(Box::new(Mirror(1 << 20)), devs, Config::default()).unwrap();
    let trace = subs(&[read(0, 0, 8), read(0, 1000, 8), write(10 * MS, 0, 8)]);
    let mut done = Collect::default();
    let r = replay
        .run(&mut IterSource(trace.into_iter()), &mut done)
        .unwrap();
    let members: Vec<_> = done.0.iter().map(|c| (c.number, c.member)).collect();
    assert!(
        members.contains(&(1, 0)) && members.contains(&(2, 1)),
        "{members:?}"
    );
    assert_eq!(done.0[0].completion_ns, MS);
    assert_eq!(done.0[1].completion_ns, MS);
    assert_eq!((r.devices[0].ios, r.devices[1].ios), (2, 2));
    assert_close(r.overall.busy_time_s, 0.004, 1e-12);
}

/// Serves the first half of every request at its place and the second half 1000
/// sectors further: a stand-in for an indirector that splits a request.
struct SplitHalves;

impl Mapper for SplitHalves {
    fn map(&mut self, req: &DevRequest, out: &mut Vec<DevRequest>) {
        let half = req.sectors / 2;
        out.push(DevRequest {
            sectors: half,
            ..*req
        });
        out.push(DevRequest {
            sector: req.sector + u64::from(half) + 1000,
            sectors: req.sectors - half,
            ..*req
        });
    }
}

#[test]
fn a_mapped_request_completes_with_its_last_extent() {
    let dev = LineDevice::constant(MS);
    let log = dev.log.clone();
    let config = Config {
        max_merge_sectors: 0,
        ..Config::default()
    };
    let replay = Replay::new(Box::new(Single(1 << 20)), vec![Box::new(dev)], config)
        .unwrap()
        .with_mapper(Box::new(SplitHalves));
    let mut done = Collect::default();
    let trace = subs(&[read(0, 100, 16)]);
    let r = replay
        .run(&mut IterSource(trace.into_iter()), &mut done)
        .unwrap();
    let served: Vec<_> = log
        .lock()
        .unwrap()
        .iter()
        .map(|(_, r)| (r.sector, r.sectors))
        .collect();
    assert_eq!(served, [(100, 8), (1108, 8)]);
    assert_eq!((r.overall.requests, r.overall.ios), (1, 2));
    assert_eq!(done.0[0].completion_ns, 2 * MS);
    assert_eq!(done.0[0].service_ns, 2 * MS);
}

#[test]
fn injected_reconfiguration_io_is_accounted_in_its_own_phase() {
    // Workload: reads every 10 ms, each split in two by the mapper. Copies: 8-sector
    // writes injected as physical I/O (bypassing the mapper), interleaved by time.
    let workload = subs(&[read(0, 0, 8), read(10 * MS, 100, 8), read(20 * MS, 200, 8)]);
    let copies: Vec<Submission> = [5 * MS, 15 * MS]
        .iter()
        .enumerate()
        .map(|(i, &ts_ns)| Submission {
            number: i as u64 + 1,
            ts_ns,
            req: DevRequest {
                sector: 5000,
                sectors: 8,
                write: true,
            },
            device: 0,
            phase: Phase::Reconfiguration,
            physical: true,
        })
        .collect();
    let dev = LineDevice::constant(MS);
    let replay = Replay::new(
        Box::new(Single(1 << 20)),
        vec![Box::new(dev)],
        Config::default(),
    )
    .unwrap()
    .with_mapper(Box::new(SplitHalves));
    let mut source = Interleave::new(
        IterSource(workload.into_iter()),
        IterSource(copies.into_iter()),
    );
    let r = replay.run(&mut source, &mut ()).unwrap();
    let normal = &r.phases[0];
    let reconf = &r.phases[1];
    assert_eq!(
        (normal.phase, reconf.phase),
        (Phase::Normal, Phase::Reconfiguration)
    );
    // Normal reads are split in two by the mapper (2 ms each); copies are not (1 ms).
    assert_eq!((normal.summary.requests, normal.summary.ios), (3, 6));
    assert_eq!((reconf.summary.requests, reconf.summary.ios), (2, 2));
    assert_close(normal.summary.busy_time_s, 0.006, 1e-12);
    assert_close(reconf.summary.busy_time_s, 0.002, 1e-12);
    assert_close(r.overall.busy_time_s, 0.008, 1e-12);
}
