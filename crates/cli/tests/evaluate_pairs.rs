//! `reblock evaluate --array ... --pairs PAIRS.json`: the optimizer takes pairs mined
//! elsewhere (`reblock pairs` or the Spark job on the training part) instead of mining;
//! the CLI's own pairs give the identical evaluation, and files that do not fit are
//! refused naming the file, the pair and the field.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// The real MSR volume wdev_1 (1,055 requests, in time order).
fn wdev_1() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/msr-wdev_1.csv")
}

fn reblock() -> Command {
    Command::cargo_bin("reblock").unwrap()
}

/// Runs `reblock ARGS`; its stdout, or its stderr when it fails.
fn run(args: &[&str]) -> Result<Vec<u8>, String> {
    let out = reblock().args(args).output().unwrap();
    match out.status.success() {
        true => Ok(out.stdout),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// `evaluate --array` on 4 SSDs, skewed (three replays: static, parallel at supports 1
/// and 21, the default unless `extra` gives `--support`); `extra` added.
fn evaluate(trace: &Path, extra: &[&str]) -> Result<Value, String> {
    let mut args = vec![
        "evaluate",
        trace.to_str().unwrap(),
        "--array",
        "4xssd:k9xxg08uxm",
    ];
    args.extend([
        "--initial",
        "zipf:1",
        "--json",
        "--policies",
        "static,parallel",
    ]);
    if !extra.contains(&"--support") {
        args.extend(["--support", "1,21"]);
    }
    args.extend(extra);
    run(&args).map(|out| serde_json::from_slice(&out).unwrap())
}

/// The training part (the first half of the requests, as evaluate splits 1,055: 528)
/// written as its own trace, and the pairs `reblock pairs` mines from it with the
/// evaluation's window (disks less one).
fn training_pairs(dir: &Path, support: &str) -> PathBuf {
    let text = std::fs::read_to_string(wdev_1()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1055);
    let train = dir.join("train.csv");
    std::fs::write(&train, lines[..528].join("\n") + "\n").unwrap();
    let train = train.to_str().unwrap();
    let pairs = run(&[
        "pairs",
        train,
        "--json",
        "--window",
        "3",
        "--support",
        support,
    ])
    .unwrap();
    let path = dir.join(format!("pairs-{support}.json"));
    std::fs::write(&path, pairs).unwrap();
    path
}

#[test]
fn the_clis_own_pairs_give_the_identical_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let file = training_pairs(dir.path(), "1");
    let mined = evaluate(&wdev_1(), &[]).unwrap();
    let mut given = evaluate(&wdev_1(), &["--pairs", file.to_str().unwrap()]).unwrap();
    assert_eq!(given["pairs_file"], file.to_str().unwrap());
    given.as_object_mut().unwrap().remove("pairs_file");
    assert_eq!(given, mined);
    // The optimizer did act on them: some run moved data.
    let moved = mined["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["policies"]["parallel"]["bytes_moved"].as_u64().unwrap() > 0);
    assert!(moved, "{mined}");
    // Pairs mined at support 21 serve a support of 21 alike.
    let at_21 = training_pairs(dir.path(), "21");
    let at_21 = at_21.to_str().unwrap();
    let given = evaluate(&wdev_1(), &["--pairs", at_21, "--support", "21"]).unwrap();
    assert_eq!(given["runs"][0], mined["runs"][1]);
    assert!(given["distinct_pairs"].as_u64() < mined["distinct_pairs"].as_u64());
}

/// Writes `text` as a pairs file and returns the error evaluate gives with it.
fn refusal(dir: &Path, text: &str) -> String {
    let path = dir.join("bad.json");
    std::fs::write(&path, text).unwrap();
    let e = evaluate(&wdev_1(), &["--pairs", path.to_str().unwrap()]).expect_err(text);
    assert!(e.contains("bad.json"), "names the file: {e}");
    e
}

#[test]
fn files_that_do_not_fit_are_refused_by_pair_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let pair = |a: &str, b: &str, support: &str| {
        format!(r#"{{"a": {a}, "b": {b}, "support": {support}}}"#)
    };
    let file = |pairs: &[String]| format!(r#"{{"pairs": [{}]}}"#, pairs.join(", "));
    let cases = [
        (
            r#"{"runs": []}"#.to_string(),
            &["missing field `pairs`"][..],
        ),
        ("not json".to_string(), &["not a pairs file", "line 1"]),
        (
            file(&[pair("1", "2", "1"), r#"{"a": 3, "b": 4}"#.to_string()]),
            &["pairs[1]", "missing field `support`"],
        ),
        (
            file(&[pair("\"x\"", "2", "1")]),
            &["pairs[0].a: ", "invalid type"],
        ),
        (file(&[pair("2", "2", "1")]), &["pairs[0]", "field `b` (2)"]),
        (
            file(&[pair("1", "2", "0")]),
            &["pairs[0]", "`support` is 0"],
        ),
        (
            file(&[pair("1", "2", "5"), pair("1", "2", "6")]),
            &["pairs[1]", "(1, 2) is listed twice"],
        ),
        // A block the trace never touches: pairs of another trace.
        (
            file(&[pair("1", "2", "5")]),
            &["pairs[0]", "block 1 (field `a`)"],
        ),
    ];
    for (text, wanted) in cases {
        let e = refusal(dir.path(), &text);
        assert!(wanted.iter().all(|w| e.contains(w)), "{text}: {e}");
    }
    let e = run(&["evaluate", wdev_1().to_str().unwrap(), "--pairs", "p.json"]).unwrap_err();
    assert!(e.contains("--array"), "{e}");
}
