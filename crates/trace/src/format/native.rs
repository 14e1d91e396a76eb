//! The native format: seed 002's profiler format, one request per line,
//! `<timestamp_ns> <pid> <command> <start_sector> <size_sectors> <R|W>`.
//!
//! The command is one whitespace-free token (the recorder replaces blanks in process names
//! with '_'); "-" stands for no command. Lines starting with '#' are comments.
//!
//! An optional seventh field names the device (a number, as the other formats' devices
//! are numbered); absent, the device is 0. `convert` writes it for requests of a device
//! other than 0 ([`write_line_with_device`]), so that a trace of several disks converts
//! to native text without merging them.

use super::{field, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Op, Request, MAX_END_SECTOR};

pub struct Native;

pub(crate) fn parse_op(field: &'static str, s: Option<&str>) -> Result<Op, FieldError> {
    match field::present(field, s)? {
        "R" | "r" => Ok(Op::Read),
        "W" | "w" => Ok(Op::Write),
        other => Err(FieldError::new(field, format!("'{other}' is not R or W"))),
    }
}

impl LineFormat for Native {
    fn name(&self) -> &'static str {
        "native"
    }

    fn describe(&self) -> &'static str {
        "<ts_ns> <pid> <command> <sector> <sectors> <R|W> [device] (the self-optimizing file system's profiler format)"
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        super::sniff_by_parsing(self, lines)
    }

    /// The fast path for well-formed lines; anything unusual (comments, a bad field, an
    /// overlong number) is left to `parse`, so errors read the same either way.
    fn parse_bytes(&self, line: &[u8], state: &mut ParseState) -> Result<Parsed, FieldError> {
        if let Some(r) = parse_fast(line, state) {
            return Ok(Parsed::Request(r));
        }
        match std::str::from_utf8(line) {
            Ok(s) => self.parse(s, state),
            Err(_) => Err(super::not_utf8(self, line, state)),
        }
    }

    fn text_field(&self) -> Option<&'static str> {
        Some("command")
    }

    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(Parsed::Skip);
        }
        let mut f = line.split_ascii_whitespace();
        let ts_ns = field::u64("timestamp", f.next())?;
        let pid = field::u32("pid", f.next())?;
        let command = field::present("command", f.next())?;
        let sector = field::u64("sector", f.next())?;
        let sectors = field::sectors("sectors", f.next())?;
        let op = parse_op("op", f.next())?;
        let device = match f.next() {
            Some(d) => field::u32("device", Some(d))?,
            None => 0,
        };
        field::end(f)?;
        let command = if command == "-" {
            crate::request::NO_COMMAND
        } else {
            state.intern(command)
        };
        Ok(Parsed::Request(Request {
            ts_ns,
            pid: Some(pid),
            command,
            device,
            sector,
            sectors,
            op,
        }))
    }
}

/// The next blank-separated token of `line` from `*at`.
#[inline]
fn token<'a>(line: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let mut i = *at;
    while i < line.len() && line[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    while i < line.len() && !line[i].is_ascii_whitespace() {
        i += 1;
    }
    *at = i;
    (i > start).then(|| &line[start..i])
}

/// Digits only, at most `max_digits` of them (so that the value cannot overflow).
///
/// Hand-written rather than `str::parse` because the fields are bytes: `parse` would need
/// each token checked as UTF-8 first, and it also accepts a leading '+' that this fast path
/// leaves to `parse` anyway. Anything unusual (no digits, too many, a sign) returns `None`
/// and the line goes to `parse`, so the two always agree.
#[inline]
fn digits(t: &[u8], max_digits: usize) -> Option<u64> {
    if t.is_empty() || t.len() > max_digits {
        return None;
    }
    let mut v = 0u64;
    for &b in t {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + u64::from(d);
    }
    Some(v)
}

/// A blank inside a line: ASCII whitespace other than the newline (what
/// `split_ascii_whitespace` splits on, once the line end is cut off).
#[inline(always)]
fn blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | 0x0c)
}

/// Skips blanks from `*i`.
#[inline(always)]
fn skip_blanks(buf: &[u8], i: &mut usize) {
    while *i < buf.len() && blank(buf[*i]) {
        *i += 1;
    }
}

