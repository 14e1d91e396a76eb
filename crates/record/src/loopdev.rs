//! A loop device over an image file, detached when dropped: lets tests and demos record a
//! real block device without touching the machine's disks.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An attached loop device.
#[derive(Debug)]
pub struct LoopDevice {
    pub path: PathBuf,
}

impl LoopDevice {
    /// `losetup -f --show --direct-io=on IMAGE`. Direct I/O keeps the loop driver from
    /// caching the backing file, so each request to the loop device reaches the image.
    pub fn attach(image: &Path) -> std::io::Result<LoopDevice> {
        let out = Command::new("losetup")
            .args(["-f", "--show", "--direct-io=on"])
            .arg(image)
            .output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "losetup {}: {}",
                image.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(LoopDevice { path: path.into() })
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}
