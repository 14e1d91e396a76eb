//! blkreplay `.load` files (the 1&1 "natural loads"): a free-text license preamble, a
//! `#####` line and the column line `start ; sector; length ; op ; replay_delay ;
//! replay_duration`, then one request per line, e.g.
//! `      0.449518165 ;     37766917 ;   14 ; W ; 0.0 ; 0.0`.
//!
//! Times are seconds from the start of the load; sector and length are 512-byte sectors;
//! op is R or W with blktrace's RWBS modifiers (one line of linux-mysql says `RA`). The
//! last two columns are the replayer's own output (0 in recorded loads): checked, dropped.
//!
//! Everything before the first line with a ';' is preamble (some files repeat the license
//! text after the first column line, so the column line does not end it); after the first
//! request, a line without ';' is an error.

use super::blkparse::rwbs;
use super::{field, sniff_by_parsing, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Request, NO_COMMAND};

pub struct Blkreplay;

fn is_column_line(t: &str) -> bool {
    t.starts_with("start") && t.contains(';')
}

impl LineFormat for Blkreplay {
    fn name(&self) -> &'static str {
        "blkreplay"
    }

    fn describe(&self) -> &'static str {
        "blkreplay .load: start_s ; sector ; length ; R|W ; delay ; duration (after the ##### header)"
    }

    fn address_fields(&self) -> [&'static str; 2] {
        ["sector", "length"]
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        sniff_by_parsing(self, lines)
    }

    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError> {
        let t = line.trim();
        if t.is_empty() || is_column_line(t) {
            return Ok(Parsed::Skip);
        }
        if !state.in_body {
            if !t.contains(';') {
                return Ok(Parsed::Skip);
            }
            state.in_body = true;
        }
        let mut f = t.split(';').map(str::trim);
        let ts_ns = field::decimal_ns("start", f.next(), 9)?;
        let sector = field::u64("sector", f.next())?;
        let sectors = field::sectors("length", f.next())?;
        let Some(op) = rwbs("op", f.next())? else {
            return Ok(Parsed::Skip);
        };
        field::decimal_ns("replay_delay", f.next(), 9)?;
        field::decimal_ns("replay_duration", f.next(), 9)?;
        field::end(f)?;
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
