//! Data-page checksums in the optimized region: damage to a slot is detected on read
//! and by `check` (a clean page is served from home, a dirty one answers EIO), `check
//! --repair` says what it recovered, a write not flushed before a crash is reported as
//! unverifiable rather than as damage, and an engine serving with checksums off writes
//! none.

use reblock_engine::check::check;
use reblock_engine::{Dev, Engine, EngineOptions, Layout, MemStore, Store};
use reblock_layout::Plan;
use std::sync::Arc;

mod small;
use small::{layout, page};

fn setup() -> (Arc<MemStore>, Layout) {
    let l = layout();
    let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 7).unwrap();
    (store, l)
}

fn open(store: &Arc<MemStore>) -> (Engine, reblock_engine::OpenReport) {
    Engine::open(store.clone(), EngineOptions::default()).unwrap()
}

fn read_page(e: &Engine, p: u64) -> std::io::Result<Vec<u8>> {
    let mut b = page(0);
    e.read_sectors(&mut b, p * 8).map(|()| b)
}

/// Flips one byte in the middle of slot `slot`'s page, as a bad sector would.
fn damage_slot(store: &Arc<MemStore>, l: &Layout, slot: u32) {
    let at = l.slot_offset(slot) + 1000;
    let mut b = [0u8; 1];
    store.read_at(Dev::Bopt, &mut b, at).unwrap();
    store.write_at(Dev::Bopt, &[b[0] ^ 0x40], at).unwrap();
}

/// Pages 0..8 written home (fill p + 1), pages 2..6 planned into the read cache (clean
/// copies), page 9 absorbed by the write buffer (dirty, fill 9); clean stop. Returns
/// the slot of page 9.
fn populated(store: &Arc<MemStore>) -> u32 {
    let (e, _) = open(store);
    for p in 0..8u64 {
        e.write_sectors(&page(p as u8 + 1), p * 8).unwrap();
    }
    e.detach().unwrap();
    let mut plan = Plan::new(8, "test");
    plan.push(2, 4, 0);
    e.reconfigure(plan).unwrap();
    while e.background_tick(true).unwrap() > 0 {}
    e.write_sectors(&page(9), 9 * 8).unwrap();
    let slot = e.indirector().map().lookup(9).expect("page 9 absorbed");
    assert_eq!(e.indirector().map().lookup(2), Some(0), "page 2 in slot 0");
    e.close(false).unwrap();
    slot
}

#[test]
fn damaged_clean_slot_is_served_from_home_and_repair_drops_it() {
    let (store, l) = setup();
    populated(&store);
    assert!(check(store.as_ref(), false).unwrap().is_clean());
    damage_slot(&store, &l, 0);
    let rep = check(store.as_ref(), false).unwrap();
    assert_eq!(rep.damaged_data_pages, vec![2], "{:?}", rep.problems);
    assert!(
        rep.problems[0].contains("FS page 2 (slot 0)"),
        "{:?}",
        rep.problems
    );
    let (e, _) = open(&store);
    assert_eq!(
        read_page(&e, 2).unwrap(),
        page(3),
        "home holds the clean page"
    );
    // A read of part of the page verifies the whole page too.
    let mut b = vec![0u8; 512];
    e.read_sectors(&mut b, 2 * 8 + 1).unwrap();
    assert_eq!(b, vec![3u8; 512]);
    assert_eq!(read_page(&e, 3).unwrap(), page(4), "other slots unaffected");
    assert_eq!(e.status().data_checksum_errors, 2);
    // A clean stop keeps the durable checksum: the damage stays visible to check.
    e.close(false).unwrap();
    let rep = check(store.as_ref(), true).unwrap();
    assert!(rep.repaired);
    assert!(
        rep.recovered.iter().any(|r| r.contains("FS page 2")),
        "{:?}",
        rep.recovered
    );
    assert!(check(store.as_ref(), false).unwrap().is_clean());
    let (e, _) = open(&store);
    assert_eq!(
        e.indirector().map().lookup(2),
        None,
        "the damaged slot is dropped"
    );
    assert_eq!(read_page(&e, 2).unwrap(), page(3));
}

