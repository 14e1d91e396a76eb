//! `reblock plan` and `reblock evaluate` end to end: JSON output parsed and checked
//! against figures worked out from the hand-made trace.

use assert_cmd::Command;
use serde_json::Value;

/// One process reads 16 scattered pages in the same order, 30 times, 20 ms apart
/// (native format: ts_ns pid command sector sectors op).
fn trace(dir: &std::path::Path) -> std::path::PathBuf {
    let pages: Vec<u64> = (0..16u64)
        .map(|k| (k + 1) * 1_234_567 % 20_000_000)
        .collect();
    let mut text = String::new();
    for i in 0..30 * 16 {
        let ts = i as u64 * 20_000_000;
        text.push_str(&format!("{ts} 7 app {} 8 R\n", pages[i % 16] * 8));
    }
    let path = dir.join("loop.trace");
    std::fs::write(&path, text).unwrap();
    path
}

fn reblock() -> Command {
    Command::cargo_bin("reblock").unwrap()
}

#[test]
fn evaluate_json_is_one_consistent_object() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let out = reblock()
        .args([
            "evaluate",
            t.to_str().unwrap(),
            "--device",
            "hdd:cheetah15k5",
        ])
        .args([
            "--policies",
            "vanilla,borg",
            "--interval",
            "2",
            "--bopt-size",
            "4MiB",
        ])
        .args(["--format", "native", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for name in ["vanilla", "borg"] {
        let p = &v["policies"][name];
        let busy = p["busy_time_s"].as_f64().unwrap();
        let normal = p["normal_busy_time_s"].as_f64().unwrap();
        let reconfig = p["reconfig_busy_time_s"].as_f64().unwrap();
        assert!((busy - normal - reconfig).abs() < 1e-9, "{name}");
        for key in [
            "mean_response_ms",
            "hit_rate",
            "non_sequential_fraction",
            "mean_seek_cylinders",
        ] {
            assert!(p[key].is_number(), "{name}.{key}");
        }
        let names: Vec<&str> = p["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["N0", "R1", "N1", "R2", "N2"], "{name}");
        // Energy per phase from the drive's power states, and their sum per policy.
        let phase_energy: f64 = p["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["energy_j"].as_f64().unwrap())
            .sum();
        let energy = p["energy_j"].as_f64().unwrap();
        assert!(energy > 0.0, "{name}");
        assert!((energy - phase_energy).abs() <= 1e-9 * energy, "{name}");
    }
    // R1 copies the 16 pages from an empty BOPT.
    assert_eq!(v["policies"]["borg"]["phases"][1]["bytes_moved"], 16 * 4096);
    assert_eq!(v["policies"]["vanilla"]["bytes_moved"], 0);
    assert!(v.get("runs").is_none());
}

#[test]
fn a_run_without_reconfiguration_reports_plus_zero_copy_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let out = reblock()
        .args([
            "evaluate",
            t.to_str().unwrap(),
            "--device",
            "hdd:cheetah15k5",
        ])
        .args(["--policies", "vanilla,borg", "--interval", "0"])
        .args(["--format", "native", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("-0.0"), "a negative zero in {text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    for name in ["vanilla", "borg"] {
        let r = v["policies"][name]["reconfig_busy_time_s"]
            .as_f64()
            .unwrap();
        assert!(r == 0.0 && r.is_sign_positive(), "{name}: {r}");
    }
}

#[test]
fn sweep_runs_one_point_per_value_and_a_bad_spec_names_the_bad_part() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let base = |extra: &[&str]| {
        let mut c = reblock();
        c.args([
            "evaluate",
            t.to_str().unwrap(),
            "--device",
            "hdd:cheetah15k5",
        ])
        .args([
            "--policies",
            "borg",
            "--interval",
            "1",
            "--format",
            "native",
            "--json",
        ])
        .args(extra);
        c
    };
    let out = base(&["--sweep", "bopt-size=1MiB,2MiB;write-buffer=0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let points: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| {
            (
                r["parameter"].as_str().unwrap(),
                r["value"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        points,
        [
            ("bopt-size", "1MiB"),
            ("bopt-size", "2MiB"),
            ("write-buffer", "0")
        ]
    );
    assert!(runs
        .iter()
        .all(|r| r["policies"]["borg"]["busy_time_s"].is_number()));

    let out = base(&["--sweep", "bopt-size=1MiB;cache=3"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`cache=3`") && err.contains("unknown parameter `cache`"),
        "{err}"
    );
}

#[test]
fn plan_writes_a_plan_json_the_layout_crate_reads() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let plan = dir.path().join("plan.json");
    let out = reblock()
        .args([
            "plan",
            t.to_str().unwrap(),
            "--policy",
            "borg",
            "--bopt-size",
            "1MiB",
        ])
        .args([
            "--format",
            "native",
            "--json",
            "--out",
            plan.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pages_placed"], 16);
    let text = std::fs::read_to_string(&plan).unwrap();
    let p: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(p["version"], 1);
    assert_eq!(p["policy"], "borg");
    let pages: u64 = p["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pages"].as_u64().unwrap())
        .sum();
    assert_eq!(pages, 16);
    // Slots are consecutive from 0 in placement order.
    let first = &p["ranges"][0];
    assert_eq!(first["slot"], 0);
}

/// 64 hot 4 KiB extents read (and every fourth written) round after round, 300 us apart,
/// on an array of 4 SSDs: seed 003's optimizer must spread each extent's 512 B blocks over
/// the disks and beat the skewed (alpha 1) static placement on the testing half.
#[test]
fn evaluate_array_json_follows_the_contract_and_parallel_beats_skewed_static() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..4000u64 {
        let op = if i % 4 == 3 { "W" } else { "R" };
        text.push_str(&format!("{} 1 db {} 8 {op}\n", i * 300_000, (i % 64) * 96));
    }
    let t = dir.path().join("hot.trace");
    std::fs::write(&t, text).unwrap();
    let report = dir.path().join("report");
    let out = reblock()
        .args([
            "evaluate",
            t.to_str().unwrap(),
            "--array",
            "4xssd:k9xxg08uxm",
        ])
        .args(["--initial", "zipf:0,1", "--support", "1,100000"])
        .args(["--session", "request", "--policies", "static,parallel"])
        .args(["--report", report.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["train_requests"], 2000);
    assert_eq!(v["test_requests"], 2000);
    let runs = v["runs"].as_array().unwrap();
    let points: Vec<(f64, u64)> = runs
        .iter()
        .map(|r| (r["alpha"].as_f64().unwrap(), r["support"].as_u64().unwrap()))
        .collect();
    assert_eq!(points, [(0.0, 1), (0.0, 100000), (1.0, 1), (1.0, 100000)]);
    for r in runs {
        for p in ["static", "parallel"] {
            let p = &r["policies"][p];
            for key in [
                "mean_response_ms",
                "read_mean_response_ms",
                "write_mean_response_ms",
            ] {
                assert!(p[key].as_f64().unwrap() > 0.0, "{key}: {p}");
            }
            assert!(p["bytes_moved"].is_u64());
        }
    }
    let (s, p) = (
        &runs[2]["policies"]["static"],
        &runs[2]["policies"]["parallel"],
    );
    let ms = |x: &Value| x["mean_response_ms"].as_f64().unwrap();
    assert!(ms(p) < ms(s), "parallel {} vs static {}", ms(p), ms(s));
    // 64 extents x 8 blocks of 512 B: at most every block moves once.
    let moved = p["bytes_moved"].as_u64().unwrap();
    assert!(moved > 0 && moved <= 64 * 8 * 512, "{moved}");
    // No pair reaches a support of 100000: nothing moves, static's figures.
    let none = &runs[3]["policies"]["parallel"];
    assert_eq!(none["bytes_moved"], 0);
    assert_eq!(ms(none), ms(s));
    let html = std::fs::read_to_string(report.join("parallel.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("Support 1"),
        "report"
    );
}

#[test]
fn evaluate_array_refuses_bad_flags_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let run = |extra: &[&str]| {
        let out = reblock()
            .args([
                "evaluate",
                t.to_str().unwrap(),
                "--array",
                "4xssd:k9xxg08uxm",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{extra:?} succeeded");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(run(&["--initial", "uniform"]).contains("--initial"));
    assert!(run(&["--support", "0"]).contains("--support"));
    assert!(run(&["--policies", "static,borg"]).contains("unknown array policy `borg`"));
    assert!(run(&["--bopt-size", "4MiB"]).contains("cannot be used with"));
    let out = reblock()
        .args(["evaluate", t.to_str().unwrap(), "--support", "5"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "--support without --array");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--array"));
}

/// dlr-frag permutes the pages the workload already uses (seed 002 §6.1): `--out` writes
/// that placement (targets are the same 16 pages in a new order), and the plan reader
/// refuses it by name instead of failing on a missing field.
#[test]
fn plan_out_writes_a_data_area_placement_for_dlr_frag() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let path = dir.path().join("frag.json");
    let out = reblock()
        .args(["plan", t.to_str().unwrap(), "--policy", "dlr-frag"])
        .args(["--k-window", "4", "--out", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let p: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(p["space"], "data-area");
    let (mut from, mut to) = (Vec::new(), Vec::new());
    for r in p["ranges"].as_array().unwrap() {
        let (f, n, t) = (
            r["fs_page"].as_u64().unwrap(),
            r["pages"].as_u64().unwrap(),
            r["target"].as_u64().unwrap(),
        );
        from.extend(f..f + n);
        to.extend(t..t + n);
    }
    from.sort_unstable();
    to.sort_unstable();
    assert_eq!(from.len(), 16);
    assert_eq!(from, to, "targets are the workload's own pages");
    let e = reblock_layout::Plan::from_json(&text, "frag.json").unwrap_err();
    assert!(e.to_string().contains("data-area"), "{e}");
}

/// A trace of two devices (the native format's optional seventh field) is evaluated once
/// per device, each on a disk of its own sized from its own requests, never merged onto
/// one: the JSON lists both under `devices`, each with its requests alone.
#[test]
fn evaluate_lays_out_each_trace_device_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.trace");
    let mut text = String::new();
    for i in 0..400u64 {
        let (dev, sector) = if i % 4 == 0 {
            (1, 9_000_000 + (i % 16) * 8)
        } else {
            (0, (i * 7_919 % 4_000) * 8)
        };
        text.push_str(&format!("{} 7 app {sector} 8 R {dev}\n", i * 1_000_000));
    }
    std::fs::write(&path, text).unwrap();
    let out = reblock()
        .args(["evaluate", "--policies", "vanilla,borg", "--json"])
        .arg(&path)
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[0]["trace_device"], 0);
    assert_eq!(devices[1]["trace_device"], 1);
    assert_eq!(devices[0]["requests"], 300);
    assert_eq!(devices[1]["requests"], 100);
    for d in devices {
        assert!(d["device_choice"]["device"].as_str().is_some());
        assert!(d["policies"]["vanilla"]["busy_time_s"].as_f64().unwrap() > 0.0);
    }
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("addresses 2 devices"), "{err}");
}

/// FS2 on the scattered read loop: the 16 pages are replicated next to each other in
/// free space and read there, so fs2's total busy time (copies included) and energy fall
/// below vanilla's; with no free space it is vanilla; a bad free-space file is named.
#[test]
fn evaluate_fs2_replicates_into_free_space_and_reports_access_time() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let run = |free: &str| {
        reblock()
            .args([
                "evaluate",
                t.to_str().unwrap(),
                "--device",
                "hdd:cheetah15k5",
            ])
            .args(["--policies", "vanilla,fs2", "--interval", "2"])
            .args(["--free-space", free, "--format", "native", "--json"])
            .output()
            .unwrap()
    };
    let out = run("untouched");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let assumption = v["geometry"]["free_space"].as_str().unwrap();
    assert!(assumption.contains("never touches"), "{assumption}");
    assert!(v["geometry"]["free_pages"].as_u64().unwrap() > 0);
    let (van, fs2) = (&v["policies"]["vanilla"], &v["policies"]["fs2"]);
    let f = |p: &Value, k: &str| p[k].as_f64().unwrap();
    assert!(
        f(fs2, "busy_time_s") < 0.9 * f(van, "busy_time_s"),
        "fs2 {} vs vanilla {}",
        fs2["busy_time_s"],
        van["busy_time_s"]
    );
    // Replicas are written from the application's reads, in the normal phases.
    assert!(
        fs2["bytes_moved"].as_u64().unwrap() > 0,
        "replicas were written"
    );
    assert!(f(fs2, "energy_j") <= f(van, "energy_j"));
    assert!(f(fs2, "hit_rate") > 0.0);
    let parts = |a: &Value| -> f64 {
        ["seek_s", "rotation_s", "transfer_s", "other_s"]
            .iter()
            .map(|k| f(a, k))
            .sum()
    };
    for p in [van, fs2] {
        let a = &p["access_time"];
        assert!((parts(a) - f(p, "busy_time_s")).abs() < 1e-6, "{a}");
    }
    assert!(f(&fs2["access_time"], "seek_s") < f(&van["access_time"], "seek_s"));
    // The replica writes are reconfiguration; FS2's T_A covers the client's requests.
    assert!(f(fs2, "replica_busy_time_s") > 0.0);
    assert!(f(fs2, "reconfig_busy_time_s") >= f(fs2, "replica_busy_time_s"));
    for p in [van, fs2] {
        let a = &p["client_access_time"];
        assert!((parts(a) - f(p, "normal_busy_time_s")).abs() < 1e-6, "{a}");
    }

    let none: Value = serde_json::from_slice(&run("0").stdout).unwrap();
    assert_eq!(
        none["policies"]["fs2"]["busy_time_s"],
        none["policies"]["vanilla"]["busy_time_s"]
    );
    let missing = dir.path().join("no-such-freemap.json");
    let out = run(missing.to_str().unwrap());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-freemap.json"), "{err}");
}

/// `--free-space discards` on a blkparse capture of the same read loop: an fstrim of
/// the first 20M pages before it frees them all but the 16 pages read after it; a
/// discard of one of them at the end frees that one again. A trace without discards
/// is refused, naming the flag.
#[test]
fn evaluate_free_space_from_the_traces_discards() {
    let dir = tempfile::tempdir().unwrap();
    let native = std::fs::read_to_string(trace(dir.path())).unwrap();
    let mut text =
        String::from("  8,0    0        1     0.000000000   900  Q  DS 0 + 160000000 [fstrim]\n");
    text.push_str("  8,0    0        2     0.000000100   900  D  DS 0 + 160000000 [fstrim]\n");
    let mut last = 0;
    for (i, line) in native.lines().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        let ts: u64 = f[0].parse().unwrap();
        last = ts;
        text.push_str(&format!(
            "  8,0    0 {:8} {:5}.{:09} 7  Q   R {} + 8 [app]\n",
            i + 3,
            ts / 1_000_000_000,
            ts % 1_000_000_000,
            f[3]
        ));
    }
    let end = last + 1_000_000;
    text.push_str(&format!(
        "  8,0    0 99999 {:5}.{:09} 900  Q  D 9876536 + 8 [fstrim]\n",
        end / 1_000_000_000,
        end % 1_000_000_000
    ));
    let path = dir.path().join("loop.blktrace.txt");
    std::fs::write(&path, text).unwrap();
    let run = |t: &std::path::Path, format: &str| {
        reblock()
            .arg("evaluate")
            .arg(t)
            .args(["--format", format])
            .args(["--device", "hdd:cheetah15k5", "--policies", "vanilla,fs2"])
            .args(["--interval", "2", "--free-space", "discards", "--json"])
            .output()
            .unwrap()
    };
    let out = run(&path, "blkparse");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"], 480);
    let assumption = v["geometry"]["free_space"].as_str().unwrap();
    assert!(assumption.contains("2 discards"), "{assumption}");
    assert_eq!(v["geometry"]["free_pages"], 20_000_000 - 16 + 1);
    let busy = |p: &str| v["policies"][p]["busy_time_s"].as_f64().unwrap();
    assert!(busy("fs2") < 0.9 * busy("vanilla"));

    let out = run(&dir.path().join("loop.trace"), "native");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--free-space discards") && err.contains("loop.trace"),
        "{err}"
    );
}
