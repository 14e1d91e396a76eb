//! The copy scheduler against naive execution on an in-memory disk: for any map (placed
//! pages, dirty pages, write-buffer pages) and any new plan, executing the diff and a full
//! destage through the scheduler's batches leaves exactly the map and the bytes that
//! executing the steps one by one in plan order does; and so does a crash in the middle
//! of a batch's writes followed by a fresh diff against what was applied (resume). Reads
//! ordered by any device model are the same reads, all before the batch's writes, so
//! they leave the same bytes too.

use proptest::prelude::*;
use reblock_layout::*;

const PAGE_SECTORS: u32 = 8;
const DATA_PAGES: u64 = 64;
const BOPT_PAGES: u32 = 16;

/// A disk of sectors, each holding a value that says which write put it there.
#[derive(Clone, Debug, PartialEq)]
struct Disk(Vec<u64>);

impl Disk {
    fn read(&self, e: Extent) -> Vec<u64> {
        self.0[e.start_sector as usize..e.end_sector() as usize].to_vec()
    }
    fn write(&mut self, at: u64, v: &[u64]) {
        self.0[at as usize..at as usize + v.len()].copy_from_slice(v);
    }
}

fn geometry(position: BoptPosition) -> Geometry {
    Geometry::new(&BoptConfig {
        page_sectors: PAGE_SECTORS,
        data_sectors: DATA_PAGES * u64::from(PAGE_SECTORS),
        bopt_pages: BOPT_PAGES,
        segment_pages: 4,
        write_buffer_fraction: 0.25,
        position,
        meta_sectors: 0,
    })
    .unwrap()
}

/// Executes one step the naive way: read the source whole, write the destination, apply.
fn naive_step(ind: &mut Indirector, disk: &mut Disk, step: &Step) {
    if let Step::Copy(op) = step {
        let g = *ind.geometry();
        let data: Vec<u64> = op
            .src
            .device_extents(&g)
            .into_iter()
            .flat_map(|e| disk.read(e))
            .collect();
        let mut at = 0;
        for e in op.dst.device_extents(&g) {
            disk.write(e.start_sector, &data[at..at + e.sectors as usize]);
            at += e.sectors as usize;
        }
    }
    ind.apply(step).unwrap();
}

/// Executes a batch's reads into a staging buffer, then `writes_done` of its writes (all
/// when `None`); applies the steps only when every write is done.
fn run_batch(ind: &mut Indirector, disk: &mut Disk, b: &CopyBatch, writes_done: Option<usize>) {
    let mut staged = std::collections::HashMap::new();
    for e in &b.reads {
        for (i, v) in disk.read(*e).into_iter().enumerate() {
            staged.insert(e.start_sector + i as u64, v);
        }
    }
    let mut out = std::collections::HashMap::new();
    for m in &b.moves {
        for i in 0..m.src.sectors {
            let v = staged[&(m.src.start_sector + i)];
            assert!(
                out.insert(m.dst_sector + i, v).is_none(),
                "sector written twice"
            );
        }
    }
    let n = writes_done.unwrap_or(b.writes.len());
    for e in &b.writes[..n] {
        let v: Vec<u64> = (e.start_sector..e.end_sector()).map(|s| out[&s]).collect();
        disk.write(e.start_sector, &v);
    }
    let written: u64 = b.writes.iter().map(|e| e.sectors).sum();
    assert_eq!(
        written as usize,
        out.len(),
        "writes cover exactly the moves"
    );
    if writes_done.is_none() {
        for s in &b.steps {
            ind.apply(s).unwrap();
        }
    }
}

/// What a reader sees: every FS page read through the indirector.
fn image(ind: &Indirector, disk: &Disk) -> Vec<u64> {
    let mut ind = ind.clone();
    let mut out = Vec::new();
    let mut v = Vec::new();
    for p in 0..DATA_PAGES {
        let req = IoRequest {
            op: Op::Read,
            sector: p * u64::from(PAGE_SECTORS),
            sectors: u64::from(PAGE_SECTORS),
        };
        out.clear();
        ind.indirect(req, &mut out).unwrap();
        for io in &out {
            v.extend(disk.read(Extent::new(io.device_sector, io.sectors)));
        }
    }
    v
}

/// A device model whose positioning times are arbitrary (a hash of the request and of
/// how many went before), to order reads any way at all.
struct Scrambled {
    seed: u64,
    issued: u64,
}

impl Positioning for Scrambled {
    fn positioning_ns(&self, req: &CopyRequest) -> u64 {
        let x = req.extent.start_sector ^ self.seed.rotate_left(17) ^ (self.issued << 32);
        x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20
    }
    fn issue(&mut self, _req: &CopyRequest) {
        self.issued += 1;
    }
}

/// `positioned` is `plain` with its reads, which come first, in another order.
fn same_requests_reads_first(mut positioned: Vec<CopyRequest>, plain: &[CopyRequest]) -> bool {
    let reads = plain.iter().filter(|r| !r.write).count();
    let reads_first = positioned[..reads].iter().all(|r| !r.write);
    let writes_same = positioned[reads..] == plain[reads..];
    positioned[..reads].sort_unstable_by_key(|r| r.extent.start_sector);
    reads_first && writes_same && positioned[..reads] == plain[..reads]
}

