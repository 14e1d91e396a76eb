//! Any sequence of reads, writes, reconfigurations (random plans carried out through the
//! diff's copy steps), destages, flush-backs, mode changes and crashes, executed on a model
//! of the device's *bytes*, reads back exactly what a plain disk would.
//!
//! The device model holds one value per sector; a write stores a value unique to its
//! version and sector, so a read that returns a stale or misplaced sector is caught. The
//! data area, the BOPT, and copies between them all go through the physical extents and
//! steps the layout crate produces — nothing reads the map to find data.

use proptest::prelude::*;
use reblock_layout::*;

const PAGE_SECTORS: u32 = 4;
const FS_PAGES: u64 = 32;
const DATA_SECTORS: u64 = FS_PAGES * PAGE_SECTORS as u64;
const BOPT_PAGES: u32 = 16;
const READ_CACHE_PAGES: u64 = 8;

#[derive(Clone, Debug)]
enum Action {
    Read {
        sector: u64,
        sectors: u64,
    },
    Write {
        sector: u64,
        sectors: u64,
    },
    Reconfigure {
        pairs: Vec<(u64, u64)>,
        max_copy_pages: u64,
    },
    Destage,
    Flush {
        unmap: bool,
    },
    /// Normal, guard, bypass (the guard extended to writes) or detaching.
    Mode(Mode),
    Crash,
}

fn action() -> impl Strategy<Value = Action> {
    let extent = (0..DATA_SECTORS).prop_flat_map(|s| (Just(s), 1..=(DATA_SECTORS - s).min(20)));
    let pairs = prop::collection::vec((0..FS_PAGES, 0..READ_CACHE_PAGES), 0..10);
    prop_oneof![
        4 => extent.clone().prop_map(|(sector, sectors)| Action::Read { sector, sectors }),
        4 => extent.prop_map(|(sector, sectors)| Action::Write { sector, sectors }),
        2 => (pairs, 1..4u64).prop_map(|(pairs, max_copy_pages)| Action::Reconfigure { pairs, max_copy_pages }),
        1 => Just(Action::Destage),
        1 => any::<bool>().prop_map(|unmap| Action::Flush { unmap }),
        2 => prop_oneof![
            Just(Mode::Normal),
            Just(Mode::Guard),
            Just(Mode::Bypass),
            Just(Mode::Detaching),
        ]
        .prop_map(Action::Mode),
        1 => Just(Action::Crash),
    ]
}

fn position() -> impl Strategy<Value = BoptPosition> {
    prop_oneof![
        Just(BoptPosition::Start),
        Just(BoptPosition::Middle),
        Just(BoptPosition::End),
        Just(BoptPosition::AtFsSector(12)),
        Just(BoptPosition::Separate { start_sector: 5 }),
    ]
}

/// The device(s): one array of sector values, plus a second when the BOPT is separate.
struct Disk {
    main: Vec<u64>,
    aux: Vec<u64>,
    separate: bool,
}

impl Disk {
    fn area(&mut self, region: Region) -> &mut Vec<u64> {
        if region == Region::Bopt && self.separate {
            &mut self.aux
        } else {
            &mut self.main
        }
    }
    fn read(&mut self, region: Region, e: Extent) -> Vec<u64> {
        let a = self.area(region);
        a[e.start_sector as usize..e.end_sector() as usize].to_vec()
    }
    fn write(&mut self, region: Region, e: Extent, data: &[u64]) {
        let a = self.area(region);
        a[e.start_sector as usize..e.end_sector() as usize].copy_from_slice(data);
    }
}

struct World {
    ind: Indirector,
    disk: Disk,
    plain: Vec<u64>,
    version: u64,
    out: Vec<PhysIo>,
}

impl World {
    fn new(position: BoptPosition) -> World {
        let geo = Geometry::new(&BoptConfig {
            page_sectors: PAGE_SECTORS,
            data_sectors: DATA_SECTORS,
            bopt_pages: BOPT_PAGES,
            segment_pages: 4,
            write_buffer_fraction: 0.5,
            position,
            meta_sectors: 3,
        })
        .unwrap();
        assert_eq!(u64::from(geo.read_cache_pages), READ_CACHE_PAGES);
        let bopt_end = geo.bopt_sector(BOPT_PAGES, 0) as usize;
        let main_len = if geo.bopt_separate {
            DATA_SECTORS as usize
        } else {
            DATA_SECTORS as usize + bopt_end
        };
        // Initial contents: sector s of the data area holds s (version 0).
        let mut disk = Disk {
            main: vec![u64::MAX; main_len],
            aux: vec![u64::MAX; bopt_end],
            separate: geo.bopt_separate,
        };
        for s in 0..DATA_SECTORS {
            disk.main[geo.data_sector(s) as usize] = s;
        }
        World {
            ind: Indirector::new(geo).unwrap(),
            disk,
            plain: (0..DATA_SECTORS).collect(),
            version: 0,
            out: Vec::new(),
        }
    }

    fn io(&mut self, op: Op, sector: u64, sectors: u64) {
        self.ind
            .indirect(
                IoRequest {
                    op,
                    sector,
                    sectors,
                },
                &mut self.out,
            )
            .unwrap();
        // Every sector of the buffer is covered exactly once.
        let mut covered = vec![0u8; sectors as usize];
        for io in &self.out {
            assert_eq!(io.op, op);
            for k in 0..io.sectors {
                covered[(io.buf_offset_sectors + k) as usize] += 1;
            }
        }
        assert!(
            covered.iter().all(|&c| c == 1),
            "coverage {covered:?} of {:?}",
            self.out
        );
        match op {
            Op::Write => self.write(sector, sectors),
            Op::Read => self.read(sector, sectors),
        }
    }

