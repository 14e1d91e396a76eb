//! MSR Cambridge block traces (SNIA IOTTA #388), CSV without a header:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, e.g.
//! `128166410318060999,wdev,1,Write,3165323264,4096,1189`.
//!
//! Timestamps are Windows FILETIME (100 ns ticks since 1601-01-01 UTC) and become ns since
//! the Unix epoch. The disk number is the device. The host name becomes the command: the
//! traces record no process, and the host is the closest thing to "who issued it" (one
//! volume per host and disk, so grouping by it is harmless). Offsets are bytes and must fall
//! on a sector boundary; sizes are bytes rounded up to whole sectors. The response time is
//! checked and dropped (reblock models its own).

use super::{field, sniff_by_parsing, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Op, Request};

pub struct Msr;

/// FILETIME of 1970-01-01T00:00:00Z: 369 years of 100 ns ticks.
pub const UNIX_EPOCH_FILETIME: u64 = 116_444_736_000_000_000;

/// Windows FILETIME ticks as ns since the Unix epoch.
pub fn filetime_to_unix_ns(field: &'static str, ticks: u64) -> Result<u64, FieldError> {
    let since = ticks
        .checked_sub(UNIX_EPOCH_FILETIME)
        .ok_or_else(|| FieldError::new(field, format!("FILETIME {ticks} is before 1970")))?;
    since
        .checked_mul(100)
        .ok_or_else(|| FieldError::new(field, format!("FILETIME {ticks} is too late for ns")))
}

impl LineFormat for Msr {
    fn name(&self) -> &'static str {
        "msr"
    }

    fn describe(&self) -> &'static str {
        "MSR Cambridge CSV: FILETIME,host,disk,Read|Write,offset_bytes,size_bytes,response_ticks"
    }

    fn text_field(&self) -> Option<&'static str> {
        Some("hostname")
    }

    fn address_fields(&self) -> [&'static str; 2] {
        ["offset", "size"]
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        sniff_by_parsing(self, lines)
    }

    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError> {
        let line = line.trim();
        if line.is_empty() {
            return Ok(Parsed::Skip);
        }
        let mut f = line.split(',');
        let ticks = field::u64("timestamp", f.next())?;
        let ts_ns = filetime_to_unix_ns("timestamp", ticks)?;
        let host = field::present("hostname", f.next())?;
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(FieldError::new(
                "hostname",
                format!("'{host}' is not a host name"),
            ));
        }
        let device = field::u32("disk", f.next())?;
        let op = match field::present("type", f.next())? {
            "Read" => Op::Read,
            "Write" => Op::Write,
            other => {
                return Err(FieldError::new(
                    "type",
                    format!("'{other}' is not Read or Write"),
                ))
            }
        };
        let sector = field::byte_offset_as_sector("offset", f.next())?;
        let sectors = field::bytes_as_sectors("size", f.next())?;
        field::u64("response_time", f.next())?;
        field::end(f)?;
        Ok(Parsed::Request(Request {
            ts_ns,
            pid: None,
            command: state.intern(host),
            device,
            sector,
            sectors,
            op,
        }))
    }
}
