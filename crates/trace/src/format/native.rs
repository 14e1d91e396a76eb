//! The native format: seed 002's profiler format, one request per line,
//! `<timestamp_ns> <pid> <command> <start_sector> <size_sectors> <R|W>`.
//!
//! The command is one whitespace-free token (the recorder replaces blanks in process names
//! with '_'); "-" stands for no command. Lines starting with '#' are comments.

use super::{field, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Op, Request};

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
        "<ts_ns> <pid> <command> <sector> <sectors> <R|W> (seed 002 profiler format)"
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        super::sniff_by_parsing(self, lines)
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
            device: 0,
            sector,
            sectors,
            op,
        }))
    }
}

/// Writes one request as a native line (with its newline). Requests without a pid are
/// written with pid 0, and without a command as "-"; blanks inside a command become '_'
/// (as the recorder does) so that the line stays six fields.
pub fn write_line(
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
    writeln!(
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
}
