//! The engine served over NBD to real clients: nbdinfo, qemu-io pattern writes and
//! read-backs, qemu-img compare against a plain-file reference, nbdcopy both ways, fio
//! with crc32c verification, and a kernel file system through nbdfuse + a loop device.
//! The BOPT is small, so writes are absorbed, destaged and mixed with home writes.

use reblock_engine::background::{Background, BackgroundOptions};
use reblock_engine::format::LayoutRequest;
use reblock_engine::{Engine, EngineOptions, FileStore, Layout};
use reblock_nbd::{ExportSet, Listen, RunningServer, Server, ServerConfig};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

const DATA_BYTES: u64 = 64 << 20;

struct Fixture {
    _dir: tempfile::TempDir,
    image: PathBuf,
    sock: PathBuf,
    engine: Arc<Engine>,
    server: Option<RunningServer>,
    bg: Option<Background>,
}

impl Fixture {
    fn new(bopt_bytes: u64) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("img");
        let sock = dir.path().join("sock");
        let l = Layout::plan(&LayoutRequest {
            data_bytes: DATA_BYTES,
            bopt_bytes,
            page_bytes: 4096,
            segment_pages: 64,
            write_buffer_fraction: 0.5,
            separate: false,
        })
        .unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&image)
            .unwrap();
        f.set_len(l.device_bytes).unwrap();
        let store = Arc::new(FileStore::new(f, None));
        Engine::format(store.as_ref(), &l, 42).unwrap();
        let engine = Arc::new(Engine::open(store, EngineOptions::default()).unwrap().0);
        let exports = ExportSet::single("img", engine.clone()).unwrap();
        let server = Server::bind(
            &Listen::Unix(sock.clone()),
            exports,
            ServerConfig::default(),
        )
        .unwrap()
        .start()
        .unwrap();
        let bg = Background::start(engine.clone(), BackgroundOptions::default());
        Fixture {
            _dir: dir,
            image,
            sock,
            engine,
            server: Some(server),
            bg: Some(bg),
        }
    }
    fn uri(&self) -> String {
        format!("nbd+unix:///img?socket={}", self.sock.display())
    }
    fn dir(&self) -> &Path {
        self.image.parent().unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        if let Some(b) = self.bg.take() {
            b.stop();
        }
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

const QEMU_IO_WRITES: &[&str] = &[
    "write -P 0xab 0 1M",
    "write -P 0xcd 4096 8192",
    "write -P 0x11 1000 100",
    "write -P 0x22 8M 3M",
    "write -P 0x33 9M 4096",
    "write -z 10M 64k",
    "write -P 0x44 60M 2M",
];

#[test]
fn qemu_io_patterns_read_back_and_qemu_img_compare_matches_a_plain_image() {
    let fx = Fixture::new(2 << 20);
    let info = run(Command::new("nbdinfo").arg(fx.uri()));
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        text.contains(&format!("export-size: {DATA_BYTES}")),
        "{text}"
    );
    assert!(text.contains("can_multi_conn: true"), "{text}");
    let mut c = Command::new("qemu-io");
    c.args(["-f", "raw", &fx.uri()]);
    for w in QEMU_IO_WRITES {
        c.args(["-c", w]);
    }
    c.args([
        "-c",
        "flush",
        "-c",
        "read -P 0xab 0 1000",
        "-c",
        "read -P 0x11 1000 100",
        "-c",
        "read -P 0xcd 4096 8192",
    ]);
    c.args([
        "-c",
        "read -P 0x22 8M 1M",
        "-c",
        "read -P 0x33 9M 4096",
        "-c",
        "read -P 0 10M 64k",
    ]);
    let out = run(&mut c);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Pattern verification failed"));
    // The same writes on a plain file are the reference.
    let reference = fx.dir().join("ref");
    std::fs::File::create(&reference)
        .unwrap()
        .set_len(DATA_BYTES)
        .unwrap();
    let mut c = Command::new("qemu-io");
    c.args(["-f", "raw", reference.to_str().unwrap()]);
    for w in QEMU_IO_WRITES {
        c.args(["-c", w]);
    }
    run(&mut c);
    run(Command::new("qemu-img").args([
        "compare",
        "-f",
        "raw",
        "-F",
        "raw",
        &fx.uri(),
        reference.to_str().unwrap(),
    ]));
    assert!(
        fx.engine.status().absorbed_writes > 0,
        "the write buffer took part"
    );
    // Detach: the data area alone equals the reference, byte for byte.
    fx.engine.detach().unwrap();
    let img = std::fs::read(&fx.image).unwrap();
    let refb = std::fs::read(&reference).unwrap();
    assert!(
        img[..DATA_BYTES as usize] == refb[..],
        "data area differs from the reference after detach"
    );
}

