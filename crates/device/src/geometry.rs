//! Zoned disk geometry: where a logical sector lies on the platters.
//!
//! Zones hold a fixed number of sectors per track over a range of cylinders (outer zones
//! hold more). Inside a zone, logical sectors fill tracks in one of two orders:
//! conventional (every surface of a cylinder, then the next cylinder) or serpentine (one
//! surface across a band of cylinders, the next surface back across the same band, and so
//! on, then the next band — the Cheetah 15K.5 of the models README).
//!
//! Each track's sector 0 is rotated ("skewed") from the previous track's by enough to
//! cover the head switch or one-cylinder seek between them, so that a transfer crossing a
//! track boundary does not lose a revolution. The angle of a sector is a fraction of a
//! revolution in [0, 1).

use crate::params::{HddParams, LayoutKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Conventional,
    Serpentine { band_cylinders: u32 },
}

#[derive(Clone, Debug)]
pub struct Zone {
    pub first_cylinder: u32,
    pub cylinders: u32,
    pub sectors_per_track: u32,
    pub first_sector: u64,
    /// Skew per head switch and per cylinder switch, in revolutions.
    track_skew_rev: f64,
    cylinder_skew_rev: f64,
}

/// The physical place of one sector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Location {
    pub cylinder: u32,
    pub head: u32,
    /// Index of the sector in its track, in logical order.
    pub sector: u32,
    pub sectors_per_track: u32,
    /// Where the sector starts, in revolutions from the index mark, in [0, 1).
    pub angle: f64,
}

#[derive(Clone, Debug)]
pub struct Geometry {
    zones: Vec<Zone>,
    /// `zones[i].first_sector`, for the binary search.
    zone_starts: Vec<u64>,
    zone_first_cylinders: Vec<u32>,
    surfaces: u32,
    cylinders: u32,
    capacity_sectors: u64,
    layout: Layout,
}

/// Skew in sectors (from the file, or enough to cover `switch_ms`) as revolutions.
fn skew_rev(given: Option<u32>, switch_ms: f64, rot_ms: f64, spt: u32) -> f64 {
    let sectors = given.unwrap_or_else(|| (switch_ms / rot_ms * spt as f64).ceil() as u32);
    (sectors % spt) as f64 / spt as f64
}

/// `x.fract()` for the positive angles `locate` computes, without the libm `trunc`
/// call that `fract` compiles to on baseline x86-64: a cast truncates the same way for
/// any value below 2^52, so the result is bit for bit `fract`'s.
#[inline]
pub(crate) fn fract_of_positive(x: f64) -> f64 {
    if x > 0.0 && x < 4_503_599_627_370_496.0 {
        x - (x as u64) as f64
    } else {
        x.fract()
    }
}

impl Geometry {
    /// Builds the geometry; `one_cylinder_seek_ms` sizes the default cylinder skew.
    pub fn new(p: &HddParams, one_cylinder_seek_ms: f64) -> Geometry {
        let rot_ms = 60_000.0 / p.rpm;
        let mut zones = Vec::with_capacity(p.zones.len());
        let mut first_sector = 0u64;
        for z in &p.zones {
            let cylinders = z.last_cylinder - z.first_cylinder + 1;
            let spt = z.sectors_per_track;
            zones.push(Zone {
                first_cylinder: z.first_cylinder,
                cylinders,
                sectors_per_track: spt,
                first_sector,
                track_skew_rev: skew_rev(p.track_skew_sectors, p.head_switch_ms, rot_ms, spt),
                cylinder_skew_rev: skew_rev(
                    p.cylinder_skew_sectors,
                    one_cylinder_seek_ms + p.settle_ms,
                    rot_ms,
                    spt,
                ),
            });
            first_sector += cylinders as u64 * p.surfaces as u64 * spt as u64;
        }
        let capacity_sectors = p
            .capacity_sectors
            .map_or(first_sector, |c| c.min(first_sector));
        let layout = match (p.layout.kind, p.layout.band_cylinders) {
            (LayoutKind::Serpentine, Some(band_cylinders)) => Layout::Serpentine { band_cylinders },
            _ => Layout::Conventional,
        };
        Geometry {
            zone_starts: zones.iter().map(|z| z.first_sector).collect(),
            zone_first_cylinders: zones.iter().map(|z| z.first_cylinder).collect(),
            cylinders: zones.last().map_or(0, |z| z.first_cylinder + z.cylinders),
            zones,
            surfaces: p.surfaces,
            capacity_sectors,
            layout,
        }
    }

