//! The NBD reference implementation's conformance client (nbd-tester-client, a separate
//! GPL test program in tests/third_party/nbd-tester-client) runs its test cases against
//! `reblock serve`: reads, writes, flushes, read-only refusals, the handshake, Unix and
//! TCP, the integrity tests (the huge one sends requests up to 48 MiB) and, when GnuTLS's
//! headers are installed, the same over TLS.

use assert_cmd::cargo::cargo_bin;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn nbd_tester_client_cases_pass_against_serve() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/third_party/nbd-tester-client/run.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("REBLOCK", cargo_bin("reblock"))
        .output()
        .expect("bash runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) && std::env::var_os("CI").is_none() {
        // The client could not be built here (no C compiler or GLib headers). CI installs
        // them (.ci/run) and fails instead of skipping.
        eprintln!("skipped: nbd-tester-client could not be built: {err}");
        return;
    }
    assert!(out.status.success(), "{text}\n{err}");
    assert!(text.contains("PASS integrityhuge"), "{text}");
}
