//! Per-process access graphs (seed 000 §4.2, seed 001 §3.4.2, seed 002 §3.2).
//!
//! The trace is split into one stream per process, keyed by `(pid, command)` because the
//! command resolves recycled pids (seed 002 §3.2). In each stream a vertex is an extent
//! (start sector, sectors) exactly as requested, and a directed edge `a -> b` counts how
//! many times `b` followed `a` in that process's stream. With a lookahead of `w`, each
//! request is linked from the `w` requests of its process that precede it (1 is the seeds'
//! definition; larger windows catch correlations across an interleaved request).
//!
//! All processes' graphs live in one arena with compact `u32` ids so that memory grows with
//! the distinct (process, extent) pairs and edges, not with the trace length.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use crate::edges::{EdgeCounts, EdgeKey, EdgeList};
use hashbrown::HashTable;
use reblock_trace::{CommandId, Request};
use rustc_hash::{FxBuildHasher, FxHashMap};
use serde::{Deserialize, Serialize};
use std::hash::BuildHasher;

/// A run of 512-byte sectors, `[start_sector, start_sector + sectors)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Extent {
    pub start_sector: u64,
    pub sectors: u32,
}

impl Extent {
    pub fn new(start_sector: u64, sectors: u32) -> Extent {
        Extent {
            start_sector,
            sectors,
        }
    }
    /// One past the last sector.
    pub fn end_sector(&self) -> u64 {
        self.start_sector + u64::from(self.sectors)
    }
}

/// Identity of one process stream: pid (when the trace has one) and interned command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessKey {
    pub pid: Option<u32>,
    pub command: CommandId,
}

impl ProcessKey {
    pub fn of(r: &Request) -> ProcessKey {
        ProcessKey {
            pid: r.pid,
            command: r.command,
        }
    }
}

/// How requests become graph edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphOptions {
    /// Each request gets an edge from each of the `lookahead` preceding requests of the same
    /// process (at least 1; 1 is the seeds' "b followed a").
    pub lookahead: usize,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions { lookahead: 1 }
    }
}

/// One vertex of one process graph: an extent as that process requested it. The
/// extent's fields are laid out flat: 24 bytes where an [`Extent`] field (16 with its
/// padding) made 32, and millions of them are held at 10^7 requests (docs/scale.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessVertex {
    pub start_sector: u64,
    /// Requests of this process for exactly this extent.
    pub hits: u64,
    pub sectors: u32,
    pub process: u32,
}

impl ProcessVertex {
    pub fn new(process: u32, extent: Extent, hits: u64) -> ProcessVertex {
        ProcessVertex {
            start_sector: extent.start_sector,
            hits,
            sectors: extent.sectors,
            process,
        }
    }
    pub fn extent(&self) -> Extent {
        Extent::new(self.start_sector, self.sectors)
    }
}

/// Recent vertices of one process, newest last, at most `lookahead` of them.
#[derive(Clone, Debug, Default)]
struct Recent {
    ids: Vec<u32>,
    next: usize,
}

impl Recent {
    fn push(&mut self, id: u32, cap: usize) {
        if self.ids.len() < cap {
            self.ids.push(id);
        } else {
            self.ids[self.next] = id;
            self.next = (self.next + 1) % cap;
        }
    }
}

/// The process access graphs of a whole trace, built incrementally by [`ProcessGraphs::add`].
#[derive(Clone, Debug, Default)]
pub struct ProcessGraphs {
    options: GraphOptions,
    processes: Vec<ProcessKey>,
    process_ids: FxHashMap<ProcessKey, u32>,
    recent: Vec<Recent>,
    vertices: Vec<ProcessVertex>,
    /// (process, start, sectors) -> vertex id, each key read from `vertices`: 4 bytes a
    /// slot, where a map holding the keys takes 24 (at 2·10^7 requests, millions of
    /// vertices; docs/scale.md).
    vertex_ids: HashTable<u32>,
    /// Times `to` followed `from`: whole requests unless made
    /// [`ProcessGraphs::with_fixed_point`].
    edges: EdgeCounts,
    requests: u64,
    last_process: Option<(ProcessKey, u32)>,
}

impl ProcessGraphs {
    pub fn new(options: GraphOptions) -> ProcessGraphs {
        ProcessGraphs {
            options: GraphOptions {
                lookahead: options.lookahead.max(1),
            },
            ..ProcessGraphs::default()
        }
    }

