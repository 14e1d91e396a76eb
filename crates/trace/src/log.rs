//! A whole trace held compactly in memory: requests delta- and varint-encoded in blocks,
//! read back in order (or from any index) as [`Request`]s.
//!
//! A [`Request`] is 40 bytes; 20 million of them are 800 MB, more than every other
//! structure of an evaluation together. Most fields of a request repeat or move little
//! from the one before (time, process, command, device; a sequential request starts where
//! the previous one ended), so a log stores each request as a flags byte and the fields
//! that changed, as LEB128 varints of their differences: about 8 to 12 bytes a request.
//! Every block of [`RequestLog::BLOCK`] requests starts from a fresh state, so reading
//! from request `i` decodes at most one block's worth before it.
//!
//! Even encoded, 2·10^7 requests are about 190 MB, as much as a replay's whole queue: a
//! log that outgrows [`RequestLog::SPILL_BYTES`] moves its whole blocks to an unnamed
//! temporary file (in `TMPDIR`) and reads them back through a small window, so its
//! memory stays bounded whatever the trace's length (docs/scale.md).

use std::borrow::{Borrow, Cow};
use std::fs::File;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::request::{CommandId, Op, Request};

/// Requests in arrival order, encoded (see the module comment).
#[derive(Clone, Debug)]
pub struct RequestLog {
    /// The encoded requests not spilled: bytes `spilled()..` of the log.
    bytes: Vec<u8>,
    /// Byte offset in the log of each block's first request.
    blocks: Vec<usize>,
    len: usize,
    /// The encoder's state after the last request pushed.
    last: Previous,
    /// The device of every request pushed, when they all address one.
    one_device: Option<u32>,
    mixed_devices: bool,
    /// Where the log's first bytes are once it outgrew `spill_at`.
    spill: Option<Spill>,
    /// Bytes held in memory at which whole blocks move to the spill file (0: never).
    spill_at: usize,
    /// Why spilling stopped, if a file could not be made or written: the log then
    /// keeps what is left in memory.
    spill_failure: Option<Arc<io::Error>>,
}

/// The first `len` bytes of a log, in a file only logs cloned from it share (a log
/// that appends to a shared file copies it first).
#[derive(Clone, Debug)]
struct Spill {
    file: Arc<File>,
    len: usize,
}

impl Default for RequestLog {
    fn default() -> RequestLog {
        RequestLog::spilling_at(RequestLog::SPILL_BYTES)
    }
}

/// What a request is encoded against: the fields of the request before it in its block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Previous {
    ts_ns: u64,
    end_sector: u64,
    sectors: u32,
    pid: Option<u32>,
    command: CommandId,
    device: u32,
}

impl Previous {
    /// The state a request leaves for the next one.
    fn after(r: &Request) -> Previous {
        Previous {
            ts_ns: r.ts_ns,
            end_sector: r.sector.wrapping_add(u64::from(r.sectors)),
            sectors: r.sectors,
            pid: r.pid,
            command: r.command,
            device: r.device,
        }
    }
}

const WRITE: u8 = 1;
const NEW_PID: u8 = 1 << 1;
const NEW_COMMAND: u8 = 1 << 2;
const NEW_DEVICE: u8 = 1 << 3;
/// The request starts where the one before it ended: no sector field.
const SEQUENTIAL: u8 = 1 << 4;
/// The request is as long as the one before it: no length field.
const SAME_LENGTH: u8 = 1 << 5;

impl RequestLog {
    /// Requests per block: reading from an index decodes at most this many before it.
    pub const BLOCK: usize = 4096;

    /// Encoded bytes a log holds in memory before it moves them to a file: a trace of
    /// up to about 400,000 requests is never written out.
    pub const SPILL_BYTES: usize = 4 << 20;

    pub fn new() -> RequestLog {
        RequestLog::default()
    }

    /// An empty log that moves its blocks to a temporary file whenever `bytes` of them
    /// are in memory (0: never).
    pub fn spilling_at(bytes: usize) -> RequestLog {
        RequestLog {
            bytes: Vec::new(),
            blocks: Vec::new(),
            len: 0,
            last: Previous::default(),
            one_device: None,
            mixed_devices: false,
            spill: None,
            spill_at: bytes,
            spill_failure: None,
        }
    }

