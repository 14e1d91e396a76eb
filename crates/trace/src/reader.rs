//! Opening a trace file: transparent gzip/zstd, format sniffing, streaming requests with
//! `FILE:LINE: field F: why` errors and `--skip-bad` tolerance.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{BadLine, FieldError, FormatGuess, TraceError};
use crate::format::{self, LineFormat, ParseState, Parsed};
use crate::order::{OrderStats, Reorder, TimeOrder};
use crate::parquet::ParquetRows;
use crate::request::{Commands, Request};

/// How many non-empty lines `auto` looks at.
/// (blkreplay's license preamble runs to 58 lines before the first request.)
const SNIFF_LINES: usize = 128;

/// Which format to read a file as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FormatChoice {
    /// Sniff the first lines (and Parquet's magic).
    #[default]
    Auto,
    Named(String),
}

impl std::str::FromStr for FormatChoice {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(if s == "auto" {
            FormatChoice::Auto
        } else {
            FormatChoice::Named(s.to_string())
        })
    }
}

#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    pub format: FormatChoice,
    /// How many malformed lines to tolerate (and report) before failing.
    pub skip_bad: usize,
}

/// Comma-separated list of every format name, for error messages and `--help`.
pub fn supported_formats() -> String {
    let mut names: Vec<&str> = format::formats().iter().map(|f| f.name()).collect();
    names.push("parquet");
    names.join(", ")
}

/// Opens `path`, undoing gzip or zstd compression when its magic bytes say so.
pub fn open_decompressed(path: &Path) -> Result<Box<dyn BufRead + Send>, TraceError> {
    let io = |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    decompressed(Box::new(file)).map_err(io)
}

/// Wraps `input` in a gzip or zstd decoder when its first bytes are that format's magic.
pub fn decompressed(
    mut input: Box<dyn BufRead + Send>,
) -> std::io::Result<Box<dyn BufRead + Send>> {
    let magic = input.fill_buf()?;
    Ok(if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::read::MultiGzDecoder::new(input),
        ))
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let dec = zstd::stream::read::Decoder::with_buffer(input)?;
        Box::new(BufReader::with_capacity(1 << 20, dec))
    } else {
        input
    })
}

/// Parquet files start (and end) with these four bytes.
const PARQUET_MAGIC: &[u8] = b"PAR1";
const PARQUET: &str = "parquet";

enum Backend {
    Lines(Box<LineBackend>),
    Parquet(Box<ParquetRows>),
}

struct LineBackend {
    input: Box<dyn BufRead + Send>,
    format: &'static dyn LineFormat,
    /// Native lines are parsed straight out of the input's buffer (no copy, no separate
    /// search for the newline) by [`format::native::parse_line`].
    native: bool,
    state: ParseState,
    /// Lines read while sniffing (without their newline), replayed before the rest of
    /// the input.
    pending: VecDeque<(u64, Vec<u8>)>,
    /// A bad line met after requests that are still in the ring: reported next.
    deferred: Option<(u64, FieldError)>,
    /// A line that straddles the input's buffer, gathered here.
    buf: Vec<u8>,
    line_no: u64,
}

/// How many requests a backend decodes ahead at a time: small enough to stay in L1.
pub(crate) const RING: usize = 512;

/// Requests decoded ahead by the backend, handed out by [`TraceReader::next_request`]
/// without calling into the backend: `reqs[pos..end]` are good requests, in time order
/// once [`Reorder`] has seen them.
#[derive(Default)]
pub(crate) struct Ring {
    pub(crate) reqs: Vec<Request>,
    /// The line of each request of a fresh batch, for messages, when the backend knows
    /// it (text formats); left empty otherwise (Parquet).
    pub(crate) lines: Vec<u64>,
    pub(crate) pos: usize,
    pub(crate) end: usize,
}

impl Ring {
    /// Makes `reqs` (just filled) the requests to hand out.
    pub(crate) fn ready(&mut self) -> Refill {
        self.pos = 0;
        self.end = self.reqs.len();
        Refill::Ready
    }

    fn one(&mut self, r: Request, line: u64) -> Refill {
        self.reqs.clear();
        self.reqs.push(r);
        self.lines.clear();
        self.lines.push(line);
        self.ready()
    }
}

/// What a backend's refill found.
pub(crate) enum Refill {
    /// The ring holds at least one request.
    Ready,
    /// This line (or Parquet row, counted from 1) is not a request, for this reason.
    Bad(u64, FieldError),
    /// The end of the input.
    End,
}

