//! Executing one batch of the copy scheduler on a device with real bytes: the online
//! engine's background copier runs every reconfiguration through it (docs/layout.md
//! "Executing a reconfiguration").
//!
//! A batch's steps are independent (see [`crate::schedule`]), so all their sources can be
//! read before any destination is written: [`read_sources`] reads every source extent,
//! merged and ascending, into one staging buffer; [`write_destinations`] then writes every
//! destination, merged and ascending, from it. The caller applies the steps' map effects
//! only after the writes, so a crash at any point leaves the durable map naming every
//! page's old copy (destinations are free slots or home copies the map does not use).
//!
//! Unlike [`crate::CopyBatch`], whose extents are device sectors of one disk (what the
//! simulator costs), every extent here carries its [`Region`]: the engine may keep the
//! region on a separate device, where a slot's sector number means another place.

use std::borrow::Cow;

use crate::bopt::{Geometry, Region};
use crate::copy::{PageRun, Step};
use crate::schedule::{merge_extents, pair_extents, ExtentMove};
use crate::units::Extent;

/// The device a batch is copied on: reads and writes of whole sectors of one region.
pub trait CopyDevice {
    type Error;
    fn read(&mut self, region: Region, extent: Extent, buf: &mut [u8]) -> Result<(), Self::Error>;
    fn write(&mut self, region: Region, extent: Extent, buf: &[u8]) -> Result<(), Self::Error>;
}

/// One piece of a step's copy, with the regions of its two sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionMove {
    pub from: Region,
    pub to: Region,
    pub extent: ExtentMove,
}

/// The device I/O of a batch of independent steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchIo {
    /// What goes where, per device extent.
    pub moves: Vec<RegionMove>,
    /// Extents to read: per region ascending, merged (gaps up to the given size read through).
    pub reads: Vec<(Region, Extent)>,
    /// Extents to write: per region ascending, merged where they touch.
    pub writes: Vec<(Region, Extent)>,
}

impl BatchIo {
    /// The I/O of `steps`, which must not depend on each other (one batch of a
    /// [`crate::CopySchedule`], or part of one).
    pub fn of_steps(steps: &[Step], g: &Geometry, read_gap_sectors: u64) -> BatchIo {
        let mut moves = Vec::new();
        for step in steps {
            if let Step::Copy(op) = step {
                let mut pieces = Vec::new();
                pair_extents(&op.src, &op.dst, g, &mut pieces);
                moves.extend(pieces.into_iter().map(|extent| RegionMove {
                    from: op.src.region,
                    to: op.dst.region,
                    extent,
                }));
            }
        }
        let side = |to: bool, gap: u64| -> Vec<(Region, Extent)> {
            let mut out = Vec::new();
            for region in [Region::Data, Region::Bopt] {
                let mut extents: Vec<Extent> = moves
                    .iter()
                    .filter(|m| (if to { m.to } else { m.from }) == region)
                    .map(|m| match to {
                        true => Extent::new(m.extent.dst_sector, m.extent.src.sectors),
                        false => m.extent.src,
                    })
                    .collect();
                out.extend(
                    merge_extents(&mut extents, gap)
                        .into_iter()
                        .map(|e| (region, e)),
                );
            }
            out
        };
        let reads = side(false, read_gap_sectors);
        let writes = side(true, 0);
        BatchIo {
            moves,
            reads,
            writes,
        }
    }

    /// Device requests the batch issues (each merged extent is one request).
    pub fn requests(&self) -> usize {
        self.reads.len() + self.writes.len()
    }

    /// Bytes the batch reads (gaps read through included).
    pub fn staged_bytes(&self) -> u64 {
        self.reads.iter().map(|(_, e)| e.bytes()).sum()
    }
}

/// A batch's sources, read into one buffer.
#[derive(Clone, Debug, Default)]
pub struct Staged {
    /// Each read extent and where its bytes start in `buf`, in [`BatchIo::reads`]' order:
    /// the data area's ascending, then the BOPT's (see [`read_key`]).
    reads: Vec<(Region, Extent, usize)>,
    buf: Vec<u8>,
}

/// The order of a batch's reads: by region (the data area first), then by sector. A
/// staged extent is found by binary search on it: a batch of scattered pages has about
/// as many reads as moves, and a linear search per move cost O(moves x reads) with
/// every foreground request waiting on the gate.
fn read_key(region: Region, e: &Extent) -> (bool, u64) {
    (region == Region::Bopt, e.start_sector)
}