fn entries(ind: &Indirector) -> Vec<(u64, u32, bool)> {
    ind.map().iter().collect()
}

fn plan(pairs: &[(u64, u64)], g: &Geometry) -> Plan {
    let mut p = Plan::new(PAGE_SECTORS, "test");
    let mut used = std::collections::HashSet::new();
    let mut slots = std::collections::HashSet::new();
    for &(f, s) in pairs {
        let s = s % u64::from(g.read_cache_pages);
        if used.insert(f) && slots.insert(s) {
            p.push(f, 1, s);
        }
    }
    p
}

/// The diff's steps followed by a full destage computed on the map they leave.
fn reconfiguration(ind: &Indirector, plan: &Plan) -> Vec<Step> {
    let mut steps = diff(plan, ind, DiffOptions { max_copy_pages: 4 })
        .unwrap()
        .steps;
    let mut after = ind.clone();
    for s in &steps {
        after.apply(s).unwrap();
    }
    loop {
        let more = after.destage_oldest(4);
        if more.is_empty() {
            break;
        }
        for s in &more {
            after.apply(s).unwrap();
        }
        steps.extend(more);
    }
    steps
}

/// A populated indirector: `first` placed (naively), then foreground writes.
fn world(
    position: BoptPosition,
    first: &[(u64, u64)],
    writes: &[(u64, u64)],
) -> (Indirector, Disk) {
    let g = geometry(position);
    let total = g.data_sectors() + u64::from(BOPT_PAGES) * u64::from(PAGE_SECTORS);
    let mut disk = Disk((0..total).collect());
    let mut ind = Indirector::new(g).unwrap();
    for s in reconfiguration(&ind, &plan(first, &g)) {
        naive_step(&mut ind, &mut disk, &s);
    }
    for (i, &w) in writes.iter().enumerate() {
        foreground_write(&mut ind, &mut disk, 1_000_000 * (i as u64 + 1), w);
    }
    (ind, disk)
}

/// A foreground write of `n` sectors at `sector` (wrapped into the data area) routed by
/// `ind`, sector `k` of it holding `id + k`.
fn foreground_write(ind: &mut Indirector, disk: &mut Disk, id: u64, (sector, n): (u64, u64)) {
    let g = *ind.geometry();
    let req = IoRequest {
        op: Op::Write,
        sector: sector % (g.data_sectors() - n),
        sectors: n,
    };
    let mut out = Vec::new();
    ind.indirect(req, &mut out).unwrap();
    for io in &out {
        let v: Vec<u64> = (0..io.sectors)
            .map(|k| id + io.buf_offset_sectors + k)
            .collect();
        disk.write(io.device_sector, &v);
    }
}

/// The disk as the executor's device: a sector's value in its first 8 bytes (the BOPT
/// shares the disk, so both regions address it alike).
struct Device<'a>(&'a mut Disk);

impl CopyDevice for Device<'_> {
    type Error = ();
    fn read(&mut self, _: Region, e: Extent, buf: &mut [u8]) -> Result<(), ()> {
        for (v, s) in self.0.read(e).into_iter().zip(buf.chunks_mut(512)) {
            s.fill(0);
            s[..8].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }
    fn write(&mut self, _: Region, e: Extent, buf: &[u8]) -> Result<(), ()> {
        let v: Vec<u64> = buf
            .chunks(512)
            .map(|s| u64::from_le_bytes(s[..8].try_into().unwrap()))
            .collect();
        self.0.write(e.start_sector, &v);
        Ok(())
    }
}

fn position() -> impl Strategy<Value = BoptPosition> {
    prop_oneof![
        Just(BoptPosition::Start),
        Just(BoptPosition::Middle),
        Just(BoptPosition::End),
    ]
}

/// A world (where the BOPT lies, a first plan, foreground writes as (sector, sectors)),
/// a second plan, and the schedule's staging pages and read gap.
#[allow(clippy::type_complexity)]
fn world_and_plan() -> impl Strategy<
    Value = (
        BoptPosition,
        Vec<(u64, u64)>,
        Vec<(u64, u64)>,
        Vec<(u64, u64)>,
        u64,
        u64,
    ),
> {
    (
        position(),
        pairs(),
        pairs(),
        prop::collection::vec((0..DATA_PAGES * 8, 1..20u64), 0..12),
        1..12u64,
        0..40u64,
    )
}

