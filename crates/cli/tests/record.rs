//! `reblock record` end to end on a real loop device (needs root and tracefs, as CI has;
//! set REBLOCK_SKIP_TRACEFS=1 to skip elsewhere).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use reblock_record::loopdev::LoopDevice;

fn tracefs_usable() -> bool {
    let why = if !is_root() {
        Some("not running as root".to_string())
    } else {
        reblock_record::tracefs::find_root()
            .err()
            .map(|e| e.to_string())
    };
    match why {
        None => true,
        Some(why) if std::env::var("REBLOCK_SKIP_TRACEFS").as_deref() == Ok("1") => {
            eprintln!("skipped (REBLOCK_SKIP_TRACEFS=1): {why}");
            false
        }
        Some(why) => panic!(
            "this test records a loop device through tracefs, which needs root: {why}; \
             set REBLOCK_SKIP_TRACEFS=1 to skip it"
        ),
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn reblock_instances() -> Vec<String> {
    let root = reblock_record::tracefs::find_root().unwrap();
    std::fs::read_dir(root.join("instances"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("reblock-"))
        .collect()
}

fn image(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("disk.img");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    path
}

/// Ctrl-C stops the recording cleanly: the trace holds dd's write, the summary is JSON
/// with the counts, and the instance is gone.
#[test]
fn records_until_sigint_and_prints_a_json_summary() {
    if !tracefs_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = LoopDevice::attach(&image(dir.path())).unwrap();
    let trace = dir.path().join("out.trace");
    let mut child = Command::cargo_bin("reblock")
        .unwrap()
        .args(["record", "--backend", "tracefs", "--json", "--device"])
        .arg(&dev.path)
        .arg("--out")
        .arg(&trace)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("recording"), "{line}");
    let dd = Command::new("dd")
        .arg(format!("of={}", dev.path.display()))
        .args([
            "if=/dev/zero",
            "bs=4096",
            "seek=10",
            "count=1",
            "oflag=direct",
            "status=none",
        ])
        .spawn()
        .unwrap();
    let dd_pid = dd.id();
    assert!(dd.wait_with_output().unwrap().status.success());
    assert!(Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["stopped_by"], "signal");
    assert_eq!(summary["backend"], "tracefs");
    let text = std::fs::read_to_string(&trace).unwrap();
    let dd_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.split(' ').nth(1) == Some(&dd_pid.to_string()))
        .collect();
    assert_eq!(dd_lines.len(), 1, "{text}");
    assert!(
        dd_lines[0].ends_with(&format!(" {dd_pid} dd 80 8 W")),
        "{text}"
    );
    assert_eq!(summary["requests"], text.lines().count());
    // The device size (64 MiB in 512-byte sectors) goes beside the trace, and a converted
    // capture carries it in its Parquet footer.
    assert_eq!(summary["device_sectors"], 131072);
    let meta = std::fs::read_to_string(dir.path().join("out.trace.meta.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["device_sectors"], 131072);
    // A loop device has no drive model (sysfs has no device/model for it).
    assert!(meta.get("device_model").is_none() && summary.get("device_model").is_none());
    let parquet = dir.path().join("out.parquet");
    let converted = Command::cargo_bin("reblock")
        .unwrap()
        .arg("convert")
        .args([&trace, &parquet])
        .output()
        .unwrap();
    assert!(converted.status.success(), "{converted:?}");
    let footer = reblock_trace::parquet::read_meta(&parquet).unwrap();
    assert_eq!(footer.device_sectors, Some(131072));
    assert!(!reblock_instances()
        .iter()
        .any(|n| n.starts_with(&format!("reblock-{pid}-"))));
}

#[test]
fn refuses_a_path_that_is_not_a_block_device() {
    let dir = tempfile::tempdir().unwrap();
    let file = image(dir.path());
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["record", "--duration", "1", "--out"])
        .arg(dir.path().join("t"))
        .arg("--device")
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is a regular file, not a block device"),
        "{err}"
    );
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args([
            "record",
            "--duration",
            "1",
            "--out",
            "-",
            "--device",
            "/dev/nonexistent-loop",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/dev/nonexistent-loop: no such device"),
        "{err}"
    );
}

/// Without the rights to use tracefs (here: an unprivileged user, nobody), `record`
/// stops at once and says why, naming tracefs and what is needed, instead of writing an
/// empty trace.
#[test]
fn record_says_why_when_tracefs_is_unavailable() {
    if !is_root() {
        eprintln!("skipped: dropping to an unprivileged user needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = LoopDevice::attach(&image(dir.path())).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("reblock");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bin)
        .args([
            "record",
            "--backend",
            "tracefs",
            "--duration",
            "1",
            "--out",
            "-",
        ])
        .arg("--device")
        .arg(&dev.path)
        .output()
        .expect("setpriv runs (util-linux)");
    assert!(!out.status.success(), "recording as nobody succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tracefs"), "{err}");
    assert!(
        err.contains("root"),
        "the message says what is needed: {err}"
    );
    assert!(out.stdout.is_empty(), "no trace lines were written");
}
