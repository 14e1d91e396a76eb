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

use crate::edges::{EdgeKey, EdgeList, Weight};
use crate::graph::{Extent, GraphOptions, ProcessGraphs, ProcessVertex};
use reblock_tally::Tally;
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

/// An edge's weight in the planners' graph: requests, saturating at `u32::MAX` (no trace
/// repeats one transition 4·10^9 times; a 64-bit weight would make every row half again
/// as large: docs/scale.md).
pub type EdgeWeight = u32;

/// Directed, weighted graph with both adjacency directions in compressed rows.
#[derive(Clone, Debug, Default)]
pub struct MasterGraph {
    vertices: Vec<Vertex>,
    out_offsets: Vec<u32>,
    out_edges: Vec<(VertexId, EdgeWeight)>,
    in_offsets: Vec<u32>,
    in_edges: Vec<(VertexId, EdgeWeight)>,
    requests: u64,
    processes: usize,
}

/// Edges as (key, weight): the layout of the process graphs' edge counts, so that a
/// graph built from process graphs it may consume reuses their buffer.
type KeyedEdges<W> = Vec<(EdgeKey, W)>;

/// Builds the per-process graphs of a request stream (seed definition: lookahead 1) and
/// merges them into the master graph.
pub fn build_graphs(requests: impl IntoIterator<Item = Request>) -> MasterGraph {
    let pg = ProcessGraphs::build(requests, GraphOptions::default());
    MasterGraph::from_processes_into(pg, 1)
}

/// The master vertices (Algorithm 4, see the module comment), with for each process
/// vertex the master ids of its first and last pieces, and the chain edges between the
/// pieces of split process vertices.
struct Pieces {
    vertices: Vec<Vertex>,
    /// Per process vertex: (master id of its first piece, master id of its last piece).
    ends: Vec<(VertexId, VertexId)>,
    chain: KeyedEdges<u64>,
}

/// The split of the process vertices into elementary intervals.
struct Split {
    /// The master vertices: covered elementary intervals, in LBA order.
    vertices: Vec<Vertex>,
    /// Per process vertex, the elementary intervals it covers, `first .. end`.
    spans: Vec<(u32, u32)>,
    /// Per elementary interval, its master id (`u32::MAX` where nothing was requested).
    ids: Vec<VertexId>,
}

/// What [`Split::of`] needs of the process vertices, read before they may be freed:
/// the sorted boundaries, each vertex's span and the coverage and hits per interval.
struct Covering {
    bounds: Vec<u64>,
    spans: Vec<(u32, u32)>,
    /// Difference arrays over the intervals: vertices covering, and their hits.
    cover: Vec<i64>,
    hits: Vec<i64>,
}

fn covering(pv: &[ProcessVertex]) -> Covering {
    let bounds = boundaries(pv);
    let spans = piece_spans(pv, &bounds);
    let n = bounds.len().saturating_sub(1);
    let mut cover = vec![0i64; n + 1];
    let mut hits = vec![0i64; n + 1];
    for (v, &(first, end)) in pv.iter().zip(&spans) {
        cover[first as usize] += 1;
        cover[end as usize] -= 1;
        hits[first as usize] += v.hits as i64;
        hits[end as usize] -= v.hits as i64;
    }
    Covering {
        bounds,
        spans,
        cover,
        hits,
    }
}

impl Split {
    fn of(c: Covering) -> Split {
        let Covering {
            bounds,
            spans,
            cover,
            hits,
        } = c;
        let n = bounds.len().saturating_sub(1);
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
        Split {
            vertices,
            spans,
            ids,
        }
    }
}

impl Pieces {
    /// The pieces of `split`, whose process graphs' edges are in `pg`.
    fn of(pg: &ProcessGraphs, split: Split) -> Pieces {
        let Split {
            vertices,
            spans,
            ids,
        } = split;
        let chain = chain_edges(pg, &spans, &ids);
        let ends = (spans.iter())
            .map(|&(first, end)| (ids[first as usize], ids[end as usize - 1]))
            .collect();
        Pieces {
            vertices,
            ends,
            chain,
        }
    }

