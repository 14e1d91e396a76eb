//! The tracefs text of the `block:block_bio_queue` event, as the kernel prints it in
//! `trace` and `trace_pipe` (what `reblock record` reads, and what a user gets from
//! `cat /sys/kernel/tracing/trace`):
//!
//! ```text
//!               dd-7137    [001] .....  2801.159800: block_bio_queue: 7,0 WS 2048 + 16 [dd]
//! ```
//!
//! Fields: `TASK-PID` (the pid follows the LAST dash: commands may hold dashes and blanks,
//! and the kernel prints `<idle>-0` or `<...>-PID` when it has no name), an optional tgid
//! column `(PID)` (option `record-tgid`), `[CPU]`, an optional flags column (`.....`,
//! `.N...`, `d..1.`; absent without option `irq-info`), the timestamp in seconds with a
//! fraction (usually microseconds), then the event: `MAJOR,MINOR RWBS SECTOR + SECTORS [COMM]`.
//!
//! - The request's command is the event's own `[COMM]` (the task that queued the bio, taken
//!   when the event fired), not the TASK column, which the kernel fills from a cache and
//!   may print as `<...>`.
//! - The timestamp is the trace clock's, converted to ns (microsecond precision when the
//!   kernel prints 6 digits). `reblock record` uses clock `mono` (CLOCK_MONOTONIC).
//! - RWBS (kernel `blk_fill_rwbs`): an optional leading `F` (preflush), the op (`R` read,
//!   `W` write, `D` discard, `DE` secure erase, `F` flush, `N` other), then modifiers
//!   `F` (FUA), `A` (read-ahead), `S` (sync), `M` (metadata). Reads and writes with data are
//!   requests; discards, flushes, other ops and empty (0-sector) bios, e.g. `FWS 0 + 0`,
//!   carry no data and are not requests; discards are kept beside them
//!   ([`ParseState::discards`]).
//! - The device is recorded as the kernel's own encoding `(MAJOR << 20) | MINOR`, which is
//!   also what an event filter `dev == N` compares against; see [`dev_t`].
//! - Other events of the same capture (`block_rq_issue`, `block_rq_insert`,
//!   `block_rq_complete`, ...) are skipped: they follow the same I/O later in its life,
//!   after merging and dispatch, with the dispatcher as the task, so counting them too
//!   would count requests twice. A capture of `block_rq_*` events alone is therefore not
//!   read by this format (it holds no `block_bio_queue` line and is not sniffed as one).
//! - `CPU:N [LOST M EVENTS]` notes of `trace_pipe` and `#` header lines are skipped.

use super::{field, LineFormat, ParseState, Parsed};
use crate::error::FieldError;
use crate::request::{Discard, Op, Request};

pub struct Tracefs;

/// The event this format turns into requests.
pub const EVENT: &str = "block_bio_queue";

/// The kernel's in-trace encoding of a device number (`MKDEV` in `include/linux/kdev_t.h`):
/// 12 bits of major above 20 bits of minor. Event filters compare `dev` against this.
pub fn dev_t(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & ((1 << 20) - 1))
}

/// The parts of an event line before the event's own text.
struct Header<'a> {
    pid: u32,
    ts_ns: u64,
    event: &'a str,
    body: &'a str,
}

impl LineFormat for Tracefs {
    fn name(&self) -> &'static str {
        "tracefs"
    }

    fn describe(&self) -> &'static str {
        "tracefs text of block:block_bio_queue (trace / trace_pipe)"
    }

    fn text_field(&self) -> Option<&'static str> {
        Some("task/comm")
    }

    fn sniff(&self, lines: &[&str]) -> bool {
        let mut state = ParseState::default();
        let mut queued = 0;
        for line in lines {
            let line = line.trim();
            if line.starts_with('#') || is_lost_note(line) {
                continue;
            }
            if split_header(line).is_err() || self.parse(line, &mut state).is_err() {
                return false;
            }
            queued += usize::from(line.contains(" block_bio_queue: "));
        }
        queued > 0
    }

    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || is_lost_note(line) {
            return Ok(Parsed::Skip);
        }
        let head = split_header(line)?;
        if head.event != EVENT {
            return Ok(Parsed::Skip);
        }
        parse_bio_queue(head, state)
    }
}