    /// Graphs whose counts are fixed point (a learning state that decays adds each request
    /// as [`crate::LearningState::UNIT`]): edge counts in 64 bits, where whole requests
    /// take 32 (saturating).
    pub fn with_fixed_point(options: GraphOptions) -> ProcessGraphs {
        ProcessGraphs {
            edges: EdgeCounts::Fixed(Default::default()),
            ..ProcessGraphs::new(options)
        }
    }

    /// Builds the graphs of a whole request stream.
    pub fn build(requests: impl IntoIterator<Item = Request>, options: GraphOptions) -> Self {
        let mut graphs = ProcessGraphs::new(options);
        for r in requests {
            graphs.add(&r);
        }
        // Built whole: the edge counts are only read from now on.
        graphs.edges.shrink_to_fit();
        graphs
    }

    /// Gives back the index from (process, extent) to vertex id, which only adding
    /// requests and [`ProcessGraphs::edge_weight`] read: for graphs about to be merged
    /// into a master graph and dropped (at 10^7 requests it is a hash map of millions).
    pub(crate) fn forget_vertex_index(&mut self) {
        self.vertex_ids = HashTable::new();
    }

    /// Adds one request to its process's graph. Zero-length requests carry no blocks and
    /// are ignored.
    pub fn add(&mut self, r: &Request) {
        self.add_weighted(r, 1);
    }

    /// Adds one request counting `weight` times: its vertex's hits, the edges into it and
    /// [`ProcessGraphs::requests`] all grow by `weight` (the learning state counts in
    /// fixed-point units so that decayed counts keep their fractions).
    pub fn add_weighted(&mut self, r: &Request, weight: u64) {
        if r.sectors == 0 {
            return;
        }
        self.requests += weight;
        let process = self.process_id(ProcessKey::of(r));
        let id = self.vertex_id(process, Extent::new(r.sector, r.sectors));
        self.vertices[id as usize].hits += weight;
        let recent = &mut self.recent[process as usize];
        for &from in &recent.ids {
            self.edges.add(EdgeKey::new(from, id), weight);
        }
        recent.push(id, self.options.lookahead);
    }

    /// The id of `extent`'s vertex in `process`'s graph, a new vertex without hits when
    /// there is none yet.
    fn vertex_id(&mut self, process: u32, extent: Extent) -> u32 {
        let hash = vertex_hash(process, extent);
        let vertices = &mut self.vertices;
        let found = (self.vertex_ids).find(hash, |&id| {
            is_vertex(&vertices[id as usize], process, extent)
        });
        if let Some(&id) = found {
            return id;
        }
        let id = vertices.len() as u32;
        vertices.push(ProcessVertex::new(process, extent, 0));
        (self.vertex_ids).insert_unique(hash, id, |&id| hash_of(&vertices[id as usize]));
        id
    }

    /// The id of `extent`'s vertex in `process`'s graph, if it has one.
    fn find_vertex(&self, process: u32, extent: Extent) -> Option<u32> {
        let hash = vertex_hash(process, extent);
        let found = (self.vertex_ids).find(hash, |&id| {
            is_vertex(&self.vertices[id as usize], process, extent)
        });
        found.copied()
    }

    /// Indexes every vertex; `false` when two are the same (process, extent).
    fn index_vertices(&mut self) -> bool {
        self.vertex_ids = HashTable::with_capacity(self.vertices.len());
        let vertices = &self.vertices;
        for (i, v) in vertices.iter().enumerate() {
            let hash = hash_of(v);
            if (self.vertex_ids)
                .find(hash, |&id| {
                    is_vertex(&vertices[id as usize], v.process, v.extent())
                })
                .is_some()
            {
                return false;
            }
            (self.vertex_ids).insert_unique(hash, i as u32, |&id| hash_of(&vertices[id as usize]));
        }
        true
    }

    fn process_id(&mut self, key: ProcessKey) -> u32 {
        // Requests of one process tend to come in runs: skip the map lookup for them.
        if let Some((last, id)) = self.last_process {
            if last == key {
                return id;
            }
        }
        let next = self.processes.len() as u32;
        let id = *self.process_ids.entry(key).or_insert(next);
        if id == next {
            self.processes.push(key);
            self.recent.push(Recent::default());
        }
        self.last_process = Some((key, id));
        id
    }

