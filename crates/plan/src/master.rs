//! The master access graph: all process graphs merged, with range splitting so that every
//! sector is in at most one vertex (seed 000 §4.2, seed 001 §3.4.2 Algorithm 4, seed 002
//! §3.2).
//!
//! The seeds illustrate the split with a pairwise O(n²) loop and note that keeping vertices
//! sorted by start LBA makes it cheaper. We do the sorted version outright: the boundaries
//! (start and end) of every process vertex are sorted once, and the covered intervals
//! between consecutive boundaries are the master vertices. Splitting every overlapping pair
//! until no two vertices overlap yields exactly these elementary intervals, so the result
//! is the same as Algorithm 4's; the cost is O(n log n + m log m).
//!
//! Edges follow Algorithm 4 lines 7-9 (seed 002 §3.2 steps 2-7): a process vertex `x`
//! split into pieces `x1 .. xk` (in LBA order) keeps its incoming edges on `x1` (same
//! starting LBN), its outgoing edges on `xk` (same ending LBN), and gains the chain
//! `x1 -> x2 -> .. -> xk` whose every edge weighs `max(incoming, outgoing)` of `x`. Edges
//! that land on the same master pair, from any process, add up. Chain edges always join
//! neighbouring elementary intervals, so they are summed with a difference array rather
//! than walked piece by piece.

use crate::graph::{Extent, GraphOptions, ProcessGraphs};
use reblock_trace::Request;

/// One vertex of the master graph: a run of sectors no other vertex shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vertex {
    pub extent: Extent,
    /// Requests (of any process) that covered this run; every sector of it was covered by
    /// exactly this many requests.
    pub hits: u64,
}

/// Vertex ids are indices into [`MasterGraph::vertices`], which is sorted by start sector.
pub type VertexId = u32;

/// Directed, weighted graph with both adjacency directions in compressed rows.
#[derive(Clone, Debug, Default)]
pub struct MasterGraph {
    vertices: Vec<Vertex>,
    out_offsets: Vec<u32>,
    out_edges: Vec<(VertexId, u64)>,
    in_offsets: Vec<u32>,
    in_edges: Vec<(VertexId, u64)>,
    requests: u64,
    processes: usize,
}

/// Builds the per-process graphs of a request stream (seed definition: lookahead 1) and
/// merges them into the master graph.
pub fn build_graphs(requests: impl IntoIterator<Item = Request>) -> MasterGraph {
    let mut pg = ProcessGraphs::build(requests, GraphOptions::default());
    pg.forget_vertex_index();
    let (vertices, edges) = master_parts(&pg);
    let (requests, processes) = (pg.requests(), pg.processes().len());
    // The process graphs' edge counts go before the rows are built: at 10^7 training
    // requests they are hundreds of megabytes, as large as the graph itself.
    drop(pg);
    MasterGraph {
        requests,
        processes,
        ..MasterGraph::from_edges(vertices, edges)
    }
}

/// The master vertices and the edges between them (Algorithm 4, see the module comment),
/// duplicates not yet summed.
#[allow(clippy::type_complexity)]
fn master_parts(pg: &ProcessGraphs) -> (Vec<Vertex>, Vec<(VertexId, VertexId, u64)>) {
    let bounds = boundaries(pg);
    let pieces = piece_spans(pg, &bounds);
    let (ids, vertices) = elementary_vertices(pg, &bounds, &pieces);
    let mut edges = chain_edges(pg, &pieces, &ids);
    edges.reserve(pg.edge_count());
    for (a, b, w) in pg.edges() {
        let src = ids[pieces[a as usize].1 as usize - 1];
        let dst = ids[pieces[b as usize].0 as usize];
        edges.push((src, dst, w));
    }
    (vertices, edges)
}

impl MasterGraph {
    /// Merges process graphs with range splitting (see the module comment).
    pub fn from_processes(pg: &ProcessGraphs) -> MasterGraph {
        let (vertices, edges) = master_parts(pg);
        let mut g = MasterGraph::from_edges(vertices, edges);
        g.requests = pg.requests();
        g.processes = pg.processes().len();
        g
    }