/// `CPU:1 [LOST 12 EVENTS]`: trace_pipe's note that the ring buffer overflowed.
pub fn is_lost_note(line: &str) -> bool {
    lost_events(line).is_some()
}

/// The count of a `CPU:N [LOST M EVENTS]` note.
pub fn lost_events(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("CPU:")?;
    let (_, rest) = rest.split_once(" [LOST ")?;
    rest.strip_suffix(" EVENTS]")?.parse().ok()
}

/// Splits `TASK-PID [(TGID)] [CPU] [FLAGS] TS: EVENT: BODY`.
fn split_header(line: &str) -> Result<Header<'_>, FieldError> {
    // The event name is the first `NAME: ` after the timestamp's colon; the task name may
    // hold anything, so search after the CPU column.
    let cpu_close = find_cpu_column(line)?;
    let (task, after_cpu) = (&line[..cpu_close.0], &line[cpu_close.1..]);
    let (ts_part, rest) = after_cpu
        .split_once(": ")
        .ok_or_else(|| FieldError::new("timestamp", "no 'TIMESTAMP: ' after the CPU column"))?;
    let ts = ts_part.split_ascii_whitespace().last();
    let ts_ns = parse_ts_ns(field::present("timestamp", ts)?)?;
    let (event, body) = rest
        .split_once(": ")
        .ok_or_else(|| FieldError::new("event", "no 'EVENT: ' after the timestamp"))?;
    Ok(Header {
        pid: parse_pid(task)?,
        ts_ns,
        event: event.trim(),
        body,
    })
}

/// The byte range of the `[CPU]` column: the first `[digits]` token after the task field.
/// Returns (start of `[`, one past `]`).
fn find_cpu_column(line: &str) -> Result<(usize, usize), FieldError> {
    let mut from = 0;
    while let Some(i) = line[from..].find(" [").map(|i| i + from + 1) {
        let close = line[i..].find(']').map(|c| c + i);
        if let Some(c) = close {
            let digits = &line[i + 1..c];
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                return Ok((i, c + 1));
            }
        }
        from = i;
    }
    Err(FieldError::new("cpu", "no '[CPU]' column after TASK-PID"))
}

/// The pid from `TASK-PID` with an optional `(TGID)` column after it.
fn parse_pid(task: &str) -> Result<u32, FieldError> {
    let mut task = task.trim();
    if task.ends_with(')') {
        if let Some(open) = task.rfind('(') {
            task = task[..open].trim_end();
        }
    }
    let (_, pid) = task
        .rsplit_once('-')
        .ok_or_else(|| FieldError::new("pid", format!("'{task}' is not TASK-PID")))?;
    field::u32("pid", Some(pid))
}

/// Seconds with a fraction of 1 to 9 digits, to ns.
fn parse_ts_ns(ts: &str) -> Result<u64, FieldError> {
    let bad = || FieldError::new("timestamp", format!("'{ts}' is not SECONDS.FRACTION"));
    let (secs, frac) = ts.split_once('.').ok_or_else(bad)?;
    if secs.is_empty() || frac.is_empty() || frac.len() > 9 {
        return Err(bad());
    }
    if !secs.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let scale = 10u64.pow(9 - frac.len() as u32);
    let secs: u64 = secs.parse().map_err(|_| bad())?;
    let frac_ns = frac.parse::<u64>().map_err(|_| bad())? * scale;
    secs.checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(frac_ns))
        .ok_or_else(bad)
}