impl Staged {
    /// The staged bytes of `extent` of `region`, which lies inside one read extent.
    ///
    /// # Panics
    /// When `extent` was not read (a caller bug: it was not a source of the batch).
    pub fn bytes(&self, region: Region, extent: Extent) -> &[u8] {
        let key = read_key(region, &extent);
        let after = self
            .reads
            .partition_point(|(r, e, _)| read_key(*r, e) <= key);
        let (_, read, at) = after
            .checked_sub(1)
            .map(|i| &self.reads[i])
            .filter(|(r, e, _)| *r == region && extent.end_sector() <= e.end_sector())
            .expect("extent is a staged source");
        let from = at + ((extent.start_sector - read.start_sector) * 512) as usize;
        &self.buf[from..from + extent.bytes() as usize]
    }

    /// The staged bytes of a source run, in page order: borrowed when the run is one
    /// device extent (the common case), gathered when it is split around the BOPT.
    pub fn run_bytes(&self, run: &PageRun, g: &Geometry) -> Cow<'_, [u8]> {
        match run.device_extents(g).as_slice() {
            [e] => Cow::Borrowed(self.bytes(run.region, *e)),
            extents => Cow::Owned(
                extents
                    .iter()
                    .flat_map(|e| self.bytes(run.region, *e).iter().copied())
                    .collect(),
            ),
        }
    }
}

/// Reads every source of `io` into a staging buffer, ascending.
pub fn read_sources<D: CopyDevice + ?Sized>(io: &BatchIo, dev: &mut D) -> Result<Staged, D::Error> {
    let mut staged = Staged {
        reads: Vec::with_capacity(io.reads.len()),
        buf: vec![0u8; io.staged_bytes() as usize],
    };
    let mut at = 0usize;
    debug_assert!(io
        .reads
        .windows(2)
        .all(|w| read_key(w[0].0, &w[0].1) < read_key(w[1].0, &w[1].1)));
    for &(region, e) in &io.reads {
        let n = e.bytes() as usize;
        dev.read(region, e, &mut staged.buf[at..at + n])?;
        staged.reads.push((region, e, at));
        at += n;
    }
    Ok(staged)
}

