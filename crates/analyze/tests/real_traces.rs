//! The issue's done-when check on real traces: on every trace, unique bytes never exceed
//! total bytes (reads, writes, both, at both granularities), idle time never exceeds the
//! duration, and no other relation between the statistics breaks.
//!
//! Checks the real traces bundled with the repository (the demo trace and the readers'
//! samples, every format), and every trace under the directory `REBLOCK_TRACE_DIR` names,
//! when set (run with `--nocapture` to see one line per trace):
//!
//! ```text
//! REBLOCK_TRACE_DIR=/path/to/traces cargo test -p reblock-analyze --test real_traces -- --nocapture
//! ```

use std::path::{Path, PathBuf};

use reblock_analyze::{Analysis, Analyzer, Config};
use reblock_trace::{ReadOptions, TimeOrder, TraceError, TraceReader};

fn manifest(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Trace files under `dir`, recursively, in name order: everything but notes, sidecars
/// and the deliberately broken Parquet file of the readers' tests.
fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            out.extend(traces(&path));
        } else if !(name.ends_with(".md") || name.ends_with(".json") || name.contains("panic")) {
            out.push(path);
        }
    }
    out
}

/// Reads and analyzes `path` in the default time order, or sorted whole when a request
/// is too late for the reorder window (as `--sort` would).
fn analyze(path: &Path) -> Result<(Analysis, &'static str), TraceError> {
    let mut order = TimeOrder::default();
    loop {
        let mut reader = TraceReader::open(path, &ReadOptions::default())?;
        reader.set_time_order(order);
        let mut a = Analyzer::new(Config::default());
        let mut read = std::iter::from_fn(|| reader.next_request().transpose());
        match read.try_for_each(|r| r.map(|r| a.observe(&r))) {
            Ok(()) => {
                let mut analysis = a.finish();
                analysis.record_time_order(order, reader.order_stats());
                return Ok((analysis, reader.format_name()));
            }
            Err(TraceError::Late(_)) if order != TimeOrder::Sort => order = TimeOrder::Sort,
            Err(e) => return Err(e),
        }
    }
}

/// Checks one trace; its summary line.
fn check(path: &Path) -> String {
    let (a, format) = analyze(path).unwrap_or_else(|e| panic!("{e}"));
    assert!(a.requests > 0, "{}", path.display());
    assert_eq!(a.contradictions(), vec![], "{}", path.display());
    // The done-when figures, spelled out.
    for t in [&a.sector_exact, &a.page_rounded] {
        assert!(t.unique_read_bytes <= t.read_bytes, "{}", path.display());
        assert!(t.unique_write_bytes <= t.write_bytes, "{}", path.display());
        assert!(t.unique_bytes <= t.total_bytes, "{}", path.display());
    }
    assert!(a.unique_bytes <= a.read_bytes + a.write_bytes);
    assert!(a.timing.idle.total_ns <= a.timing.duration_ns);
    let pct = |part: u64, whole: u64| 100.0 * part as f64 / whole.max(1) as f64;
    format!(
        "{:<56} {format:<12} {:>7} req  unique/total {:>5.1}% (r {:>5.1}%, w {:>5.1}%)  \
         page-rounded {:>5.1}%  idle/duration {:>5.1}%  reordered {}{}",
        path.file_name().unwrap().to_string_lossy(),
        a.requests,
        pct(a.unique_bytes, a.total_bytes),
        pct(a.unique_read_bytes, a.read_bytes),
        pct(a.unique_write_bytes, a.write_bytes),
        pct(a.page_rounded.unique_bytes, a.page_rounded.total_bytes),
        pct(a.timing.idle.total_ns, a.timing.duration_ns),
        a.timing.reordered,
        if a.timing.sorted { " (sorted)" } else { "" },
    )
}

#[test]
fn bundled_real_traces_never_contradict_themselves() {
    let mut files = vec![manifest("../../data/dev_kernel.trace.txt.zst")];
    files.extend(traces(&manifest("../trace/tests/data")));
    assert!(files.len() >= 12, "{files:?}");
    for f in files {
        println!("{}", check(&f));
    }
}

#[test]
fn traces_of_reblock_trace_dir_never_contradict_themselves() {
    let Some(dir) = std::env::var_os("REBLOCK_TRACE_DIR") else {
        println!("REBLOCK_TRACE_DIR is not set: no further traces to check");
        return;
    };
    let files = traces(Path::new(&dir));
    assert!(
        !files.is_empty(),
        "no traces under {}",
        Path::new(&dir).display()
    );
    for f in files {
        println!("{}", check(&f));
    }
}
