//! Golden tests of every branch of seed 001 Algorithm 5, one test per branch, on a
//! hand-made layout whose answers are worked out by hand in the comments.
//!
//! Layout: 8-sector pages, data area of 100 pages (sectors 0..800), BOPT of 16 slots at
//! the end of the device (slot s at sector 800 + 8 s): read cache = slots 0..12, write
//! buffer = slots 12..16 (one segment of 4).

use reblock_layout::*;

fn geometry(position: BoptPosition) -> Geometry {
    Geometry::new(&BoptConfig {
        page_sectors: 8,
        data_sectors: 800,
        bopt_pages: 16,
        segment_pages: 4,
        write_buffer_fraction: 0.25,
        position,
        meta_sectors: 0,
    })
    .unwrap()
}

/// An indirector whose read cache holds `pages` (FS page, slot), clean, brought in by a
/// real plan and its diff.
fn with_read_cache(pages: &[(u64, u64)]) -> Indirector {
    let mut ind = Indirector::new(geometry(BoptPosition::End)).unwrap();
    let mut plan = Plan::new(8, "test");
    for &(p, s) in pages {
        plan.push(p, 1, s);
    }
    for step in diff(&plan, &ind, DiffOptions::default()).unwrap().steps {
        ind.apply(&step).unwrap();
    }
    ind.check();
    ind
}

/// (region, op, device sector, sectors, buffer offset) of one physical I/O.
type Shape = (Region, Op, u64, u64, u64);

fn run(ind: &mut Indirector, op: Op, sector: u64, sectors: u64) -> (Branch, Vec<Shape>) {
    let mut out = Vec::new();
    let b = ind
        .indirect(
            IoRequest {
                op,
                sector,
                sectors,
            },
            &mut out,
        )
        .unwrap();
    ind.check();
    let shape = out
        .iter()
        .map(|io| {
            (
                io.region,
                io.op,
                io.device_sector,
                io.sectors,
                io.buf_offset_sectors,
            )
        })
        .collect();
    (b, shape)
}

const R: Op = Op::Read;
const W: Op = Op::Write;
const D: Region = Region::Data;
const B: Region = Region::Bopt;

#[test]
fn lines_3_7_all_mapped_read_goes_to_bopt() {
    // Pages 10, 11, 12 in slots 0, 1, 2: sectors 80..104 -> BOPT 800..824, one extent.
    let mut ind = with_read_cache(&[(10, 0), (11, 1), (12, 2)]);
    assert_eq!(
        run(&mut ind, R, 80, 24),
        (Branch::AllMapped, vec![(B, R, 800, 24, 0)])
    );
    // Unaligned: sectors 83..90 = page 10 at offset 3 (5 sectors) + page 11 (2 sectors):
    // slot 0 offset 3 = sector 803, continuing into slot 1: one extent of 7.
    assert_eq!(
        run(&mut ind, R, 83, 7),
        (Branch::AllMapped, vec![(B, R, 803, 7, 0)])
    );
}

#[test]
fn lines_3_7_all_mapped_write_goes_to_bopt_and_marks_dirty() {
    // Pages 10, 11 in slots 0 and 5 (not adjacent): two extents, both slots dirty.
    let mut ind = with_read_cache(&[(10, 0), (11, 5), (12, 2)]);
    let (b, out) = run(&mut ind, W, 80, 16);
    assert_eq!(b, Branch::AllMapped);
    assert_eq!(out, vec![(B, W, 800, 8, 0), (B, W, 840, 8, 8)]);
    assert!(ind.map().is_dirty(0) && ind.map().is_dirty(5) && !ind.map().is_dirty(2));
}

#[test]
fn line_12_none_mapped_read_goes_home_unchanged() {
    let mut ind = with_read_cache(&[(10, 0)]);
    assert_eq!(
        run(&mut ind, R, 403, 20),
        (Branch::NoneMappedRead, vec![(D, R, 403, 20, 0)])
    );
}