#[test]
fn damaged_dirty_slot_answers_eio_until_the_whole_page_is_rewritten() {
    let (store, l) = setup();
    let slot = populated(&store);
    damage_slot(&store, &l, slot);
    let rep = check(store.as_ref(), false).unwrap();
    assert_eq!(rep.damaged_data_pages, vec![9]);
    let (e, _) = open(&store);
    let err = read_page(&e, 9).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    // Patching part of a damaged page would bless the rest of it: refused.
    let err = e.write_sectors(&[5u8; 512], 9 * 8).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(
        !e.is_read_only(),
        "data damage fails requests, not the export"
    );
    e.write_sectors(&page(10), 9 * 8).unwrap();
    assert_eq!(read_page(&e, 9).unwrap(), page(10));
    e.close(false).unwrap();
    assert!(check(store.as_ref(), false).unwrap().is_clean());
}

#[test]
fn repair_of_a_damaged_dirty_slot_says_the_page_is_lost() {
    let (store, l) = setup();
    let slot = populated(&store);
    damage_slot(&store, &l, slot);
    let rep = check(store.as_ref(), true).unwrap();
    assert!(
        rep.unrecoverable.iter().any(|r| r.contains("FS page 9")),
        "{:?}",
        rep.unrecoverable
    );
    let (e, _) = open(&store);
    assert_eq!(read_page(&e, 9).unwrap(), page(0), "the older home copy");
}

/// A slot overwritten in place and not flushed before a crash may hold old, new or
/// mixed bytes: the durable checksum cannot tell that from damage, so the page is
/// reported as unverifiable (a note, not a problem) and its contents are taken.
#[test]
fn write_not_flushed_before_a_crash_is_unverifiable_not_damage() {
    let (store, _) = setup();
    let (e, _) = open(&store);
    e.write_sectors(&page(1), 5 * 8).unwrap();
    e.flush().unwrap();
    e.write_sectors(&page(2), 5 * 8).unwrap();
    drop(e); // a crash: nothing flushed since
    let rep = check(store.as_ref(), false).unwrap();
    assert!(rep.is_clean(), "{:?}", rep.problems);
    assert_eq!(rep.unverifiable_data_pages, vec![5]);
    let (e, open_rep) = open(&store);
    assert_eq!(open_rep.unverifiable_pages, vec![5]);
    assert!(open_rep
        .notices()
        .iter()
        .any(|w| w.contains("unclean stop")));
    assert!(
        open_rep.warnings().is_empty(),
        "an unflushed write is not damage: {:?}",
        open_rep.warnings()
    );
    assert_eq!(e.status().recovery.unverifiable_data_pages, 1);
    assert_eq!(read_page(&e, 5).unwrap(), page(2));
    e.close(false).unwrap();
    let rep = check(store.as_ref(), false).unwrap();
    assert!(rep.is_clean() && rep.unverifiable_data_pages.is_empty());
    assert_eq!(rep.data_pages_verified, 1);
}

#[test]
fn checksums_off_writes_none_and_a_later_open_with_them_takes_the_pages() {
    let (store, l) = setup();
    let off = EngineOptions {
        data_checksums: false,
        ..EngineOptions::default()
    };
    let (e, _) = Engine::open(store.clone(), off).unwrap();
    assert!(!e.status().data_checksums);
    e.write_sectors(&page(4), 3 * 8).unwrap();
    let slot = e.indirector().map().lookup(3).unwrap();
    e.close(false).unwrap();
    let rep = check(store.as_ref(), false).unwrap();
    assert_eq!(rep.data_pages_verified, 0, "no checksum written");
    let (e, _) = open(&store);
    assert!(e.status().data_checksums);
    assert_eq!(read_page(&e, 3).unwrap(), page(4));
    e.close(false).unwrap();
    assert_eq!(check(store.as_ref(), false).unwrap().data_pages_verified, 1);
    damage_slot(&store, &l, slot);
    assert_eq!(
        check(store.as_ref(), false).unwrap().damaged_data_pages,
        vec![3]
    );
}
