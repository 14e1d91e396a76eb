//! Trace formats: one file each, behind the small [`LineFormat`] trait, registered in
//! [`formats`] (adding a format is one new file plus one line there).

use crate::error::FieldError;
use crate::request::{CommandId, Commands, Discard, Request};

pub mod ascii;
pub mod blkparse;
pub mod blkreplay;
pub mod cloudphysics;
pub mod fiu;
pub mod msr;
pub mod msr_windows;
pub mod native;
pub mod spc;
pub mod tracefs;

pub use ascii::Ascii;
pub use blkparse::Blkparse;
pub use blkreplay::Blkreplay;
pub use cloudphysics::CloudPhysics;
pub use fiu::Fiu;
pub use msr::Msr;
pub use msr_windows::MsrWindows;
pub use native::Native;
pub use spc::Spc;

/// What a line turned out to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    Request(Request),
    /// A header, comment, or an event that is not a queued request (e.g. blkparse 'C').
    Skip,
}

/// State a reader carries from line to line of one file.
#[derive(Debug, Default)]
pub struct ParseState {
    /// Command names interned so far.
    pub commands: Commands,
    /// Formats with a preamble (blkreplay's license text, a CSV's column names): whether
    /// the data lines have begun.
    pub(crate) in_body: bool,
    /// blkparse: a queue ('Q') event has been seen, so 'D' events no longer count.
    pub(crate) queue_seen: bool,
    /// blkparse: the per-CPU summary that ends blkparse's output has begun.
    pub(crate) trailer: bool,
    /// Discards met so far (formats that trace them: blkparse, tracefs), in file order.
    pub discards: Vec<Discard>,
    /// Recently interned commands: lines mostly name one of a few processes, so this
    /// spares a hash lookup (and an allocation) per line on the hot path.
    pub(crate) recent: RecentCommands,
}

/// How many recent commands [`RecentCommands`] keeps.
const RECENT: usize = 8;

/// The last few commands interned, each spelled inline in one `u128` (bytes, zero padded,
/// the length in the last byte), so a lookup is a few integer compares with no pointer
/// chasing. Linux command names have at most 15 bytes; longer ones are simply not kept.
#[derive(Debug, Default)]
pub(crate) struct RecentCommands {
    keys: [u128; RECENT],
    ids: [CommandId; RECENT],
    /// The slot the next new command replaces (round robin).
    next: usize,
}

impl RecentCommands {
    /// `name` as a key; `None` when it is too long to keep (or empty).
    #[inline(always)]
    fn key(name: &[u8]) -> Option<u128> {
        if name.is_empty() || name.len() > 15 {
            return None;
        }
        let mut k = [0u8; 16];
        k[..name.len()].copy_from_slice(name);
        k[15] = name.len() as u8;
        Some(u128::from_le_bytes(k))
    }

    #[inline(always)]
    fn get(&self, name: &[u8]) -> Option<CommandId> {
        let key = Self::key(name)?;
        let slot = self.keys.iter().position(|&k| k == key)?;
        Some(self.ids[slot])
    }

    fn insert(&mut self, name: &[u8], id: CommandId) {
        if let Some(key) = Self::key(name) {
            self.keys[self.next] = key;
            self.ids[self.next] = id;
            self.next = (self.next + 1) % RECENT;
        }
    }
}

impl ParseState {
    /// The id of the command spelled by `name` when it was interned recently: the hot
    /// path's shortcut that needs no UTF-8 check (only valid names are ever kept).
    #[inline]
    pub(crate) fn last_command_id(&self, name: &[u8]) -> Option<CommandId> {
        self.recent.get(name)
    }

    /// A state that reads the next line as this one would, with nothing interned: for
    /// parsing a line again only to explain what is wrong with it.
    fn scratch(&self) -> ParseState {
        ParseState {
            in_body: self.in_body,
            queue_seen: self.queue_seen,
            trailer: self.trailer,
            ..ParseState::default()
        }
    }

    /// The id of `name`, interning it when new (see `recent`).
    pub fn intern(&mut self, name: &str) -> CommandId {
        if let Some(id) = self.recent.get(name.as_bytes()) {
            return id;
        }
        let id = self.commands.intern(name);
        self.recent.insert(name.as_bytes(), id);
        id
    }
}

