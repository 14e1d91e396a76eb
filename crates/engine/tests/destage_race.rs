//! Destage runs beside foreground requests (engine/destage.rs): writers, readers and the
//! background destage race on a small write buffer. A write racing the copy of its page
//! home must not be lost when the slot is unmapped, and a reader routed to a slot just
//! freed must never see another page's data written into it (freed slots are held until
//! the destage's commit). Every page reads its last write live, after a clean stop and
//! reopen, and `check` is clean.

use reblock_engine::check::check;
use reblock_engine::{Engine, EngineOptions, MemStore};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

mod small;
use small::{layout, SlowStore};

const WRITERS: u64 = 4;
const WRITES: u64 = 400;
/// Pages written: twice the write buffer, so writes keep landing on pages being evicted.
const PAGES: u64 = 32;

/// Page `p`'s content for its `n`-th write: the page number, the write number, filler.
fn stamp(p: u64, n: u64) -> Vec<u8> {
    let mut b = vec![(p as u8) ^ 0xa5; 4096];
    b[..8].copy_from_slice(&p.to_le_bytes());
    b[8..16].copy_from_slice(&n.to_le_bytes());
    b
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn read_page(e: &Engine, p: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    e.read_sectors(&mut b, p * 8).unwrap();
    b
}

/// Writer `t` owns the pages `p % WRITERS == t`; returns each page's last content.
fn writer(e: &Engine, pages: u64, t: u64, writes: u64) -> Vec<(u64, Vec<u8>)> {
    let mut last = std::collections::HashMap::new();
    let mut x = 0x9e37_79b9 + t;
    for n in 1..=writes {
        let p = (next(&mut x) % (pages / WRITERS)) * WRITERS + t;
        let b = stamp(p, n);
        e.write_sectors(&b, p * 8).unwrap();
        last.insert(p, b);
        if n % 97 == 0 {
            e.flush().unwrap();
        }
    }
    last.into_iter().collect()
}

/// Reads the pages of writer 0 once it has finished, while the other writers and the
/// destage go on: each must read its last write, never another page's data. (A page
/// still being written is not read here: the next test races reads with writes.)
fn reader(e: &Engine, done: &std::sync::OnceLock<Vec<(u64, Vec<u8>)>>, stop: &AtomicBool) -> u64 {
    let (mut x, mut reads) = (12345u64, 0);
    while done.get().is_none() {
        std::thread::yield_now();
    }
    let last = done.get().unwrap();
    while !stop.load(Relaxed) {
        let (p, want) = &last[(next(&mut x) % last.len() as u64) as usize];
        let b = read_page(e, *p);
        let owner = u64::from_le_bytes(b[..8].try_into().unwrap());
        assert!(
            b == *want,
            "page {p} read page {owner}'s data, not its last write"
        );
        reads += 1;
    }
    reads
}

#[test]
fn destage_beside_writes_and_reads_loses_nothing_and_serves_no_foreign_data() {
    let l = layout();
    assert_eq!(l.write_buffer_pages, 16);
    let pages = PAGES;
    let store = Arc::new(SlowStore(MemStore::new(
        vec![0u8; l.device_bytes as usize],
        None,
    )));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    let e = Engine::open(store.clone(), EngineOptions::default())
        .unwrap()
        .0;
    let stop = AtomicBool::new(false);
    let done = std::sync::OnceLock::new();
    let (last, destaged, reads) = std::thread::scope(|s| {
        let bg = s.spawn(|| {
            let mut steps = 0;
            while !stop.load(Relaxed) {
                steps += e.background_tick(false).unwrap();
            }
            steps
        });
        let done = &done;
        let rd = s.spawn(|| reader(&e, done, &stop));
        let ws: Vec<_> = (0..WRITERS)
            .map(|t| {
                let e = &e;
                s.spawn(move || {
                    // Writer 0 finishes early; the reader then reads its pages.
                    let n = if t == 0 { WRITES / 4 } else { WRITES };
                    let last = writer(e, pages, t, n);
                    if t == 0 {
                        done.set(last.clone()).unwrap();
                    }
                    last
                })
            })
            .collect();
        let last: Vec<_> = ws.into_iter().flat_map(|w| w.join().unwrap()).collect();
        stop.store(true, Relaxed);
        (last, bg.join().unwrap(), rd.join().unwrap())
    });
    assert!(destaged > 20, "the destage ran ({destaged} steps)");
    assert!(reads > 100, "{reads} reads beside the destage");
    e.indirector().check();
    for (p, b) in &last {
        assert!(read_page(&e, *p) == *b, "page {p} lost its last write");
    }
    e.close(false).unwrap();
    let e = Engine::open(store.clone(), EngineOptions::default())
        .unwrap()
        .0;
    for (p, b) in &last {
        assert!(read_page(&e, *p) == *b, "page {p} after reopen");
    }
    e.close(false).unwrap();
    let rep = check(store.as_ref(), false).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
}

/// A read racing writes of the same page (and a destage) sees that page's data, old or
/// new, or zeros before its first write; never the previous occupant of the write-buffer
/// slot the write just mapped the page to (a write maps its page before its data lands).
#[test]
fn a_read_racing_a_write_of_its_page_sees_only_that_pages_data() {
    let l = layout();
    let store = Arc::new(SlowStore(MemStore::new(
        vec![0u8; l.device_bytes as usize],
        None,
    )));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    let e = Engine::open(store.clone(), EngineOptions::default())
        .unwrap()
        .0;
    let stop = AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        let bg = s.spawn(|| {
            while !stop.load(Relaxed) {
                e.background_tick(false).unwrap();
            }
        });
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (e, stop) = (&e, &stop);
                s.spawn(move || {
                    let (mut x, mut n) = (777 + r, 0u64);
                    while !stop.load(Relaxed) {
                        let p = next(&mut x) % PAGES;
                        let b = read_page(e, p);
                        let owner = u64::from_le_bytes(b[..8].try_into().unwrap());
                        assert!(
                            b.iter().all(|&v| v == 0) || owner == p,
                            "page {p} read page {owner}'s data"
                        );
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let ws: Vec<_> = (0..WRITERS)
            .map(|t| {
                let e = &e;
                s.spawn(move || writer(e, PAGES, t, WRITES))
            })
            .collect();
        for w in ws {
            w.join().unwrap();
        }
        stop.store(true, Relaxed);
        bg.join().unwrap();
        readers.into_iter().map(|r| r.join().unwrap()).sum::<u64>()
    });
    assert!(reads > 100, "{reads} reads beside the writes");
    e.close(false).unwrap();
}
