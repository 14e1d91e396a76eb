//! TRIM and WRITE_ZEROES on an in-memory store: trimmed pages read as zeros, lose their
//! BOPT copies, are taken back by a later write (a partial write keeps the rest of the
//! page zero), survive a restart once flushed, and the offline check reads the map.

use reblock_engine::check::check;
use reblock_engine::{Engine, EngineOptions, MemStore};
use reblock_nbd::Export;
use std::sync::Arc;

mod small;
use small::{layout, page};

const PAGE: u64 = 4096;

fn open(store: &Arc<MemStore>) -> Engine {
    Engine::open(store.clone(), EngineOptions::default())
        .unwrap()
        .0
}

fn fresh() -> (Arc<MemStore>, Engine) {
    let l = layout();
    let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    let e = open(&store);
    (store, e)
}

fn read(e: &Engine, offset: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    e.read_bytes(&mut b, offset).unwrap();
    b
}

fn zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

#[test]
fn trimmed_pages_read_zeros_drop_their_copies_and_come_back_on_write() {
    let (store, e) = fresh();
    for p in 0..40u64 {
        e.write_sectors(&page(p as u8 + 1), p * 8).unwrap();
    }
    e.flush().unwrap();
    let mapped = e.status().mapped_pages;
    assert!(mapped > 0, "the write buffer absorbed some pages");
    // Pages 10..20 whole, plus half a page on each side (a hint: kept).
    Export::trim(&e, 10 * PAGE - 2048, 10 * PAGE + 4096, false).unwrap();
    assert_eq!(e.free_pages(), 10);
    assert_eq!(
        read(&e, 10 * PAGE, 10 * PAGE as usize),
        vec![0; 10 * PAGE as usize]
    );
    assert_eq!(read(&e, 9 * PAGE, PAGE as usize), page(10));
    assert_eq!(read(&e, 20 * PAGE, PAGE as usize), page(21));
    let ind = e.indirector();
    assert!(
        (10..20).all(|p| ind.map().lookup(p).is_none()),
        "copies dropped"
    );
    ind.check();
    // A 100-byte write into page 12 takes the page back; the rest of it stays zero.
    e.write_bytes(&[0xab; 100], 12 * PAGE + 1000).unwrap();
    assert_eq!(e.free_pages(), 9);
    let mut want = vec![0u8; PAGE as usize];
    want[1000..1100].fill(0xab);
    assert_eq!(read(&e, 12 * PAGE, PAGE as usize), want);
    // WRITE_ZEROES with NO_HOLE writes zeros; without, it frees whole pages.
    Export::write_zeroes(&e, 30 * PAGE, 2 * PAGE, false, false).unwrap();
    assert_eq!(e.free_pages(), 9);
    Export::write_zeroes(&e, 32 * PAGE + 512, 3 * PAGE, false, true).unwrap();
    assert_eq!(e.free_pages(), 11, "pages 33 and 34 whole");
    assert!(zero(&read(&e, 30 * PAGE, 2 * PAGE as usize)));
    assert!(zero(&read(&e, 32 * PAGE + 512, 3 * PAGE as usize)));
    assert_eq!(read(&e, 32 * PAGE, 512), vec![33; 512]);
    assert_eq!(
        e.allocation(9 * PAGE, 4 * PAGE),
        vec![(PAGE, false), (2 * PAGE, true), (PAGE, false)]
    );
    e.flush().unwrap();
    drop(e);
    // After an unclean stop, what the flush covered holds.
    let e = open(&store);
    assert_eq!(e.free_pages(), 11);
    assert_eq!(read(&e, 12 * PAGE, PAGE as usize), want);
    assert!(zero(&read(&e, 15 * PAGE, PAGE as usize)));
    e.close(false).unwrap();
    let r = check(store.as_ref(), false).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    assert_eq!(r.free_pages, 11);
}

#[test]
fn a_damaged_chunk_frees_nothing_and_check_names_it() {
    let (store, e) = fresh();
    e.write_sectors(&page(7), 8).unwrap();
    Export::trim(&e, PAGE, PAGE, false).unwrap();
    e.close(false).unwrap();
    drop(e);
    // Both copies of chunk 0 damaged: page 1 reads its data-area bytes again.
    for copy in 0..2 {
        let at = layout().freemap_offset(0, copy) + 100;
        reblock_engine::Store::write_at(store.as_ref(), reblock_engine::Dev::Bopt, &[0xff], at)
            .unwrap();
    }
    let r = check(store.as_ref(), false).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("free-space map chunk 0")),
        "{:?}",
        r.problems
    );
    let (e, report) = Engine::open(store.clone(), EngineOptions::default()).unwrap();
    assert_eq!(report.free_map.untrusted_chunks, vec![0]);
    assert_eq!(e.free_pages(), 0);
    drop(e);
    let r = check(store.as_ref(), true).unwrap();
    assert!(r.repaired);
    assert!(check(store.as_ref(), false).unwrap().is_clean());
}