/// A stream of requests from one trace file, of any supported format.
pub struct TraceReader {
    path: PathBuf,
    backend: Backend,
    ring: Ring,
    skip_bad: usize,
    bad: Vec<BadLine>,
    requests: u64,
    reorder: Reorder,
}

/// What `--format` asked for: a line format, Parquet, or sniffing.
enum Wanted {
    Line(&'static dyn LineFormat),
    Parquet,
    Sniff,
}

fn wanted(choice: &FormatChoice) -> Result<Wanted, TraceError> {
    match choice {
        FormatChoice::Auto => Ok(Wanted::Sniff),
        FormatChoice::Named(n) if n == PARQUET => Ok(Wanted::Parquet),
        FormatChoice::Named(n) => {
            format::by_name(n)
                .map(Wanted::Line)
                .ok_or_else(|| TraceError::UnknownFormat {
                    name: n.clone(),
                    supported: supported_formats(),
                })
        }
    }
}

impl TraceReader {
    /// Opens a trace. With [`FormatChoice::Auto`] the format is sniffed from the first
    /// lines (Parquet from its magic); a file no format claims is an error that lists the
    /// formats.
    pub fn open(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<TraceReader, TraceError> {
        let path = path.as_ref().to_path_buf();
        let wanted = wanted(&opts.format)?;
        let io = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        let mut file = BufReader::with_capacity(1 << 20, File::open(&path).map_err(io)?);
        let is_parquet = file.fill_buf().map_err(io)?.starts_with(PARQUET_MAGIC);
        if matches!(wanted, Wanted::Parquet) || (is_parquet && matches!(wanted, Wanted::Sniff)) {
            let rows = ParquetRows::open(file.into_inner(), &path)?;
            return Ok(Self::with_backend(
                path,
                Backend::Parquet(Box::new(rows)),
                opts,
            ));
        }
        let input = decompressed(Box::new(file)).map_err(io)?;
        Self::from_lines(input, path, wanted, opts)
    }

    /// Reads a trace from any byte stream (a pipe, memory, a fuzzer's input); `name` stands
    /// for the file in messages. Compression and Parquet are recognised as in [`open`]
    /// (Parquet is read into memory first, since it is read from its end).
    ///
    /// [`open`]: TraceReader::open
    pub fn from_reader(
        mut input: Box<dyn BufRead + Send>,
        name: impl Into<PathBuf>,
        opts: &ReadOptions,
    ) -> Result<TraceReader, TraceError> {
        let path = name.into();
        let wanted = wanted(&opts.format)?;
        let io = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        let is_parquet = input.fill_buf().map_err(io)?.starts_with(PARQUET_MAGIC);
        if matches!(wanted, Wanted::Parquet) || (is_parquet && matches!(wanted, Wanted::Sniff)) {
            let mut bytes = Vec::new();
            input.read_to_end(&mut bytes).map_err(io)?;
            let rows = ParquetRows::open(bytes::Bytes::from(bytes), &path)?;
            return Ok(Self::with_backend(
                path,
                Backend::Parquet(Box::new(rows)),
                opts,
            ));
        }
        let input = decompressed(input).map_err(io)?;
        Self::from_lines(input, path, wanted, opts)
    }

    fn from_lines(
        mut input: Box<dyn BufRead + Send>,
        path: PathBuf,
        wanted: Wanted,
        opts: &ReadOptions,
    ) -> Result<TraceReader, TraceError> {
        let mut pending = VecDeque::new();
        let mut line_no = 0;
        let mut buf = Vec::new();
        let format = match wanted {
            Wanted::Line(f) => f,
            _ => {
                while pending.len() < SNIFF_LINES {
                    let Some(line) = read_line(&mut input, &mut buf, &path)? else {
                        break;
                    };
                    line_no += 1;
                    pending.push_back((line_no, line));
                }
                // Sniffed as text with any bad bytes replaced: such a line does not hide
                // the format, and is then reported naming its field.
                let text: Vec<String> = pending
                    .iter()
                    .map(|(_, l)| String::from_utf8_lossy(l).into_owned())
                    .collect();
                let lines: Vec<&str> = text.iter().map(String::as_str).collect();
                sniff(&path, &lines, format::formats())?
            }
        };
        let backend = Backend::Lines(Box::new(LineBackend {
            input,
            format,
            native: format.name() == format::Native.name(),
            state: ParseState::default(),
            pending,
            deferred: None,
            buf,
            line_no,
        }));
        Ok(Self::with_backend(path, backend, opts))
    }

    fn with_backend(path: PathBuf, backend: Backend, opts: &ReadOptions) -> TraceReader {
        TraceReader {
            path,
            backend,
            ring: Ring::default(),
            skip_bad: opts.skip_bad,
            bad: Vec::new(),
            requests: 0,
            reorder: Reorder::new(TimeOrder::default()),
        }
    }

    /// Chooses how time order is restored (before the first request is read; the
    /// default is [`TimeOrder::default`], a 10 ms reorder window).
    pub fn set_time_order(&mut self, order: TimeOrder) {
        assert_eq!(self.requests, 0, "the time order is chosen before reading");
        self.reorder = Reorder::new(order);
    }

    pub fn time_order(&self) -> TimeOrder {
        self.reorder.order()
    }

    /// What restoring time order has done so far (complete once the trace is read).
    pub fn order_stats(&self) -> OrderStats {
        self.reorder.stats()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The name of the format being read.
    pub fn format_name(&self) -> &'static str {
        match &self.backend {
            Backend::Lines(b) => b.format.name(),
            Backend::Parquet(_) => PARQUET,
        }
    }

    /// Command names interned so far (ids in the requests index this table).
    pub fn commands(&self) -> &Commands {
        match &self.backend {
            Backend::Lines(b) => &b.state.commands,
            Backend::Parquet(p) => &p.commands,
        }
    }

    /// The reblock metadata of a Parquet trace's footer (none for text formats).
    pub fn parquet_meta(&self) -> Option<&crate::parquet::TraceMeta> {
        match &self.backend {
            Backend::Lines(_) => None,
            Backend::Parquet(p) => Some(&p.meta),
        }
    }

    /// The discards (TRIM) read so far, in file order; all of them once the trace is read.
    /// blkparse and tracefs text carry them; other formats have none.
    pub fn discards(&self) -> &[crate::Discard] {
        match &self.backend {
            Backend::Lines(b) => &b.state.discards,
            Backend::Parquet(_) => &[],
        }
    }

    /// Lines skipped under `--skip-bad`, in file order (for Parquet, row numbers from 1).
    pub fn bad_lines(&self) -> &[BadLine] {
        &self.bad
    }

    /// Requests returned so far.
    pub fn requests_read(&self) -> u64 {
        self.requests
    }

    /// The next request, `None` at the end of the trace.
    #[inline]
    pub fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            let ring = &mut self.ring;
            if ring.pos < ring.end {
                if let Some(&r) = ring.reqs.get(ring.pos) {
                    ring.pos += 1;
                    self.requests += 1;
                    return Ok(Some(r));
                }
            }
            // The request always comes from the ring, never from the slow path's return
            // value: callers then read it straight from the ring's memory instead of from a
            // slot both paths write (that cost a store-forwarding stall per request).
            if !self.refill()? {
                return Ok(None);
            }
        }
    }