    pub fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }
    pub fn cylinders(&self) -> u32 {
        self.cylinders
    }
    pub fn surfaces(&self) -> u32 {
        self.surfaces
    }
    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    fn zone_of_sector(&self, sector: u64) -> &Zone {
        let i = self.zone_starts.partition_point(|&s| s <= sector) - 1;
        &self.zones[i]
    }

    /// Where `sector` lies. Sectors past the capacity wrap around (a model never panics
    /// on an out-of-range request; the array or simulator is expected to stay in range).
    pub fn locate(&self, sector: u64) -> Location {
        // A division only for the rare sector past the end: locate runs for every
        // request a drive serves.
        let sector = if sector < self.capacity_sectors {
            sector
        } else {
            sector % self.capacity_sectors
        };
        let z = self.zone_of_sector(sector);
        let spt = z.sectors_per_track as u64;
        let off = sector - z.first_sector;
        let track = off / spt;
        let (cyl, head, head_switches) = self.track_position(z, track);
        let cyl_switches = track - head_switches;
        let skew =
            head_switches as f64 * z.track_skew_rev + cyl_switches as f64 * z.cylinder_skew_rev;
        let s = (off % spt) as u32;
        let angle = fract_of_positive(s as f64 / spt as f64 + skew);
        Location {
            cylinder: z.first_cylinder + cyl,
            head,
            sector: s,
            sectors_per_track: spt as u32,
            angle,
        }
    }

    /// (cylinder in zone, head, head switches before this track) of the zone's `track`th
    /// track in logical order.
    fn track_position(&self, z: &Zone, track: u64) -> (u32, u32, u64) {
        let s = self.surfaces as u64;
        match self.layout {
            Layout::Conventional => {
                let cyl = track / s;
                (cyl as u32, (track % s) as u32, track - cyl)
            }
            Layout::Serpentine { band_cylinders } => {
                let b = band_cylinders as u64;
                let full_bands = z.cylinders as u64 / b;
                let full_tracks = full_bands * b * s;
                let (band, r, len) = if track < full_tracks {
                    (track / (b * s), track % (b * s), b)
                } else {
                    (
                        full_bands,
                        track - full_tracks,
                        z.cylinders as u64 - full_bands * b,
                    )
                };
                let head = r / len;
                let pos = r % len;
                let cyl = band * b
                    + if head.is_multiple_of(2) {
                        pos
                    } else {
                        len - 1 - pos
                    };
                (cyl as u32, head as u32, band * (s - 1) + head)
            }
        }
    }

    /// The first logical sector of track (`cylinder`, `head`) and its sector count, or
    /// `None` past the end. Inverse of [`Geometry::locate`] at track granularity.
    pub fn track_start(&self, cylinder: u32, head: u32) -> Option<(u64, u32)> {
        if cylinder >= self.cylinders || head >= self.surfaces {
            return None;
        }
        let i = self
            .zone_first_cylinders
            .partition_point(|&c| c <= cylinder)
            - 1;
        let z = &self.zones[i];
        let c = (cylinder - z.first_cylinder) as u64;
        let s = self.surfaces as u64;
        let track = match self.layout {
            Layout::Conventional => c * s + head as u64,
            Layout::Serpentine { band_cylinders } => {
                let b = band_cylinders as u64;
                let band = c / b;
                let len = b.min(z.cylinders as u64 - band * b);
                let rel = c - band * b;
                let pos = if head.is_multiple_of(2) {
                    rel
                } else {
                    len - 1 - rel
                };
                band * b * s + head as u64 * len + pos
            }
        };
        let first = z.first_sector + track * z.sectors_per_track as u64;
        (first < self.capacity_sectors).then_some((first, z.sectors_per_track))
    }
}

#[cfg(test)]
mod tests {
    use super::fract_of_positive;

    #[test]
    fn fract_of_positive_is_fract_bit_for_bit() {
        let mut x = 0.0f64;
        let mut probes = vec![
            0.0,
            -0.0,
            0.5,
            1.0,
            1.999_999_9,
            2.0f64.powi(52) - 0.5,
            1e17,
            -0.25,
        ];
        for _ in 0..10_000 {
            x = (x * 1.618_033_988 + 0.271_828).fract() * 7.3;
            probes.push(x);
        }
        for x in probes {
            assert_eq!(fract_of_positive(x).to_bits(), x.fract().to_bits(), "{x}");
        }
    }
}
