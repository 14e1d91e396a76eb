//! The transmission phase of one connection.
//!
//! Concurrency: a connection runs a small pool of worker threads that take turns on the
//! socket. A worker holds the reader lock only while it reads one request (header plus
//! write payload), then releases it, so the next worker reads the next request while the
//! first one is still doing its I/O; replies go out under a writer lock as each request
//! completes, in completion order (the protocol matches replies by cookie). This is the
//! model of nbdkit's parallel thread model and keeps a QD32 client's requests in flight
//! together without an async runtime: blocking positioned I/O on a file needs threads
//! anyway, and threads keep every code path plain and synchronous.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::export::{nbd_errno, Export, Op, RequestEvent, RequestObserver};
use crate::handshake::discard;
use crate::proto::{self, Command, Negotiated, RequestHeader};

/// Worker buffers larger than this are released after the request instead of kept.
const KEEP_BUFFER_BYTES: usize = 4 * 1024 * 1024 + proto::OFFSET_DATA_PREFIX_BYTES;

/// Everything a connection's workers share.
pub struct Context<'a> {
    pub connection_id: u64,
    pub export: &'a dyn Export,
    pub negotiated: Negotiated,
    pub observer: Option<&'a dyn RequestObserver>,
    /// Origin of [`RequestEvent::ts_ns`].
    pub epoch: Instant,
    /// Requests of this connection that may be in flight at once (at least 1).
    pub workers: usize,
}

/// Why a connection's transmission phase ended.
#[derive(Debug)]
pub enum Ended {
    /// The client sent `NBD_CMD_DISC`.
    Disconnect,
    /// The client closed its end (or the server shut the socket's read side).
    Closed,
    /// The client broke the protocol (bad request magic); hard disconnect.
    Protocol(String),
    Io(io::Error),
}

/// One request read off the wire.
enum Job {
    Run {
        header: RequestHeader,
        command: Command,
        start: Instant,
    },
    Refuse {
        header: RequestHeader,
        errno: u32,
        message: &'static str,
        start: Instant,
    },
    Disconnect,
}

struct Shared<R, W> {
    reader: Mutex<R>,
    writer: Mutex<W>,
    closing: AtomicBool,
    ended: Mutex<Option<Ended>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker that panicked cannot have left the stream half-framed in a way a lock
    // could repair; carry on and let the I/O error end the connection.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<R, W> Shared<R, W> {
    fn finish(&self, why: Ended) {
        self.closing.store(true, Ordering::SeqCst);
        lock(&self.ended).get_or_insert(why);
    }
}

/// Serves requests until the client disconnects, breaks the protocol or vanishes. Every
/// request read before the end is answered (in-flight work finishes) before returning.
pub fn serve<R, W>(reader: R, writer: W, ctx: &Context<'_>) -> Ended
where
    R: Read + Send,
    W: Write + Send,
{
    let shared = Shared {
        reader: Mutex::new(reader),
        writer: Mutex::new(writer),
        closing: AtomicBool::new(false),
        ended: Mutex::new(None),
    };
    std::thread::scope(|s| {
        for _ in 1..ctx.workers.max(1) {
            s.spawn(|| work(&shared, ctx));
        }
        work(&shared, ctx);
    });
    let ended = shared.ended.into_inner().unwrap_or_else(|p| p.into_inner());
    ended.unwrap_or(Ended::Closed)
}

fn work<R: Read, W: Write>(shared: &Shared<R, W>, ctx: &Context<'_>) {
    let mut buf = Vec::new();
    loop {
        let job = {
            let mut r = lock(&shared.reader);
            if shared.closing.load(Ordering::SeqCst) {
                return;
            }
            match next_job(&mut *r, ctx, &mut buf) {
                Ok(Job::Disconnect) => return shared.finish(Ended::Disconnect),
                Ok(job) => job,
                Err(why) => return shared.finish(why),
            }
        };
        let (event, reply) = match job {
            Job::Run {
                header,
                command,
                start,
            } => run(&header, command, start, ctx, &mut buf),
            Job::Refuse {
                header,
                errno,
                message,
                start,
            } => refuse(&header, errno, message, start, ctx, &mut buf),
            Job::Disconnect => unreachable!("handled while reading"),
        };
        let sent = {
            let mut w = lock(&shared.writer);
            w.write_all(&buf[..reply]).and_then(|()| w.flush())
        };
        if let Err(e) = sent {
            return shared.finish(Ended::Io(e));
        }
        if let Some(obs) = ctx.observer {
            let now_ns = ctx.epoch.elapsed().as_nanos() as u64;
            obs.observe(&RequestEvent {
                duration_ns: now_ns.saturating_sub(event.ts_ns),
                ..event
            });
        }
        if buf.capacity() > KEEP_BUFFER_BYTES {
            buf = Vec::new();
        }
    }
}

/// Reads one request; a write's payload lands in `buf`. Errors end the connection.
fn next_job<R: Read>(r: &mut R, ctx: &Context<'_>, buf: &mut Vec<u8>) -> Result<Job, Ended> {
    let mut hb = [0u8; proto::REQUEST_HEADER_BYTES];
    r.read_exact(&mut hb).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => Ended::Closed,
        _ => Ended::Io(e),
    })?;
    let start = Instant::now();
    let header = proto::parse_request_header(&hb).map_err(|e| Ended::Protocol(e.to_string()))?;
    match proto::check_request(&header, &ctx.negotiated) {
        Ok(Command::Disconnect) => Ok(Job::Disconnect),
        Ok(command) => {
            if let Command::Write { length, .. } = command {
                // A client vanishing here leaves the export untouched: nothing is
                // written until the whole payload has arrived.
                buf.resize(length as usize, 0);
                r.read_exact(buf).map_err(Ended::Io)?;
            }
            Ok(Job::Run {
                header,
                command,
                start,
            })
        }
        Err(rej) => {
            // An oversized or refused write's payload is consumed (bounded memory) so the
            // stream stays framed, then refused; see docs/nbd.md.
            discard(r, rej.discard_bytes.into()).map_err(Ended::Io)?;
            Ok(Job::Refuse {
                header,
                errno: rej.errno,
                message: rej.message,
                start,
            })
        }
    }
}

