//! `reblock plan`: build the access graphs of a trace (seed 000 §4.2), run a layout
//! policy (seed 000 §4.3) and write the plan as plan.json (docs/layout.md §5).

use std::path::PathBuf;

use anyhow::{Context, Result};
use reblock_eval::plan_trace::PlanSummary;
use reblock_eval::{plan_trace, PlanOptions};

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

/// The flags as the library's options: one path for the CLI and the Python package.
fn options(args: &Args) -> PlanOptions {
    PlanOptions {
        policy: args.policy.clone(),
        bopt_size: args.bopt_size.clone(),
        write_buffer: args.write_buffer.clone(),
        page_size: args.page_size,
        min_edge_weight: args.min_edge_weight,
        k_window: args.k_window,
    }
}

pub fn run(args: Args) -> Result<()> {
    let opts = options(&args);
    // Bad flags are reported before the trace is read.
    opts.check()?;
    let mut reader = args.input.open()?;
    let mut requests = Vec::new();
    while let Some(r) = reader.next_request()? {
        requests.push(r);
    }
    report_bad_lines(&reader);
    let trace = args.input.trace.display().to_string();
    let plan = plan_trace(&requests, &trace, &opts)?;
    if let Some(out) = &args.out {
        let text = plan.file_text()?;
        std::fs::write(out, text + "\n").with_context(|| format!("writing {}", out.display()))?;
    }
    let summary = plan.summary(trace, args.out.as_ref().map(|p| p.display().to_string()));
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary);
    }
    Ok(())
}

fn print_summary(s: &PlanSummary) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_defaults_are_the_librarys() {
        let args: Args = super::super::parse_flags(&["plan", "t.trace"]);
        assert_eq!(options(&args), PlanOptions::default());
    }
}
