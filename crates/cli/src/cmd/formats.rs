//! `reblock formats`: the trace formats reblock reads, for `--format`.

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print a JSON array of {name, description} instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut rows: Vec<(&str, &str)> = reblock_trace::formats()
        .iter()
        .map(|f| (f.name(), f.describe()))
        .collect();
    rows.push(("parquet", "columnar Parquet written by `reblock convert`"));
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(n, d)| serde_json::json!({"name": n, "description": d}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for (n, d) in rows {
            println!("{n:<14} {d}");
        }
    }
    Ok(())
}
