//! Metrics against hand-computed answers: percentiles, read/write means, windows,
//! non-sequential fraction, seek distance, capacity errors and --wrap, per-request files.

mod common;

use common::*;
use reblock_sim::{Config, IterSource, PerRequestWriter, Replay, SimError, Window};

fn spaced(config_window: Option<Window>) -> Config {
    Config {
        window: config_window,
        max_merge_sectors: 0,
        ..Config::default()
    }
}

#[test]
fn percentiles_match_a_hand_computed_list() {
    // Requests of 1..=100 sectors, one second apart so none waits, on a device taking
    // 1 ms per sector: responses are exactly 1..=100 ms, given in a scrambled order.
    // Nearest rank: p50 = 50 ms, p95 = 95 ms, p99 = 99 ms, max = 100 ms, mean 50.5 ms.
    // Odd sizes are reads (mean of 1, 3, .., 99 = 50), even sizes writes (mean 51).
    let sizes: Vec<u32> = (0..100).map(|i| (i * 37) % 100 + 1).collect();
    let reqs: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (i as u64 * S, i as u64 * 1000, n, n % 2 == 0))
        .collect();
    let dev = LineDevice::new(0, MS, 0);
    let (r, _, _) = replay_one(dev, spaced(None), &reqs).unwrap();
    let o = &r.overall;
    assert_eq!((o.requests, o.reads, o.writes), (100, 50, 50));
    assert_close(o.mean_response_ms, 50.5, 1e-12);
    assert_close(o.p50_response_ms, 50.0, 1e-3);
    assert_close(o.p95_response_ms, 95.0, 1e-3);
    assert_close(o.p99_response_ms, 99.0, 1e-3);
    assert_close(o.max_response_ms, 100.0, 1e-3);
    assert_close(o.read_mean_response_ms.unwrap(), 50.0, 1e-12);
    assert_close(o.write_mean_response_ms.unwrap(), 51.0, 1e-12);
    assert_close(o.busy_time_s, 5.050, 1e-12);
}

#[test]
fn windows_by_time_and_by_request_count() {
    // 1 ms requests at 0.1 s, 0.2 s, 1.5 s and 3.2 s (window 2 is empty).
    let reqs = [
        read(100 * MS, 0, 8),
        read(200 * MS, 8, 8),
        write(1500 * MS, 100, 8),
        read(3200 * MS, 200, 8),
    ];
    let by_time = "1s".parse().unwrap();
    let (r, _, _) = replay_one(LineDevice::constant(MS), spaced(Some(by_time)), &reqs).unwrap();
    let counts: Vec<_> = r.windows.iter().map(|w| w.summary.requests).collect();
    assert_eq!(counts, [2, 1, 0, 1]);
    let starts: Vec<_> = r.windows.iter().map(|w| w.start_s.unwrap()).collect();
    assert_eq!(starts, [0.0, 1.0, 2.0, 3.0]);
    assert_close(r.windows[0].summary.busy_time_s, 0.002, 1e-12);
    assert_eq!(r.windows[1].summary.writes, 1);
    // Window 0: the first I/O is non-sequential, the second continues it.
    assert_close(r.windows[0].summary.non_sequential_fraction, 0.5, 1e-12);

    let by_count = "3".parse().unwrap();
    let (r, _, _) = replay_one(LineDevice::constant(MS), spaced(Some(by_count)), &reqs).unwrap();
    let counts: Vec<_> = r.windows.iter().map(|w| w.summary.requests).collect();
    assert_eq!(counts, [3, 1]);
    assert_eq!(r.windows[1].first_request, Some(4));
}

#[test]
fn window_syntax() {
    assert_eq!("60s".parse::<Window>(), Ok(Window::Time { ns: 60 * S }));
    assert_eq!("500ms".parse::<Window>(), Ok(Window::Time { ns: 500 * MS }));
    assert_eq!("2m".parse::<Window>(), Ok(Window::Time { ns: 120 * S }));
    assert_eq!("1000".parse::<Window>(), Ok(Window::Requests { n: 1000 }));
    for bad in ["0", "0s", "s", "ten", "5 parsecs", ""] {
        assert!(bad.parse::<Window>().is_err(), "{bad} should not parse");
    }
}

#[test]
fn non_sequential_fraction_and_seek_distance_per_device() {
    // One at a time: 0..8, 8..16 (sequential), 100..108 (jump), 108..116 (sequential),
    // 50..58 (jump back). Non-sequential: the first, 100 and 50: 3 of 5.
    // Seek: head 0 -> 0 (0), 8 -> 8 (0), 16 -> 100 (84 sectors), 108 -> 108 (0),
    // 116 -> 50 (66): at 10 sectors per cylinder 0+0+8+0+6 = 14 cylinders, 2.8 mean.
    let reqs: Vec<_> = [0, 8, 100, 108, 50]
        .iter()
        .enumerate()
        .map(|(i, &s)| read(i as u64 * S, s, 8))
        .collect();
    let (r, _, _) = replay_one(LineDevice::constant(MS), spaced(None), &reqs).unwrap();
    assert_close(r.overall.non_sequential_fraction, 0.6, 1e-12);
    assert_close(r.devices[0].non_sequential_fraction, 0.6, 1e-12);
    assert_close(r.overall.mean_seek_cylinders, 2.8, 1e-12);
    assert_eq!(r.overall.ios, 5);
}

