//! Damaged metadata and a shrunken image are reported loudly and never served as stale
//! or zero data, before and after restarts; a torn commit's leftover summary copy can
//! never be revived by a later commit; a failed unaligned write changes no byte outside
//! it.

use reblock_engine::check::check;
use reblock_engine::{Dev, Engine, EngineOptions, Fault, FaultStore, FileStore, Layout, Store};
use reblock_layout::Plan;
use std::sync::Arc;

mod small;
use small::{layout, page};

fn setup() -> (Arc<FaultStore>, Layout) {
    let l = layout();
    let store = Arc::new(FaultStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    (store, l)
}

fn open(store: &Arc<FaultStore>) -> (Engine, reblock_engine::OpenReport) {
    Engine::open(store.clone(), EngineOptions::default()).unwrap()
}

fn read_page(e: &Engine, p: u64) -> std::io::Result<Vec<u8>> {
    let mut b = page(0);
    e.read_sectors(&mut b, p * 8).map(|()| b)
}

/// Writes pages 0..4 twice (fills 1..=4, then 11..=14), flushing after each round, so
/// the write buffer's first segment has two committed summary copies, the newer one
/// naming the second round.
fn two_commits(store: &Arc<FaultStore>, l: &Layout) -> u32 {
    let (e, _) = open(store);
    for round in [0u8, 10] {
        for p in 0..4u64 {
            e.write_sectors(&page(round + p as u8 + 1), p * 8).unwrap();
        }
        e.flush().unwrap();
    }
    drop(e); // a crash: the superblock stays DIRTY
    l.read_cache_pages / l.segment_pages
}

fn newest_copy(store: &Arc<FaultStore>, l: &Layout, seg: u32) -> u32 {
    let commit = |c| {
        let mut b = vec![0u8; l.summary_bytes as usize];
        store
            .read_at(Dev::Bopt, &mut b, l.summary_offset(seg, c))
            .unwrap();
        u64::from_le_bytes(b[16..24].try_into().unwrap())
    };
    u32::from(commit(1) > commit(0))
}

/// Flips header bytes: the copy fails its checksum, its entries stay readable.
fn damage(store: &Arc<FaultStore>, l: &Layout, seg: u32, copy: u32) {
    store
        .write_at(Dev::Bopt, &[0x5a; 16], l.summary_offset(seg, copy) + 40)
        .unwrap();
}

/// Both copies of a segment damaged: its pages answer EIO (never their older home
/// copies), the engine serves read-only and says so, across restarts, until check
/// --repair, which names what it could not recover.
#[test]
fn lost_segment_answers_eio_until_repair() {
    let (store, l) = setup();
    let seg = two_commits(&store, &l);
    damage(&store, &l, seg, 0);
    damage(&store, &l, seg, 1);
    for _restart in 0..2 {
        let (e, rep) = open(&store);
        assert_eq!(rep.lost_segments, vec![seg]);
        assert!(rep.forced_read_only && e.is_read_only());
        assert!(
            rep.warnings()[0].contains("lost segments"),
            "{:?}",
            rep.warnings()
        );
        for p in 0..4 {
            let err = read_page(&e, p).expect_err("a lost page must not read stale data");
            assert_eq!(err.raw_os_error(), Some(libc::EIO));
        }
        assert_eq!(
            read_page(&e, 100).unwrap(),
            page(0),
            "other pages still serve"
        );
        assert!(e.status().recovery.lost_segments.contains(&seg));
        drop(e);
    }
    let rep = check(store.as_ref(), false).unwrap();
    assert!(!rep.is_clean());
    let rep = check(store.as_ref(), true).unwrap();
    assert!(rep.repaired);
    assert!(
        rep.unrecoverable
            .iter()
            .any(|u| u.contains(&format!("segment {seg}"))),
        "{:?}",
        rep.unrecoverable
    );
    let (e, rep) = open(&store);
    assert!(!e.is_read_only() && rep.lost_segments.is_empty());
}

/// Both copies zeroed: nothing says which pages the segment held, so every page not
/// mapped by another segment answers EIO rather than a possibly stale home copy.
#[test]
fn lost_segment_with_unknown_pages_answers_eio_for_every_unmapped_page() {
    let (store, l) = setup();
    let seg = two_commits(&store, &l);
    for copy in 0..2 {
        let zero = vec![0u8; l.summary_bytes as usize];
        store
            .write_at(Dev::Bopt, &zero, l.summary_offset(seg, copy))
            .unwrap();
    }
    let (e, rep) = open(&store);
    assert!(rep.rebuild.untrusted_unknown && e.is_read_only());
    assert!(rep.warnings()[0].contains("could not be identified"));
    for p in [0, 3, 100, 255] {
        assert!(read_page(&e, p).is_err(), "page {p}");
    }
}

/// Only the newest copy damaged: the older copy is not served as current (that would
/// roll a flushed write back); the pages answer EIO until repair restores the older map
/// and says that later flushed writes may be lost.
#[test]
fn damaged_newest_copy_is_not_silently_rolled_back() {
    let (store, l) = setup();
    let seg = two_commits(&store, &l);
    let newest = newest_copy(&store, &l, seg);
    damage(&store, &l, seg, newest);
    let (e, rep) = open(&store);
    assert_eq!(rep.stale_segments, vec![seg]);
    assert!(e.is_read_only());
    for p in 0..4 {
        assert!(
            read_page(&e, p).is_err(),
            "page {p} must not read the older copy"
        );
    }
    drop(e);
    let rep = check(store.as_ref(), true).unwrap();
    assert!(
        rep.recovered.iter().any(|r| r.contains("may be lost")),
        "{:?}",
        rep.recovered
    );
    let (e, _) = open(&store);
    assert!(!e.is_read_only());
    for p in 0..4 {
        read_page(&e, p).unwrap();
    }
}

/// Regression (issue: torn commit): a crash after a commit's summaries were written but
/// before its superblock left a copy numbered n + 1; open neither erased it nor moved
/// past it, so the next commit (of another segment) reused n + 1 and made the torn copy
/// valid and newer: a page then mapped to data that was never flushed, and check
/// reported pages mapped twice. Open must erase the leftover.
#[test]
fn torn_commit_leftover_is_not_revived_by_a_later_commit() {
    let (store, l) = setup();
    let (e, _) = open(&store);
    e.write_sectors(&page(1), 0).unwrap();
    e.flush().unwrap();
    e.write_sectors(&page(2), 8).unwrap();
    // Ops of this flush: pending superblock, data sync, summary write, sync, superblock.
    store.arm(Some(Fault::Crash { at_op: 4 }));
    assert!(e.flush().is_err());
    let crashed = Arc::new(store.crashed_image(|_, _| true));
    drop(e);
    let (e2, rep) = open(&crashed);
    assert_eq!(rep.erased_copies, 1);
    assert_eq!(
        e2.indirector().map().lookup(1),
        None,
        "page 1 was never flushed"
    );
    // Another segment's commit (the read cache) takes the next number.
    let mut plan = Plan::new(8, "other segment");
    plan.push(100, 1, 0);
    e2.reconfigure(plan).unwrap();
    while e2.background_tick(true).unwrap() > 0 {}
    e2.flush().unwrap();
    drop(e2);
    let (e3, _) = open(&crashed);
    assert_eq!(
        e3.indirector().map().lookup(1),
        None,
        "a torn copy was revived"
    );
    assert_eq!(read_page(&e3, 0).unwrap(), page(1));
    e3.close(false).unwrap();
    let rep = check(crashed.as_ref(), false).unwrap();
    assert!(rep.is_clean(), "{:?}", rep.problems);
    let _ = l;
}

/// Regression (issue: failed write): an unaligned write to [100, 8192) whose slot write
/// failed left its read-modify-write pages mapped to a slot holding zeros, so bytes
/// 0..99 read back wrong and the next FLUSH committed it. With ENOSPC and EIO, no byte
/// outside the request may change, now or after a restart.
#[test]
fn failed_unaligned_write_changes_no_byte_outside_it() {
    for errno in [libc::ENOSPC, libc::EIO] {
        let (store, _) = setup();
        let (e, _) = open(&store);
        e.write_sectors(&vec![7u8; 8192], 0).unwrap();
        e.flush().unwrap();
        e.detach().unwrap(); // pages home, so the next write is absorbed afresh
        e.reconfigure(Plan::new(8, "re-enable")).unwrap();
        store.arm(Some(Fault::Fail { at_op: 0, errno }));
        let err = e.write_bytes(&vec![9u8; 8092], 100).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(errno));
        store.arm(None);
        assert_eq!(e.is_read_only(), errno == libc::EIO);
        let mut b = vec![0u8; 100];
        e.read_bytes(&mut b, 0).unwrap();
        assert_eq!(b, vec![7u8; 100], "errno {errno}");
        let _ = e.flush();
        drop(e);
        let (e2, _) = open(&store);
        e2.read_bytes(&mut b, 0).unwrap();
        assert_eq!(b, vec![7u8; 100], "errno {errno}, after a restart");
    }
}

