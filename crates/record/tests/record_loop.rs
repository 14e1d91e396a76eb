//! End to end: record a real loop device through tracefs while dd issues known direct
//! I/O, and check the trace holds exactly those requests and the tracing state is restored.
//!
//! Needs root and tracefs (CI runs as root). Elsewhere the tests fail saying why, unless
//! REBLOCK_SKIP_TRACEFS=1 is set, which turns them into a skip with a message.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::Duration;

use reblock_record::loopdev::LoopDevice;
use reblock_record::{record_with, Backend, Options, RecordError, StopReason};

/// Whether the machine can run these tests; panics with the reason when it cannot and
/// skipping was not asked for.
fn tracefs_usable() -> bool {
    let why = if !rustix::process::geteuid().is_root() {
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

/// The tests compare the global tracing state before, during and after a recording, so two
/// of them recording at once (the test harness runs tests on parallel threads) would each
/// see the other's tracefs instance. Each test holds this lock for its whole run.
static TRACEFS: Mutex<()> = Mutex::new(());

fn serialize() -> MutexGuard<'static, ()> {
    // A test that failed while holding the lock poisons it; the next one may still run.
    TRACEFS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The global tracing state a recording must leave as it found it.
#[derive(Debug, PartialEq, Eq)]
struct GlobalState {
    tracing_on: String,
    set_event: String,
    bio_queue_enable: String,
    reblock_instances: BTreeSet<String>,
}

fn global_state(root: &Path) -> GlobalState {
    let read = |f: &str| fs::read_to_string(root.join(f)).unwrap();
    GlobalState {
        tracing_on: read("tracing_on"),
        set_event: read("set_event"),
        bio_queue_enable: read("events/block/block_bio_queue/enable"),
        reblock_instances: fs::read_dir(root.join("instances"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            // Only this process's instances: other test binaries may be recording now.
            .filter(|n| n.starts_with(&format!("reblock-{}-", std::process::id())))
            .collect(),
    }
}

fn image(dir: &Path) -> PathBuf {
    let path = dir.join("disk.img");
    fs::File::create(&path).unwrap().set_len(64 << 20).unwrap();
    path
}

/// Runs dd with direct I/O and returns its pid.
fn dd(args: &[&str]) -> u32 {
    let mut child = Command::new("dd")
        .args(args)
        .arg("status=none")
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success(), "dd {args:?}");
    pid
}

fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[test]
fn records_exactly_the_requests_dd_issued() {
    if !tracefs_usable() {
        return;
    }
    let _serial = serialize();
    let root = reblock_record::tracefs::find_root().unwrap();
    let before = global_state(&root);
    let dir = tempfile::tempdir().unwrap();
    let dev = LoopDevice::attach(&image(dir.path())).unwrap();
    let out_path = dir.path().join("trace.txt");
    let opts = Options {
        backend: Backend::Tracefs,
        duration: Some(Duration::from_millis(2500)),
        handle_signals: false,
        ..Options::default()
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let (dev_path, out) = (dev.path.clone(), fs::File::create(&out_path).unwrap());
    let recorder = std::thread::spawn(move || {
        let mut ready = Some(ready_tx);
        record_with(&dev_path, out, &opts, |_| {
            if let Some(tx) = ready.take() {
                tx.send(()).unwrap();
            }
        })
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("recording never began");
    let t0 = monotonic_ns();
    let dev_arg = dev.path.display().to_string();
    // 8 KiB written at byte 1 MiB = sector 2048, then 4 KiB read at 2 MiB = sector 4096.
    let writer = dd(&[
        "if=/dev/urandom",
        &format!("of={dev_arg}"),
        "bs=8192",
        "seek=128",
        "count=1",
        "oflag=direct",
    ]);
    let reader = dd(&[
        &format!("if={dev_arg}"),
        "of=/dev/null",
        "bs=4096",
        "skip=512",
        "count=1",
        "iflag=direct",
    ]);
    let t1 = monotonic_ns();
    let summary = recorder.join().unwrap().unwrap();

    let text = fs::read_to_string(&out_path).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    let ours: Vec<Vec<&str>> = lines
        .iter()
        .filter(|f| f[1] == writer.to_string() || f[1] == reader.to_string())
        .map(|f| f[1..].to_vec())
        .collect();
    let (w, r) = (writer.to_string(), reader.to_string());
    assert_eq!(
        ours,
        [
            vec![w.as_str(), "dd", "2048", "16", "W"],
            vec![r.as_str(), "dd", "4096", "8", "R"],
        ],
        "trace:\n{text}"
    );
    // Anything else can only be another process probing the new device (udev's blkid).
    for f in lines.iter().filter(|f| f[2] != "dd") {
        assert_eq!(f[5], "R", "unexpected request in trace:\n{text}");
    }
    // Timestamps are CLOCK_MONOTONIC (printed to the microsecond).
    for f in lines.iter().filter(|f| f[2] == "dd") {
        let ts: u64 = f[0].parse().unwrap();
        assert!(
            t0 / 1000 * 1000 <= ts && ts <= t1,
            "ts {ts} outside [{t0}, {t1}]"
        );
    }
    assert_eq!(summary.requests, lines.len() as u64);
    assert_eq!(summary.writes, 1);
    assert_eq!(summary.reads, lines.len() as u64 - 1);
    assert!(summary.bytes >= 12288);
    assert_eq!(
        (summary.lost_events, summary.stopped_by),
        (0, Some(StopReason::Duration))
    );
    assert_eq!(global_state(&root), before, "tracing state not restored");
}

/// A writer that fails, to drive the recorder into its error path mid-recording.
struct FailingWriter;

impl std::io::Write for FailingWriter {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other("disk full (test)"))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn restores_tracing_state_when_recording_fails() {
    if !tracefs_usable() {
        return;
    }
    let _serial = serialize();
    let root = reblock_record::tracefs::find_root().unwrap();
    let before = global_state(&root);
    let dir = tempfile::tempdir().unwrap();
    let dev = LoopDevice::attach(&image(dir.path())).unwrap();
    let opts = Options {
        backend: Backend::Tracefs,
        duration: Some(Duration::from_secs(20)),
        handle_signals: false,
        ..Options::default()
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let dev_path = dev.path.clone();
    let recorder = std::thread::spawn(move || {
        let mut ready = Some(ready_tx);
        record_with(&dev_path, FailingWriter, &opts, |_| {
            if let Some(tx) = ready.take() {
                tx.send(()).unwrap();
            }
        })
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let during = global_state(&root);
    assert_eq!(
        during.reblock_instances.len(),
        before.reblock_instances.len() + 1
    );
    dd(&[
        "if=/dev/zero",
        &format!("of={}", dev.path.display()),
        "bs=4096",
        "count=1",
        "oflag=direct",
    ]);
    let err = recorder.join().unwrap().unwrap_err();
    assert!(matches!(err, RecordError::Io { .. }), "{err}");
    assert!(err.to_string().contains("disk full (test)"), "{err}");
    assert_eq!(
        global_state(&root),
        before,
        "tracing state not restored after an error"
    );
}

#[test]
fn blktrace_backend_records_or_says_why_not() {
    if !tracefs_usable() {
        return;
    }
    let _serial = serialize();
    let dir = tempfile::tempdir().unwrap();
    let dev = LoopDevice::attach(&image(dir.path())).unwrap();
    let opts = Options {
        backend: Backend::Blktrace,
        duration: Some(Duration::from_millis(1500)),
        handle_signals: false,
        ..Options::default()
    };
    let installed = Command::new("blktrace").arg("-v").output().is_ok();
    let (ready_tx, ready_rx) = mpsc::channel();
    let dev_path = dev.path.clone();
    let recorder = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut ready = Some(ready_tx);
        let result = record_with(&dev_path, &mut out, &opts, |_| {
            if let Some(tx) = ready.take() {
                let _ = tx.send(());
            }
        });
        result.map(|s| (s, String::from_utf8(out).unwrap()))
    });
    let mut writer = None;
    if ready_rx.recv_timeout(Duration::from_secs(10)).is_ok() {
        let of = format!("of={}", dev.path.display());
        writer = Some(dd(&[
            "if=/dev/zero",
            &of,
            "bs=4096",
            "seek=3",
            "count=1",
            "oflag=direct",
        ]));
    }
    match recorder.join().unwrap() {
        Ok((summary, text)) => {
            assert_eq!(summary.backend, Some(Backend::Blktrace));
            let line = format!(" {} dd 24 8 W", writer.expect("recorded without beginning"));
            assert!(text.lines().any(|l| l.ends_with(&line)), "{text}");
        }
        Err(RecordError::BlktraceUnavailable { why }) if !installed => {
            assert!(why.contains("not installed"), "{why}")
        }
        // Kernels under lockdown and VMs refuse blktrace; the message must say so.
        Err(RecordError::BlktraceUnavailable { why }) => assert!(why.contains("EPERM"), "{why}"),
        Err(e) => panic!("unexpected error: {e}"),
    }
}
