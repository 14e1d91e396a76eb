//! Shared test helpers: an in-process server on a temp Unix socket backed by a real file,
//! and a raw protocol client for the abuse tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use reblock_nbd::proto;
use reblock_nbd::{ExportSet, FileExport, Listen, RunningServer, Server, ServerConfig};

pub struct Fixture {
    // Dropped first: the server stops before its directory goes.
    pub server: Option<RunningServer>,
    pub dir: tempfile::TempDir,
    pub image: PathBuf,
    pub socket: PathBuf,
}

impl Fixture {
    /// Serves a file of `size` bytes filled with `pattern(i)` as export "disk" (also the
    /// default export).
    pub fn new(size: usize, read_only: bool, config: ServerConfig) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("disk.img");
        std::fs::write(&image, pattern(size)).unwrap();
        let socket = dir.path().join("nbd.sock");
        let export = Arc::new(FileExport::open(&image, read_only).unwrap());
        let exports = ExportSet::single("disk", export).unwrap();
        let server = Server::bind(&Listen::Unix(socket.clone()), exports, config).unwrap();
        Fixture {
            server: Some(server.start().unwrap()),
            dir,
            image,
            socket,
        }
    }

    pub fn uri(&self) -> String {
        format!("nbd+unix:///disk?socket={}", self.socket.display())
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(&self.socket)
    }

    pub fn image_bytes(&self) -> Vec<u8> {
        std::fs::read(&self.image).unwrap()
    }
}

/// Deterministic non-trivial content: byte i is a mix of i's bytes.
pub fn pattern(size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ (i >> 12) as u8)
        .collect()
}

/// Runs a client tool; panics with its output when it is missing or fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| {
        panic!(
            "{cmd:?}: {e}. The NBD interop tests need the packages \
             libnbd-bin qemu-utils fio nbdkit (apt-get install them)"
        )
    })
}

/// A raw NBD client speaking bytes, for protocol-abuse tests.
pub struct Raw {
    pub s: UnixStream,
}

impl Raw {
    pub fn connect(path: &Path) -> Raw {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw { s }
    }

    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        self.s.read_exact(&mut b).unwrap();
        b
    }

    pub fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    /// Reads the greeting and answers with `client_flags`.
    pub fn hello(&mut self, client_flags: u32) {
        let g = self.read_n(18);
        assert_eq!(&g[..16], b"NBDMAGICIHAVEOPT");
        self.send(&client_flags.to_be_bytes());
    }

    pub fn option(&mut self, option: u32, data: &[u8]) {
        let mut b = Vec::new();
        b.extend_from_slice(b"IHAVEOPT");
        b.extend_from_slice(&option.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
        self.send(&b);
    }

    /// One option reply: (option, reply type, data).
    pub fn option_reply(&mut self) -> (u32, u32, Vec<u8>) {
        let h = self.read_n(20);
        assert_eq!(
            &h[..8],
            &0x0003_e889_0455_65a9u64.to_be_bytes(),
            "option reply magic"
        );
        let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let rep = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        (opt, rep, self.read_n(len))
    }

    /// Full handshake with NBD_OPT_GO; returns (size, transmission flags).
    pub fn go(&mut self, name: &str, structured: bool) -> (u64, u16) {
        self.hello(3);
        if structured {
            self.option(8, &[]);
            assert_eq!(self.option_reply(), (8, 1, vec![]));
        }
        self.option(7, &info_data(name, &[]));
        let (_, rep, info) = self.option_reply();
        assert_eq!(rep, 3, "first GO reply is NBD_REP_INFO");
        assert_eq!(&info[..2], &[0, 0], "NBD_INFO_EXPORT");
        let size = u64::from_be_bytes(info[2..10].try_into().unwrap());
        let flags = u16::from_be_bytes(info[10..12].try_into().unwrap());
        assert_eq!(self.option_reply(), (7, 1, vec![]), "GO ends with ACK");
        (size, flags)
    }

    pub fn request(&mut self, kind: u16, flags: u16, cookie: u64, offset: u64, length: u32) {
        let h = proto::RequestHeader {
            flags,
            kind,
            cookie,
            offset,
            length,
        };
        self.send(&proto::encode_request_header(&h));
    }

    /// A simple reply header: (errno, cookie).
    pub fn simple_reply(&mut self) -> (u32, u64) {
        let b = self.read_n(16);
        assert_eq!(&b[..4], &[0x67, 0x44, 0x66, 0x98], "simple reply magic");
        (
            u32::from_be_bytes(b[4..8].try_into().unwrap()),
            u64::from_be_bytes(b[8..].try_into().unwrap()),
        )
    }

    /// One structured chunk: (flags, type, cookie, payload).
    pub fn chunk(&mut self) -> (u16, u16, u64, Vec<u8>) {
        let b = self.read_n(20);
        let h = proto::parse_chunk_header(b[..].try_into().unwrap()).unwrap();
        let payload = self.read_n(h.length as usize);
        (h.flags, h.kind, h.cookie, payload)
    }

    /// True when the server closed the connection (EOF or reset) within the timeout.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.s.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// NBD_OPT_INFO / GO data.
pub fn info_data(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}