fn event_of(header: &RequestHeader, op: Op, start: Instant, ctx: &Context<'_>) -> RequestEvent {
    RequestEvent {
        connection_id: ctx.connection_id,
        op,
        offset_bytes: header.offset,
        length_bytes: header.length,
        fua: header.flags & proto::CMD_FLAG_FUA != 0,
        ts_ns: start.saturating_duration_since(ctx.epoch).as_nanos() as u64,
        duration_ns: 0,
        errno: 0,
    }
}

fn op_of(kind: u16) -> Op {
    match kind {
        proto::CMD_READ => Op::Read,
        proto::CMD_WRITE => Op::Write,
        proto::CMD_FLUSH => Op::Flush,
        proto::CMD_TRIM => Op::Trim,
        proto::CMD_WRITE_ZEROES => Op::WriteZeroes,
        _ => Op::Invalid,
    }
}

/// Executes a checked command; the reply is left in `buf[..len]`, `len` returned.
fn run(
    header: &RequestHeader,
    command: Command,
    start: Instant,
    ctx: &Context<'_>,
    buf: &mut Vec<u8>,
) -> (RequestEvent, usize) {
    let mut event = event_of(header, op_of(header.kind), start, ctx);
    let export = ctx.export;
    let done = match command {
        Command::Read { offset, length } => return read(header, offset, length, event, ctx, buf),
        Command::Write { offset, fua, .. } => export.write_at(buf, offset, fua),
        Command::Flush => export.flush(),
        Command::Trim {
            offset,
            length,
            fua,
        } => export.trim(offset, length.into(), fua),
        Command::WriteZeroes {
            offset,
            length,
            fua,
            may_trim,
        } => export.write_zeroes(offset, length.into(), fua, may_trim),
        Command::Disconnect => unreachable!("handled while reading"),
    };
    match done {
        Ok(()) => {
            // The reply goes over the front of the buffer, whose length stays: the next
            // write's payload then lands in bytes already initialized instead of making
            // `resize` zero the whole payload again (a 1 MiB memset per 1 MiB write).
            let reply = proto::encode_simple_reply(header.cookie, 0);
            if buf.len() < reply.len() {
                buf.resize(reply.len(), 0);
            }
            buf[..reply.len()].copy_from_slice(&reply);
            (event, reply.len())
        }
        Err(e) => {
            event.errno = nbd_errno(&e);
            let len = error_reply(header.cookie, event.errno, &e.to_string(), ctx, buf);
            (event, len)
        }
    }
}

/// Reads into `buf` behind the reply header so header and data go out in one write.
fn read(
    header: &RequestHeader,
    offset: u64,
    length: u32,
    mut event: RequestEvent,
    ctx: &Context<'_>,
    buf: &mut Vec<u8>,
) -> (RequestEvent, usize) {
    let structured = ctx.negotiated.structured;
    let prefix = if structured {
        proto::OFFSET_DATA_PREFIX_BYTES
    } else {
        proto::SIMPLE_REPLY_BYTES
    };
    let total = prefix + length as usize;
    buf.resize(total, 0);
    match ctx.export.read_at(&mut buf[prefix..total], offset) {
        Ok(()) => {
            if structured {
                proto::write_offset_data_prefix(buf, header.cookie, offset, length);
            } else {
                proto::write_simple_reply(buf, header.cookie, 0);
            }
            (event, total)
        }
        Err(e) => {
            event.errno = nbd_errno(&e);
            let len = error_reply(header.cookie, event.errno, &e.to_string(), ctx, buf);
            (event, len)
        }
    }
}

fn refuse(
    header: &RequestHeader,
    errno: u32,
    message: &str,
    start: Instant,
    ctx: &Context<'_>,
    buf: &mut Vec<u8>,
) -> (RequestEvent, usize) {
    let mut event = event_of(header, op_of(header.kind), start, ctx);
    event.errno = errno;
    (event, error_reply(header.cookie, errno, message, ctx, buf))
}

/// An error reply: a final `NBD_REPLY_TYPE_ERROR` chunk carrying the message when
/// structured replies were negotiated (required for reads, preferred for the rest),
/// else a simple reply with the error and no payload.
fn error_reply(
    cookie: u64,
    errno: u32,
    message: &str,
    ctx: &Context<'_>,
    buf: &mut Vec<u8>,
) -> usize {
    buf.clear();
    if ctx.negotiated.structured {
        buf.extend(proto::encode_error_chunk(cookie, errno, message));
    } else {
        buf.extend_from_slice(&proto::encode_simple_reply(cookie, errno));
    }
    buf.len()
}
