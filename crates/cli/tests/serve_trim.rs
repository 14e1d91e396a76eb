//! TRIM, WRITE_ZEROES and BLOCK_STATUS through `reblock serve` with real clients: qemu-io
//! writes and discards, `nbdinfo --map` sees trimmed and never-written ranges as holes,
//! `qemu-img convert` copies only the allocated data, `status --json` counts the free
//! pages, and all of it holds after a SIGKILL and restart.

mod common;

use assert_cmd::cargo::cargo_bin;
use common::{serve_unix, wait_for};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const MIB: u64 = 1 << 20;

fn uri(sock: &Path) -> String {
    format!("nbd+unix:///?socket={}", sock.display())
}

fn qemu_io(sock: &Path, cmds: &[&str]) {
    let mut c = Command::new("qemu-io");
    c.args(["-f", "raw"]);
    for x in cmds {
        c.args(["-c", x]);
    }
    let out = c.arg(uri(sock)).output().expect("qemu-io runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "qemu-io {cmds:?}: {out:?}");
    assert!(!text.contains("Pattern verification failed"), "{text}");
}

fn json(cmd: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `nbdinfo --map` as (offset, length, hole) runs, neighbours of one kind merged.
fn holes(sock: &Path) -> Vec<(u64, u64, bool)> {
    let map = json("nbdinfo", &["--map", "--json", &uri(sock)]);
    let mut out: Vec<(u64, u64, bool)> = Vec::new();
    for e in map.as_array().unwrap() {
        let (off, len) = (e["offset"].as_u64().unwrap(), e["length"].as_u64().unwrap());
        let hole = e["type"].as_u64().unwrap() & 1 != 0;
        match out.last_mut() {
            Some(last) if last.2 == hole => last.1 += len,
            _ => out.push((off, len, hole)),
        }
    }
    out
}

fn serve(img: &Path, sock: &Path, create: bool) -> Child {
    serve_unix(img, sock, create.then_some(("64M", "16M")))
}

fn check_contents(sock: &Path) {
    qemu_io(
        sock,
        &[
            "read -P 0xab 0 4M",
            "read -P 0 4M 6M",
            "read -P 0xcd 10M 4k",
            "read -P 0 10244k 18428k",
            "read -P 0xab 28M 2M",
            "read -P 0 30M 1M",
            "read -P 0xab 31M 1M",
            "read -P 0 32M 32M",
        ],
    );
}

const EXPECTED_MAP: [(u64, u64, bool); 8] = [
    (0, 4 * MIB, false),
    (4 * MIB, 6 * MIB, true),
    (10 * MIB, 4096, false),
    (10 * MIB + 4096, 18 * MIB - 4096, true),
    (28 * MIB, 2 * MIB, false),
    (30 * MIB, MIB, true),
    (31 * MIB, MIB, false),
    (32 * MIB, 32 * MIB, true),
];

#[test]
fn trimmed_and_never_written_ranges_are_holes_and_stay_so_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let sock = dir.path().join("nbd.sock");
    let mut server = serve(&img, &sock, true);
    assert_eq!(holes(&sock), vec![(0, 64 * MIB, true)], "never written");
    qemu_io(
        &sock,
        &[
            "write -P 0xab 0 32M",
            "discard 4M 24M",
            "write -P 0xcd 10M 4k",
            "write -z -u 30M 1M",
            "flush",
        ],
    );
    let s = json(
        cargo_bin("reblock").to_str().unwrap(),
        &["status", "--unix", sock.to_str().unwrap(), "--json"],
    );
    // 24 MiB trimmed less the page written back, 1 MiB zeroed, 32 MiB never written.
    assert_eq!(s["free_pages"], (24 * 256 - 1) + 256 + 32 * 256, "{s}");
    assert_eq!(holes(&sock), EXPECTED_MAP);
    check_contents(&sock);

    let out = dir.path().join("copy.raw");
    let st = Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw", &uri(&sock)])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let allocated = std::fs::metadata(&out).unwrap().blocks() * 512;
    assert!(
        allocated <= 8 * MIB,
        "qemu-img convert wrote {allocated} bytes for 7 MiB of data"
    );

    // SIGKILL: what was flushed (the map included) holds after the restart.
    server.kill().unwrap();
    server.wait().unwrap();
    std::fs::remove_file(&sock).ok();
    let mut server = serve(&img, &sock, false);
    assert_eq!(holes(&sock), EXPECTED_MAP);
    check_contents(&sock);
    assert!(common::terminate(&mut server).success());
    let c = json(
        cargo_bin("reblock").to_str().unwrap(),
        &["check", img.to_str().unwrap(), "--json"],
    );
    assert_eq!(c["problems"].as_array().unwrap().len(), 0, "{c}");
    assert_eq!(c["free_pages"], s["free_pages"]);
}

fn status(sock: &Path) -> serde_json::Value {
    json(
        cargo_bin("reblock").to_str().unwrap(),
        &["status", "--unix", sock.to_str().unwrap(), "--json"],
    )
}

/// Waits (at most 20 s) until `status --json` satisfies `done`.
fn wait_status(sock: &Path, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t = std::time::Instant::now();
    loop {
        let s = status(sock);
        if done(&s) || t.elapsed() > std::time::Duration::from_secs(20) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Reads the hot area (the first 64 KiB) and the far hot pages (32 KiB at 250 MiB) in
/// turn, so the far pages are read with the head near the hot area.
fn read_hot(sock: &Path, far: &str) {
    let mut cmds = Vec::new();
    for _ in 0..4 {
        cmds.push("read -P 0x11 0 64k".to_string());
        cmds.push(format!("read -P {far} 250M 32k"));
    }
    qemu_io(sock, &cmds.iter().map(|s| s.as_str()).collect::<Vec<_>>());
}

#[test]
fn fs2_replicas_of_hot_pages_are_made_in_trimmed_space_and_never_outlive_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let sock = dir.path().join("nbd.sock");
    let mut server = serve_unix(&img, &sock, Some(("256M", "16M")));
    // Write 256 MiB, trim 128 MiB of it (64..192 MiB), read a hot part repeatedly.
    qemu_io(
        &sock,
        &["write -P 0x11 0 256M", "discard 64M 128M", "flush"],
    );
    read_hot(&sock, "0x11");
    let s = wait_status(&sock, |s| s["replicas"].as_u64() >= Some(8));
    assert!(s["free_pages"].as_u64().unwrap() >= 128 * 256, "{s}");
    assert!(s["replicas"].as_u64().unwrap() >= 8, "{s}");
    // The far pages' replicas lie in the trimmed space next to the hot area: closer.
    read_hot(&sock, "0x11");
    let s = status(&sock);
    assert!(s["replica_hits"].as_u64().unwrap() > 0, "{s}");

    // A client write into the trimmed space holding the replicas claims it.
    // (The background may at once make new replicas of the still hot pages, further
    // on in the free space.)
    qemu_io(&sock, &["write -P 0x33 64M 256k", "read -P 0x33 64M 256k"]);
    read_hot(&sock, "0x11");
    wait_status(&sock, |s| s["replicas"].as_u64() >= Some(8));
    // Overwriting the originals drops their replicas; reads see the new bytes.
    qemu_io(&sock, &["write -P 0x22 250M 32k", "flush"]);
    read_hot(&sock, "0x22");
    let expect = [
        "read -P 0x11 0 64M",
        "read -P 0x33 64M 256k",
        "read -P 0 65792k 130816k",
        "read -P 0x11 192M 58M",
        "read -P 0x22 250M 32k",
        "read -P 0x11 256032k 6112k",
    ];
    qemu_io(&sock, &expect);

    // SIGKILL while replicas exist: the same bytes after the restart.
    read_hot(&sock, "0x22");
    wait_status(&sock, |s| s["replicas"].as_u64() >= Some(8));
    qemu_io(&sock, &["flush"]);
    server.kill().unwrap();
    server.wait().unwrap();
    std::fs::remove_file(&sock).ok();
    let mut c = Command::new(cargo_bin("reblock"));
    c.args([
        "serve",
        img.to_str().unwrap(),
        "--unix",
        sock.to_str().unwrap(),
    ]);
    let mut server = c.stderr(Stdio::null()).spawn().unwrap();
    wait_for(&sock, &mut server);
    qemu_io(&sock, &expect);
    read_hot(&sock, "0x22");
    assert!(common::terminate(&mut server).success());
    let c = json(
        cargo_bin("reblock").to_str().unwrap(),
        &["check", img.to_str().unwrap(), "--json"],
    );
    assert_eq!(c["problems"].as_array().unwrap().len(), 0, "{c}");
}

/// `serve --replan-policy fs2`: the re-planner's FS2 policy names the pages used with
/// the hot area and the engine copies them into the trimmed space, within the
/// free-space watermarks `status --json` reports; every byte reads back, also after a
/// SIGKILL and restart.
#[test]
fn the_fs2_replan_policy_makes_replicas_online() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let sock = dir.path().join("nbd.sock");
    let start = |create: bool| {
        let mut c = Command::new(cargo_bin("reblock"));
        c.args(["serve", img.to_str().unwrap(), "--unix"])
            .arg(&sock)
            .args(["--replan-policy", "fs2", "--replan-every", "200"]);
        if create {
            c.args(["--create", "64M", "--bopt-size", "16M"]);
        }
        let mut server = c.stderr(Stdio::null()).spawn().unwrap();
        wait_for(&sock, &mut server);
        server
    };
    let mut server = start(true);
    qemu_io(&sock, &["write -P 0x11 0 64M", "discard 16M 32M", "flush"]);
    // A start-up: the same scattered 4 KiB reads in the same order, over and over.
    let reads: Vec<String> = (0..40u64)
        .map(|k| {
            format!(
                "read -P 0x11 {}k 4k",
                (k * 7919 % 12_000 + 48 * 1024) / 4 * 4
            )
        })
        .collect();
    for _ in 0..8 {
        qemu_io(&sock, &reads.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let s = wait_status(&sock, |s| s["replicas"].as_u64() >= Some(20));
    assert_eq!(s["replan"]["policy"], "fs2", "{s}");
    assert!(s["replicas"].as_u64().unwrap() >= 20, "{s}");
    let marks = &s["replica_marks"];
    assert_eq!(marks["verdict"]["action"], "create", "{s}");
    assert!(
        marks["unused_free_pages"].as_u64() > marks["high_pages"].as_u64(),
        "{s}"
    );
    // Overwrite some replicated pages, then SIGKILL with replicas in place.
    qemu_io(&sock, &["write -P 0x22 48M 64k", "flush"]);
    let expect = [
        "read -P 0x11 0 16M",
        "read -P 0 16M 32M",
        "read -P 0x22 48M 64k",
        "read -P 0x11 49216k 15296k",
    ];
    qemu_io(&sock, &expect);
    server.kill().unwrap();
    server.wait().unwrap();
    std::fs::remove_file(&sock).ok();
    let mut server = start(false);
    qemu_io(&sock, &expect);
    assert!(common::terminate(&mut server).success());
    let c = json(
        cargo_bin("reblock").to_str().unwrap(),
        &["check", img.to_str().unwrap(), "--json"],
    );
    assert_eq!(c["problems"].as_array().unwrap().len(), 0, "{c}");
}
