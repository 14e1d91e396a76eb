//! A minimal NBD client (fixed newstyle, OPT_GO, simple replies) for the tests, and
//! helpers to serve an engine in-process.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

pub struct Client {
    s: UnixStream,
    cookie: u64,
    pub size: u64,
    /// Transmission flags the server advertised.
    pub flags: u16,
}

/// Transmission flag: a flush on one connection covers writes completed on all.
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

fn rd<const N: usize>(s: &mut UnixStream) -> [u8; N] {
    let mut b = [0u8; N];
    s.read_exact(&mut b).expect("read from server");
    b
}

impl Client {
    pub fn connect(path: &Path) -> std::io::Result<Client> {
        let mut s = UnixStream::connect(path)?;
        let magic: [u8; 16] = rd(&mut s);
        assert_eq!(&magic, b"NBDMAGICIHAVEOPT");
        let _flags: [u8; 2] = rd(&mut s);
        s.write_all(&3u32.to_be_bytes())?; // FIXED_NEWSTYLE | NO_ZEROES
        let mut opt = Vec::new();
        opt.extend_from_slice(&0x4948_4156_454F_5054u64.to_be_bytes());
        opt.extend_from_slice(&7u32.to_be_bytes()); // GO
        opt.extend_from_slice(&6u32.to_be_bytes());
        opt.extend_from_slice(&0u32.to_be_bytes()); // empty name
        opt.extend_from_slice(&0u16.to_be_bytes()); // no info requests
        s.write_all(&opt)?;
        let mut size = 0;
        let mut flags = 0;
        loop {
            let h: [u8; 20] = rd(&mut s);
            let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
            let mut data = vec![0u8; len];
            s.read_exact(&mut data)?;
            match kind {
                1 => break,
                3 if u16::from_be_bytes([data[0], data[1]]) == 0 => {
                    size = u64::from_be_bytes(data[2..10].try_into().unwrap());
                    flags = u16::from_be_bytes([data[10], data[11]]);
                }
                3 => {}
                other => panic!("option reply {other:#x}"),
            }
        }
        Ok(Client {
            s,
            cookie: 0,
            size,
            flags,
        })
    }

    fn request(
        &mut self,
        kind: u16,
        flags: u16,
        offset: u64,
        len: u32,
        payload: &[u8],
    ) -> std::io::Result<u32> {
        self.cookie += 1;
        let mut r = Vec::with_capacity(28 + payload.len());
        r.extend_from_slice(&0x2560_9513u32.to_be_bytes());
        r.extend_from_slice(&flags.to_be_bytes());
        r.extend_from_slice(&kind.to_be_bytes());
        r.extend_from_slice(&self.cookie.to_be_bytes());
        r.extend_from_slice(&offset.to_be_bytes());
        r.extend_from_slice(&len.to_be_bytes());
        r.extend_from_slice(payload);
        self.s.write_all(&r)?;
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h)?;
        assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), 0x6744_6698);
        assert_eq!(
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
            self.cookie
        );
        Ok(u32::from_be_bytes(h[4..8].try_into().unwrap()))
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        match self.request(1, 0, offset, data.len() as u32, data)? {
            0 => Ok(()),
            e => Err(std::io::Error::other(format!("write error {e}"))),
        }
    }
    /// NBD_CMD_TRIM of `len` bytes at `offset`.
    pub fn trim(&mut self, offset: u64, len: u32) -> std::io::Result<()> {
        match self.request(4, 0, offset, len, &[])? {
            0 => Ok(()),
            e => Err(std::io::Error::other(format!("trim error {e}"))),
        }
    }
    pub fn flush(&mut self) -> std::io::Result<()> {
        match self.request(3, 0, 0, 0, &[])? {
            0 => Ok(()),
            e => Err(std::io::Error::other(format!("flush error {e}"))),
        }
    }
    pub fn read(&mut self, offset: u64, len: u32) -> std::io::Result<Vec<u8>> {
        let e = self.request(0, 0, offset, len, &[])?;
        if e != 0 {
            return Err(std::io::Error::other(format!("read error {e}")));
        }
        let mut b = vec![0u8; len as usize];
        self.s.read_exact(&mut b)?;
        Ok(b)
    }
}

/// A formatted store for layout `l` whose data area holds `sector(s)` in every sector
/// `s` (the BOPT, on the data device or its own, zeros).
pub fn stamped_store(
    l: &reblock_engine::Layout,
    sector: impl Fn(u64) -> Vec<u8>,
) -> reblock_engine::MemStore {
    let sectors = l.data_bytes / 512;
    let mut data: Vec<u8> = (0..sectors).flat_map(sector).collect();
    let store = if l.separate {
        reblock_engine::MemStore::new(data, Some(vec![0u8; l.device_bytes as usize]))
    } else {
        data.resize(l.device_bytes as usize, 0);
        reblock_engine::MemStore::new(data, None)
    };
    reblock_engine::Engine::format(&store, l, 0x5eed).unwrap();
    store
}

/// The devices as they would be after a crash just before log entry `cut`: every write
/// a later sync of its device made durable, plus the in-flight writes `keep` selects.
pub fn crash_image(
    base: &(Vec<u8>, Vec<u8>),
    log: &[reblock_engine::Logged],
    cut: usize,
    keep: impl Fn(usize) -> bool,
) -> (Vec<u8>, Vec<u8>) {
    use reblock_engine::{Dev, Logged};
    let (mut data, mut bopt) = base.clone();
    let mut synced = std::collections::HashSet::new();
    let mut included = vec![false; cut];
    for i in (0..cut).rev() {
        match &log[i] {
            Logged::Sync { dev } => {
                synced.insert(*dev);
            }
            Logged::Write { dev, .. } => included[i] = synced.contains(dev) || keep(i),
        }
    }
    for (i, op) in log[..cut].iter().enumerate() {
        if let (true, Logged::Write { dev, offset, bytes }) = (included[i], op) {
            let v = if *dev == Dev::Data {
                &mut data
            } else {
                &mut bopt
            };
            v[*offset as usize..*offset as usize + bytes.len()].copy_from_slice(bytes);
        }
    }
    (data, bopt)
}
