//! What planning has learnt, kept across epochs: the per-process access graphs of every
//! request seen, each epoch's counts (vertex hits and edge weights) multiplied by a decay
//! factor before the next epoch's requests are added, and bounded in size by dropping
//! the coldest vertices. `evaluate` (at each phase boundary) and `serve` (at each re-plan,
//! and across restarts through [`LearningState::to_bytes`]) feed the same type; planners
//! read its master graph ([`LearningState::graph`]).
//!
//! A decay of 1 keeps every count (the whole history, as `evaluate --training
//! cumulative`); 0 forgets each epoch (only the requests since the last plan). Counts are
//! kept in fixed point ([`LearningState::UNIT`] per request), so that a transition seen
//! once fades over several epochs instead of vanishing at the first rounding.

use std::borrow::Borrow;

use std::fs::File;
use std::io;

use crate::graph::{Extent, GraphOptions, ParkedGraphs, ProcessGraphs, ProcessKey, ProcessVertex};
use crate::master::MasterGraph;
use reblock_layout::{SealError, SealKind};
use reblock_trace::Request;

/// Decayed access graphs learnt over epochs (see the module doc).
#[derive(Clone, Debug)]
pub struct LearningState {
    graphs: ProcessGraphs,
    decay: f64,
    max_vertices: usize,
    epochs: u64,
    /// What one request counts for: [`LearningState::UNIT`], or 1 in a state of whole
    /// requests ([`LearningState::whole`]).
    unit: u64,
}

/// A learning state written to a file (see [`LearningState::park`]).
#[derive(Debug)]
pub struct ParkedState {
    graphs: ParkedGraphs,
    decay: f64,
    max_vertices: usize,
    epochs: u64,
    unit: u64,
}

impl ParkedState {
    /// The state as it was parked; an error when its file cannot be read back whole.
    pub fn restore(self) -> io::Result<LearningState> {
        Ok(LearningState {
            graphs: self.graphs.restore()?,
            decay: self.decay,
            max_vertices: self.max_vertices,
            epochs: self.epochs,
            unit: self.unit,
        })
    }
}

