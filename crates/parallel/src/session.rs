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

/// Calls `f` with the blocks of each session of `trace[range]`, each block once, in the
/// order first requested (the order the pair window of [`crate::mining`] follows).
pub fn for_each_session(
    trace: &Trace,
    range: Range<usize>,
    cfg: &SessionConfig,
    mut f: impl FnMut(&[u64]),
) {
    let mut blocks: Vec<u64> = Vec::new();
    let mut seen: FxHashSet<u64> = FxHashSet::default();
    let mut start_ns: Option<u64> = None;
    for i in range {
        if !cfg.ops.admits(trace.write[i]) {
            continue;
        }
        let ts = trace.ts_ns[i];
        let same = match (cfg.mode, start_ns) {
            (SessionMode::WindowNs(w), Some(s)) => ts >= s && ts - s < w,
            _ => false,
        };
        if !same {
            if !blocks.is_empty() {
                f(&blocks);
            }
            blocks.clear();
            seen.clear();
            start_ns = Some(ts);
        }
        for b in cfg.blocking.blocks(trace.sector[i], trace.sectors[i]) {
            if seen.insert(b) {
                blocks.push(b);
            }
        }
    }
    if !blocks.is_empty() {
        f(&blocks);
    }
}
