//! The blktrace backend: `blktrace -d DEV -a queue -o - | blkparse -i - -q -f FORMAT`.
//!
//! Only queue ('Q') events are recorded: the request as the process issued it, like
//! tracefs's `block_bio_queue`. blkparse prints each with our own format, so the fields
//! come in a fixed order and the command, which may hold blanks, comes last:
//! `Q SECONDS NANOSECONDS PID MAJOR,MINOR RWBS SECTOR SECTORS COMMAND`.
//! Timestamps are ns since blktrace started.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reblock_trace::{Op, ParseState, Parsed, Request};

use crate::device::BlockDevice;
use crate::error::RecordError;
use crate::pipe::{self, Ready};
use crate::sink::Sink;
use crate::stop::Stop;
use crate::{Backend, Summary, TICK};

/// The blkparse output format this backend parses (see the module docs).
pub const BLKPARSE_FORMAT: &str = "%a %T %t %p %M,%m %d %S %n %C\\n";

/// How long blktrace gets to fail before recording counts as begun.
const SETUP_GRACE: Duration = Duration::from_millis(500);

/// Parses one line of [`BLKPARSE_FORMAT`] output.
pub fn parse_line(line: &str, state: &mut ParseState) -> Result<Parsed, String> {
    let line = line.trim_end();
    if line.trim().is_empty() {
        return Ok(Parsed::Skip);
    }
    let mut f = line.splitn(9, ' ');
    let mut next = |name: &str| f.next().ok_or_else(|| format!("field {name}: missing"));
    let action = next("action")?;
    let num = |name: &str, s: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("field {name}: '{s}' is not an integer"))
    };
    let secs = num("seconds", next("seconds")?)?;
    let nanos = num("nanoseconds", next("nanoseconds")?)?;
    let pid = num("pid", next("pid")?)?;
    let device = next("device")?;
    let rwbs = next("rwbs")?;
    let sector = num("sector", next("sector")?)?;
    let sectors = num("sectors", next("sectors")?)?;
    let command = f.next().unwrap_or("");
    if action != "Q" || sectors == 0 {
        return Ok(Parsed::Skip);
    }
    let op = match rwbs
        .strip_prefix('F')
        .filter(|r| !r.is_empty())
        .unwrap_or(rwbs)
        .chars()
        .next()
    {
        Some('R') => Op::Read,
        Some('W') => Op::Write,
        _ => return Ok(Parsed::Skip),
    };
    let (major, minor) = device
        .split_once(',')
        .ok_or_else(|| format!("field device: '{device}' is not MAJOR,MINOR"))?;
    Ok(Parsed::Request(Request {
        ts_ns: secs * 1_000_000_000 + nanos,
        pid: Some(u32::try_from(pid).map_err(|_| format!("field pid: {pid} is too large"))?),
        command: state.commands.intern(command),
        device: reblock_trace::format::tracefs::dev_t(
            num("device", major)? as u32,
            num("device", minor)? as u32,
        ),
        sector,
        sectors: u32::try_from(sectors)
            .map_err(|_| format!("field sectors: {sectors} is too large"))?,
        op,
    }))
}

fn unavailable(why: impl Into<String>) -> RecordError {
    RecordError::BlktraceUnavailable { why: why.into() }
}

/// blktrace and blkparse, interrupted and reaped when dropped.
struct Children {
    blktrace: Child,
    blkparse: Child,
    /// What blktrace said so far: it reports a refused trace there and then hangs.
    stderr: String,
}

impl Children {
    fn spawn(dev: &Path) -> Result<Children, RecordError> {
        let spawn_err = |tool: &str, e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => unavailable(format!(
                "{tool} is not installed (install the 'blktrace' package, or use --backend tracefs)"
            )),
            _ => unavailable(format!("cannot start {tool}: {e}")),
        };
        let mut blktrace = Command::new("blktrace")
            .arg("-d")
            .arg(dev)
            .args(["-a", "queue", "-o", "-"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| spawn_err("blktrace", e))?;
        let input = blktrace.stdout.take().expect("piped");
        let blkparse = Command::new("blkparse")
            .args(["-i", "-", "-q", "-f", &BLKPARSE_FORMAT.replace("\\n", "\n")])
            .stdin(input)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        match blkparse {
            Ok(blkparse) => {
                if let Some(err) = &blktrace.stderr {
                    pipe::set_nonblocking(err)
                        .map_err(|e| RecordError::io("blktrace stderr", e))?;
                }
                Ok(Children {
                    blktrace,
                    blkparse,
                    stderr: String::new(),
                })
            }
            Err(e) => {
                let _ = blktrace.kill();
                let _ = blktrace.wait();
                Err(spawn_err("blkparse", e))
            }
        }
    }

