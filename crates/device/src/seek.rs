//! Seek time as a function of distance in cylinders: the two-piece curve of seed 001
//! eq. 2.2, or a measured table interpolated linearly (the Cheetah 15K.5 extraction).
//! Both are O(1) / O(log n) and allocation-free, since every service calls them.

use crate::params::{SeekKind, SeekParams};

#[derive(Clone, Debug)]
pub enum SeekModel {
    /// `a + b*sqrt(d)` for d < boundary, `c + e*d` otherwise; in nanoseconds.
    Curve {
        a_ns: f64,
        b_ns: f64,
        c_ns: f64,
        e_ns: f64,
        boundary_cylinders: f64,
    },
    /// Measured (distance, ns) points, distances increasing.
    Table {
        distances: Vec<f64>,
        times_ns: Vec<f64>,
        /// Where [`interpolate`]'s search starts, per band of distances.
        start: BandStart,
    },
}

/// Distances per band of a [`BandStart`]: a band holds at most this many of the table's
/// points when they lie one cylinder apart (the dense short-seek end of a measured curve).
const BAND_CYLINDERS: usize = 4;

/// For each band of [`BAND_CYLINDERS`] distances, the number of table points below the
/// band's first distance: the search for a distance in that band starts there and
/// steps over at most a few points, instead of a binary search over them all (the seek
/// time is looked up for every request a drive serves).
#[derive(Clone, Debug, Default)]
pub struct BandStart {
    below: Vec<u32>,
}

impl BandStart {
    fn new(distances: &[f64]) -> BandStart {
        let last = distances.last().map_or(0.0, |&d| d.max(0.0));
        let bands = (last as usize) / BAND_CYLINDERS + 1;
        let mut i = 0;
        let below = (0..bands)
            .map(|b| {
                let from = (b * BAND_CYLINDERS) as f64;
                while i < distances.len() && distances[i] < from {
                    i += 1;
                }
                i as u32
            })
            .collect();
        BandStart { below }
    }

    /// The first index whose distance is not below `x`: `xs.partition_point(|&v| v < x)`,
    /// found from the band's start.
    #[inline]
    fn partition_point(&self, xs: &[f64], x: f64) -> usize {
        let band = x as usize / BAND_CYLINDERS;
        match self.below.get(band) {
            Some(&below) if x >= 0.0 => {
                let mut i = below as usize;
                while i < xs.len() && xs[i] < x {
                    i += 1;
                }
                i
            }
            _ => xs.partition_point(|&v| v < x),
        }
    }
}

impl SeekModel {
    /// From the parameter file; `cylinders` fixes the default C/3 boundary of eq. 2.2.
    pub fn new(p: &SeekParams, points: &[(f64, f64)], cylinders: u32) -> SeekModel {
        let ns = |v: Option<f64>| v.unwrap_or(0.0) * 1e6;
        match p.kind {
            SeekKind::Curve => SeekModel::Curve {
                a_ns: ns(p.a_ms),
                b_ns: ns(p.b_ms),
                c_ns: ns(p.c_ms),
                e_ns: ns(p.e_ms),
                boundary_cylinders: p.boundary_cylinders.unwrap_or(cylinders as f64 / 3.0),
            },
            SeekKind::Table => {
                let distances: Vec<f64> = points.iter().map(|p| p.0).collect();
                SeekModel::Table {
                    start: BandStart::new(&distances),
                    distances,
                    times_ns: points.iter().map(|p| p.1 * 1e6).collect(),
                }
            }
        }
    }

    /// Seek time over `d` cylinders in ns; 0 for d = 0 (no seek, at most a head switch).
    #[inline]
    pub fn seek_ns(&self, d: u32) -> f64 {
        if d == 0 {
            return 0.0;
        }
        self.seek_ns_at(d as f64)
    }

    /// Seek time over a fractional distance `d` > 0 in ns: analytic models average
    /// distances (seed 001 eq. 2.5 gives 1.85 tracks).
    #[inline]
    pub fn seek_ns_at(&self, d: f64) -> f64 {
        match self {
            SeekModel::Curve {
                a_ns,
                b_ns,
                c_ns,
                e_ns,
                boundary_cylinders,
            } => {
                if d < *boundary_cylinders {
                    a_ns + b_ns * d.sqrt()
                } else {
                    c_ns + e_ns * d
                }
            }
            SeekModel::Table {
                distances,
                times_ns,
                start,
            } => interpolate(distances, times_ns, d, start),
        }
    }
}

/// Linear interpolation; below the first point, the first time; past the last point, the
/// last segment's slope carries on.
fn interpolate(xs: &[f64], ys: &[f64], x: f64, start: &BandStart) -> f64 {
    let n = xs.len();
    if n == 1 || x <= xs[0] {
        return ys[0];
    }
    let i = start.partition_point(xs, x).clamp(1, n - 1);
    let (x0, x1, y0, y1) = (xs[i - 1], xs[i], ys[i - 1], ys[i]);
    y0 + (y1 - y0) * (x - x0) / (x1 - x0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_switches_branch_at_the_boundary() {
        let p = SeekParams {
            kind: SeekKind::Curve,
            a_ms: Some(1.83),
            b_ms: Some(0.17),
            c_ms: Some(2.85),
            e_ms: Some(0.0035),
            boundary_cylinders: None,
            file: None,
            points: vec![],
        };
        let m = SeekModel::new(&p, &[], 300);
        // d = 99 < 100: 1.83 + 0.17*sqrt(99) = 1.83 + 1.691478 = 3.521478 ms
        assert!((m.seek_ns(99) - 3.521_478e6).abs() < 5.0);
        // d = 100 (not < C/3 = 100): 2.85 + 0.35 = 3.2 ms.
        assert!((m.seek_ns(100) - 3.2e6).abs() < 1e-3);
        assert_eq!(m.seek_ns(0), 0.0);
    }

    #[test]
    fn table_interpolates_and_extrapolates() {
        let p = SeekParams {
            kind: SeekKind::Table,
            a_ms: None,
            b_ms: None,
            c_ms: None,
            e_ms: None,
            boundary_cylinders: None,
            file: None,
            points: vec![],
        };
        let m = SeekModel::new(&p, &[(1.0, 1.0), (11.0, 2.0), (21.0, 4.0)], 100);
        assert_eq!(m.seek_ns(1), 1.0e6);
        assert!((m.seek_ns(6) - 1.5e6).abs() < 1e-6);
        assert!((m.seek_ns(16) - 3.0e6).abs() < 1e-6);
        // Past the end: slope 0.2 ms/cyl continues.
        assert!((m.seek_ns(31) - 6.0e6).abs() < 1e-6);
    }

    #[test]
    fn band_start_finds_what_a_binary_search_finds() {
        let csv = include_str!("../models/cheetah15k5-seek-curve.csv");
        let cheetah: Vec<f64> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect();
        let sparse = vec![0.5, 3.0, 3.25, 40.0, 41.0, 1000.0];
        for xs in [cheetah, sparse] {
            let start = BandStart::new(&xs);
            let last = *xs.last().unwrap();
            let mut probes: Vec<f64> = (0..=(last as u32 + 10)).map(f64::from).collect();
            probes.extend(xs.iter().flat_map(|&x| [x - 0.25, x, x + 0.25]));
            probes.extend([-1.0, 1.85, f64::NAN, f64::INFINITY, 1e30]);
            for x in probes {
                assert_eq!(
                    start.partition_point(&xs, x),
                    xs.partition_point(|&v| v < x),
                    "distance {x}"
                );
            }
        }
    }
}
