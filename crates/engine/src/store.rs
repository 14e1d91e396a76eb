//! The backing store the engine reads and writes: a data device and a BOPT device, which
//! may be one and the same file. A trait so the crash tests can record every write and
//! flush the engine issues (tests/crash_states.rs) and replay any prefix of them.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// Which device an I/O addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dev {
    Data,
    Bopt,
}

pub trait Store: Send + Sync {
    fn read_at(&self, dev: Dev, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn write_at(&self, dev: Dev, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write to `dev` durable (fdatasync).
    fn sync(&self, dev: Dev) -> io::Result<()>;
    fn len(&self, dev: Dev) -> io::Result<u64>;
    /// True when both devices are one file (one sync covers both).
    fn shared(&self) -> bool;
    /// Busy seconds of the disk model this store emulates (`serve --emulate`), if any.
    fn emulated_busy_s(&self) -> Option<f64> {
        None
    }
}

/// A file or block device, plus an optional separate BOPT device.
#[derive(Debug)]
pub struct FileStore {
    data: File,
    bopt: Option<File>,
}

impl FileStore {
    pub fn new(data: File, bopt: Option<File>) -> FileStore {
        FileStore { data, bopt }
    }
    fn file(&self, dev: Dev) -> &File {
        match dev {
            Dev::Bopt => self.bopt.as_ref().unwrap_or(&self.data),
            Dev::Data => &self.data,
        }
    }
}

/// An I/O that passes the end of a regular backing file: the file shrank while serving
/// (someone truncated it). A write there would silently re-extend the file with a hole
/// where data was, so it is refused.
#[derive(Debug, thiserror::Error)]
#[error("{op} of bytes {start}..{end}: the backing file is only {actual_bytes} bytes; it shrank while serving (truncated?), so the request is refused rather than refilled with a hole")]
pub struct ShrunkError {
    pub op: &'static str,
    pub start: u64,
    pub end: u64,
    pub actual_bytes: u64,
}

/// True when `e` is a [`ShrunkError`].
pub fn is_shrunk(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<ShrunkError>())
}

fn shrunk(op: &'static str, f: &File, offset: u64, n: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        ShrunkError {
            op,
            start: offset,
            end: offset + n as u64,
            actual_bytes: f.metadata().map(|m| m.len()).unwrap_or(0),
        },
    )
}

/// Size of a file or block device (`metadata().len()` is 0 for block devices).
pub fn file_len(f: &File) -> io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = f;
    f.seek(SeekFrom::End(0))
}

impl Store for FileStore {
    fn read_at(&self, dev: Dev, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let f = self.file(dev);
        f.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                shrunk("read", f, offset, buf.len())
            } else {
                e
            }
        })
    }
    /// Refuses a write past the end of a regular file (one fstat per write): the engine
    /// never grows its files after formatting, so such a write means the file shrank.
    fn write_at(&self, dev: Dev, buf: &[u8], offset: u64) -> io::Result<()> {
        let f = self.file(dev);
        let m = f.metadata()?;
        if m.file_type().is_file() && offset + buf.len() as u64 > m.len() {
            return Err(shrunk("write", f, offset, buf.len()));
        }
        f.write_all_at(buf, offset)
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        self.file(dev).sync_data()
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        file_len(self.file(dev))
    }
    fn shared(&self) -> bool {
        self.bopt.is_none()
    }
}

/// One operation a [`MemStore`] saw, in issue order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Logged {
    Write {
        dev: Dev,
        offset: u64,
        bytes: Vec<u8>,
    },
    Sync {
        dev: Dev,
    },
}

/// An in-memory store (shared or separate) that logs every write and sync, so a test can
/// rebuild the device as it would be after a crash at any point.
pub struct MemStore {
    inner: Mutex<MemInner>,
    shared: bool,
}

struct MemInner {
    data: Vec<u8>,
    bopt: Vec<u8>,
    log: Vec<Logged>,
    fail_writes_to: Option<Dev>,
}

