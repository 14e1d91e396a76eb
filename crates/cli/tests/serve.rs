//! `reblock serve` as a real process with a real NBD client (qemu-io): writes land,
//! repeated reads get re-planned, `status --json` reports them, a second server on the
//! same image is refused by the lock, `detach` empties the map, SIGTERM stops cleanly,
//! `check --json` finds the image clean and the data area holds exactly what was written.

use assert_cmd::cargo::cargo_bin;
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

fn wait_for(p: &Path, child: &mut Child) {
    let t = Instant::now();
    while !p.exists() {
        assert!(child.try_wait().unwrap().is_none(), "serve exited early");
        assert!(t.elapsed() < Duration::from_secs(30), "no {}", p.display());
        std::thread::sleep(Duration::from_millis(50));
    }
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

    let s = reblock_json(&["status", "--unix", sock.to_str().unwrap(), "--json"]);
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

    let kill = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(serve.wait().unwrap().success(), "clean stop");

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
