//! FIU block traces (SNIA IOTTA, the IODedup / SRCMap family), one request per line:
//! `ts_ns pid process lba size_sectors R|W major minor md5`, e.g.
//! `89966811921625 4257 nfsd 488846200 8 W 6 0 2c4787c7671c2f638777c4ab72859ce1`.
//!
//! The md5 (the 4 KiB content hash the dedup studies use) is checked for shape and then
//! dropped. The device `major minor` becomes `major << 20 | minor`.

use super::native::parse_op;
use super::{field, sniff_by_parsing, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::Request;

pub struct Fiu;

impl LineFormat for Fiu {
    fn name(&self) -> &'static str {
        "fiu"
    }

    fn describe(&self) -> &'static str {
        "FIU (SNIA IOTTA): ts_ns pid process lba size R|W major minor md5"
    }

    fn text_field(&self) -> Option<&'static str> {
        Some("process")
    }

    fn address_fields(&self) -> [&'static str; 2] {
        ["lba", "size"]
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        sniff_by_parsing(self, lines)
    }

    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError> {
        let mut f = line.split_ascii_whitespace();
        let Some(first) = f.next() else {
            return Ok(Parsed::Skip);
        };
        let ts_ns = field::u64("timestamp", Some(first))?;
        let pid = field::u32("pid", f.next())?;
        let command = field::present("process", f.next())?;
        let sector = field::u64("lba", f.next())?;
        let sectors = field::sectors("size", f.next())?;
        let op = parse_op("op", f.next())?;
        let major = field::u32("major", f.next())?;
        let minor = field::u32("minor", f.next())?;
        let md5 = field::present("md5", f.next())?;
        if md5.len() != 32 || !md5.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(FieldError::new(
                "md5",
                format!("'{md5}' is not 32 hex digits"),
            ));
        }
        field::end(f)?;
        Ok(Parsed::Request(Request {
            ts_ns,
            pid: Some(pid),
            command: state.intern(command),
            device: field::linux_device(major, minor)?,
            sector,
            sectors,
            op,
        }))
    }
}
