//! The table of seed 003 improvements on the real traces: for each trace, the 14-SSD
//! array with `parallel` and the 100-HDD array with `parallel-hdd`, alphas 0..1, support
//! 1, 5, 10, next to the seed's averages (+53% on 14 SSDs, +170% on 100 HDDs).
//!
//! cargo run --release -p reblock-parallel --example seed003_table -- OUT_DIR TRACE...
//!
//! Writes OUT_DIR/<trace>.<array>.json and OUT_DIR/<trace>.<array>/parallel.html, and prints the tables.

use std::path::Path;

use reblock_parallel::evaluate::{evaluate_array, ArrayEvalConfig, ArraySpec, Policy};
use reblock_parallel::report::{text_summary, write_html};
use reblock_trace::{ReadOptions, TraceReader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (out_dir, traces) = args.split_first().ok_or("usage: OUT_DIR TRACE...")?;
    std::fs::create_dir_all(out_dir)?;
    let arrays = [
        ("ssd14", "ssd:14", Policy::Parallel),
        ("hdd100", "hdd:100", Policy::ParallelHdd),
    ];
    for path in traces {
        let trace = TraceReader::open(path, &ReadOptions::default())?.read_all()?;
        let name = Path::new(path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        for (tag, spec, policy) in arrays {
            let cfg = ArrayEvalConfig {
                array: ArraySpec::parse(spec)?,
                policies: vec![Policy::Static, policy],
                ..ArrayEvalConfig::default()
            };
            let started = std::time::Instant::now();
            let out = evaluate_array(&trace, &name, &cfg, |p| {
                eprint!("\r{name} {tag}: {}/{} {}        ", p.done, p.total, p.step)
            })?;
            eprintln!();
            let base = Path::new(out_dir).join(format!("{name}.{tag}"));
            std::fs::write(
                Path::new(out_dir).join(format!("{name}.{tag}.json")),
                serde_json::to_string_pretty(&out)?,
            )?;
            write_html(&base, &out)?;
            println!("== {name} {tag} ({:.0} s)", started.elapsed().as_secs_f64());
            print!("{}", text_summary(&out));
        }
    }
    Ok(())
}