    /// A master graph given directly: vertices must be sorted by start and disjoint; edges
    /// as (from, to, weight), duplicates summed. Used for hand-made graphs (the seeds'
    /// figures) and by [`MasterGraph::from_processes`].
    pub fn from_edges(vertices: Vec<Vertex>, mut edges: Vec<(VertexId, VertexId, u64)>) -> Self {
        debug_assert!(vertices
            .windows(2)
            .all(|w| w[0].extent.end_sector() <= w[1].extent.start_sector));
        edges.retain(|e| e.2 > 0);
        edges.sort_unstable_by_key(|e| (e.0, e.1));
        edges.dedup_by(|next, kept| {
            let same = next.0 == kept.0 && next.1 == kept.1;
            if same {
                kept.2 += next.2;
            }
            same
        });
        let n = vertices.len();
        let (out_offsets, out_edges) = compress(n, edges.iter().map(|e| (e.0, e.1, e.2)));
        // The triples go before the transposed rows are made from the rows: one copy of
        // the edges less at the peak. Read row by row, the rows give the same triples
        // in the same order.
        drop(edges);
        let rows = (0..n).flat_map(|v| {
            let row = &out_edges[out_offsets[v] as usize..out_offsets[v + 1] as usize];
            row.iter().map(move |&(to, w)| (to, v as VertexId, w))
        });
        let (in_offsets, in_edges) = compress(n, rows);
        MasterGraph {
            vertices,
            out_offsets,
            out_edges,
            in_offsets,
            in_edges,
            requests: 0,
            processes: 0,
        }
    }