#[test]
fn nbdcopy_round_trips_random_data() {
    let fx = Fixture::new(4 << 20);
    let src = fx.dir().join("src");
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let bytes: Vec<u8> = (0..DATA_BYTES / 8)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect();
    std::fs::write(&src, &bytes).unwrap();
    run(Command::new("nbdcopy").args([src.to_str().unwrap(), &fx.uri()]));
    let back = fx.dir().join("back");
    run(Command::new("nbdcopy").args([&fx.uri(), back.to_str().unwrap()]));
    assert!(
        std::fs::read(&back).unwrap() == bytes,
        "nbdcopy read back other bytes"
    );
}

#[test]
fn fio_random_writes_verify_with_crc32c() {
    let fx = Fixture::new(2 << 20);
    run(Command::new("fio").args([
        "--name=verify",
        "--ioengine=nbd",
        &format!("--uri={}", fx.uri()),
        "--rw=randwrite",
        "--bs=4k",
        "--size=16M",
        "--iodepth=16",
        "--verify=crc32c",
        "--verify_fatal=1",
        "--verify_state_save=0",
        "--do_verify=1",
    ]));
    let s = fx.engine.status();
    assert!(
        s.writes >= 4096 && s.reads >= 4096,
        "fio wrote and verified: {} writes, {} reads",
        s.writes,
        s.reads
    );
}

#[test]
fn ext4_through_nbdfuse_and_a_loop_device_mounts_and_checks_clean() {
    if !Path::new("/dev/loop-control").exists() || unsafe_uid() != 0 {
        eprintln!("SKIPPED: needs root and loop devices");
        return;
    }
    let fx = Fixture::new(4 << 20);
    let mnt = fx.dir().join("fuse");
    let fsmnt = fx.dir().join("fs");
    std::fs::create_dir_all(&mnt).unwrap();
    std::fs::create_dir_all(&fsmnt).unwrap();
    let mut fuse = Command::new("nbdfuse")
        .arg(&mnt)
        .args(["--unix", fx.sock.to_str().unwrap()])
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while !mnt.join("nbd").exists() {
        assert!(t.elapsed().as_secs() < 10, "nbdfuse did not mount");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let loopdev = String::from_utf8(
        run(Command::new("losetup")
            .args(["-f", "--show"])
            .arg(mnt.join("nbd")))
        .stdout,
    )
    .unwrap();
    let loopdev = loopdev.trim().to_owned();
    let result = std::panic::catch_unwind(|| {
        run(Command::new("mkfs.ext4").args(["-q", &loopdev]));
        run(Command::new("mount").arg(&loopdev).arg(&fsmnt));
        let payload: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i * 7 + i / 4096) as u8)
            .collect();
        std::fs::write(fsmnt.join("a.bin"), &payload).unwrap();
        std::fs::write(fsmnt.join("b.txt"), b"hello reblock\n").unwrap();
        run(Command::new("umount").arg(&fsmnt));
        run(Command::new("mount").arg(&loopdev).arg(&fsmnt));
        assert!(std::fs::read(fsmnt.join("a.bin")).unwrap() == payload);
        assert_eq!(
            std::fs::read(fsmnt.join("b.txt")).unwrap(),
            b"hello reblock\n"
        );
        run(Command::new("umount").arg(&fsmnt));
        run(Command::new("fsck.ext4").args(["-fn", &loopdev]));
    });
    let _ = Command::new("umount").arg(&fsmnt).output();
    let _ = Command::new("losetup").args(["-d", &loopdev]).output();
    let _ = Command::new("umount").arg(&mnt).output();
    let _ = fuse.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    assert!(fx.engine.status().writes > 0);
}

fn unsafe_uid() -> u32 {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
}