/// A text trace format read one line at a time.
pub trait LineFormat: Send + Sync {
    /// The name users pass to `--format`.
    fn name(&self) -> &'static str;
    /// One line saying what the format is, listed when a format is unknown.
    fn describe(&self) -> &'static str;
    /// Whether these first non-empty lines of a file look like this format. Must be strict
    /// enough that at most one format claims a real file: `auto` never guesses.
    fn sniff(&self, lines: &[&str]) -> bool;
    /// Parse one line (without its newline). Errors name the field that is wrong.
    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError>;
    /// Parse one line given as bytes: what the streaming reader calls. Formats on the hot
    /// path override it to skip UTF-8 validation of numeric fields; the result must equal
    /// `parse` of the same line.
    fn parse_bytes(&self, line: &[u8], state: &mut ParseState) -> Result<Parsed, FieldError> {
        match std::str::from_utf8(line) {
            Ok(s) => self.parse(s, state),
            Err(_) => Err(not_utf8(self, line, state)),
        }
    }
    /// What the format calls a request's start address and its length, for the error
    /// of a request that ends past the addressable sectors.
    fn address_fields(&self) -> [&'static str; 2] {
        ["sector", "sectors"]
    }
    /// Parses one line given as bytes and checks the request's address and size
    /// ([`Request::check`]): what the reader calls. Kept out of `parse` so that a line
    /// whose only fault is an address out of range does not keep `auto` from telling its
    /// format (the reader then names the line and field).
    fn parse_checked(&self, line: &[u8], state: &mut ParseState) -> Result<Parsed, FieldError> {
        let parsed = self.parse_bytes(line, state)?;
        if let Parsed::Request(r) = &parsed {
            let [sector, size] = self.address_fields();
            r.check().map_err(|e| e.field_error(sector, size))?;
        }
        Ok(parsed)
    }
    /// The free-text field of a line (a process or host name), where bytes that are not
    /// UTF-8 can hide without breaking any other field; `None` when the format has none.
    fn text_field(&self) -> Option<&'static str> {
        None
    }
}

/// The error for a line that is not valid UTF-8, naming the field that holds the bad
/// bytes: the line is parsed once more with them replaced by U+FFFD (in a scratch state,
/// so that nothing is interned). A field that then fails on them is the one named; a line
/// that still parses holds them in its free-text field ([`LineFormat::text_field`]).
pub fn not_utf8<F: LineFormat + ?Sized>(format: &F, line: &[u8], state: &ParseState) -> FieldError {
    let at = line.utf8_chunks().next().map_or(0, |c| c.valid().len()) + 1;
    let why = format!("not valid UTF-8 (byte {at} of the line)");
    let lossy = String::from_utf8_lossy(line);
    match format.parse(&lossy, &mut state.scratch()) {
        // The field holding the bad bytes fails with them in its message; a field that
        // fails on its own is the line's first error, reported as it is.
        Err(e) if e.why.contains(char::REPLACEMENT_CHARACTER) => FieldError::new(e.field, why),
        Err(e) => e,
        Ok(Parsed::Request(_)) => FieldError::new(format.text_field().unwrap_or("line"), why),
        Ok(Parsed::Skip) => FieldError::new("line", why),
    }
}

/// Every line format, in the order `--format auto` tries them.
pub fn formats() -> &'static [&'static dyn LineFormat] {
    &[
        &Native,
        &Blkparse,
        &Fiu,
        &Msr,
        &Spc,
        &Ascii,
        &MsrWindows,
        &Blkreplay,
        &CloudPhysics,
        &tracefs::Tracefs,
    ]
}

/// The usual strict sniff: every sample line parses (with one state carried along, so that
/// preambles are understood) and at least one of them is a request.
pub fn sniff_by_parsing(format: &dyn LineFormat, lines: &[&str]) -> bool {
    let mut state = ParseState::default();
    let mut requests = 0;
    for line in lines {
        match format.parse(line, &mut state) {
            Ok(Parsed::Request(_)) => requests += 1,
            Ok(Parsed::Skip) => {}
            Err(_) => return false,
        }
    }
    requests > 0
}

/// The format called `name`, if any.
pub fn by_name(name: &str) -> Option<&'static dyn LineFormat> {
    formats().iter().copied().find(|f| f.name() == name)
}

/// Helpers shared by the format files, so that every format reports errors alike.
pub mod field {
    use super::FieldError;

