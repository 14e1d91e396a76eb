//! Non-blocking reads with a timeout from trace_pipe or a child's stdout, so that the
//! recorder checks its stop condition at least every tick even when no I/O happens.

use std::io::{ErrorKind, Read};
use std::os::fd::AsFd;
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags};
use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};

/// What one [`read_ready`] call found.
pub enum Ready {
    /// This many bytes were read into the buffer.
    Data(usize),
    /// Nothing within the timeout.
    Idle,
    /// The writer closed its end.
    End,
}

/// Makes reads of `fd` return at once when nothing is buffered.
pub fn set_nonblocking(fd: impl AsFd) -> std::io::Result<()> {
    let flags = fcntl_getfl(&fd)?;
    fcntl_setfl(&fd, flags | OFlags::NONBLOCK)?;
    Ok(())
}

/// Waits up to `timeout` for input on a non-blocking reader, then reads what is there.
pub fn read_ready<R: Read + AsFd>(
    reader: &mut R,
    buf: &mut [u8],
    timeout: Duration,
) -> std::io::Result<Ready> {
    let ts = rustix::event::Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut fds = [PollFd::new(reader, PollFlags::IN)];
    match poll(&mut fds, Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => return Err(e.into()),
    }
    read_now(reader, buf)
}

/// Reads what is buffered without waiting.
pub fn read_now(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<Ready> {
    match reader.read(buf) {
        Ok(0) => Ok(Ready::End),
        Ok(n) => Ok(Ready::Data(n)),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
            Ok(Ready::Idle)
        }
        Err(e) => Err(e),
    }
}