    /// Process edge `from -> to` as the master edge it lands on: from the last piece of
    /// `from` to the first piece of `to` (Algorithm 4 lines 7-8).
    fn master_key(&self, e: EdgeKey) -> EdgeKey {
        EdgeKey::new(self.ends[e.from as usize].1, self.ends[e.to as usize].0)
    }
}

impl MasterGraph {
    /// Merges process graphs with range splitting (see the module comment).
    pub fn from_processes(pg: &ProcessGraphs) -> MasterGraph {
        Self::from_processes_scaled(pg, 1)
    }

    /// [`MasterGraph::from_processes`] with every count divided by `unit`, rounded to
    /// the nearest (see [`MasterGraph::from_packed`]): a learning state's fixed-point
    /// counts as the request counts planners expect.
    pub fn from_processes_scaled(pg: &ProcessGraphs, unit: u64) -> MasterGraph {
        let pieces = Pieces::of(pg, Split::of(covering(pg.vertices())));
        let mut edges = Vec::with_capacity(pg.edge_count() + pieces.chain.len());
        edges.extend(pg.edge_counts().map(|(k, w)| (pieces.master_key(k), w)));
        Self::assemble(pieces, edges, (pg.requests(), pg.processes().len()), unit)
    }

    /// [`MasterGraph::from_processes_scaled`] of process graphs not needed afterwards:
    /// their edge counts become the master edge list in place, and everything else they
    /// hold is given back as soon as it is read, the process vertices before the master
    /// vertices are made (at 10^7 training requests each is hundreds of megabytes, as
    /// large as the graph itself).
    pub fn from_processes_into(mut pg: ProcessGraphs, unit: u64) -> MasterGraph {
        pg.forget_vertex_index();
        let covered = covering(pg.vertices());
        pg.forget_vertices();
        let pieces = Pieces::of(&pg, Split::of(covered));
        let counts = (pg.requests(), pg.processes().len());
        match pg.into_edge_counts() {
            EdgeList::Whole(edges) => Self::moved(pieces, edges, counts, unit),
            EdgeList::Fixed(edges) => Self::moved(pieces, edges, counts, unit),
        }
    }

    /// The graph of `pieces` and the process edges `edges`, moved onto them in place.
    fn moved<W: Weight>(
        pieces: Pieces,
        mut edges: KeyedEdges<W>,
        counts: (u64, usize),
        unit: u64,
    ) -> MasterGraph {
        // Room for the chain edges now: appended to a buffer shrunk to fit, they would
        // double its capacity.
        edges.reserve_exact(pieces.chain.len());
        for e in &mut edges {
            e.0 = pieces.master_key(e.0);
        }
        Self::assemble(pieces, edges, counts, unit)
    }

    /// The graph of `pieces` and the process edges moved onto them, with the process
    /// graphs' (requests, processes).
    fn assemble<W: Weight>(
        pieces: Pieces,
        edges: KeyedEdges<W>,
        (requests, processes): (u64, usize),
        unit: u64,
    ) -> MasterGraph {
        let Pieces {
            vertices, chain, ..
        } = pieces;
        let unit = unit.max(1);
        let mut g = Self::from_packed(vertices, edges, &chain, unit);
        g.requests = (requests + unit / 2) / unit;
        g.processes = processes;
        g
    }

    /// A master graph given directly: vertices must be sorted by start and disjoint; edges
    /// as (from, to, weight), duplicates summed. Used for hand-made graphs (the seeds'
    /// figures).
    pub fn from_edges(vertices: Vec<Vertex>, edges: Vec<(VertexId, VertexId, u64)>) -> Self {
        let edges = (edges.into_iter())
            .map(|(a, b, w)| (EdgeKey::new(a, b), w))
            .collect();
        Self::from_packed::<u64>(vertices, edges, &[], 1)
    }