impl MemStore {
    /// `bopt_bytes` of `None`: one shared device of `data_bytes`.
    pub fn new(data: Vec<u8>, bopt: Option<Vec<u8>>) -> MemStore {
        MemStore {
            shared: bopt.is_none(),
            inner: Mutex::new(MemInner {
                data,
                bopt: bopt.unwrap_or_default(),
                log: Vec::new(),
                fail_writes_to: None,
            }),
        }
    }
    pub fn log(&self) -> Vec<Logged> {
        self.inner.lock().expect("lock").log.clone()
    }
    pub fn log_len(&self) -> usize {
        self.inner.lock().expect("lock").log.len()
    }
    pub fn devices(&self) -> (Vec<u8>, Vec<u8>) {
        let g = self.inner.lock().expect("lock");
        (g.data.clone(), g.bopt.clone())
    }
    /// From now on writes to `dev` fail with EIO (a dying device).
    pub fn fail_writes(&self, dev: Option<Dev>) {
        self.inner.lock().expect("lock").fail_writes_to = dev;
    }
    fn dev(&self, dev: Dev) -> Dev {
        if self.shared {
            Dev::Data
        } else {
            dev
        }
    }
}

fn range(len: usize, offset: u64, n: usize) -> io::Result<std::ops::Range<usize>> {
    let start = usize::try_from(offset).map_err(|_| io::Error::other("offset"))?;
    if start.checked_add(n).is_none_or(|e| e > len) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{n} bytes at {offset} pass the device end {len}"),
        ));
    }
    Ok(start..start + n)
}

impl Store for MemStore {
    fn read_at(&self, dev: Dev, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let g = self.inner.lock().expect("lock");
        let v = if self.dev(dev) == Dev::Data {
            &g.data
        } else {
            &g.bopt
        };
        buf.copy_from_slice(&v[range(v.len(), offset, buf.len())?]);
        Ok(())
    }
    fn write_at(&self, dev: Dev, buf: &[u8], offset: u64) -> io::Result<()> {
        let dev = self.dev(dev);
        let mut g = self.inner.lock().expect("lock");
        if g.fail_writes_to.is_some_and(|d| self.dev(d) == dev) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let v = if dev == Dev::Data {
            &mut g.data
        } else {
            &mut g.bopt
        };
        let r = range(v.len(), offset, buf.len())?;
        v[r].copy_from_slice(buf);
        g.log.push(Logged::Write {
            dev,
            offset,
            bytes: buf.to_vec(),
        });
        Ok(())
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        let dev = self.dev(dev);
        self.inner
            .lock()
            .expect("lock")
            .log
            .push(Logged::Sync { dev });
        Ok(())
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        let g = self.inner.lock().expect("lock");
        Ok(if self.dev(dev) == Dev::Data {
            g.data.len()
        } else {
            g.bopt.len()
        } as u64)
    }
    fn shared(&self) -> bool {
        self.shared
    }
}

/// What a [`FaultStore`] does at its N-th write or sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// That operation fails with this errno (ENOSPC, EIO) and changes nothing; later
    /// operations succeed.
    Fail { at_op: u64, errno: i32 },
    /// The process dies at that operation: it and everything after fail with EIO, and
    /// [`FaultStore::crashed_image`] gives the devices as a power cut would leave them.
    Crash { at_op: u64 },
}

/// An in-memory store (shared or separate) that injects one [`Fault`] at a chosen write
/// or sync, counted across threads, and models a volatile write cache: writes not yet
/// covered by a sync of their device may be lost at a crash, in any subset.
pub struct FaultStore {
    inner: Mutex<FaultInner>,
    shared: bool,
}