/// The optional device field: at most `max_digits` digits at `*i`, then blanks up to the
/// line's end (left at `*i`).
#[inline(always)]
fn number_then_blank_or_end(buf: &[u8], i: &mut usize, max_digits: usize) -> Option<u64> {
    let start = *i;
    let mut v = 0u64;
    while let Some(d) = buf
        .get(*i)
        .map(|b| b.wrapping_sub(b'0'))
        .filter(|&d| d <= 9)
    {
        if *i - start == max_digits {
            return None;
        }
        v = v * 10 + u64::from(d);
        *i += 1;
    }
    skip_blanks(buf, i);
    Some(v)
}

/// A field of at most `max_digits` digits at `*i` (after blanks), followed by a blank.
#[inline(always)]
fn number_then_blank(buf: &[u8], i: &mut usize, max_digits: usize) -> Option<u64> {
    skip_blanks(buf, i);
    let start = *i;
    let mut v = 0u64;
    while let Some(&b) = buf.get(*i) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        if *i - start == max_digits {
            return None; // one digit more might overflow: `parse` decides
        }
        v = v * 10 + u64::from(d);
        *i += 1;
    }
    (*i > start && blank(*buf.get(*i)?)).then_some(v)
}

/// One well-formed native line at `buf[at..]`, ended by a '\n' inside `buf`: the request
/// and where the next line starts. Fuses line splitting with parsing, so the reader neither
/// copies the line out nor searches for its end first. Any line this does not accept
/// (comments, blank lines, bad or overlong fields, a line running past `buf`) returns
/// `None` and is then split off and read by [`Native::parse_bytes`], whose result it equals
/// on every line it accepts.
#[inline]
pub(crate) fn parse_line(
    buf: &[u8],
    at: usize,
    state: &mut ParseState,
) -> Option<(Request, usize)> {
    let mut i = at;
    let ts_ns = number_then_blank(buf, &mut i, 19)?;
    let pid = number_then_blank(buf, &mut i, 9)? as u32;
    skip_blanks(buf, &mut i);
    let start = i;
    while i < buf.len() && !buf[i].is_ascii_whitespace() {
        i += 1;
    }
    let command = &buf[start..i];
    if command.is_empty() || !blank(*buf.get(i)?) {
        return None;
    }
    let sector = number_then_blank(buf, &mut i, 19)?;
    let sectors = number_then_blank(buf, &mut i, 9)? as u32;
    skip_blanks(buf, &mut i);
    let op = match buf.get(i)? {
        b'R' | b'r' => Op::Read,
        b'W' | b'w' => Op::Write,
        _ => return None,
    };
    i += 1;
    skip_blanks(buf, &mut i);
    let mut device = 0;
    if buf.get(i)?.is_ascii_digit() {
        device = number_then_blank_or_end(buf, &mut i, 9)? as u32;
    }
    if !fits(sector, sectors) || *buf.get(i)? != b'\n' {
        return None;
    }
    let command = command_id(command, state)?;
    Some((
        Request {
            ts_ns,
            pid: Some(pid),
            command,
            device,
            sector,
            sectors,
            op,
        },
        i + 1,
    ))
}

/// Whether a fast-path request is one [`Request::check`] accepts: a positive length ending
/// by [`MAX_END_SECTOR`]. (At most 19 and 9 digits, the sum cannot overflow.) Anything
/// else goes to `parse`, which names the field.
#[inline(always)]
fn fits(sector: u64, sectors: u32) -> bool {
    sectors != 0 && sector + u64::from(sectors) <= MAX_END_SECTOR
}

/// The id of a command token; `None` when it is not UTF-8 (left to `parse`'s error).
#[inline(always)]
fn command_id(command: &[u8], state: &mut ParseState) -> Option<crate::request::CommandId> {
    Some(match state.last_command_id(command) {
        Some(id) => id,
        None if command == b"-" => crate::request::NO_COMMAND,
        None => state.intern(std::str::from_utf8(command).ok()?),
    })
}

/// A well-formed native line without allocating or validating UTF-8 beyond the command.
fn parse_fast(line: &[u8], state: &mut ParseState) -> Option<Request> {
    let mut at = 0;
    let ts_ns = digits(token(line, &mut at)?, 19)?;
    let pid = digits(token(line, &mut at)?, 9)? as u32;
    let command = token(line, &mut at)?;
    let sector = digits(token(line, &mut at)?, 19)?;
    let sectors = digits(token(line, &mut at)?, 9)? as u32;
    let op = match token(line, &mut at)? {
        b"R" | b"r" => Op::Read,
        b"W" | b"w" => Op::Write,
        _ => return None,
    };
    let device = match token(line, &mut at) {
        Some(t) => digits(t, 9)? as u32,
        None => 0,
    };
    if !fits(sector, sectors) || token(line, &mut at).is_some() {
        return None;
    }
    let command = command_id(command, state)?;
    Some(Request {
        ts_ns,
        pid: Some(pid),
        command,
        device,
        sector,
        sectors,
        op,
    })
}