fn pairs() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0..DATA_PAGES, 0..16u64), 0..14)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn scheduled_execution_leaves_what_naive_execution_does(
        (position, first, second, writes, staging, gap) in world_and_plan(),
        crash_at in 0..64usize,
        crash_writes in 0..4usize,
        model_seed in any::<u64>(),
        window in 1..20usize,
    ) {
        let (ind0, disk0) = world(position, &first, &writes);
        let g = *ind0.geometry();
        let next = plan(&second, &g);
        let steps = reconfiguration(&ind0, &next);
        let want_image = image(&ind0, &disk0);

        let (mut ind, mut disk) = (ind0.clone(), disk0.clone());
        for s in &steps {
            naive_step(&mut ind, &mut disk, s);
        }
        let (naive_map, naive_image) = (entries(&ind), image(&ind, &disk));
        prop_assert_eq!(&naive_image, &want_image);

        let opts = ScheduleOptions { staging_pages: staging, read_gap_sectors: gap, max_io_sectors: 16 };
        let sched = CopySchedule::new(&steps, &ind0, opts);
        prop_assert_eq!(sched.steps().count(), steps.len());
        let mut model = Scrambled { seed: model_seed, issued: 0 };
        for b in &sched.batches {
            let positioned = b.requests_positioned(opts.max_io_sectors, &mut model, window);
            prop_assert!(same_requests_reads_first(positioned, &b.requests(opts.max_io_sectors)));
        }
        let (mut ind, mut disk) = (ind0.clone(), disk0.clone());
        for b in &sched.batches {
            run_batch(&mut ind, &mut disk, b, None);
            prop_assert_eq!(image(&ind, &disk), want_image.clone());
        }
        prop_assert_eq!(entries(&ind), naive_map.clone());

        // Crash: batches before `crash_at` done, the next one cut after some writes.
        let (mut ind, mut disk) = (ind0.clone(), disk0.clone());
        let k = crash_at.min(sched.batches.len());
        for b in &sched.batches[..k] {
            run_batch(&mut ind, &mut disk, b, None);
        }
        if let Some(b) = sched.batches.get(k) {
            run_batch(&mut ind, &mut disk, b, Some(crash_writes.min(b.writes.len())));
        }
        prop_assert_eq!(image(&ind, &disk), want_image.clone());
        let rest = reconfiguration(&ind, &next);
        for b in &CopySchedule::new(&rest, &ind, opts).batches {
            run_batch(&mut ind, &mut disk, b, None);
        }
        prop_assert_eq!(entries(&ind), naive_map);
        prop_assert_eq!(image(&ind, &disk), want_image);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// What lets the online copier validate a batch's steps on the live map, without a
    /// scratch copy to apply them to in turn: with foreground writes before every batch
    /// (some steps turn stale), the steps that validate on the map before their batch
    /// still apply one after the other, and executing just them through the batch
    /// executor changes no page's bytes.
    #[test]
    fn a_batch_validates_on_the_map_before_it_under_foreground_writes(
        (position, first, second, writes, staging, gap) in world_and_plan(),
    ) {
        let (mut ind, mut disk) = world(position, &first, &[]);
        let g = *ind.geometry();
        let steps = reconfiguration(&ind, &plan(&second, &g));
        let opts = ScheduleOptions { staging_pages: staging, read_gap_sectors: gap, max_io_sectors: 16 };
        let sched = CopySchedule::new(&steps, &ind, opts);
        let mut stale = 0;
        for (k, b) in sched.batches.iter().enumerate() {
            if let Some(&w) = writes.get(k) {
                foreground_write(&mut ind, &mut disk, 1_000_000 * (k as u64 + 1), w);
            }
            let want = image(&ind, &disk);
            let valid: Vec<Step> = b.steps.iter().copied().filter(|s| ind.validate(s).is_ok()).collect();
            stale += b.steps.len() - valid.len();
            let io = BatchIo::of_steps(&valid, &g, gap);
            let staged = read_sources(&io, &mut Device(&mut disk)).unwrap();
            write_destinations(&io, &staged, &mut Device(&mut disk)).unwrap();
            for s in &valid {
                prop_assert!(ind.apply(s).is_ok(), "{:?} validated before its batch", s);
            }
            prop_assert_eq!(image(&ind, &disk), want);
        }
        prop_assert!(!writes.is_empty() || stale == 0, "no write, yet {} steps stale", stale);
    }
}

#[test]
fn a_relocation_chain_takes_one_batch_per_link_and_reads_are_sorted() {
    let (ind, _) = world(
        BoptPosition::End,
        &[(10, 4), (11, 5), (12, 6), (30, 0)],
        &[],
    );
    let g = *ind.geometry();
    // 10, 11, 12 each move one slot up (a chain of three), 40 and 20 come in.
    let next = plan(&[(10, 5), (11, 6), (12, 7), (40, 1), (20, 4), (30, 0)], &g);
    let steps = diff(&next, &ind, DiffOptions { max_copy_pages: 1 })
        .unwrap()
        .steps;
    let sched = CopySchedule::new(&steps, &ind, ScheduleOptions::default());
    // 12 -> 7 with 40 -> 1; then 11 -> 6; then 10 -> 5; then 20 -> 4.
    assert_eq!(sched.batches.len(), 4);
    assert_eq!(sched.batches[0].steps.len(), 2);
    for b in &sched.batches {
        assert!(b
            .reads
            .windows(2)
            .all(|w| w[0].end_sector() < w[1].start_sector));
        assert!(b
            .writes
            .windows(2)
            .all(|w| w[0].end_sector() <= w[1].start_sector));
    }
}