    /// Bytes of the log in its temporary file.
    pub fn spilled_bytes(&self) -> usize {
        self.spill.as_ref().map_or(0, |s| s.len)
    }

    /// Why the log stopped moving its blocks to a file (it holds the rest in memory).
    pub fn spill_failure(&self) -> Option<&io::Error> {
        self.spill_failure.as_deref()
    }

    /// The log's encoded length in bytes, in the file and in memory.
    fn total_bytes(&self) -> usize {
        self.spilled_bytes() + self.bytes.len()
    }

    /// Moves the bytes in memory (whole blocks) to the end of the spill file; on an
    /// error, keeps them and stops spilling.
    fn spill_blocks(&mut self) {
        if let Err(e) = self.try_spill() {
            self.spill_at = 0;
            self.spill_failure = Some(Arc::new(e));
        }
    }

    fn try_spill(&mut self) -> io::Result<()> {
        let spill = match &mut self.spill {
            Some(s) => s,
            None => self.spill.insert(Spill {
                file: Arc::new(tempfile::tempfile()?),
                len: 0,
            }),
        };
        if Arc::get_mut(&mut spill.file).is_none() {
            // A clone reads this file: append to a copy of our part of it.
            let copy = tempfile::tempfile()?;
            copy_between(&spill.file, &copy, spill.len)?;
            spill.file = Arc::new(copy);
        }
        write_at(&spill.file, &self.bytes, spill.len)?;
        spill.len += self.bytes.len();
        self.bytes.clear();
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the log holds (its encoded requests and block index).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.blocks.capacity() * std::mem::size_of::<usize>()
    }

    /// The one device every request addresses; none when empty or several.
    pub fn single_device(&self) -> Option<u32> {
        self.one_device.filter(|_| !self.mixed_devices)
    }

    /// Appends `r` after the requests already held.
    pub fn push(&mut self, r: Request) {
        if self.len.is_multiple_of(Self::BLOCK) {
            if self.spill_at > 0 && self.bytes.len() >= self.spill_at {
                self.spill_blocks();
            }
            self.blocks.push(self.total_bytes());
            self.last = Previous::default();
        }
        match self.one_device {
            None if self.len == 0 => self.one_device = Some(r.device),
            Some(d) if d != r.device => self.mixed_devices = true,
            _ => {}
        }
        let p = self.last;
        let mut flags = if r.op.is_write() { WRITE } else { 0 };
        flags |= flag(r.pid != p.pid, NEW_PID)
            | flag(r.command != p.command, NEW_COMMAND)
            | flag(r.device != p.device, NEW_DEVICE)
            | flag(r.sector == p.end_sector, SEQUENTIAL)
            | flag(r.sectors == p.sectors, SAME_LENGTH);
        let out = &mut self.bytes;
        out.push(flags);
        put_varint(out, zigzag(r.ts_ns.wrapping_sub(p.ts_ns)));
        if flags & SEQUENTIAL == 0 {
            put_varint(out, zigzag(r.sector.wrapping_sub(p.end_sector)));
        }
        if flags & SAME_LENGTH == 0 {
            put_varint(out, u64::from(r.sectors));
        }
        if flags & NEW_PID != 0 {
            put_varint(out, r.pid.map_or(0, |p| u64::from(p) + 1));
        }
        if flags & NEW_COMMAND != 0 {
            put_varint(out, u64::from(r.command));
        }
        if flags & NEW_DEVICE != 0 {
            put_varint(out, u64::from(r.device));
        }
        self.last = Previous::after(&r);
        self.len += 1;
    }

