//! TRIM, WRITE_ZEROES and BLOCK_STATUS through `reblock serve` with real clients: qemu-io
//! writes and discards, `nbdinfo --map` sees trimmed and never-written ranges as holes,
//! `qemu-img convert` copies only the allocated data, `status --json` counts the free
//! pages, and all of it holds after a SIGKILL and restart.

mod common;

use assert_cmd::cargo::cargo_bin;
use common::wait_for;
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
    let mut c = Command::new(cargo_bin("reblock"));
    c.args([
        "serve",
        img.to_str().unwrap(),
        "--unix",
        sock.to_str().unwrap(),
    ]);
    if create {
        c.args(["--create", "64M", "--bopt-size", "16M"]);
    }
    let mut child = c.stderr(Stdio::null()).spawn().unwrap();
    wait_for(sock, &mut child);
    child
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
    let st = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert!(server.wait().unwrap().success());
    let c = json(
        cargo_bin("reblock").to_str().unwrap(),
        &["check", img.to_str().unwrap(), "--json"],
    );
    assert_eq!(c["problems"].as_array().unwrap().len(), 0, "{c}");
    assert_eq!(c["free_pages"], s["free_pages"]);
}
