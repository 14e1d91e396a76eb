//! A private tracefs instance recording `block:block_bio_queue` for one device.
//!
//! Everything is done in `instances/reblock-<pid>-<n>`, a ring buffer of our own with its
//! own event switches, filter and clock, so that the global tracing state (`tracing_on`,
//! `set_event`, the top-level buffer, other users' instances) is never touched. The
//! [`Instance`] guard disables the event and removes the instance when dropped, which
//! happens on success, on error and after a SIGINT/SIGTERM stop alike.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::RecordError;

/// Where tracefs is mounted, in the order the kernel documents them.
const ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The event's directory inside an instance.
const EVENT_DIR: &str = "events/block/block_bio_queue";

/// Instance names start with this, then `<pid>-<n>`.
pub const INSTANCE_PREFIX: &str = "reblock-";

/// The tracefs mount point, mounting tracefs on /sys/kernel/tracing when it is not
/// mounted anywhere (root only). The mount is left in place: other tracers may start to
/// use it the moment it exists, so unmounting it later could break them.
pub fn find_root() -> Result<PathBuf, RecordError> {
    for root in ROOTS.iter().map(Path::new) {
        match fs::metadata(root.join("instances")) {
            Ok(m) if m.is_dir() => return Ok(root.to_path_buf()),
            Err(e) if e.kind() == ErrorKind::PermissionDenied => {
                return Err(unavailable(format!(
                    "{}: permission denied: recording needs root (or CAP_SYS_ADMIN \
                     and access to tracefs)",
                    root.display()
                )))
            }
            _ => {}
        }
    }
    let target = Path::new(ROOTS[0]);
    let flags = rustix::mount::MountFlags::NOSUID
        | rustix::mount::MountFlags::NODEV
        | rustix::mount::MountFlags::NOEXEC;
    match rustix::mount::mount("nodev", target, "tracefs", flags, None) {
        Ok(()) if target.join("instances").is_dir() => Ok(target.to_path_buf()),
        Ok(()) => Err(unavailable(format!(
            "mounted tracefs on {} but it has no 'instances' directory (kernel too old?)",
            target.display()
        ))),
        Err(e) => Err(unavailable(format!(
            "tracefs is not mounted ({} has no 'instances') and mounting it failed: {e}; \
             run as root, or mount it: 'mount -t tracefs nodev {}'",
            target.display(),
            target.display()
        ))),
    }
}

fn unavailable(why: String) -> RecordError {
    RecordError::TracefsUnavailable { why }
}

/// A private instance with `block_bio_queue` enabled for one device; removed on drop.
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
}

/// Settings of one instance.
#[derive(Clone, Copy, Debug)]
pub struct InstanceConfig {
    /// The kernel's encoding of the device, compared by the event filter.
    pub trace_dev: u32,
    /// Ring buffer per CPU, KiB.
    pub buffer_kb: u32,
}

impl Instance {
    /// Creates the instance and starts recording into it.
    pub fn start(root: &Path, config: InstanceConfig) -> Result<Instance, RecordError> {
        remove_stale(root);
        let instances = root.join("instances");
        if !root.join(EVENT_DIR).exists() {
            return Err(unavailable(format!(
                "{} has no event block:block_bio_queue (kernel built without block tracepoints?)",
                root.display()
            )));
        }
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{INSTANCE_PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dir = instances.join(name);
        fs::create_dir(&dir).map_err(|e| match e.kind() {
            ErrorKind::PermissionDenied => unavailable(format!(
                "cannot create a tracefs instance in {} ({e}): recording needs root \
                 (or CAP_SYS_ADMIN and write access to tracefs)",
                instances.display()
            )),
            _ => RecordError::io(format!("create {}", dir.display()), e),
        })?;
        let instance = Instance { dir };
        instance.configure(config)?;
        Ok(instance)
    }

    fn configure(&self, config: InstanceConfig) -> Result<(), RecordError> {
        // Clock 'mono' is CLOCK_MONOTONIC, so timestamps compare with the recording
        // process's own clock_gettime(CLOCK_MONOTONIC); the default 'local' does not.
        self.write("trace_clock", "mono")?;
        self.write("buffer_size_kb", &config.buffer_kb.to_string())?;
        // Block events print dev as MAJOR,MINOR but store the kernel's (major << 20) | minor.
        self.write(
            &format!("{EVENT_DIR}/filter"),
            &format!("dev == {}", config.trace_dev),
        )?;
        self.write(&format!("{EVENT_DIR}/enable"), "1")?;
        self.write("tracing_on", "1")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn pipe_path(&self) -> PathBuf {
        self.dir.join("trace_pipe")
    }

    /// Stops new events (already buffered ones stay readable).
    pub fn stop_event(&self) -> Result<(), RecordError> {
        self.write(&format!("{EVENT_DIR}/enable"), "0")
    }

    /// Events the ring buffer lost: overwritten before they were read (`overrun`) or
    /// dropped while full (`dropped events`), summed over the CPUs.
    pub fn lost_events(&self) -> u64 {
        let Ok(cpus) = fs::read_dir(self.dir.join("per_cpu")) else {
            return 0;
        };
        cpus.flatten()
            .filter_map(|cpu| fs::read_to_string(cpu.path().join("stats")).ok())
            .map(|stats| lost_in_stats(&stats))
            .sum()
    }

    fn write(&self, file: &str, value: &str) -> Result<(), RecordError> {
        let path = self.dir.join(file);
        fs::write(&path, value).map_err(|e| match e.kind() {
            ErrorKind::NotFound => unavailable(format!(
                "{} is missing: this kernel lacks it",
                path.display()
            )),
            _ => RecordError::io(format!("write '{value}' to {}", path.display()), e),
        })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join(EVENT_DIR).join("enable"), "0");
        let _ = fs::write(self.dir.join(EVENT_DIR).join("filter"), "0");
        // rmdir fails with EBUSY while a reader still holds trace_pipe open (a reader
        // thread of ours being torn down); retry briefly rather than leave it behind.
        for _ in 0..50 {
            match fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                _ => return,
            }
        }
    }
}

/// The `overrun` and `dropped events` counts of one `per_cpu/cpuN/stats` file.
fn lost_in_stats(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| matches!(k.trim(), "overrun" | "dropped events"))
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .sum()
}

/// Removes instances left by a recorder that was killed (SIGKILL cannot be caught), i.e.
/// `reblock-<pid>-<n>` whose process is gone.
fn remove_stale(root: &Path) {
    let Ok(entries) = fs::read_dir(root.join("instances")) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(INSTANCE_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::write(entry.path().join(EVENT_DIR).join("enable"), "0");
            let _ = fs::remove_dir(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_counts_overrun_and_dropped() {
        // The layout of per_cpu/cpu0/stats on a 6.18 kernel.
        let stats = "entries: 3\noverrun: 7\ncommit overrun: 2\nbytes: 180\n\
                     oldest event ts:  2801.159800\nnow ts:  2805.0\ndropped events: 5\nread events: 40\n";
        assert_eq!(lost_in_stats(stats), 12);
    }
}