/// `MAJOR,MINOR RWBS SECTOR + SECTORS [COMM]`.
fn parse_bio_queue(head: Header<'_>, state: &mut ParseState) -> Result<Parsed, FieldError> {
    let body = head.body.trim();
    let open = body
        .find(" [")
        .ok_or_else(|| FieldError::new("comm", "no '[COMM]' at the end"))?;
    let comm = body[open + 2..]
        .strip_suffix(']')
        .ok_or_else(|| FieldError::new("comm", "no ']' closing '[COMM]'"))?;
    let mut f = body[..open].split_ascii_whitespace();
    let device = parse_device(field::present("device", f.next())?)?;
    let rwbs = field::present("rwbs", f.next())?;
    let sector = field::u64("sector", f.next())?;
    if f.next() != Some("+") {
        return Err(FieldError::new(
            "sectors",
            "no '+' between SECTOR and SECTORS",
        ));
    }
    let sectors = field::u32("sectors", f.next())?;
    field::end(f)?;
    let Some(op) = parse_rwbs(rwbs)? else {
        if rwbs.trim_start_matches('F').starts_with('D') && sectors > 0 {
            state.discards.push(Discard {
                ts_ns: head.ts_ns,
                device,
                sector,
                sectors,
            });
        }
        return Ok(Parsed::Skip);
    };
    if sectors == 0 {
        return Ok(Parsed::Skip);
    }
    Ok(Parsed::Request(Request {
        ts_ns: head.ts_ns,
        pid: Some(head.pid),
        command: state.commands.intern(comm),
        device,
        sector,
        sectors,
        op,
    }))
}

fn parse_device(s: &str) -> Result<u32, FieldError> {
    let (major, minor) = s
        .split_once(',')
        .ok_or_else(|| FieldError::new("device", format!("'{s}' is not MAJOR,MINOR")))?;
    let major = field::u32("device", Some(major))?;
    let minor = field::u32("device", Some(minor))?;
    if major >= 1 << 12 || minor >= 1 << 20 {
        return Err(FieldError::new("device", format!("'{s}' is out of range")));
    }
    Ok(dev_t(major, minor))
}

