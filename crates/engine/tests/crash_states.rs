//! CrashMonkey-style crash consistency without a real crash: a recording store logs every
//! write and sync the engine issues; for every crash point (just before each sync, and at
//! the end), the writes not yet covered by a sync of their device are "in flight", and we
//! build the device for many subsets of them (all subsets for small epochs; random ones,
//! prefixes, reversed order and torn writes otherwise), recover, and check that
//!
//! * the rebuilt map is consistent (no FS page mapped twice, both directions agree),
//! * every sector acknowledged before a FLUSH that returned before the crash point reads
//!   back that write's data or the data of a later write to the sector (never older),
//!
//! Every sector written by the workload is stamped with (write id, sector), so a read-back
//! names the write it came from. The crash-state count is printed; REBLOCK_CRASH_SOAK=1
//! runs more workloads.

mod common;

use reblock_engine::format::LayoutRequest;
use reblock_engine::{Engine, EngineOptions, Layout, Logged, MemStore};
use std::collections::HashMap;
use std::sync::Arc;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const SECTOR: usize = 512;

fn stamp(write_id: u64, sector: u64) -> [u8; SECTOR] {
    let mut s = [0u8; SECTOR];
    s[0..8].copy_from_slice(&write_id.to_le_bytes());
    s[8..16].copy_from_slice(&sector.to_le_bytes());
    for (i, b) in s[16..].iter_mut().enumerate() {
        *b = (write_id as u8).wrapping_mul(31).wrapping_add(i as u8) ^ (sector as u8);
    }
    s
}

fn read_stamp(s: &[u8], sector: u64) -> Result<u64, String> {
    let id = u64::from_le_bytes(s[0..8].try_into().unwrap());
    if s != stamp(id, sector) {
        return Err(format!(
            "sector {sector}: bytes are not a whole stamp (claims write {id})"
        ));
    }
    Ok(id)
}

/// The workload's record: per sector, the ids written in order; per flush, the log
/// length when it returned and the newest id per sector when it was called.
struct Model {
    history: Vec<Vec<u64>>,
    flushes: Vec<(usize, Vec<u64>)>,
}

fn layout(separate: bool) -> Layout {
    Layout::plan(&LayoutRequest {
        data_bytes: 64 * 4096,
        bopt_bytes: 4 * (2 * 4096 + 4 * 4096)
            + 3 * 4096
            + 34 * reblock_engine::format::FREEMAP_CHUNK_BYTES, // free-space area: 1 map chunk + 16 replica blocks, 2 copies
        page_bytes: 4096,
        segment_pages: 4,
        write_buffer_fraction: 0.5,
        separate,
    })
    .unwrap()
}

/// Formats a store whose data area holds write id 0 everywhere.
fn fresh_store(l: &Layout) -> MemStore {
    common::stamped_store(l, |s| stamp(0, s).to_vec())
}

fn run_workload(store: Arc<MemStore>, l: &Layout, seed: u64, ops: usize) -> Model {
    let opts = EngineOptions {
        max_copy_pages: 4,
        ..EngineOptions::default()
    };
    let (engine, _) = Engine::open(store.clone(), opts).unwrap();
    let sectors = l.data_bytes / SECTOR as u64;
    let mut model = Model {
        history: vec![vec![0]; sectors as usize],
        flushes: Vec::new(),
    };
    let mut rng = Rng(seed | 1);
    for id in 1..=ops as u64 {
        if rng.below(6) == 0 {
            let snapshot = model.history.iter().map(|h| *h.last().unwrap()).collect();
            engine.flush().unwrap();
            model.flushes.push((store.log_len(), snapshot));
        }
        // Mostly whole pages (absorbed), some partial or unaligned (home or mapped slot).
        let (first, n) = if rng.below(3) > 0 {
            (rng.below(sectors / 8) * 8, 8 * (1 + rng.below(2)))
        } else {
            (rng.below(sectors - 12), 1 + rng.below(11))
        };
        let n = n.min(sectors - first);
        let buf: Vec<u8> = (first..first + n).flat_map(|s| stamp(id, s)).collect();
        engine.write_sectors(&buf, first).unwrap();
        for s in first..first + n {
            model.history[s as usize].push(id);
        }
        engine.background_tick(true).unwrap();
        if rng.below(40) == 0 {
            let plan = random_plan(&mut rng, l);
            engine.reconfigure(plan).unwrap();
        }
    }
    let snapshot = model.history.iter().map(|h| *h.last().unwrap()).collect();
    engine.flush().unwrap();
    model.flushes.push((store.log_len(), snapshot));
    // Let the background finish whatever reconfiguration is queued (more crash points).
    while engine.background_tick(true).unwrap() > 0 {}
    model
}

