//! Busy time by purpose: a replica write's service, and the write-back of it that the
//! drive's cache does later, are the replica's; a merged I/O of mixed purposes splits by
//! sectors; the purposes add up to the total; a request does not wait for the replica
//! written from its data.

use reblock_device::{parse_spec, DevRequest};
use reblock_sim::{
    Config, IterSource, Mapper, Phase, Purpose, Replay, Report, SchedulerKind, Submission,
};

/// Writes at or past this sector are replica writes.
const REPLICAS_AT: u64 = 100_000_000;

/// Tags writes into the replica zone as replica writes; a read of `COPIED` sectors is
/// also written to the replica zone from its data (FS2's piggyback).
struct Tagging;

const COPIED: u32 = 24;

impl Mapper for Tagging {
    fn map(&mut self, req: &DevRequest, out: &mut Vec<DevRequest>) {
        out.push(*req);
    }

    fn map_for(
        &mut self,
        req: &DevRequest,
        out: &mut Vec<DevRequest>,
        purposes: &mut Vec<Purpose>,
    ) {
        out.push(*req);
        let replica = req.write && req.sector >= REPLICAS_AT;
        purposes.push(if replica {
            Purpose::Replica
        } else {
            Purpose::Client
        });
        if !req.write && req.sectors == COPIED {
            out.push(DevRequest {
                sector: REPLICAS_AT + 4_000_000,
                sectors: 65_536,
                write: true,
            });
            purposes.push(Purpose::Replica);
        }
    }
}

fn replay(reqs: &[(u64, DevRequest)], tagging: bool) -> Report {
    let built = parse_spec("hdd:wd2500aaks").unwrap();
    let config = Config {
        scheduler: SchedulerKind::Fcfs,
        ..Config::default()
    };
    let mut replay = Replay::new(built.array, built.members, config).unwrap();
    if tagging {
        replay = replay.with_mapper(Box::new(Tagging));
    }
    let subs = reqs
        .iter()
        .enumerate()
        .map(|(i, &(ts_ns, req))| Submission {
            number: i as u64 + 1,
            ts_ns,
            req,
            device: 0,
            phase: Phase::Normal,
            physical: false,
        });
    replay.run(&mut IterSource(subs), &mut ()).unwrap()
}

fn busy(r: &Report, p: Purpose) -> f64 {
    r.purposes
        .iter()
        .find(|x| x.purpose == p)
        .map_or(0.0, |x| x.busy_time_s)
}

fn adds_up(r: &Report) {
    let sum: f64 = r.purposes.iter().map(|p| p.busy_time_s).sum();
    assert!(
        (sum - r.overall.busy_time_s).abs() < 1e-8,
        "{:?}",
        r.purposes
    );
    for p in &r.purposes {
        let parts = p.seek_s + p.rotation_s + p.transfer_s + p.other_s;
        assert!((parts - p.busy_time_s).abs() < 1e-8, "{p:?}");
    }
}

fn write(sector: u64, sectors: u32) -> DevRequest {
    DevRequest {
        sector,
        sectors,
        write: true,
    }
}

fn read(sector: u64, sectors: u32) -> DevRequest {
    DevRequest {
        sector,
        sectors,
        write: false,
    }
}

#[test]
fn a_cached_replica_write_pays_its_write_back_done_in_the_next_requests_idle_time() {
    // 1 MiB of replica, acknowledged from the drive's cache at once and written back in
    // the idle time before a client read far away 100 ms later.
    let reqs = [
        (0, write(REPLICAS_AT + 50_000, 2048)),
        (100_000_000, read(1_000, 8)),
    ];
    let tagged = replay(&reqs, true);
    let plain = replay(&reqs, false);
    adds_up(&tagged);
    // Purposes change no total.
    assert_eq!(tagged.overall.busy_time_s, plain.overall.busy_time_s);
    assert_eq!(tagged.energy_j, plain.energy_j);
    let replica = busy(&tagged, Purpose::Replica);
    // Acknowledging it took a command overhead; writing it back a seek, a rotational
    // wait and 1 MiB of transfer: without the write-back the replica's share would be
    // well under a millisecond.
    assert!(replica > 0.008, "replica {replica} s");
    // The client read is left its own service only: the same read on an idle drive
    // whose head is where the write-back left it costs no more than a full seek.
    let client = busy(&tagged, Purpose::Client);
    assert!(client < 0.035, "client {client} s");
    let e = |p: Purpose| {
        (tagged.purposes.iter().find(|x| x.purpose == p))
            .and_then(|x| x.energy_above_idle_j)
            .unwrap()
    };
    assert!(e(Purpose::Replica) > 0.0);
}

#[test]
fn a_merged_write_of_mixed_purposes_splits_by_sectors_write_back_included() {
    // While the drive reads far away, a client write and the replica write right after
    // it queue and merge into one 16-sector write, cached, then written back at the end.
    let at = REPLICAS_AT - 8;
    let reqs = [
        (0, read(300_000_000, 8)),
        (10, write(at, 8)),
        (10, write(REPLICAS_AT, 8)),
    ];
    let tagged = replay(&reqs, true);
    assert_eq!(tagged.merged_ios, 1);
    adds_up(&tagged);
    let alone = replay(&reqs[..1], false).overall.busy_time_s;
    let (client, replica) = (
        busy(&tagged, Purpose::Client),
        busy(&tagged, Purpose::Replica),
    );
    // Half of the merged write (its service and its write-back) is the replica's.
    assert!(replica > 0.001, "replica {replica} s");
    assert!(
        ((client - alone) - replica).abs() < 2e-9,
        "client {client} s (read alone {alone} s), replica {replica} s"
    );
}

#[test]
fn a_read_responds_without_waiting_for_the_replica_written_from_its_data() {
    // The read's data is also written as 32 MiB of replicas, more than the drive's cache:
    // a write to the media of a few hundred ms that the read must not wait for.
    let reqs = [(0, read(5_000_000, COPIED))];
    let tagged = replay(&reqs, true);
    let alone = replay(&reqs, false);
    adds_up(&tagged);
    assert!(busy(&tagged, Purpose::Replica) > 0.1);
    assert_eq!(tagged.overall.requests, 1);
    assert_eq!(
        tagged.overall.mean_response_ms,
        alone.overall.mean_response_ms
    );
    // The replay still lasts until the replica is written.
    assert!(tagged.makespan_s > 0.1, "{}", tagged.makespan_s);
}