/// The data op of an RWBS string, or None for ops that carry no data (see module docs).
fn parse_rwbs(rwbs: &str) -> Result<Option<Op>, FieldError> {
    let bad = || FieldError::new("rwbs", format!("'{rwbs}' is not an RWBS flag string"));
    // A leading F is a preflush, unless it is the whole op (a bare flush, "F" or "FF"...).
    let body = match rwbs.strip_prefix('F') {
        Some(rest) if rest.starts_with(['R', 'W', 'D', 'N', 'F']) => rest,
        _ => rwbs,
    };
    let mut chars = body.chars();
    let op = match chars.next().ok_or_else(bad)? {
        'R' => Some(Op::Read),
        'W' => Some(Op::Write),
        'D' | 'F' | 'N' => None,
        _ => return Err(bad()),
    };
    let modifiers = body.strip_prefix("DE").unwrap_or(chars.as_str());
    if !modifiers
        .chars()
        .all(|c| matches!(c, 'F' | 'A' | 'S' | 'M'))
    {
        return Err(bad());
    }
    Ok(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Parsed, FieldError> {
        Tracefs.parse(line, &mut ParseState::default())
    }

    fn request(line: &str) -> (Request, String) {
        let mut st = ParseState::default();
        match Tracefs.parse(line, &mut st).unwrap() {
            Parsed::Request(r) => (r, st.commands.name(r.command).to_string()),
            Parsed::Skip => panic!("skipped: {line}"),
        }
    }

    // Captured on a 6.18 kernel with `dd ... oflag=direct` on /dev/loop0.
    const WRITE: &str =
        "              dd-7137    [001] .....  2801.159800: block_bio_queue: 7,0 WS 2048 + 16 [dd]";

    #[test]
    fn parses_a_captured_write() {
        let (r, comm) = request(WRITE);
        assert_eq!(r.ts_ns, 2_801_159_800_000);
        assert_eq!(r.pid, Some(7137));
        assert_eq!(comm, "dd");
        assert_eq!(r.device, 7 << 20);
        assert_eq!((r.sector, r.sectors, r.op), (2048, 16, Op::Write));
    }

    #[test]
    fn command_with_blank_and_dash_takes_pid_after_last_dash() {
        let line = "         my dd-x-7138    [000] .....  2801.161755: block_bio_queue: 7,0 RS 4096 + 8 [my dd-x]";
        let (r, comm) = request(line);
        assert_eq!((r.pid, comm.as_str()), (Some(7138), "my dd-x"));
        assert_eq!((r.sector, r.sectors, r.op), (4096, 8, Op::Read));
    }

    #[test]
    fn unknown_and_idle_tasks_and_column_variants() {
        // Derived from WRITE: the kernel prints <...> when its comm cache misses, <idle>-0
        // for the idle task, '(TGID)' with option record-tgid, no flags without irq-info.
        let cases = [
            ("           <...>-7137    [001] d..1.  2801.159800: block_bio_queue: 7,0 WS 2048 + 16 [dd]", 7137),
            ("          <idle>-0       [000] ..s1.  2801.159800: block_bio_queue: 7,0 WS 2048 + 16 [dd]", 0),
            ("              dd-7137    (   7137) [001] .....  2801.159800: block_bio_queue: 7,0 WS 2048 + 16 [dd]", 7137),
            ("              dd-7137    [001] 2801.159800: block_bio_queue: 7,0 WS 2048 + 16 [dd]", 7137),
            ("  kworker/u8:2-1234 [001] .N...  2801.159800: block_bio_queue: 7,0 WS 2048 + 16 [dd]", 1234),
        ];
        for (line, pid) in cases {
            let (r, comm) = request(line);
            assert_eq!(
                (r.pid, comm.as_str(), r.ts_ns),
                (Some(pid), "dd", 2_801_159_800_000),
                "{line}"
            );
        }
    }

    #[test]
    fn rwbs_ops() {
        let read_ahead = WRITE.replace(" WS ", " RA ");
        assert_eq!(request(&read_ahead).0.op, Op::Read);
        for (flags, op) in [
            ("W", Op::Write),
            ("WFS", Op::Write),
            ("FWS", Op::Write),
            ("RM", Op::Read),
            ("FWFSM", Op::Write),
        ] {
            assert_eq!(
                request(&WRITE.replace(" WS ", &format!(" {flags} "))).0.op,
                op,
                "{flags}"
            );
        }
        for skipped in ["DS", "D", "DE", "N", "F", "FF", "FN"] {
            let line = WRITE.replace(" WS ", &format!(" {skipped} "));
            assert_eq!(parse(&line), Ok(Parsed::Skip), "{skipped}");
        }
        // A preflush without data, as the kernel queues for fsync on a device.
        let empty = "           my-dd-7139    [000] .....  2801.165467: block_bio_queue: 7,0 FWS 0 + 0 [my-dd]";
        assert_eq!(parse(empty), Ok(Parsed::Skip));
        let e = parse(&WRITE.replace(" WS ", " WX ")).unwrap_err();
        assert_eq!(e.field, "rwbs");
    }

    #[test]
    fn other_events_lost_notes_and_headers_are_skipped() {
        let issue = "              dd-7048    [001] .N...  2791.717451: block_rq_issue: 7,0 WS 8192 () 2048 + 16 be,0,4 [dd]";
        assert_eq!(parse(issue), Ok(Parsed::Skip));
        assert_eq!(parse("CPU:1 [LOST 12 EVENTS]"), Ok(Parsed::Skip));
        assert_eq!(lost_events("CPU:1 [LOST 12 EVENTS]"), Some(12));
        assert_eq!(parse("# tracer: nop"), Ok(Parsed::Skip));
    }

    #[test]
    fn names_the_bad_field() {
        let cases = [
            (WRITE.replace("dd-7137", "dd-71x7"), "pid"),
            (WRITE.replace("[001]", "[0x1]"), "cpu"),
            (WRITE.replace("2801.159800", "2801"), "timestamp"),
            (WRITE.replace("7,0", "7:0"), "device"),
            (WRITE.replace(" 2048 ", " -5 "), "sector"),
            (WRITE.replace(" + 16", " 16"), "sectors"),
            (WRITE.replace(" [dd]", " dd"), "comm"),
        ];
        for (line, field) in cases {
            assert_eq!(parse(&line).unwrap_err().field, field, "{line}");
        }
    }

    #[test]
    fn fraction_digits_scale_to_ns() {
        assert_eq!(parse_ts_ns("1.5"), Ok(1_500_000_000));
        assert_eq!(parse_ts_ns("0.000000001"), Ok(1));
        assert_eq!(parse_ts_ns("12.345678"), Ok(12_345_678_000));
        assert!(parse_ts_ns("1.1234567890").is_err());
    }

    #[test]
    fn dev_t_matches_the_kernel_encoding() {
        assert_eq!(dev_t(7, 0), 7 << 20);
        assert_eq!(dev_t(259, 3), 271_581_187);
    }

    #[test]
    fn sniff_wants_bio_queue_lines_only_of_tracefs() {
        assert!(Tracefs.sniff(&["# tracer: nop", WRITE]));
        assert!(!Tracefs.sniff(&["# tracer: nop"]));
        assert!(!Tracefs.sniff(&["430520000 4129 bash 12648728 8 R"]));
        assert!(!Tracefs.sniff(&[WRITE, "8,0 1 1 0.0 42 Q R 100 + 8 [cat]"]));
    }

    /// Every request of a sample file, as (pid, command, sector, sectors, op).
    fn requests_of(text: &str) -> Vec<(u32, String, u64, u32, Op)> {
        let mut st = ParseState::default();
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            match Tracefs.parse(line, &mut st) {
                Ok(Parsed::Request(r)) => out.push((
                    r.pid.unwrap(),
                    st.commands.name(r.command).to_string(),
                    r.sector,
                    r.sectors,
                    r.op,
                )),
                Ok(Parsed::Skip) => {}
                Err(e) => panic!("line {}: {e}", i + 1),
            }
        }
        out
    }

    // A real `trace` file (header included) captured with block_bio_queue on /dev/loop0:
    // dd wrote 8 KiB at sector 2048, "my dd-x" read 4 KiB at sector 4096, "my-dd" wrote one
    // sector with dsync (a data write with FUA, then an empty preflush), and blkdiscard
    // probed the device (48 read-ahead bios) before discarding 64 KiB at sector 2048.
    const TRACE_FILE: &str = include_str!("../../tests/data/tracefs/bio_queue_loop.trace");

    #[test]
    fn captured_trace_file() {
        let reqs = requests_of(TRACE_FILE);
        assert_eq!(reqs.len(), 51);
        assert_eq!(reqs[0], (7137, "dd".into(), 2048, 16, Op::Write));
        assert_eq!(reqs[1], (7138, "my dd-x".into(), 4096, 8, Op::Read));
        assert_eq!(reqs[2], (7139, "my-dd".into(), 0, 1, Op::Write));
        let probes = &reqs[3..];
        assert!(probes
            .iter()
            .all(|r| r.0 == 7140 && r.1 == "blkdiscard" && r.4 == Op::Read));
        assert_eq!(probes.iter().map(|r| u64::from(r.3)).sum::<u64>(), 2088);
        // blkdiscard's 64 KiB at sector 2048 is no request, but is kept as a discard.
        let mut st = ParseState::default();
        for line in TRACE_FILE.lines() {
            Tracefs.parse(line, &mut st).unwrap();
        }
        let d: Vec<_> = st.discards.iter().map(|d| (d.sector, d.sectors)).collect();
        assert_eq!(d, vec![(2048, 128)]);
    }

    #[test]
    fn captured_trace_file_is_sniffed_as_tracefs_only() {
        let sample: Vec<&str> = TRACE_FILE
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(32)
            .collect();
        let claims: Vec<&str> = crate::format::formats()
            .iter()
            .filter(|f| f.sniff(&sample))
            .map(|f| f.name())
            .collect();
        assert_eq!(claims, ["tracefs"]);
    }

    // trace_pipe output with block_bio_queue and block_rq_issue both enabled: the issue
    // events (and the empty preflush / flush requests) must not count again.
    #[test]
    fn captured_pipe_with_rq_issue_counts_bio_queue_only() {
        let text = include_str!("../../tests/data/tracefs/bio_queue_rq_issue_loop.pipe");
        let reqs = requests_of(text);
        let expect: Vec<(u32, String, u64, u32, Op)> = vec![
            (7048, "dd".into(), 2048, 16, Op::Write),
            (7049, "my dd-x".into(), 4096, 8, Op::Read),
            (7050, "my-dd".into(), 800, 8, Op::Write),
            (7050, "my-dd".into(), 808, 8, Op::Write),
            (7050, "my-dd".into(), 816, 8, Op::Write),
            (7050, "my-dd".into(), 824, 8, Op::Write),
            (7052, "my-dd".into(), 0, 1, Op::Write),
        ];
        assert_eq!(reqs, expect);
    }
}
