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

mod common;
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
    let of = |p: u64| table.of_original(p).next().map(|r| r.replica);
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

/// Two free holes, 60..100 and 160..200, with data everywhere else.
const HOLES: [(u64, u64); 2] = [(60, 100), (160, 200)];
/// The page read in both hot areas: it gets a replica near each.
const ROVER: u64 = 150;

/// Options that destage every write home at the next background round, so that a
/// written page is read from home (where replicas serve) soon after.
fn destaging() -> EngineOptions {
    EngineOptions {
        destage_below_free_pages: Some(16),
        ..EngineOptions::default()
    }
}

/// An engine over `store` whose data pages all hold `fill`, the holes trimmed.
fn two_hole_engine(store: Arc<MemStore>) -> Engine {
    let e = Engine::open(store, destaging()).unwrap().0;
    for p in 0..PAGES {
        e.write_bytes(&fill(p), p * PAGE).unwrap();
    }
    for (a, b) in HOLES {
        e.trim_bytes(a * PAGE, (b - a) * PAGE).unwrap();
    }
    e.flush().unwrap();
    e
}

fn formatted_store() -> Arc<MemStore> {
    let l = layout();
    let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    store
}

/// Reads the pages of `area` `times` times and ROVER six, then lets the background run:
/// ROVER lies outside the area, so it gets a replica in the hole nearest it.
fn work_in(e: &Engine, area: std::ops::Range<u64>, times: usize) {
    for _ in 0..times {
        for p in area.clone() {
            read(e, p);
        }
    }
    for _ in 0..6 {
        read(e, ROVER);
    }
    ticks(e, 60);
}

fn replicas_of(e: &Engine, p: u64) -> Vec<(u64, u32)> {
    let t = e.replica_table();
    t.of_original(p).map(|r| (r.replica, r.refcount)).collect()
}

/// FS2's "several replicas": a page read in two hot areas gets a replica near each, a
/// read goes to whichever copy lies closest to the head, and a write of the page drops
/// them all.
#[test]
fn a_page_read_in_two_hot_areas_gets_a_replica_near_each_and_reads_the_closest() {
    let e = two_hole_engine(formatted_store());
    work_in(&e, 40..58, 4);
    let near_a = replicas_of(&e, ROVER);
    assert_eq!(near_a.len(), 1, "{near_a:?}");
    assert!((60..100).contains(&near_a[0].0), "{near_a:?}");
    // The same area again: no second copy there.
    work_in(&e, 40..58, 4);
    assert_eq!(replicas_of(&e, ROVER).len(), 1);
    // The second area read more: the hot area's centre moves there.
    work_in(&e, 210..226, 12);
    let both = replicas_of(&e, ROVER);
    assert_eq!(both.len(), 2, "{both:?}");
    let (a, b) = (both[0].0, both[1].0);
    assert!(
        (60..100).contains(&a) && (160..200).contains(&b),
        "{both:?}"
    );
    // The head near the first area (a page read once, without replicas): the copy there
    // serves; near the second, the other.
    let hits = |e: &Engine| {
        replicas_of(e, ROVER)
            .iter()
            .map(|r| r.1)
            .collect::<Vec<_>>()
    };
    let before = hits(&e);
    read(&e, 30);
    assert!(read(&e, ROVER) == fill(ROVER));
    assert_eq!(hits(&e), [before[0] + 1, before[1]]);
    read(&e, 230);
    assert!(read(&e, ROVER) == fill(ROVER));
    assert_eq!(hits(&e), [before[0] + 1, before[1] + 1]);
    // A write of the page drops every replica it has.
    let new = vec![0xA5; PAGE as usize];
    e.write_bytes(&new, ROVER * PAGE).unwrap();
    assert!(replicas_of(&e, ROVER).is_empty());
    for round in 0..2 {
        read(&e, 30);
        assert!(read(&e, ROVER) == new, "round {round}");
        read(&e, 230);
        assert!(read(&e, ROVER) == new, "round {round}");
        // Destaged home, read near the first area again: a fresh replica of the new data.
        work_in(&e, 40..58, 12);
    }
    assert!(!replicas_of(&e, ROVER).is_empty());
}

/// What page `p` may read back after a crash: the data flushed last, or a write to it
/// still in flight.
fn may_read(p: u64, got: &[u8], writes: &[(u64, Vec<u8>, bool)]) -> bool {
    let hole = HOLES.iter().any(|&(a, b)| (a..b).contains(&p));
    let mut allowed = vec![if hole {
        vec![0; PAGE as usize]
    } else {
        fill(p)
    }];
    for (_, data, flushed) in writes.iter().filter(|w| w.0 == p) {
        if *flushed {
            allowed.clear();
        }
        allowed.push(data.clone());
    }
    allowed.iter().any(|a| a == got)
}

