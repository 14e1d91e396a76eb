//! Sync-point fault test of the real `reblock serve` under a real NBD client: an
//! LD_PRELOAD shim (tests/sync_faults/shim.c, built here with cc) counts fdatasync and
//! pwrite calls across all the server's threads and SIGKILLs it at the N-th fdatasync,
//! or fails its N-th pwrite with ENOSPC or EIO. For each N a fresh image runs a scripted
//! workload (aligned and unaligned writes, TRIMs of whole pages, FLUSHes, two online
//! reconfigurations); then
//! the server is restarted without the shim and every byte of the export must read what
//! the last acknowledged FLUSH covered or what a later write wrote — never anything
//! else (a failed write: its own bytes old or new, no byte outside it changed) — and,
//! after a clean stop, `reblock check` must be clean.
//!
//! The short form (CI) samples the sync points and writes; `REBLOCK_SYNC_FAULTS=long`
//! visits every sync point and every write of several workload seeds until at least
//! 400 crash rounds and 100 ENOSPC and 100 EIO rounds have run, and prints the totals.

#[path = "../../engine/tests/common/mod.rs"]
mod common;

use assert_cmd::cargo::cargo_bin;
use common::Client;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DATA_BYTES: u64 = 1 << 20;
const PAGE: u64 = 4096;

