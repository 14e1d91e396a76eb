//! `reblock tree` end to end: the JSON a script reads (field names as documented), the
//! chapter's three claims on a catalog-shaped document (a wide root of items with
//! sizeable subtrees), the report files, and errors that name the place.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

const LAYOUTS: [&str; 6] = [
    "default", "seq-ts", "tp-ts", "ekm-ts", "ekm-ots", "bf-level",
];
const TREE_LAYOUTS: [&str; 5] = ["seq-ts", "tp-ts", "ekm-ts", "ekm-ots", "bf-level"];

/// A catalog: `items` items under one root, each with a name and a price (its first
/// children) and a description and reviews that make its subtree several blocks long.
fn catalog(items: usize) -> String {
    let mut xml = String::from("<?xml version=\"1.0\"?>\n<catalog>\n");
    for n in 0..items {
        xml += &format!(
            "<item id=\"i{n}\"><name>Item {n}</name><price>{}.50</price><description>",
            n % 50
        );
        for p in 0..10 {
            xml += &format!(
                "<para>Paragraph {p} of item {n}: a plain description of what it is and does.</para>"
            );
        }
        xml += "</description><reviews>";
        for r in 0..8 {
            xml += &format!(
                "<review><author>reader{}</author><text>Review {r} of item {n}: works as described.</text></review>",
                (n * 7 + r) % 97
            );
        }
        xml += "</reviews></item>\n";
    }
    xml + "</catalog>\n"
}

fn run(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("reblock")
        .unwrap()
        .arg("tree")
        .args(args)
        .output()
        .unwrap()
}

fn json(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn write_catalog(dir: &Path) -> String {
    let path = dir.join("catalog.xml");
    std::fs::write(&path, catalog(300)).unwrap();
    path.to_str().unwrap().to_string()
}

/// I/O time of query `i` on `layout`.
fn io_ms(v: &Value, layout: &str, i: usize) -> f64 {
    v["layouts"][layout]["queries"][i]["io_time_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("{layout} query {i}: {}", v["layouts"][layout]))
}

fn best_tree_ms(v: &Value, i: usize) -> f64 {
    TREE_LAYOUTS
        .iter()
        .map(|l| io_ms(v, l, i))
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn json_names_every_grouping_layout_query_and_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let doc = write_catalog(dir.path());
    let v = json(&[&doc, "--query", "/catalog/item", "--query", "//*", "--json"]);
    for g in ["sequential", "tree-preserving", "ekm", "breadth-first"] {
        let s = &v["groupings"][g];
        assert!(s["supernodes"].as_u64().unwrap() > 0, "{g}: {s}");
        assert!(s["nodes_per_supernode"].as_f64().unwrap() > 1.0, "{g}: {s}");
        let frag = s["internal_fragmentation"].as_f64().unwrap();
        assert!((0.0..1.0).contains(&frag), "{g}: {s}");
    }
    for l in LAYOUTS {
        let layout = &v["layouts"][l];
        assert!(
            layout["external_fragmentation"].is_number(),
            "{l}: {layout}"
        );
        let queries = layout["queries"].as_array().unwrap();
        assert_eq!(queries.len(), 2, "{l}");
        assert_eq!(queries[0]["query"], "/catalog/item");
        assert_eq!(queries[1]["query"], "//*");
        for q in queries {
            assert!(q["io_time_ms"].as_f64().unwrap() > 0.0, "{l}: {q}");
            let a = &q["accesses"];
            let total: u64 = ["a1", "a2", "a3", "a4", "a5"]
                .iter()
                .map(|k| a[k].as_u64().unwrap())
                .sum();
            assert_eq!(total, q["reads"].as_u64().unwrap(), "{l}: {q}");
        }
    }
    // The default layout links supernodes as a list: only a1 and a5 occur.
    let a = &v["layouts"]["default"]["queries"][1]["accesses"];
    assert_eq!((a["a2"].as_u64(), a["a3"].as_u64()), (Some(0), Some(0)));
    let (td, tt) = (
        v["model"]["T_default"].as_f64().unwrap(),
        v["model"]["T_tree"].as_f64().unwrap(),
    );
    assert!(td > tt && tt > 0.0, "{}", v["model"]);
}

#[test]
fn sibling_walks_win_on_tree_layouts_and_whole_scans_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let doc = write_catalog(dir.path());
    let v = json(&[
        &doc,
        "--query",
        "/catalog/item",
        "--query",
        "/catalog/item/name",
        "--query",
        "//*",
        "--json",
    ]);
    // Walking the items (and every item's name) reads sibling runs on the tree layouts
    // but skips over each item's subtree on the default one.
    for i in [0, 1] {
        let (default, best) = (io_ms(&v, "default", i), best_tree_ms(&v, i));
        assert!(
            default >= 2.0 * best,
            "query {i}: {default} ms default vs {best} ms"
        );
    }
    // The summary names the fastest tree layout of each query.
    for i in [0, 1, 2] {
        let b = &v["best_tree_layouts"][i];
        let layout = b["layout"].as_str().unwrap();
        assert!(TREE_LAYOUTS.contains(&layout), "{b}");
        assert_eq!(
            b["io_time_ms"].as_f64().unwrap(),
            best_tree_ms(&v, i),
            "{b}"
        );
        assert_eq!(b["default_ms"].as_f64().unwrap(), io_ms(&v, "default", i));
    }
    // Reading everything is what the default (document order) layout is made for.
    let scan = io_ms(&v, "default", 2);
    for l in TREE_LAYOUTS {
        assert!(io_ms(&v, l, 2) >= scan, "{l}: {} < {scan}", io_ms(&v, l, 2));
    }
    let supernodes = |g: &str| v["groupings"][g]["supernodes"].as_u64().unwrap();
    assert!(supernodes("tree-preserving") >= supernodes("sequential"));
}

#[test]
fn report_writes_the_two_plots() {
    let dir = tempfile::tempdir().unwrap();
    let doc = write_catalog(dir.path());
    let report = dir.path().join("report");
    let out = run(&[
        &doc,
        "--query",
        "/catalog/item",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in ["index.html", "io_time.svg", "access_mix.svg"] {
        let text = std::fs::read_to_string(report.join(f)).unwrap();
        assert!(text.len() > 200, "{f}: {text}");
    }
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("io_time.svg") && html.contains("access_mix.svg"));
}

#[test]
fn malformed_xml_and_bad_queries_name_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("bad.xml");
    std::fs::write(&doc, "<catalog>\n  <item>\n</catalog>\n").unwrap();
    let out = run(&[doc.to_str().unwrap(), "--query", "/catalog"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.xml:3:"), "{err}");
    let good = write_catalog(dir.path());
    let out = run(&[&good, "--query", "/catalog/item[1]"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/catalog/item[1]") && err.contains("attribute predicates"),
        "{err}"
    );
}