    pub fn vertices(&self) -> &[Vertex] {
        &self.vertices
    }
    pub fn vertex(&self, v: VertexId) -> &Vertex {
        &self.vertices[v as usize]
    }
    pub fn len(&self) -> usize {
        self.vertices.len()
    }
    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }
    pub fn edge_count(&self) -> usize {
        self.out_edges.len()
    }
    /// Requests the graph was built from (0 for a graph given by [`MasterGraph::from_edges`]).
    pub fn requests(&self) -> u64 {
        self.requests
    }
    /// Distinct (pid, command) streams merged into this graph.
    pub fn processes(&self) -> usize {
        self.processes
    }
    /// `(to, weight)` of every edge leaving `v`, sorted by `to`.
    pub fn out_edges(&self, v: VertexId) -> &[(VertexId, u64)] {
        let v = v as usize;
        &self.out_edges[self.out_offsets[v] as usize..self.out_offsets[v + 1] as usize]
    }
    /// `(from, weight)` of every edge entering `v`, sorted by `from`.
    pub fn in_edges(&self, v: VertexId) -> &[(VertexId, u64)] {
        let v = v as usize;
        &self.in_edges[self.in_offsets[v] as usize..self.in_offsets[v + 1] as usize]
    }
    /// Weight of `from -> to`, 0 when absent.
    pub fn edge_weight(&self, from: VertexId, to: VertexId) -> u64 {
        let out = self.out_edges(from);
        match out.binary_search_by_key(&to, |e| e.0) {
            Ok(i) => out[i].1,
            Err(_) => 0,
        }
    }
    /// Every edge as (from, to, weight), sorted.
    pub fn edges(&self) -> impl Iterator<Item = (VertexId, VertexId, u64)> + '_ {
        (0..self.len() as VertexId)
            .flat_map(move |v| self.out_edges(v).iter().map(move |&(t, w)| (v, t, w)))
    }
    /// The seeds' "connectedness": sum of incoming and outgoing edge weights.
    pub fn degree(&self, v: VertexId) -> u64 {
        let sum = |es: &[(VertexId, u64)]| es.iter().map(|e| e.1).sum::<u64>();
        sum(self.out_edges(v)) + sum(self.in_edges(v))
    }
    /// Bytes this graph holds on the heap: it grows with vertices and edges only.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of_val;
        size_of_val(self.vertices.as_slice())
            + size_of_val(self.out_offsets.as_slice())
            + size_of_val(self.out_edges.as_slice())
            + size_of_val(self.in_offsets.as_slice())
            + size_of_val(self.in_edges.as_slice())
    }
    /// This graph with every count divided by `unit`, rounded to the nearest: the learning
    /// state's fixed-point counts as the request counts planners expect. Vertices and edges
    /// left at 0 are dropped (vertex ids are renumbered).
    pub fn scaled_down(&self, unit: u64) -> MasterGraph {
        let unit = unit.max(1);
        let round = |w: u64| (w + unit / 2) / unit;
        let mut new_id = vec![u32::MAX; self.len()];
        let mut vertices = Vec::new();
        for (i, v) in self.vertices.iter().enumerate() {
            if round(v.hits) > 0 {
                new_id[i] = vertices.len() as VertexId;
                vertices.push(Vertex {
                    hits: round(v.hits),
                    ..*v
                });
            }
        }
        let edges = self
            .edges()
            .map(|(a, b, w)| (new_id[a as usize], new_id[b as usize], round(w)))
            .filter(|e| e.0 != u32::MAX && e.1 != u32::MAX)
            .collect();
        let mut g = MasterGraph::from_edges(vertices, edges);
        g.requests = round(self.requests);
        g.processes = self.processes;
        g
    }

    /// [`MasterGraph::scaled_down`] of a graph not needed as it is: when every count is a
    /// non-zero multiple of `unit` (a learning state that never decayed), nothing is
    /// dropped or renumbered, so the counts are divided in place instead of the graph
    /// being built again.
    pub fn into_scaled_down(mut self, unit: u64) -> MasterGraph {
        let unit = unit.max(1);
        let whole = |w: u64| w > 0 && w.is_multiple_of(unit);
        let edges_whole = self.out_edges.iter().all(|e| whole(e.1));
        if !(edges_whole && self.vertices.iter().all(|v| whole(v.hits))) {
            return self.scaled_down(unit);
        }
        for v in &mut self.vertices {
            v.hits /= unit;
        }
        for e in self.out_edges.iter_mut().chain(&mut self.in_edges) {
            e.1 /= unit;
        }
        self.requests = (self.requests + unit / 2) / unit;
        self
    }

    /// The vertex holding `sector`, if any.
    pub fn vertex_at(&self, sector: u64) -> Option<VertexId> {
        let i = self
            .vertices
            .partition_point(|v| v.extent.start_sector <= sector);
        let v = self.vertices.get(i.checked_sub(1)?)?;
        (sector < v.extent.end_sector()).then_some((i - 1) as VertexId)
    }
}

/// Sorted, distinct starts and ends of every process vertex.
fn boundaries(pg: &ProcessGraphs) -> Vec<u64> {
    let mut b = Vec::with_capacity(pg.vertices().len() * 2);
    for v in pg.vertices() {
        b.push(v.extent.start_sector);
        b.push(v.extent.end_sector());
    }
    b.sort_unstable();
    b.dedup();
    b
}

/// For each process vertex, the boundary indices of its start and end: it covers the
/// elementary intervals `first .. end` (end exclusive).
fn piece_spans(pg: &ProcessGraphs, bounds: &[u64]) -> Vec<(u32, u32)> {
    let index = |s: u64| {
        bounds
            .binary_search(&s)
            .expect("every boundary was collected") as u32
    };
    pg.vertices()
        .iter()
        .map(|v| (index(v.extent.start_sector), index(v.extent.end_sector())))
        .collect()
}

