//! Frequent block pairs of a whole trace, streamed (`reblock pairs`, and the Python
//! package's `pairs`): the sessionization of [`crate::session`] and the pair counting of
//! [`crate::mining`] over every request, in memory proportional to the distinct pairs.
//! The Spark job of the Python package computes the same pairs on a cluster; both print
//! `{"pairs": [{"a", "b", "support"}, ...]}` sorted by `a`, then `b`.

use reblock_trace::{Op, TraceError, TraceReader};
use serde::{Deserialize, Serialize};

use crate::mining::PairCounts;
use crate::session::{SessionConfig, Sessionizer};

/// The pair window when none is given: 13, the disks less one of the default 14-disk
/// array of the evaluation (see [`crate::mining`] for why disks - 1 loses nothing).
pub const DEFAULT_PAIR_WINDOW: usize = 13;

/// What to mine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairMining {
    pub sessions: SessionConfig,
    /// Each block is paired with the next `window` blocks of its session.
    pub window: usize,
    /// Keep pairs seen in at least this many sessions (at least 1).
    pub support: u32,
}

/// One frequent pair: blocks `a < b` shared by `support` sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MinedPair {
    pub a: u64,
    pub b: u64,
    pub support: u32,
}

/// The pairs of a trace, and counts for a human summary (not in the JSON, which the Spark
/// job prints identically).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MinedPairs {
    pub pairs: Vec<MinedPair>,
    #[serde(skip)]
    pub requests: u64,
    #[serde(skip)]
    pub sessions: u64,
    #[serde(skip)]
    pub distinct_pairs: usize,
}

/// Mines every request `reader` yields; `progress` hears the request count now and then.
pub fn mine_pairs(
    reader: &mut TraceReader,
    cfg: &PairMining,
    mut progress: impl FnMut(u64),
) -> Result<MinedPairs, TraceError> {
    let mut counts = PairCounts::new(cfg.window);
    let mut sessions = Sessionizer::new(cfg.sessions);
    let mut requests = 0u64;
    while let Some(r) = reader.next_request()? {
        sessions.push(r.ts_ns, r.op == Op::Write, r.sector, r.sectors, |s| {
            counts.add_session(s)
        });
        requests += 1;
        if requests.is_multiple_of(1 << 16) {
            progress(requests);
        }
    }
    sessions.flush(|s| counts.add_session(s));
    let pairs = counts
        .frequent(cfg.support.max(1))
        .into_iter()
        .map(|p| MinedPair {
            a: p.a,
            b: p.b,
            support: p.count,
        })
        .collect();
    Ok(MinedPairs {
        pairs,
        requests,
        sessions: counts.sessions(),
        distinct_pairs: counts.distinct_pairs(),
    })
}
