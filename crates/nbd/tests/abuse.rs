//! Protocol abuse over a raw socket: every malformed or hostile input gets the exact
//! reply the protocol asks for, or a clean close, and the server keeps serving the next
//! client with its data intact.

mod common;

use common::{info_data, pattern, Fixture, Raw};
use reblock_nbd::ServerConfig;

const SIZE: usize = 1 << 20;
const ERR_UNSUP: u32 = 0x8000_0001;
const ERR_INVALID: u32 = 0x8000_0003;
const ERR_UNKNOWN: u32 = 0x8000_0006;
const ERR_TOO_BIG: u32 = 0x8000_0009;

fn fixture() -> Fixture {
    Fixture::new(SIZE, false, ServerConfig::default())
}

/// A fresh client still gets correct data: the server survived and nothing was corrupted.
fn assert_still_serves(f: &Fixture) {
    let mut c = f.raw();
    assert_eq!(c.go("disk", false).0, SIZE as u64);
    c.request(0, 0, 42, 8192, 4096);
    assert_eq!(c.simple_reply(), (0, 42));
    assert_eq!(c.read_n(4096), pattern(SIZE)[8192..12288]);
    assert_eq!(f.image_bytes(), pattern(SIZE), "backing file unchanged");
}

#[test]
fn bad_option_magic_closes_and_next_client_is_served() {
    let f = fixture();
    let mut c = f.raw();
    c.hello(3);
    c.send(b"IHAVEOPX\0\0\0\x07\0\0\0\0");
    assert!(c.closed());
    assert_still_serves(&f);
}

#[test]
fn unknown_client_flags_close_the_connection() {
    let f = fixture();
    let mut c = f.raw();
    c.hello(1 << 5);
    assert!(c.closed());
    assert_still_serves(&f);
}

#[test]
fn unknown_option_and_starttls_are_unsupported_and_haggling_continues() {
    let f = fixture();
    let mut c = f.raw();
    c.hello(3);
    c.option(99, b"junk");
    let (opt, rep, _) = c.option_reply();
    assert_eq!((opt, rep), (99, ERR_UNSUP));
    c.option(5, &[]);
    assert_eq!(
        c.option_reply().1,
        ERR_UNSUP,
        "STARTTLS: TLS not implemented"
    );
    c.option(7, &info_data("disk", &[]));
    assert_eq!(c.option_reply().1, 3, "GO still works after errors");
}

#[test]
fn unknown_export_name_is_refused_by_go_and_closes_export_name() {
    let f = fixture();
    let mut c = f.raw();
    c.hello(3);
    c.option(7, &info_data("nope", &[]));
    let (opt, rep, msg) = c.option_reply();
    assert_eq!((opt, rep), (7, ERR_UNKNOWN));
    assert!(String::from_utf8_lossy(&msg).contains("nope"));
    // EXPORT_NAME cannot answer with an error: the server must close.
    c.option(1, b"nope");
    assert!(c.closed());
    assert_still_serves(&f);
}

