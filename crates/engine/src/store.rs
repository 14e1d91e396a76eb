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

/// Size of a file or block device (`metadata().len()` is 0 for block devices).
pub fn file_len(f: &File) -> io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = f;
    f.seek(SeekFrom::End(0))
}

impl Store for FileStore {
    fn read_at(&self, dev: Dev, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file(dev).read_exact_at(buf, offset)
    }
    fn write_at(&self, dev: Dev, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file(dev).write_all_at(buf, offset)
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
