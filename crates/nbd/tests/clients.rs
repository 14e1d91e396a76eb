//! Interop with real NBD clients (libnbd-bin: nbdinfo, nbdcopy; qemu-utils: qemu-io,
//! qemu-img; fio with its nbd engine) against the server started in-process on a temp
//! Unix socket, backed by a real file.

mod common;

use std::process::Command;
use std::sync::{Arc, Mutex};

use common::{pattern, run, run_ok, Fixture};
use reblock_nbd::{
    ExportSet, FileExport, Listen, MemoryExport, Op, RequestEvent, RequestObserver, Server,
    ServerConfig,
};

const SIZE: usize = 8 << 20;

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run_ok(cmd).stdout).unwrap()
}

fn json_field<'a>(json: &'a str, key: &str) -> &'a str {
    let at = json
        .find(&format!("\"{key}\""))
        .unwrap_or_else(|| panic!("{key} in {json}"));
    let rest = json[at..].split_once(':').unwrap().1.trim_start();
    let end = rest.find([',', '\n', '}']).unwrap();
    rest[..end].trim()
}

#[test]
fn nbdinfo_reports_size_flags_and_block_sizes() {
    let f = Fixture::new(SIZE, false, ServerConfig::default());
    let out = stdout(Command::new("nbdinfo").arg("--json").arg(f.uri()));
    assert_eq!(json_field(&out, "export-size"), SIZE.to_string());
    for (key, want) in [
        ("is_read_only", "false"),
        ("can_flush", "true"),
        ("can_fua", "true"),
        ("can_trim", "true"),
        ("can_zero", "true"),
        ("can_multi_conn", "true"),
        ("can_cache", "false"),
        ("block_size_maximum", "33554432"),
        ("block_size_preferred", "4096"),
    ] {
        assert_eq!(json_field(&out, key), want, "{key} in {out}");
    }
    assert!(out.contains("\"protocol\": \"newstyle-fixed\""), "{out}");
    assert!(out.contains("\"TLS\": false"), "{out}");
}

#[test]
fn nbdinfo_lists_every_export_with_its_description() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("a.img");
    std::fs::write(&img, vec![0u8; 65536]).unwrap();
    let mut exports = ExportSet::new();
    exports
        .add("alpha", Arc::new(FileExport::open(&img, true).unwrap()))
        .unwrap();
    exports
        .add("beta", Arc::new(MemoryExport::new(4096, false)))
        .unwrap();
    let sock = dir.path().join("s");
    let server = Server::bind(
        &Listen::Unix(sock.clone()),
        exports,
        ServerConfig::default(),
    )
    .unwrap();
    let _running = server.start().unwrap();
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    let out = stdout(
        Command::new("nbdinfo")
            .arg("--list")
            .arg("--json")
            .arg(&uri),
    );
    assert!(out.contains("\"export-name\": \"alpha\""), "{out}");
    assert!(out.contains("\"export-name\": \"beta\""), "{out}");
    assert!(out.contains(&format!("file {}", img.display())), "{out}");
    assert!(out.contains("\"export-size\": 65536"), "{out}");
    assert!(out.contains("\"export-size\": 4096"), "{out}");
}

#[test]
fn qemu_io_pattern_writes_read_back_and_land_in_the_file() {
    let f = Fixture::new(SIZE, false, ServerConfig::default());
    run_ok(Command::new("qemu-io").args(["-f", "raw", &f.uri()]).args([
        "-c",
        "write -P 0xab 0 64k",
        "-c",
        "write -P 0x5a 1000 3000",
        "-c",
        "write -z 1m 128k",
        "-c",
        "discard 2m 64k",
        "-c",
        "flush",
        "-c",
        "read -P 0xab 0 1000",
        "-c",
        "read -P 0x5a 1000 3000",
        "-c",
        "read -P 0xab 4000 61536",
        "-c",
        "read -P 0 1m 128k",
    ]));
    let bytes = f.image_bytes();
    let mut want = pattern(SIZE);
    want[..65536].fill(0xab);
    want[1000..4000].fill(0x5a);
    want[1 << 20..(1 << 20) + (128 << 10)].fill(0);
    // The discarded range's content is unspecified; compare everything else.
    want[2 << 20..(2 << 20) + (64 << 10)].copy_from_slice(&bytes[2 << 20..(2 << 20) + (64 << 10)]);
    assert!(
        bytes == want,
        "backing file differs from the expected image"
    );
    // A failing pattern check must fail the command (the test can fail).
    let bad = run(Command::new("qemu-io").args(["-f", "raw", &f.uri(), "-c", "read -P 0xcd 0 4k"]));
    let text =
        String::from_utf8_lossy(&bad.stdout).to_string() + &String::from_utf8_lossy(&bad.stderr);
    assert!(text.contains("Pattern verification failed"), "{text}");
}

#[test]
fn qemu_img_compare_matches_the_expected_image_and_detects_a_difference() {
    let f = Fixture::new(SIZE, false, ServerConfig::default());
    let expected = f.dir.path().join("expected.img");
    std::fs::write(&expected, pattern(SIZE)).unwrap();
    run_ok(
        Command::new("qemu-img")
            .args(["compare", "-f", "raw", "-F", "raw"])
            .arg(&expected)
            .arg(f.uri()),
    );
    run_ok(Command::new("qemu-io").args(["-f", "raw", &f.uri(), "-c", "write -P 0x01 4096 512"]));
    let out = run(Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&expected)
        .arg(f.uri()));
    assert_eq!(out.status.code(), Some(1), "images differ after the write");
}

