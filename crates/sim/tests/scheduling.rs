//! Service order of each scheduler and request merging, on crafted queues whose answers
//! are worked out by hand in the comments.

mod common;

use common::*;
use reblock_sim::{Config, SchedulerKind};

/// Five 8-sector reads arriving together with the head at sector 500.
const BATCH: [u64; 5] = [900, 100, 600, 300, 700];

fn order(kind: SchedulerKind) -> Vec<u64> {
    let reqs: Vec<_> = BATCH.iter().map(|&s| read(0, s, 8)).collect();
    let config = Config {
        scheduler: kind,
        ..Config::default()
    };
    let dev = LineDevice::new(MS, 0, 1000).with_head(500);
    let (_, _, served) = replay_one(dev, config, &reqs).unwrap();
    sectors_served(&served)
}

#[test]
fn fcfs_serves_in_arrival_order() {
    assert_eq!(order(SchedulerKind::Fcfs), [900, 100, 600, 300, 700]);
}

#[test]
fn clook_sweeps_up_from_the_head_then_wraps_to_the_lowest() {
    // Head 500: 600, 700, 900 upwards, then wrap to 100 and continue up to 300.
    assert_eq!(order(SchedulerKind::Clook), [600, 700, 900, 100, 300]);
}

#[test]
fn sstf_takes_the_nearest_each_time() {
    // Head 500: 600 (100 away, vs 300 at 200); head 608: 700 (92 vs 308);
    // head 708: 900 (192 vs 408); head 908: 300 (608 vs 808); then 100.
    assert_eq!(order(SchedulerKind::Sstf), [600, 700, 900, 300, 100]);
}

#[test]
fn clook_shortens_total_seek_against_fcfs() {
    // Busy time = 5 x 1 ms fixed + 1 us per sector of head travel.
    let busy = |kind| {
        let reqs: Vec<_> = BATCH.iter().map(|&s| read(0, s, 8)).collect();
        let config = Config {
            scheduler: kind,
            ..Config::default()
        };
        let dev = LineDevice::new(MS, 0, 1000).with_head(500);
        replay_one(dev, config, &reqs)
            .unwrap()
            .0
            .overall
            .busy_time_s
    };
    // FCFS head path: 500->900 (400), 908->100 (808), 108->600 (492), 608->300 (308),
    // 308->700 (392): 2400 sectors = 2.4 ms, plus 5 ms.
    assert_close(busy(SchedulerKind::Fcfs), 0.0074, 1e-9);
    // C-LOOK: 500->600 (100), 608->700 (92), 708->900 (192), 908->100 (808),
    // 108->300 (192): 1384 sectors.
    assert_close(busy(SchedulerKind::Clook), 0.006384, 1e-9);
}

fn merged(reqs: &[(u64, u64, u32, bool)], max_merge_sectors: u32) -> Vec<(u64, u32, bool)> {
    let config = Config {
        max_merge_sectors,
        ..Config::default()
    };
    let (report, done, served) = replay_one(LineDevice::constant(MS), config, reqs).unwrap();
    assert_eq!(done.len(), reqs.len(), "every request completes");
    assert_eq!(report.overall.ios as usize, served.len());
    served
        .iter()
        .map(|(_, r)| (r.sector, r.sectors, r.write))
        .collect()
}

#[test]
fn contiguous_reads_merge_up_to_the_maximum_and_not_beyond() {
    // Ten 8-sector reads 0..80 at once, merged into requests of at most 32 sectors.
    let reqs: Vec<_> = (0..10).map(|i| read(0, i * 8, 8)).collect();
    assert_eq!(
        merged(&reqs, 32),
        [(0, 32, false), (32, 32, false), (64, 16, false)]
    );
    // A maximum that is not a multiple of the request size: 24 + 8 would be 32 > 28.
    assert_eq!(
        merged(&reqs, 28),
        [
            (0, 24, false),
            (24, 24, false),
            (48, 24, false),
            (72, 8, false)
        ]
    );
}

#[test]
fn merging_disabled_by_zero() {
    let reqs: Vec<_> = (0..4).map(|i| read(0, i * 8, 8)).collect();
    assert_eq!(
        merged(&reqs, 0),
        [(0, 8, false), (8, 8, false), (16, 8, false), (24, 8, false)]
    );
}

#[test]
fn front_merge_prepends_a_request_ending_where_a_queued_one_starts() {
    let reqs = [read(0, 16, 8), read(0, 8, 8), read(0, 0, 8)];
    assert_eq!(merged(&reqs, 256), [(0, 24, false)]);
}

#[test]
fn reads_and_writes_do_not_merge() {
    let reqs = [
        read(0, 0, 8),
        write(0, 8, 8),
        read(0, 16, 8),
        write(0, 24, 8),
    ];
    assert_eq!(
        merged(&reqs, 256),
        [(0, 8, false), (8, 8, true), (16, 8, false), (24, 8, true)]
    );
}

#[test]
fn merged_io_service_time_is_shared_by_sectors() {
    // One merged 8+24 sector I/O on a 1 ms + 1 us/sector device: 1.032 ms, shared 1:3.
    let dev = LineDevice::new(MS, 1000, 0);
    let config = Config::default();
    let (report, mut done, served) =
        replay_one(dev, config, &[read(0, 0, 8), read(0, 8, 24)]).unwrap();
    assert_eq!(served.len(), 1);
    assert_eq!(report.merged_ios, 1);
    done.sort_by_key(|c| c.number);
    assert_eq!(done[0].service_ns, 1_032_000 / 4);
    assert_eq!(done[1].service_ns, 1_032_000 - 1_032_000 / 4);
    assert!(done.iter().all(|c| c.completion_ns == 1_032_000));
}

#[test]
fn requests_arriving_while_busy_are_reordered_by_clook() {
    // The first request (at 0) starts alone; three more arrive during its service and
    // C-LOOK serves them ascending from where the first left the head (108).
    let reqs = [
        read(0, 100, 8),
        read(MS / 2, 50, 8),
        read(MS / 2, 400, 8),
        read(MS / 2, 200, 8),
    ];
    let config = Config {
        scheduler: SchedulerKind::Clook,
        ..Config::default()
    };
    let (_, _, served) = replay_one(LineDevice::constant(MS), config, &reqs).unwrap();
    assert_eq!(sectors_served(&served), [100, 200, 400, 50]);
}
