//! The control socket reads request lines through a bound: an endless line costs at most
//! 64 MiB, is refused with a reply that says why, and the server answers the next client.
//! Its own test binary: it measures the process's peak memory.

use reblock_engine::control::{self, ControlServer, MAX_REQUEST_LINE_BYTES};
use reblock_engine::format::LayoutRequest;
use reblock_engine::{Engine, EngineOptions, Layout, MemStore};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// Peak resident memory of this process, in bytes.
fn peak_rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn an_endless_control_line_costs_at_most_64_mib_and_is_refused() {
    let l = Layout::plan(&LayoutRequest {
        data_bytes: 4 << 20,
        bopt_bytes: 2 << 20,
        page_bytes: 4096,
        segment_pages: 16,
        write_buffer_fraction: 0.5,
        separate: false,
    })
    .unwrap();
    let store = Arc::new(MemStore::new(vec![0; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 7).unwrap();
    let engine = Arc::new(Engine::open(store, EngineOptions::default()).unwrap().0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl");
    let server = ControlServer::start(&path, engine).unwrap();

    let before = peak_rss();
    let s = UnixStream::connect(&path).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        // 256 MiB without a newline; the server closes long before.
        for _ in 0..256 {
            if w.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let mut reply = String::new();
    BufReader::new(&s).read_line(&mut reply).unwrap();
    writer.join().unwrap();
    let grown = peak_rss().saturating_sub(before);
    assert!(reply.contains("longer than"), "{reply}");
    assert!(
        grown <= MAX_REQUEST_LINE_BYTES + (8 << 20),
        "an endless line cost {grown} bytes"
    );
    let status = control::request(&path, &serde_json::json!({"cmd": "status"})).unwrap();
    assert_eq!(status["data_bytes"], 4 << 20);
    server.shutdown();
}