#[test]
fn beyond_capacity_is_an_error_naming_request_sector_and_capacity() {
    let dev = LineDevice::constant(MS).with_capacity(1000);
    let reqs = [read(0, 0, 8), read(S, 995, 8)];
    let err = replay_one(dev, spaced(None), &reqs).unwrap_err();
    assert!(matches!(
        err,
        SimError::BeyondCapacity {
            number: 2,
            sector: 995,
            capacity_sectors: 1000,
            ..
        }
    ));
    let msg = err.to_string();
    for part in ["request 2", "995..1003", "1000 sectors", "--wrap"] {
        assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    }
}

#[test]
fn wrap_folds_addresses_modulo_the_capacity() {
    let dev = LineDevice::constant(MS).with_capacity(1000);
    let config = Config {
        wrap: true,
        ..spaced(None)
    };
    // 2500 -> 500; 995..1003 straddles the end: moved back whole to 992..1000.
    let reqs = [read(0, 2500, 8), read(S, 995, 8), read(2 * S, 1000, 8)];
    let (_, done, served) = replay_one(dev, config, &reqs).unwrap();
    assert_eq!(sectors_served(&served), [500, 992, 0]);
    assert_eq!(
        done.iter().map(|c| c.sector).collect::<Vec<_>>(),
        [500, 992, 0]
    );
    let too_big = replay_one(
        LineDevice::constant(MS).with_capacity(4),
        Config {
            wrap: true,
            ..spaced(None)
        },
        &[read(0, 0, 8)],
    );
    assert!(matches!(
        too_big,
        Err(SimError::LargerThanDevice { number: 1, .. })
    ));
}

#[test]
fn bad_settings_are_errors() {
    use reblock_sim::Pacing;
    let make = |pacing| {
        let config = Config {
            pacing,
            ..Config::default()
        };
        Replay::new(
            Box::new(Single(100)),
            vec![Box::new(LineDevice::constant(MS))],
            config,
        )
        .err()
        .map(|e| e.to_string())
    };
    assert!(make(Pacing::Open { speed: 0.0 }).unwrap().contains("speed"));
    assert!(make(Pacing::Open { speed: f64::NAN })
        .unwrap()
        .contains("speed"));
    assert!(make(Pacing::Closed { depth: 0 }).unwrap().contains("depth"));
    assert!(make(Pacing::Open { speed: 168.0 }).is_none());
    let two_members = Replay::new(
        Box::new(Mirror(100)),
        vec![Box::new(LineDevice::constant(MS))],
        Config::default(),
    );
    assert!(two_members.err().unwrap().to_string().contains("2 members"));
}

fn write_per_request(path: &std::path::Path) {
    let dev = LineDevice::constant(MS);
    let replay = Replay::new(Box::new(Single(1 << 20)), vec![Box::new(dev)], spaced(None)).unwrap();
    let mut out = PerRequestWriter::create(path).unwrap();
    // The second arrives during the first's service and waits 0.5 ms.
    let trace = subs(&[read(0, 0, 8), write(MS / 2, 100, 16)]);
    replay
        .run(&mut IterSource(trace.into_iter()), &mut out)
        .unwrap();
    out.finish().unwrap();
}

#[test]
fn per_request_csv_has_arrival_start_completion_and_service() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("req.csv");
    write_per_request(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "number,phase,op,sector,sectors,trace_device,member,arrival_ns,start_ns,completion_ns,response_ns,service_ns",
            "1,normal,R,0,8,0,0,0,0,1000000,1000000,1000000",
            "2,normal,W,100,16,0,0,500000,1000000,2000000,1500000,1000000",
        ]
    );
}

#[test]
fn per_request_parquet_reads_back() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt64Type;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("req.parquet");
    write_per_request(&path);
    let file = std::fs::File::open(&path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
    let response = batches[0]
        .column_by_name("response_ns")
        .unwrap()
        .as_primitive::<UInt64Type>();
    assert_eq!(response.values().to_vec(), [1_000_000, 1_500_000]);
    let op = batches[0].column_by_name("op").unwrap().as_string::<i32>();
    assert_eq!((op.value(0), op.value(1)), ("R", "W"));
}

/// Per-device response (queue wait plus service of each member I/O): three writes at
/// t = 0 on a mirror of a 1 ms and a 3 ms device. Member 0 finishes them at 1, 2, 3 ms
/// (mean 2 ms); member 1 at 3, 6, 9 ms (mean 6 ms, p99 9 ms). Each request completes
/// with its slower copy: 3, 6, 9 ms overall.
#[test]
fn per_device_response_counts_queue_wait_and_service_of_member_ios() {
    let (fast, slow) = (LineDevice::constant(MS), LineDevice::constant(3 * MS));
    let reqs = [write(0, 0, 8), write(0, 100, 8), write(0, 200, 8)];
    let replay = Replay::new(
        Box::new(Mirror(1 << 30)),
        vec![Box::new(fast), Box::new(slow)],
        spaced(None),
    )
    .unwrap();
    let r = replay
        .run(&mut IterSource(subs(&reqs).into_iter()), &mut ())
        .unwrap();
    let (d0, d1) = (&r.devices[0], &r.devices[1]);
    assert_eq!((d0.member_ios, d1.member_ios), (3, 3));
    assert_close(d0.mean_response_ms, 2.0, 1e-12);
    assert_close(d1.mean_response_ms, 6.0, 1e-12);
    assert_close(d1.p99_response_ms, 9.0, 1e-2);
    assert_close(d1.write_mean_response_ms.unwrap(), 6.0, 1e-12);
    assert_eq!(d1.read_mean_response_ms, None);
    assert_close(r.overall.mean_response_ms, 6.0, 1e-12);
}
