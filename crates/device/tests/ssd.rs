//! The flash model: calibration against DiskSim's SSD, parallelism over elements, GC.

mod common;

use common::*;
use reblock_device::params::{builtin, ModelParams};
use reblock_device::{Device, Ssd};

fn k9() -> Ssd {
    Ssd::new(&builtin("k9").unwrap()).unwrap()
}

#[test]
fn a_4k_read_costs_what_disksim_reports() {
    // Models README: 0.1325 ms at low load.
    let mut d = k9();
    let mut rng = Rng(5);
    let reqs: Vec<_> = (0..1000)
        .map(|_| read(rng.below(d.capacity_sectors() / 8) * 8, 8))
        .collect();
    let (mean, _) = mean_ms(&mut d, &reqs, 10_000_000);
    assert!((mean - 0.1325).abs() / 0.1325 < 0.02, "{mean}");
}

#[test]
fn pages_on_different_elements_overlap() {
    let mut d = k9();
    // A page read holds its element 25 us + 4,224 bytes (data and spare) x 25 ns; the
    // request then crosses the host interface at 0.2384 us a sector.
    let element = 130_600;
    let host = |sectors: u64| (sectors as f64 * 238.4).round() as u64;
    let one = d.service(0, &read(0, 8)).total_ns;
    assert_eq!(one, element + host(8));
    // 8 pages land on the 8 elements: one element time, a longer host transfer.
    let eight = d.service(1_000_000_000, &read(0, 64)).total_ns;
    assert_eq!(eight, element + host(64));
    // 16 pages: two per element, twice the element time.
    let sixteen = d.service(2_000_000_000, &read(0, 128)).total_ns;
    assert_eq!(sixteen, 2 * element + host(128));
    assert_eq!(d.estimate_ns(3_000_000_000, &read(0, 128)), sixteen);
}

#[test]
fn completions_take_turns_on_the_host_interface() {
    let mut d = k9();
    // Two reads on different elements, issued together: their elements overlap, their
    // host transfers (1.9 us each) do not.
    let a = d.service(0, &read(0, 8)).total_ns;
    let b = d.service(0, &read(8, 8)).total_ns;
    assert_eq!(b, a + 1_907);
}

#[test]
fn capacity_hides_the_over_provisioning() {
    // 8 x 8 x 2048 x 64 pages of 8 sectors, 85% visible.
    let physical = 8u64 * 8 * 2048 * 64;
    assert_eq!(k9().capacity_sectors(), (physical as f64 * 0.85) as u64 * 8);
}

/// A small flash (1 element, 16 blocks of 8 pages, 25% OP) so GC runs quickly.
fn small() -> Ssd {
    let mut m = builtin("k9").unwrap();
    if let ModelParams::Ssd(p) = &mut m.params {
        p.channels = 1;
        p.planes_per_die = 1;
        p.blocks_per_plane = 16;
        p.pages_per_block = 8;
        p.over_provisioning = 0.25;
    }
    Ssd::new(&m).unwrap()
}

#[test]
fn random_overwrites_erase_blocks_and_amplify_writes() {
    let mut d = small();
    let pages = d.capacity_sectors() / 8; // 96 logical pages on 128 physical
    assert_eq!(pages, 96);
    let mut rng = Rng(11);
    let mut t = 0;
    let host_writes = 2_000;
    let mut gc_seen = false;
    for _ in 0..host_writes {
        let s = d.service(t, &write(rng.below(pages) * 8, 8));
        gc_seen |= s.total_ns > 2_000_000; // an erase (1.5 ms) inside this write
        t += s.total_ns + 1;
    }
    let st = d.stats();
    assert_eq!(st.page_programs, host_writes);
    assert!(st.erases > 0 && gc_seen, "{st:?}");
    // Every erased block freed 8 pages minus the valid ones copied out.
    assert!(st.gc_copies > 0 && st.gc_copies < st.erases * 8, "{st:?}");
    // Written pages = host + copies; at least the host writes minus the free space.
    assert!(st.erases * 8 >= host_writes - 32, "{st:?}");
}

#[test]
fn sequential_overwrites_free_whole_blocks_without_copies() {
    let mut d = small();
    let mut t = 0;
    for round in 0..5 {
        for p in 0..96u64 {
            t += d.service(t, &write(p * 8, 8)).total_ns + 1;
        }
        let _ = round;
    }
    let st = d.stats();
    assert!(st.erases > 0);
    assert_eq!(
        st.gc_copies, 0,
        "greedy GC picks fully invalid blocks: {st:?}"
    );
}
