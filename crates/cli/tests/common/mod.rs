//! Helpers shared by the `serve` tests.

use assert_cmd::cargo::cargo_bin;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Waits until `p` exists (a socket the server creates once it listens); panics when the
/// server exits first or after 30 s.
pub fn wait_for(p: &Path, child: &mut Child) {
    let t = Instant::now();
    while !p.exists() {
        assert!(child.try_wait().unwrap().is_none(), "serve exited early");
        assert!(t.elapsed() < Duration::from_secs(30), "no {}", p.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `reblock serve IMG --unix SOCK` (formatting a new image of `size` with a
/// region of `bopt` when `create` is given) and waits until it listens.
#[allow(dead_code)]
pub fn serve_unix(img: &Path, sock: &Path, create: Option<(&str, &str)>) -> Child {
    let mut c = Command::new(cargo_bin("reblock"));
    c.args([
        "serve",
        img.to_str().unwrap(),
        "--unix",
        sock.to_str().unwrap(),
    ]);
    if let Some((size, bopt)) = create {
        c.args(["--create", size, "--bopt-size", bopt]);
    }
    let mut child = c.stderr(Stdio::null()).spawn().unwrap();
    wait_for(sock, &mut child);
    child
}

/// How long a server gets to stop after SIGTERM before the test calls it hung.
pub const STOP_LIMIT: Duration = Duration::from_secs(60);

/// Waits for `child` at most `limit`: its exit status, or `None` when it still runs.
// Not every test file that includes this module uses every helper.
#[allow(dead_code)]
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if t.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops a server with SIGTERM and returns its exit status. One still running after
/// [`STOP_LIMIT`] fails the test (after a SIGKILL) instead of hanging it.
#[allow(dead_code)]
pub fn terminate(child: &mut Child) -> ExitStatus {
    // SAFETY: signalling our own child by its pid; it is not reaped before the wait below.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    match wait_within(child, STOP_LIMIT) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the server (pid {}) did not stop within {STOP_LIMIT:?} of SIGTERM",
                child.id()
            );
        }
    }
}

/// An MSR-format trace of `n` reads of 4 KiB in `dir/name`; `sector_of(i)` places read i.
#[allow(dead_code)]
pub fn msr_reads(dir: &Path, name: &str, n: u64, sector_of: impl Fn(u64) -> u64) -> PathBuf {
    let p = dir.join(name);
    let mut text = String::new();
    for i in 0..n {
        let ts = 128_166_481_075_232_275u64 + i * 10_000;
        text += &format!("{ts},t,0,Read,{},4096,100\n", sector_of(i) * 512);
    }
    std::fs::write(&p, text).unwrap();
    p
}

/// `reblock status --control CTL --json`, parsed.
#[allow(dead_code)]
pub fn status_of(ctl: &Path) -> serde_json::Value {
    let out = Command::new(cargo_bin("reblock"))
        .args(["status", "--control", ctl.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "status: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}
