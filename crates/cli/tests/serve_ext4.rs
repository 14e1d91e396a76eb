//! ext4 on a served image, through nbdfuse and a loop device, as a user runs it: files
//! written and deleted, `fstrim` tells the server what is free, and the server's
//! free-space map agrees with `reblock freemap` of the same file system (every block
//! ext4 has free is a hole; every other hole is a block ext4 allocated but never wrote,
//! and reads zeros). Hot files read again and again get FS2 replicas; the server is then
//! killed with SIGKILL while replicas exist, twice, and after each restart the file system
//! replays its journal, `e2fsck -fn` finds it clean and every file reads back exactly.
//!
//! Needs root, /dev/fuse, loop devices, nbdfuse, nbdinfo, losetup, mkfs.ext4, fstrim and
//! e2fsck; without them the test says SKIPPED and passes (CI runs it as root).

mod common;

use assert_cmd::cargo::cargo_bin;
use common::serve_unix;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

const BLOCK: u64 = 4096;

fn run(c: &mut Command) -> Output {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(out.status.success(), "{c:?}: {out:?}");
    out
}

fn json(c: &mut Command) -> serde_json::Value {
    serde_json::from_slice(&run(c).stdout).unwrap()
}

fn missing_prerequisite() -> Option<String> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Some("not root".into());
    }
    for dev in ["/dev/fuse", "/dev/loop-control"] {
        if !Path::new(dev).exists() {
            return Some(format!("no {dev}"));
        }
    }
    for tool in [
        "nbdfuse",
        "nbdinfo",
        "losetup",
        "mkfs.ext4",
        "fstrim",
        "e2fsck",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("{tool} not installed"));
        }
    }
    None
}

/// The served image, its FUSE file and loop device, and the ext4 mount point.
struct Stack {
    img: PathBuf,
    sock: PathBuf,
    server: Child,
    fuse_dir: PathBuf,
    fuse: Child,
    loopdev: String,
    fs: PathBuf,
}

impl Stack {
    /// Serves `dir/disk.img` (created when `create`) and attaches it as a loop device.
    fn up(dir: &Path, create: bool, round: u32) -> Stack {
        let img = dir.join("disk.img");
        let sock = dir.join(format!("nbd{round}.sock"));
        let server = serve_unix(&img, &sock, create.then_some(("256M", "32M")));
        let fuse_dir = dir.join(format!("fuse{round}"));
        std::fs::create_dir_all(&fuse_dir).unwrap();
        let fuse = Command::new("nbdfuse")
            .arg(&fuse_dir)
            .args(["--unix", sock.to_str().unwrap()])
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !fuse_dir.join("nbd").exists() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "nbdfuse did not mount"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = run(Command::new("losetup")
            .args(["-f", "--show"])
            .arg(fuse_dir.join("nbd")));
        let loopdev = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        let fs = dir.join("fs");
        std::fs::create_dir_all(&fs).unwrap();
        Stack {
            img,
            sock,
            server,
            fuse_dir,
            fuse,
            loopdev,
            fs,
        }
    }

    fn mount(&self) {
        run(Command::new("mount").arg(&self.loopdev).arg(&self.fs));
    }

    fn umount(&self) {
        run(Command::new("umount").arg(&self.fs));
    }

    fn status(&self) -> serde_json::Value {
        json(Command::new(cargo_bin("reblock")).args([
            "status",
            "--unix",
            self.sock.to_str().unwrap(),
            "--json",
        ]))
    }

    /// Tears the stack down; with `crash`, the server gets SIGKILL first, with the file
    /// system still mounted.
    fn down(mut self, crash: bool) {
        if crash {
            self.server.kill().unwrap();
            self.server.wait().unwrap();
        }
        self.detach_clients();
        if !crash {
            let pid = self.server.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            assert!(self.server.wait().unwrap().success(), "serve stops cleanly");
        }
        std::fs::remove_file(&self.sock).ok();
    }

    /// Unmounts the file system, detaches the loop device and stops nbdfuse (best
    /// effort: also after a failed assertion).
    fn detach_clients(&mut self) {
        let _ = Command::new("umount").arg(&self.fs).output();
        let _ = Command::new("umount").arg("-l").arg(&self.fs).output();
        let _ = Command::new("losetup").args(["-d", &self.loopdev]).output();
        let _ = Command::new("umount").arg(&self.fuse_dir).output();
        let _ = self.fuse.kill();
        let _ = self.fuse.wait();
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.detach_clients();
            let _ = self.server.kill();
            let _ = self.server.wait();
        }
    }
}

fn drop_caches() {
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
}

