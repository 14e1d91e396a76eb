//! `serve` keeps what it learnt across restarts: the learning state is written beside the
//! image at each re-plan, read back at start (also after SIGKILL), used by the first plan
//! after the restart, and a corrupted state file is ignored with a warning. A
//! reconfiguration cut by SIGKILL resumes at the next start without copying again the
//! pages it had placed.

mod common;

use assert_cmd::cargo::cargo_bin;
use common::{msr_reads, status_of, terminate, wait_for};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Learning every 100 requests, every plan installed (no guard, so that what a plan
/// holds does not depend on the guard's verdict).
const EVERY_100: [&str; 3] = ["--replan-every", "100", "--no-guard"];

/// `serve IMG --unix SOCK` with `args`; its stderr goes to `log`.
fn serve(dir: &Path, args: &[&str], log: &str) -> Child {
    let sock = dir.join("s.sock");
    let ctl = dir.join("s.sock.ctl");
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(&ctl);
    let mut child = Command::new(cargo_bin("reblock"))
        .arg("serve")
        .arg(dir.join("disk.img"))
        .args(["--create", "1G", "--unix", sock.to_str().unwrap()])
        .args(args)
        .stderr(std::fs::File::create(dir.join(log)).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ctl, &mut child);
    wait_for(&sock, &mut child);
    child
}

fn replay(dir: &Path, trace: &Path) {
    let out = Command::new(cargo_bin("reblock"))
        .arg("replay")
        .arg(trace)
        .args(["--unix", dir.join("s.sock").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "replay: {out:?}");
}

/// The status once `done` holds of it (at most 20 s).
fn status_when(dir: &Path, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let ctl = dir.join("s.sock.ctl");
    for _ in 0..200 {
        let st = status_of(&ctl);
        if done(&st) {
            return st;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("never reached: {}", status_of(&ctl));
}

fn planned(st: &serde_json::Value, plans: u64) -> bool {
    st["replan"]["plans"].as_u64().unwrap_or(0) >= plans
        && st["reconfiguration"]["steps_pending"].as_u64() == Some(0)
}

/// Learns 40 hot pages (read 10 times over 1 GiB), then kills the server with SIGKILL.
fn learn_then_kill(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let hot = msr_reads(dir, "hot.csv", 400, |i| (i % 40) * 52_424 + 8);
    let mut s = serve(dir, &[&EVERY_100[..], extra].concat(), "first.log");
    replay(dir, &hot);
    let st = status_when(dir, |st| planned(st, 1));
    s.kill().unwrap();
    s.wait().unwrap();
    st
}

/// After a restart, 100 reads of 2 other pages: the plan they trigger.
fn plan_after_restart(dir: &Path, extra: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let mut s = serve(dir, &[&EVERY_100[..], extra].concat(), "second.log");
    let at_start = status_of(&dir.join("s.sock.ctl"));
    let other = msr_reads(dir, "other.csv", 100, |i| 1_000_000 + (i % 2) * 8);
    replay(dir, &other);
    let st = status_when(dir, |st| planned(st, 1));
    assert!(terminate(&mut s).success());
    (at_start, st)
}

#[test]
fn the_first_plan_after_a_kill_uses_what_was_learnt_before() {
    let dir = tempfile::tempdir().unwrap();
    let before = learn_then_kill(dir.path(), &[]);
    assert_eq!(before["replan"]["learned_pages"], 40, "{before}");
    assert!(dir.path().join("disk.img.learned").exists());
    let (at_start, st) = plan_after_restart(dir.path(), &[]);
    let r = &at_start["replan"];
    assert_eq!(r["learned_pages"], 40, "{r}");
    assert_eq!(r["learning_decay"], 1.0, "{r}");
    let from = r["learned_from"].as_str().unwrap();
    assert!(from.contains("disk.img.learned"), "{from}");
    // The 40 pages learnt before the kill and the 2 read since.
    assert_eq!(st["replan"]["last_planned_pages"], 42, "{st}");
    assert_eq!(st["replan"]["learned_pages"], 42, "{st}");

    // Without a learning state the same restart plans from the new requests alone.
    let dir = tempfile::tempdir().unwrap();
    let off = ["--learning-decay", "0"];
    learn_then_kill(dir.path(), &off);
    assert!(!dir.path().join("disk.img.learned").exists());
    let (_, st) = plan_after_restart(dir.path(), &off);
    assert_eq!(st["replan"]["last_planned_pages"], 2, "{st}");
    assert!(st["replan"]["learned_from"].is_null(), "{st}");
}

#[test]
fn a_corrupted_learning_state_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    learn_then_kill(dir.path(), &[]);
    let file = dir.path().join("disk.img.learned");
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    let (at_start, st) = plan_after_restart(dir.path(), &[]);
    let r = &at_start["replan"];
    assert_eq!(r["learned_pages"], 0, "{r}");
    let from = r["learned_from"].as_str().unwrap();
    assert!(
        from.contains("ignored") && from.contains("checksum"),
        "{from}"
    );
    let log = std::fs::read_to_string(dir.path().join("second.log")).unwrap();
    assert!(log.contains("ignoring the learning-state file"), "{log}");
    assert_eq!(st["replan"]["last_planned_pages"], 2, "{st}");
    // The damaged file was replaced by the new state at the next re-plan.
    assert!(reblock_plan::LearningState::from_bytes(&std::fs::read(&file).unwrap()).is_ok());
}

#[test]
fn a_reconfiguration_cut_by_sigkill_resumes_without_copying_placed_pages_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 2000 pages scattered over 1 GiB, each read twice: one plan of 2000 one-page copies,
    // copied at 1 MiB/s (about 8 s).
    let wide = msr_reads(d, "wide.csv", 4000, |i| (i % 2000) * 104 * 8 + 8);
    let slow = [
        "--replan-policy",
        "hot",
        "--replan-every",
        "4000",
        "--no-guard",
    ];
    let mut s = serve(
        d,
        &[&slow[..], &["--rate-mib-s", "1"]].concat(),
        "first.log",
    );
    replay(d, &wide);
    // Rounds of 256 pages (a second of the rate): past 300 steps the first round is
    // committed (the second runs after its commit).
    let st = status_when(d, |st| st["steps_done"].as_u64().unwrap_or(0) >= 300);
    assert_eq!(
        st["reconfiguration"]["diff"]["incoming_pages"], 2000,
        "{st}"
    );
    s.kill().unwrap();
    s.wait().unwrap();
    assert!(
        d.join("disk.img.reconfig").exists(),
        "the plan under way is kept"
    );

    let mut s = serve(d, &["--replan-policy", "vanilla"], "second.log");
    let st = status_when(d, |st| st["reconfiguration"]["state"] == "done");
    assert!(terminate(&mut s).success());
    let diff = &st["reconfiguration"]["diff"];
    let kept = diff["static_pages"].as_u64().unwrap();
    let copied = diff["incoming_pages"].as_u64().unwrap();
    // Committed after every copier round: the copies seen done before the kill stay.
    assert!(kept >= 256 && kept + copied == 2000, "{st}");
    assert_eq!(
        st["bytes_moved"],
        copied * 4096,
        "placed pages copied again: {st}"
    );
    assert_eq!(st["mapped_pages"], 2000, "{st}");
    assert!(
        !d.join("disk.img.reconfig").exists(),
        "the finished plan is forgotten"
    );
    let log = std::fs::read_to_string(d.join("second.log")).unwrap();
    assert!(
        log.contains(&format!(
            "{kept} pages already in place stay, {copied} to copy"
        )),
        "{log}"
    );
    let check = Command::new(cargo_bin("reblock"))
        .arg("check")
        .arg(d.join("disk.img"))
        .output()
        .unwrap();
    assert!(check.status.success(), "check: {check:?}");
}
