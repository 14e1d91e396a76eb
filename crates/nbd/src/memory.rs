//! [`MemoryExport`]: a RAM disk. Useful where no file should be touched (the protocol
//! fuzz target, quick experiments); it has no durability to lose, so flush is a no-op
//! and multi-conn holds trivially.

use std::io;
use std::sync::RwLock;

use crate::export::Export;

pub struct MemoryExport {
    bytes: RwLock<Vec<u8>>,
    read_only: bool,
}

impl MemoryExport {
    pub fn new(size_bytes: usize, read_only: bool) -> MemoryExport {
        MemoryExport {
            bytes: RwLock::new(vec![0; size_bytes]),
            read_only,
        }
    }

    fn range(&self, offset: u64, len: u64) -> io::Result<std::ops::Range<usize>> {
        let size = self.bytes.read().unwrap_or_else(|p| p.into_inner()).len() as u64;
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(offset as usize..end as usize),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    fn writable(&self) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::from_raw_os_error(libc::EROFS));
        }
        Ok(())
    }

    fn fill(&self, offset: u64, len: u64, value: Option<&[u8]>) -> io::Result<()> {
        self.writable()?;
        let r = self.range(offset, len)?;
        let mut bytes = self.bytes.write().unwrap_or_else(|p| p.into_inner());
        match value {
            Some(data) => bytes[r].copy_from_slice(data),
            None => bytes[r].fill(0),
        }
        Ok(())
    }
}

impl Export for MemoryExport {
    fn size_bytes(&self) -> u64 {
        self.bytes.read().unwrap_or_else(|p| p.into_inner()).len() as u64
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let r = self.range(offset, buf.len() as u64)?;
        buf.copy_from_slice(&self.bytes.read().unwrap_or_else(|p| p.into_inner())[r]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64, _fua: bool) -> io::Result<()> {
        self.fill(offset, buf.len() as u64, Some(buf))
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, offset: u64, len: u64, _fua: bool) -> io::Result<()> {
        self.writable()?;
        self.range(offset, len).map(drop)
    }
    fn write_zeroes(&self, offset: u64, len: u64, _fua: bool, _may_trim: bool) -> io::Result<()> {
        self.fill(offset, len, None)
    }
    fn can_multi_conn(&self) -> bool {
        true
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn describe(&self) -> String {
        format!("memory, {} bytes", self.size_bytes())
    }
}
