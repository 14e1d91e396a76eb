//! Plan diffs with a chain and with a cycle, hand-made; expected move orders worked out in
//! the comments (seed 000 §5.2, seed 001 §3.5.3).
//!
//! Layout: 8-sector (4 KiB) pages, data area of 100 pages, BOPT of 16 slots at the end:
//! read cache = slots 0..12, write buffer = slots 12..16.

use reblock_layout::*;

fn indirector() -> Indirector {
    Indirector::new(
        Geometry::new(&BoptConfig {
            page_sectors: 8,
            data_sectors: 800,
            bopt_pages: 16,
            segment_pages: 4,
            write_buffer_fraction: 0.25,
            position: BoptPosition::End,
            meta_sectors: 0,
        })
        .unwrap(),
    )
    .unwrap()
}

fn plan(pairs: &[(u64, u64)]) -> Plan {
    let mut p = Plan::new(8, "test");
    for &(f, s) in pairs {
        p.push(f, 1, s);
    }
    p
}

fn apply_all(ind: &mut Indirector, r: &Reconfiguration) {
    for s in &r.steps {
        ind.apply(s).unwrap();
        ind.check();
    }
}

/// Places `pairs` (clean), then dirties the FS pages in `dirty` with a one-page write.
fn populated(pairs: &[(u64, u64)], dirty: &[u64]) -> Indirector {
    let mut ind = indirector();
    let r = diff(&plan(pairs), &ind, DiffOptions::default()).unwrap();
    apply_all(&mut ind, &r);
    let mut out = Vec::new();
    for &p in dirty {
        ind.indirect(
            IoRequest {
                op: Op::Write,
                sector: p * 8,
                sectors: 8,
            },
            &mut out,
        )
        .unwrap();
    }
    ind
}

fn bopt(first: u64, pages: u64) -> PageRun {
    PageRun::new(Region::Bopt, first, pages)
}
fn data(first: u64, pages: u64) -> PageRun {
    PageRun::new(Region::Data, first, pages)
}
fn copy(kind: CopyKind, src: PageRun, dst: PageRun) -> Step {
    Step::Copy(CopyOp { kind, src, dst })
}

#[test]
fn chain_runs_from_its_free_end_and_coalesces_into_one_shift() {
    // Now: slot 4 = page 10, 5 = 11, 6 = 12 (clean), 7 = 13 (dirty).
    // Plan: 10 -> 5, 11 -> 6, 12 -> 7, 20 -> 4; page 13 leaves.
    // Outgoing: 13 is dirty, so slot 7 is evicted home first (FS page 13).
    // Chain: 10 (4->5) waits for 11 (5->6), which waits for 12 (6->7), whose slot 7 is
    // free once 13 is out. Order: 6->7, 5->6, 4->5; as one buffered copy that is slots
    // 4..7 -> 5..8. Incoming: page 20 -> slot 4, now free.
    let ind = populated(&[(10, 4), (11, 5), (12, 6), (13, 7)], &[13]);
    let new = plan(&[(10, 5), (11, 6), (12, 7), (20, 4)]);
    let r = diff(&new, &ind, DiffOptions::default()).unwrap();
    assert_eq!(
        r.steps,
        vec![
            copy(CopyKind::Evict, bopt(7, 1), data(13, 1)),
            copy(CopyKind::Relocate, bopt(4, 3), bopt(5, 3)),
            copy(CopyKind::Incoming, data(20, 1), bopt(4, 1)),
        ]
    );
    let s = r.stats;
    assert_eq!(
        (
            s.relocate_pages,
            s.incoming_pages,
            s.outgoing_dirty_pages,
            s.chains,
            s.cycles
        ),
        (3, 1, 1, 1, 0)
    );
    assert_eq!(s.bytes_moved, 5 * 4096);

    // With one-page copies the page order shows: tail of the chain first.
    let r1 = diff(&new, &ind, DiffOptions { max_copy_pages: 1 }).unwrap();
    assert_eq!(
        r1.steps[1..4],
        [
            copy(CopyKind::Relocate, bopt(6, 1), bopt(7, 1)),
            copy(CopyKind::Relocate, bopt(5, 1), bopt(6, 1)),
            copy(CopyKind::Relocate, bopt(4, 1), bopt(5, 1)),
        ]
    );
    let mut ind = ind;
    apply_all(&mut ind, &r);
    assert_eq!(
        ind.map().iter().map(|(p, s, _)| (p, s)).collect::<Vec<_>>(),
        vec![(20, 4), (10, 5), (11, 6), (12, 7)]
    );
}

