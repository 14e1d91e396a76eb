//! The background copier executes a reconfiguration as the copy scheduler's batches
//! (engine/copier.rs): far fewer backing requests than steps, every byte and map entry
//! right after a crash at any sync point mid-copy, no foreground write lost to a racing
//! batch, and pages a foreground read carries (piggybacking) never read again.

mod common;

use reblock_engine::format::LayoutRequest;
use reblock_engine::{Dev, Engine, EngineOptions, Layout, Logged, MemStore, Store};
use reblock_layout::Plan;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

const SECTOR: usize = 512;
const PAGE: usize = 4096;
const DATA_PAGES: u64 = 1024;

/// A sector's bytes as written by write `id` (0: the image's original data).
fn stamp(id: u64, sector: u64) -> Vec<u8> {
    let mut s = vec![(id as u8).wrapping_mul(31) ^ (sector as u8); SECTOR];
    s[0..8].copy_from_slice(&id.to_le_bytes());
    s[8..16].copy_from_slice(&sector.to_le_bytes());
    s
}

fn page_of(id: u64, page: u64) -> Vec<u8> {
    let per = (PAGE / SECTOR) as u64;
    (page * per..(page + 1) * per)
        .flat_map(|s| stamp(id, s))
        .collect()
}

fn layout(separate: bool) -> Layout {
    Layout::plan(&LayoutRequest {
        data_bytes: DATA_PAGES * PAGE as u64,
        bopt_bytes: 3 << 20,
        page_bytes: PAGE as u32,
        segment_pages: 16,
        write_buffer_fraction: 0.25,
        separate,
    })
    .unwrap()
}

/// A formatted store whose data area holds write 0 everywhere.
fn fresh_store(l: &Layout) -> MemStore {
    common::stamped_store(l, |s| stamp(0, s))
}

/// A store that counts the reads the engine issues, per device, and its syncs.
struct Counting {
    inner: Arc<MemStore>,
    reads: Mutex<Vec<(Dev, u64, usize)>>,
    syncs: AtomicU64,
}

impl Counting {
    fn new(inner: Arc<MemStore>) -> Counting {
        Counting {
            inner,
            reads: Mutex::new(Vec::new()),
            syncs: AtomicU64::new(0),
        }
    }
    fn syncs(&self) -> u64 {
        self.syncs.load(Relaxed)
    }
}

impl Store for Counting {
    fn read_at(&self, dev: Dev, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.reads.lock().unwrap().push((dev, offset, buf.len()));
        self.inner.read_at(dev, buf, offset)
    }
    fn write_at(&self, dev: Dev, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(dev, buf, offset)
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        self.syncs.fetch_add(1, Relaxed);
        self.inner.sync(dev)
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        self.inner.len(dev)
    }
    fn shared(&self) -> bool {
        self.inner.shared()
    }
}

fn open(store: Arc<dyn Store>) -> Engine {
    Engine::open(store, EngineOptions::default()).unwrap().0
}

/// FS pages `first..first + n` placed interleaved over the read cache's first `n`
/// slots: page `first + i` goes to slot `(i % 2) * n / 2 + i / 2`, so no two
/// neighbouring pages share a step (a plan-order copier pays one request each way per
/// page) while the sources, and each half of the slots, are contiguous.
fn interleaved_plan(first: u64, n: u64) -> Plan {
    let mut plan = Plan::new(8, "test");
    for i in 0..n {
        plan.push(first + i, 1, (i % 2) * n / 2 + i / 2);
    }
    plan
}

fn run_copier(e: &Engine) {
    while e.reconfig_pending() {
        e.background_tick(true).unwrap();
    }
}

/// Every data page reads back as `expected(page)`.
fn check_pages(e: &Engine, expected: impl Fn(u64) -> u64) {
    let mut buf = vec![0u8; PAGE];
    for p in 0..DATA_PAGES {
        e.read_bytes(&mut buf, p * PAGE as u64).unwrap();
        let want = expected(p);
        assert!(
            buf == page_of(want, p),
            "page {p}: not write {want}'s bytes"
        );
    }
}