fn random_plan(rng: &mut Rng, l: &Layout) -> reblock_layout::Plan {
    let mut plan = reblock_layout::Plan::new(8, "test");
    let fs_pages = l.data_bytes / 4096;
    let mut used = std::collections::HashSet::new();
    for slot in 0..u64::from(l.read_cache_pages) {
        let p = rng.below(fs_pages);
        if rng.below(3) > 0 && used.insert(p) {
            plan.push(p, 1, slot);
        }
    }
    plan
}

/// Devices as they would be if the ops `< cut` happened, of which the `inflight` ones
/// (indices into the log) are included only when `keep` says so; `torn` keeps the first
/// half of that write only.
fn crash_image(
    base: &(Vec<u8>, Vec<u8>),
    log: &[Logged],
    durable: &[usize],
    extra: &[(usize, bool)],
) -> (Vec<u8>, Vec<u8>) {
    let (mut data, mut bopt) = base.clone();
    let mut apply = |i: usize, torn: bool| {
        if let Logged::Write { dev, offset, bytes } = &log[i] {
            // A torn write keeps its first half, whole sectors (sector writes are atomic).
            let n = if torn {
                bytes.len() / SECTOR / 2 * SECTOR
            } else {
                bytes.len()
            };
            let v = if *dev == reblock_engine::Dev::Data {
                &mut data
            } else {
                &mut bopt
            };
            v[*offset as usize..*offset as usize + n].copy_from_slice(&bytes[..n]);
        }
    };
    for &i in durable {
        apply(i, false);
    }
    for &(i, torn) in extra {
        apply(i, torn);
    }
    (data, bopt)
}

/// Recovers a crash image and checks the map and every guaranteed sector.
fn verify(
    image: (Vec<u8>, Vec<u8>),
    separate: bool,
    guaranteed: &[u64],
    model: &Model,
) -> Result<(), String> {
    let store = if separate {
        MemStore::new(image.0, Some(image.1))
    } else {
        MemStore::new(image.0, None)
    };
    let store = Arc::new(store);
    let (engine, report) =
        Engine::open(store.clone(), EngineOptions::default()).map_err(|e| e.to_string())?;
    let ind = engine.indirector();
    std::panic::catch_unwind(|| ind.check())
        .map_err(|_| "map inconsistent after recovery".to_string())?;
    // Clean only when the crash came before open made DIRTY durable (nothing written yet).
    if report.unclean && ind.map().iter().any(|(_, _, d)| !d) {
        return Err("recovery left an entry clean (seed 001 §3.5.1: all dirty)".into());
    }
    let mut all = vec![0u8; engine.layout().data_bytes as usize];
    engine.read_bytes(&mut all, 0).map_err(|e| e.to_string())?;
    for (s, chunk) in all.chunks(SECTOR).enumerate() {
        let id = read_stamp(chunk, s as u64)?;
        let hist = &model.history[s];
        let g = guaranteed[s];
        let from = hist
            .iter()
            .position(|&x| x == g)
            .expect("guaranteed id in history");
        if !hist[from..].contains(&id) {
            return Err(format!(
                "sector {s}: read write {id}, but write {g} was flushed (history {hist:?})"
            ));
        }
    }
    Ok(())
}

struct Counter {
    states: u64,
}

