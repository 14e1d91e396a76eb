//! What replay consumes: a stream of submissions, pulled one at a time so that memory
//! does not grow with the trace.

use reblock_device::DevRequest;
use reblock_trace::TraceReader;

use crate::error::SimError;
use crate::metrics::Phase;

/// One request offered to the simulated storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submission {
    /// Number in the input, from 1, for messages and per-request output.
    pub number: u64,
    /// Trace timestamp (open loop divides it by the speed-up).
    pub ts_ns: u64,
    pub req: DevRequest,
    /// Device number in the trace (reported, not used for routing).
    pub device: u32,
    pub phase: Phase,
    /// Already physical (e.g. reconfiguration copies): bypasses the [`Mapper`].
    ///
    /// [`Mapper`]: crate::mapper::Mapper
    pub physical: bool,
}

/// A stream of submissions in (roughly) timestamp order.
pub trait Source {
    fn next_submission(&mut self) -> Result<Option<Submission>, SimError>;
}

/// A trace file's requests as normal-phase logical submissions.
pub struct TraceSource {
    reader: TraceReader,
}

impl TraceSource {
    pub fn new(reader: TraceReader) -> TraceSource {
        TraceSource { reader }
    }
    pub fn reader(&self) -> &TraceReader {
        &self.reader
    }
}

impl Source for TraceSource {
    fn next_submission(&mut self) -> Result<Option<Submission>, SimError> {
        let Some(r) = self.reader.next_request()? else {
            return Ok(None);
        };
        Ok(Some(Submission {
            number: self.reader.requests_read(),
            ts_ns: r.ts_ns,
            req: DevRequest {
                sector: r.sector,
                sectors: r.sectors,
                write: r.op.is_write(),
            },
            device: r.device,
            phase: Phase::Normal,
            physical: false,
        }))
    }
}

/// Any iterator of submissions (tests, generated workloads, injected I/O).
pub struct IterSource<I>(pub I);

impl<I: Iterator<Item = Submission>> Source for IterSource<I> {
    fn next_submission(&mut self) -> Result<Option<Submission>, SimError> {
        Ok(self.0.next())
    }
}

/// Two sources merged by timestamp: the workload plus injected I/O (reconfiguration
/// copies), so that the copies compete with the workload for the devices.
pub struct Interleave<A, B> {
    a: A,
    b: B,
    next_a: Option<Submission>,
    next_b: Option<Submission>,
    primed: bool,
}

impl<A: Source, B: Source> Interleave<A, B> {
    pub fn new(a: A, b: B) -> Self {
        Interleave {
            a,
            b,
            next_a: None,
            next_b: None,
            primed: false,
        }
    }
}

impl<A: Source, B: Source> Source for Interleave<A, B> {
    fn next_submission(&mut self) -> Result<Option<Submission>, SimError> {
        if !self.primed {
            self.next_a = self.a.next_submission()?;
            self.next_b = self.b.next_submission()?;
            self.primed = true;
        }
        let take_a = match (&self.next_a, &self.next_b) {
            (Some(a), Some(b)) => a.ts_ns <= b.ts_ns,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return Ok(None),
        };
        Ok(if take_a {
            std::mem::replace(&mut self.next_a, self.a.next_submission()?)
        } else {
            std::mem::replace(&mut self.next_b, self.b.next_submission()?)
        })
    }
}

/// Refuses a trace that addresses more than one device (`devices`: its device column,
/// request by request): what lays out a single device (evaluate, plan) must not merge
/// several silently.
pub fn require_single_device(devices: impl IntoIterator<Item = u32>) -> Result<(), SimError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut order = Vec::new();
    for d in devices {
        if seen.insert(d) {
            order.push(d);
        }
    }
    match order[..] {
        [first, other, ..] => Err(SimError::SeveralDevices {
            count: seen.len(),
            first,
            other,
        }),
        _ => Ok(()),
    }
}
