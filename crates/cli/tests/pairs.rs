//! `reblock pairs` end to end: sessions, the pair window, support and the op filter on a
//! trace whose pairs are worked out by hand, and the JSON shape the Spark job matches.

use assert_cmd::Command;
use serde_json::{json, Value};

/// Three sessions at the default 100 us window: blocks [0, 1, 5] twice (reads), then
/// [1, 9] (a read, then a write). 512 B blocks, so a block is a sector.
const TRACE: &str = "\
0 1 app 0 2 R
50000 1 app 5 1 R
200000 1 app 0 2 R
250000 1 app 5 1 R
1000000 1 app 1 1 R
1000001 1 app 9 1 W
";

fn pairs(extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.txt");
    std::fs::write(&path, TRACE).unwrap();
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["pairs", path.to_str().unwrap(), "--json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn pair(a: u64, b: u64, support: u32) -> Value {
    json!({"a": a, "b": b, "support": support})
}

#[test]
fn pairs_by_session_support_window_and_ops() {
    let all = [pair(0, 1, 2), pair(0, 5, 2), pair(1, 5, 2), pair(1, 9, 1)];
    assert_eq!(pairs(&[]), json!({ "pairs": all }));
    assert_eq!(pairs(&["--support", "2"]), json!({ "pairs": all[..3] }));
    // Reads only: the last session is [1].
    assert_eq!(pairs(&["--mine", "reads"]), json!({ "pairs": all[..3] }));
    // One session per request: only the two-block requests pair.
    assert_eq!(
        pairs(&["--session", "request"]),
        json!({ "pairs": [pair(0, 1, 2)] })
    );
    // Window 1: each block pairs with the next one of its session only.
    assert_eq!(
        pairs(&["--window", "1"]),
        json!({ "pairs": [pair(0, 1, 2), pair(1, 5, 2), pair(1, 9, 1)] })
    );
    // 1 KiB blocks: sectors 0-1 are block 0, 5 is block 2, 9 is block 4.
    assert_eq!(
        pairs(&["--block-size", "1024"]),
        json!({ "pairs": [pair(0, 2, 2), pair(0, 4, 1)] })
    );
}

#[test]
fn bad_flags_are_named() {
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["pairs", "x.txt", "--support", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--support 0"));
}
