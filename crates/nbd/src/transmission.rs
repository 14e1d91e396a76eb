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
//!
//! Workers are started on demand: a connection begins with one, and a worker that takes
//! a request while no other waits for the next one starts another, up to `workers`, each
//! drawn from the server-wide `worker_budget`. An extra worker leaves (returning its
//! share of the budget) once two others already wait, so idle connections cost one
//! thread.
//!
//! Payloads larger than [`STREAM_PIECE_BYTES`] are streamed in pieces of that size: a
//! large write is written piece by piece as it arrives (under the reader lock, which the
//! stream's order requires), a large read is sent piece by piece under the writer lock.
//! Memory stays bounded by a piece per worker whatever the request size.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::Scope;
use std::time::{Duration, Instant};

use crate::export::{nbd_errno, Export, Op, RequestEvent, RequestObserver};
use crate::handshake::discard;
use crate::proto::{self, Command, Negotiated, RequestHeader};

/// Reads and writes longer than this are streamed in pieces of this size.
pub const STREAM_PIECE_BYTES: usize = 4 * 1024 * 1024;
/// Worker buffers larger than this are released after the request instead of kept.
const KEEP_BUFFER_BYTES: usize = STREAM_PIECE_BYTES + proto::OFFSET_DATA_PREFIX_BYTES;
/// An extra worker leaves (two others being idle) only after waiting this long for its
/// last request: under a steady pipelined load the idle count flickers around two, and
/// leaving at once made workers exit and be spawned again every few requests (a thread
/// start and exit per handful of 4 KiB requests, a fifth of the server's time at QD32).
const WORKER_LINGER: Duration = Duration::from_millis(50);

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
    /// Worker threads beyond each connection's first still available, server-wide.
    pub worker_budget: &'a AtomicUsize,
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
    /// A large write already streamed to the export while it was read.
    Written {
        header: RequestHeader,
        done: io::Result<()>,
        start: Instant,
    },
    Disconnect,
}

struct Shared<R, W> {
    reader: Mutex<R>,
    writer: Mutex<W>,
    closing: AtomicBool,
    ended: Mutex<Option<Ended>>,
    /// Workers running, this thread included.
    workers: AtomicUsize,
    /// Workers waiting for (or holding) the reader lock without a request yet.
    idle: AtomicUsize,
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
        workers: AtomicUsize::new(1),
        idle: AtomicUsize::new(0),
    };
    std::thread::scope(|s| work(s, &shared, ctx, false));
    let ended = shared.ended.into_inner().unwrap_or_else(|p| p.into_inner());
    ended.unwrap_or(Ended::Closed)
}

/// Starts one more worker when none waits for the next request and both this
/// connection's limit and the server's budget allow it.
fn maybe_grow<'s, 'e, R, W>(
    scope: &'s Scope<'s, 'e>,
    shared: &'e Shared<R, W>,
    ctx: &'e Context<'e>,
) where
    R: Read + Send,
    W: Write + Send,
{
    if shared.idle.load(Ordering::SeqCst) > 0 || shared.closing.load(Ordering::SeqCst) {
        return;
    }
    let limit = ctx.workers.max(1);
    let grown = shared
        .workers
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < limit).then_some(n + 1)
        });
    if grown.is_err() {
        return;
    }
    let funded = ctx
        .worker_budget
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    let started = funded.is_ok()
        && std::thread::Builder::new()
            .name(format!("nbd-conn-{}w", ctx.connection_id))
            .spawn_scoped(scope, move || work(scope, shared, ctx, true))
            .is_ok();
    if !started {
        if funded.is_ok() {
            ctx.worker_budget.fetch_add(1, Ordering::SeqCst);
        }
        shared.workers.fetch_sub(1, Ordering::SeqCst);
    }
}

