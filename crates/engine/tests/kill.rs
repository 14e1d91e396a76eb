//! Crash test with a real process: a server process (this test binary re-executed as the
//! `child_server` test) serves an image through the engine; a client writes stamped
//! sectors with periodic FLUSH; the server gets SIGKILL at a random moment; a new server
//! recovers the image; every sector must read back the write that was flushed last, or a
//! later one (never an older one), and the map must be consistent.

mod common;

use common::Client;
use reblock_engine::background::{Background, BackgroundOptions};
use reblock_engine::format::LayoutRequest;
use reblock_engine::{Engine, EngineOptions, FileStore, Layout};
use reblock_nbd::{ExportSet, Listen, Server, ServerConfig};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECTOR: usize = 512;
const DATA_BYTES: u64 = 2 << 20;

fn stamp(id: u64, sector: u64) -> Vec<u8> {
    let mut s = vec![(id as u8) ^ (sector as u8); SECTOR];
    s[0..8].copy_from_slice(&id.to_le_bytes());
    s[8..16].copy_from_slice(&sector.to_le_bytes());
    s
}

fn open_store(image: &Path) -> Arc<FileStore> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)
        .unwrap();
    Arc::new(FileStore::new(f, None))
}

/// Runs only when re-executed by the parent test: serve until killed.
#[test]
fn child_server() {
    let Ok(spec) = std::env::var("REBLOCK_KILL_CHILD") else {
        return;
    };
    let (image, sock) = spec.split_once('|').unwrap();
    let (engine, _) = Engine::open(
        open_store(Path::new(image)),
        EngineOptions {
            max_copy_pages: 8,
            ..Default::default()
        },
    )
    .unwrap();
    let engine = Arc::new(engine);
    let exports = ExportSet::single("", engine.clone()).unwrap();
    let _server = Server::bind(&Listen::Unix(sock.into()), exports, ServerConfig::default())
        .unwrap()
        .start()
        .unwrap();
    let _bg = Background::start(
        engine,
        BackgroundOptions {
            rate_bytes_per_s: 1 << 30,
            idle_ms: 0,
        },
    );
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn spawn_child(image: &Path, sock: &Path) -> Child {
    let _ = std::fs::remove_file(sock);
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_server", "--nocapture", "--test-threads=1"])
        .env(
            "REBLOCK_KILL_CHILD",
            format!("{}|{}", image.display(), sock.display()),
        )
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !sock.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

struct Model {
    history: Vec<Vec<u64>>,
    flushed: Vec<u64>,
    next_id: u64,
}

fn workload(sock: &Path, model: Arc<Mutex<Model>>, seed: u64) {
    let Ok(mut c) = Client::connect(sock) else {
        return;
    };
    let mut x = seed | 1;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let sectors = DATA_BYTES / SECTOR as u64;
    for i in 0.. {
        if i % 8 == 7 {
            let snap: Vec<u64> = model
                .lock()
                .unwrap()
                .history
                .iter()
                .map(|h| *h.last().unwrap())
                .collect();
            if c.flush().is_err() {
                return;
            }
            model.lock().unwrap().flushed = snap;
            continue;
        }
        let (first, n) = if rnd(4) > 0 {
            (rnd(sectors / 8) * 8, 8 * (1 + rnd(4)))
        } else {
            (rnd(sectors - 16), 1 + rnd(15))
        };
        let n = n.min(sectors - first);
        let id = {
            let mut m = model.lock().unwrap();
            m.next_id += 1;
            let id = m.next_id;
            for s in first..first + n {
                m.history[s as usize].push(id);
            }
            id
        };
        let buf: Vec<u8> = (first..first + n).flat_map(|s| stamp(id, s)).collect();
        if c.write(first * SECTOR as u64, &buf).is_err() {
            return;
        }
    }
}

fn verify(sock: &Path, model: &mut Model) {
    let mut c = Client::connect(sock).unwrap();
    assert_eq!(c.size, DATA_BYTES);
    let all = c.read(0, DATA_BYTES as u32).unwrap();
    for (s, chunk) in all.chunks(SECTOR).enumerate() {
        let id = u64::from_le_bytes(chunk[0..8].try_into().unwrap());
        assert_eq!(
            chunk,
            &stamp(id, s as u64)[..],
            "sector {s} is not a whole stamp"
        );
        let hist = &model.history[s];
        let from = hist.iter().position(|&x| x == model.flushed[s]).unwrap();
        assert!(
            hist[from..].contains(&id),
            "sector {s}: read write {id}, flushed {} (history {hist:?})",
            model.flushed[s]
        );
        model.history[s] = vec![id];
        model.flushed[s] = id;
    }
}

#[test]
fn sigkill_during_writes_loses_no_flushed_byte() {
    let dir = tempfile::tempdir().unwrap();
    let image: PathBuf = dir.path().join("img");
    let sock = dir.path().join("sock");
    let layout = Layout::plan(&LayoutRequest {
        data_bytes: DATA_BYTES,
        bopt_bytes: 1 << 20,
        page_bytes: 4096,
        segment_pages: 16,
        write_buffer_fraction: 0.5,
        separate: false,
    })
    .unwrap();
    let sectors = DATA_BYTES / SECTOR as u64;
    let mut bytes: Vec<u8> = (0..sectors).flat_map(|s| stamp(0, s)).collect();
    bytes.resize(layout.device_bytes as usize, 0);
    std::fs::write(&image, &bytes).unwrap();
    Engine::format(open_store(&image).as_ref(), &layout, 7).unwrap();
    let model = Arc::new(Mutex::new(Model {
        history: vec![vec![0]; sectors as usize],
        flushed: vec![0; sectors as usize],
        next_id: 0,
    }));
    let rounds = if std::env::var("REBLOCK_CRASH_SOAK").is_ok_and(|v| v == "1") {
        30
    } else {
        4
    };
    let mut child = spawn_child(&image, &sock);
    for round in 0..rounds {
        let m = model.clone();
        let s = sock.clone();
        let client = std::thread::spawn(move || workload(&s, m, round + 11));
        std::thread::sleep(Duration::from_millis(150 + 97 * round % 400));
        child.kill().unwrap();
        child.wait().unwrap();
        client.join().unwrap();
        child = spawn_child(&image, &sock);
        verify(&sock, &mut model.lock().unwrap());
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let ids = model.lock().unwrap().next_id;
    println!("SIGKILL rounds: {rounds}, writes issued: {ids}");
    assert!(ids > 10 * rounds, "the workload barely ran ({ids} writes)");
}