    /// Gives back the spare capacity of a finished log.
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.blocks.shrink_to_fit();
    }

    /// Every request, as one span.
    pub fn span(&self) -> RequestSpan<'_> {
        RequestSpan {
            log: self,
            start: 0,
            end: self.len,
        }
    }

    /// The requests in order.
    pub fn iter(&self) -> RequestIter<'_> {
        self.span().iter()
    }

    /// Request `i`; panics past the end.
    pub fn get(&self, i: usize) -> Request {
        self.span().get(i)
    }

    /// Decodes from request `start` to `end` (exclusive).
    fn iter_between(&self, start: usize, end: usize) -> RequestIter<'_> {
        let block = start / Self::BLOCK;
        // The end of the block holding the last request decoded bounds what a read of
        // the spill file needs.
        let last_block = end.max(start + 1).saturating_sub(1) / Self::BLOCK;
        let mut it = RequestIter {
            log: self,
            window: Vec::new(),
            window_at: 0,
            pos: self
                .blocks
                .get(block)
                .copied()
                .unwrap_or(self.total_bytes()),
            stop: self
                .blocks
                .get(last_block + 1)
                .copied()
                .unwrap_or(self.total_bytes()),
            index: block * Self::BLOCK,
            end,
            prev: Previous::default(),
        };
        while it.index < start {
            it.decode();
        }
        it
    }
}

impl<R: Borrow<Request>> FromIterator<R> for RequestLog {
    fn from_iter<I: IntoIterator<Item = R>>(iter: I) -> RequestLog {
        let mut log = RequestLog::new();
        for r in iter {
            log.push(*r.borrow());
        }
        log.shrink_to_fit();
        log
    }
}

impl From<Vec<Request>> for RequestLog {
    fn from(requests: Vec<Request>) -> RequestLog {
        requests.iter().collect()
    }
}

impl From<&[Request]> for RequestLog {
    fn from(requests: &[Request]) -> RequestLog {
        requests.iter().collect()
    }
}

/// Requests held any way (a log, a slice, a vector) seen as a log: a log as it is, the
/// others encoded into one. What a function taking a whole trace accepts, so that its
/// callers with a `Vec<Request>` at hand need not build the log themselves.
pub trait AsRequestLog {
    fn as_request_log(&self) -> Cow<'_, RequestLog>;
}

impl AsRequestLog for RequestLog {
    fn as_request_log(&self) -> Cow<'_, RequestLog> {
        Cow::Borrowed(self)
    }
}

impl AsRequestLog for [Request] {
    fn as_request_log(&self) -> Cow<'_, RequestLog> {
        Cow::Owned(self.iter().collect())
    }
}

impl AsRequestLog for Vec<Request> {
    fn as_request_log(&self) -> Cow<'_, RequestLog> {
        self.as_slice().as_request_log()
    }
}

fn flag(set: bool, bit: u8) -> u8 {
    if set {
        bit
    } else {
        0
    }
}

/// A signed difference (as the wrapped unsigned one) folded so that small magnitudes of
/// either sign are small numbers.
fn zigzag(diff: u64) -> u64 {
    let d = diff as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> u64 {
    ((z >> 1) as i64 ^ -((z & 1) as i64)) as u64
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A range of a [`RequestLog`]: what a phase, an epoch or a training set is.
#[derive(Clone, Copy, Debug)]
pub struct RequestSpan<'a> {
    log: &'a RequestLog,
    start: usize,
    end: usize,
}

impl<'a> RequestSpan<'a> {
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The index in its log of the span's first request (what tells two spans apart).
    pub fn first_index(&self) -> usize {
        self.start
    }

    /// The log the span is a range of.
    pub fn log(&self) -> &'a RequestLog {
        self.log
    }

    /// The span's requests in order.
    pub fn iter(&self) -> RequestIter<'a> {
        self.log.iter_between(self.start, self.end)
    }

    /// The span's request `i` (from 0); panics past its end.
    pub fn get(&self, i: usize) -> Request {
        assert!(i < self.len(), "request {i} of a span of {}", self.len());
        self.log
            .iter_between(self.start + i, self.start + i + 1)
            .next()
            .expect("inside the span")
    }

    /// The part `range` of this span (indices relative to it); panics when it is not inside.
    pub fn sub(&self, range: impl RangeBounds<usize>) -> RequestSpan<'a> {
        let from = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s + 1,
            Bound::Unbounded => 0,
        };
        let to = match range.end_bound() {
            Bound::Included(&e) => e + 1,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len(),
        };
        assert!(
            from <= to && to <= self.len(),
            "range {from}..{to} of a span of {}",
            self.len()
        );
        RequestSpan {
            log: self.log,
            start: self.start + from,
            end: self.start + to,
        }
    }

    /// Consecutive spans of `n` requests (the last one shorter), as slices' `chunks`.
    pub fn chunks(&self, n: usize) -> impl Iterator<Item = RequestSpan<'a>> + 'a {
        assert!(n > 0, "chunks of 0 requests");
        let (log, end) = (self.log, self.end);
        (self.start..end).step_by(n).map(move |s| RequestSpan {
            log,
            start: s,
            end: (s + n).min(end),
        })
    }
}