#[test]
fn malformed_info_and_oversized_options_get_errors() {
    let f = fixture();
    let mut c = f.raw();
    c.hello(3);
    let mut bad = info_data("disk", &[1]);
    bad.pop();
    c.option(6, &bad);
    assert_eq!(c.option_reply().1, ERR_INVALID, "lengths do not add up");
    c.option(3, b"x");
    assert_eq!(c.option_reply().1, ERR_INVALID, "LIST takes no data");
    c.option(6, &vec![0u8; 1 << 20]);
    assert_eq!(
        c.option_reply().1,
        ERR_TOO_BIG,
        "1 MiB option consumed and refused"
    );
    c.option(6, &info_data("", &[1, 2, 3, 3, 77]));
    let mut replies = Vec::new();
    loop {
        let (_, rep, data) = c.option_reply();
        if rep == 1 {
            break;
        }
        assert_eq!(rep, 3);
        replies.push(data);
    }
    let types: Vec<u16> = replies
        .iter()
        .map(|d| u16::from_be_bytes([d[0], d[1]]))
        .collect();
    assert_eq!(
        types,
        vec![0, 1, 2, 3],
        "EXPORT first, each asked-for info once, 77 ignored"
    );
    assert_eq!(&replies[1][2..], b"disk", "the default export's real name");
    let bs: Vec<u32> = replies[3][2..]
        .chunks(4)
        .map(|b| u32::from_be_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(bs, vec![1, 4096, 32 << 20]);
}

#[test]
fn list_and_abort() {
    let f = fixture();
    let mut c = f.raw();
    c.hello(3);
    c.option(3, &[]);
    let (_, rep, data) = c.option_reply();
    assert_eq!(rep, 2, "NBD_REP_SERVER");
    assert_eq!(&data[..8], b"\0\0\0\x04disk");
    assert_eq!(c.option_reply(), (3, 1, vec![]));
    c.option(2, &[]);
    assert_eq!(c.option_reply(), (2, 1, vec![]), "ABORT is acknowledged");
    assert!(c.closed());
}

#[test]
fn export_name_reply_honours_no_zeroes() {
    let f = fixture();
    for (client_flags, reply_len) in [(3u32, 10usize), (1, 134)] {
        let mut c = f.raw();
        c.hello(client_flags);
        c.option(1, b"disk");
        let r = c.read_n(reply_len);
        assert_eq!(u64::from_be_bytes(r[..8].try_into().unwrap()), SIZE as u64);
        assert!(r[10..].iter().all(|&b| b == 0));
        c.request(0, 0, 1, 0, 512);
        assert_eq!(
            c.simple_reply(),
            (0, 1),
            "transmission follows the reply directly"
        );
    }
}

#[test]
fn unknown_command_bad_flags_and_ranges_get_errno_and_connection_continues() {
    let f = fixture();
    let mut c = f.raw();
    c.go("disk", false);
    c.request(9, 0, 1, 0, 512);
    assert_eq!(c.simple_reply(), (22, 1), "unknown command: EINVAL");
    c.request(0, 1 << 9, 2, 0, 512);
    assert_eq!(c.simple_reply(), (22, 2), "unknown flag: EINVAL");
    c.request(0, 0, 3, SIZE as u64 - 100, 512);
    assert_eq!(c.simple_reply(), (22, 3), "read past the end: EINVAL");
    c.request(0, 0, 4, u64::MAX - 10, 512);
    assert_eq!(c.simple_reply(), (22, 4), "offset overflow: EINVAL");
    c.request(3, 0, 5, 0, 1);
    assert_eq!(c.simple_reply(), (22, 5), "flush with a length: EINVAL");
    c.request(0, 0, 6, 0, 2 << 30);
    assert_eq!(
        c.simple_reply(),
        (75, 6),
        "read over the request limit: EOVERFLOW"
    );
    c.request(1, 0, 7, SIZE as u64, 4096);
    c.send(&[0xee; 4096]);
    assert_eq!(c.simple_reply(), (28, 7), "write past the end: ENOSPC");
    c.request(0, 0, 8, 0, 4096);
    assert_eq!(
        c.simple_reply(),
        (0, 8),
        "the refused write's payload was consumed"
    );
    assert_eq!(c.read_n(4096), pattern(SIZE)[..4096]);
    assert_still_serves(&f);
}

#[test]
fn oversized_write_payload_is_consumed_and_refused_with_eoverflow() {
    let f = Fixture::new(
        SIZE,
        false,
        ServerConfig {
            max_request_bytes: 32 << 20,
            ..ServerConfig::default()
        },
    );
    let mut c = f.raw();
    c.go("disk", false);
    let len = (32 << 20) + 4096;
    c.request(1, 0, 9, 0, len);
    c.send(&vec![0xee; len as usize]);
    assert_eq!(c.simple_reply(), (75, 9));
    c.request(0, 0, 10, 0, 16);
    assert_eq!(c.simple_reply(), (0, 10));
    assert_eq!(c.read_n(16), pattern(SIZE)[..16]);
    assert_still_serves(&f);
}

#[test]
fn requests_past_the_advertised_maximum_are_streamed_both_ways() {
    let size = 64 << 20;
    let f = Fixture::new(size, false, ServerConfig::default());
    let len = 48 << 20;
    let data: Vec<u8> = pattern(len).iter().map(|b| !b).collect();
    let mut c = f.raw();
    c.go("disk", false);
    c.request(1, 1, 1, 4096, len as u32);
    c.send(&data);
    assert_eq!(c.simple_reply(), (0, 1), "a 48 MiB FUA write");
    c.request(0, 0, 2, 4096, len as u32);
    assert_eq!(c.simple_reply(), (0, 2));
    assert!(c.read_n(len) == data, "a 48 MiB simple read");
    let mut s = f.raw();
    s.go("disk", true);
    s.request(0, 0, 3, 4096, len as u32);
    let (flags, kind, cookie, payload) = s.chunk();
    assert_eq!(
        (flags, kind, cookie),
        (1, 1, 3),
        "one OFFSET_DATA chunk with DONE"
    );
    assert!(payload[8..] == data[..], "a 48 MiB structured read");
    s.request(0, 0, 4, size as u64 - 4096, 8192);
    assert_eq!(s.chunk().1, 0x8001, "and errors still come as error chunks");
    let file = f.image_bytes();
    assert!(file[4096..4096 + len] == data[..]);
    assert_eq!(
        file[..4096],
        pattern(size)[..4096],
        "bytes around it unchanged"
    );
}

#[test]
fn structured_reads_send_one_final_data_chunk_and_error_chunks() {
    let f = fixture();
    let mut c = f.raw();
    let (_, flags) = c.go("disk", true);
    assert_ne!(flags & (1 << 7), 0, "SEND_DF with structured replies");
    c.request(0, 1 << 2, 11, 12345, 1000);
    let (fl, kind, cookie, payload) = c.chunk();
    assert_eq!((fl, kind, cookie), (1, 1, 11), "OFFSET_DATA with DONE");
    assert_eq!(u64::from_be_bytes(payload[..8].try_into().unwrap()), 12345);
    assert_eq!(&payload[8..], &pattern(SIZE)[12345..13345]);
    c.request(0, 0, 12, SIZE as u64, 1);
    let (fl, kind, cookie, payload) = c.chunk();
    assert_eq!((fl, kind, cookie), (1, 0x8001, 12), "ERROR chunk with DONE");
    assert_eq!(&payload[..4], &22u32.to_be_bytes());
    let msg_len = u16::from_be_bytes([payload[4], payload[5]]) as usize;
    assert_eq!(payload.len(), 6 + msg_len);
    c.request(4, 0, 13, 0, 4096);
    assert_eq!(
        c.simple_reply(),
        (0, 13),
        "non-read success may use a simple reply"
    );
}

#[test]
fn bad_request_magic_closes_and_next_client_is_served() {
    let f = fixture();
    let mut c = f.raw();
    c.go("disk", false);
    let mut h = [0u8; 28];
    h[..4].copy_from_slice(&0x2560_9514u32.to_be_bytes());
    c.send(&h);
    assert!(c.closed());
    assert_still_serves(&f);
}

#[test]
fn truncated_header_and_vanishing_mid_write_leave_data_intact() {
    let f = fixture();
    let mut c = f.raw();
    c.go("disk", false);
    c.send(&[0x25, 0x60, 0x95, 0x13, 0, 0, 0]);
    drop(c);
    let mut c = f.raw();
    c.go("disk", false);
    c.request(1, 0, 14, 0, 65536);
    c.send(&[0xee; 1000]);
    drop(c);
    // The server must not have written a partial payload.
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_still_serves(&f);
}

#[test]
fn pipelined_requests_all_get_their_own_reply() {
    let f = fixture();
    let mut c = f.raw();
    c.go("disk", false);
    for i in 0..64u64 {
        c.request(0, 0, 1000 + i, i * 4096, 4096);
    }
    let mut seen = std::collections::BTreeSet::new();
    let data = pattern(SIZE);
    for _ in 0..64 {
        let (errno, cookie) = c.simple_reply();
        assert_eq!(errno, 0);
        let i = (cookie - 1000) as usize;
        assert_eq!(
            c.read_n(4096),
            data[i * 4096..(i + 1) * 4096],
            "cookie {cookie}"
        );
        assert!(seen.insert(cookie), "cookie {cookie} answered twice");
    }
    assert_eq!(seen.len(), 64);
}

#[test]
fn writes_then_disc_are_completed_before_close() {
    let f = fixture();
    let mut c = f.raw();
    c.go("disk", false);
    c.request(1, 1, 20, 4096, 4);
    c.send(b"abcd");
    c.request(3, 0, 21, 0, 0);
    c.request(2, 0, 22, 0, 0);
    let mut cookies = vec![c.simple_reply(), c.simple_reply()];
    cookies.sort();
    assert_eq!(cookies, vec![(0, 20), (0, 21)]);
    assert!(c.closed(), "no reply to DISC; the server closes");
    assert_eq!(&f.image_bytes()[4096..4100], b"abcd");
}

#[test]
fn read_only_export_refuses_writes_with_eperm() {
    let f = Fixture::new(SIZE, true, ServerConfig::default());
    let mut c = f.raw();
    let (_, flags) = c.go("disk", false);
    assert_eq!(flags & 0b10, 0b10, "READ_ONLY advertised");
    assert_eq!(
        flags & (1 << 2 | 1 << 3 | 1 << 5 | 1 << 6),
        0,
        "no write-side features"
    );
    c.request(1, 0, 30, 0, 8);
    c.send(&[0xee; 8]);
    assert_eq!(c.simple_reply(), (1, 30));
    c.request(6, 0, 31, 0, 4096);
    assert_eq!(c.simple_reply(), (1, 31));
    assert_still_serves(&f);
}

#[test]
fn shutdown_closes_idle_clients_and_removes_the_socket() {
    let mut f = fixture();
    let mut idle = f.raw();
    idle.go("disk", false);
    let mut haggling = f.raw();
    haggling.hello(3);
    f.server.take().unwrap().shutdown();
    assert!(idle.closed());
    assert!(haggling.closed());
    assert!(!f.socket.exists());
    assert!(std::os::unix::net::UnixStream::connect(&f.socket).is_err());
}

#[test]
fn a_stale_socket_file_is_replaced_but_a_live_one_is_not() {
    let f = fixture();
    let export = std::sync::Arc::new(reblock_nbd::MemoryExport::new(4096, false));
    let exports = reblock_nbd::ExportSet::single("m", export).unwrap();
    let listen = reblock_nbd::Listen::Unix(f.socket.clone());
    let err = reblock_nbd::Server::bind(&listen, exports.clone(), ServerConfig::default()).err();
    assert_eq!(err.map(|e| e.kind()), Some(std::io::ErrorKind::AddrInUse));
    let stale = f.dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let s = reblock_nbd::Server::bind(
        &reblock_nbd::Listen::Unix(stale.clone()),
        exports,
        ServerConfig::default(),
    );
    let running = s.unwrap().start().unwrap();
    assert_eq!(Raw::connect(&stale).go("m", false).0, 4096);
    running.shutdown();
}

#[test]
fn shutdown_returns_even_when_the_socket_file_was_deleted() {
    // Regression: stop() used to wake accept() only by connecting to the socket path.
    let mut f = fixture();
    std::fs::remove_file(&f.socket).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = f.server.take().unwrap();
    std::thread::spawn(move || {
        server.shutdown();
        tx.send(()).unwrap();
    });
    assert!(
        rx.recv_timeout(std::time::Duration::from_secs(10)).is_ok(),
        "shutdown hung"
    );
}
