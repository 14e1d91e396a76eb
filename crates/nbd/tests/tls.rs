//! TLS with real clients: qemu-io with x509 credentials and nbdinfo over `nbds://`
//! against the in-process server on TCP, with the test certificates in tests/certs.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use common::{pattern, run, run_ok};
use reblock_nbd::{
    tls_server_config, ExportSet, FileExport, Listen, RunningServer, Server, ServerConfig,
    TlsPolicy,
};

const SIZE: usize = 4 << 20;

fn certs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/certs")
}

struct TlsFixture {
    server: Option<RunningServer>,
    port: u16,
    image: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for TlsFixture {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

fn serve(require: bool) -> TlsFixture {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    std::fs::write(&image, pattern(SIZE)).unwrap();
    let c = certs();
    let config = tls_server_config(&c.join("server-cert.pem"), &c.join("server-key.pem")).unwrap();
    let tls = if require {
        TlsPolicy::Require(config)
    } else {
        TlsPolicy::On(config)
    };
    let export = Arc::new(FileExport::open(&image, false).unwrap());
    let exports = ExportSet::single("disk", export).unwrap();
    let server = Server::bind(
        &Listen::tcp_loopback(0),
        exports,
        ServerConfig {
            tls,
            ..ServerConfig::default()
        },
    )
    .unwrap()
    .start()
    .unwrap();
    let Listen::Tcp(addr) = server.endpoint() else {
        unreachable!()
    };
    TlsFixture {
        port: addr.port(),
        server: Some(server),
        image,
        _dir: dir,
    }
}

fn qemu_io(port: u16, cmds: &[&str]) -> std::process::Output {
    let mut c = Command::new("qemu-io");
    c.arg("--object").arg(format!(
        "tls-creds-x509,id=tls0,dir={},endpoint=client",
        certs().display()
    ));
    c.arg("--image-opts").arg(format!(
        "driver=nbd,host=localhost,port={port},export=disk,tls-creds=tls0"
    ));
    for x in cmds {
        c.args(["-c", x]);
    }
    run(&mut c)
}

#[test]
fn qemu_io_with_x509_credentials_writes_and_reads_over_tls() {
    let f = serve(true);
    let out = qemu_io(
        f.port,
        &["write -P 0x5a 65536 1M", "read -P 0x5a 65536 1M", "flush"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!text.contains("verification failed"), "{text}");
    let file = std::fs::read(&f.image).unwrap();
    assert!(file[65536..65536 + (1 << 20)].iter().all(|&b| b == 0x5a));
    assert_eq!(file[..65536], pattern(SIZE)[..65536]);
}

#[test]
fn nbdinfo_over_nbds_sees_tls_and_a_plain_client_is_refused_when_required() {
    let f = serve(true);
    let uri = format!(
        "nbds://localhost:{}/disk?tls-certificates={}",
        f.port,
        certs().display()
    );
    let out = run_ok(Command::new("nbdinfo").arg("--json").arg(&uri));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"TLS\": true"), "{text}");
    assert!(text.contains(&format!("\"export-size\": {SIZE}")), "{text}");
    let plain = run(Command::new("nbdinfo").arg(format!("nbd://localhost:{}/disk", f.port)));
    assert!(
        !plain.status.success(),
        "plain text must be refused: {plain:?}"
    );
    let err = String::from_utf8_lossy(&plain.stderr);
    assert!(err.contains("opt_go"), "GO was refused (TLS_REQD): {err}");
}

#[test]
fn with_tls_on_both_plain_and_tls_clients_are_served() {
    let f = serve(false);
    let plain = run_ok(Command::new("nbdinfo").arg(format!("nbd://localhost:{}/disk", f.port)));
    assert!(String::from_utf8_lossy(&plain.stdout).contains(&SIZE.to_string()));
    let out = qemu_io(f.port, &["read -P 0 0 4k"]);
    // pattern() is not zero there: qemu-io's verification must fail, over TLS.
    assert!(String::from_utf8_lossy(&out.stdout).contains("Pattern verification failed"));
}
