//! `reblock serve` checks everything before it touches the image, refuses options that
//! conflict with an existing image (naming both values), keeps its sockets private
//! whatever the umask, serves TLS to qemu-io, and warns when reachable beyond loopback
//! without TLS.

mod common;

use assert_cmd::cargo::cargo_bin;
use common::wait_for;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn serve(args: &[&str]) -> Output {
    Command::new(cargo_bin("reblock"))
        .arg("serve")
        .args(args)
        .output()
        .unwrap()
}

fn refused(args: &[&str]) -> String {
    let out = serve(args);
    assert!(
        !out.status.success(),
        "serve {args:?} was accepted: {out:?}"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Serves until `sock` appears, then stops cleanly.
fn serve_once(args: &[&str], sock: &Path) {
    let mut child = Command::new(cargo_bin("reblock"))
        .arg("serve")
        .args(args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(sock, &mut child);
    stop(child);
}

fn stop(mut child: Child) {
    assert!(common::terminate(&mut child).success());
}

fn certs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../nbd/tests/certs")
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn an_impossible_listen_path_fails_without_creating_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let err = refused(&[
        img.to_str().unwrap(),
        "--create",
        "4M",
        "--bopt-size",
        "2M",
        "--unix",
        "/nonexistent/dir/nbd.sock",
        "--control",
        dir.path().join("c.ctl").to_str().unwrap(),
    ]);
    assert!(err.contains("/nonexistent/dir/nbd.sock"), "{err}");
    assert!(!img.exists(), "the image was created: {err}");
    let err = refused(&[
        img.to_str().unwrap(),
        "--create",
        "4M",
        "--tcp",
        "1.2.3.4:5",
    ]);
    assert!(err.contains("1.2.3.4:5"), "{err}");
    assert!(!img.exists());
}

#[test]
fn read_only_create_of_a_missing_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let sock = dir.path().join("s");
    let err = refused(&[
        img.to_str().unwrap(),
        "--create",
        "4M",
        "--read-only",
        "--unix",
        sock.to_str().unwrap(),
    ]);
    assert!(
        err.contains("does not exist") && err.contains("--read-only") && err.contains("--create"),
        "{err}"
    );
    assert!(!img.exists() && !sock.exists());
}

#[test]
fn options_conflicting_with_an_existing_image_name_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let s = sock.to_str().unwrap();
    let plain = dir.path().join("plain.img");
    std::fs::File::create(&plain)
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let p = plain.to_str().unwrap();
    let err = refused(&[p, "--create", "2G", "--bopt-size", "8M", "--unix", s]);
    assert!(err.contains("2 GiB") && err.contains("8 GiB"), "{err}");
    assert_eq!(
        std::fs::metadata(&plain).unwrap().len(),
        8 << 30,
        "untouched"
    );

    let img = dir.path().join("disk.img");
    let i = img.to_str().unwrap();
    serve_once(
        &[i, "--create", "16M", "--bopt-size", "8M", "--unix", s],
        &sock,
    );
    let before = std::fs::read(&img).unwrap();
    let err = refused(&[i, "--create", "32M", "--unix", s]);
    assert!(err.contains("32 MiB") && err.contains("16 MiB"), "{err}");
    let err = refused(&[i, "--bopt-size", "16M", "--unix", s]);
    assert!(
        err.contains("--bopt-size 16 MiB") && err.contains("pages"),
        "{err}"
    );
    let err = refused(&[i, "--page-size", "8192", "--unix", s]);
    assert!(err.contains("8192") && err.contains("4096"), "{err}");
    assert!(
        std::fs::read(&img).unwrap() == before,
        "a refusal changed the image"
    );
    // The values it was made with are fine.
    serve_once(
        &[i, "--create", "16M", "--bopt-size", "8M", "--unix", s],
        &sock,
    );
}

#[test]
fn sockets_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    for (mode, want) in [(None, 0o600), (Some("0660"), 0o660)] {
        let img = dir.path().join(format!("{want:o}.img"));
        let sock = dir.path().join(format!("{want:o}.sock"));
        let ctl = dir.path().join(format!("{want:o}.sock.ctl"));
        let mut cmd = format!(
            "umask 000; exec '{}' serve '{}' --create 4M --bopt-size 2M --unix '{}'",
            cargo_bin("reblock").display(),
            img.display(),
            sock.display()
        );
        if let Some(m) = mode {
            cmd.push_str(&format!(" --socket-mode {m}"));
        }
        let mut child = Command::new("sh")
            .args(["-c", &cmd])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&ctl, &mut child);
        wait_for(&sock, &mut child);
        let mode_of = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode_of(&sock), want, "NBD socket");
        assert_eq!(mode_of(&ctl), 0o600, "control socket");
        stop(child);
    }
    let err = refused(&["x.img", "--socket-mode", "0666", "--unix", "x.sock"]);
    assert!(err.contains("0666"), "{err}");
}

/// Starts serve on TCP and returns it with the stderr lines up to "serving".
fn serve_tcp(args: &[&str]) -> (Child, Vec<String>) {
    let mut child = Command::new(cargo_bin("reblock"))
        .arg("serve")
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    loop {
        let mut l = String::new();
        assert!(err.read_line(&mut l).unwrap() > 0, "serve ended: {lines:?}");
        let serving = l.contains("serving");
        lines.push(l);
        if serving {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (child, lines)
}

#[test]
fn tls_serves_qemu_io_and_plain_text_beyond_loopback_warns() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let i = img.to_str().unwrap();
    let c = certs();
    let (cert, key) = (c.join("server-cert.pem"), c.join("server-key.pem"));
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let (child, lines) = serve_tcp(&[
        i,
        "--create",
        "4M",
        "--bopt-size",
        "2M",
        "--tcp",
        &addr,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(
        lines.iter().any(|l| l.contains("TLS required")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("warning")), "{lines:?}");
    let out = Command::new("qemu-io")
        .arg("--object")
        .arg(format!(
            "tls-creds-x509,id=tls0,dir={},endpoint=client",
            c.display()
        ))
        .arg("--image-opts")
        .arg(format!(
            "driver=nbd,host=localhost,port={port},tls-creds=tls0"
        ))
        .args(["-c", "write -P 0x3c 0 64k", "-c", "read -P 0x3c 0 64k"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !text.contains("failed"), "{out:?}");
    stop(child);

    let err = refused(&[i, "--tcp", &addr, "--tls", "require"]);
    assert!(err.contains("--tls-cert"), "{err}");
    let wide = format!("0.0.0.0:{}", free_port());
    let (child, lines) = serve_tcp(&[i, "--tcp", &wide]);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("warning") && l.contains("without TLS")),
        "{lines:?}"
    );
    stop(child);
}