impl<'a> IntoIterator for RequestSpan<'a> {
    type Item = Request;
    type IntoIter = RequestIter<'a>;
    fn into_iter(self) -> RequestIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a RequestLog {
    type Item = Request;
    type IntoIter = RequestIter<'a>;
    fn into_iter(self) -> RequestIter<'a> {
        self.iter()
    }
}

/// Decodes a log's requests in order.
#[derive(Clone, Debug)]
pub struct RequestIter<'a> {
    log: &'a RequestLog,
    /// Bytes `window_at..` of the log read from its spill file.
    window: Vec<u8>,
    window_at: usize,
    /// Byte offset in the log of the next request.
    pos: usize,
    /// Where the blocks this iterator decodes end (how far a read of the file goes).
    stop: usize,
    /// Index of the next request decoded.
    index: usize,
    end: usize,
    prev: Previous,
}

/// The most bytes one request takes: its flags and six varints of up to 10 bytes.
const MAX_ENCODED: usize = 61;

/// Bytes of a spill file read at once at most.
const WINDOW_BYTES: usize = 256 << 10;

impl RequestIter<'_> {
    /// The log's bytes from the next request on: at least one request's worth.
    fn bytes(&mut self) -> &[u8] {
        let spilled = self.log.spilled_bytes();
        if self.pos >= spilled {
            return &self.log.bytes[self.pos - spilled..];
        }
        let held_end = self.window_at + self.window.len();
        // Blocks never straddle the file's end (nor `stop`, a block's end), so a request
        // starting before either ends there: no read past what is held.
        if self.pos < self.window_at
            || (self.pos + MAX_ENCODED > held_end && held_end < spilled.min(self.stop))
        {
            let want = (self.stop.min(self.pos + WINDOW_BYTES)).max(self.pos + MAX_ENCODED);
            let to = want.min(spilled);
            let spill = self.log.spill.as_ref().expect("a spilled log has a file");
            self.window.resize(to - self.pos, 0);
            read_at(&spill.file, &mut self.window, self.pos).unwrap_or_else(|e| {
                panic!("reading the request log back from its temporary file: {e}")
            });
            self.window_at = self.pos;
        }
        &self.window[self.pos - self.window_at..]
    }

    /// The next request of the log, whatever `end` says.
    fn decode(&mut self) -> Request {
        if self.index.is_multiple_of(RequestLog::BLOCK) {
            self.prev = Previous::default();
        }
        let p = self.prev;
        let (r, used) = decode_one(self.bytes(), &p);
        self.pos += used;
        self.prev = Previous::after(&r);
        self.index += 1;
        r
    }
}