    /// Folds the edges counted since the last merge into the sorted counts, so that
    /// reading the edges (several times per master graph) does not sort them again, and
    /// gives back the buffers only adding uses: a learning state's graph is built while
    /// the state is kept (up to half the counts' size again at 10^7 requests).
    pub fn merge_pending(&mut self) {
        self.edges.shrink_to_fit();
    }

    pub fn options(&self) -> GraphOptions {
        self.options
    }
    /// Requests added (zero-length ones excluded).
    pub fn requests(&self) -> u64 {
        self.requests
    }
    pub fn processes(&self) -> &[ProcessKey] {
        &self.processes
    }
    /// Every vertex of every process graph; ids are indices.
    pub fn vertices(&self) -> &[ProcessVertex] {
        &self.vertices
    }
    /// Every edge as (from vertex id, to vertex id, weight), in no particular order.
    pub fn edges(&self) -> impl Iterator<Item = (u32, u32, u64)> + '_ {
        self.edges.iter().map(|(k, w)| (k.from, k.to, w))
    }
    pub fn edge_count(&self) -> usize {
        self.edges.distinct()
    }
    /// Every edge as `(key, weight)`, sorted.
    pub(crate) fn edge_counts(&self) -> impl Iterator<Item = (EdgeKey, u64)> + '_ {
        self.edges.iter()
    }
    /// [`ProcessGraphs::edge_counts`] of graphs not needed afterwards, their buffer taken
    /// over and everything else given back.
    pub(crate) fn into_edge_counts(self) -> EdgeList {
        self.edges.into_list()
    }
    /// Gives back the vertices (and their index), for graphs whose master vertices are
    /// made and whose edges alone are read from now on.
    pub(crate) fn forget_vertices(&mut self) {
        self.vertices = Vec::new();
        self.forget_vertex_index();
    }

    /// Weight of `from -> to` in the graph of process `key`; 0 when absent.
    pub fn edge_weight(&self, key: ProcessKey, from: Extent, to: Extent) -> u64 {
        let Some(&p) = self.process_ids.get(&key) else {
            return 0;
        };
        let id = |e: Extent| self.find_vertex(p, e);
        match (id(from), id(to)) {
            (Some(a), Some(b)) => self.edges.get(EdgeKey::new(a, b)).unwrap_or(0),
            _ => 0,
        }
    }

    /// Scales every count by `keep` (rounding down), then drops the vertices left without
    /// hits and, beyond `max_vertices`, the coldest ones (fewest hits; the newest go first
    /// on a tie); edges touching a dropped vertex go with it. Vertex ids are renumbered.
    pub fn decay(&mut self, keep: f64, max_vertices: usize) {
        self.edges.merge_pending();
        let scale = |w: u64| (w as f64 * keep) as u64;
        for v in &mut self.vertices {
            v.hits = scale(v.hits);
        }
        self.requests = scale(self.requests);
        let mut order: Vec<u32> = (0..self.vertices.len() as u32)
            .filter(|&i| self.vertices[i as usize].hits > 0)
            .collect();
        if order.len() > max_vertices {
            order.sort_unstable_by_key(|&i| (std::cmp::Reverse(self.vertices[i as usize].hits), i));
            order.truncate(max_vertices);
            order.sort_unstable();
        }
        let mut new_id = vec![u32::MAX; self.vertices.len()];
        for (n, &old) in order.iter().enumerate() {
            new_id[old as usize] = n as u32;
        }
        self.vertices = order.iter().map(|&i| self.vertices[i as usize]).collect();
        self.index_vertices();
        let mut edges = self.edges.empty_like();
        for (a, b, w) in self.edges() {
            let (a, b, w) = (new_id[a as usize], new_id[b as usize], scale(w));
            if a != u32::MAX && b != u32::MAX && w > 0 {
                edges.add(EdgeKey::new(a, b), w);
            }
        }
        edges.merge_pending();
        self.edges = edges;
        for r in &mut self.recent {
            r.ids.retain_mut(|id| {
                *id = new_id[*id as usize];
                *id != u32::MAX
            });
            r.next = 0;
        }
    }

    /// Graphs given part by part (a learning state read back from a file): `None` when a
    /// vertex names a process or an edge names a vertex that is not there, or a vertex
    /// repeats. Every process starts without recent requests.
    pub fn from_parts(
        options: GraphOptions,
        processes: Vec<ProcessKey>,
        vertices: Vec<ProcessVertex>,
        edges: &[(u32, u32, u64)],
        requests: u64,
    ) -> Option<ProcessGraphs> {
        let mut g = ProcessGraphs::with_fixed_point(options);
        g.requests = requests;
        for key in processes {
            let before = g.processes.len();
            g.process_id(key);
            if g.processes.len() == before {
                return None;
            }
        }
        g.last_process = None;
        let known = |v: &ProcessVertex| (v.process as usize) < g.processes.len();
        if !vertices.iter().all(|v| known(v) && v.sectors > 0) {
            return None;
        }
        g.vertices = vertices;
        if !g.index_vertices() {
            return None;
        }
        let n = g.vertices.len() as u32;
        for &(a, b, w) in edges {
            if a >= n || b >= n {
                return None;
            }
            g.edges.add(EdgeKey::new(a, b), w);
        }
        g.edges.merge_pending();
        Some(g)
    }

    /// Sum of incoming and of outgoing edge weights of every vertex, indexed by vertex id.
    pub fn in_out_weights(&self) -> (Vec<u64>, Vec<u64>) {
        let mut w_in = vec![0u64; self.vertices.len()];
        let mut w_out = vec![0u64; self.vertices.len()];
        for (a, b, w) in self.edges() {
            w_out[a as usize] += w;
            w_in[b as usize] += w;
        }
        (w_in, w_out)
    }

    /// For each of the `n` vertices, the larger of its incoming and its outgoing edge
    /// weights (what a split vertex's chain edges weigh): one array, the outgoing sums
    /// taken as the sorted edges come, source by source (two arrays were 88 MB more at
    /// 2·10^7 requests). `n` is given: the vertices may be gone already.
    pub(crate) fn in_or_out_weights(&self, n: usize) -> Vec<u64> {
        let mut w = vec![0u64; n];
        for (_, b, c) in self.edges() {
            w[b as usize] += c;
        }
        let mut out: Option<(u32, u64)> = None;
        let settle = |w: &mut Vec<u64>, (a, sum): (u32, u64)| {
            let cell = &mut w[a as usize];
            *cell = (*cell).max(sum);
        };
        for (a, _, c) in self.edges() {
            out = match out {
                Some((from, sum)) if from == a => Some((from, sum + c)),
                Some(done) => {
                    settle(&mut w, done);
                    Some((a, c))
                }
                None => Some((a, c)),
            };
        }
        if let Some(done) = out {
            settle(&mut w, done);
        }
        w
    }
}

