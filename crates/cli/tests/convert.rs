//! `reblock convert` end to end: the files it writes, read back and compared.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../trace/tests/data")
        .join(name)
}

fn reblock() -> Command {
    Command::cargo_bin("reblock").unwrap()
}

#[test]
fn fiu_to_native_then_parquet_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let txt = dir.path().join("fiu.txt");
    let out = reblock()
        .arg("convert")
        .arg(data("fiu.txt"))
        .arg(&txt)
        .assert()
        .success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(
        stdout,
        format!(
            "converted 300 requests from {} (fiu) to {} (native)\n",
            data("fiu.txt").display(),
            txt.display()
        )
    );
    let native = std::fs::read_to_string(&txt).unwrap();
    let lines: Vec<&str> = native.lines().collect();
    assert_eq!(lines.len(), 300);
    // FIU line 1: `89966811921625 4257 nfsd 488846200 8 W 6 0 2c47...`
    // The device (major 6, minor 0 = 6 << 20) is the optional seventh field.
    assert_eq!(lines[0], "89966811921625 4257 nfsd 488846200 8 W 6291456");
    // FIU line 11: `89968195447404 20782 gzip 283193112 8 R 6 0 ef58...`
    assert_eq!(lines[10], "89968195447404 20782 gzip 283193112 8 R 6291456");

    let pq = dir.path().join("fiu.parquet");
    reblock()
        .arg("convert")
        .arg(&txt)
        .arg(&pq)
        .assert()
        .success();
    assert_eq!(&std::fs::read(&pq).unwrap()[..4], b"PAR1");
    let back = dir.path().join("back.txt");
    let out = reblock()
        .args(["convert", "--json"])
        .arg(&pq)
        .arg(&back)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["requests"], 300);
    assert_eq!(v["input_format"], "parquet");
    assert_eq!(v["output_format"], "native");
    assert_eq!(v["bad_lines"], 0);
    assert_eq!(std::fs::read_to_string(&back).unwrap(), native);
}

#[test]
fn to_overrides_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.out");
    reblock()
        .args(["convert", "--to", "parquet"])
        .arg(data("msr-hm_0.csv"))
        .arg(&out)
        .assert()
        .success();
    assert_eq!(&std::fs::read(&out).unwrap()[..4], b"PAR1");
}

#[test]
fn skip_bad_reports_the_lines_and_a_bad_line_fails() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "1 2 cc 3 8 R\n2 2 cc 3 8 X\n3 2 cc 11 8 W\n").unwrap();
    let out = dir.path().join("out.txt");
    let run = reblock()
        // auto still recognises the format with a bad line among the first ones
        .args(["convert", "--skip-bad", "1"])
        .arg(&input)
        .arg(&out)
        .assert()
        .success();
    let stderr = String::from_utf8(run.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains(&format!(
            "{}:2: field op: 'X' is not R or W",
            input.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "1 2 cc 3 8 R\n3 2 cc 11 8 W\n"
    );

    let run = reblock()
        .args(["convert", "--format", "native"])
        .arg(&input)
        .arg(&out)
        .assert()
        .failure();
    let stderr = String::from_utf8(run.get_output().stderr.clone()).unwrap();
    assert_eq!(
        stderr,
        format!(
            "reblock: error: {}:2: field op: 'X' is not R or W\n",
            input.display()
        )
    );
}

#[test]
fn compression_is_chosen_for_parquet_and_refused_for_text() {
    let dir = tempfile::tempdir().unwrap();
    let native = dir.path().join("plain.txt");
    reblock()
        .arg("convert")
        .arg(data("msr-hm_0.csv"))
        .arg(&native)
        .assert()
        .success();
    for codec in ["lz4", "none", "snappy", "zstd"] {
        let pq = dir.path().join(format!("{codec}.parquet"));
        reblock()
            .args(["convert", "--compression", codec])
            .arg(data("msr-hm_0.csv"))
            .arg(&pq)
            .assert()
            .success();
        let back = dir.path().join(format!("{codec}.txt"));
        reblock()
            .arg("convert")
            .arg(&pq)
            .arg(&back)
            .assert()
            .success();
        assert_eq!(
            std::fs::read_to_string(&back).unwrap(),
            std::fs::read_to_string(&native).unwrap(),
            "{codec}"
        );
    }
    let out = dir.path().join("refused.txt");
    reblock()
        .args(["convert", "--compression", "lz4"])
        .arg(data("msr-hm_0.csv"))
        .arg(&out)
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "--compression applies to Parquet output",
        ));
    assert!(!out.exists());
}