/// The request encoded at the start of `bytes` against `p`, and the bytes it took.
fn decode_one(bytes: &[u8], p: &Previous) -> (Request, usize) {
    let mut pos = 1;
    let mut varint = || {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = bytes[pos];
            pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    };
    let flags = bytes[0];
    let ts_ns = p.ts_ns.wrapping_add(unzigzag(varint()));
    let sector = match flags & SEQUENTIAL {
        0 => p.end_sector.wrapping_add(unzigzag(varint())),
        _ => p.end_sector,
    };
    let sectors = match flags & SAME_LENGTH {
        0 => varint() as u32,
        _ => p.sectors,
    };
    let pid = match flags & NEW_PID {
        0 => p.pid,
        _ => varint().checked_sub(1).map(|v| v as u32),
    };
    let command = match flags & NEW_COMMAND {
        0 => p.command,
        _ => varint() as CommandId,
    };
    let device = match flags & NEW_DEVICE {
        0 => p.device,
        _ => varint() as u32,
    };
    let op = if flags & WRITE != 0 {
        Op::Write
    } else {
        Op::Read
    };
    #[rustfmt::skip]
    let r = Request { ts_ns, pid, command, device, sector, sectors, op };
    (r, pos)
}

#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8], at: usize) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, at as u64)
}

#[cfg(unix)]
fn read_at(file: &File, bytes: &mut [u8], at: usize) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, bytes, at as u64)
}

#[cfg(not(unix))]
fn write_at(_file: &File, _bytes: &[u8], _at: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "a request log spills to a file only on Unix",
    ))
}

#[cfg(not(unix))]
fn read_at(_file: &File, _bytes: &mut [u8], _at: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "a request log spills to a file only on Unix",
    ))
}

/// Copies the first `len` bytes of `from` into `to`.
fn copy_between(from: &File, to: &File, len: usize) -> io::Result<()> {
    let mut buf = vec![0u8; WINDOW_BYTES];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(buf.len());
        read_at(from, &mut buf[..n], at)?;
        write_at(to, &buf[..n], at)?;
        at += n;
    }
    Ok(())
}

impl Iterator for RequestIter<'_> {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        (self.index < self.end).then(|| self.decode())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end.saturating_sub(self.index);
        (n, Some(n))
    }
}