    /// The ring is used up: has the backend decode more, puts it in time order, and
    /// deals with bad lines. Whether there are requests again (false at the end).
    #[inline(never)]
    fn refill(&mut self) -> Result<bool, TraceError> {
        loop {
            self.ring.lines.clear();
            let refill = match &mut self.backend {
                Backend::Lines(b) => b.refill(&mut self.ring, &self.path)?,
                Backend::Parquet(p) => p.refill(&mut self.ring, &self.path)?,
            };
            match refill {
                Refill::Ready => {
                    self.reorder.batch(&mut self.ring, &self.path)?;
                    if self.ring.pos < self.ring.end {
                        return Ok(true);
                    }
                }
                Refill::Bad(line_no, error) => self.tolerate(line_no, error)?,
                Refill::End => return Ok(self.reorder.end(&mut self.ring)),
            }
        }
    }

    /// Reads the whole trace; an empty one is an error that says so.
    pub fn read_all(mut self) -> Result<crate::Trace, TraceError> {
        let mut trace = crate::Trace::default();
        while let Some(r) = self.next_request()? {
            trace.push(r);
        }
        if trace.is_empty() {
            return Err(TraceError::Empty { path: self.path });
        }
        trace.commands = self.commands().clone();
        Ok(trace)
    }

    fn tolerate(&mut self, line: u64, error: FieldError) -> Result<(), TraceError> {
        if self.skip_bad == 0 {
            return Err(TraceError::BadLine {
                path: self.path.clone(),
                line,
                error,
            });
        }
        if self.bad.len() >= self.skip_bad {
            return Err(TraceError::TooManyBadLines {
                path: self.path.clone(),
                limit: self.skip_bad,
                line,
                error,
            });
        }
        self.bad.push(BadLine { line, error });
        Ok(())
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_request().transpose()
    }
}

