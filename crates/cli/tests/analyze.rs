//! `reblock analyze` and `reblock demo` end to end: JSON values worked out by hand for the
//! small trace (see crates/analyze/tests/golden.rs for the arithmetic), errors, reports.

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn small() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../analyze/tests/data/small.trace.txt")
}

fn json(args: &[&str]) -> Value {
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn json_has_the_table1_figures() {
    let small = small();
    let v = json(&[
        "analyze",
        small.to_str().unwrap(),
        "--json",
        "--interval",
        "4",
        "--device-size",
        "1M",
    ]);
    // 8 requests, 6 reads, 2 writes; 56 read sectors, 24 written; 4/3/6 distinct pages.
    assert_eq!(v["requests"], 8);
    assert_eq!(v["reads"], 6);
    assert_eq!(v["writes"], 2);
    assert_eq!(v["read_bytes"], 28_672);
    assert_eq!(v["write_bytes"], 12_288);
    assert_eq!(v["unique_read_bytes"], 16_384);
    assert_eq!(v["unique_write_bytes"], 12_288);
    assert_eq!(v["unique_bytes"], 24_576);
    assert_eq!(v["total_bytes"], 28_672 + 12_288);
    // Both granularities, named as such; this trace is page aligned, so they agree on
    // unique bytes, while page-rounded totals count each page a request touches.
    for g in ["sector_exact", "page_rounded"] {
        assert_eq!(v[g]["unique_read_bytes"], 16_384, "{g}");
        assert_eq!(v[g]["unique_write_bytes"], 12_288, "{g}");
        assert_eq!(v[g]["unique_bytes"], 24_576, "{g}");
    }
    assert_eq!(v["sector_exact"]["read_bytes"], 28_672);
    assert_eq!(v["page_rounded"]["read_bytes"], 7 * 4096);
    assert_eq!(v["page_rounded"]["write_bytes"], 3 * 4096);
    assert_eq!(v["timing"]["out_of_order"], 0);
    assert_eq!(v["timing"]["reorder_window_ns"], 10_000_000);
    assert_eq!(v["device_touched_fraction"], 24_576.0 / 1_048_576.0);
    assert_eq!(v["top20_access_share"], 0.6);
    assert_eq!(v["partial_determinism"], 0.5);
    assert_eq!(v["sequential_fraction"], 2.0 / 6.0);
    assert_eq!(v["working_set_overlap"], serde_json::json!([1.0, 0.25]));
    assert_eq!(v["advice"]["strategy"], "dynamic_borg");
    assert!(!v["advice"]["reasons"].as_array().unwrap().is_empty());
}

#[test]
fn page_size_and_unknown_device_size() {
    let small = small();
    // 8 KiB pages (16 sectors): pages 0 (sectors 0..16), 1 (16..32), 50 (800..816),
    // 51 (816..832) -> 4 distinct = 32 KiB. No sidecar, no --device-size: unknown.
    let v = json(&[
        "analyze",
        small.to_str().unwrap(),
        "--json",
        "--page-size",
        "8K",
    ]);
    assert_eq!(v["page_bytes"], 8192);
    assert_eq!(v["page_rounded"]["unique_bytes"], 4 * 8192);
    // Sector-exact figures do not depend on the page size.
    assert_eq!(v["unique_bytes"], 24_576);
    assert_eq!(v["sector_exact"]["unique_bytes"], 24_576);
    assert!(v["device_touched_fraction"].is_null());
    // Default 1 day interval: the whole 2.6 s trace is one interval.
    assert_eq!(v["working_set_overlap"], serde_json::json!([1.0]));
}

#[test]
fn human_output_is_a_table_with_the_advice() {
    let small = small();
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["analyze", small.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("partial determinism"), "{text}");
    assert!(text.contains("50.00 %"), "{text}");
    assert!(text.contains("unknown (device size not given)"), "{text}");
    assert!(text.contains("advice"), "{text}");
}

#[test]
fn empty_trace_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.trace.txt");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["analyze", empty.to_str().unwrap(), "--format", "native"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no requests") && err.contains("empty.trace.txt"),
        "{err}"
    );
}

#[test]
fn bad_arguments_name_the_flag() {
    let small = small();
    for (flag, value, expect) in [
        ("--interval", "5y", "interval"),
        ("--device-size", "8X", "suffix"),
        ("--page-size", "1000", "512-byte"),
    ] {
        let out = Command::cargo_bin("reblock")
            .unwrap()
            .args(["analyze", small.to_str().unwrap(), flag, value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{flag} {value}: {err}");
    }
}

#[test]
fn report_writes_index_referencing_its_plots() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("rep");
    let small = small();
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["analyze", small.to_str().unwrap(), "--report"])
        .arg(&report)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    for svg in [
        "rank_frequency.svg",
        "heat_map.svg",
        "working_sets.svg",
        "request_sizes.svg",
    ] {
        assert!(
            html.contains(&format!("src=\"{svg}\"")),
            "{svg} not referenced"
        );
        let body = std::fs::read_to_string(report.join(svg)).unwrap();
        assert!(body.starts_with("<svg"), "{svg}");
    }
    assert!(html.contains("Advice"));
}

#[test]
fn demo_runs_from_anywhere_and_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .current_dir(dir.path())
        .args(["demo", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The capture notes (data/dev_kernel.meta.json) count 97,129 requests, 2,356 writes.
    assert_eq!(v["requests"], 97_129);
    assert_eq!(v["writes"], 2_356);
    // One working-set interval per recorded day.
    assert_eq!(v["working_set_overlap"].as_array().unwrap().len(), 5);
    assert!(dir.path().join("reblock-report/index.html").is_file());
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .current_dir(dir.path())
        .args(["demo", "--out", "r2"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("97129 requests") && text.contains("Advice:"),
        "{text}"
    );
    assert!(text.contains("r2/index.html"), "{text}");
}

/// Regression: a missing file printed its OS error twice ("...(os error 2): ...(os error
/// 2)") because the error embeds its source and the CLI printed the chain as well.
#[test]
fn a_missing_trace_is_named_once_with_its_os_error() {
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["analyze", "/nonexistent/reblock-trace.txt"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/reblock-trace.txt"), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
}