/// Master vertices (covered elementary intervals, in LBA order) and, for each elementary
/// interval, its master id (`u32::MAX` where nothing was requested).
fn elementary_vertices(
    pg: &ProcessGraphs,
    bounds: &[u64],
    pieces: &[(u32, u32)],
) -> (Vec<VertexId>, Vec<Vertex>) {
    let n = bounds.len().saturating_sub(1);
    let mut cover = vec![0i64; n + 1];
    let mut hits = vec![0i64; n + 1];
    for (v, &(first, end)) in pg.vertices().iter().zip(pieces) {
        cover[first as usize] += 1;
        cover[end as usize] -= 1;
        hits[first as usize] += v.hits as i64;
        hits[end as usize] -= v.hits as i64;
    }
    let mut ids = vec![u32::MAX; n];
    let mut vertices = Vec::new();
    let (mut c, mut h) = (0i64, 0i64);
    for i in 0..n {
        c += cover[i];
        h += hits[i];
        if c > 0 {
            ids[i] = vertices.len() as VertexId;
            let sectors = u32::try_from(bounds[i + 1] - bounds[i])
                .expect("an elementary interval lies inside one request");
            vertices.push(Vertex {
                extent: Extent::new(bounds[i], sectors),
                hits: h as u64,
            });
        }
    }
    (ids, vertices)
}

/// Edges joining the pieces of split process vertices (Algorithm 4 line 9): piece `i` to
/// piece `i + 1` with weight `max(incoming, outgoing)` of every vertex spanning both.
fn chain_edges(
    pg: &ProcessGraphs,
    pieces: &[(u32, u32)],
    ids: &[VertexId],
) -> Vec<(VertexId, VertexId, u64)> {
    let (w_in, w_out) = pg.in_out_weights();
    let mut chain = vec![0i64; ids.len() + 1];
    for (v, &(first, end)) in pieces.iter().enumerate() {
        let c = w_in[v].max(w_out[v]) as i64;
        if end - first >= 2 && c > 0 {
            chain[first as usize] += c;
            chain[end as usize - 1] -= c;
        }
    }
    let mut edges = Vec::new();
    let mut w = 0i64;
    for i in 0..ids.len().saturating_sub(1) {
        w += chain[i];
        if w > 0 {
            edges.push((ids[i], ids[i + 1], w as u64));
        }
    }
    edges
}

/// Compressed rows of `(row, col, weight)` triples already sorted by row then col, or
/// sorted by row after a stable counting pass (for the transposed direction).
fn compress(
    n: usize,
    triples: impl Iterator<Item = (VertexId, VertexId, u64)> + Clone,
) -> (Vec<u32>, Vec<(VertexId, u64)>) {
    let mut offsets = vec![0u32; n + 1];
    for (r, _, _) in triples.clone() {
        offsets[r as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut cells = vec![(0, 0); offsets[n] as usize];
    for (r, c, w) in triples {
        cells[fill[r as usize] as usize] = (c, w);
        fill[r as usize] += 1;
    }
    (offsets, cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both directions hold every summed edge, each row sorted: the incoming rows, made
    /// from the outgoing ones, are the edges into each vertex by source.
    #[test]
    fn incoming_rows_are_the_edges_into_each_vertex_by_source() {
        let n = 7u32;
        let vertices = (0..n)
            .map(|i| Vertex {
                extent: Extent::new(u64::from(i) * 8, 8),
                hits: 1,
            })
            .collect();
        let mut edges = Vec::new();
        let mut x = 12345u64;
        for _ in 0..60 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (a, b) = ((x >> 33) as u32 % n, (x >> 45) as u32 % n);
            edges.push((a, b, (x >> 20) % 4));
        }
        let g = MasterGraph::from_edges(vertices, edges.clone());
        for v in 0..n {
            let mut want = std::collections::BTreeMap::new();
            for &(a, b, w) in &edges {
                if b == v && w > 0 {
                    *want.entry(a).or_insert(0) += w;
                }
            }
            let want: Vec<(VertexId, u64)> = want.into_iter().collect();
            assert_eq!(g.in_edges(v), &want[..], "into {v}");
            for &(from, w) in g.in_edges(v) {
                assert_eq!(g.edge_weight(from, v), w);
            }
        }
        let out_total: usize = (0..n).map(|v| g.out_edges(v).len()).sum();
        assert_eq!(out_total, g.edge_count());
    }
}
