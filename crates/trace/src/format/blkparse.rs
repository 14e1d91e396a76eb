//! blkparse's default text output, one event per line:
//! `dev cpu seq time_s pid action RWBS sector + sectors [command]`, e.g.
//! `  8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]`.
//!
//! A request is counted once, when it is queued ('Q'): later events of the same request
//! (G, I, D, C, merges) would count it again. Captures filtered to dispatch events
//! (`blktrace -a issue`) have no 'Q' at all, so 'D' events count until the first 'Q' is
//! seen: in a full capture the D events before any Q are requests queued before tracing
//! began, and in a D-only capture they are all the requests there are. The pid and command
//! of a D event are those of the dispatching process, which may be a kernel worker.
//!
//! RWBS with 'D' (discard) or 'N' (no data), and flushes without data, are not requests;
//! discards are kept beside them ([`ParseState::discards`]). The
//! device `major,minor` becomes `major << 20 | minor`. Times are seconds from the start of
//! the capture. The per-CPU summary blkparse prints at the end is skipped.

use super::{field, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Discard, Op, Request};

pub struct Blkparse;

/// The data direction of a blktrace RWBS string (`R`, `WS`, `FWFS`, `RA`, `D`, `N`):
/// `None` for requests that move no data (discard, none, bare flush).
pub(crate) fn rwbs(name: &'static str, s: Option<&str>) -> Result<Option<Op>, FieldError> {
    let s = field::present(name, s)?;
    if s.is_empty() || !s.bytes().all(|b| b"RWDNFSAMBE".contains(&b)) {
        return Err(FieldError::new(
            name,
            format!("'{s}' is not a blktrace RWBS string"),
        ));
    }
    Ok(if s.contains(['D', 'N']) {
        None
    } else if s.contains('R') {
        Some(Op::Read)
    } else if s.contains('W') {
        Some(Op::Write)
    } else {
        None
    })
}

/// `SECTOR + SECTORS`.
fn extent<'a>(f: &mut impl Iterator<Item = &'a str>) -> Result<(u64, u32), FieldError> {
    let sector = field::u64("sector", f.next())?;
    if field::present("+", f.next())? != "+" {
        return Err(FieldError::new("+", "expected '+' between sector and size"));
    }
    Ok((sector, field::u32("sectors", f.next())?))
}

fn device(s: Option<&str>) -> Result<u32, FieldError> {
    let s = field::present("device", s)?;
    let (major, minor) = s
        .split_once(',')
        .ok_or_else(|| FieldError::new("device", format!("'{s}' is not major,minor")))?;
    field::linux_device(
        field::u32("device", Some(major))?,
        field::u32("device", Some(minor))?,
    )
    .map_err(|e| FieldError::new("device", e.why))
}

/// blkparse's closing summary starts with `CPU0 (8,16):` or `Total (8,16):`.
fn starts_trailer(line: &str) -> bool {
    (line.starts_with("CPU") || line.starts_with("Total (")) && line.ends_with("):")
}

impl LineFormat for Blkparse {
    fn name(&self) -> &'static str {
        "blkparse"
    }

    fn describe(&self) -> &'static str {
        "blkparse default text: dev cpu seq time pid action RWBS sector + n [cmd] (Q events)"
    }

    /// Every line must parse and at least one must be an event: a window of messages and
    /// merges with no Q in it is still plainly blkparse.
    fn text_field(&self) -> Option<&'static str> {
        Some("command")
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        let mut state = ParseState::default();
        let mut events = 0;
        for line in lines {
            if self.parse(line, &mut state).is_err() {
                return false;
            }
            events += usize::from(!state.trailer && !line.trim().is_empty());
        }
        events > 0
    }

    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError> {
        let t = line.trim();
        if state.trailer || t.is_empty() {
            return Ok(Parsed::Skip);
        }
        if starts_trailer(t) {
            state.trailer = true;
            return Ok(Parsed::Skip);
        }
        let mut f = t.split_ascii_whitespace();
        let device = device(f.next())?;
        field::u32("cpu", f.next())?;
        field::u64("sequence", f.next())?;
        let ts_ns = field::decimal_ns("timestamp", f.next(), 9)?;
        let pid = field::u32("pid", f.next())?;
        let action = field::present("action", f.next())?;
        if action.is_empty() || action.len() > 2 || !action.bytes().all(|b| b.is_ascii_alphabetic())
        {
            return Err(FieldError::new(
                "action",
                format!("'{action}' is not a blktrace action"),
            ));
        }
        let counted = match action {
            "Q" => {
                state.queue_seen = true;
                true
            }
            "D" => !state.queue_seen,
            _ => false,
        };
        if !counted {
            return Ok(Parsed::Skip);
        }
        let flags = f.next();
        let Some(op) = rwbs("rwbs", flags)? else {
            if flags.is_some_and(|s| s.contains('D')) {
                let (sector, sectors) = extent(&mut f)?;
                state.discards.push(Discard {
                    ts_ns,
                    device,
                    sector,
                    sectors,
                });
            }
            return Ok(Parsed::Skip);
        };
        let (sector, sectors) = extent(&mut f)?;
        if sectors == 0 {
            return Ok(Parsed::Skip); // a flush carrying no data
        }
        let command = command(t, f.next())?;
        Ok(Parsed::Request(Request {
            ts_ns,
            pid: Some(pid),
            command: state.intern(command),
            device,
            sector,
            sectors,
            op,
        }))
    }
}

