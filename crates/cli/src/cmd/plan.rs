//! `reblock plan`: build the access graphs of a trace (seed 000 §4.2), run a layout
//! policy (seed 000 §4.3) and write the plan as plan.json (docs/layout.md §5).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use reblock_eval::planner;
use reblock_layout::{BoptConfig, BoptPosition, Geometry};
use reblock_plan::{PlanParams, TargetSpace};
use serde::Serialize;

use crate::input::{report_bad_lines, TraceInput};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: TraceInput,
    /// Layout policy: borg (BORG's greedy placement of correlated ranges), hot (most accessed pages
    /// first), dlr-seq (the self-optimizing file system's middle-out placement), dlr-frag (reorders the data area's own
    /// pages: --out writes that placement, which `reconfigure` cannot apply), vanilla
    /// (nothing moves).
    #[arg(long, default_value = "borg", value_name = "P")]
    pub policy: String,
    /// Size of the optimized region (BOPT): 64MiB, 1G, ... Its read cache, the BOPT minus
    /// the write buffer, bounds how many pages are placed.
    #[arg(long, default_value = "64MiB", value_name = "SIZE")]
    pub bopt_size: String,
    /// Share of the BOPT given to the write buffer (0..1; BORG's sensitivity study varies it).
    #[arg(long, default_value = "0.2", value_name = "F")]
    pub write_buffer: String,
    /// Page size in bytes (a multiple of 512): the unit plans place.
    #[arg(long, default_value_t = 4096, value_name = "BYTES")]
    pub page_size: u32,
    /// A vertex joins a group only through an edge of at least this weight (BORG's
    /// planner threshold); 0 places even isolated ranges. The default 2 leaves out
    /// transitions seen only once, which on real traces are mostly noise.
    #[arg(long, default_value_t = 2, value_name = "W")]
    pub min_edge_weight: u64,
    /// dlr-seq / dlr-frag: score a candidate against only the K placed vertices nearest
    /// each end of the group (the self-optimizing file system's k-window refinement); 0 = the whole group.
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub k_window: usize,
    /// Write the plan here (plan.json schema: docs/layout.md). For dlr-frag, the
    /// data-area placement itself (`"space": "data-area"`, the same ranges of FS page,
    /// pages and target page).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Summary<'a> {
    trace: String,
    policy: &'a str,
    read_cache_pages: u64,
    #[serde(flatten)]
    cost: &'a planner::PlanCost,
    out: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    if args.page_size == 0 || !args.page_size.is_multiple_of(512) {
        bail!(
            "--page-size: {} is not a positive multiple of 512",
            args.page_size
        );
    }
    let page_sectors = args.page_size / 512;
    let bopt_bytes = reblock_eval::config::parse_size_bytes("--bopt-size", &args.bopt_size)?;
    let wb = reblock_eval::config::parse_fraction("--write-buffer", &args.write_buffer)?;
    let (bopt_pages, seg) = reblock_eval::workload::bopt_pages(bopt_bytes, page_sectors);
    let mut reader = args.input.open()?;
    let mut requests = Vec::new();
    while let Some(r) = reader.next_request()? {
        requests.push(r);
    }
    report_bad_lines(&reader);
    let trace = args.input.trace.display().to_string();
    if requests.is_empty() {
        bail!("{trace}: the trace holds no requests");
    }
    let ps = u64::from(page_sectors);
    let data_sectors = requests
        .iter()
        .map(|r| r.end_sector())
        .max()
        .unwrap_or(0)
        .div_ceil(ps)
        * ps;
    let geo = Geometry::new(&BoptConfig {
        page_sectors,
        data_sectors,
        bopt_pages: bopt_pages as u32,
        segment_pages: seg as u32,
        write_buffer_fraction: wb,
        position: BoptPosition::End,
        meta_sectors: 0,
    })
    .context("BOPT geometry")?;
    let params = PlanParams {
        page_sectors: std::num::NonZeroU32::new(page_sectors).expect("checked above"),
        read_cache_pages: Some(u64::from(geo.read_cache_pages)),
        min_edge_weight: args.min_edge_weight,
        k_window: args.k_window,
    };
    let (placement, cost) = planner::plan(&args.policy, &requests, &params)?;
    if let Some(out) = &args.out {
        let text = if placement.space == TargetSpace::ReadCache {
            let plan = reblock_eval::layout::to_layout_plan(&placement);
            plan.validate(&geo)
                .context("the planned layout does not fit")?;
            plan.to_json()
        } else {
            serde_json::to_string_pretty(&placement)?
        };
        std::fs::write(out, text + "\n").with_context(|| format!("writing {}", out.display()))?;
    }
    let summary = Summary {
        trace,
        policy: &args.policy,
        read_cache_pages: u64::from(geo.read_cache_pages),
        cost: &cost,
        out: args.out.as_ref().map(|p| p.display().to_string()),
    };
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary);
    }
    Ok(())
}

fn print_summary(s: &Summary) {
    let c = s.cost;
    println!("trace            {}", s.trace);
    println!("policy           {}", s.policy);
    println!(
        "graph            {} requests -> {} vertices, {} edges ({:.1} MiB)",
        c.training_requests,
        c.graph_vertices,
        c.graph_edges,
        c.graph_bytes as f64 / 1048576.0
    );
    println!(
        "placed           {} pages of a {}-page read cache, in {} runs",
        c.pages_placed, s.read_cache_pages, c.ranges
    );
    println!(
        "planning         {:.3} s CPU ({:.3} s wall), peak RSS {:.1} MiB",
        c.cpu_s,
        c.wall_s,
        c.peak_rss_bytes as f64 / 1048576.0
    );
    if let Some(out) = &s.out {
        println!("plan written to  {out}");
    }
}
