//! The block device being recorded: its path and its device number.

use std::path::{Path, PathBuf};

use rustix::fs::{self, FileType};

use crate::error::RecordError;

/// Where sysfs is mounted.
const SYSFS: &str = "/sys";

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

    /// The device's directory in the sysfs mounted at `sys` (`/sys/dev/block/M:m`, a link
    /// to the kernel's own name for it, whatever the /dev node is called).
    fn sysfs_dir(&self, sys: &Path) -> PathBuf {
        sys.join(format!("dev/block/{}:{}", self.major, self.minor))
    }

    /// The device's size in 512-byte sectors, as sysfs gives it (`/sys/dev/block/M:m/size`
    /// counts 512-byte units whatever the logical block size), for the trace's .meta.json.
    pub fn sectors(&self) -> Result<u64, RecordError> {
        let path = self.sysfs_dir(Path::new(SYSFS)).join("size");
        let path = path.display().to_string();
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

    /// The model string the kernel reports for the drive (`device/model` of the device
    /// or, for a partition, of the disk holding it), if it has one: a loop or
    /// device-mapper device has none.
    pub fn model(&self) -> Option<String> {
        self.model_in(Path::new(SYSFS))
    }

    /// [`BlockDevice::model`] in the sysfs mounted at `sys`.
    pub fn model_in(&self, sys: &Path) -> Option<String> {
        let node = std::fs::canonicalize(self.sysfs_dir(sys)).ok()?;
        [
            node.join("device/model"),
            node.parent()?.join("device/model"),
        ]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|m| m.trim().to_string())
        .find(|m| !m.is_empty())
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

    /// A disk's model is read for the disk and for its partitions, by device number
    /// whatever the /dev node is called; a device without one (a loop device) gives none.
    #[test]
    fn the_drive_model_comes_from_sysfs_by_device_number() {
        let sys = tempfile::tempdir().unwrap();
        let disk = sys.path().join("devices/pci0000:00/ata1/block/sda");
        std::fs::create_dir_all(disk.join("device")).unwrap();
        std::fs::create_dir_all(disk.join("sda1")).unwrap();
        let lo = sys.path().join("devices/virtual/block/loop0");
        std::fs::create_dir_all(&lo).unwrap();
        std::fs::write(disk.join("device/model"), "WDC WD2500AAKS-00B3A0  \n").unwrap();
        let by_number = sys.path().join("dev/block");
        std::fs::create_dir_all(&by_number).unwrap();
        for (number, to) in [
            ("8:0", disk.clone()),
            ("8:1", disk.join("sda1")),
            ("7:0", lo),
        ] {
            std::os::unix::fs::symlink(to, by_number.join(number)).unwrap();
        }
        let model = |major, minor| {
            let path = PathBuf::from("/dev/disk/by-id/not-the-kernel-name");
            BlockDevice { path, major, minor }.model_in(sys.path())
        };
        assert_eq!(model(8, 0).as_deref(), Some("WDC WD2500AAKS-00B3A0"));
        assert_eq!(model(8, 1).as_deref(), Some("WDC WD2500AAKS-00B3A0"));
        assert_eq!(model(7, 0), None);
        assert_eq!(model(9, 9), None);
    }
}
