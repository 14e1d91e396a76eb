//! Engine behaviour on an in-memory store: reconfiguration to a plan, detach, a failed
//! commit turning the engine read-only (and recovering at the next open), clean stop
//! keeping dirty bits, and the offline check finding and repairing damage.

use reblock_engine::check::check;
use reblock_engine::format::FLAG_NEEDS_CHECK;
use reblock_engine::meta::read_superblock;
use reblock_engine::{Dev, Engine, EngineOptions, Layout, MemStore, Store};
use reblock_layout::Plan;
use std::sync::Arc;

mod small;
use small::{layout, page};

fn setup() -> (Arc<MemStore>, Layout) {
    let l = layout();
    let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    (store, l)
}

fn open(store: &Arc<MemStore>) -> Engine {
    Engine::open(store.clone(), EngineOptions::default())
        .unwrap()
        .0
}

#[test]
fn reconfiguration_moves_planned_pages_into_the_read_cache_and_keeps_data() {
    let (store, l) = setup();
    let e = open(&store);
    assert_eq!(l.read_cache_pages, 48);
    for p in 0..64u64 {
        e.write_sectors(&page(p as u8 + 1), p * 8).unwrap();
    }
    let mut plan = Plan::new(8, "hand");
    plan.push(10, 4, 0); // pages 10..14 to slots 0..4
    plan.push(50, 2, 20);
    e.reconfigure(plan).unwrap();
    while e.background_tick(true).unwrap() > 0 {}
    let map = e.indirector().map().clone();
    for (fs, slot) in [(10, 0), (13, 3), (50, 20), (51, 21)] {
        assert_eq!(map.lookup(fs), Some(slot), "FS page {fs}");
    }
    e.indirector().check();
    for p in 0..64u64 {
        let mut b = vec![0u8; 4096];
        e.read_sectors(&mut b, p * 8).unwrap();
        assert_eq!(b, page(p as u8 + 1), "page {p}");
    }
    assert_eq!(e.status().reconfiguration.state, "done");
}

#[test]
fn detach_leaves_the_complete_image_in_the_data_area() {
    let (store, l) = setup();
    let e = open(&store);
    let mut reference = vec![0u8; l.data_bytes as usize];
    for (i, p) in [3u64, 4, 5, 100, 101, 200].iter().enumerate() {
        let b = page(0x40 + i as u8);
        e.write_sectors(&b, p * 8).unwrap();
        reference[(*p * 4096) as usize..(*p * 4096 + 4096) as usize].copy_from_slice(&b);
    }
    assert!(e.status().mapped_pages > 0, "writes were absorbed");
    e.detach().unwrap();
    assert_eq!(e.status().mapped_pages, 0);
    let (dev, _) = store.devices();
    assert_eq!(&dev[..l.data_bytes as usize], &reference[..]);
    // Nothing new is absorbed while detached.
    e.write_sectors(&page(9), 0).unwrap();
    assert_eq!(e.status().mapped_pages, 0);
}

#[test]
fn clean_stop_keeps_true_dirty_bits_and_unclean_marks_all_dirty() {
    let (store, _) = setup();
    let e = open(&store);
    let mut plan = Plan::new(8, "hand");
    plan.push(7, 2, 0);
    e.reconfigure(plan).unwrap();
    while e.background_tick(true).unwrap() > 0 {}
    e.write_sectors(&page(1), 7 * 8).unwrap(); // page 7 dirty, page 8 clean
    e.close(false).unwrap();
    let (e2, rep) = Engine::open(store.clone(), EngineOptions::default()).unwrap();
    assert!(!rep.unclean);
    let ind = e2.indirector();
    assert!(ind.map().is_dirty(0) && !ind.map().is_dirty(1));
    drop(e2); // no close: the superblock stays DIRTY, as after a crash
    let (e3, rep) = Engine::open(store.clone(), EngineOptions::default()).unwrap();
    assert!(rep.unclean);
    assert!(
        e3.indirector().map().is_dirty(1),
        "seed 001 §3.5.1: every entry dirty"
    );
}

#[test]
fn failed_commit_turns_the_engine_read_only() {
    let (store, _) = setup();
    let e = open(&store);
    e.write_sectors(&page(5), 0).unwrap();
    store.fail_writes(Some(Dev::Bopt));
    assert!(e.flush().is_err());
    assert!(e.is_read_only());
    let err = e.write_sectors(&page(6), 80).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc_erofs()));
    store.fail_writes(None);
    // A failed commit leaves what a crash would; NEEDS_CHECK is for an operator's doubt.
    let found = read_superblock(store.as_ref()).unwrap();
    assert_eq!(found.sb.flags & FLAG_NEEDS_CHECK, 0);
}