#[test]
fn lines_9_10_none_mapped_write_is_absorbed_into_the_write_buffer() {
    // Pages 50, 51 -> write-buffer slots 12, 13 (sector 800 + 96 = 896), dirty.
    let mut ind = with_read_cache(&[]);
    assert_eq!(
        run(&mut ind, W, 400, 16),
        (Branch::NoneMappedWriteAbsorbed, vec![(B, W, 896, 16, 0)])
    );
    assert_eq!(ind.map().lookup(50), Some(12));
    assert!(ind.map().is_dirty(13));
    assert_eq!(ind.write_buffer_free(), 2);
    assert_eq!(ind.segments().valid(3), 2);
}

#[test]
fn lines_9_10_unaligned_write_absorbs_full_pages_and_sends_partial_pages_home() {
    // Sectors 404..420: page 50 sectors 4..8 (partial), page 51 whole, page 52 sectors
    // 0..4 (partial). Only page 51 is absorbed (slot 12); the partial pieces go home.
    let mut ind = with_read_cache(&[]);
    let (b, out) = run(&mut ind, W, 404, 16);
    assert_eq!(b, Branch::NoneMappedWriteAbsorbed);
    assert_eq!(
        out,
        vec![(D, W, 404, 4, 0), (B, W, 896, 8, 4), (D, W, 416, 4, 12)]
    );
    assert_eq!(
        (
            ind.map().lookup(50),
            ind.map().lookup(51),
            ind.map().lookup(52)
        ),
        (None, Some(12), None)
    );
}

#[test]
fn line_12_none_mapped_write_without_room_goes_home() {
    // Three pages absorbed leave one free slot; a two-page write does not fit as a whole
    // (space_in_opt(req)), so it goes home unchanged and nothing is mapped.
    let mut ind = with_read_cache(&[]);
    run(&mut ind, W, 400, 24);
    assert_eq!(ind.write_buffer_free(), 1);
    assert_eq!(
        run(&mut ind, W, 600, 16),
        (Branch::NoneMappedWriteHome, vec![(D, W, 600, 16, 0)])
    );
    assert_eq!(ind.map().lookup(75), None);
}

#[test]
fn sequential_cutoff_sends_large_unmapped_writes_home() {
    // Cutoff 2 pages: a three-page write finds room (4 free slots) but is larger than the
    // cutoff, so it goes home whole and nothing is mapped; a two-page write is absorbed.
    let mut ind = with_read_cache(&[]);
    ind.set_absorb_max_pages(2);
    assert_eq!(
        run(&mut ind, W, 400, 24),
        (Branch::NoneMappedWriteHome, vec![(D, W, 400, 24, 0)])
    );
    assert_eq!(ind.write_buffer_free(), 4);
    assert_eq!(ind.map().lookup(50), None);
    assert_eq!(
        run(&mut ind, W, 400, 16),
        (Branch::NoneMappedWriteAbsorbed, vec![(B, W, 896, 16, 0)])
    );
    assert_eq!(ind.write_buffer_free(), 2);
}

#[test]
fn line_19_partial_read_with_clean_mapped_pages_goes_home_whole() {
    // Page 11 mapped and clean: pages 10..13 read as one FS request.
    let mut ind = with_read_cache(&[(11, 5)]);
    assert_eq!(
        run(&mut ind, R, 80, 24),
        (Branch::PartialReadClean, vec![(D, R, 80, 24, 0)])
    );
}

#[test]
fn lines_14_26_partial_read_with_a_dirty_mapped_page_is_split() {
    // Page 11 in slot 5 (sector 840) is dirty: its home copy is stale, so the read splits.
    let mut ind = with_read_cache(&[(11, 5)]);
    run(&mut ind, W, 88, 8);
    let (b, out) = run(&mut ind, R, 80, 24);
    assert_eq!(b, Branch::PartialReadDirty);
    assert_eq!(
        out,
        vec![(D, R, 80, 8, 0), (B, R, 840, 8, 8), (D, R, 96, 8, 16)]
    );
}

#[test]
fn lines_14_26_partial_write_maps_to_bopt_and_absorbs_unmapped_pages() {
    // Page 11 in slot 5; pages 10 and 12 unmapped and absorbed in order into write-buffer
    // slots 12 (896) and 13 (904); all three dirty.
    let mut ind = with_read_cache(&[(11, 5)]);
    let (b, out) = run(&mut ind, W, 80, 24);
    assert_eq!(b, Branch::PartialWrite);
    assert_eq!(
        out,
        vec![(B, W, 896, 8, 0), (B, W, 840, 8, 8), (B, W, 904, 8, 16)]
    );
    assert!([12, 5, 13].iter().all(|&s| ind.map().is_dirty(s)));
    assert_eq!(ind.map().lookup(12), Some(13));
}