    pub fn u64(field: &'static str, s: Option<&str>) -> Result<u64, FieldError> {
        let s = s.ok_or_else(|| FieldError::new(field, "missing"))?;
        s.parse::<u64>()
            .map_err(|_| FieldError::new(field, format!("'{s}' is not a non-negative integer")))
    }

    pub fn u32(field: &'static str, s: Option<&str>) -> Result<u32, FieldError> {
        let s = s.ok_or_else(|| FieldError::new(field, "missing"))?;
        s.parse::<u32>().map_err(|_| {
            FieldError::new(field, format!("'{s}' is not an integer in 0..=4294967295"))
        })
    }

    /// A request length in sectors: positive.
    pub fn sectors(field: &'static str, s: Option<&str>) -> Result<u32, FieldError> {
        let n = u32(field, s)?;
        if n == 0 {
            return Err(FieldError::new(field, "a request of 0 sectors"));
        }
        Ok(n)
    }

    /// A non-negative decimal time (`123`, `0.000001850`) converted exactly (no floating
    /// point) to nanoseconds: `scale_pow10` is 9 for seconds, 6 for milliseconds. Digits
    /// finer than a nanosecond are dropped.
    pub fn decimal_ns(
        field: &'static str,
        s: Option<&str>,
        scale_pow10: u32,
    ) -> Result<u64, FieldError> {
        let s = s.ok_or_else(|| FieldError::new(field, "missing"))?;
        let bad = || FieldError::new(field, format!("'{s}' is not a non-negative decimal number"));
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() || !digits(int) || !digits(frac) || (s.contains('.') && frac.is_empty()) {
            return Err(bad());
        }
        let too_big = || FieldError::new(field, format!("'{s}' is too large for a time in ns"));
        let mut ns: u64 = int.parse().map_err(|_| too_big())?;
        ns = ns.checked_mul(10u64.pow(scale_pow10)).ok_or_else(too_big)?;
        let mut frac_ns = 0u64;
        for (i, d) in frac.bytes().take(scale_pow10 as usize).enumerate() {
            frac_ns += u64::from(d - b'0') * 10u64.pow(scale_pow10 - 1 - i as u32);
        }
        ns.checked_add(frac_ns).ok_or_else(too_big)
    }

    /// A length in bytes as whole sectors, rounded up (a trace that says 100 bytes touched
    /// the whole sector). Zero is an error.
    pub fn bytes_as_sectors(field: &'static str, s: Option<&str>) -> Result<u32, FieldError> {
        let bytes = u64(field, s)?;
        if bytes == 0 {
            return Err(FieldError::new(field, "a request of 0 bytes"));
        }
        let sectors = bytes.div_ceil(crate::request::SECTOR_BYTES);
        u32::try_from(sectors).map_err(|_| {
            FieldError::new(field, format!("{bytes} bytes is too large for one request"))
        })
    }

    /// A byte offset that must fall on a sector boundary, as a sector number.
    pub fn byte_offset_as_sector(field: &'static str, s: Option<&str>) -> Result<u64, FieldError> {
        let bytes = u64(field, s)?;
        if bytes % crate::request::SECTOR_BYTES != 0 {
            return Err(FieldError::new(
                field,
                format!("byte offset {bytes} is not a multiple of 512 (a sector)"),
            ));
        }
        Ok(bytes / crate::request::SECTOR_BYTES)
    }

    /// Linux's device number encoding, `major << 20 | minor` (the kernel's `MKDEV`, 12-bit
    /// major and 20-bit minor), so that one u32 names a device.
    pub fn linux_device(major: u32, minor: u32) -> Result<u32, FieldError> {
        if major >= 1 << 12 {
            return Err(FieldError::new("major", format!("{major} is above 4095")));
        }
        if minor >= 1 << 20 {
            return Err(FieldError::new(
                "minor",
                format!("{minor} is above 1048575"),
            ));
        }
        Ok(major << 20 | minor)
    }

    pub fn present<'a>(field: &'static str, s: Option<&'a str>) -> Result<&'a str, FieldError> {
        s.ok_or_else(|| FieldError::new(field, "missing"))
    }

    /// Fails when a line has more fields than the format defines.
    pub fn end<'a>(mut rest: impl Iterator<Item = &'a str>) -> Result<(), FieldError> {
        match rest.next() {
            None => Ok(()),
            Some(extra) => Err(FieldError::new(
                "line",
                format!("unexpected extra field '{extra}'"),
            )),
        }
    }
}
