//! SPC trace format (the UMass Trace Repository's Financial and WebSearch traces), CSV:
//! `ASU,LBA,size_bytes,opcode,timestamp_s`, e.g. `0,303567,3584,w,0.000000`.
//!
//! The ASU (application specific storage unit) is the device; the LBA counts 512-byte
//! sectors; the size is bytes, rounded up to whole sectors when it is not a multiple of
//! 512 (the traces hold sizes such as 3584 = 7 sectors, and a few odd ones); the opcode is
//! `r` or `w` (either case); the timestamp is seconds from the start of the trace. The SPC
//! specification allows optional fields after the fifth: they are ignored. The trace has no
//! process, so pid and command are empty.

use super::{field, sniff_by_parsing, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Op, Request, NO_COMMAND};

pub struct Spc;

impl LineFormat for Spc {
    fn name(&self) -> &'static str {
        "spc"
    }

    fn describe(&self) -> &'static str {
        "SPC / UMass CSV: ASU,LBA,size_bytes,r|w,timestamp_s"
    }

    fn address_fields(&self) -> [&'static str; 2] {
        ["lba", "size"]
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        sniff_by_parsing(self, lines)
    }

    fn parse(&self, line: &str, _state: &mut ParseState) -> Result<Parsed, FieldError> {
        let line = line.trim();
        if line.is_empty() {
            return Ok(Parsed::Skip);
        }
        let mut f = line.split(',').map(str::trim);
        let device = field::u32("asu", f.next())?;
        let sector = field::u64("lba", f.next())?;
        let sectors = field::bytes_as_sectors("size", f.next())?;
        let op = match field::present("opcode", f.next())? {
            "r" | "R" => Op::Read,
            "w" | "W" => Op::Write,
            other => {
                return Err(FieldError::new(
                    "opcode",
                    format!("'{other}' is not r or w"),
                ))
            }
        };
        let ts_ns = field::decimal_ns("timestamp", f.next(), 9)?;
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
