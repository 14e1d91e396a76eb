//! `reblock replay` against nbdkit and against `reblock serve --emulate`: the counts and
//! bytes it reports are the trace's, an address past the export's end is an error naming
//! the request, and the emulated disk's busy time follows the access pattern (scattered
//! reads cost many times what the same number of sequential reads cost).

mod common;

use assert_cmd::cargo::cargo_bin;
use common::{msr_reads as msr_trace, status_of as status_json, wait_for};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn replay_json(trace: &Path, sock: &Path, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(cargo_bin("reblock"))
        .arg("replay")
        .arg(trace)
        .args(["--unix", sock.to_str().unwrap(), "--json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "replay: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn replay_against_nbdkit_counts_the_trace_and_names_a_request_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("kit.sock");
    let mut kit = Command::new("nbdkit")
        .args(["-f", "-U", sock.to_str().unwrap(), "memory", "64M"])
        .stderr(Stdio::null())
        .spawn()
        .expect("nbdkit is installed (.ci/run installs it)");
    wait_for(&sock, &mut kit);
    let _kit = Killed(kit);
    let trace = msr_trace(dir.path(), "t.csv", 300, |i| (i * 7919 % 16000) * 8);
    for extra in [&[][..], &["--queue-depth", "4"], &["--speed", "1000"]] {
        let v = replay_json(&trace, &sock, extra);
        assert_eq!(v["requests"], 300, "{v}");
        assert_eq!(v["reads"], 300);
        assert_eq!(v["bytes_read"], 300 * 4096);
        assert_eq!(v["errors"], 0);
        assert!(v["latency_p99_us"].as_f64().unwrap() > 0.0);
    }
    let far = msr_trace(dir.path(), "far.csv", 3, |i| i * (40 << 20) / 512);
    let out = Command::new(cargo_bin("reblock"))
        .arg("replay")
        .arg(&far)
        .args(["--unix", sock.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("request 3") && err.contains("--wrap"), "{err}");
}

/// `serve --create SIZE --emulate hdd:wd2500aaks` plus `extra`, ready; its socket and
/// control socket.
fn serve_emulated(
    dir: &Path,
    name: &str,
    size: &str,
    extra: &[&str],
) -> (Killed, PathBuf, PathBuf) {
    let img = dir.join(format!("{name}.img"));
    let sock = dir.join(format!("{name}.sock"));
    let ctl = dir.join(format!("{name}.sock.ctl"));
    let mut serve = Command::new(cargo_bin("reblock"))
        .arg("serve")
        .arg(&img)
        .args(["--create", size, "--unix", sock.to_str().unwrap()])
        .args(["--emulate", "hdd:wd2500aaks"])
        .args(extra)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ctl, &mut serve);
    wait_for(&sock, &mut serve);
    (Killed(serve), sock, ctl)
}

fn emulated_busy(dir: &Path, name: &str, trace: &Path) -> f64 {
    let extra = ["--emulate-speed", "20", "--replan-policy", "vanilla"];
    let (_serve, sock, ctl) = serve_emulated(dir, name, "2G", &extra);
    let before = status_busy(&ctl);
    let v = replay_json(trace, &sock, &[]);
    assert_eq!(v["requests"], 200, "{v}");
    status_busy(&ctl) - before
}

fn status_busy(ctl: &Path) -> f64 {
    let v = status_json(ctl);
    v["emulated_busy_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("no emulated_busy_s in {v}"))
}

#[test]
fn emulated_disk_charges_scattered_reads_far_more_than_sequential_ones() {
    let dir = tempfile::tempdir().unwrap();
    // 200 reads spread over 1.5 GiB vs 200 reads one after another.
    let scattered = msr_trace(dir.path(), "scattered.csv", 200, |i| {
        (i * 104_729 % 393_216) * 8
    });
    let sequential = msr_trace(dir.path(), "sequential.csv", 200, |i| 8 * i);
    let s = emulated_busy(dir.path(), "a", &scattered);
    let q = emulated_busy(dir.path(), "b", &sequential);
    // A 7200 rpm disk: a scattered 4 KiB read costs several ms, a sequential one far less.
    assert!(s > 200.0 * 0.003, "scattered busy {s} s");
    assert!(s > 5.0 * q, "scattered {s} s vs sequential {q} s");
}

/// `serve` learns by default with the guard on: after a replay of a small hot set read
/// over and over, `status --json` shows the guard's decisions, the figures behind the
/// last one and why, and counts that add up to the plans made.
#[test]
fn serve_learns_by_default_and_status_shows_the_guards_decision() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--emulate-speed", "50", "--replan-every", "100"];
    let (_serve, sock, ctl) = serve_emulated(dir.path(), "g", "1G", &extra);
    // 40 pages scattered over 1 GiB, read in the same order 10 times.
    let hot = msr_trace(dir.path(), "hot.csv", 400, |i| (i % 40) * 52_424 + 8);
    let v = replay_json(&hot, &sock, &[]);
    assert_eq!(v["requests"], 400, "{v}");
    let status = || status_json(&ctl);
    let mut st = status();
    for _ in 0..200 {
        let done = st["reconfiguration"]["steps_pending"] == 0;
        if st["replan"]["plans"].as_u64().unwrap_or(0) >= 1 && done {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        st = status();
    }
    let r = &st["replan"];
    assert_eq!(r["policy"], "borg", "{st}");
    assert_eq!(r["guard_device"], "hdd:wd2500aaks", "{r}");
    let plans = r["plans"].as_u64().unwrap();
    assert!(plans >= 1, "{r}");
    let decided = ["admitted", "refused", "sent_home"]
        .iter()
        .map(|k| r[k].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(decided, plans, "{r}");
    let a = &r["last_admission"];
    assert!(
        ["plan", "keep", "home"].contains(&a["choice"].as_str().unwrap()),
        "{a}"
    );
    assert!(a["predicted_plain_busy_s"].as_f64().unwrap() > 0.0, "{a}");
    assert!(
        r["last_admission_reason"]
            .as_str()
            .unwrap()
            .contains("keep"),
        "{r}"
    );
}

/// Emulated busy of two replays of `trace` through `serve --emulate` with `extra`,
/// waiting between them until any admitted plan's copies are done (they run when the
/// disk is idle); the status at the end and the busy time of the second replay.
fn busy_over_two_replays(
    dir: &Path,
    name: &str,
    trace: &Path,
    extra: &[&str],
) -> (serde_json::Value, f64) {
    let learning = !extra.contains(&"vanilla");
    let (_serve, sock, ctl) = serve_emulated(dir, name, "1G", extra);
    replay_json(trace, &sock, &[]);
    let status = || status_json(&ctl);
    for _ in 0..200 {
        let st = status();
        let settled = st["reconfiguration"]["steps_pending"].as_u64().unwrap_or(0) == 0;
        let planned = st["replan"]["plans"].as_u64().unwrap_or(0) >= 1;
        if settled && (planned || !learning) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let before = status()["emulated_busy_s"].as_f64().unwrap();
    replay_json(trace, &sock, &[]);
    let st = status();
    let second = st["emulated_busy_s"].as_f64().unwrap() - before;
    (st, second)
}

/// The whole online path pays on a small repeated workload: learning sees the hot pages,
/// the guard admits the plan, the copies run while the disk is idle, and the emulated
/// disk's busy time (copies included) ends well below the same replays without learning.
#[test]
fn an_admitted_plan_lowers_emulated_busy_on_a_repeated_workload() {
    let dir = tempfile::tempdir().unwrap();
    // 40 pages scattered over 1 GiB, read in the same order 10 times, replayed twice.
    let hot = msr_trace(dir.path(), "hot.csv", 400, |i| (i % 40) * 52_424 + 8);
    let speed = ["--emulate-speed", "50"];
    let learn = [&speed[..], &["--replan-every", "100"]].concat();
    let vanilla = [&speed[..], &["--replan-policy", "vanilla"]].concat();
    let (l, l2) = busy_over_two_replays(dir.path(), "learn", &hot, &learn);
    let (v, v2) = busy_over_two_replays(dir.path(), "vanilla", &hot, &vanilla);
    assert!(l["replan"]["admitted"].as_u64().unwrap() >= 1, "{l}");
    let (lb, vb) = (
        l["emulated_busy_s"].as_f64().unwrap(),
        v["emulated_busy_s"].as_f64().unwrap(),
    );
    eprintln!("emulated busy: learning {lb} s ({l2} s second), vanilla {vb} s ({v2} s)");
    // Once placed, the 40 pages are read from the optimized region in order.
    assert!(
        l2 < 0.5 * v2,
        "second replay: learning {l2} s vs vanilla {v2} s: {l}"
    );
    // Copies included, the whole run still costs less.
    assert!(lb < vb, "learning {lb} s vs vanilla {vb} s: {l}");
}
