//! The block device being recorded: its path and its device number.

use std::path::{Path, PathBuf};

use rustix::fs::{self, FileType};

use crate::error::RecordError;

/// A block device, resolved from its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    pub path: PathBuf,
    pub major: u32,
    pub minor: u32,
}

impl BlockDevice {
    /// Resolves `path` (following symlinks, as /dev/disk/by-id/... are) to a block device.
    pub fn resolve(path: &Path) -> Result<BlockDevice, RecordError> {
        let st = fs::stat(path).map_err(|errno| match errno {
            rustix::io::Errno::NOENT => RecordError::NoSuchDevice(path.to_path_buf()),
            rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => {
                RecordError::DevicePermission(path.to_path_buf())
            }
            other => RecordError::Io {
                what: format!("stat {}", path.display()),
                source: other.into(),
            },
        })?;
        let kind = FileType::from_raw_mode(st.st_mode);
        if kind != FileType::BlockDevice {
            return Err(RecordError::NotABlockDevice {
                path: path.to_path_buf(),
                kind: describe(kind),
            });
        }
        Ok(BlockDevice {
            path: path.to_path_buf(),
            major: fs::major(st.st_rdev),
            minor: fs::minor(st.st_rdev),
        })
    }

    /// The device's size in 512-byte sectors, as sysfs gives it (`/sys/dev/block/M:m/size`
    /// counts 512-byte units whatever the logical block size), for the trace's .meta.json.
    pub fn sectors(&self) -> Result<u64, RecordError> {
        let path = format!("/sys/dev/block/{}:{}/size", self.major, self.minor);
        let text = std::fs::read_to_string(&path).map_err(|e| RecordError::io(&path, e))?;
        text.trim().parse().map_err(|_| {
            RecordError::io(
                &path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("'{}' is not a sector count", text.trim()),
                ),
            )
        })
    }

    /// The number the kernel prints in block events and compares in event filters.
    pub fn trace_dev(&self) -> u32 {
        reblock_trace::format::tracefs::dev_t(self.major, self.minor)
    }
}

fn describe(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        _ => "not a block device",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_is_wrong_with_the_path() {
        let e = BlockDevice::resolve(Path::new("/nonexistent/loop9")).unwrap_err();
        assert!(matches!(e, RecordError::NoSuchDevice(_)), "{e}");
        let e = BlockDevice::resolve(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let e = BlockDevice::resolve(Path::new("/")).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
    }
}