/// Writes every destination of `io` from `staged`, ascending, each merged extent at once.
pub fn write_destinations<D: CopyDevice + ?Sized>(
    io: &BatchIo,
    staged: &Staged,
    dev: &mut D,
) -> Result<(), D::Error> {
    let mut moves: Vec<&RegionMove> = io.moves.iter().collect();
    moves.sort_unstable_by_key(|m| (m.to == Region::Bopt, m.extent.dst_sector));
    let mut next = moves.into_iter().peekable();
    for &(region, e) in &io.writes {
        let mut buf = vec![0u8; e.bytes() as usize];
        while let Some(m) = next.next_if(|m| m.to == region && m.extent.dst_sector < e.end_sector())
        {
            let at = ((m.extent.dst_sector - e.start_sector) * 512) as usize;
            let src = staged.bytes(m.from, m.extent.src);
            buf[at..at + src.len()].copy_from_slice(src);
        }
        dev.write(region, e, &buf)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bopt::BoptConfig;
    use crate::copy::{CopyKind, CopyOp};

    /// Two regions of bytes, every request logged.
    struct Mem {
        data: Vec<u8>,
        bopt: Vec<u8>,
        log: Vec<(Region, Extent, bool)>,
    }

    impl Mem {
        fn side(&mut self, r: Region) -> &mut Vec<u8> {
            match r {
                Region::Data => &mut self.data,
                Region::Bopt => &mut self.bopt,
            }
        }
    }

    impl CopyDevice for Mem {
        type Error = ();
        fn read(&mut self, r: Region, e: Extent, buf: &mut [u8]) -> Result<(), ()> {
            self.log.push((r, e, false));
            let at = (e.start_sector * 512) as usize;
            buf.copy_from_slice(&self.side(r)[at..at + buf.len()]);
            Ok(())
        }
        fn write(&mut self, r: Region, e: Extent, buf: &[u8]) -> Result<(), ()> {
            self.log.push((r, e, true));
            let at = (e.start_sector * 512) as usize;
            self.side(r)[at..at + buf.len()].copy_from_slice(buf);
            Ok(())
        }
    }

    fn copy(kind: CopyKind, src: PageRun, dst: PageRun) -> Step {
        Step::Copy(CopyOp { kind, src, dst })
    }

    /// A geometry of `data_pages` 4 KiB pages and `bopt_pages` slots.
    fn geometry(data_pages: u64, bopt_pages: u32) -> Geometry {
        Geometry::new(&BoptConfig {
            data_sectors: 8 * data_pages,
            bopt_pages,
            segment_pages: 4,
            write_buffer_fraction: 0.25,
            ..BoptConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn a_batch_reads_merged_sources_and_writes_merged_destinations_in_one_pass() {
        let g = geometry(64, 16);
        let page = g.page.bytes() as usize;
        let fill = |n: usize, base: u8| -> Vec<u8> {
            (0..n * page)
                .map(|i| base.wrapping_add((i / page) as u8))
                .collect()
        };
        let bopt_bytes = ((g.bopt_sector(15, 0) + g.page.sectors()) * 512) as usize;
        let mut dev = Mem {
            data: fill(64, 0),
            bopt: vec![0xee; bopt_bytes],
            log: Vec::new(),
        };
        dev.bopt[(g.bopt_sector(12, 0) * 512) as usize..][..page].fill(0x77);
        let data = |p, n| PageRun::new(Region::Data, p, n);
        let slot = |s, n| PageRun::new(Region::Bopt, s, n);
        // Sources 10..12 and 12..14 merge; their slots 4..6 and 6..8 too; a BOPT slot
        // goes home (a separate region on its own).
        let steps = [
            copy(CopyKind::Incoming, data(12, 2), slot(6, 2)),
            copy(CopyKind::Incoming, data(10, 2), slot(4, 2)),
            copy(CopyKind::Incoming, data(40, 1), slot(9, 1)),
            copy(CopyKind::Evict, slot(12, 1), data(30, 1)),
        ];
        let io = BatchIo::of_steps(&steps, &g, 0);
        assert_eq!(io.reads.len(), 3, "{:?}", io.reads);
        assert_eq!(io.writes.len(), 3, "{:?}", io.writes);
        let staged = read_sources(&io, &mut dev).unwrap();
        assert_eq!(
            &*staged.run_bytes(&data(10, 4), &g),
            &fill(64, 0)[10 * page..14 * page]
        );
        write_destinations(&io, &staged, &mut dev).unwrap();
        assert_eq!(dev.log.len(), io.requests());
        assert!(dev.log[..3].iter().all(|l| !l.2) && dev.log[3..].iter().all(|l| l.2));
        let at = |s: u32| (g.bopt_sector(s, 0) * 512) as usize;
        assert_eq!(dev.bopt[at(4)..at(8)], fill(64, 0)[10 * page..14 * page]);
        assert_eq!(dev.bopt[at(9)..at(10)], fill(64, 0)[40 * page..41 * page]);
        assert!(dev.bopt[at(8)..at(9)].iter().all(|&b| b == 0xee));
        assert!(dev.data[30 * page..31 * page].iter().all(|&b| b == 0x77));
    }

    /// Many separate sources in both regions: every destination gets its own source's
    /// bytes (each staged extent is found among the others, in either region).
    #[test]
    fn scattered_sources_of_both_regions_each_reach_their_destination() {
        let g = geometry(512, 64);
        let page = g.page.bytes() as usize;
        let slot_at = |s: u32| (g.bopt_sector(s, 0) * 512) as usize;
        let mut dev = Mem {
            data: (0..512 * page).map(|i| (i / page) as u8).collect(),
            bopt: vec![0; slot_at(63) + page],
            log: Vec::new(),
        };
        for s in 0..64 {
            dev.bopt[slot_at(s)..][..page].fill(200u8.wrapping_add(s as u8));
        }
        let data = |p, n| PageRun::new(Region::Data, p, n);
        let slot = |s, n| PageRun::new(Region::Bopt, s, n);
        let mut steps: Vec<Step> = (0..20u64)
            .map(|i| copy(CopyKind::Incoming, data(3 * i, 1), slot(i, 1)))
            .collect();
        steps.extend(
            (0..10u64).map(|j| copy(CopyKind::Evict, slot(40 + 2 * j, 1), data(400 + 2 * j, 1))),
        );
        let io = BatchIo::of_steps(&steps, &g, 0);
        assert_eq!(io.reads.len(), 30, "every source read on its own");
        let staged = read_sources(&io, &mut dev).unwrap();
        write_destinations(&io, &staged, &mut dev).unwrap();
        for i in 0..20u32 {
            assert!(dev.bopt[slot_at(i)..][..page]
                .iter()
                .all(|&b| b == 3 * i as u8));
        }
        for j in 0..10usize {
            let home = &dev.data[(400 + 2 * j) * page..][..page];
            assert!(
                home.iter()
                    .all(|&b| b == 200u8.wrapping_add((40 + 2 * j) as u8)),
                "page {}",
                400 + 2 * j
            );
        }
    }
}