#[test]
fn cycle_is_broken_through_a_clean_member_dropped_and_brought_back() {
    // Now: slot 0 = page 30 (clean), 1 = 31 (dirty), 2 = 32 (clean).
    // Plan rotates them: 30 -> 1, 31 -> 2, 32 -> 0. Each waits for the next: a cycle.
    // Victim: the clean member with the lowest source slot, page 30 in slot 0: dropped
    // (its home copy is current). The move waiting for slot 0 is 32 (2 -> 0), then the
    // one waiting for slot 2 is 31 (1 -> 2). Page 30 comes back from home into slot 1.
    let ind = populated(&[(30, 0), (31, 1), (32, 2)], &[31]);
    let r = diff(
        &plan(&[(30, 1), (31, 2), (32, 0)]),
        &ind,
        DiffOptions::default(),
    )
    .unwrap();
    assert_eq!(
        r.steps,
        vec![
            Step::Drop(bopt(0, 1)),
            copy(CopyKind::Relocate, bopt(2, 1), bopt(0, 1)),
            copy(CopyKind::Relocate, bopt(1, 1), bopt(2, 1)),
            copy(CopyKind::Incoming, data(30, 1), bopt(1, 1)),
        ]
    );
    assert_eq!(
        (r.stats.cycles, r.stats.chains, r.stats.bytes_moved),
        (1, 0, 3 * 4096)
    );
    let mut ind = ind;
    apply_all(&mut ind, &r);
    // 31 kept its dirty bit through the relocation; 30 came back clean.
    assert!(ind.map().is_dirty(2) && !ind.map().is_dirty(1) && !ind.map().is_dirty(0));
}

#[test]
fn all_dirty_cycle_writes_the_victim_home_first() {
    // Same rotation, every page dirty: the victim (lowest slot, 0 = page 30) is evicted
    // home, costing one more page of copying than the clean case.
    let ind = populated(&[(30, 0), (31, 1), (32, 2)], &[30, 31, 32]);
    let r = diff(
        &plan(&[(30, 1), (31, 2), (32, 0)]),
        &ind,
        DiffOptions::default(),
    )
    .unwrap();
    assert_eq!(r.steps[0], copy(CopyKind::Evict, bopt(0, 1), data(30, 1)));
    assert_eq!(r.steps.len(), 4);
    assert_eq!(r.stats.bytes_moved, 4 * 4096);
}

#[test]
fn static_pages_cost_nothing_and_write_buffer_pages_relocate_into_the_read_cache() {
    // Page 10 stays in slot 3 (static). Page 50 was absorbed into write-buffer slot 12
    // (dirty); the plan puts it in read-cache slot 0: a relocation that keeps it dirty.
    let mut ind = populated(&[(10, 3)], &[]);
    let mut out = Vec::new();
    ind.indirect(
        IoRequest {
            op: Op::Write,
            sector: 400,
            sectors: 8,
        },
        &mut out,
    )
    .unwrap();
    let r = diff(&plan(&[(10, 3), (50, 0)]), &ind, DiffOptions::default()).unwrap();
    assert_eq!(
        r.steps,
        vec![copy(CopyKind::Relocate, bopt(12, 1), bopt(0, 1))]
    );
    assert_eq!(r.stats.static_pages, 1);
    apply_all(&mut ind, &r);
    assert!(ind.map().is_dirty(0));
    assert_eq!(ind.write_buffer_free(), 4);
}

