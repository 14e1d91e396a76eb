//! CloudPhysics VMware vSCSI traces as CSV (the libCacheSim sample, from the SHARDS traces):
//! a header `version,time,op,size,lbn`, then `1,5633898,2a,512,42932745`.
//!
//! `time` is seconds (undocumented; the sample spans 2 h under that reading); `op` is the
//! SCSI opcode in hex: READ/WRITE (6), (10), (12), (16) are requests, any other opcode
//! (TEST UNIT READY, SYNCHRONIZE CACHE, ...) moves no data and is skipped. `size` is bytes,
//! rounded up to whole sectors; `lbn` is the 512-byte sector. One virtual disk: device 0.

use super::{field, sniff_by_parsing, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Op, Request, NO_COMMAND};

pub struct CloudPhysics;

const HEADER: &str = "version,time,op,size,lbn";

fn scsi_op(s: Option<&str>) -> Result<Option<Op>, FieldError> {
    let s = field::present("op", s)?;
    let code = (!s.is_empty() && s.len() <= 2)
        .then(|| u8::from_str_radix(s, 16).ok())
        .flatten()
        .ok_or_else(|| FieldError::new("op", format!("'{s}' is not a SCSI opcode in hex")))?;
    Ok(match code {
        0x08 | 0x28 | 0xa8 | 0x88 => Some(Op::Read),
        0x0a | 0x2a | 0xaa | 0x8a => Some(Op::Write),
        _ => None,
    })
}

impl LineFormat for CloudPhysics {
    fn name(&self) -> &'static str {
        "cloudphysics"
    }

    fn describe(&self) -> &'static str {
        "CloudPhysics vSCSI CSV: version,time_s,op(hex SCSI),size_bytes,lbn (with header)"
    }

    /// Claims a file only with its header line: the bare rows are too plain to be sure.
    fn address_fields(&self) -> [&'static str; 2] {
        ["lbn", "size"]
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        lines.first().map(|l| l.trim()) == Some(HEADER) && sniff_by_parsing(self, lines)
    }

    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError> {
        let t = line.trim();
        if t.is_empty() {
            return Ok(Parsed::Skip);
        }
        if !state.in_body {
            state.in_body = true;
            if t == HEADER {
                return Ok(Parsed::Skip);
            }
        }
        let mut f = t.split(',').map(str::trim);
        field::u32("version", f.next())?;
        let ts_ns = field::decimal_ns("time", f.next(), 9)?;
        let op = scsi_op(f.next())?;
        let size = f.next();
        let sector = field::u64("lbn", f.next())?;
        field::end(f)?;
        let Some(op) = op else {
            field::u64("size", size)?;
            return Ok(Parsed::Skip);
        };
        let sectors = field::bytes_as_sectors("size", size)?;
        Ok(Parsed::Request(Request {
            ts_ns,
            pid: None,
            command: NO_COMMAND,
            device: 0,
            sector,
            sectors,
            op,
        }))
    }
}