#[test]
fn a_plan_is_copied_in_far_fewer_backing_requests_than_steps() {
    for separate in [false, true] {
        let l = layout(separate);
        let inner = Arc::new(fresh_store(&l));
        let store = Arc::new(Counting::new(inner));
        let e = open(store.clone());
        let stats = e.reconfigure(interleaved_plan(100, 256)).unwrap();
        assert_eq!(stats.incoming_pages, 256);
        let steps = e.status().reconfiguration.steps_total;
        assert!(steps >= 256, "{steps} steps");
        let before = store.reads.lock().unwrap().len();
        run_copier(&e);
        let s = e.status();
        let reads = store.reads.lock().unwrap().len() - before;
        // One merged read of the 256 contiguous sources, one write of the 256 slots.
        assert_eq!(s.copier_requests, 2, "separate {separate}: {s:?}");
        assert_eq!(reads, 1, "separate {separate}");
        assert_eq!(s.steps_done, steps);
        assert_eq!(s.reconfiguration.state, "done");
        let ind = e.indirector();
        for i in 0..256u64 {
            let slot = (i % 2) * 128 + i / 2;
            assert_eq!(
                ind.map().lookup(100 + i),
                Some(slot as u32),
                "page {}",
                100 + i
            );
        }
        // Every page reads its bytes, now from the region, and after a reopen.
        check_pages(&e, |_| 0);
        e.close(false).unwrap();
        drop(e);
        let e = open(store);
        assert_eq!(e.indirector().map().len(), 256);
        check_pages(&e, |_| 0);
    }
}

/// The workload of the crash test: a first plan copied and flushed, then a second plan
/// (relocations, evictions of dirty pages, incoming pages) copied with foreground writes
/// and flushes between the copier's rounds. Returns, per FLUSH, the log length when it
/// returned and the last write id of every page then.
fn reconfigure_under_writes(store: Arc<MemStore>) -> Vec<(usize, Vec<u64>)> {
    let e = Engine::open(
        store.clone(),
        EngineOptions {
            max_copy_pages: 4,
            ..EngineOptions::default()
        },
    )
    .unwrap()
    .0;
    let mut last = vec![0u64; DATA_PAGES as usize];
    let mut flushes = Vec::new();
    let mut id = 0;
    let mut write = |e: &Engine, page: u64, last: &mut Vec<u64>| {
        id += 1;
        e.write_bytes(&page_of(id, page), page * PAGE as u64)
            .unwrap();
        last[page as usize] = id;
    };
    e.reconfigure(interleaved_plan(0, 128)).unwrap();
    run_copier(&e);
    // Dirty some placed pages (absorbed in place) and some others (write buffer).
    for p in (0..128).step_by(9).chain([600, 601, 777]) {
        write(&e, p, &mut last);
    }
    e.flush().unwrap();
    flushes.push((store.log_len(), last.clone()));
    // The second plan shifts the first's pages and brings new ones in.
    let mut plan = Plan::new(8, "second");
    for i in 0..96u64 {
        plan.push(64 + i, 1, 200 + i);
    }
    for i in 0..64u64 {
        plan.push(500 + 2 * i, 1, i);
    }
    e.reconfigure(plan).unwrap();
    let mut round = 0;
    while e.reconfig_pending() {
        e.background_tick(true).unwrap();
        write(&e, 64 + (round * 37) % 96, &mut last);
        write(&e, 500 + (round * 11) % 128, &mut last);
        e.flush().unwrap();
        flushes.push((store.log_len(), last.clone()));
        round += 1;
    }
    flushes
}

#[test]
fn a_crash_at_any_sync_point_mid_copy_loses_no_flushed_byte() {
    for separate in [false, true] {
        let l = layout(separate);
        let store = Arc::new(fresh_store(&l));
        let start = store.log_len();
        let base = store.devices();
        let flushes = reconfigure_under_writes(store.clone());
        let log = store.log()[start..].to_vec();
        let cuts: Vec<usize> = (0..log.len())
            .filter(|&i| matches!(log[i], Logged::Sync { .. }))
            .chain([log.len()])
            .collect();
        assert!(cuts.len() >= 10, "{} sync points", cuts.len());
        let mut states = 0;
        for &cut in &cuts {
            let flushed = flushes
                .iter()
                .rev()
                .find(|(at, _)| at - start <= cut)
                .map_or(vec![0; DATA_PAGES as usize], |(_, last)| last.clone());
            // None, all, and every other one of the in-flight writes.
            for keep in [0usize, 1, 2] {
                let image = common::crash_image(&base, &log, cut, |i| {
                    keep == 1 || (keep == 2 && i % 2 == 0)
                });
                let s = if separate {
                    MemStore::new(image.0, Some(image.1))
                } else {
                    MemStore::new(image.0, None)
                };
                let e = open(Arc::new(s));
                e.indirector().check();
                let mut buf = vec![0u8; PAGE];
                for p in 0..DATA_PAGES {
                    e.read_bytes(&mut buf, p * PAGE as u64).unwrap();
                    let id = u64::from_le_bytes(buf[0..8].try_into().unwrap());
                    assert!(
                        buf == page_of(id, p) && id >= flushed[p as usize],
                        "separate {separate}, crash before op {cut} (keep {keep}): page {p} \
                         holds write {id}, flushed {}",
                        flushed[p as usize]
                    );
                }
                states += 1;
            }
        }
        println!("separate {separate}: {states} crash states checked");
    }
}