fn work<'s, 'e, R, W>(
    scope: &'s Scope<'s, 'e>,
    shared: &'e Shared<R, W>,
    ctx: &'e Context<'e>,
    extra: bool,
) where
    R: Read + Send,
    W: Write + Send,
{
    let mut buf = Vec::new();
    let mut waited = Duration::ZERO;
    loop {
        if extra && waited >= WORKER_LINGER && shared.idle.load(Ordering::SeqCst) >= 2 {
            break; // Two others already wait: this one's share goes back to the budget.
        }
        shared.idle.fetch_add(1, Ordering::SeqCst);
        let asked = Instant::now();
        let job = {
            let mut r = lock(&shared.reader);
            let job = if shared.closing.load(Ordering::SeqCst) {
                None
            } else {
                Some(next_job(&mut *r, ctx, &mut buf))
            };
            shared.idle.fetch_sub(1, Ordering::SeqCst);
            match job {
                None => break,
                Some(Ok(Job::Disconnect)) => {
                    shared.finish(Ended::Disconnect);
                    break;
                }
                Some(Ok(job)) => job,
                Some(Err(why)) => {
                    shared.finish(why);
                    break;
                }
            }
        };
        waited = asked.elapsed();
        maybe_grow(scope, shared, ctx);
        if let Err(why) = answer(job, shared, ctx, &mut buf) {
            shared.finish(why);
            break;
        }
        if buf.capacity() > KEEP_BUFFER_BYTES {
            buf = Vec::new();
        }
    }
    shared.workers.fetch_sub(1, Ordering::SeqCst);
    if extra {
        ctx.worker_budget.fetch_add(1, Ordering::SeqCst);
    }
}