    /// The graph of `vertices` and `edges` plus `more` (duplicates summed, saturating at
    /// `W`'s largest value: whole counts of 32 bits saturate where the rows do), every
    /// count then divided by `unit` rounded to the nearest; vertices and edges left at 0
    /// are dropped and vertex ids renumbered in order.
    fn from_packed<W: Weight>(
        mut vertices: Vec<Vertex>,
        mut edges: KeyedEdges<W>,
        more: &[(EdgeKey, u64)],
        unit: u64,
    ) -> MasterGraph {
        debug_assert!(vertices
            .windows(2)
            .all(|w| w[0].extent.end_sector() <= w[1].extent.start_sector));
        edges.extend(more.iter().map(|&(k, w)| (k, W::of(w))));
        edges.sort_unstable_by_key(|e| e.0);
        edges.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1.absorb(next.1);
            }
            same
        });
        let unit = unit.max(1);
        if unit > 1 {
            scale_down(&mut vertices, &mut edges, unit);
        }
        edges.retain(|e| e.1 != W::default());
        let n = vertices.len();
        let narrow = |w: W| EdgeWeight::try_from(w.get()).unwrap_or(EdgeWeight::MAX);
        let rows = edges.iter().map(|&(k, w)| (k.from, k.to, narrow(w)));
        let (out_offsets, out_edges) = compress(n, rows);
        // The list goes before the transposed rows are made from the rows: one copy of
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
    pub fn out_edges(&self, v: VertexId) -> &[(VertexId, EdgeWeight)] {
        let v = v as usize;
        &self.out_edges[self.out_offsets[v] as usize..self.out_offsets[v + 1] as usize]
    }
    /// `(from, weight)` of every edge entering `v`, sorted by `from`.
    pub fn in_edges(&self, v: VertexId) -> &[(VertexId, EdgeWeight)] {
        let v = v as usize;
        &self.in_edges[self.in_offsets[v] as usize..self.in_offsets[v + 1] as usize]
    }
    /// Weight of `from -> to`, 0 when absent.
    pub fn edge_weight(&self, from: VertexId, to: VertexId) -> u64 {
        let out = self.out_edges(from);
        match out.binary_search_by_key(&to, |e| e.0) {
            Ok(i) => u64::from(out[i].1),
            Err(_) => 0,
        }
    }
    /// Every edge as (from, to, weight), sorted.
    pub fn edges(&self) -> impl Iterator<Item = (VertexId, VertexId, u64)> + '_ {
        (0..self.len() as VertexId).flat_map(move |v| {
            self.out_edges(v)
                .iter()
                .map(move |&(t, w)| (v, t, u64::from(w)))
        })
    }
    /// The seeds' "connectedness": sum of incoming and outgoing edge weights.
    pub fn degree(&self, v: VertexId) -> u64 {
        let sum = |es: &[(VertexId, EdgeWeight)]| es.iter().map(|e| u64::from(e.1)).sum::<u64>();
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
    /// The vertex holding `sector`, if any.
    pub fn vertex_at(&self, sector: u64) -> Option<VertexId> {
        let i = self
            .vertices
            .partition_point(|v| v.extent.start_sector <= sector);
        let v = self.vertices.get(i.checked_sub(1)?)?;
        (sector < v.extent.end_sector()).then_some((i - 1) as VertexId)
    }
}

/// Sorted, distinct starts and ends of every process vertex, gathered through a tally
/// (batches sorted and merged): process vertices share most of their ends, and the list
/// kept is a fraction of the one a single sort would collect (2·10^6 distinct of 1.1·10^7
/// at 2·10^7 synthetic requests: 88 MB of scratch no more).
fn boundaries(pv: &[ProcessVertex]) -> Vec<u64> {
    let mut b: Tally<u64, ()> = Tally::default();
    for v in pv {
        b.add(v.start_sector, ());
        b.add(v.extent().end_sector(), ());
    }
    let b = b.into_counts();
    b.iter().map(|e| e.0).collect()
}

