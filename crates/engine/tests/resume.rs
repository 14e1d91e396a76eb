//! An interrupted reconfiguration resumes after a crash: the plan kept beside the image
//! is diffed against the map read back, pages already placed are never copied again,
//! and every byte reads back.

use reblock_engine::{Engine, EngineOptions, MemStore};
use reblock_layout::Plan;
use std::sync::Arc;

mod small;
use small::{layout, page};

/// Small copy steps and a one-step staging buffer, so that a reconfiguration takes many
/// copier rounds; writes go home (no destage copies besides the reconfiguration's).
fn opts() -> EngineOptions {
    EngineOptions {
        max_copy_pages: 4,
        copier_staging_bytes: 4 * 4096,
        sequential_cutoff_bytes: Some(0),
        ..EngineOptions::default()
    }
}

fn plan() -> Plan {
    let mut plan = Plan::new(8, "hand");
    plan.push(100, 10, 0);
    plan.push(20, 10, 10);
    plan.push(200, 20, 20);
    plan
}

/// FS pages of `plan` in their planned slot on `e`'s map.
fn placed(e: &Engine, plan: &Plan) -> u64 {
    let map = e.indirector().map().clone();
    let mut n = 0;
    for r in &plan.ranges {
        n += (0..r.pages)
            .filter(|i| map.lookup(r.fs_page + i) == Some((r.slot + i) as u32))
            .count() as u64;
    }
    n
}

fn reads_back(e: &Engine) {
    for p in 0..256u64 {
        let mut b = vec![0u8; 4096];
        e.read_sectors(&mut b, p * 8).unwrap();
        assert_eq!(b, page(p as u8 ^ 0x5a), "page {p}");
    }
}

#[test]
fn a_reconfiguration_cut_by_a_crash_resumes_without_copying_placed_pages_again() {
    let l = layout();
    let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("disk.img.reconfig");
    let (e, _) = Engine::open(store.clone(), opts()).unwrap();
    assert_eq!(e.resume_reconfiguration(kept.clone()).unwrap(), None);
    for p in 0..256u64 {
        e.write_sectors(&page(p as u8 ^ 0x5a), p * 8).unwrap();
    }
    e.flush().unwrap();
    e.reconfigure(plan()).unwrap();
    assert!(kept.exists(), "the plan under way is kept");
    // Each copier round (one 4-page step here) commits the map while the plan is kept.
    for _ in 0..6 {
        assert_eq!(e.background_tick(true).unwrap(), 1);
    }
    let copied = placed(&e, &plan());
    assert!(
        copied > 0 && copied < 40,
        "{copied} pages placed before the crash"
    );
    drop(e); // no close: as after a crash

    let (e, report) = Engine::open(store.clone(), opts()).unwrap();
    assert!(report.unclean);
    let before = placed(&e, &plan());
    assert_eq!(
        before, copied,
        "every committed round's pages survive the crash"
    );
    let d = e.resume_reconfiguration(kept.clone()).unwrap().unwrap();
    assert_eq!(d.static_pages, before, "{d:?}");
    assert_eq!(d.incoming_pages, 40 - before, "{d:?}");
    while e.background_tick(true).unwrap() > 0 {}
    assert_eq!(e.status().reconfiguration.state, "done");
    assert_eq!(placed(&e, &plan()), 40);
    assert_eq!(
        e.bytes_moved(),
        (40 - before) * 4096,
        "placed pages are not copied again"
    );
    assert!(!kept.exists(), "the finished plan is forgotten");
    e.indirector().check();
    reads_back(&e);
    e.close(false).unwrap();
    let (e, _) = Engine::open(store, opts()).unwrap();
    assert_eq!(
        e.resume_reconfiguration(kept).unwrap(),
        None,
        "nothing left"
    );
    reads_back(&e);
}

#[test]
fn a_damaged_kept_plan_is_ignored_with_an_error_naming_it() {
    let l = layout();
    let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("disk.img.reconfig");
    std::fs::write(&kept, b"RBRECONF torn").unwrap();
    let (e, _) = Engine::open(store, opts()).unwrap();
    let err = e
        .resume_reconfiguration(kept.clone())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("disk.img.reconfig") && err.contains("torn"),
        "{err}"
    );
    assert!(
        !kept.exists(),
        "an untrusted plan is removed, never resumed"
    );
    assert_eq!(e.status().reconfiguration.state, "idle");
}