/// Contents of file `i` of generation `gen`: 256 KiB to 1.2 MiB of a pattern.
fn contents(i: u32, gen: u32) -> Vec<u8> {
    let len = 256 * 1024 + (i as usize * 24_571) % (1024 * 1024);
    let mut x = (u64::from(i) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (u64::from(gen) + 1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// nbdinfo --map's holes, in 4 KiB blocks.
fn holes(sock: &Path) -> Vec<(u64, u64)> {
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    let map = json(Command::new("nbdinfo").args(["--map", "--json", &uri]));
    let mut out: Vec<(u64, u64)> = Vec::new();
    for e in map.as_array().unwrap() {
        if e["type"].as_u64().unwrap() & 1 == 0 {
            continue;
        }
        let (off, len) = (e["offset"].as_u64().unwrap(), e["length"].as_u64().unwrap());
        assert!(off % BLOCK == 0 && len % BLOCK == 0, "hole {off}+{len}");
        match out.last_mut() {
            Some(last) if last.0 + last.1 == off / BLOCK => last.1 += len / BLOCK,
            _ => out.push((off / BLOCK, len / BLOCK)),
        }
    }
    out
}

/// The file system's free blocks by `reblock freemap`, as (start, len) in blocks.
fn ext4_free(dev: &str) -> Vec<(u64, u64)> {
    let j = json(
        Command::new(cargo_bin("reblock")).args(["freemap", dev, "--unit", "blocks", "--json"]),
    );
    assert_eq!(j["block_size"], BLOCK);
    j["extents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["start"].as_u64().unwrap(), e["len"].as_u64().unwrap()))
        .collect()
}

fn blocks_of(runs: &[(u64, u64)]) -> std::collections::BTreeSet<u64> {
    runs.iter().flat_map(|&(s, n)| s..s + n).collect()
}

/// With the file system unmounted: the server's free map against `reblock freemap`.
/// Returns the server's free pages.
fn compare_free_maps(st: &Stack) -> u64 {
    let served = blocks_of(&holes(&st.sock));
    let ext4 = blocks_of(&ext4_free(&st.loopdev));
    let free_pages = st.status()["free_pages"].as_u64().unwrap();
    assert_eq!(free_pages, served.len() as u64, "status free_pages = holes");
    let unknown: Vec<u64> = ext4.difference(&served).copied().take(5).collect();
    assert!(
        unknown.is_empty(),
        "ext4 free blocks the server thinks hold data: {unknown:?} ({} free in ext4, {} holes)",
        ext4.len(),
        served.len()
    );
    // Holes ext4 calls in use were allocated and never written: they must read zeros.
    drop_caches();
    let mut dev = std::fs::File::open(&st.loopdev).unwrap();
    let mut buf = vec![0u8; BLOCK as usize];
    for &b in served.difference(&ext4) {
        dev.seek(SeekFrom::Start(b * BLOCK)).unwrap();
        dev.read_exact(&mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 0), "hole at block {b} holds data");
    }
    eprintln!(
        "free map: {} holes, ext4 free {} blocks, {} allocated but never written",
        served.len(),
        ext4.len(),
        served.len() - ext4.len()
    );
    free_pages
}

/// Every file of `files` reads back exactly.
fn verify(fs: &Path, files: &BTreeMap<u32, u32>) {
    drop_caches();
    for (&i, &gen) in files {
        let got = std::fs::read(fs.join(format!("f{i}"))).unwrap();
        assert!(got == contents(i, gen), "f{i} (generation {gen}) differs");
    }
}

/// After a restart: the journal replayed by a mount, then `e2fsck -fn` clean.
fn fsck_clean(st: &Stack) {
    st.mount();
    st.umount();
    let out = Command::new("e2fsck")
        .args(["-fn", &st.loopdev])
        .output()
        .unwrap();
    assert!(out.status.success(), "e2fsck -fn: {out:?}");
}

/// Reads the hot files cold, round after round, until the server holds replicas.
fn read_until_replicated(st: &Stack, hot: &[u32]) -> serde_json::Value {
    let t = Instant::now();
    loop {
        drop_caches();
        for i in hot {
            std::fs::read(st.fs.join(format!("f{i}"))).unwrap();
        }
        let s = st.status();
        if s["replicas"].as_u64().unwrap() > 0 && s["replica_hits"].as_u64().unwrap() > 0 {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no replicas: {s}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn ext4_over_nbdfuse_free_map_matches_freemap_and_fsck_is_clean_after_crashes_with_replicas() {
    if let Some(why) = missing_prerequisite() {
        eprintln!("SKIPPED: ext4 over nbdfuse needs root and its tools: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let st = Stack::up(dir.path(), true, 0);
    run(Command::new("mkfs.ext4").args(["-q", "-b", "4096", &st.loopdev]));
    st.mount();
    let mut files: BTreeMap<u32, u32> = BTreeMap::new();
    for i in 0..40 {
        std::fs::write(st.fs.join(format!("f{i}")), contents(i, 0)).unwrap();
        files.insert(i, 0);
    }
    run(&mut Command::new("sync"));
    for i in (1..40).step_by(3) {
        std::fs::remove_file(st.fs.join(format!("f{i}"))).unwrap();
        files.remove(&i);
    }
    run(&mut Command::new("sync"));
    run(Command::new("fstrim").arg(&st.fs));
    st.umount();
    let free = compare_free_maps(&st);
    assert!(
        free > 65536 / 2,
        "fstrim freed most of the file system: {free}"
    );
    st.mount();
    verify(&st.fs, &files);

    let hot = [0, 2, 9, 20, 38];
    let mut st = st;
    for round in 1..=2 {
        let s = read_until_replicated(&st, &hot);
        eprintln!(
            "round {round}: {} replicas, {} replica hits",
            s["replicas"], s["replica_hits"]
        );
        // Overwrite a replicated file in place and write a new one into free space
        // (which may hold replicas), then crash with replicas in the table.
        let (i, gen) = (hot[round as usize], round);
        let path = st.fs.join(format!("f{i}"));
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Write::write_all(&mut f, &contents(i, gen)).unwrap();
        f.sync_all().unwrap();
        drop(f);
        files.insert(i, gen);
        let new = 100 + round;
        std::fs::write(st.fs.join(format!("f{new}")), contents(new, 0)).unwrap();
        files.insert(new, 0);
        read_until_replicated(&st, &hot);
        run(&mut Command::new("sync"));
        st.down(true);
        st = Stack::up(dir.path(), false, round);
        fsck_clean(&st);
        st.mount();
        verify(&st.fs, &files);
    }
    st.umount();
    compare_free_maps(&st);
    let img = st.img.clone();
    st.down(false);
    let c =
        json(Command::new(cargo_bin("reblock")).args(["check", img.to_str().unwrap(), "--json"]));
    assert_eq!(c["problems"].as_array().unwrap().len(), 0, "{c}");
}
