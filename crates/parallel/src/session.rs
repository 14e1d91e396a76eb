//! Sessions: the sets of blocks requested or handled together (seed 003 §IV-A).
//!
//! The monitoring module of the seed writes one session per line (Figure 4(a)). Here a
//! session is either the blocks of one request, or the blocks of the requests arriving
//! within a time window of the session's first request (requests "queued and handled
//! together", §II-B). Blocks are fixed-size units of `block_sectors` 512-byte sectors
//! (the seed used 512 B blocks; 8 sectors gives 4 KiB pages).

use std::ops::Range;

use reblock_trace::Trace;
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};

/// How requests are grouped into sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionMode {
    /// One session per request: intra-request correlations only.
    Request,
    /// Requests arriving within this many nanoseconds of the session's first request
    /// share a session: intra- and inter-request correlations.
    WindowNs(u64),
}

/// Which requests feed the sessions (§V-B1: read-only or write-only monitoring).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpFilter {
    Reads,
    Writes,
    Both,
}

impl OpFilter {
    /// `reads`, `writes` or `both` (singular accepted), as `--mine` spells it.
    pub fn parse(s: &str) -> Option<OpFilter> {
        match s {
            "reads" | "read" => Some(OpFilter::Reads),
            "writes" | "write" => Some(OpFilter::Writes),
            "both" => Some(OpFilter::Both),
            _ => None,
        }
    }
    pub fn admits(self, write: bool) -> bool {
        match self {
            OpFilter::Reads => !write,
            OpFilter::Writes => write,
            OpFilter::Both => true,
        }
    }
}

/// How block numbers are derived from a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocking {
    /// Block size in 512-byte sectors (1 = the seed's 512 B blocks).
    pub block_sectors: u64,
    /// Addresses at or past this many sectors fold back modulo it, as the array does
    /// (`None`: no folding).
    pub wrap_sectors: Option<u64>,
}

impl Blocking {
    /// The blocks `[sector, sector + sectors)` touches, in address order.
    pub fn blocks(&self, sector: u64, sectors: u32) -> impl Iterator<Item = u64> + '_ {
        let bs = self.block_sectors.max(1);
        let (first, last) = (sector / bs, (sector + sectors.max(1) as u64 - 1) / bs);
        (first..=last).map(move |b| match self.wrap_sectors {
            // Fold each block the way the array folds its sectors.
            Some(cap) if cap > 0 => ((b * bs) % cap) / bs,
            _ => b,
        })
    }
}

/// Session settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionConfig {
    pub blocking: Blocking,
    pub mode: SessionMode,
    pub ops: OpFilter,
}

/// Groups a stream of requests into sessions, one request at a time, so that a trace of
/// any length is sessionized in memory proportional to the largest session.
#[derive(Clone, Debug)]
pub struct Sessionizer {
    cfg: SessionConfig,
    blocks: Vec<u64>,
    seen: FxHashSet<u64>,
    start_ns: Option<u64>,
}

impl Sessionizer {
    pub fn new(cfg: SessionConfig) -> Sessionizer {
        Sessionizer {
            cfg,
            blocks: Vec::new(),
            seen: FxHashSet::default(),
            start_ns: None,
        }
    }

    /// Adds one request; calls `f` with the blocks of the session it closes, if any (each
    /// block once, in the order first requested: the order the pair window of
    /// [`crate::mining`] follows).
    pub fn push(
        &mut self,
        ts_ns: u64,
        write: bool,
        sector: u64,
        sectors: u32,
        f: impl FnMut(&[u64]),
    ) {
        if !self.cfg.ops.admits(write) {
            return;
        }
        let same = match (self.cfg.mode, self.start_ns) {
            (SessionMode::WindowNs(w), Some(s)) => ts_ns >= s && ts_ns - s < w,
            _ => false,
        };
        if !same {
            self.flush(f);
            self.start_ns = Some(ts_ns);
        }
        for b in self.cfg.blocking.blocks(sector, sectors) {
            if self.seen.insert(b) {
                self.blocks.push(b);
            }
        }
    }

    /// Closes the open session, if any, calling `f` with its blocks.
    pub fn flush(&mut self, mut f: impl FnMut(&[u64])) {
        if !self.blocks.is_empty() {
            f(&self.blocks);
        }
        self.blocks.clear();
        self.seen.clear();
    }
}

/// Calls `f` with the blocks of each session of `trace[range]` (see [`Sessionizer::push`]).
pub fn for_each_session(
    trace: &Trace,
    range: Range<usize>,
    cfg: &SessionConfig,
    mut f: impl FnMut(&[u64]),
) {
    let mut sessions = Sessionizer::new(*cfg);
    for i in range {
        sessions.push(
            trace.ts_ns[i],
            trace.write[i],
            trace.sector[i],
            trace.sectors[i],
            &mut f,
        );
    }
    sessions.flush(f);
}