/// Process graphs whose vertices and edge counts wait in a file while their memory
/// serves something else (a learning state while its trial's graph is built from it and
/// planned: docs/scale.md "Planning's memory"); [`ParkedGraphs::restore`] reads them back.
#[derive(Debug)]
pub struct ParkedGraphs {
    file: File,
    /// Everything but the vertices, their index and the edge counts (a few bytes per
    /// process).
    shell: ProcessGraphs,
    vertices: usize,
    edges: usize,
}

/// Bytes of one vertex and of one edge count in a [`ParkedGraphs`] file.
const PARKED_VERTEX: usize = 24;
const PARKED_EDGE: usize = 16;

impl ProcessGraphs {
    /// Writes the vertices and edge counts to `file` from its start, and keeps a copy of
    /// the rest: the graphs themselves are left as they are (the caller frees them, for
    /// instance by building a master graph from them).
    pub fn park(&mut self, file: File) -> io::Result<ParkedGraphs> {
        self.edges.merge_pending();
        let mut w = BufWriter::with_capacity(1 << 20, &file);
        for v in &self.vertices {
            w.write_all(&v.start_sector.to_le_bytes())?;
            w.write_all(&v.hits.to_le_bytes())?;
            w.write_all(&v.sectors.to_le_bytes())?;
            w.write_all(&v.process.to_le_bytes())?;
        }
        for (key, weight) in self.edges.iter() {
            w.write_all(&key.from.to_le_bytes())?;
            w.write_all(&key.to.to_le_bytes())?;
            w.write_all(&weight.to_le_bytes())?;
        }
        w.flush()?;
        drop(w);
        let shell = ProcessGraphs {
            options: self.options,
            processes: self.processes.clone(),
            process_ids: self.process_ids.clone(),
            recent: self.recent.clone(),
            requests: self.requests,
            last_process: self.last_process,
            edges: self.edges.empty_like(),
            ..ProcessGraphs::default()
        };
        Ok(ParkedGraphs {
            file,
            shell,
            vertices: self.vertices.len(),
            edges: self.edges.distinct(),
        })
    }
}