/// Why a learning state cannot be made or read back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LearningError {
    #[error("learning decay {0}: must be within 0 (forget each epoch) and 1 (keep everything)")]
    Decay(f64),
    #[error(transparent)]
    Sealed(#[from] SealError),
    #[error("learning state is inconsistent: {0}")]
    Inconsistent(&'static str),
    #[error("a learning state of whole requests keeps them all: it cannot decay by {0}")]
    WholeDecay(f64),
}

/// How the learning state is sealed in its file.
const SEALED: SealKind = SealKind {
    magic: b"RBLEARN\0",
    version: 1,
    what: "learning state",
};

impl LearningState {
    /// Fixed-point units one request counts for.
    pub const UNIT: u64 = 1 << 16;
    /// Default bound on the vertices kept (about 40 MiB of state at most).
    pub const DEFAULT_MAX_VERTICES: usize = 1 << 20;

    /// An empty state that multiplies its counts by `decay` at each new epoch.
    pub fn new(decay: f64, max_vertices: usize) -> Result<LearningState, LearningError> {
        if !(0.0..=1.0).contains(&decay) {
            return Err(LearningError::Decay(decay));
        }
        Ok(LearningState {
            graphs: ProcessGraphs::with_fixed_point(GraphOptions::default()),
            decay,
            max_vertices: max_vertices.max(1),
            epochs: 0,
            unit: Self::UNIT,
        })
    }

    /// A state that never decays and keeps every vertex, counting whole requests: its
    /// graph is the graph of what it learnt built afresh, and an edge's count takes 32
    /// bits where fixed point takes 64 (12 bytes an edge instead of 16; at 2·10^7
    /// requests, 1.4·10^7 edges).
    pub fn whole() -> LearningState {
        LearningState {
            graphs: ProcessGraphs::new(GraphOptions::default()),
            decay: 1.0,
            max_vertices: usize::MAX,
            epochs: 0,
            unit: 1,
        }
    }

    pub fn decay(&self) -> f64 {
        self.decay
    }
    /// Decays by `decay` from the next epoch on (a state read back under a new setting).
    pub fn set_decay(&mut self, decay: f64) -> Result<(), LearningError> {
        if !(0.0..=1.0).contains(&decay) {
            return Err(LearningError::Decay(decay));
        }
        if self.unit == 1 && decay != 1.0 {
            return Err(LearningError::WholeDecay(decay));
        }
        self.decay = decay;
        Ok(())
    }
    /// Epochs ended so far (each [`LearningState::next_epoch`]).
    pub fn epochs(&self) -> u64 {
        self.epochs
    }
    /// Requests learnt, as decayed counts (rounded).
    pub fn requests(&self) -> u64 {
        self.graphs.requests().div_ceil(self.unit)
    }
    /// Distinct (process, extent) vertices held.
    pub fn vertices(&self) -> usize {
        self.graphs.vertices().len()
    }
    pub fn is_empty(&self) -> bool {
        self.graphs.vertices().is_empty()
    }

    /// Adds requests to the current epoch.
    pub fn learn<R: Borrow<Request>>(&mut self, requests: impl IntoIterator<Item = R>) {
        for r in requests {
            self.graphs.add_weighted(r.borrow(), self.unit);
        }
        // Unmerged edges would be copied and sorted at every read of the graph.
        self.graphs.merge_pending();
    }

    /// Ends the current epoch: every count so far is multiplied by the decay, and the
    /// coldest vertices beyond the bound are dropped.
    pub fn next_epoch(&mut self) {
        self.graphs.decay(self.decay, self.max_vertices);
        self.epochs += 1;
    }

    /// The master access graph of what was learnt, counts in requests (rounded), as the
    /// planners read it.
    pub fn graph(&self) -> MasterGraph {
        MasterGraph::from_processes_scaled(&self.graphs, self.unit)
    }

    /// [`LearningState::graph`] of a state not needed afterwards: built from its own
    /// buffers, each given back as soon as it is read (see
    /// [`MasterGraph::from_processes_into`]).
    pub fn into_graph(self) -> MasterGraph {
        MasterGraph::from_processes_into(self.graphs, self.unit)
    }

    /// Writes the state to `file` (an unnamed temporary file) so that it can be freed,
    /// typically by [`LearningState::into_graph`], and read back later by
    /// [`ParkedState::restore`]: a plan's trial is built and planned without the state
    /// it will learn on from beside it (docs/scale.md "Planning's memory"). The state is
    /// left as it is, whether or not the file was written.
    pub fn park(&mut self, file: File) -> io::Result<ParkedState> {
        Ok(ParkedState {
            graphs: self.graphs.park(file)?,
            decay: self.decay,
            max_vertices: self.max_vertices,
            epochs: self.epochs,
            unit: self.unit,
        })
    }

    /// The master graph of what was learnt plus `more` requests of the current epoch,
    /// leaving this state as it is (a plan, or the trial of a plan made without its last
    /// requests).
    pub fn graph_with<R: Borrow<Request>>(&self, more: impl IntoIterator<Item = R>) -> MasterGraph {
        let mut s = self.clone();
        s.learn(more);
        s.into_graph()
    }

    /// Distinct pages of `page_sectors` sectors that `graph` (this state's) covers.
    pub fn pages_of(graph: &MasterGraph, page_sectors: u64) -> u64 {
        let mut next_free = 0;
        let mut pages = 0;
        for v in graph.vertices() {
            let first = (v.extent.start_sector / page_sectors).max(next_free);
            let end = v.extent.end_sector().div_ceil(page_sectors);
            pages += end.saturating_sub(first);
            next_free = next_free.max(end);
        }
        pages
    }

    /// The state as bytes: a header (magic, format version, payload length, CRC-32C of
    /// the payload) and the payload, so that a torn or stale file is detected on reading.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A state of whole requests is written in fixed point, as every state is.
        let fixed = |n: u64| n.saturating_mul(Self::UNIT / self.unit);
        let mut p = Vec::new();
        p.extend_from_slice(&self.decay.to_le_bytes());
        p.extend_from_slice(&self.epochs.to_le_bytes());
        p.extend_from_slice(&fixed(self.graphs.requests()).to_le_bytes());
        p.extend_from_slice(&(self.max_vertices as u64).to_le_bytes());
        p.extend_from_slice(&(self.graphs.options().lookahead as u32).to_le_bytes());
        let processes = self.graphs.processes();
        p.extend_from_slice(&(processes.len() as u64).to_le_bytes());
        for k in processes {
            p.push(u8::from(k.pid.is_some()));
            p.extend_from_slice(&k.pid.unwrap_or(0).to_le_bytes());
            p.extend_from_slice(&k.command.to_le_bytes());
        }
        let vertices = self.graphs.vertices();
        p.extend_from_slice(&(vertices.len() as u64).to_le_bytes());
        for v in vertices {
            p.extend_from_slice(&v.process.to_le_bytes());
            p.extend_from_slice(&v.start_sector.to_le_bytes());
            p.extend_from_slice(&v.sectors.to_le_bytes());
            p.extend_from_slice(&fixed(v.hits).to_le_bytes());
        }
        p.extend_from_slice(&(self.graphs.edge_count() as u64).to_le_bytes());
        for (a, b, w) in self.graphs.edges() {
            p.extend_from_slice(&a.to_le_bytes());
            p.extend_from_slice(&b.to_le_bytes());
            p.extend_from_slice(&fixed(w).to_le_bytes());
        }
        SEALED.seal(&p)
    }

    /// Reads back [`LearningState::to_bytes`]; anything torn, corrupted, of another
    /// format version or inconsistent is an error, never a partial state.
    pub fn from_bytes(bytes: &[u8]) -> Result<LearningState, LearningError> {
        let payload = SEALED.unseal(bytes)?;
        decode_payload(&mut Reader(payload)).ok_or(LearningError::Inconsistent("short payload"))?
    }
}

