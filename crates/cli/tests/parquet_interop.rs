//! reblock's Parquet in the data stack, end to end with the real tools: files that
//! pyarrow, polars and pandas write read back as exactly the requests of the native
//! trace (the same `analyze --json`), DuckDB subtracts reblock's sectors (signed columns)
//! and sees the footer's metadata. The Python packages are installed by .ci/run
//! (pip install pyarrow polars pandas duckdb); a missing one fails with its name.

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use assert_cmd::Command;
use serde_json::Value;

fn kernel_trace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/dev_kernel.trace.txt.zst")
}

fn reblock(args: &[&str]) -> Vec<u8> {
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reblock {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs a Python script with `args`; its stdout.
fn python(script: &str, args: &[&Path]) -> String {
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Process::new(&py)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{py}: {e} (set PYTHON to a Python 3 interpreter)"));
    assert!(
        out.status.success(),
        "{py} failed (.ci/run installs pyarrow polars pandas duckdb): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `analyze --json` of `trace`, the device size given (files by other tools lose the
/// footer's metadata).
fn statistics(trace: &Path) -> Value {
    let out = reblock(&[
        "analyze",
        trace.to_str().unwrap(),
        "--json",
        "--device-size",
        "8G",
    ]);
    serde_json::from_slice(&out).unwrap()
}

/// Asserts `got` equals `want`, naming the top-level keys that differ (not the whole
/// analysis, which is long).
fn assert_same(got: &Value, want: &Value, what: &str) {
    let (g, w) = (got.as_object().unwrap(), want.as_object().unwrap());
    let differ: Vec<&String> = w.keys().filter(|k| g.get(*k) != w.get(*k)).collect();
    assert!(
        differ.is_empty() && g.len() == w.len(),
        "{what}: {differ:?} differ"
    );
}

/// The kernel trace as native text, and converted to Parquet by reblock.
fn native_and_parquet(dir: &Path) -> (PathBuf, PathBuf) {
    let text = dir.join("dev_kernel.txt");
    reblock(&[
        "convert",
        kernel_trace().to_str().unwrap(),
        text.to_str().unwrap(),
    ]);
    let pq = dir.join("dev_kernel.parquet");
    reblock(&[
        "convert",
        kernel_trace().to_str().unwrap(),
        pq.to_str().unwrap(),
    ]);
    (text, pq)
}

const POLARS: &str = r#"
import sys, polars as pl
df = pl.read_parquet(sys.argv[1])
# What a notebook leaves behind: every integer Int64, strings as polars' large strings.
df = df.with_columns([pl.col(c).cast(pl.Int64) for c in ["ts_ns", "pid", "device", "sector", "sectors"]])
df = df.with_columns([pl.col(c).cast(pl.Utf8) for c in ["command", "op"]])
df.write_parquet(sys.argv[2])
import pyarrow.parquet as pq
print(pq.read_schema(sys.argv[2]))
"#;

const PANDAS: &str = r#"
import sys, pandas as pd
# A notebook's pandas load of the native text: int64 numbers, object strings.
df = pd.read_csv(sys.argv[1], sep=" ", header=None, keep_default_na=False,
                 names=["ts_ns", "pid", "command", "sector", "sectors", "op"])
df["device"] = 0
df["command"] = df["command"].astype("category")
df.to_parquet(sys.argv[2], index=False)
"#;

const PYARROW: &str = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
cols = {}
for f in t.schema:
    c = t[f.name]
    if pa.types.is_integer(f.type):
        c = c.cast(pa.uint64() if f.name in ("ts_ns", "sector") else pa.int32())
    elif pa.types.is_dictionary(f.type) or pa.types.is_string(f.type):
        c = c.cast(pa.large_string()).dictionary_encode() if f.name == "command" else c.cast(pa.string_view())
    cols[f.name] = c
pq.write_table(pa.table(cols), sys.argv[2])
"#;

#[test]
fn files_by_polars_pandas_and_pyarrow_give_the_native_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let (text, pq) = native_and_parquet(dir.path());
    let want = statistics(&text);
    assert!(want["requests"].as_u64().unwrap() > 90_000, "{want}");
    assert_same(&statistics(&pq), &want, "reblock's own Parquet");

    let polars = dir.path().join("polars.parquet");
    let schema = python(POLARS, &[&pq, &polars]);
    assert!(schema.contains("ts_ns: int64"), "{schema}");
    assert!(schema.contains("op: large_string"), "{schema}");
    assert_same(&statistics(&polars), &want, "polars: Int64, large strings");

    let pandas = dir.path().join("pandas.parquet");
    python(PANDAS, &[&text, &pandas]);
    assert_same(&statistics(&pandas), &want, "pandas: int64, categorical");

    let pyarrow = dir.path().join("pyarrow.parquet");
    python(PYARROW, &[&pq, &pyarrow]);
    assert_same(
        &statistics(&pyarrow),
        &want,
        "pyarrow: uint64, int32, views",
    );
}

const DUCKDB: &str = r#"
import sys, duckdb
path = sys.argv[1]
db = duckdb.connect()
neg, = db.execute(f"""
    select count(*) from (
        select sector - lag(sector) over (order by ts_ns, sector) as seek from '{path}'
    ) where seek < 0""").fetchone()
def text(x):
    return x.decode() if isinstance(x, (bytes, bytearray)) else str(x)
kv = {text(k): text(v) for k, v in db.execute(
    f"select key, value from parquet_kv_metadata('{path}')").fetchall()}
types = dict(db.execute(f"select column_name, column_type from (describe select * from '{path}')").fetchall())
print(neg, kv.get("reblock.device_sectors"), kv.get("reblock.source_format"),
      kv.get("reblock.schema_version"), types["sector"], types["ts_ns"])
"#;

#[test]
fn duckdb_computes_signed_seek_distances_and_reads_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let (_, pq) = native_and_parquet(dir.path());
    let out = python(DUCKDB, &[&pq]);
    let fields: Vec<&str> = out.split_whitespace().collect();
    let backwards: u64 = fields[0].parse().unwrap();
    assert!(backwards > 1000, "backward seeks: {out}");
    // data/dev_kernel.meta.json gives the 8 GiB loop device's size.
    assert_eq!(
        fields[1..],
        ["16777216", "native", "2", "BIGINT", "BIGINT"],
        "{out}"
    );
}