#[test]
fn a_foreground_write_racing_the_copier_is_never_lost() {
    let l = layout(false);
    let store = Arc::new(fresh_store(&l));
    let e = Arc::new(open(store.clone()));
    e.reconfigure(interleaved_plan(0, 384)).unwrap();
    let copier = {
        let e = e.clone();
        std::thread::spawn(move || run_copier(&e))
    };
    // Writes land before, during and after the batches that copy their pages.
    let mut last = vec![0u64; DATA_PAGES as usize];
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for id in 1..=3000u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let p = rng % 384;
        e.write_bytes(&page_of(id, p), p * PAGE as u64).unwrap();
        last[p as usize] = id;
    }
    copier.join().unwrap();
    run_copier(&e);
    check_pages(&e, |p| last[p as usize]);
    e.close(false).unwrap();
    drop(e);
    check_pages(&open(store), |p| last[p as usize]);
}

#[test]
fn a_page_a_read_carries_is_placed_without_a_second_read() {
    let l = layout(false);
    let inner = Arc::new(fresh_store(&l));
    let store = Arc::new(Counting::new(inner.clone()));
    let e = open(store.clone());
    e.reconfigure(interleaved_plan(300, 64)).unwrap();
    // A read of pages 310..350 (a miss) carries them to their slots. (40 pages: a gap
    // wider than the copier reads through.)
    let mut buf = vec![0u8; 40 * PAGE];
    e.read_bytes(&mut buf, 310 * PAGE as u64).unwrap();
    // They are held until the copier's next round writes them with the others.
    assert_eq!(e.status().piggybacked_pages, 0);
    assert_eq!(e.indirector().map().lookup(310), None);
    let before = store.reads.lock().unwrap().len();
    e.background_tick(true).unwrap();
    let s = e.status();
    assert_eq!(s.piggybacked_pages, 40, "{s:?}");
    let ind = e.indirector();
    for i in 10..50u64 {
        assert_eq!(
            ind.map().lookup(300 + i),
            Some(((i % 2) * 32 + i / 2) as u32)
        );
    }
    run_copier(&e);
    // The copier read its sources in two merged extents that skip the carried pages.
    assert_eq!(store.reads.lock().unwrap().len() - before, 2);
    let home = |p: u64| e.geometry().data_sector(p * 8) * SECTOR as u64;
    for &(dev, off, len) in &store.reads.lock().unwrap()[before..] {
        assert_eq!(dev, Dev::Data);
        let (from, to) = (off, off + len as u64);
        assert!(
            to <= home(310) || from >= home(350),
            "the copier read {from}..{to}, over the carried pages"
        );
    }
    let s = e.status();
    assert_eq!(s.reconfiguration.state, "done");
    assert_eq!(s.steps_refused, 0, "carried pages are done, not stale");
    assert_eq!(e.indirector().map().len(), 64);
    check_pages(&e, |_| 0);
    // Without a FLUSH the carried pages were never durable: after a crash the map is
    // whatever was committed, and every byte is still right.
    drop(e);
    let e = open(Arc::new(MemStore::new(inner.devices().0, None)));
    e.indirector().check();
    check_pages(&e, |_| 0);
}

/// A write to a carried page between the read that carried it and the copier's round
/// makes the carried bytes stale: they are dropped (never placed over the new data), the
/// other carried pages are placed, and every page reads its last write, also after a
/// crash and after a FLUSH and reopen. Absorbed, the write remaps the page (the map
/// refuses the stale copy); sent home by the sequential cutoff, it leaves the map as it
/// was, and only the stripe's write count tells the carried bytes are old.
#[test]
fn a_write_after_the_carrying_read_drops_the_stale_carried_page() {
    for cutoff in [None, Some(0)] {
        write_after_carrying_read(cutoff);
    }
}

fn write_after_carrying_read(sequential_cutoff_bytes: Option<u64>) {
    let l = layout(false);
    let inner = Arc::new(fresh_store(&l));
    let opts = EngineOptions {
        sequential_cutoff_bytes,
        ..EngineOptions::default()
    };
    let e = Engine::open(inner.clone(), opts).unwrap().0;
    e.reconfigure(interleaved_plan(300, 64)).unwrap();
    let mut buf = vec![0u8; 40 * PAGE];
    e.read_bytes(&mut buf, 310 * PAGE as u64).unwrap();
    // Write 1 lands on page 320 (carried) while the carried bytes are still write 0's.
    e.write_bytes(&page_of(1, 320), 320 * PAGE as u64).unwrap();
    run_copier(&e);
    let s = e.status();
    assert_eq!(
        s.piggybacked_pages, 39,
        "the runs of untouched stripes are placed, the written page's is not: {s:?}"
    );
    let expected = |p: u64| u64::from(p == 320);
    check_pages(&e, expected);
    e.indirector().check();
    // A crash before the FLUSH: the write was never flushed, so either bytes may be read
    // for page 320; every other page is still write 0's.
    let crashed = open(Arc::new(MemStore::new(inner.devices().0, None)));
    crashed.indirector().check();
    let mut page = vec![0u8; PAGE];
    for p in (0..DATA_PAGES).filter(|&p| p != 320) {
        crashed.read_bytes(&mut page, p * PAGE as u64).unwrap();
        assert!(page == page_of(0, p), "page {p} after a crash");
    }
    drop(crashed);
    e.flush().unwrap();
    drop(e);
    let e = open(Arc::new(MemStore::new(inner.devices().0, None)));
    e.indirector().check();
    check_pages(&e, expected);
}