/// The payload after the header; `None` when it ends early.
fn decode_payload(r: &mut Reader) -> Option<Result<LearningState, LearningError>> {
    let decay = f64::from_le_bytes(r.take(8)?.try_into().ok()?);
    let (epochs, requests, max_vertices) = (r.u64()?, r.u64()?, r.u64()?);
    let lookahead = r.u32()? as usize;
    let processes = (0..r.count(9)?)
        .map(|_| {
            let has_pid = r.take(1)?[0] != 0;
            let pid = r.u32()?;
            Some(ProcessKey {
                pid: has_pid.then_some(pid),
                command: r.u32()?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let vertices = (0..r.count(24)?)
        .map(|_| {
            let process = r.u32()?;
            let extent = Extent::new(r.u64()?, r.u32()?);
            Some(ProcessVertex::new(process, extent, r.u64()?))
        })
        .collect::<Option<Vec<_>>>()?;
    let edges = (0..r.count(16)?)
        .map(|_| Some((r.u32()?, r.u32()?, r.u64()?)))
        .collect::<Option<Vec<_>>>()?;
    if !r.0.is_empty() {
        return Some(Err(LearningError::Inconsistent("bytes after the edges")));
    }
    let options = GraphOptions { lookahead };
    let Some(graphs) = ProcessGraphs::from_parts(options, processes, vertices, &edges, requests)
    else {
        return Some(Err(LearningError::Inconsistent("an id out of range")));
    };
    let mut state = match LearningState::new(decay, max_vertices as usize) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    state.graphs = graphs;
    state.epochs = epochs;
    Some(Ok(state))
}

/// Little-endian fields read front to back.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// An element count, refused when the bytes left cannot hold that many `size`-byte
    /// elements (a corrupted count must not allocate without bound).
    fn count(&mut self, size: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n <= self.0.len() / size).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build_graphs;
    use reblock_trace::Op;

    fn req(pid: u32, sector: u64) -> Request {
        Request {
            ts_ns: 0,
            pid: Some(pid),
            command: 0,
            device: 0,
            sector,
            sectors: 8,
            op: Op::Read,
        }
    }

    fn day(shift: u64) -> Vec<Request> {
        (0..40)
            .map(|i| req(1 + i as u32 % 2, shift + (i % 10) * 64))
            .collect()
    }

    /// Vertices as (start, sectors, hits) and edges as (from, to, weight).
    type Summary = (Vec<(u64, u32, u64)>, Vec<(u32, u32, u64)>);

    fn summary(g: &MasterGraph) -> Summary {
        let v = g
            .vertices()
            .iter()
            .map(|v| (v.extent.start_sector, v.extent.sectors, v.hits));
        (v.collect(), g.edges().collect())
    }

    #[test]
    fn keeping_everything_equals_the_graph_of_the_whole_history() {
        let (a, b) = (day(0), day(32));
        let mut s = LearningState::new(1.0, 1 << 20).unwrap();
        s.learn(&a);
        s.next_epoch();
        s.learn(&b);
        let whole = build_graphs(a.iter().chain(&b).copied());
        assert_eq!(summary(&s.graph()), summary(&whole));
        assert_eq!(s.requests(), 80);
    }

    #[test]
    fn forgetting_each_epoch_equals_the_graph_of_the_last_epoch() {
        let (a, b) = (day(0), day(32));
        let mut s = LearningState::new(0.0, 1 << 20).unwrap();
        s.learn(&a);
        s.next_epoch();
        s.learn(&b);
        assert_eq!(
            summary(&s.graph()),
            summary(&build_graphs(b.iter().copied()))
        );
    }

    #[test]
    fn decayed_counts_fade_and_the_coldest_vertices_go_first() {
        let mut s = LearningState::new(0.5, 1 << 20).unwrap();
        s.learn([req(1, 0), req(1, 64), req(1, 0), req(1, 64)]);
        s.next_epoch();
        // Hits 2 -> 1 after one epoch; edge 0->64 (2) -> 1, 64->0 (1) -> 0.5 rounds to 1.
        let g = s.graph();
        assert_eq!(
            g.vertices().iter().map(|v| v.hits).collect::<Vec<_>>(),
            vec![1, 1]
        );
        for _ in 0..3 {
            s.next_epoch();
        }
        // 2/16 of a request rounds to nothing: gone from the planners' graph, still held.
        assert!(s.graph().is_empty());
        assert_eq!(s.vertices(), 2);
        let mut small = LearningState::new(1.0, 2).unwrap();
        small.learn([req(1, 0), req(1, 64), req(1, 128), req(1, 128), req(1, 64)]);
        small.next_epoch();
        let g = small.graph();
        let kept: Vec<u64> = g.vertices().iter().map(|v| v.extent.start_sector).collect();
        assert_eq!(kept, vec![64, 128], "the vertex hit once was evicted");
        assert_eq!(g.edge_weight(1, 0), 1, "128 -> 64 kept");
    }

    /// The planners' graph, built from the state or from its own buffers, is the graph
    /// of the fixed-point counts with every count rounded to whole requests by hand:
    /// vertices rounded to no hits dropped with their edges, the others renumbered.
    #[test]
    fn scaled_graphs_are_the_fixed_point_graph_rounded() {
        for decay in [1.0, 0.5, 0.3] {
            let mut s = LearningState::new(decay, 1 << 20).unwrap();
            s.learn(day(0));
            s.next_epoch();
            s.learn(day(24));
            let fixed = MasterGraph::from_processes(&s.graphs);
            let unit = LearningState::UNIT;
            let round = |w: u64| (w + unit / 2) / unit;
            let mut new_id = vec![None; fixed.len()];
            let mut vertices = Vec::new();
            for (i, v) in fixed.vertices().iter().enumerate() {
                if round(v.hits) > 0 {
                    new_id[i] = Some(vertices.len() as u32);
                    vertices.push((v.extent.start_sector, v.extent.sectors, round(v.hits)));
                }
            }
            let edges = fixed.edges().filter_map(|(a, b, w)| {
                let (a, b) = (new_id[a as usize]?, new_id[b as usize]?);
                (round(w) > 0).then_some((a, b, round(w)))
            });
            let want = (vertices, edges.collect());
            assert_eq!(summary(&s.graph()), want, "decay {decay}");
            assert_eq!(s.graph().requests(), round(s.graphs.requests()));
            assert_eq!(summary(&s.clone().into_graph()), want, "decay {decay}");
        }
    }

    /// A state parked in a file and freed (its graph built from its memory) reads back
    /// as it was: the same graphs, and it learns on to the same graphs as a state never
    /// parked, with and without decay, over random requests of several processes.
    #[test]
    fn a_parked_state_reads_back_as_it_was() {
        let mut x = 7u64;
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let mut random = |len| -> Vec<Request> {
            (0..len)
                .map(|_| {
                    let mut r = req(1 + next(5) as u32, next(300) * 8);
                    r.sectors = 8 * (1 + next(3) as u32);
                    r
                })
                .collect()
        };
        for (decay, bound) in [(1.0, usize::MAX), (0.5, 1 << 20), (0.7, 200), (1.0, 0)] {
            let (a, b) = (random(2000), random(500));
            // Bound 0 here: the state of whole requests.
            let mut s = match bound {
                0 => LearningState::whole(),
                _ => LearningState::new(decay, bound).unwrap(),
            };
            s.learn(&a);
            s.next_epoch();
            s.learn(&a[..700]);
            let mut kept = s.clone();
            let parked = s.park(tempfile::tempfile().unwrap()).unwrap();
            let freed = s.into_graph();
            let mut back = parked.restore().unwrap();
            assert_eq!(summary(&freed), summary(&kept.graph()), "decay {decay}");
            assert_eq!(summary(&back.graph()), summary(&kept.graph()));
            assert_eq!(back.to_bytes(), kept.to_bytes());
            back.learn(&b);
            kept.learn(&b);
            back.next_epoch();
            kept.next_epoch();
            assert_eq!(summary(&back.graph()), summary(&kept.graph()));
        }
        let mut s = LearningState::new(1.0, 10).unwrap();
        s.learn(day(0));
        let readonly = std::fs::File::open("/dev/null").unwrap();
        assert!(s.park(readonly).is_err(), "an unwritable file is an error");
        let damaged = s.park(tempfile::tempfile().unwrap()).unwrap();
        damaged.graphs.file().set_len(10).unwrap();
        assert!(damaged.restore().is_err(), "a short file is an error");
    }

    /// A state of whole requests gives the graphs a fixed-point state that never decays
    /// gives, and is written as one.
    #[test]
    fn whole_requests_learn_what_fixed_point_learns() {
        let mut whole = LearningState::whole();
        let mut fixed = LearningState::new(1.0, usize::MAX).unwrap();
        for s in [&mut whole, &mut fixed] {
            s.learn(day(0));
            s.next_epoch();
            s.learn(day(16));
        }
        assert_eq!(summary(&whole.graph()), summary(&fixed.graph()));
        assert_eq!(whole.requests(), fixed.requests());
        assert_eq!(whole.to_bytes(), fixed.to_bytes());
        let back = LearningState::from_bytes(&whole.to_bytes()).unwrap();
        assert_eq!(summary(&back.graph()), summary(&whole.clone().into_graph()));
        assert_eq!(
            whole.set_decay(0.5).unwrap_err(),
            LearningError::WholeDecay(0.5)
        );
        assert!(whole.set_decay(1.0).is_ok());
    }

    #[test]
    fn bytes_round_trip_and_damage_is_detected() {
        let mut s = LearningState::new(0.75, 1000).unwrap();
        s.learn(day(0));
        s.next_epoch();
        s.learn(day(8));
        let bytes = s.to_bytes();
        let back = LearningState::from_bytes(&bytes).unwrap();
        assert_eq!(summary(&back.graph()), summary(&s.graph()));
        assert_eq!((back.decay(), back.epochs()), (0.75, 1));
        for damaged in [
            &bytes[..bytes.len() - 3],
            b"garbage, not a state file".as_slice(),
        ] {
            let e = LearningState::from_bytes(damaged).unwrap_err();
            assert!(matches!(e, LearningError::Sealed(_)), "{e}");
        }
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let e = LearningState::from_bytes(&flipped).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        assert_eq!(
            LearningState::new(1.5, 1).unwrap_err(),
            LearningError::Decay(1.5)
        );
    }
}
