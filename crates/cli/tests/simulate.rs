//! `reblock simulate` end to end on small native traces written here, on the real HDD model.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn reblock() -> Command {
    Command::cargo_bin("reblock").unwrap()
}

/// Writes a native trace (`ts_ns pid command sector sectors R|W`) of `reqs`.
fn trace(dir: &Path, name: &str, reqs: &[(u64, u64, u32, char)]) -> PathBuf {
    let path = dir.join(name);
    let text: String = reqs
        .iter()
        .map(|(ts, sector, n, op)| format!("{ts} 100 app {sector} {n} {op}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// 60 requests: 20 sequential 8-sector reads, 20 scattered reads, 20 scattered writes,
/// 50 ms apart in trace time.
fn mixed(dir: &Path) -> PathBuf {
    let reqs: Vec<_> = (0..60u64)
        .map(|i| {
            let ts = i * 50_000_000;
            match i / 20 {
                0 => (ts, 1000 + i * 8, 8, 'R'),
                1 => (ts, (i * 7_919_993) % 3_000_000, 8, 'R'),
                _ => (ts, (i * 3_331_777) % 3_000_000, 16, 'W'),
            }
        })
        .collect();
    trace(dir, "mixed.txt", &reqs)
}

fn simulate_json(args: &[&str], trace: &Path) -> Value {
    let out = reblock()
        .arg("simulate")
        .arg(trace)
        .args(args)
        .arg("--json")
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn json_reports_the_trace_on_one_hdd() {
    let dir = tempfile::tempdir().unwrap();
    let v = simulate_json(&["--device", "hdd:barracuda"], &mixed(dir.path()));
    assert_eq!(v["requests"], 60);
    assert_eq!(
        (v["reads"].as_u64(), v["writes"].as_u64()),
        (Some(40), Some(20))
    );
    // 50 ms apart and a few ms each: no merging, one device I/O per request.
    assert_eq!(v["ios"], 60);
    let busy = f(&v, "busy_time_s");
    let makespan = f(&v, "makespan_s");
    assert!(
        busy > 0.0 && busy < makespan,
        "busy {busy} within {makespan}"
    );
    // Open loop at 1x: the last request arrives at 2.95 s.
    assert!(makespan > 2.95 && makespan < 3.1, "makespan {makespan}");
    // Nothing waits, so mean response is the mean service time.
    assert!((f(&v, "mean_response_ms") - busy * 1000.0 / 60.0).abs() < 1e-6);
    let (p50, p95, p99) = (
        f(&v, "p50_response_ms"),
        f(&v, "p95_response_ms"),
        f(&v, "p99_response_ms"),
    );
    assert!(p50 <= p95 && p95 <= p99 && p99 <= f(&v, "max_response_ms"));
    // Sequential reads seek nowhere; scattered ones do.
    assert!(f(&v, "mean_seek_cylinders") > 0.0);
    let nonseq = f(&v, "non_sequential_fraction");
    assert!((41.0 / 60.0..=1.0).contains(&nonseq), "{nonseq}");
    assert!(f(&v, "read_mean_response_ms") > 0.0 && f(&v, "write_mean_response_ms") > 0.0);
    assert_eq!(v["devices"].as_array().unwrap().len(), 1);
    assert!((f(&v["devices"][0], "busy_time_s") - busy).abs() < 1e-9);
    assert!(v.get("energy_j").is_some());
    assert_eq!(v["phases"][0]["phase"], "normal");
    assert_eq!(v["phases"][0]["requests"], 60);
}

#[test]
fn higher_speed_raises_response_time() {
    let dir = tempfile::tempdir().unwrap();
    let t = mixed(dir.path());
    let slow = simulate_json(&["--device", "hdd:barracuda"], &t);
    let fast = simulate_json(&["--device", "hdd:barracuda", "--speed", "100000"], &t);
    assert!(f(&fast, "mean_response_ms") > 5.0 * f(&slow, "mean_response_ms"));
    assert!(f(&fast, "makespan_s") < f(&slow, "makespan_s"));
}

#[test]
fn closed_loop_with_clook_gains_throughput_from_depth() {
    let dir = tempfile::tempdir().unwrap();
    let t = mixed(dir.path());
    let run = |qd: &str| {
        simulate_json(
            &[
                "--device",
                "hdd:barracuda",
                "--queue-depth",
                qd,
                "--scheduler",
                "clook",
            ],
            &t,
        )
    };
    let (d1, d16) = (run("1"), run("16"));
    assert_eq!(d1["pacing"], "closed");
    assert!(f(&d16, "throughput_iops") > f(&d1, "throughput_iops"));
    assert!(f(&d16, "mean_response_ms") > f(&d1, "mean_response_ms"));
}

#[test]
fn windows_by_request_count() {
    let dir = tempfile::tempdir().unwrap();
    let v = simulate_json(
        &["--device", "hdd:barracuda", "--window", "25"],
        &mixed(dir.path()),
    );
    let counts: Vec<u64> = v["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [25, 25, 10]);
}

#[test]
fn beyond_capacity_fails_naming_the_request_unless_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(
        dir.path(),
        "far.txt",
        &[(0, 0, 8, 'R'), (1000, 1_000_000_000_000, 8, 'R')],
    );
    let out = reblock()
        .args(["simulate", "--device", "hdd:barracuda"])
        .arg(&t)
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    for part in ["request 2", "1000000000000", "capacity", "--wrap"] {
        assert!(err.contains(part), "{err:?} lacks {part:?}");
    }
    let v = simulate_json(&["--device", "hdd:barracuda", "--wrap"], &t);
    assert_eq!(v["requests"], 2);
}

#[test]
fn unknown_device_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = reblock()
        .args(["simulate", "--device", "hdd:nosuchdrive"])
        .arg(mixed(dir.path()))
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains("nosuchdrive") && err.contains("barracuda"),
        "{err}"
    );
}

#[test]
fn per_request_csv_has_one_row_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("req.csv");
    let v = simulate_json(
        &[
            "--device",
            "hdd:barracuda",
            "--per-request",
            csv.to_str().unwrap(),
        ],
        &mixed(dir.path()),
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 60);
    // response_ns (column 10) sums to the reported mean times the count.
    let total_ns: u64 = rows.iter().map(|r| r[10].parse::<u64>().unwrap()).sum();
    let mean_ms = total_ns as f64 / 60.0 / 1e6;
    assert!((mean_ms - f(&v, "mean_response_ms")).abs() < 1e-6);
}

#[test]
fn table_output_names_busy_time_and_response() {
    let dir = tempfile::tempdir().unwrap();
    let out = reblock()
        .args(["simulate", "--device", "hdd:barracuda", "--window", "1s"])
        .arg(mixed(dir.path()))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    for part in [
        "busy time",
        "p95",
        "requests   60 (40 reads, 20 writes)",
        "window",
    ] {
        assert!(text.contains(part), "{text} lacks {part:?}");
    }
}

/// A real two-disk MSR trace: the wdev server's disks 1 and 3 (whole volumes from SNIA
/// IOTTA's MSR Cambridge set), merged in timestamp order as the server recorded them.
fn wdev_two_disks(dir: &Path) -> PathBuf {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut lines: Vec<(u64, String)> = ["msr-wdev_1.csv", "msr-wdev_3.csv"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(data.join(f))
                .unwrap()
                .lines()
                .map(|l| (l.split(',').next().unwrap().parse().unwrap(), l.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    lines.sort();
    let path = dir.join("wdev.csv");
    let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_two_disk_msr_trace_whole_matches_its_disks_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--device", "hdd:cheetah15k5"];
    let whole = simulate_json(&args, &wdev_two_disks(dir.path()));
    assert_eq!(whole["requests"], 1055 + 682);
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut weighted = 0.0;
    for (disk, file, n) in [(1, "msr-wdev_1.csv", 1055), (3, "msr-wdev_3.csv", 682)] {
        let alone = simulate_json(&args, &data.join(file));
        assert_eq!(alone["requests"], n);
        let part = whole["trace_devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["trace_device"] == disk)
            .unwrap_or_else(|| panic!("disk {disk} missing in {whole}"));
        assert_eq!(part["requests"], n);
        // Each disk alone and inside the whole trace: the same figures (the replay's time
        // origin moves the rotational phase a little).
        let (a, p) = (f(&alone, "mean_response_ms"), f(part, "mean_response_ms"));
        assert!(
            (a - p).abs() / a < 0.02,
            "disk {disk}: alone {a} ms, in the whole {p} ms"
        );
        weighted += a * n as f64;
    }
    let one_by_one = weighted / (1055 + 682) as f64;
    let w = f(&whole, "mean_response_ms");
    assert!(
        (w - one_by_one).abs() / one_by_one < 0.02,
        "whole {w} ms, one by one {one_by_one} ms"
    );
    // One model per disk, never the two merged onto one.
    assert_eq!(whole["trace_devices"].as_array().unwrap().len(), 2);
}