    /// Fails with blktrace's own words when it exits during setup (EPERM, no debugfs):
    /// it reports a refused trace only after it tried, so give it a moment.
    fn check_setup(&mut self, dev: &Path) -> Result<(), RecordError> {
        let until = Instant::now() + SETUP_GRACE;
        while Instant::now() < until {
            self.check_running(dev)?;
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// An error in blktrace's own words if it has exited; an exit during recording is
    /// always a failure, since only our SIGINT ends it well.
    fn check_running(&mut self, dev: &Path) -> Result<(), RecordError> {
        if let Ok(Some(status)) = self.blktrace.try_wait() {
            return Err(self.failure(dev, &status.to_string()));
        }
        self.read_stderr();
        let said = self.stderr.to_ascii_lowercase();
        if said.contains("failed") || said.contains("not permitted") {
            return Err(self.failure(dev, "still running after a failure"));
        }
        Ok(())
    }

    /// Appends what blktrace has written to stderr, without waiting.
    fn read_stderr(&mut self) {
        let Some(err) = self.blktrace.stderr.as_mut() else {
            return;
        };
        let mut buf = [0u8; 4096];
        while let Ok(Ready::Data(n)) = pipe::read_now(err, &mut buf) {
            self.stderr.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }

    /// After our SIGINT: blktrace's exit status and complaints, if any.
    fn check_exit(&mut self, dev: &Path) -> Result<(), RecordError> {
        match self.blktrace.wait() {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(self.failure(dev, &status.to_string())),
            Err(e) => Err(RecordError::io("wait for blktrace", e)),
        }
    }

    fn failure(&mut self, dev: &Path, status: &str) -> RecordError {
        self.read_stderr();
        let stderr = &self.stderr;
        let first = stderr.lines().next().unwrap_or("").trim().to_string();
        if stderr.contains("Operation not permitted") {
            return unavailable(format!(
                "the kernel refused to trace {} (EPERM: '{first}'); kernels under lockdown and \
                 many VMs forbid blktrace even to root; use --backend tracefs",
                dev.display()
            ));
        }
        unavailable(format!("blktrace exited ({status}): {first}"))
    }

    fn interrupt(&self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.blktrace.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.interrupt();
        let deadline = Instant::now() + Duration::from_secs(5);
        for child in [&mut self.blktrace, &mut self.blkparse] {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// debugfs, where blktrace's relay files live, mounted if it is not.
fn ensure_debugfs() -> Result<(), RecordError> {
    let debug = Path::new("/sys/kernel/debug");
    if debug.join("block").is_dir() {
        return Ok(());
    }
    rustix::mount::mount(
        "debugfs",
        debug,
        "debugfs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .map_err(|e| {
        unavailable(format!(
            "debugfs is not mounted and mounting it failed: {e}"
        ))
    })
}

pub(crate) fn record<W: Write>(
    dev: &BlockDevice,
    mut sink: Sink<W>,
    stop: &Stop,
    progress: &mut impl FnMut(&Summary),
) -> Result<Summary, RecordError> {
    ensure_debugfs()?;
    let mut children = Children::spawn(&dev.path)?;
    children.check_setup(&dev.path)?;
    let mut out = children.blkparse.stdout.take().expect("piped");
    pipe::set_nonblocking(&out).map_err(|e| RecordError::io("blkparse output", e))?;
    let started = Instant::now();
    stop.begin();
    sink.summary.backend = Some(Backend::Blktrace);
    progress(&sink.summary);
    let mut buf = vec![0u8; 1 << 16];
    let read_err = |e| RecordError::io("read blkparse output", e);
    let reason = loop {
        if let Some(reason) = stop.reason() {
            break reason;
        }
        match pipe::read_ready(&mut out, &mut buf, stop.wait(TICK)).map_err(read_err)? {
            Ready::Data(n) => sink.feed(&buf[..n], "blkparse", parse_line)?,
            Ready::Idle => {}
            Ready::End => return Err(children.failure(&dev.path, "its output ended")),
        }
        children.check_running(&dev.path)?;
        sink.summary.duration_s = started.elapsed().as_secs_f64();
        progress(&sink.summary);
    };
    // blktrace flushes its buffers on SIGINT; blkparse ends when its input does.
    children.interrupt();
    let drain_until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < drain_until {
        match pipe::read_ready(&mut out, &mut buf, TICK).map_err(read_err)? {
            Ready::Data(n) => sink.feed(&buf[..n], "blkparse", parse_line)?,
            Ready::Idle => {}
            Ready::End => break,
        }
    }
    children.check_exit(&dev.path)?;
    drop(children);
    let mut summary = sink.finish("blkparse", parse_line)?;
    summary.duration_s = started.elapsed().as_secs_f64();
    summary.stopped_by = Some(reason);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Parsed, String> {
        parse_line(line, &mut ParseState::default())
    }

    #[test]
    fn parses_queue_events_of_our_format() {
        // Hand-made in BLKPARSE_FORMAT: the request of a dd writing 8 KiB at sector 2048.
        let Ok(Parsed::Request(r)) = parse("Q 2 5000 7137 7,0 WS 2048 16 my dd") else {
            panic!("not a request")
        };
        assert_eq!(
            (r.ts_ns, r.pid, r.device),
            (2_000_005_000, Some(7137), 7 << 20)
        );
        assert_eq!((r.sector, r.sectors, r.op), (2048, 16, Op::Write));
        let Ok(Parsed::Request(r)) = parse("Q 0 1 9 8,16 RA 8 8 cat") else {
            panic!("not a request")
        };
        assert_eq!((r.op, r.device), (Op::Read, (8 << 20) | 16));
    }

    #[test]
    fn skips_other_actions_and_dataless_ops() {
        for line in [
            "C 2 5000 7137 7,0 WS 2048 16 dd",
            "Q 2 5 1 7,0 DS 2048 16 dd",
            "Q 2 5 1 7,0 FWS 0 0 dd",
            "Q 2 5 1 7,0 N 0 8 dd",
            "",
        ] {
            assert_eq!(parse(line), Ok(Parsed::Skip), "{line}");
        }
    }

    #[test]
    fn names_the_bad_field() {
        assert!(parse("Q 2 x 7137 7,0 WS 2048 16 dd")
            .unwrap_err()
            .contains("nanoseconds"));
        assert!(parse("Q 2 5 7137 7:0 WS 2048 16 dd")
            .unwrap_err()
            .contains("device"));
        assert!(parse("Q 2 5 7137").unwrap_err().contains("device"));
    }
}
