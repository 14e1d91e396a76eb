//! Bounded resources: connections past the limit are refused while the server stays up
//! under 256 threads, idle connections cost one thread each, a new client is served
//! correctly afterwards, and socket files keep their mode whatever the umask. Its own
//! test binary: it counts the process's threads and changes the umask.

mod common;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{pattern, Fixture};
use reblock_nbd::server::DEFAULT_MAX_CONNECTIONS;
use reblock_nbd::{bind_unix, ServerConfig};

const SIZE: usize = 1 << 20;

/// The tests count the process's threads: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// True when the server greeted this connection, false when it closed it.
fn greeted(s: &mut UnixStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut g = [0u8; 18];
    match s.read_exact(&mut g) {
        Ok(()) => &g[..8] == b"NBDMAGIC",
        Err(_) => false,
    }
}

#[test]
fn three_hundred_connections_are_bounded_and_a_new_client_is_served_afterwards() {
    let _serial = one_at_a_time();
    let f = Fixture::new(SIZE, false, ServerConfig::default());
    let mut conns: Vec<UnixStream> = (0..300)
        .map(|_| UnixStream::connect(&f.socket).unwrap())
        .collect();
    let served = conns.iter_mut().map(greeted).filter(|g| *g).count();
    assert_eq!(served, DEFAULT_MAX_CONNECTIONS, "the rest are refused");
    let during = threads();
    assert!(during < 256, "{during} threads for 300 connections");
    drop(conns);

    // The refused and the closed connections free their places: a new client gets the
    // whole protocol and the right data.
    let t = Instant::now();
    let mut c = loop {
        let mut raw = f.raw();
        let mut g = [0u8; 18];
        if raw.s.read_exact(&mut g).is_ok() {
            raw.send(&3u32.to_be_bytes());
            break raw;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "never served again");
        std::thread::sleep(Duration::from_millis(50));
    };
    c.option(7, &common::info_data("disk", &[]));
    while c.option_reply().1 != 1 {}
    c.request(0, 0, 1, 4096, 4096);
    assert_eq!(c.simple_reply(), (0, 1));
    assert_eq!(c.read_n(4096), pattern(SIZE)[4096..8192]);
}

#[test]
fn busy_connections_draw_extra_workers_from_a_bounded_budget() {
    let _serial = one_at_a_time();
    let config = ServerConfig {
        max_extra_workers: 8,
        ..ServerConfig::default()
    };
    let f = Fixture::new(SIZE, false, config);
    let before = threads();
    let mut clients: Vec<_> = (0..6)
        .map(|_| {
            let mut c = f.raw();
            c.go("disk", false);
            c
        })
        .collect();
    // Pipelined requests make each connection want more workers than the budget has.
    let expected = pattern(SIZE);
    for round in 0..20u64 {
        for c in clients.iter_mut() {
            for i in 0..32u64 {
                c.request(0, 0, round * 32 + i, i * 4096, 4096);
            }
        }
        for c in clients.iter_mut() {
            for _ in 0..32 {
                let (errno, cookie) = c.simple_reply();
                assert_eq!(errno, 0);
                let at = ((cookie % 32) * 4096) as usize;
                assert_eq!(c.read_n(4096), expected[at..at + 4096]);
            }
        }
    }
    let grown = threads() - before;
    assert!(
        grown <= 6 + 8,
        "{grown} threads for 6 connections and a budget of 8"
    );
}

#[test]
fn socket_files_keep_their_mode_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: umask only changes the mode of files created from here on.
    let old = unsafe { libc::umask(0) };
    let modes: Vec<u32> = [0o600, 0o660]
        .iter()
        .map(|&m| {
            let p = dir.path().join(format!("s{m:o}"));
            let _l = bind_unix(&p, m).unwrap();
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777
        })
        .collect();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    assert_eq!(modes, [0o600, 0o660]);
}