struct FaultInner {
    /// Current contents, [data, bopt].
    now: [Vec<u8>; 2],
    /// Contents as of each device's last sync.
    durable: [Vec<u8>; 2],
    /// Writes since each device's last sync, in order.
    unsynced: [Vec<(u64, Vec<u8>)>; 2],
    ops: u64,
    fault: Option<Fault>,
    crashed: bool,
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

impl FaultStore {
    /// `bopt` of `None`: one shared device.
    pub fn new(data: Vec<u8>, bopt: Option<Vec<u8>>) -> FaultStore {
        let shared = bopt.is_none();
        let bopt = bopt.unwrap_or_default();
        FaultStore {
            shared,
            inner: Mutex::new(FaultInner {
                durable: [data.clone(), bopt.clone()],
                now: [data, bopt],
                unsynced: [Vec::new(), Vec::new()],
                ops: 0,
                fault: None,
                crashed: false,
            }),
        }
    }
    /// Arms `fault`, counting operations from now (operation 0 is the next one).
    pub fn arm(&self, fault: Option<Fault>) {
        let mut g = self.inner.lock().expect("lock");
        g.ops = 0;
        g.fault = fault;
    }
    /// Writes and syncs issued since the last [`FaultStore::arm`].
    pub fn ops(&self) -> u64 {
        self.inner.lock().expect("lock").ops
    }
    pub fn crashed(&self) -> bool {
        self.inner.lock().expect("lock").crashed
    }
    /// The devices after a power cut now: the synced contents plus the unsynced writes
    /// for which `keep(device, index)` says true, applied in issue order.
    pub fn crashed_image(&self, mut keep: impl FnMut(usize, usize) -> bool) -> FaultStore {
        let g = self.inner.lock().expect("lock");
        let mut devs = g.durable.clone();
        for (d, writes) in g.unsynced.iter().enumerate() {
            for (i, (off, bytes)) in writes.iter().enumerate() {
                if keep(d, i) {
                    let at = *off as usize;
                    devs[d][at..at + bytes.len()].copy_from_slice(bytes);
                }
            }
        }
        let [data, bopt] = devs;
        FaultStore::new(data, (!self.shared).then_some(bopt))
    }
    /// The data device's current bytes.
    pub fn data(&self) -> Vec<u8> {
        self.inner.lock().expect("lock").now[0].clone()
    }
    fn index(&self, dev: Dev) -> usize {
        match (self.shared, dev) {
            (true, _) | (false, Dev::Data) => 0,
            (false, Dev::Bopt) => 1,
        }
    }
}

impl FaultInner {
    /// Counts one write or sync and says whether it may proceed.
    fn step(&mut self) -> io::Result<()> {
        let op = self.ops;
        self.ops += 1;
        if self.crashed {
            return Err(errno(libc::EIO));
        }
        match self.fault {
            Some(Fault::Fail { at_op, errno: e }) if at_op == op => Err(errno(e)),
            Some(Fault::Crash { at_op }) if at_op == op => {
                self.crashed = true;
                Err(errno(libc::EIO))
            }
            _ => Ok(()),
        }
    }
}

impl Store for FaultStore {
    fn read_at(&self, dev: Dev, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let g = self.inner.lock().expect("lock");
        if g.crashed {
            return Err(errno(libc::EIO));
        }
        let v = &g.now[self.index(dev)];
        buf.copy_from_slice(&v[range(v.len(), offset, buf.len())?]);
        Ok(())
    }
    fn write_at(&self, dev: Dev, buf: &[u8], offset: u64) -> io::Result<()> {
        let d = self.index(dev);
        let mut g = self.inner.lock().expect("lock");
        g.step()?;
        let r = range(g.now[d].len(), offset, buf.len())?;
        g.now[d][r].copy_from_slice(buf);
        g.unsynced[d].push((offset, buf.to_vec()));
        Ok(())
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        let d = self.index(dev);
        let mut g = self.inner.lock().expect("lock");
        g.step()?;
        g.durable[d] = g.now[d].clone();
        g.unsynced[d].clear();
        Ok(())
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        Ok(self.inner.lock().expect("lock").now[self.index(dev)].len() as u64)
    }
    fn shared(&self) -> bool {
        self.shared
    }
}
