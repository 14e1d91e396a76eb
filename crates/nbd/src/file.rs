//! [`FileExport`]: a regular file or a block device served with positioned I/O.
//!
//! One file descriptor is shared by every connection and worker: `pread`/`pwrite` carry
//! their own offset, so no lock is needed, and `fdatasync` on the shared descriptor makes
//! every completed write durable whichever connection issued it, which is exactly the
//! guarantee `CAN_MULTI_CONN` advertises.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::export::Export;

/// Zero buffer size used when `fallocate` cannot zero a range.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

#[derive(Debug)]
pub struct FileExport {
    file: File,
    path: PathBuf,
    size_bytes: u64,
    read_only: bool,
    block_device: bool,
}

impl FileExport {
    /// Opens `path` (a regular file or a block device); read-only opens it `O_RDONLY`.
    pub fn open(path: &Path, read_only: bool) -> io::Result<FileExport> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(path)
            .map_err(|e| {
                io::Error::new(e.kind(), format!("{}: cannot open: {e}", path.display()))
            })?;
        let meta = file.metadata()?;
        let block_device = meta.file_type().is_block_device();
        if !block_device && !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a regular file or block device", path.display()),
            ));
        }
        // A block device's metadata length is 0; seeking to its end gives its size.
        let size_bytes = file.seek(SeekFrom::End(0))?;
        Ok(FileExport {
            file,
            path: path.to_owned(),
            size_bytes,
            read_only,
            block_device,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn fallocate(&self, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
        let (off, len) = (to_off(offset)?, to_off(len)?);
        // SAFETY: fallocate only reads its integer arguments; the fd is owned by self.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, off, len) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn write_zero_buffers(&self, mut offset: u64, len: u64) -> io::Result<()> {
        let zeroes = vec![0u8; ZERO_CHUNK_BYTES.min(len as usize)];
        let end = offset + len;
        while offset < end {
            let n = (end - offset).min(zeroes.len() as u64) as usize;
            self.file.write_all_at(&zeroes[..n], offset)?;
            offset += n as u64;
        }
        Ok(())
    }

    fn sync_if(&self, fua: bool) -> io::Result<()> {
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

fn to_off(v: u64) -> io::Result<libc::off_t> {
    libc::off_t::try_from(v).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))
}

/// `fallocate` modes that simply are not available on this file system or device.
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL | libc::ENODEV)
    )
}

impl Export for FileExport {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.file.write_all_at(buf, offset)?;
        self.sync_if(fua)
    }

    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn trim(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        // Trim is a hint. On a regular file punching a hole returns the space; on a block
        // device punching would zero the range (costly and not asked for), so skip it.
        if self.block_device {
            return Ok(());
        }
        match self.fallocate(
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        ) {
            Ok(()) => self.sync_if(fua),
            Err(e) if unsupported(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn write_zeroes(&self, offset: u64, len: u64, fua: bool, may_trim: bool) -> io::Result<()> {
        // Punching a hole deallocates and reads back zeroes; ZERO_RANGE keeps the blocks
        // allocated, as NO_HOLE asks. Both fall back to writing zero buffers.
        let mode = if may_trim {
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
        } else {
            libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE
        };
        match self.fallocate(mode, offset, len) {
            Ok(()) => {}
            Err(e) if unsupported(&e) => self.write_zero_buffers(offset, len)?,
            Err(e) => return Err(e),
        }
        self.sync_if(fua)
    }

    fn can_multi_conn(&self) -> bool {
        true
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn describe(&self) -> String {
        let kind = if self.block_device {
            "block device"
        } else {
            "file"
        };
        format!("{kind} {}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export_with(bytes: &[u8]) -> (tempfile::NamedTempFile, FileExport) {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), bytes).unwrap();
        let e = FileExport::open(tmp.path(), false).unwrap();
        (tmp, e)
    }

    #[test]
    fn reads_writes_and_zeroes_in_place() {
        let (_tmp, e) = export_with(&[0x11; 16384]);
        assert_eq!(e.size_bytes(), 16384);
        e.write_at(&[0xab; 100], 5000, true).unwrap();
        let mut buf = [0u8; 102];
        e.read_at(&mut buf, 4999).unwrap();
        assert_eq!(buf[0], 0x11);
        assert!(buf[1..101].iter().all(|&b| b == 0xab));
        assert_eq!(buf[101], 0x11);
        for may_trim in [true, false] {
            e.write_at(&[0xcd; 8192], 4096, false).unwrap();
            e.write_zeroes(4096, 8192, false, may_trim).unwrap();
            let mut z = [0xffu8; 8194];
            e.read_at(&mut z, 4095).unwrap();
            assert_eq!(
                (z[0], z[8193]),
                (0x11, 0x11),
                "zeroing stayed inside its range"
            );
            assert!(z[1..8193].iter().all(|&b| b == 0), "may_trim={may_trim}");
        }
        e.trim(0, 4096, true).unwrap();
        e.flush().unwrap();
        assert_eq!(
            std::fs::metadata(_tmp.path()).unwrap().len(),
            16384,
            "size kept"
        );
    }

    #[test]
    fn read_only_open_refuses_writes() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), [1u8; 512]).unwrap();
        let e = FileExport::open(tmp.path(), true).unwrap();
        assert!(e.read_only());
        assert!(e.write_at(&[0; 1], 0, false).is_err());
    }

    #[test]
    fn directories_are_refused_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = FileExport::open(dir.path(), true).unwrap_err();
        assert!(
            err.to_string().contains(&dir.path().display().to_string()),
            "{err}"
        );
    }
}