/// For each process vertex, the boundary indices of its start and end: it covers the
/// elementary intervals `first .. end` (end exclusive).
fn piece_spans(pv: &[ProcessVertex], bounds: &[u64]) -> Vec<(u32, u32)> {
    let index = |s: u64| {
        bounds
            .binary_search(&s)
            .expect("every boundary was collected") as u32
    };
    pv.iter()
        .map(|v| (index(v.start_sector), index(v.extent().end_sector())))
        .collect()
}

/// Edges joining the pieces of split process vertices (Algorithm 4 line 9): piece `i` to
/// piece `i + 1` with weight `max(incoming, outgoing)` of every vertex spanning both.
fn chain_edges(pg: &ProcessGraphs, pieces: &[(u32, u32)], ids: &[VertexId]) -> KeyedEdges<u64> {
    let weights = pg.in_or_out_weights(pieces.len());
    let mut chain = vec![0i64; ids.len() + 1];
    for (v, &(first, end)) in pieces.iter().enumerate() {
        let c = weights[v] as i64;
        if end - first >= 2 && c > 0 {
            chain[first as usize] += c;
            chain[end as usize - 1] -= c;
        }
    }
    drop(weights);
    let mut edges = Vec::new();
    let mut w = 0i64;
    for i in 0..ids.len().saturating_sub(1) {
        w += chain[i];
        if w > 0 {
            edges.push((EdgeKey::new(ids[i], ids[i + 1]), w as u64));
        }
    }
    edges
}

/// Divides every vertex's hits and every (summed, sorted) edge's weight by `unit`,
/// rounded to the nearest; vertices left without hits are dropped with their edges and
/// the others renumbered in order, which keeps the edges sorted.
fn scale_down<W: Weight>(vertices: &mut Vec<Vertex>, edges: &mut KeyedEdges<W>, unit: u64) {
    let round = |w: u64| (w + unit / 2) / unit;
    let mut new_id = vec![VertexId::MAX; vertices.len()];
    let mut kept = 0;
    for i in 0..vertices.len() {
        let hits = round(vertices[i].hits);
        if hits > 0 {
            new_id[i] = kept as VertexId;
            vertices[kept] = Vertex {
                hits,
                ..vertices[i]
            };
            kept += 1;
        }
    }
    vertices.truncate(kept);
    edges.retain_mut(|e| {
        let (a, b) = (new_id[e.0.from as usize], new_id[e.0.to as usize]);
        *e = (EdgeKey::new(a, b), W::of(round(e.1.get())));
        a != VertexId::MAX && b != VertexId::MAX
    });
}

/// Compressed rows of `(row, col, weight)` triples already sorted by row then col, or
/// sorted by row after a stable counting pass (for the transposed direction).
fn compress(
    n: usize,
    triples: impl Iterator<Item = (VertexId, VertexId, EdgeWeight)> + Clone,
) -> (Vec<u32>, Vec<(VertexId, EdgeWeight)>) {
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
                    *want.entry(a).or_insert(0) += w as EdgeWeight;
                }
            }
            let want: Vec<(VertexId, EdgeWeight)> = want.into_iter().collect();
            assert_eq!(g.in_edges(v), &want[..], "into {v}");
            for &(from, w) in g.in_edges(v) {
                assert_eq!(g.edge_weight(from, v), u64::from(w));
            }
        }
        let out_total: usize = (0..n).map(|v| g.out_edges(v).len()).sum();
        assert_eq!(out_total, g.edge_count());
    }

    /// A weight beyond 32 bits saturates in the rows; the sum is taken before, exactly.
    #[test]
    fn weights_sum_exactly_then_saturate() {
        let vertices = (0..2)
            .map(|i| Vertex {
                extent: Extent::new(i * 8, 8),
                hits: 1,
            })
            .collect();
        let big = u64::from(EdgeWeight::MAX);
        let g =
            MasterGraph::from_edges(vertices, vec![(0, 1, big), (0, 1, 1), (1, 0, 3), (1, 0, 4)]);
        assert_eq!(g.edge_weight(0, 1), big);
        assert_eq!(g.edge_weight(1, 0), 7);
        assert_eq!(g.degree(0), big + 7);
    }
}
