//! The simulator ASCII format of SSDsim and MQSim (DiskSim's layout with ns times):
//! `time_ns device lba sectors op`, op 1 = read and 0 = write, e.g. `0 0 303567 7 0`.
//!
//! Times must be integer nanoseconds: a decimal time is DiskSim's milliseconds or the
//! msr-windows format, never guessed to be this one. The trace has no process.

use super::{field, sniff_by_parsing, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Op, Request, NO_COMMAND};

pub struct Ascii;

/// The `op` column of the simulator formats: 1 = read, 0 = write.
pub(crate) fn read_flag(s: Option<&str>) -> Result<Op, FieldError> {
    match field::present("op", s)? {
        "1" => Ok(Op::Read),
        "0" => Ok(Op::Write),
        other => Err(FieldError::new(
            "op",
            format!("'{other}' is not 1 (read) or 0 (write)"),
        )),
    }
}

impl LineFormat for Ascii {
    fn name(&self) -> &'static str {
        "ascii"
    }

    fn describe(&self) -> &'static str {
        "SSDsim/MQSim ascii: time_ns device lba sectors op(1=read,0=write)"
    }

    fn address_fields(&self) -> [&'static str; 2] {
        ["lba", "sectors"]
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        sniff_by_parsing(self, lines)
    }

    fn parse(&self, line: &str, _state: &mut ParseState) -> Result<Parsed, FieldError> {
        let mut f = line.split_ascii_whitespace();
        let Some(first) = f.next() else {
            return Ok(Parsed::Skip);
        };
        let ts_ns = field::u64("time", Some(first))?;
        let device = field::u32("device", f.next())?;
        let sector = field::u64("lba", f.next())?;
        let sectors = field::sectors("sectors", f.next())?;
        let op = read_flag(f.next())?;
        field::end(f)?;
        Ok(Parsed::Request(Request {
            ts_ns,
            pid: None,
            command: NO_COMMAND,
            device,
            sector,
            sectors,
            op,
        }))
    }
}
