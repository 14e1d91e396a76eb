//! The chapter's Figure 2.8 and Table 2.4 trends on an XMark-like document (factor 0.05,
//! the barracuda with its read-ahead cache, 512-byte blocks, the XPathMark query set):
//! sibling-walking (non deep-focused) queries at least 2x faster on the best tree layout,
//! subtree-reading (deep-focused) ones and a whole-document scan fastest on the default
//! layout among the chapter's layouts, and the groupings' supernode counts in the
//! chapter's order. The level-order layout (not the chapter's) turns the deep-focused
//! queries that go on from every item to one child, such as every person's `watches`,
//! into level sweeps that beat the default; the scan stays fastest on the default.

use reblock_device::params::builtin;
use reblock_device::Hdd;
use reblock_tree::doc::parse;
use reblock_tree::queries;
use reblock_tree::study::{run, NamedQuery, Study, StudyConfig};
use reblock_tree::xmark::generate;
use reblock_tree::xpath::Query;

fn study() -> Study {
    let doc = parse(generate(0.05, 1).as_bytes(), "xmark-0.05").unwrap();
    let mut named = queries::set("xpathmark").unwrap();
    named.push(("scan", "//*"));
    let cfg = StudyConfig {
        block_bytes: 512,
        think_ms: vec![0.0],
        queries: named
            .into_iter()
            .map(|(n, q)| NamedQuery {
                name: n.to_string(),
                query: Query::parse(q).unwrap(),
            })
            .collect(),
        interleave: Vec::new(),
        anticipation_ms: 6.0,
    };
    let hdd = Hdd::new(&builtin("barracuda").unwrap()).unwrap();
    run(&doc, "xmark-0.05", &hdd, "hdd:barracuda", &cfg, &mut |_| {}).unwrap()
}

/// (default ms, best tree layout ms, slowest tree layout ms) of every query, by name,
/// over the chapter's four tree layouts.
fn times(s: &Study) -> Vec<(String, f64, f64, f64)> {
    let layouts = s.layouts.iter();
    (0..s.layouts.default.queries.len())
        .map(|i| {
            let trees: Vec<f64> = layouts[1..]
                .iter()
                .filter(|(key, _)| *key != "bf-level")
                .map(|(_, l)| l.queries[i].io_time_ms)
                .collect();
            (
                s.layouts.default.queries[i].name.clone(),
                s.layouts.default.queries[i].io_time_ms,
                trees.iter().copied().fold(f64::INFINITY, f64::min),
                trees.iter().copied().fold(0.0, f64::max),
            )
        })
        .collect()
}

#[test]
fn figure_2_8_trends_and_table_2_4_order_hold() {
    let s = study();
    for (name, default, best, worst) in times(&s) {
        if name.starts_with('N') {
            assert!(default >= 2.0 * best, "{name}: {default} vs {best}");
        }
        // D5 and D7 read small subtrees under few parents: the optimized layout keeps up
        // there (docs/tree.md); the other deep-focused queries and the scan favour the
        // default layout over every tree layout's best.
        if matches!(name.as_str(), "D1" | "D3" | "D8" | "D9" | "scan") {
            assert!(
                best > default,
                "{name}: best tree {best} vs default {default}"
            );
            assert!(worst > 5.0 * default, "{name}: {worst} vs {default}");
        }
    }
    let level = |name: &str| {
        let i = s
            .layouts
            .default
            .queries
            .iter()
            .position(|q| q.name == name);
        let i = i.unwrap();
        (
            s.layouts.default.queries[i].io_time_ms,
            s.layouts.bf_level.queries[i].io_time_ms,
        )
    };
    let (default, bf) = level("D2");
    assert!(
        default >= 2.0 * bf,
        "D2: default {default} vs bf-level {bf}"
    );
    for q in ["scan", "D9"] {
        let (default, bf) = level(q);
        assert!(
            bf > 2.0 * default,
            "{q}: default {default} vs bf-level {bf}"
        );
    }
    let g = &s.groupings;
    assert!(g.tree_preserving.supernodes > g.ekm.supernodes);
    assert!(g.ekm.supernodes > g.sequential.supernodes);
    // The default layout only knows a1 (the next supernode) and a5.
    for q in &s.layouts.default.queries {
        assert_eq!(
            q.accesses.a2 + q.accesses.a3 + q.accesses.a4,
            0,
            "{}",
            q.name
        );
    }
    // Sibling walks on the tree layouts are sibling accesses (a3/a4), as in Table 2.6.
    let n1 = &s
        .layouts
        .ekm_ts
        .queries
        .iter()
        .find(|q| q.name == "N1")
        .unwrap();
    let siblings = n1.accesses.a3 + n1.accesses.a4;
    assert!(siblings * 10 > n1.accesses.total() * 9, "{:?}", n1.accesses);
}
