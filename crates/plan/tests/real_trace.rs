//! The first 5,000 requests of a real capture (shared traces, captured/dev_kernel: a
//! kernel-tree developer workload on ext4, recorded from tracefs with process context)
//! read through the trace crate, then graphed and planned by every policy.

use reblock_plan::{build_graphs, policies, PlanParams, TargetSpace};
use reblock_trace::{ReadOptions, Request, TraceReader};
use std::collections::HashSet;

fn requests() -> Vec<Request> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/dev_kernel_5k.trace.txt"
    );
    let mut reader = TraceReader::open(path, &ReadOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(r) = reader.next_request().unwrap() {
        out.push(r);
    }
    out
}

#[test]
fn master_graph_of_a_real_trace_covers_every_sector_once() {
    let trace = requests();
    assert_eq!(trace.len(), 5000);
    let g = build_graphs(trace.iter().copied());
    let processes: HashSet<(Option<u32>, u32)> = trace.iter().map(|r| (r.pid, r.command)).collect();
    assert_eq!(g.processes(), processes.len());
    let v = g.vertices();
    assert!(v
        .windows(2)
        .all(|w| w[0].extent.end_sector() <= w[1].extent.start_sector));
    // Each sector of a vertex was covered by exactly `hits` requests, so the sectors
    // requested add up to the sum of hits x size.
    let requested: u64 = trace.iter().map(|r| u64::from(r.sectors)).sum();
    let counted: u64 = v.iter().map(|v| v.hits * u64::from(v.extent.sectors)).sum();
    assert_eq!(counted, requested);
    // Every request's sectors fall in vertices.
    for r in &trace {
        assert!(g.vertex_at(r.sector).is_some() && g.vertex_at(r.end_sector() - 1).is_some());
    }
    assert!(g.edge_count() > 0);
}

#[test]
fn every_policy_plans_a_real_trace_within_the_cache() {
    let g = build_graphs(requests());
    let params = PlanParams {
        read_cache_pages: Some(2048),
        ..PlanParams::default()
    };
    for policy in policies() {
        let p = policy.plan(&g, &params);
        let sources: HashSet<u64> = p.page_pairs().map(|x| x.0).collect();
        let targets: HashSet<u64> = p.page_pairs().map(|x| x.1).collect();
        assert_eq!(sources.len() as u64, p.pages(), "{}", policy.name());
        assert_eq!(targets.len() as u64, p.pages(), "{}", policy.name());
        match (policy.name(), p.space) {
            ("vanilla", _) => assert_eq!(p.pages(), 0),
            // fs2 places nothing in the read cache: it names pages to replicate into
            // free space, as many as the read cache holds at most (on this excerpt the
            // related ranges all lie in the hot area: none).
            ("fs2", _) => {
                let replicas: u64 = p.replicas.iter().map(|r| r.pages).sum();
                assert_eq!(p.pages(), 0);
                assert!(replicas <= 2048, "fs2: {replicas}");
            }
            ("dlr-frag", TargetSpace::DataArea) => assert_eq!(sources, targets),
            (name, TargetSpace::ReadCache) => {
                assert!(p.pages() > 0 && p.pages() <= 2048, "{name}: {}", p.pages());
                assert!(targets.iter().all(|&t| t < 2048), "{name}");
            }
            (name, space) => panic!("{name} placed into {space:?}"),
        }
    }
}