/// Writes one request as a native line (with its newline), the six fields of the seed
/// 002 profiler format: the device is not written (see [`write_line_with_device`]).
/// Requests without a pid are written with pid 0, and without a command as "-"; blanks
/// inside a command become '_' (as the recorder does) so that the line stays six fields.
pub fn write_line(
    out: &mut impl std::io::Write,
    req: &Request,
    command: &str,
) -> std::io::Result<()> {
    write_fields(out, req, command)?;
    writeln!(out)
}

/// [`write_line`], with the device as a seventh field when it is not 0: what `convert`
/// writes, so that a trace of several devices keeps them apart.
pub fn write_line_with_device(
    out: &mut impl std::io::Write,
    req: &Request,
    command: &str,
) -> std::io::Result<()> {
    write_fields(out, req, command)?;
    match req.device {
        0 => writeln!(out),
        d => writeln!(out, " {d}"),
    }
}

/// The six fields of a native line, without its newline.
fn write_fields(
    out: &mut impl std::io::Write,
    req: &Request,
    command: &str,
) -> std::io::Result<()> {
    let owned;
    let command = if command.is_empty() {
        "-"
    } else if command.contains(|c: char| c.is_ascii_whitespace()) {
        owned = command.replace(|c: char| c.is_ascii_whitespace(), "_");
        &owned
    } else {
        command
    };
    write!(
        out,
        "{} {} {} {} {} {}",
        req.ts_ns,
        req.pid.unwrap_or(0),
        command,
        req.sector,
        req.sectors,
        req.op.letter()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_captured_line() {
        let mut st = ParseState::default();
        let p = Native
            .parse("430520000 4129 bash 12648728 8 R", &mut st)
            .unwrap();
        let Parsed::Request(r) = p else {
            panic!("skipped")
        };
        assert_eq!(r.ts_ns, 430520000);
        assert_eq!(r.pid, Some(4129));
        assert_eq!(st.commands.name(r.command), "bash");
        assert_eq!((r.sector, r.sectors, r.op), (12648728, 8, Op::Read));
    }

    #[test]
    fn names_the_bad_field() {
        let mut st = ParseState::default();
        let e = Native.parse("1 2 cc 3 0 R", &mut st).unwrap_err();
        assert_eq!(e.field, "sectors");
        let e = Native.parse("1 2 cc 3 8 X", &mut st).unwrap_err();
        assert_eq!(e.field, "op");
        let e = Native.parse("1 x cc 3 8 R", &mut st).unwrap_err();
        assert_eq!(e.field, "pid");
    }

    /// The fast byte path and the str path must agree on every line, good or bad.
    #[test]
    fn fast_path_agrees_with_parse() {
        let lines = [
            "430520000 4129 bash 12648728 8 R",
            "1\t2\t-\t3\t8\tw",
            "  1 2 cc 3 8 W  ",
            "18446744073709551615 4294967295 x 18446744073709551615 4294967295 r",
            "18446744073709551616 1 x 1 1 R",
            "1 4294967296 x 1 1 R",
            "1 2 cc 3 0 R",
            "1 2 cc 3 8 R extra",
            "1 2 cc 3 8",
            "# comment",
            "",
            "1 2 \u{e9}t\u{e9} 3 8 R",
            "1 2 cc 3 8 RW",
            "1 2 cc 3 8 R 7",
            "1 2 cc 3 8 R 4294967295",
            "1 2 cc 3 8 R 4294967296",
            "1 2 cc 3 8 R 7 8",
            "1 2 cc 3 8 R x",
        ];
        for line in lines {
            let (mut a, mut b) = (ParseState::default(), ParseState::default());
            let fast = Native.parse_bytes(line.as_bytes(), &mut a);
            let slow = Native.parse(line, &mut b);
            assert_eq!(fast, slow, "{line:?}");
            if let Ok(Parsed::Request(r)) = fast {
                assert_eq!(a.commands.name(r.command), b.commands.name(r.command));
            }
        }
    }
}