/// A line without its line end (every trailing '\n' and '\r').
fn without_newline(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = line {
        line = rest;
    }
    line
}

impl LineBackend {
    /// Fills the ring with the requests of the next lines, straight from the input's
    /// buffer: lines are split in place (no copy), native lines by the fused parser and
    /// other formats' lines one at a time. Stops before a line that runs past the buffer,
    /// which is then gathered and parsed alone.
    fn refill(&mut self, ring: &mut Ring, path: &Path) -> Result<Refill, TraceError> {
        let io = |source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some((no, e)) = self.deferred.take() {
            return Ok(Refill::Bad(no, e));
        }
        loop {
            if let Some((no, line)) = self.pending.pop_front() {
                match self.format.parse_checked(&line, &mut self.state) {
                    Ok(Parsed::Request(r)) => return Ok(ring.one(r, no)),
                    Ok(Parsed::Skip) => continue,
                    Err(e) => return Ok(Refill::Bad(no, e)),
                }
            }
            ring.reqs.clear();
            ring.lines.clear();
            let buf = self.input.fill_buf().map_err(io)?;
            if buf.is_empty() {
                return Ok(Refill::End);
            }
            let mut at = 0;
            let mut bad = None;
            while ring.reqs.len() < RING {
                if self.native {
                    if let Some((r, next)) = format::native::parse_line(buf, at, &mut self.state) {
                        ring.reqs.push(r);
                        self.line_no += 1;
                        ring.lines.push(self.line_no);
                        at = next;
                        continue;
                    }
                }
                let Some(len) = memchr::memchr(b'\n', &buf[at..]) else {
                    break;
                };
                let line = without_newline(&buf[at..at + len]);
                at += len + 1;
                self.line_no += 1;
                match self.format.parse_checked(line, &mut self.state) {
                    Ok(Parsed::Request(r)) => {
                        ring.reqs.push(r);
                        ring.lines.push(self.line_no);
                    }
                    Ok(Parsed::Skip) => {}
                    Err(e) => {
                        bad = Some((self.line_no, e));
                        break;
                    }
                }
            }
            self.input.consume(at);
            if let Some((no, e)) = bad {
                if ring.reqs.is_empty() {
                    return Ok(Refill::Bad(no, e));
                }
                self.deferred = Some((no, e));
            }
            if !ring.reqs.is_empty() {
                return Ok(ring.ready());
            }
            if at > 0 {
                continue; // only comments or skipped lines so far
            }
            // The buffer holds no whole line: gather one across buffers (or the last,
            // unterminated line of the input).
            self.buf.clear();
            if self.input.read_until(b'\n', &mut self.buf).map_err(io)? == 0 {
                return Ok(Refill::End);
            }
            self.line_no += 1;
            match self
                .format
                .parse_checked(without_newline(&self.buf), &mut self.state)
            {
                Ok(Parsed::Request(r)) => return Ok(ring.one(r, self.line_no)),
                Ok(Parsed::Skip) => {}
                Err(e) => return Ok(Refill::Bad(self.line_no, e)),
            }
        }
    }
}

/// Reads one line without its newline. Bytes that are not UTF-8 are kept: the format's
/// `parse_bytes` names the field holding them when the line is parsed.
fn read_line(
    input: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    path: &Path,
) -> Result<Option<Vec<u8>>, TraceError> {
    buf.clear();
    let n = input
        .read_until(b'\n', buf)
        .map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    Ok((n > 0).then(|| without_newline(buf).to_vec()))
}

/// The one format that claims the first lines; `auto` never guesses between two.
fn sniff(
    path: &Path,
    lines: &[&str],
    candidates: &[&'static dyn LineFormat],
) -> Result<&'static dyn LineFormat, TraceError> {
    let sample: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    if sample.is_empty() {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    }
    if sample.iter().all(|l| l.trim_start().starts_with('#')) {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    }
    let mut claims: Vec<&'static dyn LineFormat> = candidates
        .iter()
        .copied()
        .filter(|f| f.sniff(&sample))
        .collect();
    if claims.is_empty() {
        // A malformed line among the first ones must not hide which format the file is:
        // the reader then stops at that line with `FILE:LINE: field F: why` (or skips it
        // under --skip-bad) instead of a vague "cannot tell".
        claims = candidates
            .iter()
            .copied()
            .filter(|f| claims_despite_bad_lines(*f, &sample))
            .collect();
    }
    match claims.as_slice() {
        [one] => Ok(*one),
        [] => Err(TraceError::Undetected {
            path: path.to_path_buf(),
            supported: supported_formats(),
            guess: guess(lines, candidates),
        }),
        many => Err(TraceError::Other {
            path: path.to_path_buf(),
            why: format!(
                "the first lines fit several formats ({}); pass --format",
                many.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
            ),
        }),
    }
}

