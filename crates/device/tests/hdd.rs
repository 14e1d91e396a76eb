//! The disk model against hand-computed expectations, the seed 001 §2.5 equations and the
//! DiskSim figures for the Cheetah 15K.5 of the models README.

mod common;

use common::*;
use reblock_device::analytic::{self, BARRACUDA, BARRACUDA_T_ROT_MS};
use reblock_device::params::builtin;
use reblock_device::{DevRequest, Device, Hdd};

const GAP_NS: u64 = 100_000_000;

fn hdd(name: &str) -> Hdd {
    Hdd::new(&builtin(name).unwrap()).unwrap()
}

/// The Cheetah's measured seek table, read and interpolated here independently of the model.
fn cheetah_table() -> impl Fn(f64) -> f64 {
    let text = include_str!("../models/cheetah15k5-seek-curve.csv");
    let pts: Vec<(f64, f64)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let mut f = l.split(',');
            (
                f.next().unwrap().parse().unwrap(),
                f.next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    move |d| {
        let i = pts
            .iter()
            .position(|p| p.0 >= d)
            .unwrap_or(pts.len() - 1)
            .max(1);
        let ((x0, y0), (x1, y1)) = (pts[i - 1], pts[i]);
        y0 + (y1 - y0) * (d - x0) / (x1 - x0)
    }
}

/// Mean of `seek(d)` over the distances between two uniformly random cylinders of `c`.
fn mean_seek_ms(c: u32, seek: impl Fn(f64) -> f64) -> f64 {
    let c = c as f64;
    (1..c as u64)
        .map(|d| seek(d as f64) * 2.0 * (c - d as f64) / (c * c))
        .sum()
}

/// Random reads at uniformly random cylinders (the pattern eq. 2.1 analyses): a random
/// cylinder, surface and sector of it, between `lo` and `hi` cylinders.
fn random_cylinder_reads(d: &Hdd, lo: u32, hi: u32, n: usize, sectors: u32) -> Vec<DevRequest> {
    let g = d.geometry();
    let mut rng = Rng(42);
    (0..n)
        .map(|_| loop {
            // The last tracks of a capped drive hold no sectors: draw again.
            let cyl = lo + rng.below((hi - lo) as u64) as u32;
            let head = rng.below(g.surfaces() as u64) as u32;
            if let Some((first, spt)) = g.track_start(cyl, head) {
                break read(first + rng.below((spt - sectors) as u64), sectors);
            }
        })
        .collect()
}

#[test]
fn random_reads_over_the_disk_match_the_analytic_mean() {
    // Expected: E[seek(d)] over the triangular distance distribution + T_rot/2 + transfer.
    // The seed's shortcut seekTime(C/3) is off by Jensen's gap for these curves (+2.8% for
    // the Barracuda's convex tail, -3.5% for the Cheetah's concave table), so both are
    // checked: tightly against the exact mean, and against the shortcut within the
    // issue's 3% for the Barracuda. The Cheetah is the exception, at 4.5%: its measured
    // table is concave all the way (no linear tail), so seekTime(C/3) overestimates the
    // mean seek by 3.5% whatever the model does; its exact mean is still met within 1.5%.
    type SeekFn = Box<dyn Fn(f64) -> f64>;
    let cases: [(&str, SeekFn, f64, f64); 2] = [
        (
            "barracuda",
            Box::new(|d| BARRACUDA.seek_ms(d)),
            8.0 / 152.0,
            0.03,
        ),
        ("cheetah15k5", Box::new(cheetah_table()), 8.0 / 960.0, 0.045),
    ];
    for (name, seek, xfer_rev, shortcut_tolerance) in cases {
        let mut d = hdd(name).without_cache();
        let c = d.geometry().cylinders();
        let t_rot = d.rotation_ns() / 1e6;
        let reqs = random_cylinder_reads(&d, 0, c, 40_000, 8);
        let (mean, _) = mean_ms(&mut d, &reqs, GAP_NS);
        let exact = mean_seek_ms(c, &seek) + t_rot / 2.0 + xfer_rev * t_rot;
        let shortcut = seek(c as f64 / 3.0) + t_rot / 2.0 + xfer_rev * t_rot;
        assert!(
            (mean - exact).abs() / exact < 0.015,
            "{name}: {mean} vs {exact}"
        );
        assert!(
            (mean - shortcut).abs() / shortcut < shortcut_tolerance,
            "{name}: {mean} vs {shortcut}"
        );
    }
}

#[test]
fn barracuda_uniformly_random_4k_reads_meet_the_seeds_formula_within_3_percent() {
    // The bar: random 4 KiB reads over the whole disk at low load (uniformly
    // random addresses, 100 ms apart, cache off) within 3% of seekTime(C/3) + T_rot/2 +
    // transfer, eq. 2.1 of seed 001 with the Barracuda's curve. Uniform addresses weigh
    // a cylinder by its sectors (outer zones more), which shortens the mean seek a little
    // against uniform cylinders; the transfer is that of 8 sectors, averaged the same way.
    let d = hdd("barracuda").without_cache();
    let g = d.geometry();
    let (cap, c, t_rot) = (d.capacity_sectors(), g.cylinders(), d.rotation_ns() / 1e6);
    let mut rng = Rng(2024);
    let reqs: Vec<_> = (0..100_000).map(|_| read(rng.below(cap - 8), 8)).collect();
    let (mean, _) = mean_ms(&mut d.clone(), &reqs, GAP_NS);

    let spt: Vec<f64> = g
        .zones()
        .iter()
        .flat_map(|z| std::iter::repeat_n(z.sectors_per_track as f64, z.cylinders as usize))
        .collect();
    let total: f64 = spt.iter().sum();
    let transfer = spt.iter().map(|s| s / total * 8.0 / s * t_rot).sum::<f64>();
    let shortcut = BARRACUDA.seek_ms(c as f64 / 3.0) + t_rot / 2.0 + transfer;
    assert!(
        (mean - shortcut).abs() / shortcut < 0.03,
        "{mean} vs {shortcut}"
    );
    // And the exact expectation for these addresses: E[seek] over pairs of cylinders
    // weighted by their sectors, 2.3% above the shortcut (Jensen's gap); the simulated
    // mean (13.85 ms against 13.49 ms) adds the occasional track switch.
    let mut seek = 0.0;
    for i in 0..spt.len() {
        for j in i + 1..spt.len() {
            seek += 2.0 * spt[i] * spt[j] * BARRACUDA.seek_ms((j - i) as f64);
        }
    }
    let exact = seek / (total * total) + t_rot / 2.0 + transfer;
    assert!((mean - exact).abs() / exact < 0.01, "{mean} vs {exact}");
}

#[test]
fn cheetah_random_4k_reads_match_disksim() {
    // Models README: 5.78 ms with the cache, 5.80 ms without (DiskSim, 10,000 requests
    // 100 ms apart, uniform over the sectors). Tolerance 2%.
    let d = hdd("cheetah15k5");
    let cap = d.capacity_sectors();
    let mut rng = Rng(1);
    let reqs: Vec<_> = (0..10_000).map(|_| read(rng.below(cap - 8), 8)).collect();
    let (with, _) = mean_ms(&mut d.clone(), &reqs, GAP_NS);
    let (without, _) = mean_ms(&mut d.clone().without_cache(), &reqs, GAP_NS);
    assert!((with - 5.78).abs() / 5.78 < 0.02, "{with}");
    assert!((without - 5.80).abs() / 5.80 < 0.02, "{without}");
}

#[test]
fn cheetah_sequential_4k_reads_match_disksim() {
    // Models README: 0.178 ms with 99.3% hits (cache), 2.03 ms without (half a turn).
    let d = hdd("cheetah15k5");
    let reqs: Vec<_> = (0..10_000).map(|i| read(1_000_000 + i * 8, 8)).collect();
    let (with, hits) = mean_ms(&mut d.clone(), &reqs, GAP_NS);
    let (without, no_hits) = mean_ms(&mut d.clone().without_cache(), &reqs, GAP_NS);
    assert!((with - 0.178).abs() / 0.178 < 0.03, "{with}");
    assert!(hits > 0.99, "{hits}");
    assert!((without - 2.03).abs() / 2.03 < 0.03, "{without}");
    assert_eq!(no_hits, 0.0);
}

#[test]
fn back_to_back_sequential_reads_run_at_media_rate() {
    // Each request issued when the previous ends: no rotational loss except at track
    // switches, which the skew hides. Zone 0 of the Cheetah: 1200 sectors per revolution.
    let mut d = hdd("cheetah15k5").without_cache();
    let rot = d.rotation_ns();
    let (mut t, n, size) = (0u64, 300u64, 256u32);
    d.set_head(0);
    let first = d.service(0, &read(0, size));
    t += first.total_ns;
    let mut busy = 0;
    for i in 1..n {
        busy += d.service(t, &read(i * size as u64, size)).total_ns;
        t = first.total_ns + busy;
    }
    let media_ns = (n - 1) as f64 * size as f64 / 1200.0 * rot;
    let ratio = busy as f64 / media_ns;
    // Track switches (head switch 1 ms, one-cylinder seek 0.55 ms) cost their skew.
    assert!((1.0..1.15).contains(&ratio), "{ratio}");
}

#[test]
fn a_read_across_a_track_boundary_costs_two_turns_plus_the_skew() {
    let mut d = hdd("barracuda").without_cache();
    let spt = d.geometry().zones()[0].sectors_per_track;
    let rot = d.rotation_ns();
    d.set_head(0);
    // Start exactly when sector 0 passes under the head: angle of sector 0 is 0.
    let s = d.service(10 * rot as u64 * 1000 / 1000, &read(0, 2 * spt));
    assert!((s.transfer_ns as f64 - 2.0 * rot).abs() < 2.0, "{s:?}");
    assert_eq!(s.seek_ns, 900_000, "one head switch of 0.9 ms");
    // The next track is skewed by ceil(0.9 ms / sector time) sectors: the wait after the
    // switch is less than one sector.
    let sector_ns = rot / spt as f64;
    assert!((s.rotate_ns as f64) < rot * 0.01 + sector_ns, "{s:?}");
}

#[test]
fn seed_001_random_access_over_325_cylinders() {
    // Seed 001 §2.5: a 50 MB document over 325 cylinders of the Barracuda, 512-byte
    // blocks read at random. Eq. 2.1 evaluated with the seed's parameters gives
    // 1.83 + 0.17*sqrt(325/3) + 8.333/2 = 7.766 ms (+ one block's transfer); the seed
    // prints 5.99 ms, which is a + T_rot/2 and not reachable by any seek (see analytic.rs).
    let mut d = hdd("barracuda").without_cache();
    let reqs = random_cylinder_reads(&d, 100, 425, 40_000, 1);
    let (mean, _) = mean_ms(&mut d, &reqs, GAP_NS);
    let block_ms = BARRACUDA_T_ROT_MS / 186.0;
    let eq_2_1 = analytic::t_rand_ms(&BARRACUDA, 325.0, BARRACUDA_T_ROT_MS) + block_ms;
    assert!((mean - eq_2_1).abs() / eq_2_1 < 0.02, "{mean} vs {eq_2_1}");
    let exact = mean_seek_ms(325, |x| BARRACUDA.seek_ms(x)) + BARRACUDA_T_ROT_MS / 2.0 + block_ms;
    assert!((mean - exact).abs() / exact < 0.01, "{mean} vs {exact}");
}

/// Parent reads, then the first child `cyl_away` cylinders off, placed anywhere in the
/// rotationally-optimal track region of 1/k of a track (seed 001 §2.5, eq. 2.8).
fn semi_sequential_child_ms(k: u32, cyl_away: u32, n: usize) -> (f64, f64) {
    let mut d = hdd("barracuda").without_cache();
    let mut rng = Rng(9);
    let (mut total, mut rot) = (0.0, 0.0);
    for i in 0..n {
        let t0 = i as u64 * GAP_NS;
        let parent_cyl = 200 + rng.below(300) as u32;
        let (first, spt) = d.geometry().track_start(parent_cyl, 0).unwrap();
        let parent = d.service(t0, &read(first + rng.below(spt as u64 - 1), 1));
        let t1 = t0 + parent.total_ns;
        let from = d.head_position();
        let land = d
            .find_semi_sequential(t1, from, parent_cyl + cyl_away, 0)
            .unwrap();
        let (child_first, spt) = d.geometry().track_start(parent_cyl + cyl_away, 0).unwrap();
        let region = (spt / k).max(1) as u64;
        let child = child_first + (land - child_first + rng.below(region)) % spt as u64;
        let s = d.service(t1, &read(child, 1));
        total += s.total_ns as f64 / 1e6;
        rot += s.rotate_ns as f64 / 1e6;
    }
    (total / n as f64, rot / n as f64)
}

#[test]
fn seed_001_semi_sequential_access_with_8_track_regions() {
    // Eq. 2.8 with k = 8 and the child 2 cylinders away (the seed's mean s(v) = 1.83
    // tracks, rounded to whole cylinders): 1.83 + 0.17*sqrt(2) + 8.333/16 = 2.591 ms, plus
    // one block's transfer. The seed prints 2.79 ms from a seekTime(1.83) of 2.26 ms,
    // which its own curve does not give (it gives 2.06 ms).
    let (mean, rot) = semi_sequential_child_ms(8, 2, 20_000);
    let block_ms = BARRACUDA_T_ROT_MS / 186.0;
    let eq_2_8 = analytic::t_semi_seq_ms(&BARRACUDA, 2.0, 8.0, BARRACUDA_T_ROT_MS) + block_ms;
    assert!((mean - eq_2_8).abs() / eq_2_8 < 0.02, "{mean} vs {eq_2_8}");
    // The rotational part alone averages T_rot / 16 = 0.521 ms.
    assert!((rot - BARRACUDA_T_ROT_MS / 16.0).abs() < 0.02, "{rot}");
}

#[test]
fn a_rotationally_optimal_child_waits_less_than_a_sector() {
    // k huge: the child is exactly where the head lands, the wait is under one sector.
    let (mean, rot) = semi_sequential_child_ms(u32::MAX >> 8, 2, 2_000);
    assert!(rot < BARRACUDA_T_ROT_MS / 119.0, "{rot}");
    let expected = BARRACUDA.seek_ms(2.0) + BARRACUDA_T_ROT_MS / 186.0;
    assert!((mean - expected).abs() < 0.06, "{mean} vs {expected}");
}

#[test]
fn write_caching_acknowledges_from_the_cache_and_still_pays_the_write_back() {
    let mut d = hdd("wd2500aaks");
    d.set_head(0);
    let w = d.service(0, &write(200_000_000, 8));
    assert_eq!(w.total_ns, 0, "overhead 0: acknowledged from the cache");
    assert_eq!(d.dirty_sectors(), 8);
    // Reading the data back while it waits in the cache is a hit.
    let hit = d.service(0, &read(200_000_000, 8));
    assert!(hit.cache_hit && hit.total_ns == 100_000, "{hit:?}");

    // The idle drive writes the data back at once: 1 ms later a media read waits for
    // that write-back to finish (reported as overhead); the 1 ms before the read is
    // busy time outside the read's service.
    let mut d = hdd("wd2500aaks");
    d.set_head(0);
    let w = d.service(0, &write(200_000_000, 8));
    let r = d.service(1_000_000, &read(0, 8));
    assert!(r.overhead_ns > 2_000_000, "{r:?}");
    assert_eq!(r.background_ns, 1_000_000);
    assert_eq!(d.dirty_sectors(), 0);
    assert_eq!(d.drain().busy_ns, 0, "nothing left to write back");
    // Busy time is exactly the media work of writing through and then reading.
    let busy = w.total_ns + r.background_ns + r.total_ns;
    let mut nc = hdd("wd2500aaks").without_cache();
    nc.set_head(0);
    let w_nc = nc.service(0, &write(200_000_000, 8));
    assert!(
        w_nc.seek_ns > 3_000_000
            && w_nc.total_ns == w_nc.seek_ns + w_nc.rotate_ns + w_nc.transfer_ns + w_nc.overhead_ns
    );
    let r_nc = nc.service(w_nc.total_ns, &read(0, 8));
    assert!(
        busy.abs_diff(w_nc.total_ns + r_nc.total_ns) < 10,
        "{busy} vs {} + {}",
        w_nc.total_ns,
        r_nc.total_ns
    );

    // A write long before a request was written back while the drive was idle: only
    // the request's `background_ns` includes it.
    let w2 = d.service(GAP_NS, &write(100_000_000, 8));
    let r2 = d.service(2 * GAP_NS, &read(50_000_000, 8));
    assert_eq!(w2.total_ns, 0);
    assert!(r2.background_ns > 3_000_000, "{r2:?}");
    assert_eq!(r2.overhead_ns, 0, "no wait: the write-back was over");
}

#[test]
fn a_rewrite_of_data_waiting_in_the_cache_is_absorbed() {
    let mut d = hdd("wd2500aaks");
    d.service(0, &write(5_000, 16));
    d.service(0, &write(5_008, 8));
    assert_eq!(d.dirty_sectors(), 16);
    d.service(0, &write(5_012, 8));
    assert_eq!(d.dirty_sectors(), 24, "not inside one waiting write");
    let dr = d.drain();
    assert!(dr.busy_ns > 0 && d.dirty_sectors() == 0, "{dr:?}");
    let again = d.drain();
    assert_eq!(
        (again.busy_ns, again.end_ns),
        (0, dr.end_ns),
        "drained once"
    );
}

/// Serves `reqs` arriving `gap_ns` apart first come first served on `d`, then drains it:
/// each request's response (completion minus arrival) and the busy time (services,
/// idle-time work and the drain).
fn fcfs(d: &mut Hdd, reqs: &[DevRequest], gap_ns: u64) -> (Vec<u64>, u64) {
    let (mut free_ns, mut busy) = (0u64, 0u64);
    let mut responses = Vec::with_capacity(reqs.len());
    for (i, r) in reqs.iter().enumerate() {
        let arrival = i as u64 * gap_ns;
        let start = arrival.max(free_ns);
        let s = d.service(start, r);
        free_ns = start + s.total_ns;
        busy += s.total_ns + s.background_ns;
        responses.push(free_ns - arrival);
    }
    (responses, busy + d.drain().busy_ns)
}

fn random_writes(d: &Hdd, n: usize, sectors: u32, seed: u64) -> Vec<DevRequest> {
    let mut rng = Rng(seed);
    let cap = d.capacity_sectors() - sectors as u64;
    (0..n).map(|_| write(rng.below(cap), sectors)).collect()
}

#[test]
fn cached_writes_are_charged_their_write_back_in_busy_time() {
    // Regression: with write caching on, a write cost only its command overhead (0 for
    // the Cheetah), the cache never filled and the write-back was never charged, so
    // 2000 random 4 KiB writes 0.1 ms apart on the Cheetah gave 0 s of busy time
    // against 11.55 s with the cache off: the primary metric was wrong for any
    // write-heavy trace. The write-back does the same seek, rotation and transfer as
    // writing through, in the same order, so busy time must match the cache-off run up
    // to the rotational waits, which differ because the write-backs start at other
    // times (random, they average out over 2000 writes). The bound 0.5x..1.2x: below
    // 1.2x, caching never costs noticeably more media time than writing through; down
    // to 0.5x leaves room for a drive that reorders its write-backs to seek less, which
    // is a real gain, but cannot remove the rotation and transfer that dominate.
    for name in ["wd2500aaks", "wd360gd"] {
        let on = hdd(name);
        let off = hdd(name).without_cache();
        let reqs = random_writes(&on, 2_000, 8, 7);
        let (resp_on, busy_on) = fcfs(&mut on.clone(), &reqs, 100_000);
        let (resp_off, busy_off) = fcfs(&mut off.clone(), &reqs, 100_000);
        let ratio = busy_on as f64 / busy_off as f64;
        assert!(
            (0.5..1.2).contains(&ratio),
            "{name}: {busy_on} vs {busy_off}"
        );
        assert!(busy_off as f64 > 2_000.0 * 3e6, "{name}: {busy_off}");
        // The 8 MB fit in the cache: acknowledged at once, unlike writing through.
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
        assert!(mean(&resp_on) < 0.2e6, "{name}: {}", mean(&resp_on));
        assert!(mean(&resp_off) > 100e6, "{name}: {}", mean(&resp_off));
    }
}

#[test]
fn a_write_burst_larger_than_the_cache_waits_for_write_back_once_it_is_full() {
    // This drive's cache holds 16 x 2048 sectors: 4096 writes of 8 sectors. 7000 of
    // them 0.1 ms apart, much faster than the ~13 ms each write-back takes: the first
    // ones are acknowledged at once, then the cache is full and each write waits for a
    // write-back, so the responses grow with the backlog.
    let mut d = hdd("wd2500aaks");
    let limit = 16 * 2048;
    let reqs = random_writes(&d, 7_000, 8, 11);
    let (mut free_ns, mut responses) = (0u64, Vec::new());
    for (i, r) in reqs.iter().enumerate() {
        let arrival = i as u64 * 100_000;
        let start = arrival.max(free_ns);
        free_ns = start + d.service(start, r).total_ns;
        responses.push(free_ns - arrival);
        assert!(d.dirty_sectors() <= limit, "{}", d.dirty_sectors());
    }
    let mean_ms = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e6;
    // The drive writes back ~1 in 130 arrivals meanwhile: full after ~4130 writes.
    assert!(
        mean_ms(&responses[..3_900]) < 0.01,
        "{}",
        mean_ms(&responses[..3_900])
    );
    let (a, b, c) = (
        mean_ms(&responses[5_000..5_500]),
        mean_ms(&responses[6_000..6_500]),
        mean_ms(&responses[6_500..]),
    );
    assert!(a > 100.0 && a < b && b < c, "{a} {b} {c}");
    assert_eq!(d.dirty_sectors(), limit, "still full at the end");
}

#[test]
fn the_cheetahs_write_segments_pace_a_write_burst_at_the_media_with_nearest_first_write_back() {
    // DiskSim's package: full fast write with 11 write segments. 2000 random 4 KiB
    // writes 0.1 ms apart: at most 11 wait in the cache, so after the first few each
    // write waits for a write-back and the responses grow with the backlog; the drive
    // writes back the nearest waiting write first, so it spends less media time per
    // write than writing through in arrival order (DiskSim: ~3.8 ms per write against
    // ~6.4 ms).
    let on = hdd("cheetah15k5");
    let off = hdd("cheetah15k5").without_write_caching();
    let reqs = random_writes(&on, 2_000, 8, 7);
    let mut d = on.clone();
    let (resp_on, busy_on) = fcfs(&mut d, &reqs, 100_000);
    let (_, busy_off) = fcfs(&mut off.clone(), &reqs, 100_000);
    let per_write_ms = busy_on as f64 / 2_000.0 / 1e6;
    assert!(
        (3.0..4.8).contains(&per_write_ms),
        "{per_write_ms} ms per write"
    );
    assert!(busy_on < busy_off * 4 / 5, "{busy_on} vs {busy_off}");
    assert!(
        resp_on[1_999] > 100 * resp_on[20],
        "{} {}",
        resp_on[1_999],
        resp_on[20]
    );
    // The first writes are acknowledged after the write-hit overhead alone.
    assert_eq!(resp_on[0], 276_000);
}

#[test]
fn a_write_invalidates_cached_read_ahead() {
    let mut d = hdd("cheetah15k5");
    d.service(0, &read(0, 8));
    assert!(d.service(GAP_NS, &read(8, 8)).cache_hit);
    d.service(2 * GAP_NS, &write(16, 8));
    assert!(!d.service(3 * GAP_NS, &read(16, 8)).cache_hit);
}

#[test]
fn estimate_matches_service_and_leaves_the_state() {
    let mut d = hdd("cheetah15k5");
    let mut rng = Rng(3);
    for i in 0..2_000u64 {
        let r = read(
            rng.below(d.capacity_sectors() - 64),
            1 + rng.below(64) as u32,
        );
        let e = d.estimate_ns(i * 7_000_000, &r);
        assert_eq!(e, d.estimate_ns(i * 7_000_000, &r));
        assert_eq!(e, d.service(i * 7_000_000, &r).total_ns);
    }
    // With writes waiting in the cache: write-backs in the idle time before a request,
    // waits for one in progress, a full cache, hits on waiting data.
    let mut t = 0u64;
    for i in 0..20_000u64 {
        let r = DevRequest {
            sector: rng.below(1 << 20) * 8,
            sectors: 8 << rng.below(3),
            write: rng.below(3) > 0,
        };
        let e = d.estimate_ns(t, &r);
        assert_eq!(e, d.service(t, &r).total_ns, "request {i}");
        t += e + rng.below(if i % 1000 < 900 { 200_000 } else { 20_000_000 });
    }
}

#[test]
fn position_keys_are_cylinders() {
    let mut d = hdd("barracuda").without_cache();
    let (first, _) = d.geometry().track_start(4000, 2).unwrap();
    assert_eq!(d.position_key(first), 4000);
    d.service(0, &read(first, 1));
    assert_eq!(d.head_key(), 4000);
}

#[test]
fn energy_counts_idle_over_the_run_and_extra_power_while_busy() {
    let mut d = hdd("cheetah15k5").without_cache();
    let elapsed = 10 * GAP_NS;
    let idle_only = d.energy_j(elapsed).unwrap();
    assert!((idle_only - 12.0).abs() < 1e-9, "12 W for 1 s");
    let mut busy_seek = 0;
    for i in 0..10 {
        busy_seek += d.service(i * GAP_NS, &read(i * 20_000_000, 8)).seek_ns;
    }
    let e = d.energy_j(elapsed).unwrap();
    // Seeking adds 5 W over idle, transferring 2 W.
    assert!(e > idle_only + 5.0 * busy_seek as f64 * 1e-9 - 1e-6, "{e}");
    assert!(
        e < idle_only + 5.0 * (busy_seek as f64 * 1e-9) + 0.01,
        "{e}"
    );
}

#[test]
fn the_drive_queue_ranks_a_cached_write_by_its_seek_and_rotation() {
    // DiskSim's SPTF estimates every queued command mechanically, without the cache: a
    // write the cache would take at once ranks like a read of the same sectors, so it
    // does not jump ahead of nearer reads.
    let mut d = hdd("cheetah15k5");
    d.service(0, &read(1_000, 8));
    let far = d.capacity_sectors() / 2;
    let t = GAP_NS;
    let w = d.positioning_ns(t, &write(far, 8));
    assert_eq!(w, d.positioning_ns(t, &read(far, 8)));
    // Half the drive away: a seek of milliseconds, not the write's 0.28 ms overhead.
    assert!(w > 1_000_000, "{w} ns");
    // A nearer read ranks first.
    assert!(d.positioning_ns(t, &read(1_200, 8)) < w);
}

/// The drive queue's choice with its shortcut (seeks that rule commands out) is the
/// choice of timing every command: on a drive with writes waiting in its cache and
/// read-ahead running, near and far commands, repeated ones (ties go to the first).
#[test]
fn nearest_is_the_least_positioning_time_ties_to_the_first() {
    let mut d = hdd("cheetah15k5");
    let mut rng = Rng(11);
    let span = 4_000_000;
    let mut now = 0u64;
    let mut skipped_ties = 0;
    for step in 0..3_000 {
        let n = 2 + rng.below(10) as usize;
        let mut reqs: Vec<DevRequest> = (0..n)
            .map(|_| {
                let sectors = 8 * (1 + rng.below(16) as u32);
                let sector = rng.below(span);
                if rng.below(3) == 0 {
                    write(sector, sectors)
                } else {
                    read(sector, sectors)
                }
            })
            .collect();
        if step % 5 == 0 {
            reqs.push(reqs[0]);
            skipped_ties += 1;
        }
        let want = (0..reqs.len()).min_by_key(|&i| (d.positioning_ns(now, &reqs[i]), i));
        assert_eq!(d.nearest(now, &reqs), want, "step {step}");
        let pick = want.unwrap();
        now += d.service(now, &reqs[pick]).total_ns + rng.below(3_000_000);
    }
    assert!(skipped_ties > 0);
    assert!(d.nearest(now, &[]).is_none());
}