/// An image truncated while serving: writes are refused (no hole refilled), the export
/// turns read-only, FLUSH fails, reads of the cut range fail; after a restart the image
/// is refused rather than served with zeros.
#[test]
fn image_truncated_while_serving_stops_writes_and_is_refused_at_open() {
    let l = layout();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img");
    let f = std::fs::File::create_new(&path).unwrap();
    f.set_len(l.device_bytes).unwrap();
    let file = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap()
    };
    let store = Arc::new(FileStore::new(file(), None));
    Engine::format(store.as_ref(), &l, 3).unwrap();
    let (e, _) = Engine::open(store.clone(), EngineOptions::default()).unwrap();
    e.write_sectors(&page(4), 200 * 8).unwrap();
    e.flush().unwrap();
    file().set_len(l.data_bytes / 2).unwrap();
    let err = e.write_sectors(&vec![5u8; 64 * 4096], 150 * 8).unwrap_err();
    assert!(err.to_string().contains("shrank"), "{err}");
    assert!(e.is_read_only());
    assert!(e.flush().is_err());
    assert!(read_page(&e, 200).is_err());
    e.close(false).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        l.data_bytes / 2,
        "nothing re-extended the file"
    );
    let reopened = Arc::new(FileStore::new(file(), None));
    assert!(Engine::open(reopened, EngineOptions::default()).is_err());
}
