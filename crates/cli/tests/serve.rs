//! `reblock serve` as a real process with a real NBD client (qemu-io): writes land,
//! repeated reads get re-planned, `status --json` reports them, a second server on the
//! same image is refused by the lock, `detach` empties the map, SIGTERM stops cleanly,
//! `check --json` finds the image clean and the data area holds exactly what was written.

mod common;

use assert_cmd::cargo::cargo_bin;
use common::wait_for;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DATA_BYTES: usize = 16 << 20;

fn qemu_io(sock: &Path, cmds: &[&str]) {
    let mut c = Command::new("qemu-io");
    c.args(["-f", "raw"]);
    for x in cmds {
        c.args(["-c", x]);
    }
    c.arg(format!("nbd+unix:///?socket={}", sock.display()));
    let out = c.output().expect("qemu-io runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "qemu-io {cmds:?}: {out:?}");
    assert!(!text.contains("Pattern verification failed"), "{text}");
}

fn reblock_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(cargo_bin("reblock"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "reblock {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn serve_write_status_detach_stop_check_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let sock = dir.path().join("nbd.sock");
    let ctl = dir.path().join("nbd.sock.ctl");
    let mut serve = Command::new(cargo_bin("reblock"))
        .args([
            "serve",
            img.to_str().unwrap(),
            "--create",
            "16M",
            "--bopt-size",
            "8M",
        ])
        .args(["--unix", sock.to_str().unwrap()])
        .args(["--replan-policy", "borg", "--replan-every", "40"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ctl, &mut serve);
    wait_for(&sock, &mut serve);
    qemu_io(&sock, &["write -P 0xab 0 1M", "write -P 0x5c 8M 64k"]);
    for _ in 0..3 {
        let reads: Vec<String> = (0..40)
            .map(|i| format!("read -P 0xab {} 4k", i * 24576))
            .collect();
        qemu_io(&sock, &reads.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    }

    // The re-planner publishes what it saw once per poll (100 ms): wait for it.
    let t = Instant::now();
    let s = loop {
        let s = reblock_json(&["status", "--unix", sock.to_str().unwrap(), "--json"]);
        if s["replan"]["requests_seen"] == 122 || t.elapsed() > Duration::from_secs(10) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(s["data_bytes"], DATA_BYTES as u64);
    assert_eq!(s["bytes_written"], (1 << 20) + (64 << 10));
    assert_eq!(s["writes"], 2);
    assert_eq!(s["reads"], 120);
    assert_eq!(s["mode"], "normal");
    assert_eq!(s["replan"]["policy"], "borg");
    assert_eq!(s["replan"]["requests_seen"], 122);
    assert!(s["replan"]["plans"].as_u64().unwrap() >= 1, "{s}");
    assert!(s["mapped_pages"].as_u64().unwrap() > 0, "{s}");

    let second = Command::new(cargo_bin("reblock"))
        .args(["serve", img.to_str().unwrap()])
        .args(["--unix", dir.path().join("other.sock").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("in use by another reblock process"), "{err}");

    let out = Command::new(cargo_bin("reblock"))
        .args(["detach", "--unix", sock.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let s = reblock_json(&["status", "--unix", sock.to_str().unwrap(), "--json"]);
    assert_eq!(s["mapped_pages"], 0);

    assert!(common::terminate(&mut serve).success(), "clean stop");

    let c = reblock_json(&["check", img.to_str().unwrap(), "--json"]);
    assert_eq!(c["problems"].as_array().unwrap().len(), 0, "{c}");
    assert_eq!(c["mapped_pages"], 0);
    assert!(
        !c["flags"].as_array().unwrap().iter().any(|f| f == "dirty"),
        "{c}"
    );

    let mut reference = vec![0u8; DATA_BYTES];
    reference[..1 << 20].fill(0xab);
    reference[8 << 20..(8 << 20) + (64 << 10)].fill(0x5c);
    let image = std::fs::read(&img).unwrap();
    assert!(image.len() > DATA_BYTES);
    assert!(image[..DATA_BYTES] == reference[..], "data area differs");
}

fn spawn_serve(args: &[&str], sock: &Path) -> Child {
    let mut c = Command::new(cargo_bin("reblock"))
        .arg("serve")
        .args(args)
        .args(["--unix", sock.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(sock, &mut c);
    c
}

/// Regression: serving an image whose BOPT lives on a separate device, then restarting
/// without `--bopt-device`, formatted a new BOPT onto the image and the flushed page read
/// back as zeros. An existing image without a superblock now needs `--format`, and the
/// refusal names both possibilities.
#[test]
fn forgotten_bopt_device_is_refused_instead_of_hiding_flushed_data() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let bopt = dir.path().join("bopt.img");
    let sock = dir.path().join("nbd.sock");
    let (img_s, bopt_s) = (img.to_str().unwrap(), bopt.to_str().unwrap());
    let mut serve = spawn_serve(
        &[
            img_s,
            "--create",
            "16M",
            "--bopt-device",
            bopt_s,
            "--bopt-size",
            "2M",
            "--segment-pages",
            "16",
            "--write-buffer",
            "0.5",
        ],
        &sock,
    );
    qemu_io(&sock, &["write -P 0x77 0 4k", "flush"]);
    let s = reblock_json(&["status", "--unix", sock.to_str().unwrap(), "--json"]);
    assert_eq!(
        s["mapped_pages"], 1,
        "the write went to the BOPT device: {s}"
    );
    serve.kill().unwrap();
    serve.wait().unwrap();
    let _ = std::fs::remove_file(&sock);

    let out = Command::new(cargo_bin("reblock"))
        .args(["serve", img_s, "--bopt-size", "2M"])
        .args(["--unix", sock.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "formatted over the image: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--bopt-device") && err.contains("--format"),
        "{err}"
    );
    let _ = std::fs::remove_file(&sock);

    let mut serve = spawn_serve(&[img_s, "--bopt-device", bopt_s], &sock);
    qemu_io(&sock, &["read -P 0x77 0 4k"]);
    serve.kill().unwrap();
    serve.wait().unwrap();
    let _ = std::fs::remove_file(&sock);

    // A plain existing image is served once the operator says --format.
    let plain = dir.path().join("plain.img");
    std::fs::write(&plain, vec![0x11u8; 1 << 20]).unwrap();
    // Asked without --bopt-size, the refusal gives both flags it takes (it used to name
    // --bopt-size alone, which then met the --format refusal above).
    let out = Command::new(cargo_bin("reblock"))
        .args(["serve", plain.to_str().unwrap()])
        .args(["--unix", sock.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "served unformatted: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--bopt-size SIZE --format"), "{err}");
    let mut serve = spawn_serve(
        &[
            plain.to_str().unwrap(),
            "--bopt-size",
            "1M",
            "--segment-pages",
            "16",
            "--format",
        ],
        &sock,
    );
    qemu_io(&sock, &["read -P 0x11 0 1M"]);
    serve.kill().unwrap();
    serve.wait().unwrap();
}

/// Regression: `--replan-policy dlr-frag` was accepted, then every re-plan failed (a
/// data-area permutation has no read-cache plan). It is refused at startup, with the
/// policies that work online.
#[test]
fn data_area_replan_policy_is_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let out = Command::new(cargo_bin("reblock"))
        .args(["serve", img.to_str().unwrap(), "--create", "4M"])
        .args(["--bopt-size", "2M", "--replan-policy", "dlr-frag"])
        .args(["--unix", dir.path().join("s").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dlr-frag") && err.contains("borg") && err.contains("dlr-seq"),
        "{err}"
    );
}
