//! Time order: every reader hands out requests in timestamp order, so that every timing
//! statistic downstream (inter-arrival gaps, idle time, bursts, open-loop replay) is
//! computed on the order actually used.
//!
//! Real traces are not always in order: blkparse merges per-CPU buffers whose clocks and
//! flushes differ slightly, so a request can come a little after a later one. By default
//! the reader holds requests back for a small window of trace time and moves such a
//! request into place ([`TimeOrder::Window`]), counting how many it moved; a request
//! further behind than the window is an error naming its line, since only sorting the
//! whole trace could place it. [`TimeOrder::Sort`] does that: it reads the whole trace
//! into memory and sorts it (stably: equal timestamps keep their file order).

use std::collections::VecDeque;
use std::path::Path;

use crate::error::{LateRequest, TraceError};
use crate::reader::Ring;
use crate::request::Request;

/// The default reorder window: 10 ms, well above the per-CPU skew of blkparse captures
/// (microseconds) and far below the gaps that mean a trace was concatenated or corrupted.
pub const DEFAULT_REORDER_WINDOW_NS: u64 = 10_000_000;

/// How a reader restores time order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeOrder {
    /// Requests up to `ns` behind the latest one read are moved into place; one further
    /// behind is an error. `ns` = 0 accepts only a trace already in order.
    Window { ns: u64 },
    /// The whole trace is read into memory (about 40 bytes a request) and sorted.
    Sort,
}

impl Default for TimeOrder {
    fn default() -> Self {
        TimeOrder::Window {
            ns: DEFAULT_REORDER_WINDOW_NS,
        }
    }
}

/// What restoring time order did, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderStats {
    /// Requests that came after a later one and were moved into place.
    pub moved: u64,
    /// How far behind the latest request read the latest-coming one was.
    pub max_behind_ns: u64,
}

/// The reader's time-order stage: takes each batch the backend decoded and leaves in the
/// ring only the requests that no later one can precede.
pub(crate) struct Reorder {
    order: TimeOrder,
    /// Requests read but not yet handed out, in timestamp order.
    held: VecDeque<Request>,
    /// The latest timestamp read so far.
    latest: Option<u64>,
    /// Requests decoded so far (to number a request in messages).
    decoded: u64,
    stats: OrderStats,
}

impl Reorder {
    pub(crate) fn new(order: TimeOrder) -> Reorder {
        Reorder {
            order,
            held: VecDeque::new(),
            latest: None,
            decoded: 0,
            stats: OrderStats::default(),
        }
    }

    pub(crate) fn order(&self) -> TimeOrder {
        self.order
    }

    pub(crate) fn stats(&self) -> OrderStats {
        self.stats
    }

    /// Takes the batch just decoded into `ring` (with its line numbers, when the backend
    /// gives them) and leaves in it the requests that may be handed out now, in order.
    pub(crate) fn batch(&mut self, ring: &mut Ring, path: &Path) -> Result<(), TraceError> {
        let in_order = self.check(ring, path)?;
        let threshold = match self.order {
            TimeOrder::Window { ns } => self.latest.map_or(0, |l| l.saturating_sub(ns)),
            TimeOrder::Sort => {
                self.held.extend(ring.reqs.drain(..));
                ring.ready();
                return Ok(());
            }
        };
        if self.held.is_empty() && in_order {
            // The usual case: the batch is in order and nothing is held, so the requests
            // that may go out now go straight from the ring, uncopied.
            let go = ring.reqs.partition_point(|r| r.ts_ns <= threshold);
            self.held.extend(ring.reqs.drain(go..));
        } else {
            self.held.extend(ring.reqs.drain(..));
            if !in_order {
                // Mostly sorted runs: the stable sort merges them in about linear time.
                self.held.make_contiguous().sort_by_key(|r| r.ts_ns);
            }
            let go = self.held.partition_point(|r| r.ts_ns <= threshold);
            ring.reqs.extend(self.held.drain(..go));
        }
        ring.ready();
        Ok(())
    }

    /// Counts the requests of the batch that come after a later one, and fails on one
    /// further behind than the window; whether the batch continues the order.
    fn check(&mut self, ring: &Ring, path: &Path) -> Result<bool, TraceError> {
        let mut in_order = true;
        let window_ns = match self.order {
            TimeOrder::Window { ns } => ns,
            TimeOrder::Sort => u64::MAX,
        };
        let mut latest = self.latest.unwrap_or(0);
        for (i, r) in ring.reqs.iter().enumerate() {
            if r.ts_ns >= latest {
                latest = r.ts_ns;
                continue;
            }
            let behind_ns = latest - r.ts_ns;
            if behind_ns > window_ns {
                let late = LateRequest {
                    path: path.to_path_buf(),
                    line: (ring.lines.len() == ring.reqs.len()).then(|| ring.lines[i]),
                    request: self.decoded + i as u64 + 1,
                    ts_ns: r.ts_ns,
                    latest_ns: latest,
                    window_ns,
                };
                return Err(TraceError::Late(Box::new(late)));
            }
            in_order = false;
            self.stats.moved += 1;
            self.stats.max_behind_ns = self.stats.max_behind_ns.max(behind_ns);
        }
        if !ring.reqs.is_empty() {
            self.latest = Some(latest);
        }
        self.decoded += ring.reqs.len() as u64;
        Ok(in_order)
    }

    /// The end of the input: every request held goes out (sorted, under `Sort`).
    /// Whether there were any.
    pub(crate) fn end(&mut self, ring: &mut Ring) -> bool {
        if self.order == TimeOrder::Sort && self.stats.moved > 0 {
            self.held.make_contiguous().sort_by_key(|r| r.ts_ns);
        }
        // Whole, so that a sorted trace is not held twice over.
        ring.reqs = Vec::from(std::mem::take(&mut self.held));
        ring.ready();
        !ring.reqs.is_empty()
    }
}