fn libc_erofs() -> i32 {
    30
}

/// A commit that fails (here: the summary area refuses writes) leaves the device as a
/// crash at that point would: the next open recovers the last complete commit, writable,
/// with a clean check, and the write flushed before it reads back.
#[test]
fn failed_commit_recovers_at_the_next_open() {
    let (store, l) = setup();
    let e = open(&store);
    e.write_sectors(&page(5), 0).unwrap();
    e.flush().unwrap();
    drop(e);
    let fail_summary = MemStoreFailingBelow {
        inner: store.clone(),
        limit: l.slot_offset(0),
    };
    let e2 = Engine::open(Arc::new(fail_summary), EngineOptions::default())
        .unwrap()
        .0;
    e2.write_sectors(&page(7), 8).unwrap();
    assert!(e2.flush().is_err());
    assert!(e2.is_read_only());
    drop(e2);
    let e3 = open(&store);
    assert!(!e3.is_read_only());
    let mut b = page(0);
    e3.read_sectors(&mut b, 0).unwrap();
    assert_eq!(b, page(5), "the flushed write survives");
    e3.close(false).unwrap();
    let rep = check(store.as_ref(), false).unwrap();
    assert!(rep.is_clean(), "{:?}", rep.problems);
}

#[test]
fn needs_check_refuses_a_writable_open() {
    let (store, _) = setup();
    let mut sb = read_superblock(store.as_ref()).unwrap().sb;
    sb.flags |= FLAG_NEEDS_CHECK;
    reblock_engine::meta::write_superblock(store.as_ref(), &mut sb).unwrap();
    let err = Engine::open(store.clone(), EngineOptions::default())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("NEEDS_CHECK"), "{err}");
    let rep = check(store.as_ref(), true).unwrap();
    assert!(rep.problems.iter().any(|p| p.contains("NEEDS_CHECK")));
    assert!(rep.repaired);
    assert!(Engine::open(store.clone(), EngineOptions::default()).is_ok());
}

/// A store whose BOPT writes below `limit` fail (the summary area dies).
struct MemStoreFailingBelow {
    inner: Arc<MemStore>,
    limit: u64,
}

impl Store for MemStoreFailingBelow {
    fn read_at(&self, d: Dev, b: &mut [u8], o: u64) -> std::io::Result<()> {
        self.inner.read_at(d, b, o)
    }
    fn write_at(&self, d: Dev, b: &[u8], o: u64) -> std::io::Result<()> {
        let summary = o >= layout().data_bytes && o < self.limit;
        if summary {
            return Err(std::io::Error::from_raw_os_error(5));
        }
        self.inner.write_at(d, b, o)
    }
    fn sync(&self, d: Dev) -> std::io::Result<()> {
        self.inner.sync(d)
    }
    fn len(&self, d: Dev) -> std::io::Result<u64> {
        self.inner.len(d)
    }
    fn shared(&self) -> bool {
        true
    }
}

#[test]
fn check_finds_damage_and_repair_restores_a_clean_image() {
    let (store, l) = setup();
    let e = open(&store);
    for p in 0..10u64 {
        e.write_sectors(&page(p as u8 + 1), p * 8).unwrap();
    }
    e.close(false).unwrap();
    assert!(check(store.as_ref(), false).unwrap().is_clean());
    // Corrupt the newest copy of the write buffer's first segment and one superblock copy.
    let seg = l.read_cache_pages / l.segment_pages;
    for copy in 0..2 {
        store
            .write_at(Dev::Bopt, &[0xff; 16], l.summary_offset(seg, copy) + 100)
            .unwrap();
    }
    store
        .write_at(Dev::Bopt, &[0xff; 8], l.superblock_offset(0) + 30)
        .unwrap();
    let rep = check(store.as_ref(), false).unwrap();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.contains(&format!("segment {seg} summary copy"))),
        "{:?}",
        rep.problems
    );
    assert!(
        rep.problems.iter().any(|p| p.contains("superblock copy 0")),
        "{:?}",
        rep.problems
    );
    assert!(rep
        .problems
        .iter()
        .any(|p| p.contains("no valid summary copy")));
    let rep = check(store.as_ref(), true).unwrap();
    assert!(rep.repaired);
    let after = check(store.as_ref(), false).unwrap();
    assert!(after.is_clean(), "{:?}", after.problems);
    // The lost segment's pages are gone from the map, so they read their home copies:
    // the repair cannot invent what no summary recorded.
    let e2 = open(&store);
    e2.indirector().check();
}

