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
    }
    // R1 copies the 16 pages from an empty BOPT.
    assert_eq!(v["policies"]["borg"]["phases"][1]["bytes_moved"], 16 * 4096);
    assert_eq!(v["policies"]["vanilla"]["bytes_moved"], 0);
    assert!(v.get("runs").is_none());
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