/// Executes one request and sends its reply; tells the observer.
fn answer<R, W: Write>(
    job: Job,
    shared: &Shared<R, W>,
    ctx: &Context<'_>,
    buf: &mut Vec<u8>,
) -> Result<(), Ended> {
    let (event, reply) = match job {
        Job::Run {
            header,
            command: Command::Read { offset, length },
            start,
        } if length as usize > STREAM_PIECE_BYTES => {
            let event = stream_read(&header, offset, length, start, shared, ctx, buf)?;
            (event, None)
        }
        Job::Run {
            header,
            command,
            start,
        } => {
            let (event, len) = run(&header, command, start, ctx, buf);
            (event, Some(len))
        }
        Job::Refuse {
            header,
            errno,
            message,
            start,
        } => {
            let (event, len) = refuse(&header, errno, message, start, ctx, buf);
            (event, Some(len))
        }
        Job::Written {
            header,
            done,
            start,
        } => {
            let event = event_of(&header, Op::Write, start, ctx);
            let (event, len) = reply_done(&header, done, event, ctx, buf);
            (event, Some(len))
        }
        Job::Disconnect => unreachable!("handled while reading"),
    };
    if let Some(len) = reply {
        let mut w = lock(&shared.writer);
        w.write_all(&buf[..len])
            .and_then(|()| w.flush())
            .map_err(Ended::Io)?;
    }
    if let Some(obs) = ctx.observer {
        let now_ns = ctx.epoch.elapsed().as_nanos() as u64;
        obs.observe(&RequestEvent {
            duration_ns: now_ns.saturating_sub(event.ts_ns),
            ..event
        });
    }
    Ok(())
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
        Ok(Command::Write {
            offset,
            length,
            fua,
        }) if length as usize > STREAM_PIECE_BYTES => {
            let done = stream_write(r, ctx.export, offset, length, fua, buf)?;
            Ok(Job::Written {
                header,
                done,
                start,
            })
        }
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
        proto::CMD_BLOCK_STATUS => Op::BlockStatus,
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
    let event = event_of(header, op_of(header.kind), start, ctx);
    let export = ctx.export;
    let done = match command {
        Command::Read { offset, length } => return read(header, offset, length, event, ctx, buf),
        Command::BlockStatus {
            offset,
            length,
            req_one,
        } => return block_status(header, (offset, length, req_one), event, ctx, buf),
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
    reply_done(header, done, event, ctx, buf)
}

/// The reply to a command that returns no data, left in `buf[..len]`.
fn reply_done(
    header: &RequestHeader,
    done: io::Result<()>,
    mut event: RequestEvent,
    ctx: &Context<'_>,
    buf: &mut Vec<u8>,
) -> (RequestEvent, usize) {
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

/// Writes a large payload piece by piece as it arrives. After a failed piece the rest is
/// read and dropped (the stream stays framed) and the first error is the result; the
/// outer error means the connection broke.
fn stream_write<R: Read>(
    r: &mut R,
    export: &dyn Export,
    offset: u64,
    length: u32,
    fua: bool,
    buf: &mut Vec<u8>,
) -> Result<io::Result<()>, Ended> {
    let mut done = Ok(());
    let mut at = 0u64;
    while at < u64::from(length) {
        let piece = (u64::from(length) - at).min(STREAM_PIECE_BYTES as u64) as usize;
        buf.resize(piece, 0);
        r.read_exact(buf).map_err(Ended::Io)?;
        if done.is_ok() {
            // Each piece carries FUA: the reply may only come once every piece is durable.
            done = export.write_at(buf, offset + at, fua);
        }
        at += piece as u64;
    }
    Ok(done)
}

/// Answers a large read: the first piece is read before anything is sent, so an error
/// there gets a proper error reply; then one reply header for the whole length goes out
/// and the data follows piece by piece under the writer lock. A later error can only be
/// told by closing the connection, which the protocol allows.
fn stream_read<R, W: Write>(
    header: &RequestHeader,
    offset: u64,
    length: u32,
    start: Instant,
    shared: &Shared<R, W>,
    ctx: &Context<'_>,
    buf: &mut Vec<u8>,
) -> Result<RequestEvent, Ended> {
    let mut event = event_of(header, Op::Read, start, ctx);
    let prefix = reply_prefix_bytes(ctx);
    buf.resize(prefix + STREAM_PIECE_BYTES, 0);
    if let Err(e) = ctx.export.read_at(&mut buf[prefix..], offset) {
        event.errno = nbd_errno(&e);
        let len = error_reply(header.cookie, event.errno, &e.to_string(), ctx, buf);
        lock(&shared.writer)
            .write_all(&buf[..len])
            .map_err(Ended::Io)?;
        return Ok(event);
    }
    write_reply_prefix(buf, header.cookie, offset, length, ctx);
    let mut w = lock(&shared.writer);
    w.write_all(buf).map_err(Ended::Io)?;
    let mut at = STREAM_PIECE_BYTES as u64;
    while at < u64::from(length) {
        let piece = (u64::from(length) - at).min(STREAM_PIECE_BYTES as u64) as usize;
        let data = &mut buf[..piece];
        ctx.export.read_at(data, offset + at).map_err(Ended::Io)?;
        w.write_all(data).map_err(Ended::Io)?;
        at += piece as u64;
    }
    w.flush().map_err(Ended::Io)?;
    Ok(event)
}

/// Bytes of the reply header that precedes read data.
fn reply_prefix_bytes(ctx: &Context<'_>) -> usize {
    if ctx.negotiated.structured {
        proto::OFFSET_DATA_PREFIX_BYTES
    } else {
        proto::SIMPLE_REPLY_BYTES
    }
}

/// The header of a successful read's reply, in front of `length` bytes of data.
fn write_reply_prefix(buf: &mut [u8], cookie: u64, offset: u64, length: u32, ctx: &Context<'_>) {
    if ctx.negotiated.structured {
        proto::write_offset_data_prefix(buf, cookie, offset, length);
    } else {
        proto::write_simple_reply(buf, cookie, 0);
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
    let prefix = reply_prefix_bytes(ctx);
    let total = prefix + length as usize;
    buf.resize(total, 0);
    match ctx.export.read_at(&mut buf[prefix..total], offset) {
        Ok(()) => {
            write_reply_prefix(buf, header.cookie, offset, length, ctx);
            (event, total)
        }
        Err(e) => {
            event.errno = nbd_errno(&e);
            let len = error_reply(header.cookie, event.errno, &e.to_string(), ctx, buf);
            (event, len)
        }
    }
}

/// Answers BLOCK_STATUS with one `base:allocation` chunk (a single extent with
/// `REQ_ONE`), lengths clipped to the request.
fn block_status(
    header: &RequestHeader,
    (offset, length, req_one): (u64, u32, bool),
    mut event: RequestEvent,
    ctx: &Context<'_>,
    buf: &mut Vec<u8>,
) -> (RequestEvent, usize) {
    match ctx.export.allocation(offset, length.into()) {
        Ok(runs) => {
            let mut left = u64::from(length);
            let mut extents = Vec::new();
            for (len, flags) in runs {
                let len = len.min(left);
                if len == 0 || (req_one && !extents.is_empty()) {
                    break;
                }
                extents.push((len as u32, flags));
                left -= len;
            }
            if extents.is_empty() {
                extents.push((length, 0));
            }
            let id = proto::META_BASE_ALLOCATION_ID;
            *buf = proto::encode_block_status_chunk(header.cookie, id, &extents);
            (event, buf.len())
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