fn byte_of(id: u16, off: u64) -> u8 {
    if id == 0 {
        return 0; // the fresh image
    }
    (u64::from(id) * 131 + off * 7 + off / 509) as u8 | 1
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    KillAtSync(u64),
    FailAtWrite(u64, &'static str),
}

/// The workload's record: per byte the write id the last acknowledged FLUSH covered
/// (with the ids of failed writes it may also hold), and the writes since.
struct Model {
    durable: Vec<u16>,
    durable_alt: std::collections::HashMap<u64, Vec<u16>>,
    /// (id, offset, len, acknowledged) since the last acknowledged FLUSH.
    since: Vec<(u16, u64, u64, bool)>,
    next_id: u16,
}

impl Model {
    fn new() -> Model {
        Model {
            durable: vec![0; DATA_BYTES as usize],
            durable_alt: Default::default(),
            since: Vec::new(),
            next_id: 1,
        }
    }
    fn flushed(&mut self) {
        for (id, off, len, ok) in std::mem::take(&mut self.since) {
            for b in off..off + len {
                if ok {
                    self.durable[b as usize] = id;
                    self.durable_alt.remove(&b);
                } else {
                    self.durable_alt.entry(b).or_default().push(id);
                }
            }
        }
    }
    /// The first byte of `bytes` (the whole export) no allowed write explains.
    fn check(&self, bytes: &[u8], live: bool) -> Result<(), String> {
        for (off, &v) in bytes.iter().enumerate() {
            let off = off as u64;
            let mut allowed = vec![self.durable[off as usize]];
            allowed.extend(self.durable_alt.get(&off).into_iter().flatten());
            for &(id, o, len, ok) in &self.since {
                if (o..o + len).contains(&off) {
                    if live && ok {
                        allowed = vec![id];
                    } else {
                        allowed.push(id);
                    }
                }
            }
            if !allowed.iter().any(|&id| byte_of(id, off) == v) {
                return Err(format!(
                    "byte {off} reads {v:#04x}; none of writes {allowed:?} wrote that ({})",
                    if live { "live" } else { "after a restart" }
                ));
            }
        }
        Ok(())
    }
}

struct Server {
    child: Child,
    sock: PathBuf,
}

impl Server {
    fn start(img: &Path, dir: &Path, shim: Option<(&Path, Fault)>) -> Server {
        let sock = dir.join("nbd.sock");
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_file(dir.join("nbd.sock.ctl"));
        let mut c = Command::new(cargo_bin("reblock"));
        c.args([
            "serve",
            img.to_str().unwrap(),
            "--unix",
            sock.to_str().unwrap(),
        ])
        .args(["--rate-mib-s", "1000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if let Some((so, fault)) = shim {
            c.env("LD_PRELOAD", so)
                .env("REBLOCK_SHIM_COUNTS", dir.join("counts"));
            match fault {
                Fault::None => {}
                Fault::KillAtSync(n) => {
                    c.env("REBLOCK_SHIM_KILL_AT_SYNC", n.to_string());
                }
                Fault::FailAtWrite(n, e) => {
                    c.env("REBLOCK_SHIM_FAIL_AT_WRITE", n.to_string())
                        .env("REBLOCK_SHIM_ERRNO", e);
                }
            }
        }
        let mut child = c.spawn().unwrap();
        let t = Instant::now();
        while !(sock.exists() && dir.join("nbd.sock.ctl").exists()) {
            if child.try_wait().unwrap().is_some() {
                break; // died while opening (a fault in the open's own writes)
            }
            assert!(t.elapsed() < Duration::from_secs(30), "serve did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Server { child, sock }
    }
    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
    fn control(&self, req: &serde_json::Value) -> Option<serde_json::Value> {
        let mut s = UnixStream::connect(self.sock.with_extension("sock.ctl")).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        writeln!(s, "{req}").ok()?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).ok()?;
        serde_json::from_str(&line).ok()
    }
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
    fn stop(mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc_kill(self.child.id() as i32, 15) };
        let _ = self.child.wait();
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn random_plan(seed: u64) -> String {
    let mut plan = reblock_layout::Plan::new(8, "sync-faults");
    let mut x = seed | 1;
    let mut used = std::collections::HashSet::new();
    for slot in 0..24u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if used.insert(x % (DATA_BYTES / PAGE)) {
            plan.push(x % (DATA_BYTES / PAGE), 1, slot);
        }
    }
    plan.to_json()
}

/// The scripted workload. Stops at the first request the server does not answer.
fn workload(srv: &Server, model: &mut Model, seed: u64) {
    let Ok(mut c) = Client::connect(&srv.sock) else {
        return;
    };
    let mut x = seed | 1;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for step in 0..17u64 {
        match step % 6 {
            2 | 5 => {
                match c.flush() {
                    Ok(()) => model.flushed(),
                    Err(e) if e.kind() == std::io::ErrorKind::Other => {}
                    Err(_) => return,
                }
                continue;
            }
            3 if step < 12 => {
                let plan = random_plan(seed ^ step);
                if srv
                    .control(&serde_json::json!({"cmd": "reconfigure", "plan": plan}))
                    .is_none()
                {
                    return;
                }
                wait_reconfigured(srv);
                continue;
            }
            // A TRIM of whole pages: they read as zeros afterwards (the free-space map),
            // so the model takes it as a write of the fresh image's bytes (id 0).
            4 => {
                let (off, len) = (rnd(DATA_BYTES / PAGE - 4) * PAGE, PAGE * (1 + rnd(4)));
                match c.trim(off, len as u32) {
                    Ok(()) => model.since.push((0, off, len, true)),
                    Err(e) if e.kind() == std::io::ErrorKind::Other => {
                        model.since.push((0, off, len, false))
                    }
                    Err(_) => {
                        model.since.push((0, off, len, false));
                        return;
                    }
                }
                continue;
            }
            _ => {}
        }
        let (off, len) = if step % 2 == 0 {
            (rnd(DATA_BYTES / PAGE - 4) * PAGE, PAGE * (1 + rnd(4)))
        } else {
            let off = rnd(DATA_BYTES - 20_000) + 1;
            (off, 100 + rnd(12_000))
        };
        let id = model.next_id;
        model.next_id += 1;
        let data: Vec<u8> = (off..off + len).map(|o| byte_of(id, o)).collect();
        match c.write(off, &data) {
            Ok(()) => model.since.push((id, off, len, true)),
            Err(e) if e.kind() == std::io::ErrorKind::Other => {
                model.since.push((id, off, len, false))
            }
            Err(_) => {
                // No reply: the write may or may not have happened.
                model.since.push((id, off, len, false));
                return;
            }
        }
    }
}

fn wait_reconfigured(srv: &Server) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        let Some(s) = srv.control(&serde_json::json!({"cmd": "status"})) else {
            return;
        };
        // A read-only engine (after a failed write) runs no more steps: waiting out the
        // timeout made each EIO round 10 s longer.
        if s["result"]["reconfiguration"]["steps_pending"] == 0 || s["result"]["read_only"] == true
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn read_all(srv: &Server) -> Result<Vec<u8>, String> {
    let mut c = Client::connect(&srv.sock).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(DATA_BYTES as usize);
    for off in (0..DATA_BYTES).step_by(1 << 16) {
        out.extend(
            c.read(off, 1 << 16)
                .map_err(|e| format!("read at {off}: {e}"))?,
        );
    }
    Ok(out)
}

struct Bench {
    dir: tempfile::TempDir,
    shim: PathBuf,
    pristine: PathBuf,
}

impl Bench {
    fn new() -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let shim = dir.path().join("shim.so");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sync_faults/shim.c");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
            .arg(&shim)
            .arg(&src)
            .arg("-ldl")
            .output()
            .expect("cc runs");
        assert!(
            out.status.success(),
            "cc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pristine = dir.path().join("pristine.img");
        let out = Command::new(cargo_bin("reblock"))
            .args(["serve", pristine.to_str().unwrap(), "--create", "1M"])
            .args([
                "--bopt-size",
                "640K",
                "--segment-pages",
                "16",
                "--write-buffer",
                "0.5",
            ])
            .args(["--unix", dir.path().join("init.sock").to_str().unwrap()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let srv = Server {
            child: out,
            sock: dir.path().join("init.sock"),
        };
        let t = Instant::now();
        // The NBD socket is bound before the image is opened (and formatted); the
        // control socket appears only once the engine serves it.
        while !(srv.sock.exists() && srv.sock.with_extension("sock.ctl").exists()) {
            assert!(t.elapsed() < Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(10));
        }
        srv.stop();
        Bench {
            dir,
            shim,
            pristine,
        }
    }

    fn counts(dir: &Path) -> (u64, u64) {
        let t = std::fs::read_to_string(dir.join("counts")).unwrap_or_default();
        let mut it = t.split_whitespace().map(|w| w.parse().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    }

    /// One round: fresh image, the workload under `fault`, restart, verify, check. Each
    /// round has its own directory (image, sockets, the shim's counts), so that rounds
    /// can run side by side.
    fn round(&self, fault: Fault, seed: u64) -> Result<(u64, u64), String> {
        let round_dir = tempfile::tempdir_in(self.dir.path()).unwrap();
        let d = round_dir.path();
        let img = d.join("round.img");
        std::fs::copy(&self.pristine, &img).unwrap();
        let mut model = Model::new();
        let mut srv = Server::start(&img, d, Some((&self.shim, fault)));
        if srv.alive() {
            workload(&srv, &mut model, seed);
        }
        let counts = Bench::counts(d);
        if srv.alive() {
            if let Fault::FailAtWrite(..) = fault {
                let bytes = read_all(&srv)?;
                model.check(&bytes, true)?;
            }
        }
        srv.kill();
        for restart in 0..2 {
            let srv = Server::start(&img, d, None);
            let bytes = read_all(&srv).map_err(|e| format!("restart {restart}: {e}"))?;
            model.check(&bytes, false)?;
            srv.stop();
        }
        let out = Command::new(cargo_bin("reblock"))
            .args(["check", img.to_str().unwrap()])
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(format!(
                "check after recovery: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        Ok(counts)
    }
}

/// Every `step`-th of `1..=n`, and always the last one.
fn sample(n: u64, long: bool, want: u64) -> Vec<u64> {
    if long {
        return (1..=n).collect();
    }
    let step = n.div_ceil(want).max(1);
    let mut v: Vec<u64> = (1..=n).step_by(step as usize).collect();
    if v.last() != Some(&n) && n > 0 {
        v.push(n);
    }
    v
}

/// Runs `rounds` (a fault and its description each) on `ROUND_WORKERS` threads: a round
/// mostly waits for fdatasync and for servers to start, so rounds side by side take a
/// fraction of the time one after another did. Panics with the first failed round's fault.
fn run_rounds(b: &Bench, seed: u64, rounds: Vec<(Fault, String)>, long: bool) {
    const ROUND_WORKERS: usize = 4;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..ROUND_WORKERS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((fault, what)) = rounds.get(i) else {
                    return;
                };
                match b.round(*fault, seed) {
                    Ok(_) if long => eprintln!("round: seed {seed} {what}: ok"),
                    Ok(_) => {}
                    Err(e) => failures
                        .lock()
                        .unwrap()
                        .push((i, format!("seed {seed}, {what}: {e}"))),
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    if let Some((_, first)) = failures.first() {
        panic!(
            "{first} ({} of {} rounds failed)",
            failures.len(),
            rounds.len()
        );
    }
}

#[test]
fn crash_at_every_sync_point_and_failed_writes_lose_nothing() {
    let long = std::env::var("REBLOCK_SYNC_FAULTS").as_deref() == Ok("long");
    let b = Bench::new();
    let (mut crashes, mut enospc, mut eio, mut seed) = (0u64, 0u64, 0u64, 1u64);
    let t = Instant::now();
    loop {
        let (syncs, writes) = b.round(Fault::None, seed).unwrap();
        assert!(
            syncs > 5 && writes > 5,
            "the workload ran ({syncs} syncs, {writes} writes)"
        );
        let mut rounds = Vec::new();
        for n in sample(syncs, long, 8) {
            rounds.push((
                Fault::KillAtSync(n),
                format!("SIGKILL at fdatasync {n}/{syncs}"),
            ));
            crashes += 1;
        }
        for (errno, count) in [("ENOSPC", &mut enospc), ("EIO", &mut eio)] {
            // Past 100 rounds of an errno, the long form spends its time on sync points.
            let wanted = if long && *count >= 100 { 0 } else { writes };
            for n in sample(wanted, long, 4) {
                rounds.push((
                    Fault::FailAtWrite(n, errno),
                    format!("{errno} at pwrite {n}/{writes}"),
                ));
                *count += 1;
            }
        }
        run_rounds(&b, seed, rounds, long);
        if long {
            eprintln!("seed {seed}: {crashes} crash rounds, {enospc} ENOSPC rounds, {eio} EIO rounds so far");
        }
        seed += 1;
        if !long || (crashes >= 400 && enospc >= 100 && eio >= 100) {
            break;
        }
    }
    eprintln!(
        "sync faults: {crashes} crash rounds, {enospc} ENOSPC rounds, {eio} EIO rounds over {} workload seeds, 0 bytes lost, check clean after each; {:.0} s",
        seed - 1,
        t.elapsed().as_secs_f64()
    );
}