    fn write(&mut self, sector: u64, sectors: u64) {
        self.version += 1;
        let value = |i: u64| (self.version << 32) | (sector + i);
        let buf: Vec<u64> = (0..sectors).map(value).collect();
        for io in self.out.clone() {
            let off = io.buf_offset_sectors as usize;
            let e = Extent::new(io.device_sector, io.sectors);
            self.disk
                .write(io.region, e, &buf[off..off + io.sectors as usize]);
        }
        self.plain[sector as usize..(sector + sectors) as usize].copy_from_slice(&buf);
    }

    fn read(&mut self, sector: u64, sectors: u64) {
        let mut buf = vec![u64::MAX; sectors as usize];
        for io in self.out.clone() {
            let off = io.buf_offset_sectors as usize;
            let data = self
                .disk
                .read(io.region, Extent::new(io.device_sector, io.sectors));
            buf[off..off + io.sectors as usize].copy_from_slice(&data);
        }
        assert_eq!(
            buf,
            &self.plain[sector as usize..(sector + sectors) as usize],
            "read {sector}+{sectors}"
        );
    }

    /// Performs a step's copy on the device model, then reports it to the indirector.
    fn execute(&mut self, steps: &[Step]) {
        let geo = *self.ind.geometry();
        for step in steps {
            if let Step::Copy(op) = step {
                let mut data = Vec::new();
                for e in op.src.device_extents(&geo) {
                    data.extend(self.disk.read(op.src.region, e));
                }
                let mut at = 0;
                for e in op.dst.device_extents(&geo) {
                    let n = e.sectors as usize;
                    self.disk.write(op.dst.region, e, &data[at..at + n]);
                    at += n;
                }
                assert_eq!(at, data.len());
            }
            self.ind.apply(step).unwrap();
            self.ind.check();
        }
    }

    fn reconfigure(&mut self, pairs: &[(u64, u64)], max_copy_pages: u64) {
        let mut plan = Plan::new(PAGE_SECTORS, "random");
        let (mut pages, mut slots) = (Vec::new(), Vec::new());
        for &(p, s) in pairs {
            if !pages.contains(&p) && !slots.contains(&s) {
                pages.push(p);
                slots.push(s);
                plan.push(p, 1, s);
            }
        }
        let r = diff(&plan, &self.ind, DiffOptions { max_copy_pages }).unwrap();
        self.execute(&r.steps);
        // The read cache now holds exactly the plan.
        let rc: Vec<(u64, u32)> = self
            .ind
            .map()
            .iter()
            .filter(|&(_, s, _)| u64::from(s) < READ_CACHE_PAGES)
            .map(|(p, s, _)| (p, s))
            .collect();
        let mut want: Vec<(u64, u32)> = plan.pairs().map(|(p, s)| (p, s as u32)).collect();
        want.sort_by_key(|&(_, s)| s);
        assert_eq!(rc, want);
    }

    fn crash(&mut self) {
        // Recovery rebuilds from the segment entries (here: the live map's), all dirty.
        let entries: Vec<SegmentEntry> = self
            .ind
            .map()
            .iter()
            .map(|(fs_page, slot, _)| SegmentEntry {
                fs_page,
                slot,
                valid: true,
            })
            .collect();
        let map = Map::rebuild_from_segments(FS_PAGES, BOPT_PAGES, entries).unwrap();
        assert!(map.iter().all(|(_, _, dirty)| dirty));
        self.ind = Indirector::with_map(*self.ind.geometry(), map);
    }

    fn act(&mut self, a: &Action) {
        match a {
            Action::Read { sector, sectors } => self.io(Op::Read, *sector, *sectors),
            Action::Write { sector, sectors } => self.io(Op::Write, *sector, *sectors),
            Action::Reconfigure {
                pairs,
                max_copy_pages,
            } => self.reconfigure(pairs, *max_copy_pages),
            Action::Destage => {
                let before = self.ind.write_buffer_free();
                let steps = self.ind.destage_oldest(2);
                self.execute(&steps);
                assert!(steps.is_empty() || self.ind.write_buffer_free() > before);
            }
            Action::Flush { unmap } => {
                let steps = self.ind.flush_back(*unmap, 3);
                self.execute(&steps);
                assert!(self.ind.map().iter().all(|(_, _, dirty)| !dirty));
                if *unmap {
                    assert!(self.ind.map().is_empty());
                }
                // After a flush the data area alone is a complete image (seed 001 §3.5.5).
                let geo = *self.ind.geometry();
                let home: Vec<u64> = (0..DATA_SECTORS)
                    .map(|s| self.disk.main[geo.data_sector(s) as usize])
                    .collect();
                assert_eq!(home, self.plain);
            }
            Action::Mode(mode) => self.ind.set_mode(*mode),
            Action::Crash => self.crash(),
        }
        self.ind.check();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn reads_back_what_a_plain_disk_would(
        position in position(),
        actions in prop::collection::vec(action(), 1..60),
    ) {
        let mut w = World::new(position);
        for a in &actions {
            w.act(a);
        }
        // Finally read everything back, page by page and as one request.
        for s in (0..DATA_SECTORS).step_by(PAGE_SECTORS as usize) {
            w.io(Op::Read, s, u64::from(PAGE_SECTORS));
        }
        w.io(Op::Read, 0, DATA_SECTORS);
    }
}
