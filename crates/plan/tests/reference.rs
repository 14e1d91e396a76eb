//! The fast master-graph build (sorted sweep) against a direct, slow transcription of the
//! seeds' definitions on random small traces; and policy invariants on the same graphs.

use reblock_plan::{
    build_graphs, policies, GraphOptions, MasterGraph, PlanParams, ProcessGraphs, TargetSpace,
};
use reblock_trace::{Op, Request};
use std::collections::{BTreeMap, BTreeSet};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn random_trace(seed: u64, len: usize) -> Vec<Request> {
    let mut rng = Lcg(seed);
    // A small pool of extents per run, so that extents repeat and edges gain weight.
    let pool: Vec<(u64, u32)> = (0..12)
        .map(|_| (rng.next(64), 1 + rng.next(16) as u32))
        .collect();
    (0..len)
        .map(|_| {
            let (sector, sectors) = pool[rng.next(pool.len() as u64) as usize];
            Request {
                ts_ns: 0,
                pid: Some(rng.next(3) as u32),
                command: 0,
                device: 0,
                sector,
                sectors,
                op: Op::Read,
            }
        })
        .collect()
}

type Ext = (u64, u64); // [start, end)
/// Vertices with their hits, and edges keyed by the start sectors of their ends.
type Master = (Vec<(Ext, u64)>, BTreeMap<(u64, u64), u64>);

/// Seed definitions, no cleverness: process edges by scanning each process's stream,
/// vertices sector by sector, edges moved to the pieces with the same start / end LBN and
/// chains of max(in, out) between consecutive pieces.
fn reference(trace: &[Request]) -> Master {
    let mut streams: BTreeMap<u32, Vec<Ext>> = BTreeMap::new();
    for r in trace {
        let e = (r.sector, r.end_sector());
        streams.entry(r.pid.unwrap()).or_default().push(e);
    }
    let bounds: BTreeSet<u64> = trace
        .iter()
        .flat_map(|r| [r.sector, r.end_sector()])
        .collect();
    let covered = |s: u64| trace.iter().any(|r| r.sector <= s && s < r.end_sector());
    let bounds: Vec<u64> = bounds.into_iter().collect();
    let mut vertices = Vec::new();
    for w in bounds.windows(2) {
        if covered(w[0]) {
            let hits = trace
                .iter()
                .filter(|r| r.sector <= w[0] && w[0] < r.end_sector())
                .count() as u64;
            vertices.push(((w[0], w[1]), hits));
        }
    }
    let holding = |s: u64| {
        vertices
            .iter()
            .find(|v| v.0 .0 <= s && s < v.0 .1)
            .unwrap()
            .0
             .0
    };
    let mut edges: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for stream in streams.values() {
        let mut pedges: BTreeMap<(Ext, Ext), u64> = BTreeMap::new();
        for w in stream.windows(2) {
            *pedges.entry((w[0], w[1])).or_default() += 1;
        }
        for (&(a, b), &w) in &pedges {
            *edges.entry((holding(a.1 - 1), holding(b.0))).or_default() += w;
        }
        let distinct: BTreeSet<Ext> = stream.iter().copied().collect();
        for x in distinct {
            let w_in: u64 = pedges.iter().filter(|e| e.0 .1 == x).map(|e| e.1).sum();
            let w_out: u64 = pedges.iter().filter(|e| e.0 .0 == x).map(|e| e.1).sum();
            let pieces: Vec<u64> = vertices
                .iter()
                .filter(|v| x.0 <= v.0 .0 && v.0 .1 <= x.1)
                .map(|v| v.0 .0)
                .collect();
            for p in pieces.windows(2) {
                if w_in.max(w_out) > 0 {
                    *edges.entry((p[0], p[1])).or_default() += w_in.max(w_out);
                }
            }
        }
    }
    (vertices, edges)
}

fn actual(g: &MasterGraph) -> Master {
    let start = |v: u32| g.vertex(v).extent.start_sector;
    let vertices = g
        .vertices()
        .iter()
        .map(|v| ((v.extent.start_sector, v.extent.end_sector()), v.hits))
        .collect();
    let edges = g
        .edges()
        .map(|(a, b, w)| ((start(a), start(b)), w))
        .collect();
    (vertices, edges)
}

#[test]
fn sweep_merge_matches_the_seed_definition() {
    for seed in 0..60 {
        let trace = random_trace(seed, 150);
        let g = build_graphs(trace.iter().copied());
        let want = reference(&trace);
        assert_eq!(actual(&g), want, "seed {seed}");
        // Built from process graphs that are kept (a learning state's), the same graph.
        let pg = ProcessGraphs::build(trace.iter().copied(), GraphOptions::default());
        assert_eq!(
            actual(&MasterGraph::from_processes(&pg)),
            want,
            "seed {seed}"
        );
    }
}

#[test]
fn every_policy_places_each_page_once_and_within_capacity() {
    for seed in 0..30 {
        let g = build_graphs(random_trace(seed, 150));
        let touched: BTreeSet<u64> = g
            .vertices()
            .iter()
            .flat_map(|v| v.extent.start_sector / 4..v.extent.end_sector().div_ceil(4))
            .collect();
        for cache in [None, Some(5)] {
            let params = PlanParams {
                page_sectors: 4.try_into().unwrap(),
                read_cache_pages: cache,
                min_edge_weight: seed % 3,
                k_window: (seed % 4) as usize,
            };
            for policy in policies() {
                let p = policy.plan(&g, &params);
                let what = format!("seed {seed} cache {cache:?} {}", policy.name());
                let sources: BTreeSet<u64> = p.page_pairs().map(|x| x.0).collect();
                let targets: BTreeSet<u64> = p.page_pairs().map(|x| x.1).collect();
                assert_eq!(sources.len() as u64, p.pages(), "{what}: page twice");
                assert_eq!(targets.len() as u64, p.pages(), "{what}: target twice");
                assert!(sources.is_subset(&touched), "{what}: untouched page");
                match p.space {
                    TargetSpace::DataArea => assert_eq!(sources, targets, "{what}"),
                    TargetSpace::ReadCache => {
                        let cap = cache.unwrap_or(u64::MAX);
                        assert!(targets.iter().all(|&t| t < cap), "{what}: past the cache");
                    }
                }
            }
        }
    }
}