/// Pages carried for a plan that a detach then abandons are never placed: after the
/// detach and later background rounds the region maps nothing and every page reads its
/// data from home.
#[test]
fn pages_carried_before_a_detach_are_never_placed() {
    let l = layout(false);
    let e = open(Arc::new(fresh_store(&l)));
    e.reconfigure(interleaved_plan(300, 64)).unwrap();
    let mut buf = vec![0u8; 40 * PAGE];
    e.read_bytes(&mut buf, 310 * PAGE as u64).unwrap();
    e.detach().unwrap();
    for _ in 0..3 {
        e.background_tick(true).unwrap();
    }
    assert_eq!(e.status().piggybacked_pages, 0);
    assert_eq!(e.indirector().map().len(), 0);
    e.indirector().check();
    check_pages(&e, |_| 0);
}

/// Placed pages written (dirty), on an engine that keeps its plan in a file as `serve`
/// does: FS pages 100..164 in the region, every fourth one dirty.
fn placed_and_dirtied(store: Arc<Counting>, dir: &std::path::Path) -> Engine {
    let e = Engine::open(
        store,
        EngineOptions {
            max_copy_pages: 4,
            ..EngineOptions::default()
        },
    )
    .unwrap()
    .0;
    e.resume_reconfiguration(dir.join("img.reconfig")).unwrap();
    e.reconfigure(interleaved_plan(100, 64)).unwrap();
    run_copier(&e);
    for p in (100..164).step_by(4) {
        e.write_bytes(&page_of(1, p), p * PAGE as u64).unwrap();
    }
    e.flush().unwrap();
    e
}

/// A copier round whose batch frees slots commits once: the round's progress commit
/// finds nothing changed since the batch's own commit and makes none (it used to sync
/// both devices once more, every round, while a plan was kept).
#[test]
fn a_round_that_frees_slots_commits_and_syncs_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Counting::new(Arc::new(fresh_store(&layout(false)))));
    let e = placed_and_dirtied(store.clone(), dir.path());
    // What one commit syncs: a FLUSH after a write that changes the map.
    let (syncs, commits) = (store.syncs(), e.status().commits);
    e.write_bytes(&page_of(2, 700), 700 * PAGE as u64).unwrap();
    e.flush().unwrap();
    assert_eq!(e.status().commits, commits + 1);
    let per_commit = store.syncs() - syncs;
    // An empty plan: every placed page leaves (dirty ones evicted home), in one round.
    e.reconfigure(Plan::new(8, "empty")).unwrap();
    let (syncs, commits) = (store.syncs(), e.status().commits);
    e.background_tick(true).unwrap();
    assert!(!e.reconfig_pending(), "one round");
    assert_eq!(e.status().commits, commits + 1);
    assert_eq!(store.syncs() - syncs, per_commit, "one commit's syncs");
    assert!(
        !dir.path().join("img.reconfig").exists(),
        "the plan is done"
    );
    check_pages(&e, |p| match p {
        700 => 2,
        p => u64::from((100..164).step_by(4).any(|q| q == p)),
    });
}

/// A detach flushes back as the copier's batches, one commit per batch that frees
/// slots, not one per step (16 evictions of 4 pages each here), and every page reads
/// its last write from home, also after a reopen.
#[test]
fn a_detach_commits_once_per_batch_not_per_step() {
    let dir = tempfile::tempdir().unwrap();
    let inner = Arc::new(fresh_store(&layout(false)));
    let store = Arc::new(Counting::new(inner.clone()));
    let e = placed_and_dirtied(store, dir.path());
    let written = |p: u64| u64::from((100..164).step_by(4).any(|q| q == p));
    let commits = e.status().commits;
    e.detach().unwrap();
    let s = e.status();
    assert!(s.commits - commits <= 2, "{} commits", s.commits - commits);
    assert_eq!(e.indirector().map().len(), 0);
    check_pages(&e, written);
    drop(e);
    let e = open(Arc::new(MemStore::new(inner.devices().0, None)));
    e.indirector().check();
    assert_eq!(e.indirector().map().len(), 0);
    check_pages(&e, written);
}