#[test]
fn stale_steps_are_refused_whole() {
    // A diff computed before a foreground write absorbed page 20 would bring stale data
    // in over it: applying it must fail and leave the map as it was (seed 001 §3.5.2).
    let mut ind = indirector();
    let r = diff(&plan(&[(20, 0)]), &ind, DiffOptions::default()).unwrap();
    let mut out = Vec::new();
    ind.indirect(
        IoRequest {
            op: Op::Write,
            sector: 160,
            sectors: 8,
        },
        &mut out,
    )
    .unwrap();
    let err = ind.apply(&r.steps[0]).unwrap_err();
    assert!(err.why.contains("FS page 20 is already mapped"), "{err}");
    ind.check();
    assert_eq!(ind.map().lookup(20), Some(12));
}

#[test]
fn plan_outside_the_read_cache_is_an_error() {
    let ind = indirector();
    let err = diff(&plan(&[(1, 12)]), &ind, DiffOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ranges[0].slot: slots 12..13 pass the read cache's 12 slots"
    );
}

// Piggybacking incoming copies on foreground reads (src/piggyback.rs): what a read carries
// is taken out of the pending set as write-only steps, only while its slot is free; with
// the rest done by the copier the map ends as the plain diff leaves it.

fn incoming(page: u64, slot: u64, pages: u64) -> Step {
    Step::Copy(CopyOp {
        kind: CopyKind::Incoming,
        src: PageRun::new(Region::Data, page, pages),
        dst: PageRun::new(Region::Bopt, slot, pages),
    })
}

fn mapping(ind: &Indirector) -> Vec<(u64, u32, bool)> {
    let mut m: Vec<_> = ind.map().iter().collect();
    m.sort_unstable();
    m
}

#[test]
fn a_read_carries_the_incoming_pages_it_covers_and_the_copier_does_the_rest() {
    let pairs = [(10, 0), (11, 1), (12, 2), (13, 3), (20, 4)];
    let mut naive = indirector();
    let r = diff(&plan(&pairs), &naive, DiffOptions::default()).unwrap();
    for s in &r.steps {
        naive.apply(s).unwrap();
    }

    let mut ind = indirector();
    let mut pending = PendingIncoming::from_steps(&r.steps);
    assert_eq!(pending.len(), 5);
    // The foreground reads FS pages 9..13 from home: pages 10, 11, 12 are written to
    // slots 0..3 from that data, as one write.
    let carried = pending.take_read(&ind, 9, 4);
    assert_eq!(carried, vec![incoming(10, 0, 3)]);
    for s in &carried {
        ind.apply(s).unwrap();
    }
    // A second read of the same pages carries nothing: they are placed.
    assert!(pending.take_read(&ind, 9, 4).is_empty());
    let rest = pending.remaining();
    assert_eq!(rest, vec![incoming(13, 3, 1), incoming(20, 4, 1)]);
    for s in &rest {
        ind.apply(s).unwrap();
        ind.check();
    }
    assert_eq!(mapping(&ind), mapping(&naive));
}

#[test]
fn a_page_whose_slot_is_still_taken_waits_for_the_copier() {
    // Page 50 sits dirty in slot 0; the new plan puts page 10 there.
    let mut ind = indirector();
    let first = diff(&plan(&[(50, 0)]), &ind, DiffOptions::default()).unwrap();
    for s in &first.steps {
        ind.apply(s).unwrap();
    }
    let mut out = Vec::new();
    ind.indirect(
        IoRequest {
            op: Op::Write,
            sector: 50 * 8,
            sectors: 8,
        },
        &mut out,
    )
    .unwrap();
    let r = diff(&plan(&[(10, 0)]), &ind, DiffOptions::default()).unwrap();
    let mut pending = PendingIncoming::from_steps(&r.steps);
    // Before the eviction of page 50 the read of page 10 carries nothing.
    assert!(pending.take_read(&ind, 10, 1).is_empty());
    assert_eq!(pending.len(), 1);
    let evict = r
        .steps
        .iter()
        .find(|s| matches!(s, Step::Copy(op) if op.kind == CopyKind::Evict))
        .expect("the dirty page is evicted home first");
    ind.apply(evict).unwrap();
    assert_eq!(pending.take_read(&ind, 10, 1), vec![incoming(10, 0, 1)]);
    assert!(pending.is_empty());
}