/// The bracketed process name, which may hold blanks (`[Web Content]`): the rest of the
/// line from the token `first` on.
fn command<'a>(line: &'a str, first: Option<&'a str>) -> Result<&'a str, FieldError> {
    let first = field::present("command", first)?;
    let start = first.as_ptr() as usize - line.as_ptr() as usize;
    let rest = &line[start..];
    rest.strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| FieldError::new("command", format!("'{rest}' is not [process name]")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_directions() {
        let d = |s| rwbs("rwbs", Some(s)).unwrap();
        assert_eq!(d("R"), Some(Op::Read));
        assert_eq!(d("RA"), Some(Op::Read));
        assert_eq!(d("WS"), Some(Op::Write));
        assert_eq!(d("FWFS"), Some(Op::Write));
        assert_eq!(d("WM"), Some(Op::Write));
        assert_eq!(d("D"), None);
        assert_eq!(d("DS"), None);
        assert_eq!(d("N"), None);
        assert_eq!(d("F"), None);
        assert!(rwbs("rwbs", Some("Rx")).is_err());
    }

    #[test]
    fn command_with_blanks() {
        let mut st = ParseState::default();
        let line = "  8,0   1  7  1.5 42  Q  WS 100 + 8 [Web Content]";
        let Parsed::Request(r) = Blkparse.parse(line, &mut st).unwrap() else {
            panic!("skipped")
        };
        assert_eq!(st.commands.name(r.command), "Web Content");
        assert_eq!(
            (r.device, r.ts_ns, r.op),
            (8 << 20, 1_500_000_000, Op::Write)
        );
    }

    #[test]
    fn d_events_count_only_before_the_first_q() {
        let mut st = ParseState::default();
        let d = "  8,0   1  7  1.0 42  D  R 100 + 8 [a]";
        let q = "  8,0   1  8  2.0 42  Q  R 200 + 8 [a]";
        assert!(matches!(Blkparse.parse(d, &mut st), Ok(Parsed::Request(_))));
        assert!(matches!(Blkparse.parse(q, &mut st), Ok(Parsed::Request(_))));
        assert_eq!(Blkparse.parse(d, &mut st), Ok(Parsed::Skip));
    }

    #[test]
    fn discards_are_kept_beside_the_requests() {
        let mut st = ParseState::default();
        let lines = [
            "  8,0   1  1  1.0 42  Q  DS 4096 + 2048 [fstrim]",
            "  8,0   1  2  1.1 42  D  DS 4096 + 2048 [fstrim]",
            "  8,0   1  3  1.2 42  Q  N 0 + 0 [kworker]",
            "  8,0   1  4  1.3 42  Q  FN [kworker]",
            "  8,0   1  5  1.4 42  Q  R 100 + 8 [cat]",
        ];
        let parsed: Vec<_> = lines
            .iter()
            .map(|l| Blkparse.parse(l, &mut st).unwrap())
            .collect();
        assert!(parsed[..4].iter().all(|p| *p == Parsed::Skip));
        assert!(matches!(parsed[4], Parsed::Request(_)));
        assert_eq!(
            st.discards,
            vec![Discard {
                ts_ns: 1_000_000_000,
                device: 8 << 20,
                sector: 4096,
                sectors: 2048,
            }]
        );
    }
}