#[test]
fn superblock_torn_write_falls_back_to_the_previous_generation() {
    let (store, l) = setup();
    let before = read_superblock(store.as_ref()).unwrap().sb;
    let copy = ((before.generation + 1) % 2) as u32;
    store
        .write_at(Dev::Bopt, &[0xAA; 100], l.superblock_offset(copy))
        .unwrap();
    let after = read_superblock(store.as_ref()).unwrap();
    assert_eq!(after.sb.generation, before.generation);
    assert!(after.copy_errors[copy as usize].is_some());
}

/// Regression: `write_bytes` patched sub-sector writes by reading the enclosing sectors,
/// patching and writing them back with no lock across the three steps, so two writers of
/// separate 64-byte pieces of one sector could each write back the other's stale bytes
/// (8 NBD connections lost 29 of 32,000 such writes). Every piece must end as written.
#[test]
fn concurrent_sub_sector_writes_to_one_sector_are_not_lost() {
    const WRITERS: u64 = 8;
    const PIECE: u64 = 64;
    let (store, l) = setup();
    let e = Arc::new(open(&store));
    let sectors = l.data_bytes / 512;
    let passes = 4u8;
    let threads: Vec<_> = (0..WRITERS)
        .map(|t| {
            let e = e.clone();
            std::thread::spawn(move || {
                for pass in 1..=passes {
                    for s in 0..sectors {
                        let fill = pass.wrapping_mul(16) ^ (t as u8 + 1) ^ (s as u8);
                        e.write_bytes(&[fill; PIECE as usize], s * 512 + t * PIECE)
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut lost = Vec::new();
    let mut buf = vec![0u8; 512];
    for s in 0..sectors {
        e.read_bytes(&mut buf, s * 512).unwrap();
        for t in 0..WRITERS {
            let fill = passes.wrapping_mul(16) ^ (t as u8 + 1) ^ (s as u8);
            let at = (t * PIECE) as usize;
            if buf[at..at + PIECE as usize].iter().any(|&b| b != fill) {
                lost.push((s, t));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} pieces lost, first {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

/// Regression: after a failed metadata commit, `flush` retried the
/// commit (the failed snapshot's segments were re-dirtied) and, once the device took
/// writes again, reported success: a client saw FLUSH succeed on a map nobody had checked.
/// After a failed commit, FLUSH must keep failing (EIO), like writes (EROFS).
#[test]
fn flush_after_a_failed_commit_keeps_failing() {
    let (store, _) = setup();
    let e = open(&store);
    e.write_sectors(&page(5), 0).unwrap();
    store.fail_writes(Some(Dev::Bopt));
    assert!(e.flush().is_err());
    store.fail_writes(None);
    let err = e
        .flush()
        .expect_err("a later FLUSH must not retry the commit");
    assert_eq!(err.raw_os_error(), Some(5), "{err}");
    assert!(e.status().io_failure.is_some());
    let err = e.write_bytes(&[1; 100], 10).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc_erofs()));
    let err = reblock_nbd::Export::write_at(&e, &page(1), 0, true).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc_erofs()));
}

/// Regression: `reconfigure` switched a detached engine back to normal mode, so with
/// `serve --replan-policy` the next automatic plan refilled the BOPT after `reblock
/// detach`. Automatic re-planning must leave a detached engine alone; only an explicit
/// `reconfigure` (the operator's `reblock reconfigure`) re-enables the BOPT.
#[test]
fn detach_stays_done_under_automatic_replanning() {
    let (store, _) = setup();
    let e = open(&store);
    for p in 0..32u64 {
        e.write_sectors(&page(p as u8 + 1), p * 8).unwrap();
    }
    e.detach().unwrap();
    assert!(e.is_detached());
    // What the re-planner does on its trigger: plan from recent requests and apply.
    let requests = (0..200u64)
        .filter_map(|i| {
            reblock_engine::replan::request_of(&reblock_nbd::RequestEvent {
                connection_id: 1,
                op: reblock_nbd::Op::Read,
                offset_bytes: (i % 16) * 4096,
                length_bytes: 4096,
                fua: false,
                ts_ns: i * 1000,
                duration_ns: 1000,
                errno: 0,
            })
        })
        .collect();
    let r = reblock_engine::replan::plan_and_apply(&e, "hot", requests);
    assert!(
        r.is_err(),
        "automatic re-plan applied to a detached engine: {r:?}"
    );
    while e.background_tick(true).unwrap() > 0 {}
    assert_eq!(
        e.status().mapped_pages,
        0,
        "the BOPT was refilled after detach"
    );
    e.write_sectors(&page(9), 0).unwrap();
    assert_eq!(
        e.status().mapped_pages,
        0,
        "a write was absorbed after detach"
    );
    // The operator's explicit reconfigure re-enables the BOPT.
    let mut plan = Plan::new(8, "hand");
    plan.push(3, 2, 0);
    e.reconfigure(plan).unwrap();
    while e.background_tick(true).unwrap() > 0 {}
    assert!(!e.is_detached());
    assert_eq!(e.status().mapped_pages, 2);
}

/// Regression: `detach` failed outright ("detach step refused") when a foreground write
/// dirtied a page between the flush-back plan and its step; it must re-plan the flush
/// back until the BOPT is empty.
#[test]
fn detach_retries_when_a_racing_write_dirties_a_page() {
    for round in 0..100u8 {
        let (store, _) = setup();
        let e = Arc::new(open(&store));
        // One page every other slot: each clean page is its own drop step, so a racing
        // write has many gaps between steps to land in.
        let mut plan = Plan::new(8, "hand");
        for p in 0..24u64 {
            plan.push(p, 1, 2 * p);
        }
        e.reconfigure(plan).unwrap();
        while e.background_tick(true).unwrap() > 0 {}
        assert_eq!(e.status().mapped_pages, 24);
        // The writer starts with detach and dirties pages from the last one down, while
        // detach drops clean pages from the first one up: the two meet in the middle,
        // where a page clean when the flush back was planned is written before its step.
        let start = Arc::new(std::sync::Barrier::new(2));
        let writer = {
            let (e, start) = (e.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for p in (0..24u64).rev() {
                    e.write_sectors(&page(round ^ p as u8), p * 8).unwrap();
                }
            })
        };
        start.wait();
        let r = e.detach();
        writer.join().unwrap();
        r.unwrap_or_else(|err| panic!("round {round}: {err}"));
        assert_eq!(e.status().mapped_pages, 0, "round {round}");
        e.indirector().check();
        for p in 0..24u64 {
            let mut b = vec![0u8; 4096];
            e.read_sectors(&mut b, p * 8).unwrap();
            assert_eq!(b, page(round ^ p as u8), "round {round} page {p}");
        }
    }
}

#[test]
fn sequential_cutoff_sends_large_writes_home_and_absorbs_small_ones() {
    // Cutoff 8 KiB (two pages): a four-page write to unmapped pages goes home, a
    // one-page write is absorbed into the write buffer; both read back.
    let (store, _) = setup();
    let opts = EngineOptions {
        sequential_cutoff_bytes: Some(8192),
        ..EngineOptions::default()
    };
    let e = Engine::open(store.clone(), opts).unwrap().0;
    let big: Vec<u8> = (0..4 * 4096).map(|i| (i % 251) as u8).collect();
    e.write_sectors(&big, 100 * 8).unwrap();
    assert_eq!(e.status().absorbed_writes, 0);
    assert_eq!(e.status().mapped_pages, 0);
    for p in 100..104 {
        assert_eq!(e.indirector().map().lookup(p), None, "page {p} went home");
    }
    e.write_sectors(&page(7), 200 * 8).unwrap();
    assert_eq!(e.status().absorbed_writes, 1);
    assert_eq!(e.status().mapped_pages, 1);
    let mut b = vec![0u8; big.len()];
    e.read_sectors(&mut b, 100 * 8).unwrap();
    assert_eq!(b, big);
    let mut b = page(0);
    e.read_sectors(&mut b, 200 * 8).unwrap();
    assert_eq!(b, page(7));
    // Without the cutoff (the default), the same large write is absorbed.
    let (store, _) = setup();
    let e = open(&store);
    e.write_sectors(&big, 100 * 8).unwrap();
    assert_eq!(e.status().absorbed_writes, 1);
    assert_eq!(e.status().mapped_pages, 4);
}
