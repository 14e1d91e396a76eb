//! The examples of docs/parquet.md run as a reader would copy them: every SQL block in
//! DuckDB and every Python block in python3, in a directory holding `t.parquet` (the
//! bundled kernel trace converted by reblock, so its footer carries
//! `reblock.device_sectors`). The blocks that say they keep the metadata must give a
//! `cleaned.parquet` whose `analyze --json` is exactly the native file's. Needs python3
//! with pyarrow, polars, pandas and duckdb (.ci/run installs them).

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use assert_cmd::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fenced blocks of `markdown` in `language`, in order.
fn blocks(markdown: &str, language: &str) -> Vec<String> {
    let fence = format!("```{language}");
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match current.as_mut() {
            None if line.trim_end() == fence => current = Some(String::new()),
            Some(_) if line.trim_end() == "```" => out.push(current.take().unwrap()),
            Some(text) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    out
}

fn python(script: &str, dir: &Path) {
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Process::new(&py)
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{py}: {e} (set PYTHON to a Python 3 interpreter)"));
    assert!(
        out.status.success(),
        "docs/parquet.md example failed:\n{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn analyze(trace: &Path) -> serde_json::Value {
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["analyze", trace.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_parquet_docs_examples_run_and_keeping_the_metadata_keeps_the_statistics() {
    let doc = std::fs::read_to_string(workspace().join("docs/parquet.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let native = dir.path().join("t.parquet");
    Command::cargo_bin("reblock")
        .unwrap()
        .args(["convert", "--to", "parquet"])
        .arg(workspace().join("data/dev_kernel.trace.txt.zst"))
        .arg(&native)
        .assert()
        .success();
    let want = analyze(&native);
    assert!(
        want["device_bytes"].as_u64().is_some(),
        "{}",
        want["device_bytes"]
    );

    let sql = blocks(&doc, "sql");
    assert!(!sql.is_empty(), "docs/parquet.md has no SQL example");
    for query in &sql {
        python(
            &format!("import duckdb\nprint(duckdb.sql({query:?}).fetchall())"),
            dir.path(),
        );
    }

    let cleaned = dir.path().join("cleaned.parquet");
    let mut kept = 0;
    for script in blocks(&doc, "python") {
        let _ = std::fs::remove_file(&cleaned);
        python(&script, dir.path());
        if cleaned.exists() && script.contains("metadata") {
            assert_eq!(analyze(&cleaned), want, "after:\n{script}");
            kept += 1;
        }
    }
    assert!(
        kept >= 2,
        "the polars and pandas ways of keeping the metadata"
    );
}
