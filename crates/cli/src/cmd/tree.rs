//! `reblock tree`: lay out a tree-structured (XML) document on a modelled disk the ways
//! of the dissertation's chapter 2 and measure what each layout costs its queries.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use reblock_device::parse_spec;
use reblock_tree::doc::{self, Document};
use reblock_tree::queries;
use reblock_tree::study::{self, NamedQuery, Study, StudyConfig};
use reblock_tree::xmark;
use reblock_tree::xpath::Query;

/// Lay out an XML document on a disk model: the sequential, tree-preserving, EKM and
/// breadth-first groupings of nodes into one-block supernodes, the default (document
/// order), tree-structured, optimized and level-order placements, and each query's I/O
/// time and access types on every layout (default, seq-ts, tp-ts, ekm-ts, ekm-ots,
/// bf-level), next to the analytic model. Tree layouts win for queries that walk
/// siblings (ekm-ts, ekm-ots) or go on from every sibling to its children, such as
/// every item's name (bf-level), and lose for queries that read whole subtrees; this
/// measures by how much on your documents, and names the best tree layout per query.
///
/// Example: reblock tree catalog.xml --device hdd:barracuda --query '/catalog/item/name'
/// --query '//*'
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The XML document. Omit it with --xmark.
    #[arg(value_name = "DOC.xml", required_unless_present = "xmark")]
    pub doc: Option<PathBuf>,
    /// Instead of DOC, generate an XMark-like auction document of this scaling factor
    /// (1.0 is XMark's factor 1, about 1.7 million nodes; the chapter used 0.01 to 1).
    #[arg(long, value_name = "FACTOR", conflicts_with = "doc")]
    pub xmark: Option<f64>,
    /// Seed of the --xmark generator (same factor and seed, same document).
    #[arg(long, default_value_t = 1, value_name = "N", requires = "xmark")]
    pub seed: u64,
    /// Also write the generated --xmark document to FILE.
    #[arg(long, value_name = "FILE", requires = "xmark")]
    pub save_xml: Option<PathBuf>,
    /// The disk: a built-in model (`hdd:barracuda`, the chapter's drive; `hdd:cheetah15k5`)
    /// or a parameter file; `:cache=off` turns its read-ahead cache off.
    #[arg(long, default_value = "hdd:barracuda", value_name = "SPEC")]
    pub device: String,
    /// Bytes of one supernode (one disk block): 512 (the chapter's), 4K, 8K, ...
    #[arg(long, default_value = "512", value_name = "SIZE")]
    pub block_size: String,
    /// An XPath query (absolute child `/` and descendant `//` steps, names, `*`,
    /// `[@attr]` and `[@attr='value']`); repeat for more. Named Q1, Q2, ... in order.
    #[arg(long = "query", value_name = "XPATH")]
    pub queries: Vec<String>,
    /// A built-in query set for XMark documents: xpathmark (the chapter's D1-D9 and
    /// N1-N9), deep or non-deep. The default with --xmark and no --query.
    #[arg(long, value_name = "NAME")]
    pub query_set: Option<String>,
    /// Queries to replay together, by name joined with `+` (`Q1+Q2`, `N1+N4`), under an
    /// anticipatory scheduler; repeat for more groups. `table` adds the chapter's
    /// interleaved groups whose queries are present.
    #[arg(long, value_name = "GROUP")]
    pub interleave: Vec<String>,
    /// Think time between a read and the next, in ms: one value or a sample
    /// (`0.1,0.2,0.5`) used in turn; tree layouts skew first children by its 95th
    /// percentile so that they are still ahead of the head.
    #[arg(long, default_value = "0", value_name = "T")]
    pub think_ms: String,
    /// How long the anticipatory scheduler may wait for the query it served last, in ms
    /// (0: first come, first served).
    #[arg(long, default_value_t = 6.0, value_name = "MS")]
    pub anticipation_ms: f64,
    /// Print the results as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write an HTML report with the plots (I/O time per query and layout on a log scale,
    /// access-type mix) into DIR.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

/// `512`, `4096`, `4K`, `8k`, `1M` in bytes.
fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1024),
        Some((i, 'm' | 'M')) => (&t[..i], 1024 * 1024),
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| {
        anyhow!("--block-size `{text}`: expected bytes such as 512, 4096, 4K or 8K")
    })?;
    Ok(n * mult)
}

fn parse_think(text: &str) -> Result<Vec<f64>> {
    text.split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    anyhow!("--think-ms `{text}`: `{p}` is not a non-negative number of ms")
                })
        })
        .collect()
}

/// The queries: --query ones named Q1.., a set, or defaults that fit the document.
fn pick_queries(args: &Args, doc: &Document) -> Result<Vec<NamedQuery>> {
    let mut named: Vec<(String, String)> = args
        .queries
        .iter()
        .enumerate()
        .map(|(i, q)| (format!("Q{}", i + 1), q.clone()))
        .collect();
    let set = match (&args.query_set, args.xmark.is_some() && named.is_empty()) {
        (Some(s), _) => Some(s.as_str()),
        (None, true) => Some("xpathmark"),
        _ => None,
    };
    if let Some(s) = set {
        let qs = queries::set(s)
            .ok_or_else(|| anyhow!("--query-set `{s}`: unknown (known: {})", queries::SET_NAMES))?;
        named.extend(qs.into_iter().map(|(n, q)| (n.to_string(), q.to_string())));
    }
    if named.is_empty() {
        // A sibling walk under the root, one level deeper, and a whole-document scan.
        let root = doc.name(doc.node(doc.root()).name);
        named = vec![
            ("siblings".into(), format!("/{root}/*")),
            ("children".into(), format!("/{root}/*/*")),
            ("scan".into(), "//*".into()),
        ];
    }
    named
        .into_iter()
        .map(|(name, q)| {
            Ok(NamedQuery {
                name,
                query: Query::parse(&q)?,
            })
        })
        .collect()
}