impl ExactSizeIterator for RequestIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ts_ns: u64, pid: Option<u32>, device: u32, sector: u64, sectors: u32) -> Request {
        Request {
            ts_ns,
            pid,
            command: pid.unwrap_or(0) % 3,
            device,
            sector,
            sectors,
            op: if sector.is_multiple_of(2) {
                Op::Read
            } else {
                Op::Write
            },
        }
    }

    /// Requests exercising every field's extremes: times going back, sectors at both ends
    /// of the address space, pids none and u32::MAX, lengths changing and repeating.
    fn awkward(n: usize) -> Vec<Request> {
        let mut out = Vec::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pid = match x % 5 {
                0 => None,
                1 => Some(u32::MAX),
                _ => Some((x >> 40) as u32 % 7),
            };
            let sector = match x % 7 {
                0 => 0,
                1 => u64::MAX - 1000,
                2 => out.last().map_or(0, |r: &Request| r.end_sector()),
                _ => x >> 20,
            };
            let ts = match x % 11 {
                0 => u64::MAX,
                1 => 0,
                _ => i as u64 * 1000 + (x % 997),
            };
            out.push(req(
                ts,
                pid,
                (x >> 50) as u32 % 3,
                sector,
                1 + (x % 4) as u32,
            ));
        }
        out
    }

    #[test]
    fn a_log_gives_back_every_request_exactly() {
        let reqs = awkward(3 * RequestLog::BLOCK + 17);
        let log: RequestLog = reqs.iter().collect();
        assert_eq!(log.len(), reqs.len());
        assert_eq!(log.iter().collect::<Vec<_>>(), reqs);
        for i in [0, 1, 4095, 4096, 4097, 8191, reqs.len() - 1] {
            assert_eq!(log.get(i), reqs[i], "request {i}");
        }
    }

    #[test]
    fn spans_and_chunks_are_the_slices_they_stand_for() {
        let reqs = awkward(2 * RequestLog::BLOCK + 50);
        let log = RequestLog::from(reqs.as_slice());
        let span = log.span().sub(4000..8200);
        assert_eq!(span.first_index(), 4000);
        assert_eq!(span.iter().collect::<Vec<_>>(), reqs[4000..8200]);
        let inner = span.sub(90..);
        assert_eq!(inner.first_index(), 4090);
        assert_eq!(inner.iter().collect::<Vec<_>>(), reqs[4090..8200]);
        let chunks: Vec<Vec<Request>> = span.chunks(500).map(|c| c.iter().collect()).collect();
        let want: Vec<Vec<Request>> = reqs[4000..8200].chunks(500).map(|c| c.to_vec()).collect();
        assert_eq!(chunks, want);
        assert!(log.span().sub(7..7).iter().next().is_none());
    }

    #[test]
    fn a_log_knows_whether_one_device_is_addressed() {
        let one: RequestLog = (0..10).map(|i| req(i, None, 4, i * 8, 8)).collect();
        assert_eq!(one.single_device(), Some(4));
        let reqs = awkward(100);
        let several = RequestLog::from(reqs);
        assert_eq!(several.single_device(), None);
        assert_eq!(RequestLog::new().single_device(), None);
    }

    #[test]
    fn a_typical_request_takes_a_fraction_of_its_40_bytes() {
        // Mostly sequential 4 KiB reads of one process, 100 µs apart.
        let log: RequestLog = (0..100_000u64)
            .map(|i| req(i * 100_000, Some(42), 0, (i / 3) * 1000 + (i % 3) * 8, 8))
            .collect();
        assert!(log.heap_bytes() < 100_000 * 8, "{} bytes", log.heap_bytes());
    }

    /// A log that moved its blocks to a file gives back what one held in memory does,
    /// from any index: spans inside the file, inside memory, across the two, and
    /// requests whose block starts in one window read and ends in the next.
    #[test]
    fn a_spilled_log_reads_back_as_the_log_in_memory() {
        let reqs = awkward(9 * RequestLog::BLOCK + 123);
        let whole: RequestLog = reqs.iter().collect();
        let mut spilled = RequestLog::spilling_at(1000);
        for r in &reqs {
            spilled.push(*r);
        }
        assert!(spilled.spill_failure().is_none());
        assert!(spilled.spilled_bytes() > 8 * whole.heap_bytes() / 10);
        assert!(spilled.heap_bytes() < whole.heap_bytes() / 5);
        assert_eq!(spilled.iter().collect::<Vec<_>>(), reqs);
        let n = reqs.len();
        for (a, b) in [
            (0, 1),
            (4095, 4097),
            (5000, 5500),
            (100, n),
            (8 * 4096 + 7, n),
            (n - 1, n),
        ] {
            let got: Vec<Request> = spilled.span().sub(a..b).iter().collect();
            assert_eq!(got, reqs[a..b], "{a}..{b}");
        }
        for i in [0, 4096, 4097, 9000, n - 1] {
            assert_eq!(spilled.get(i), reqs[i], "request {i}");
        }
        let chunks: Vec<Vec<Request>> = spilled
            .span()
            .chunks(500)
            .map(|c| c.iter().collect())
            .collect();
        let want: Vec<Vec<Request>> = reqs.chunks(500).map(|c| c.to_vec()).collect();
        assert_eq!(chunks, want);
    }

    /// A clone shares the file it was spilled to: what either appends afterwards is its
    /// own.
    #[test]
    fn clones_of_a_spilled_log_grow_apart() {
        let reqs = awkward(6 * RequestLog::BLOCK);
        let mut a = RequestLog::spilling_at(1);
        for r in &reqs[..3 * RequestLog::BLOCK] {
            a.push(*r);
        }
        let mut b = a.clone();
        for r in &reqs[3 * RequestLog::BLOCK..] {
            a.push(*r);
        }
        let other = awkward(6 * RequestLog::BLOCK + 9);
        for r in other.iter().rev().take(2 * RequestLog::BLOCK + 1) {
            b.push(*r);
        }
        assert!(b.spilled_bytes() > 0);
        assert_eq!(a.iter().collect::<Vec<_>>(), reqs);
        let mut want_b = reqs[..3 * RequestLog::BLOCK].to_vec();
        want_b.extend(other.iter().rev().take(2 * RequestLog::BLOCK + 1));
        assert_eq!(b.iter().collect::<Vec<_>>(), want_b);
    }
}