fn explore(seed: u64, ops: usize, separate: bool, subsets_per_point: usize, c: &mut Counter) {
    let l = layout(separate);
    let store = Arc::new(fresh_store(&l));
    let start = store.log_len();
    let store_base = store.devices();
    let model = run_workload(store.clone(), &l, seed, ops);
    let log = store.log()[start..].to_vec();
    let sectors = model.history.len();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let points: Vec<usize> = (0..log.len())
        .filter(|&i| matches!(log[i], Logged::Sync { .. }))
        .chain(std::iter::once(log.len()))
        .collect();
    for &cut in &points {
        // A write is durable at the cut when a later sync of its device precedes the cut.
        let mut durable = Vec::new();
        let mut inflight = Vec::new();
        let mut synced_after: HashMap<reblock_engine::Dev, bool> = HashMap::new();
        for i in (0..cut).rev() {
            match &log[i] {
                Logged::Sync { dev } => {
                    synced_after.insert(*dev, true);
                }
                Logged::Write { dev, .. } => {
                    if *synced_after.get(dev).unwrap_or(&false) {
                        durable.push(i);
                    } else {
                        inflight.push(i);
                    }
                }
            }
        }
        durable.reverse();
        inflight.reverse();
        let guaranteed = model
            .flushes
            .iter()
            .rev()
            .find(|(r, _)| r - start <= cut)
            .map(|(_, snap)| snap.clone())
            .unwrap_or_else(|| vec![0; sectors]);
        let at_cut = crash_image(&store_base, &log, &durable, &[]);
        for extra in variants(&inflight, subsets_per_point, &mut rng) {
            let image = crash_image(&at_cut, &log, &[], &extra);
            if let Err(e) = verify(image, separate, &guaranteed, &model) {
                for (i, op) in log
                    .iter()
                    .enumerate()
                    .take(cut + 3)
                    .skip(cut.saturating_sub(12))
                {
                    match op {
                        Logged::Write { dev, offset, bytes } => {
                            eprintln!("{i}: write {dev:?} {offset} +{}", bytes.len())
                        }
                        Logged::Sync { dev } => eprintln!("{i}: sync {dev:?}"),
                    }
                }
                panic!("seed {seed} separate {separate}: crash before op {cut} with in-flight {extra:?} of {inflight:?}: {e}");
            }
            c.states += 1;
        }
    }
}

/// Subsets of the in-flight writes: all of them for up to 6, else random subsets, every
/// prefix, the reversed order and each write torn in half.
fn variants(inflight: &[usize], random: usize, rng: &mut Rng) -> Vec<Vec<(usize, bool)>> {
    let n = inflight.len();
    let mut out = Vec::new();
    if n <= 6 {
        for mask in 0..(1u32 << n) {
            out.push(
                (0..n)
                    .filter(|b| mask >> b & 1 == 1)
                    .map(|b| (inflight[b], false))
                    .collect(),
            );
        }
    } else {
        for k in 0..=n {
            out.push(inflight[..k].iter().map(|&i| (i, false)).collect());
        }
        for _ in 0..random {
            out.push(
                inflight
                    .iter()
                    .filter(|_| rng.below(2) == 0)
                    .map(|&i| (i, false))
                    .collect(),
            );
        }
        out.push(inflight.iter().rev().map(|&i| (i, false)).collect());
    }
    for (k, &i) in inflight.iter().enumerate() {
        let mut v: Vec<(usize, bool)> = inflight[..k].iter().map(|&j| (j, false)).collect();
        v.push((i, true));
        out.push(v);
    }
    out
}

#[test]
fn every_crash_state_recovers_every_flushed_byte() {
    let soak = std::env::var("REBLOCK_CRASH_SOAK").is_ok_and(|v| v == "1");
    let (seeds, ops, subsets) = if soak { (40, 400, 32) } else { (2, 100, 6) };
    let mut c = Counter { states: 0 };
    for seed in 1..=seeds {
        explore(seed, ops, false, subsets, &mut c);
    }
    explore(99, ops, true, subsets, &mut c);
    println!("crash states checked: {}", c.states);
    assert!(c.states >= 1000, "only {} crash states", c.states);
}