fn pick_interleave(args: &Args, qs: &[NamedQuery]) -> Result<Vec<(String, Vec<usize>)>> {
    let index = |n: &str| qs.iter().position(|q| q.name == n);
    let mut out = Vec::new();
    for g in &args.interleave {
        if g == "table" {
            for (name, members) in queries::INTERLEAVED {
                let idx: Option<Vec<usize>> = members.iter().map(|m| index(m)).collect();
                if let Some(idx) = idx {
                    out.push((name.to_string(), idx));
                }
            }
            continue;
        }
        let idx = g
            .split('+')
            .map(|n| {
                index(n.trim()).ok_or_else(|| {
                    let known: Vec<&str> = qs.iter().map(|q| q.name.as_str()).collect();
                    anyhow!(
                        "--interleave `{g}`: no query named `{n}` (known: {})",
                        known.join(", ")
                    )
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        if idx.len() < 2 {
            bail!("--interleave `{g}`: name at least two queries joined with `+`");
        }
        out.push((g.clone(), idx));
    }
    Ok(out)
}

fn load(args: &Args) -> Result<(Document, String)> {
    match (args.xmark, &args.doc) {
        (Some(f), _) => {
            if !(f.is_finite() && f > 0.0 && f <= 10.0) {
                bail!("--xmark {f}: the factor must be in (0, 10]");
            }
            let text = xmark::generate(f, args.seed);
            if let Some(p) = &args.save_xml {
                std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
            }
            let name = format!("xmark-{f}");
            Ok((doc::parse(text.as_bytes(), &name)?, name))
        }
        (None, Some(p)) => Ok((doc::load(p)?, p.display().to_string())),
        (None, None) => bail!("give a DOC.xml or --xmark FACTOR"),
    }
}

pub fn run(args: Args) -> Result<()> {
    let built = parse_spec(&args.device)?;
    let hdd = match (built.members.len(), built.members[0].as_hdd()) {
        (1, Some(h)) => h.clone(),
        _ => bail!(
            "--device {}: tree layouts need a single disk drive model (e.g. hdd:barracuda): they place data by tracks and rotational position",
            args.device
        ),
    };
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("template"));
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_message("reading the document");
    let (doc, name) = load(&args)?;
    let queries = pick_queries(&args, &doc)?;
    let cfg = StudyConfig {
        block_bytes: parse_size(&args.block_size)?,
        think_ms: parse_think(&args.think_ms)?,
        interleave: pick_interleave(&args, &queries)?,
        queries,
        anticipation_ms: args.anticipation_ms,
    };
    let s = study::run(&doc, &name, &hdd, &args.device, &cfg, &mut |m| {
        bar.set_message(m.to_string())
    })?;
    bar.finish_and_clear();
    if let Some(dir) = &args.report {
        let index = reblock_tree::report::write(dir, &s)?;
        eprintln!("report: {}", index.display());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print_text(&s);
    }
    Ok(())
}

fn print_text(s: &Study) {
    println!(
        "{}: {} nodes, {} bytes, height {}, mean fanout {:.1}; {} blocks of {} bytes",
        s.document.name,
        s.document.nodes,
        s.document.bytes,
        s.document.height,
        s.document.mean_fanout,
        s.device,
        s.block_size
    );
    println!(
        "\n{:<16} {:>10} {:>10} {:>10}",
        "grouping", "supernodes", "nodes/sn", "int.frag"
    );
    for (n, g) in s.groupings.iter() {
        println!(
            "{n:<16} {:>10} {:>10.2} {:>9.1}%",
            g.supernodes,
            g.nodes_per_supernode,
            g.internal_fragmentation * 100.0
        );
    }
    print!("\n{:<10}", "I/O ms");
    for (key, _) in s.layouts.iter() {
        print!(" {key:>10}");
    }
    println!();
    for (i, q) in s.layouts.default.queries.iter().enumerate() {
        print!("{:<10}", q.name);
        for (_, l) in s.layouts.iter() {
            match l.queries.get(i) {
                Some(r) => print!(" {:>10.2}", r.io_time_ms),
                None => print!(" {:>10}", "-"),
            }
        }
        match s.best_tree_layouts.get(i) {
            Some(b) => println!(
                "  {} (best tree layout {}: {:.2}x the default)",
                q.query, b.layout, b.speedup
            ),
            None => println!("  {}", q.query),
        }
    }
    print!("{:<10}", "ext.frag");
    for (_, l) in s.layouts.iter() {
        print!(" {:>9.1}%", l.external_fragmentation * 100.0);
    }
    println!();
    for (key, l) in s.layouts.iter() {
        if let Some(e) = &l.error {
            println!("{key}: not built: {e}");
        }
    }
    for (j, g) in s.layouts.default.interleaved.iter().enumerate() {
        print!("{:<10}", g.name);
        for (_, l) in s.layouts.iter() {
            match l.interleaved.get(j) {
                Some(r) => print!(" {:>10.2}", r.io_time_ms),
                None => print!(" {:>10}", "-"),
            }
        }
        println!("  interleaved {}", g.queries.join(" + "));
    }
    println!(
        "\nanalytic model (equal access mix): T_default {:.3} ms, T_tree {:.3} ms (t_rand {:.3}, t_semi-seq {:.3} over {:.0} cylinders)",
        s.model.t_default, s.model.t_tree, s.model.t_rand_ms, s.model.t_semi_seq_ms, s.model.span_cylinders
    );
}
