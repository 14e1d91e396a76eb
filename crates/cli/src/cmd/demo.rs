//! `reblock demo`: analyze the real trace bundled in the binary (a kernel developer's
//! session on ext4, data/README.md) and write its report: the quickest look at reblock.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use anyhow::Result;
use reblock_analyze::units::{format_bytes, format_ns};
use reblock_analyze::{sidecar, Analysis, Config};
use reblock_trace::{FormatChoice, ReadOptions, TraceReader};

/// The bundled trace, `zstd -19` compressed, and its capture notes.
const TRACE_ZST: &[u8] = include_bytes!("../../../../data/dev_kernel.trace.txt.zst");
const META_JSON: &str = include_str!("../../../../data/dev_kernel.meta.json");
const TRACE_NAME: &str = "dev_kernel.trace.txt.zst";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory the HTML report (index.html and SVG plots) is written to.
    #[arg(long, default_value = "reblock-report", value_name = "DIR")]
    pub out: PathBuf,
    /// Print the analysis as one JSON object on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let meta =
        sidecar::parse(META_JSON, Path::new("dev_kernel.meta.json")).map_err(anyhow::Error::msg)?;
    let opts = ReadOptions {
        format: FormatChoice::Named("native".to_string()),
        skip_bad: 0,
    };
    let mut reader = TraceReader::from_reader(Box::new(Cursor::new(TRACE_ZST)), TRACE_NAME, &opts)?;
    let config = Config {
        device_bytes: meta.device_bytes,
        // One working-set interval per recorded "day", as seed 000 Figure 1 compares days.
        interval: super::analyze::interval("days", Some(&meta))?,
        ..Config::default()
    };
    let mut progress =
        crate::progress::Progress::new("analyzing the bundled trace", "requests", meta.requests);
    let analysis = super::analyze::analyze(&mut reader, config, &mut progress)?;
    progress.finish();
    let index = super::analyze::write_report(&args.out, &analysis, Path::new(TRACE_NAME))?;
    if args.json {
        println!("{}", serde_json::to_string(&analysis)?);
    } else {
        println!("{}", summary(&analysis, &index));
    }
    Ok(())
}

fn pct(v: Option<f64>) -> String {
    v.map_or("an unknown share".to_string(), |v| {
        format!("{:.0}%", v * 100.0)
    })
}

/// The attributes that drove the advice, in words with their numbers.
fn drivers(a: &Analysis) -> String {
    let phrase = |name: &str| -> String {
        let at = a.advice.attributes.iter().find(|x| x.name == name);
        let v = at.and_then(|x| x.value).unwrap_or(0.0);
        let high = at.is_some_and(|x| x.level == reblock_analyze::Level::High);
        let hl = if high { "high" } else { "low" };
        match name {
            "temporal_locality" => format!(
                "working sets are {} stable across days ({:.0}% overlap)",
                if high { "" } else { "not" },
                v * 100.0
            )
            .replace("are  ", "are "),
            "bursts" => format!(
                "arrivals are {} bursty (dispersion {v:.0})",
                if high { "" } else { "not" }
            )
            .replace("are  ", "are "),
            "sequentiality" => format!("sequentiality is {hl} ({:.0}%)", v * 100.0),
            "partial_determinism" => format!("partial determinism is {hl} ({:.0}%)", v * 100.0),
            "non_uniform_frequency" => format!(
                "access is {} skewed (top 20% of pages take {:.0}%)",
                if high { "" } else { "not" },
                v * 100.0
            )
            .replace("is  ", "is "),
            _ => format!("reads are {:.0}% of requests", v * 100.0),
        }
    };
    let matched: Vec<String> = a.advice.matched.iter().map(|n| phrase(n)).collect();
    let against: Vec<String> = a.advice.against.iter().map(|n| phrase(n)).collect();
    match (matched.is_empty(), against.is_empty()) {
        (true, _) => "no layout strategy is clearly favoured".to_string(),
        (false, true) => matched.join(", "),
        (false, false) => format!(
            "{}, which outweighs that {}",
            matched.join(", "),
            against.join(", ")
        ),
    }
}

/// One plain-English paragraph: the workload, its key numbers, the advice and why, and
/// where the report is.
pub fn summary(a: &Analysis, index: &Path) -> String {
    let touched = match (a.device_touched_fraction, a.device_bytes) {
        (Some(f), Some(d)) => format!(" ({:.1}% of the {} device)", f * 100.0, format_bytes(d)),
        _ => String::new(),
    };
    let locality = reblock_analyze::temporal_locality(&a.intervals).map_or(String::new(), |tl| {
        format!(
            " Across its {} days, each later day's working set was on average {:.0}% made of pages day 1 had already used.",
            a.intervals.len(),
            tl * 100.0
        )
    });
    let why = drivers(a);
    format!(
        "The bundled trace is a real kernel developer's session on ext4 (git, grep, make over the Linux source): \
{req} requests in {dur}, {reads} of them reads, touching {uniq} of distinct data{touched}. \
Access is skewed: the top 20% of pages take {top20} of all page accesses. \
{seq} of consecutive requests of a process continue where the last one ended, and {pd} of the non-sequential ones repeat an earlier jump (partial determinism).{locality} \
Arrivals are bursty (index of dispersion {idc} over 1 s windows, {idle} of idle gaps of 100 ms or more). \
Advice: {strategy}, because {why} (the dissertation's table of layout strategies by workload attributes; the report lists every attribute). \
The report with the rank-frequency plot, heat map and working-set chart is at {index}.",
        req = a.requests,
        dur = format_ns(a.timing.duration_ns),
        reads = pct(a.read_fraction),
        uniq = format_bytes(a.unique_bytes),
        top20 = pct(a.top20_access_share),
        seq = pct(a.sequential_fraction),
        pd = pct(a.partial_determinism),
        idc = a.timing.bursts.index_of_dispersion.map_or("unknown".to_string(), |v| format!("{v:.0}")),
        idle = format_ns(a.timing.idle.total_ns),
        strategy = a.advice.summary,
        index = index.display(),
    )
}