/// The format that reads the most of `lines` (at least one), with its first bad line; or,
/// when none reads any, the native format if its first error is past the first field
/// (a line that starts like a native request). `lines` are numbered from 1.
fn guess(lines: &[&str], candidates: &[&'static dyn LineFormat]) -> Option<FormatGuess> {
    let mut best: Option<(usize, FormatGuess)> = None;
    for &format in candidates {
        let mut state = ParseState::default();
        let mut read = 0;
        let mut first_bad = None;
        for (no, line) in (1..).zip(lines) {
            match format.parse(line, &mut state) {
                Ok(Parsed::Request(_)) => read += 1,
                Ok(Parsed::Skip) => {}
                Err(error) => {
                    first_bad.get_or_insert((no, error));
                }
            }
        }
        let Some((line, error)) = first_bad else {
            continue;
        };
        let native_shape = format.name() == format::Native.name() && error.field != "timestamp";
        if (read > 0 || native_shape) && best.as_ref().is_none_or(|(n, _)| read > *n) {
            let name = format.name();
            let g = FormatGuess {
                format: name,
                line,
                error,
            };
            best = Some((read, g));
        }
    }
    best.map(|(_, g)| g)
}

/// Whether `format` claims `sample` once a few lines are left out: the first line that
/// breaks its sniff is dropped, again and again, at most one line in 16 and never more
/// than the lines that remain. Only tried when no format claims the sample whole, so a
/// clean file never pays for it.
fn claims_despite_bad_lines(format: &dyn LineFormat, sample: &[&str]) -> bool {
    let budget = (sample.len() / 16).max(1);
    let mut kept: Vec<&str> = sample.to_vec();
    for _ in 0..budget {
        // The shortest prefix the format refuses ends at the line to drop.
        let Some(bad) = (1..=kept.len()).find(|&n| !format.sniff(&kept[..n])) else {
            return false; // every prefix passes but the whole does not: no single culprit
        };
        kept.remove(bad - 1);
        if kept.len() < sample.len() - kept.len() {
            return false;
        }
        if format.sniff(&kept) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Ascii, MsrWindows, Native};

    fn sample<'a>(lines: &[&'a str]) -> Vec<&'a str> {
        lines.to_vec()
    }

    /// A format that claims everything, to make two formats claim one file.
    struct Greedy;
    impl LineFormat for Greedy {
        fn name(&self) -> &'static str {
            "greedy"
        }
        fn describe(&self) -> &'static str {
            "claims any file"
        }
        fn sniff(&self, _: &[&str]) -> bool {
            true
        }
        fn parse(&self, _: &str, _: &mut ParseState) -> Result<Parsed, FieldError> {
            Ok(Parsed::Skip)
        }
    }

    #[test]
    fn two_claims_are_refused_not_guessed() {
        let lines = sample(&["1 2 cc 3 8 R"]);
        let e = sniff(Path::new("t"), &lines, &[&Native, &Greedy])
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "t: the first lines fit several formats (native, greedy); pass --format"
        );
        let one = sniff(Path::new("t"), &lines, &[&Native, &Ascii, &MsrWindows]).unwrap();
        assert_eq!(one.name(), "native");
    }

    /// Regression: one malformed line among the first 128 made `auto` say "cannot tell
    /// the trace format" instead of naming the line and field.
    #[test]
    fn a_bad_line_early_does_not_hide_the_format() {
        let mut lines: Vec<String> = (0..40).map(|i| format!("{i} 2 cc {} 8 R", i * 8)).collect();
        lines[19] = "19 2 cc 152 8 X".into();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let f = sniff(Path::new("t"), &sample(&refs), crate::format::formats()).unwrap();
        assert_eq!(f.name(), "native");
        // Mostly garbage is still refused, not guessed.
        let junk: Vec<String> = (0..40).map(|i| format!("junk {i}")).collect();
        let mut mixed: Vec<&str> = junk.iter().map(String::as_str).collect();
        mixed[0] = "1 2 cc 3 8 R";
        let e = sniff(Path::new("t"), &sample(&mixed), crate::format::formats()).err();
        assert!(matches!(e, Some(TraceError::Undetected { .. })), "{e:?}");
        // Only comments: empty, not undetected.
        let e = sniff(
            Path::new("t"),
            &sample(&["# a", "# b"]),
            crate::format::formats(),
        )
        .err();
        assert!(matches!(e, Some(TraceError::Empty { .. })), "{e:?}");
    }

    /// Requests with their command names, and bad lines.
    type Read = (Vec<(Request, String)>, Vec<(u64, FieldError)>);

    /// What reading `text` line by line through `Native::parse` gives: the reference the
    /// buffered reader must match.
    fn reference(text: &[u8]) -> Read {
        let mut st = ParseState::default();
        let (mut reqs, mut bad) = (Vec::new(), Vec::new());
        let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        for (no, line) in (1..).zip(lines) {
            let parsed = Native.parse_checked(without_newline(line), &mut st);
            match parsed {
                Ok(Parsed::Request(r)) => reqs.push((r, st.commands.name(r.command).to_string())),
                Ok(Parsed::Skip) => {}
                Err(e) => bad.push((no, e)),
            }
        }
        reqs.sort_by_key(|(r, _)| r.ts_ns);
        (reqs, bad)
    }

    fn read(text: &[u8], capacity: usize) -> Read {
        let input =
            std::io::BufReader::with_capacity(capacity, std::io::Cursor::new(text.to_vec()));
        let opts = ReadOptions {
            format: FormatChoice::Named("native".into()),
            skip_bad: usize::MAX,
        };
        let mut r = TraceReader::from_reader(Box::new(input), "t", &opts).unwrap();
        // Order is not the subject here: an unbounded window sorts, as `reference` does.
        r.set_time_order(TimeOrder::Window { ns: u64::MAX });
        let mut reqs = Vec::new();
        while let Some(q) = r.next_request().unwrap() {
            reqs.push((q, r.commands().name(q.command).to_string()));
        }
        let bad = r
            .bad_lines()
            .iter()
            .map(|b| (b.line, b.error.clone()))
            .collect();
        (reqs, bad)
    }

    proptest::proptest! {
        /// Native lines parsed straight from the input's buffer (fused splitting and
        /// parsing, lines straddling buffers, bad lines deferred behind good ones) read
        /// exactly as line-by-line parsing does, whatever the buffer size.
        #[test]
        fn buffered_native_reading_matches_line_parsing(
            picks in proptest::collection::vec(0usize..25, 0..60),
            capacity in 1usize..80,
        ) {
            let parts: [&[u8]; 25] = [
                b"430520000 4129 bash 12648728 8 R\n",
                b"1\t2\t-\t3\t8\tw\n",
                b"  1 2 cc 3 8 W  \n",
                b"18446744073709551615 4294967295 x 18446744073709551615 4294967295 r\n",
                b"18446744073709551616 1 x 1 1 R\n",
                b"1 4294967296 x 1 1 R\n",
                b"1 2 cc 3 0 R\n",
                b"1 2 cc 3 8 R extra\n",
                b"1 2 cc 3 8\n",
                b"# comment\n",
                b"\n",
                "1 2 \u{e9}t\u{e9} 3 8 R\n".as_bytes(),
                b"1 2 cc 3 8 RW\n",
                b"1 2 cc 3 8 R\r\n",
                b"1 2 cc 3 8 R\r\r\n",
                b"1 2 c\xffc 3 8 R\n",
                b"00000000000000000000001 2 cc 3 8 R\n",
                b"+1 2 cc 3 8 R\n",
                b"5 6 git 7 16 W\n",
                b"1 2 cc 3 8 R",
                b"1\x0c2 cc 3 8 R\n",
                b"1 2 cc\r3 8 R\n",
                b"1 2 cc 3 8 R 7\n",
                b"1 2 cc 3 8 R 12345678901\n",
                b"1 2 cc 3 8 W 7 x\n",
            ];
            let text: Vec<u8> = picks.iter().flat_map(|&i| parts[i].iter().copied()).collect();
            proptest::prop_assert_eq!(read(&text, capacity), reference(&text));
            proptest::prop_assert_eq!(read(&text, 1 << 16), reference(&text));
        }
    }
}
