//! FS2 online on a small image: the free-space watermarks govern the replicas (made
//! above the high mark, the least recently read reclaimed below the low mark until the
//! high mark holds, all dropped below the critical mark), and `--replan-policy fs2`
//! has the policy's replicas made next to each other; every page reads back as written.

use reblock_engine::replan::plan_and_apply;
use reblock_engine::{Engine, EngineOptions, MemStore};
use reblock_freespace::MarkVerdict;
use reblock_trace::{Op, Request, NO_COMMAND};
use std::collections::BTreeSet;
use std::sync::Arc;

mod small;
use small::layout;

const PAGE: u64 = 4096;
/// Data pages of the small layout: marks at 10 %, 5 % and 2 %: 26, 13 and 6 pages.
const PAGES: u64 = 256;
const FREE: u64 = 128;

fn fill(p: u64) -> Vec<u8> {
    vec![(p % 251) as u8 + 1; PAGE as usize]
}

/// An engine over a fresh image whose pages 0..FREE hold data and FREE.. are trimmed.
fn engine() -> Engine {
    let l = layout();
    let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    let e = Engine::open(store, EngineOptions::default()).unwrap().0;
    for p in 0..FREE {
        e.write_bytes(&fill(p), p * PAGE).unwrap();
    }
    e.trim_bytes(FREE * PAGE, (PAGES - FREE) * PAGE).unwrap();
    e.flush().unwrap();
    e
}

fn read(e: &Engine, p: u64) -> Vec<u8> {
    let mut b = vec![0u8; PAGE as usize];
    e.read_bytes(&mut b, p * PAGE).unwrap();
    b
}

fn ticks(e: &Engine, n: usize) {
    for _ in 0..n {
        e.background_tick(true).unwrap();
    }
}

fn replica_pages(e: &Engine) -> BTreeSet<u64> {
    e.replica_table().entries().map(|r| r.replica).collect()
}

/// Every data page reads back as the client last wrote it (trimmed pages as zeros).
fn check_contents(e: &Engine, written: &BTreeSet<u64>) {
    for p in 0..PAGES {
        let want = if p < FREE || written.contains(&p) {
            fill(p)
        } else {
            vec![0; PAGE as usize]
        };
        assert!(read(e, p) == want, "page {p}");
    }
}

#[test]
fn watermarks_govern_creating_reclaiming_and_dropping_replicas() {
    let e = engine();
    let m = e.status().replica_marks;
    assert_eq!((m.high_pages, m.low_pages, m.critical_pages), (26, 13, 6));
    assert_eq!(m.verdict, MarkVerdict::Create(FREE - 26));
    // Forty hot pages read over and over: above the high mark they get replicas.
    for _ in 0..4 {
        for p in 0..40 {
            read(&e, p);
        }
        ticks(&e, 60);
    }
    let made = e.replica_count() as u64;
    assert!(made >= 30, "{made} replicas");
    let mut written = BTreeSet::new();
    // The client takes free pages no replica holds until 20 are left: between the
    // marks nothing changes.
    let write_unused = |e: &Engine, written: &mut BTreeSet<u64>, leave: u64| {
        let reps = replica_pages(e);
        let unused: Vec<u64> = (FREE..PAGES)
            .filter(|p| !reps.contains(p) && !written.contains(p))
            .collect();
        for &p in &unused[..unused.len() - leave as usize] {
            e.write_bytes(&fill(p), p * PAGE).unwrap();
            written.insert(p);
        }
    };
    write_unused(&e, &mut written, 20);
    ticks(&e, 10);
    let s = e.status();
    assert_eq!(s.replica_marks.unused_free_pages, 20);
    assert_eq!(s.replica_marks.verdict, MarkVerdict::Hold);
    assert_eq!(s.replicas, made);
    // Below the low mark (10 left): replicas are reclaimed until the high mark holds.
    write_unused(&e, &mut written, 10);
    ticks(&e, 1);
    let s = e.status();
    assert_eq!(s.replicas, made - 16);
    assert_eq!(s.replica_marks.unused_free_pages, 26);
    assert_eq!(s.replica_marks.verdict, MarkVerdict::Hold);
    check_contents(&e, &written);
    // The client writes every unused page and all but 5 replica pages: below the
    // critical mark (6 free pages) every replica goes.
    write_unused(&e, &mut written, 0);
    let reps: Vec<u64> = replica_pages(&e).into_iter().collect();
    for &p in &reps[..reps.len() - 5] {
        e.write_bytes(&fill(p), p * PAGE).unwrap();
        written.insert(p);
    }
    assert_eq!(e.status().free_pages, 5);
    ticks(&e, 1);
    let s = e.status();
    assert_eq!(s.replicas, 0);
    assert_eq!(s.replica_marks.verdict, MarkVerdict::DropAll);
    check_contents(&e, &written);
}

#[test]
fn the_fs2_replan_policy_has_its_replicas_made_next_to_each_other() {
    let e = engine();
    // A start-up reads the same scattered pages in the same order, three times.
    let order: Vec<u64> = (0..24u64).map(|k| (k * 37) % 120 + 4).collect();
    let mut requests = Vec::new();
    for round in 0..3u64 {
        for (i, &p) in order.iter().enumerate() {
            read(&e, p);
            let ts = (round * 100 + i as u64) * 1_000_000;
            let r = Request::try_new(ts, Some(1), NO_COMMAND, 0, p * 8, 8, Op::Read).unwrap();
            requests.push(r);
        }
    }
    plan_and_apply(&e, "fs2", requests).unwrap();
    ticks(&e, 200);
    let table = e.replica_table();
    let of = |p: u64| table.of_original(p).map(|r| r.replica);
    let placed: Vec<u64> = order.iter().filter_map(|&p| of(p)).collect();
    assert!(
        placed.len() >= 20,
        "{} of {} replicated",
        placed.len(),
        order.len()
    );
    let adjacent = placed.windows(2).filter(|w| w[1] == w[0] + 1).count();
    assert!(
        adjacent + 3 >= placed.len(),
        "replicas in use order lie next to each other: {placed:?}"
    );
    assert!(
        placed.iter().all(|&r| r >= FREE),
        "replicas live in free pages"
    );
    check_contents(&e, &BTreeSet::new());
}
