//! The engine's lock order under FS2 replicas: client writes that make replicas stale
//! (and TRIMs) race the background, which destages the write buffer and makes replicas.
//! A destage holds the commit lock while it waits for the stripes of the pages it
//! copies home; a writer that held its stripes and then waited for the commit lock to
//! drop a replica deadlocked the two (a served export hung: every connection thread and
//! the background thread waiting on each other). The test fails by timing out.

use reblock_engine::{Engine, EngineOptions, MemStore};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::Duration;

mod small;
use small::{layout, SlowStore};

const PAGE: u64 = 4096;
/// Pages 0..HOT are read over and over (they get replicas); pages FREE.. are trimmed
/// (the free space replicas go to) and written again by the trimmer.
const HOT: u64 = 16;
const FREE: u64 = 128;
const PAGES: u64 = 256;
const ROUNDS: u64 = 300;

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Reads the hot pages, writes them (and pages beyond) with flushes, trims and rewrites
/// free pages, while the background destages and makes replicas.
fn race(e: &Engine) -> u64 {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let bg = s.spawn(|| {
            let mut ticks = 0u64;
            while !stop.load(Relaxed) {
                ticks += e.background_tick(true).unwrap_or(0) as u64;
            }
            ticks
        });
        let reader = s.spawn(|| {
            let mut b = vec![0u8; PAGE as usize];
            while !stop.load(Relaxed) {
                for p in 0..HOT {
                    e.read_bytes(&mut b, p * PAGE).unwrap();
                }
            }
        });
        let writers: Vec<_> = (0..3u64)
            .map(|t| {
                s.spawn(move || {
                    let mut x = 0x51ed_2701 + t;
                    for n in 0..ROUNDS {
                        let p = next(&mut x) % FREE;
                        e.write_bytes(&vec![(n as u8) ^ 0x5a; PAGE as usize], p * PAGE)
                            .unwrap();
                        // An unaligned write too: its edges are read and written back
                        // with the stripes held.
                        let off = (next(&mut x) % (FREE * PAGE - 9000)) + 3;
                        e.write_bytes(&vec![t as u8; 5000], off).unwrap();
                        if n % 31 == 0 {
                            e.flush().unwrap();
                        }
                    }
                })
            })
            .collect();
        let trimmer = s.spawn(|| {
            let mut x = 0xdead_beefu64;
            for n in 0..ROUNDS {
                let p = FREE + next(&mut x) % (PAGES - FREE - 4);
                e.trim_bytes(p * PAGE, 4 * PAGE).unwrap();
                if n % 3 == 0 {
                    e.write_bytes(&vec![0x77; PAGE as usize], (p + 1) * PAGE)
                        .unwrap();
                }
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        trimmer.join().unwrap();
        stop.store(true, Relaxed);
        reader.join().unwrap();
        bg.join().unwrap()
    })
}

#[test]
fn writes_and_trims_that_meet_replicas_never_deadlock_with_the_background() {
    let l = layout();
    let store = Arc::new(SlowStore(MemStore::new(
        vec![0u8; l.device_bytes as usize],
        None,
    )));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    let e = Arc::new(
        Engine::open(store.clone(), EngineOptions::default())
            .unwrap()
            .0,
    );
    for p in 0..FREE {
        e.write_bytes(&vec![p as u8; PAGE as usize], p * PAGE)
            .unwrap();
    }
    e.flush().unwrap();
    e.trim_bytes(FREE * PAGE, (PAGES - FREE) * PAGE).unwrap();
    // Make replicas before the race, so the first writes already meet some.
    let mut b = vec![0u8; PAGE as usize];
    for _ in 0..8 {
        for p in 0..HOT {
            e.read_bytes(&mut b, p * PAGE).unwrap();
        }
        for _ in 0..8 {
            e.background_tick(true).unwrap();
        }
    }
    assert!(
        e.status().replicas > 0,
        "the setup made no replica, so the race would test nothing"
    );
    let (tx, rx) = mpsc::channel();
    let e2 = e.clone();
    std::thread::spawn(move || {
        let ticks = race(&e2);
        let _ = tx.send(ticks);
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(ticks) => assert!(ticks > 0, "the background did nothing"),
        Err(_) => panic!(
            "writes, trims and the background made no progress for 120 s: a lock-order deadlock"
        ),
    }
    e.flush().unwrap();
    e.indirector().check();
}