/// Crash safety of several replicas per page, at every sync point: while replicas are
/// made in two hot areas, then a write of their page drops them all, then a client
/// write claims a free page holding another page's replica. After each crash (writes
/// in flight kept none, all, or every other), every page reads back what was flushed
/// (or a newer write), from whichever copy the head is nearest: never a stale replica,
/// and never a replica where the client wrote.
#[test]
fn several_replicas_are_crash_safe_at_every_sync_point() {
    let store = formatted_store();
    let e = two_hole_engine(store.clone());
    let base = store.devices();
    let start = store.log_len();
    work_in(&e, 40..58, 4);
    work_in(&e, 210..226, 12);
    e.flush().unwrap();
    assert_eq!(replicas_of(&e, ROVER).len(), 2);
    let claimed = e
        .replica_table()
        .entries()
        .find(|r| r.original != ROVER && (160..200).contains(&r.replica))
        .map(|r| r.replica)
        .expect("another page's replica in the second hole");
    let new = vec![0xA5; PAGE as usize];
    e.write_bytes(&new, ROVER * PAGE).unwrap();
    e.flush().unwrap();
    let rover_flushed = store.log_len() - start;
    let theirs = vec![0xC3; PAGE as usize];
    e.write_bytes(&theirs, claimed * PAGE).unwrap();
    e.flush().unwrap();
    let claim_flushed = store.log_len() - start;
    // The background destages both writes home (and may copy the new data again).
    work_in(&e, 210..226, 2);
    e.flush().unwrap();
    let log = store.log()[start..].to_vec();
    let cuts: Vec<usize> = (0..log.len())
        .filter(|&i| matches!(log[i], reblock_engine::Logged::Sync { .. }))
        .chain([log.len()])
        .collect();
    assert!(cuts.len() >= 10, "{} sync points", cuts.len());
    for &cut in &cuts {
        let writes = [
            (ROVER, new.clone(), cut >= rover_flushed),
            (claimed, theirs.clone(), cut >= claim_flushed),
        ];
        for keep in [0usize, 1, 2] {
            let image =
                common::crash_image(&base, &log, cut, |i| keep == 1 || (keep == 2 && i % 2 == 0));
            let e = Engine::open(
                Arc::new(MemStore::new(image.0, None)),
                EngineOptions::default(),
            )
            .unwrap()
            .0;
            for p in 0..PAGES {
                for head in [30, 230] {
                    read(&e, head);
                    let got = read(&e, p);
                    assert!(
                        may_read(p, &got, &writes),
                        "crash before op {cut} (keep {keep}), head near {head}: page {p} reads \
                         {:#x} ({} replicas)",
                        got[0],
                        e.replica_count()
                    );
                }
            }
        }
    }
}

/// `n` pages from page `p`, read as one request.
fn read_run(e: &Engine, p: u64, n: u64) -> Vec<u8> {
    let mut b = vec![0u8; (n * PAGE) as usize];
    e.read_bytes(&mut b, p * PAGE).unwrap();
    b
}

/// Has the policy's replicas of `pages` pages from `first` made near page `target`.
fn replicate(e: &Engine, first: u64, pages: u64, target: u64) {
    use reblock_plan::PlacedRange;
    e.want_replicas(&[PlacedRange {
        fs_page: first,
        pages,
        target,
    }]);
    ticks(e, 2 * pages as usize + 4);
}

/// FS2's read rule online is the simulator's (`closest_whole_copy`): a read is served
/// whole, by the original or by replicas holding all of its pages one after another,
/// whichever lies nearer the head; replicas of its pages in two places leave it at home,
/// however near the head one of them lies.
#[test]
fn a_read_goes_whole_to_contiguous_replicas_near_the_head_and_home_otherwise() {
    let e = two_hole_engine(formatted_store());
    ticks(&e, 60);
    replicate(&e, 10, 4, 180);
    let run: Vec<u64> = (10..14).map(|p| replicas_of(&e, p)[0].0).collect();
    assert!(
        (160..200).contains(&run[0]) && run.windows(2).all(|w| w[1] == w[0] + 1),
        "{run:?}"
    );
    replicate(&e, 30, 1, 190);
    replicate(&e, 31, 1, 80);
    let (r30, r31) = (replicas_of(&e, 30)[0].0, replicas_of(&e, 31)[0].0);
    assert!(
        (160..200).contains(&r30) && (60..100).contains(&r31),
        "{r30} {r31}"
    );
    let want = |p: u64, n: u64| (p..p + n).flat_map(fill).collect::<Vec<u8>>();

    // The head in the hole holding the run: the whole read from the replicas.
    let hits = e.replica_hits();
    read(&e, 199);
    assert!(read_run(&e, 10, 4) == want(10, 4));
    assert_eq!(e.replica_hits(), hits + 4);
    // The head next to the originals: home.
    read(&e, 9);
    assert!(read_run(&e, 10, 4) == want(10, 4));
    assert_eq!(e.replica_hits(), hits + 4);
    // Pages 30 and 31 have replicas, but not side by side: home, even with the head
    // right next to page 30's.
    read(&e, r30 + 1);
    assert!(read_run(&e, 30, 2) == want(30, 2));
    assert_eq!(e.replica_hits(), hits + 4);
    // Page 30 alone from there: its replica.
    read(&e, r30 + 1);
    assert!(read(&e, 30) == fill(30));
    assert_eq!(e.replica_hits(), hits + 5);
}