#[test]
fn nbdcopy_out_and_in_with_multiple_connections() {
    let f = Fixture::new(SIZE, false, ServerConfig::default());
    let out_file = f.dir.path().join("out.img");
    run_ok(
        Command::new("nbdcopy")
            .args(["--connections=4", "--requests=16"])
            .arg(f.uri())
            .arg(&out_file),
    );
    assert!(
        std::fs::read(&out_file).unwrap() == pattern(SIZE),
        "copied-out image differs"
    );

    let src = f.dir.path().join("src.img");
    let new: Vec<u8> = pattern(SIZE)
        .iter()
        .map(|b| b.rotate_left(3) ^ 0x5c)
        .collect();
    std::fs::write(&src, &new).unwrap();
    run_ok(
        Command::new("nbdcopy")
            .args(["--connections=4", "--flush"])
            .arg(&src)
            .arg(f.uri()),
    );
    assert!(f.image_bytes() == new, "copied-in image differs");
}

#[test]
fn fio_random_writes_verify_with_crc32c() {
    let f = Fixture::new(SIZE, false, ServerConfig::default());
    let out = run_ok(
        Command::new("fio")
            .args([
                "--name=verify",
                "--ioengine=nbd",
                "--rw=randwrite",
                "--bs=4k",
            ])
            .args([
                "--iodepth=16",
                "--verify=crc32c",
                "--do_verify=1",
                "--verify_state_save=0",
                "--size=4m",
            ])
            .args(["--randrepeat=1", "--output-format=json"])
            .arg(format!("--uri={}", f.uri())),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"error\" : 0"), "{text}");
    assert!(!text.contains("verify: bad"), "{text}");
    let changed = f.image_bytes()[..4 << 20] != pattern(SIZE)[..4 << 20];
    assert!(changed, "fio's writes reached the backing file");
}

#[test]
fn read_only_export_refuses_qemu_io_writes() {
    let f = Fixture::new(SIZE, true, ServerConfig::default());
    let out = stdout(Command::new("nbdinfo").arg("--json").arg(f.uri()));
    assert_eq!(json_field(&out, "is_read_only"), "true");
    assert_eq!(json_field(&out, "can_trim"), "false");
    let w =
        run(Command::new("qemu-io").args(["-f", "raw", "-r", &f.uri(), "-c", "write -P 1 0 4k"]));
    let text = String::from_utf8_lossy(&w.stdout).to_string() + &String::from_utf8_lossy(&w.stderr);
    assert!(!text.contains("wrote 4096"), "{text}");
    assert!(f.image_bytes() == pattern(SIZE));
}

#[test]
fn tcp_binds_loopback_and_serves_nbdinfo() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("t.img");
    std::fs::write(&img, vec![7u8; 1 << 20]).unwrap();
    let exports = ExportSet::single("t", Arc::new(FileExport::open(&img, false).unwrap())).unwrap();
    let server = Server::bind(&Listen::tcp_loopback(0), exports, ServerConfig::default()).unwrap();
    let Listen::Tcp(addr) = server.endpoint().clone() else {
        panic!("tcp")
    };
    assert!(addr.ip().is_loopback());
    let running = server.start().unwrap();
    let out = stdout(
        Command::new("nbdinfo")
            .arg("--size")
            .arg(running.endpoint().uri("t")),
    );
    assert_eq!(out.trim(), (1 << 20).to_string());
    run_ok(
        Command::new("qemu-io")
            .args(["-f", "raw", &running.endpoint().uri("t")])
            .args(["-c", "read -P 7 0 1m"]),
    );
    running.shutdown();
}

#[derive(Default)]
struct Recorder(Mutex<Vec<RequestEvent>>);

impl RequestObserver for Recorder {
    fn observe(&self, event: &RequestEvent) {
        self.0.lock().unwrap().push(*event);
    }
}

#[test]
fn observer_sees_each_request_with_offset_length_op_and_connection() {
    let rec = Arc::new(Recorder::default());
    let config = ServerConfig {
        observer: Some(rec.clone()),
        ..ServerConfig::default()
    };
    let f = Fixture::new(SIZE, false, config);
    run_ok(Command::new("qemu-io").args(["-f", "raw", &f.uri()]).args([
        "-c",
        "write -P 1 8192 4096",
        "-c",
        "read 65536 512",
        "-c",
        "flush",
    ]));
    let events = rec.0.lock().unwrap().clone();
    let w = events
        .iter()
        .find(|e| e.op == Op::Write)
        .expect("write event");
    assert_eq!((w.offset_bytes, w.length_bytes, w.errno), (8192, 4096, 0));
    let r = events
        .iter()
        .find(|e| e.op == Op::Read && e.offset_bytes == 65536)
        .expect("read event");
    assert_eq!(r.length_bytes, 512);
    assert!(r.ts_ns >= w.ts_ns, "timestamps follow request order");
    assert!(events.iter().any(|e| e.op == Op::Flush));
    assert!(events.iter().all(|e| e.connection_id == w.connection_id));
}
