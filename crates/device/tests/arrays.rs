//! Array mappings against hand-computed member I/Os.

use reblock_device::array::{Placement, Raid0, Raid1, Raid5};
use reblock_device::{Array, DevRequest, MemberIo};

fn at(member: usize, sector: u64, sectors: u32, write: bool) -> MemberIo {
    MemberIo::At {
        member,
        req: DevRequest {
            sector,
            sectors,
            write,
        },
    }
}

fn req(sector: u64, sectors: u32, write: bool) -> DevRequest {
    DevRequest {
        sector,
        sectors,
        write,
    }
}

#[test]
fn raid0_splits_a_request_across_stripe_units() {
    let a = Raid0::new(4, 128, 1 << 20);
    // Sectors 100..300: unit 0 (member 0) 100..128, unit 1 (member 1) all, unit 2
    // (member 2) 0..44.
    let p = a.map(&req(100, 200, false));
    assert_eq!(
        p,
        vec![vec![
            at(0, 100, 28, false),
            at(1, 0, 128, false),
            at(2, 0, 44, false)
        ]]
    );
    assert_eq!(a.capacity_sectors(), 4 << 20);
}

#[test]
fn raid0_merges_pieces_contiguous_on_a_member() {
    // Units 0 and 4 are rows 0 and 1 of member 0: one 256-sector I/O.
    let p = Raid0::new(4, 128, 1 << 20).map(&req(0, 5 * 128, true));
    assert_eq!(p[0][0], at(0, 0, 256, true));
    assert_eq!(p[0].len(), 4);
}

#[test]
fn raid1_reads_any_copy_and_writes_all() {
    let a = Raid1::new(2, 1000);
    let r = req(10, 8, false);
    assert_eq!(a.map(&r), vec![vec![MemberIo::AnyOf(vec![(0, r), (1, r)])]]);
    let w = req(10, 8, true);
    assert_eq!(
        a.map(&w),
        vec![vec![at(0, 10, 8, true), at(1, 10, 8, true)]]
    );
}

#[test]
fn raid5_parity_rotates_left_symmetric() {
    let a = Raid5::new(5, 128, 1 << 20);
    // Row 0: parity on 4, data on 0,1,2,3; row 1: parity 3, data 4,0,1,2; row 2: parity
    // 2, data 3,4,0,1.
    let members: Vec<usize> = (0..12).map(|u| a.data_member(u).0).collect();
    assert_eq!(members, vec![0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]);
    assert_eq!(a.capacity_sectors(), 4 << 20);
}

#[test]
fn raid5_small_write_is_four_ios_in_two_phases() {
    let a = Raid5::new(5, 128, 1 << 20);
    // 8 sectors at logical 600: unit 4 (row 1, member 4), offset 88; parity of row 1 on
    // member 3. Member sector = 128 + 88 = 216.
    let p = a.map(&req(600, 8, true));
    assert_eq!(
        p,
        vec![
            vec![at(4, 216, 8, false), at(3, 216, 8, false)],
            vec![at(4, 216, 8, true), at(3, 216, 8, true)],
        ]
    );
}

#[test]
fn raid5_full_stripe_write_needs_no_reads() {
    let a = Raid5::new(5, 128, 1 << 20);
    // Row 1 is logical 512..1024: data on members 4,0,1,2, parity on 3.
    let p = a.map(&req(512, 512, true));
    assert_eq!(p.len(), 1);
    assert_eq!(
        p[0],
        vec![
            at(4, 128, 128, true),
            at(0, 128, 128, true),
            at(1, 128, 128, true),
            at(2, 128, 128, true),
            at(3, 128, 128, true),
        ]
    );
}

#[test]
fn raid5_reads_touch_data_members_only() {
    let p = Raid5::new(3, 8, 1000).map(&req(4, 8, false));
    // Units 0 (member 0) 4..8 and 1 (member 1) 0..4; parity on member 2 is not read.
    assert_eq!(p, vec![vec![at(0, 4, 4, false), at(1, 0, 4, false)]]);
}

#[test]
fn placement_lays_a_disks_blocks_out_in_id_order() {
    let mut a = Placement::new(3, 8, 9);
    // Round robin: block 4 on disk 1, second of its blocks (1, 4, 7).
    assert_eq!(a.location(4), Some((1, 8)));
    // Move block 1 to disk 0: disk 0 now holds 0, 1, 3, 6; block 3 shifts to slot 2.
    a.set_disk(1, 0).unwrap();
    assert_eq!(a.location(1), Some((0, 8)));
    assert_eq!(a.location(3), Some((0, 16)));
    assert_eq!(a.location(4), Some((1, 0)));
    assert_eq!(a.load(), vec![4, 2, 3]);
    // A request over blocks 0..2 (sectors 0..16) is one I/O on disk 0.
    assert_eq!(a.map(&req(0, 16, false)), vec![vec![at(0, 0, 16, false)]]);
    assert!(a.set_disk(1, 3).is_err());
    assert!(a.as_placement().is_some());
}

#[test]
fn placement_moves_back_and_forth_keep_ranks_consistent() {
    // Against a brute-force layout: rank = blocks of the same disk with a smaller id.
    let mut a = Placement::new(4, 8, 40);
    let moves = [(5, 0), (6, 0), (5, 3), (12, 1), (6, 2), (12, 0), (39, 0)];
    for &(b, d) in &moves {
        a.set_disk(b, d).unwrap();
        let disks: Vec<usize> = (0..40).map(|x| a.disk(x).unwrap()).collect();
        for blk in 0..40u64 {
            let d = disks[blk as usize];
            let rank = (0..blk).filter(|&x| disks[x as usize] == d).count() as u64;
            assert_eq!(
                a.location(blk),
                Some((d, rank * 8)),
                "block {blk} after {b}->{d}"
            );
        }
        let load: Vec<u64> = (0..4)
            .map(|d| disks.iter().filter(|&&x| x == d).count() as u64)
            .collect();
        assert_eq!(a.load(), load);
    }
}