#[test]
fn lines_22_26_partial_write_sends_unmapped_pages_home_without_room() {
    // Write buffer full (pages 50..54); page 11 mapped in slot 5 still takes its write.
    let mut ind = with_read_cache(&[(11, 5)]);
    run(&mut ind, W, 400, 32);
    assert_eq!(ind.write_buffer_free(), 0);
    let (b, out) = run(&mut ind, W, 80, 24);
    assert_eq!(b, Branch::PartialWrite);
    assert_eq!(
        out,
        vec![(D, W, 80, 8, 0), (B, W, 840, 8, 8), (D, W, 96, 8, 16)]
    );
    assert!(ind.map().is_dirty(5));
}

#[test]
fn guard_mode_sends_reads_home_except_dirty_pages() {
    // Pages 10, 11 in slots 4, 5; 11 dirty. All mapped, yet guard mode reads page 10 from
    // home; page 11's home is stale so it still comes from slot 5.
    let mut ind = with_read_cache(&[(10, 4), (11, 5)]);
    run(&mut ind, W, 88, 8);
    ind.set_mode(Mode::Guard);
    let (b, out) = run(&mut ind, R, 80, 16);
    assert_eq!(b, Branch::GuardRead);
    assert_eq!(out, vec![(D, R, 80, 8, 0), (B, R, 840, 8, 8)]);
    // Clean pages only: the whole read goes home.
    assert_eq!(
        run(&mut ind, R, 80, 8),
        (Branch::GuardRead, vec![(D, R, 80, 8, 0)])
    );
    // Writes are still indirected.
    assert_eq!(
        run(&mut ind, W, 400, 8),
        (Branch::NoneMappedWriteAbsorbed, vec![(B, W, 896, 8, 0)])
    );
}

#[test]
fn bypass_mode_writes_home_and_frees_the_slots_it_makes_stale() {
    // Pages 10, 11, 12 in slots 4, 5, 6; 11 and 12 dirty.
    let mut ind = with_read_cache(&[(10, 4), (11, 5), (12, 6)]);
    run(&mut ind, W, 88, 16);
    ind.set_mode(Mode::Bypass);
    // Nothing is absorbed: an unmapped write goes home whole.
    assert_eq!(
        run(&mut ind, W, 400, 8),
        (Branch::BypassWrite, vec![(D, W, 400, 8, 0)])
    );
    assert!(ind.map().lookup(50).is_none());
    // Clean page 10 (part of it) and dirty page 11 (all of it) are made current at home:
    // one home write, and both slots leave the map.
    assert_eq!(
        run(&mut ind, W, 84, 12),
        (Branch::BypassWrite, vec![(D, W, 84, 12, 0)])
    );
    assert_eq!(ind.map().lookup(10), None);
    assert_eq!(ind.map().lookup(11), None);
    // Part of dirty page 12: home lacks its other sectors, so the piece goes to slot 6,
    // and the rest of the request home around it.
    assert_eq!(
        run(&mut ind, W, 100, 8),
        (
            Branch::BypassWrite,
            vec![(B, W, 852, 4, 0), (D, W, 104, 4, 4)]
        )
    );
    assert_eq!(ind.map().lookup(12), Some(6));
    assert!(ind.map().is_dirty(6));
    // Reads as in guard mode: dirty page 12 from its slot.
    assert_eq!(
        run(&mut ind, R, 88, 16),
        (Branch::GuardRead, vec![(D, R, 88, 8, 0), (B, R, 848, 8, 8)])
    );
}

#[test]
fn detaching_mode_absorbs_nothing() {
    let mut ind = with_read_cache(&[(11, 5)]);
    ind.set_mode(Mode::Detaching);
    assert_eq!(
        run(&mut ind, W, 400, 8),
        (Branch::NoneMappedWriteHome, vec![(D, W, 400, 8, 0)])
    );
    let (_, out) = run(&mut ind, W, 80, 16);
    assert_eq!(out, vec![(D, W, 80, 8, 0), (B, W, 840, 8, 8)]);
}

