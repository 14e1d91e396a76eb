//! MSR Cambridge windows in the replayer format of the ucare / huaicheng tools (Heimdall's
//! 10,000-request cuts): `ts_ms device offset_bytes size_bytes op`, op 1 = read, 0 = write,
//! e.g. `0.000 0 11562803200 4096 1`.
//!
//! It has the same five columns as the simulator ascii format, so `auto` tells them apart
//! strictly: here every time has a decimal point (milliseconds) and every offset is a
//! multiple of 512 bytes; ascii times are integers. Offsets must be sector aligned; sizes
//! are rounded up to whole sectors.

use super::ascii::read_flag;
use super::{field, sniff_by_parsing, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Request, NO_COMMAND};

pub struct MsrWindows;

impl LineFormat for MsrWindows {
    fn name(&self) -> &'static str {
        "msr-windows"
    }

    fn describe(&self) -> &'static str {
        "MSR replayer windows: ts_ms(decimal) device offset_bytes size_bytes op(1=read,0=write)"
    }

    fn address_fields(&self) -> [&'static str; 2] {
        ["offset", "size"]
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        let decimal_times = lines
            .iter()
            .all(|l| match l.split_ascii_whitespace().next() {
                Some(t) => t.contains('.'),
                None => true,
            });
        decimal_times && sniff_by_parsing(self, lines)
    }

    fn parse(&self, line: &str, _state: &mut ParseState) -> Result<Parsed, FieldError> {
        let mut f = line.split_ascii_whitespace();
        let Some(first) = f.next() else {
            return Ok(Parsed::Skip);
        };
        let ts_ns = field::decimal_ns("time", Some(first), 6)?;
        let device = field::u32("device", f.next())?;
        let sector = field::byte_offset_as_sector("offset", f.next())?;
        let sectors = field::bytes_as_sectors("size", f.next())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Ascii;

    /// The two five-column formats never both claim a sample: the time's decimal point
    /// decides, even when every offset happens to be a multiple of 512.
    #[test]
    fn ascii_and_msr_windows_are_told_apart() {
        let ascii_like = ["0 0 1024 4096 1", "26214000 1 2048 512 0"];
        assert!(Ascii.sniff(&ascii_like));
        assert!(!MsrWindows.sniff(&ascii_like));
        let windows = ["0.000 0 1024 4096 1", "22.810 1 2048 512 0"];
        assert!(MsrWindows.sniff(&windows));
        assert!(!Ascii.sniff(&windows));
        // one integer time among decimal ones: neither claims it, auto asks for --format
        let mixed = ["0.000 0 1024 4096 1", "22 1 2048 512 0"];
        assert!(!MsrWindows.sniff(&mixed));
        assert!(!Ascii.sniff(&mixed));
    }

    #[test]
    fn unaligned_offset_is_a_field_error() {
        let e = MsrWindows
            .parse("1.5 0 1000 4096 1", &mut ParseState::default())
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "field offset: byte offset 1000 is not a multiple of 512 (a sector)"
        );
    }
}
