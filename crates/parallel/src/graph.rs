//! The correlation graph (seed 003 §IV-C, Figure 5(a)): a vertex per block (or per group
//! of sequential blocks, §IV-E), an edge per correlated pair weighted by its frequency.
//! Stored as compressed adjacency lists, both directions, for the `O(|V| + |E|)` passes
//! of Algorithm 1.

/// An undirected weighted graph on vertices `0..n`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Graph {
    offsets: Vec<u32>,
    adj: Vec<(u32, u32)>,
}

impl Graph {
    /// A graph on `n` vertices from `(u, v, weight)` edges. Parallel edges add their
    /// weights (pairs of blocks in the same two groups); self loops are dropped (pairs
    /// inside one group cost nothing, the group is read sequentially).
    pub fn from_edges(n: usize, edges: impl IntoIterator<Item = (u32, u32, u32)>) -> Graph {
        let mut list: Vec<(u32, u32, u32)> = edges
            .into_iter()
            .filter(|&(u, v, _)| u != v)
            .map(|(u, v, w)| (u.min(v), u.max(v), w))
            .collect();
        list.sort_unstable_by_key(|&(u, v, _)| (u, v));
        list.dedup_by(|next, kept| {
            let same = (next.0, next.1) == (kept.0, kept.1);
            if same {
                kept.2 = kept.2.saturating_add(next.2);
            }
            same
        });
        let mut degree = vec![0u32; n + 1];
        for &(u, v, _) in &list {
            assert!((v as usize) < n, "edge ({u}, {v}) outside {n} vertices");
            degree[u as usize + 1] += 1;
            degree[v as usize + 1] += 1;
        }
        for i in 1..=n {
            degree[i] += degree[i - 1];
        }
        let offsets = degree;
        let mut fill: Vec<u32> = offsets[..n].to_vec();
        let mut adj = vec![(0u32, 0u32); offsets[n] as usize];
        for &(u, v, w) in &list {
            adj[fill[u as usize] as usize] = (v, w);
            fill[u as usize] += 1;
            adj[fill[v as usize] as usize] = (u, w);
            fill[v as usize] += 1;
        }
        Graph { offsets, adj }
    }

    pub fn vertices(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
    /// Undirected edges.
    pub fn edges(&self) -> usize {
        self.adj.len() / 2
    }
    /// `(neighbour, weight)` of `v`.
    pub fn neighbours(&self, v: u32) -> &[(u32, u32)] {
        let (s, e) = (self.offsets[v as usize], self.offsets[v as usize + 1]);
        &self.adj[s as usize..e as usize]
    }
    /// Total correlation frequency: the sum of `v`'s edge weights (P2).
    pub fn tcf(&self, v: u32) -> u64 {
        self.neighbours(v).iter().map(|&(_, w)| w as u64).sum()
    }
    /// Weighted conflicts of a colouring: the weight of edges whose ends share a colour
    /// (P3).
    pub fn conflicts(&self, colours: &[u32]) -> u64 {
        (0..self.vertices() as u32)
            .flat_map(|u| self.neighbours(u).iter().map(move |&(v, w)| (u, v, w)))
            .filter(|&(u, v, _)| u < v && colours[u as usize] == colours[v as usize])
            .map(|(_, _, w)| w as u64)
            .sum()
    }
}