#[test]
fn home_extents_skip_a_bopt_placed_in_the_middle() {
    // BOPT in the middle: data pages 50.. move up by 16 slots * 8 = 128 sectors.
    let mut ind = Indirector::new(geometry(BoptPosition::Middle)).unwrap();
    assert_eq!(
        run(&mut ind, R, 396, 8),
        (
            Branch::NoneMappedRead,
            vec![(D, R, 396, 4, 0), (D, R, 528, 4, 4)]
        )
    );
}

#[test]
fn bad_requests_are_errors_not_panics() {
    let mut ind = with_read_cache(&[]);
    let mut out = Vec::new();
    let e = ind
        .indirect(
            IoRequest {
                op: R,
                sector: 790,
                sectors: 16,
            },
            &mut out,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "request sectors 790..806 pass the data area's end at sector 800"
    );
    let e = ind
        .indirect(
            IoRequest {
                op: W,
                sector: 5,
                sectors: 0,
            },
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e, RequestError::Empty(5));
    let e = ind
        .indirect(
            IoRequest {
                op: W,
                sector: u64::MAX,
                sectors: 2,
            },
            &mut out,
        )
        .unwrap_err();
    assert!(matches!(e, RequestError::OutOfRange { .. }));
}

/// Branch of a one-page write of `page` (the destage-policy tests below).
fn write_page(ind: &mut Indirector, page: u64) -> Branch {
    run(ind, W, page * 8, 8).0
}

// A destage that runs beside foreground requests: writes go home while the write buffer
// is under destage pressure, and slots freed before the commit that stops naming them
// are held, never allocated.

#[test]
fn writes_to_unmapped_pages_go_home_under_destage_pressure() {
    for on in [false, true] {
        let mut ind = Indirector::new(geometry(BoptPosition::End)).unwrap();
        ind.set_destage_below_free_pages(2);
        ind.set_home_under_pressure(on);
        for p in 0..3 {
            assert_eq!(write_page(&mut ind, p), Branch::NoneMappedWriteAbsorbed);
        }
        assert!(ind.wants_destage(), "one free write-buffer page left");
        let expected = if on {
            Branch::NoneMappedWriteHome
        } else {
            Branch::NoneMappedWriteAbsorbed
        };
        assert_eq!(write_page(&mut ind, 3), expected, "pressure policy {on}");
        // A page already in the write buffer is still written in its slot.
        assert_eq!(write_page(&mut ind, 0), Branch::AllMapped);
        ind.check();
    }
}

#[test]
fn a_held_slot_is_neither_allocated_nor_copied_into_until_released() {
    let mut ind = Indirector::new(geometry(BoptPosition::End)).unwrap();
    assert_eq!(write_page(&mut ind, 0), Branch::NoneMappedWriteAbsorbed);
    assert_eq!(ind.map().lookup(0), Some(12));
    let evict = Step::Copy(CopyOp {
        kind: CopyKind::Evict,
        src: PageRun::new(Region::Bopt, 12, 1),
        dst: PageRun::new(Region::Data, 0, 1),
    });
    ind.apply(&evict).unwrap();
    ind.hold_slot(12);
    ind.check();
    assert_eq!(ind.write_buffer_free(), 3, "a held slot is not free");
    let incoming = Step::Copy(CopyOp {
        kind: CopyKind::Incoming,
        src: PageRun::new(Region::Data, 40, 1),
        dst: PageRun::new(Region::Bopt, 12, 1),
    });
    assert!(ind.validate(&incoming).is_err());
    assert!(ind.apply(&incoming).is_err());
    // Fill the write buffer: the three other slots are taken, the held one never.
    for p in 1..4 {
        assert_eq!(write_page(&mut ind, p), Branch::NoneMappedWriteAbsorbed);
    }
    assert_eq!(write_page(&mut ind, 4), Branch::NoneMappedWriteHome);
    assert_eq!(ind.map().fs_page_of(12), None);
    ind.release_held();
    ind.check();
    assert_eq!(ind.write_buffer_free(), 1);
    ind.validate(&incoming).unwrap();
    assert_eq!(write_page(&mut ind, 5), Branch::NoneMappedWriteAbsorbed);
    assert_eq!(ind.map().lookup(5), Some(12));
}