impl ParkedGraphs {
    #[cfg(test)]
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// The graphs as they were parked; an error when the file cannot be read back whole.
    pub fn restore(self) -> io::Result<ProcessGraphs> {
        let mut file = self.file;
        file.seek(SeekFrom::Start(0))?;
        let mut r = BufReader::with_capacity(1 << 20, file);
        let mut g = self.shell;
        g.vertices = Vec::with_capacity(self.vertices);
        let mut b = [0u8; PARKED_VERTEX];
        for _ in 0..self.vertices {
            r.read_exact(&mut b)?;
            let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
            let half = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
            g.vertices.push(ProcessVertex {
                start_sector: word(0),
                hits: word(8),
                sectors: half(16),
                process: half(20),
            });
        }
        let mut b = [0u8; PARKED_EDGE];
        let mut failed = None;
        let counts = (0..self.edges).map_while(|_| match r.read_exact(&mut b) {
            Ok(()) => {
                let half = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
                let weight = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
                Some((EdgeKey::new(half(0), half(4)), weight))
            }
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        g.edges = g.edges.like_from(self.edges, counts);
        if let Some(e) = failed {
            return Err(e);
        }
        g.index_vertices();
        Ok(g)
    }
}

fn vertex_hash(process: u32, extent: Extent) -> u64 {
    FxBuildHasher.hash_one((process, extent.start_sector, extent.sectors))
}

fn hash_of(v: &ProcessVertex) -> u64 {
    vertex_hash(v.process, v.extent())
}

fn is_vertex(v: &ProcessVertex, process: u32, extent: Extent) -> bool {
    v.process == process && v.start_sector == extent.start_sector && v.sectors == extent.sectors
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::Op;
    use std::collections::HashMap;

    fn req(pid: u32, command: CommandId, sector: u64) -> Request {
        Request {
            ts_ns: 0,
            pid: Some(pid),
            command,
            device: 0,
            sector,
            sectors: 8,
            op: Op::Read,
        }
    }

    fn key(pid: u32, command: CommandId) -> ProcessKey {
        ProcessKey {
            pid: Some(pid),
            command,
        }
    }

    /// Interleaving does not mix streams: process 1 reads 0 8 0 8, process 2 reads 8 0
    /// between them; a recycled pid with another command is another process.
    #[test]
    fn edges_follow_each_process_stream() {
        let e = |s| Extent::new(s, 8);
        let trace = [
            req(1, 1, 0),
            req(2, 2, 8),
            req(1, 1, 8),
            req(2, 2, 0),
            req(1, 1, 0),
            req(1, 3, 16),
            req(1, 1, 8),
        ];
        let g = ProcessGraphs::build(trace, GraphOptions::default());
        assert_eq!(g.processes().len(), 3);
        assert_eq!(g.requests(), 7);
        assert_eq!(g.edge_weight(key(1, 1), e(0), e(8)), 2);
        assert_eq!(g.edge_weight(key(1, 1), e(8), e(0)), 1);
        assert_eq!(g.edge_weight(key(2, 2), e(8), e(0)), 1);
        assert_eq!(g.edge_weight(key(2, 2), e(0), e(8)), 0);
        assert_eq!(g.edge_weight(key(1, 3), e(16), e(8)), 0);
        assert_eq!(g.edge_count(), 3);
        // Vertices are per process: extent 0 is a vertex of process 1 and of process 2.
        assert_eq!(g.vertices().len(), 5);
    }

    /// Lookahead 2: each request is linked from the two before it in its stream.
    /// Stream 0 8 16 0: 0->8, 0->16, 8->16, 8->0, 16->0.
    #[test]
    fn lookahead_links_the_preceding_window() {
        let e = |s| Extent::new(s, 8);
        let trace = [req(1, 1, 0), req(1, 1, 8), req(1, 1, 16), req(1, 1, 0)];
        let g = ProcessGraphs::build(trace, GraphOptions { lookahead: 2 });
        let k = key(1, 1);
        for (a, b) in [(0, 8), (0, 16), (8, 16), (8, 0), (16, 0)] {
            assert_eq!(g.edge_weight(k, e(a), e(b)), 1, "{a}->{b}");
        }
        assert_eq!(g.edge_count(), 5);
        let (w_in, w_out) = g.in_out_weights();
        assert_eq!((w_in[0], w_out[0]), (2, 2));
    }

    /// Process graphs as a plain hash map would count them, keyed by process and extents.
    type Plain = (
        HashMap<(ProcessKey, Extent), u64>,
        HashMap<(ProcessKey, Extent, Extent), u64>,
    );

    fn plain(trace: &[Request], lookahead: usize) -> Plain {
        let (mut vertices, mut edges) = Plain::default();
        let mut recent: HashMap<ProcessKey, Vec<Extent>> = HashMap::new();
        for r in trace.iter().filter(|r| r.sectors > 0) {
            let (k, e) = (ProcessKey::of(r), Extent::new(r.sector, r.sectors));
            *vertices.entry((k, e)).or_default() += 1;
            let window = recent.entry(k).or_default();
            for &from in window.iter() {
                *edges.entry((k, from, e)).or_default() += 1;
            }
            window.push(e);
            if window.len() > lookahead {
                window.remove(0);
            }
        }
        (vertices, edges)
    }

    fn actual(g: &ProcessGraphs) -> Plain {
        let key = |v: &ProcessVertex| (g.processes()[v.process as usize], v.extent());
        let vertices = g.vertices().iter().map(|v| (key(v), v.hits)).collect();
        let edges = g
            .edges()
            .map(|(a, b, w)| {
                let (va, vb) = (&g.vertices()[a as usize], &g.vertices()[b as usize]);
                assert_eq!(va.process, vb.process, "edge across processes");
                ((key(va).0, va.extent(), vb.extent()), w)
            })
            .collect();
        (vertices, edges)
    }

    fn random_trace(seed: u64, len: usize, extents: u64) -> Vec<Request> {
        let mut x = seed;
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        (0..len)
            .map(|_| {
                let mut r = req(next(4) as u32, next(2) as CommandId, next(extents) * 4);
                r.sectors = next(3) as u32 * 4; // some zero-length requests too
                r
            })
            .collect()
    }

    /// Batched edge counting gives the same graphs as a hash map, whether the batches
    /// merge often, never, or were left pending (built by `add` without `build`).
    #[test]
    fn batched_counts_match_a_plain_hash_map() {
        for seed in 0..20 {
            let lookahead = 1 + seed as usize % 3;
            let options = GraphOptions { lookahead };
            let trace = random_trace(seed, 3000, 40);
            let want = plain(&trace, lookahead);
            for batch in [1, 7, 1000, 1 << 20] {
                let mut g = ProcessGraphs::new(options);
                g.edges = g.edges.with_min_batch(batch);
                for r in &trace {
                    g.add(r);
                }
                assert_eq!(actual(&g), want, "seed {seed} batch {batch}");
                assert_eq!(g.edge_count(), want.1.len());
                let (k, a, b) = *want.1.keys().next().unwrap();
                assert_eq!(g.edge_weight(k, a, b), want.1[&(k, a, b)]);
            }
        }
        // Long enough to cross the default batch several times.
        let trace = random_trace(99, 150_000, 5000);
        let g = ProcessGraphs::build(trace.iter().copied(), GraphOptions::default());
        assert_eq!(actual(&g), plain(&trace, 1));
    }

    /// Parts read back are indexed again: a repeated vertex is refused, the others found.
    #[test]
    fn parts_are_indexed_and_a_repeated_vertex_refused() {
        let (k, e) = (key(1, 1), Extent::new(0, 8));
        let v = ProcessVertex::new(0, e, 1);
        let parts = |vs: Vec<ProcessVertex>| {
            ProcessGraphs::from_parts(GraphOptions::default(), vec![k], vs, &[(0, 0, 3)], 1)
        };
        assert!(parts(vec![v, v]).is_none());
        assert_eq!(parts(vec![v]).unwrap().edge_weight(k, e, e), 3);
    }

    /// Millions of vertices are held at 10^7 requests: 24 bytes each (docs/scale.md).
    #[test]
    fn a_process_vertex_takes_24_bytes() {
        assert_eq!(std::mem::size_of::<ProcessVertex>(), 24);
        let v = ProcessVertex::new(3, Extent::new(1 << 40, 9), 5);
        assert_eq!(
            (v.process, v.extent(), v.hits),
            (3, Extent::new(1 << 40, 9), 5)
        );
    }

    #[test]
    fn zero_length_requests_are_ignored() {
        let mut r = req(1, 1, 0);
        r.sectors = 0;
        let g = ProcessGraphs::build([r, req(1, 1, 8)], GraphOptions::default());
        assert_eq!(g.requests(), 1);
        assert_eq!(g.edge_count(), 0);
    }
}
