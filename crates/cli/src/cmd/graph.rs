//! `reblock graph`: BORG's master access graph of a trace (docs/layout.md "Access
//! graphs"), one per device: the per-process graphs merged with range splitting, exactly
//! as the `borg` policy builds it from its training requests (`evaluate` also splits a
//! trace by device first). The Python package's Spark job
//! (`python -m reblock.spark graph`) prints the same JSON on a cluster.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{bail, Result};
use reblock_plan::{GraphOptions, MasterGraph, ProcessGraphs};
use serde::Serialize;

use crate::input::{report_bad_lines, TraceInput};

/// `reblock graph trace.parquet --json`
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: TraceInput,
    /// Keep only the edges of at least this weight (every vertex is kept).
    #[arg(long, default_value_t = 1, value_name = "W")]
    pub min_weight: u64,
    /// Print `{"graphs": [{"device", "requests", "processes", "vertices": [{"sector",
    /// "sectors", "hits"}, ...], "edges": [{"from", "to", "weight"}, ...]}, ...]}` on stdout:
    /// one graph per device, vertices by sector, an edge's ends named by their vertices'
    /// first sectors, sorted by (from, to).
    #[arg(long)]
    pub json: bool,
}

/// One master vertex: a run of sectors no other vertex shares.
#[derive(Serialize)]
struct GraphVertex {
    sector: u64,
    sectors: u32,
    hits: u64,
}

/// One edge: `to` followed `from` `weight` times (summed over processes), or a chain edge
/// joining the pieces of a split request.
#[derive(Serialize)]
struct GraphEdge {
    from: u64,
    to: u64,
    weight: u64,
}

/// Every device's graph, as `--json` prints it.
#[derive(Serialize)]
struct GraphReports {
    graphs: Vec<GraphReport>,
}

/// One device's graph.
#[derive(Serialize)]
struct GraphReport {
    device: u32,
    requests: u64,
    processes: usize,
    vertices: Vec<GraphVertex>,
    edges: Vec<GraphEdge>,
}

pub fn run(args: Args) -> Result<()> {
    if args.min_weight == 0 {
        bail!("--min-weight 0: must be at least 1");
    }
    let (mut reader, mut progress) = args.input.open_with_progress("reading")?;
    // Streamed: memory grows with the distinct (process, extent) pairs and edges only.
    let mut by_device: BTreeMap<u32, ProcessGraphs> = BTreeMap::new();
    while let Some(r) = reader.next_request()? {
        by_device
            .entry(r.device)
            .or_insert_with(|| ProcessGraphs::new(GraphOptions::default()))
            .add(&r);
        progress.inc(1);
    }
    progress.finish();
    report_bad_lines(&reader);
    let graphs = by_device
        .into_iter()
        .map(|(device, mut processes)| {
            // Merged first, so that reading the edges copies no pending batch; not needed
            // afterwards, their edge counts become the master edge list in place.
            processes.merge_pending();
            let graph = MasterGraph::from_processes_into(processes, 1);
            report_of(device, &graph, args.min_weight)
        })
        .collect();
    let reports = GraphReports { graphs };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        serde_json::to_writer(&mut out, &reports)?;
        writeln!(out)?;
        return Ok(out.flush()?);
    }
    for g in &reports.graphs {
        writeln!(
            out,
            "device {}: {} requests of {} process(es), {} vertices, {} edges of weight >= {}",
            g.device,
            g.requests,
            g.processes,
            g.vertices.len(),
            g.edges.len(),
            args.min_weight
        )?;
        writeln!(out, "{:>14} {:>14} {:>10}", "from", "to", "weight")?;
        for e in &g.edges {
            writeln!(out, "{:>14} {:>14} {:>10}", e.from, e.to, e.weight)?;
        }
    }
    Ok(out.flush()?)
}

fn report_of(device: u32, graph: &MasterGraph, min_weight: u64) -> GraphReport {
    let start = |v: u32| graph.vertex(v).extent.start_sector;
    GraphReport {
        device,
        requests: graph.requests(),
        processes: graph.processes(),
        vertices: graph
            .vertices()
            .iter()
            .map(|v| GraphVertex {
                sector: v.extent.start_sector,
                sectors: v.extent.sectors,
                hits: v.hits,
            })
            .collect(),
        // Vertices are sorted by sector and edges by vertex id: already in (from, to) order.
        edges: graph
            .edges()
            .filter(|e| e.2 >= min_weight)
            .map(|(a, b, w)| GraphEdge {
                from: start(a),
                to: start(b),
                weight: w,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::{Op, Request};

    fn req(pid: u32, sector: u64, sectors: u32) -> Request {
        Request {
            ts_ns: 0,
            pid: Some(pid),
            command: reblock_trace::NO_COMMAND,
            device: 0,
            op: Op::Read,
            sector,
            sectors,
        }
    }

    #[test]
    fn the_report_names_edges_by_their_vertices_first_sectors() {
        // Process 1 reads 0..16 then 100..108 twice; process 2 reads 8..16: the first
        // extent splits at 8 into 0..8 -> 8..16 (chain) and 8..16 -> 100 carries the edge.
        let mut pg = ProcessGraphs::new(GraphOptions::default());
        for r in [
            req(1, 0, 16),
            req(1, 100, 8),
            req(1, 0, 16),
            req(1, 100, 8),
            req(2, 8, 8),
        ] {
            pg.add(&r);
        }
        pg.merge_pending();
        let report = report_of(0, &MasterGraph::from_processes(&pg), 1);
        let json = serde_json::to_string(&report).unwrap();
        assert_eq!(
            json,
            r#"{"device":0,"requests":5,"processes":2,"vertices":[{"sector":0,"sectors":8,"hits":2},{"sector":8,"sectors":8,"hits":3},{"sector":100,"sectors":8,"hits":2}],"edges":[{"from":0,"to":8,"weight":2},{"from":8,"to":100,"weight":2},{"from":100,"to":0,"weight":1}]}"#
        );
        let heavy = report_of(0, &MasterGraph::from_processes(&pg), 2);
        assert_eq!(heavy.edges.len(), 2);
    }
}
