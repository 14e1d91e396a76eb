//! Traces that lie, end to end: addresses that overflow, sizes that are negative or not
//! numbers, bytes that are not UTF-8, and time running backwards, through `analyze` and
//! `simulate`; and `convert`, whose output must give the same statistics as its source.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn reblock() -> Command {
    Command::cargo_bin("reblock").unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Runs `reblock ARGS TRACE`, which must fail cleanly: its one-line message on stderr.
fn failure(args: &[&str], trace: &Path) -> String {
    let out = reblock().args(args).arg(trace).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn json(args: &[&str], trace: &Path) -> (Value, String) {
    let out = reblock().args(args).arg(trace).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{args:?}: {err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

const ANALYZE: &[&str] = &["analyze", "--json"];
const SIMULATE: &[&str] = &["simulate", "--json", "--device", "hdd:barracuda"];

/// The done-when: a request past 2^64 sectors, a negative size, a non-number and
/// invalid UTF-8 each give an error naming the line and the field, in `analyze` and
/// `simulate`, without a panic (the same in release and debug builds: the check is not
/// an overflow trap).
#[test]
fn bad_addresses_sizes_and_bytes_name_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = b"1000 7 cc 0 8 R\n";
    let cases: [(&[u8], &str); 5] = [
        (
            b"2000 7 cc 18446744073709551600 64 R\n",
            "field sector: sector 18446744073709551600 + 64 sectors ends past",
        ),
        (
            b"2000 7 cc 36028797018963967 8 W\n",
            "field sector: sector 36028797018963967 + 8 sectors ends past",
        ),
        (
            b"2000 7 cc 8 -8 R\n",
            "field sectors: '-8' is not an integer",
        ),
        (b"2000 7 cc 8 eight R\n", "field sectors: 'eight' is not"),
        (b"2000 7 c\xffc 8 8 R\n", "field command: not valid UTF-8"),
    ];
    for (i, (line, want)) in cases.into_iter().enumerate() {
        let t = write(
            dir.path(),
            &format!("bad{i}.txt"),
            &[&good[..], line].concat(),
        );
        for args in [ANALYZE, SIMULATE] {
            let err = failure(args, &t);
            let at = format!("{}:2: {want}", t.display());
            assert!(err.contains(&at), "{args:?}: {err}\nwant {at}");
        }
    }
}

/// The case: a timestamp half a second back is an error naming the line, or with
/// `--sort` counted, with idle time within the duration.
#[test]
fn time_running_backwards_is_an_error_or_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let text = "0 7 cc 0 8 R\n1000000000 7 cc 8 8 R\n500000000 7 cc 16 8 R\n\
                2000000000 7 cc 24 8 R\n";
    let t = write(dir.path(), "back.txt", text.as_bytes());
    for args in [ANALYZE, SIMULATE] {
        let err = failure(args, &t);
        let at = format!(
            "{}:3: field timestamp: 0.500000000 s is 0.500000000 s",
            t.display()
        );
        assert!(err.contains(&at), "{err}");
        assert!(err.contains("--sort"), "{err}");
    }
    for extra in [&["--sort"][..], &["--reorder-window", "1s"]] {
        let (v, err) = json(&[ANALYZE, extra].concat(), &t);
        let timing = &v["timing"];
        assert_eq!(timing["out_of_order"], 1);
        assert_eq!(timing["reordered"], 1);
        assert_eq!(timing["max_lateness_ns"], 500_000_000);
        assert_eq!(timing["sorted"], extra[0] == "--sort");
        assert_eq!(timing["duration_ns"], 2_000_000_000u64);
        assert!(timing["idle"]["total_ns"].as_u64() <= timing["duration_ns"].as_u64());
        assert_eq!(timing["idle"]["fraction_of_duration"], 1.0);
        assert!(err.contains("1 request(s) of"), "{err}");
        let (s, _) = json(&[SIMULATE, extra].concat(), &t);
        assert_eq!(s["requests"], 4);
    }
    // Skew within the default window is put right without being asked.
    let text = "0 7 cc 0 8 R\n3000000 7 cc 8 8 R\n1000000 7 cc 16 8 R\n";
    let t = write(dir.path(), "skew.txt", text.as_bytes());
    let (v, err) = json(ANALYZE, &t);
    assert_eq!(v["timing"]["reordered"], 1);
    assert_eq!(v["timing"]["reorder_window_ns"], 10_000_000);
    assert!(err.contains("--reorder-window 10.0 ms"), "{err}");
}

fn trace_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../trace/tests/data")
        .join(name)
}

/// `convert`: a trace converted to Parquet or native text gives the same statistics as
/// its source, for every source format.
#[test]
fn converted_traces_analyze_like_their_source() {
    let dir = tempfile::tempdir().unwrap();
    let sources = [
        "ascii-tpcc.txt",
        "blkparse-jxu.txt",
        "blkreplay-windows-mssql.load",
        "cloudphysics.csv",
        "fiu.txt",
        "msr-hm_0.csv",
        "msr-windows-rw_40_60.txt",
        "native-dev_kernel.txt",
        "spc-financial1.spc",
    ];
    for name in sources {
        let src = trace_data(name);
        let (want, _) = json(ANALYZE, &src);
        assert!(want["requests"].as_u64().unwrap() > 0, "{name}");
        for ext in ["parquet", "txt"] {
            let out = dir.path().join(format!("{name}.{ext}"));
            reblock()
                .arg("convert")
                .arg(&src)
                .arg(&out)
                .assert()
                .success();
            let (got, _) = json(ANALYZE, &out);
            assert_eq!(got, want, "{name} as {ext}");
        }
    }
}
