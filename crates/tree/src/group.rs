//! Grouping nodes into supernodes of one disk block, and the supernode trees built on
//! them (the dissertation's §2.4, Figures 2.6 and 2.7).
//!
//! - sequential: depth-first order, a new supernode whenever the next node does not fit;
//! - tree-preserving: as sequential, but a node joins the open supernode only if its
//!   parent is in it or in that supernode's parent supernode, so that supernodes form no
//!   cycles;
//! - EKM (Enhanced Kundu-Misra, Kanne and Moerkotte): Kundu and Misra's bottom-up
//!   partitioning applied to the first-child / next-sibling binary representation of the
//!   tree, so that a supernode may hold a run of siblings with parts of their subtrees;
//! - breadth-first: the tree-preserving rule applied in breadth-first (level) order
//!   instead of document order, so that a supernode holds siblings, and the children of
//!   consecutive siblings (cousins), without their subtrees. Every other grouping keeps a
//!   node with its own small subtree (an element with its text), so "every item's
//!   children" reads the items' whole subtrees; this one keeps each level of the items
//!   apart from the levels below it.
//!
//! A node larger than a block is a supernode of its own over consecutive blocks. The
//! supernode tree links each supernode to the supernode of the parent of its first node
//! (for sequential grouping that is the first edge into it, which never makes a cycle);
//! its children are ordered by their first nodes.

use serde::Serialize;

use crate::doc::{Document, NONE};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Grouping {
    #[serde(rename = "sequential")]
    Sequential,
    #[serde(rename = "tree-preserving")]
    TreePreserving,
    #[serde(rename = "ekm")]
    Ekm,
    #[serde(rename = "breadth-first")]
    BreadthFirst,
}

impl Grouping {
    pub const ALL: [Grouping; 4] = [
        Grouping::Sequential,
        Grouping::TreePreserving,
        Grouping::Ekm,
        Grouping::BreadthFirst,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Grouping::Sequential => "sequential",
            Grouping::TreePreserving => "tree-preserving",
            Grouping::Ekm => "ekm",
            Grouping::BreadthFirst => "breadth-first",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Supernode {
    /// Its first node in the grouping's order (document order, or breadth-first).
    pub first_node: u32,
    pub nodes: u32,
    pub bytes: u64,
    /// Disk blocks it occupies: 1, or more for one node larger than a block.
    pub blocks: u32,
    /// Parent in the supernode tree, `NONE` for the root's supernode.
    pub parent: u32,
    pub children: Vec<u32>,
}

/// The supernodes of one grouping of a document, and their tree.
#[derive(Clone, Debug)]
pub struct Supernodes {
    pub grouping: Grouping,
    pub block_bytes: u64,
    /// The supernode of every node.
    pub of_node: Vec<u32>,
    pub list: Vec<Supernode>,
}

/// What the JSON reports of a grouping.
#[derive(Clone, Debug, Serialize)]
pub struct GroupingSummary {
    pub supernodes: usize,
    pub nodes_per_supernode: f64,
    pub bytes_per_supernode: f64,
    /// Unused bytes inside the supernodes' blocks, as a fraction of those blocks.
    pub internal_fragmentation: f64,
    /// Height and mean fanout (of supernodes with children) of the supernode tree.
    pub tree_height: u32,
    pub tree_fanout: f64,
}

fn blocks_for(bytes: u64, block_bytes: u64) -> u32 {
    bytes.div_ceil(block_bytes).max(1) as u32
}

/// Incrementally fills supernodes in document order (sequential and tree-preserving).
struct Filler<'a> {
    doc: &'a Document,
    block_bytes: u64,
    of_node: Vec<u32>,
    list: Vec<Supernode>,
    /// The open supernode, if any, and its parent supernode.
    open: Option<u32>,
    open_parent: u32,
}

impl Filler<'_> {
    fn start(&mut self, v: u32, bytes: u64) -> u32 {
        let id = self.list.len() as u32;
        let p = self.doc.node(v).parent;
        let parent = if p == NONE {
            NONE
        } else {
            self.of_node[p as usize]
        };
        self.list.push(Supernode {
            first_node: v,
            nodes: 0,
            bytes: 0,
            blocks: blocks_for(bytes, self.block_bytes),
            parent,
            children: Vec::new(),
        });
        self.open_parent = parent;
        id
    }

    fn add(&mut self, s: u32, v: u32, bytes: u64) {
        let sn = &mut self.list[s as usize];
        sn.nodes += 1;
        sn.bytes += bytes;
        self.of_node[v as usize] = s;
    }
}

/// The nodes in breadth-first order: level by level, each level in document order.
fn breadth_first_order(doc: &Document) -> Vec<u32> {
    let mut order = Vec::with_capacity(doc.len());
    if doc.is_empty() {
        return order;
    }
    order.push(doc.root());
    let mut at = 0;
    while at < order.len() {
        let v = order[at];
        order.extend(doc.children(v));
        at += 1;
    }
    order
}

/// Sequential (`tree_preserving` false) or tree-preserving grouping of the nodes in
/// `order` (parents before children).
fn fill(
    doc: &Document,
    block_bytes: u64,
    tree_preserving: bool,
    order: impl Iterator<Item = u32>,
) -> (Vec<u32>, Vec<Supernode>) {
    let mut f = Filler {
        doc,
        block_bytes,
        of_node: vec![NONE; doc.len()],
        list: Vec::new(),
        open: None,
        open_parent: NONE,
    };
    for v in order {
        let bytes = doc.node(v).size_bytes as u64;
        if bytes > block_bytes {
            let s = f.start(v, bytes);
            f.add(s, v, bytes);
            f.open = None;
            continue;
        }
        let fits = f.open.filter(|&s| {
            let p = doc.node(v).parent;
            let keeps_tree = !tree_preserving
                || (p != NONE
                    && (f.of_node[p as usize] == s || f.of_node[p as usize] == f.open_parent));
            f.list[s as usize].bytes + bytes <= block_bytes && keeps_tree
        });
        let s = match fits {
            Some(s) => s,
            None => f.start(v, bytes),
        };
        f.add(s, v, bytes);
        f.open = Some(s);
    }
    (f.of_node, f.list)
}

/// EKM: Kundu-Misra on the binary representation (left = first child, right = next
/// sibling). Bottom-up, each binary node keeps the weight of its still-attached part;
/// over a block, its heavier binary child is cut off as a supernode, then the other.
fn ekm(doc: &Document, block_bytes: u64) -> (Vec<u32>, Vec<Supernode>) {
    let n = doc.len();
    let mut residual = vec![0u64; n];
    let mut cut = vec![false; n];
    cut[0] = true;
    let weight = |residual: &[u64], x: u32| -> u64 {
        if x == NONE {
            0
        } else {
            residual[x as usize]
        }
    };
    // Reverse document order visits both binary children (first child, next sibling)
    // before their binary parent.
    for v in (0..n as u32).rev() {
        let node = doc.node(v);
        let own = node.size_bytes as u64;
        let mut kids = [
            (weight(&residual, node.first_child), node.first_child),
            (weight(&residual, node.next_sibling), node.next_sibling),
        ];
        kids.sort_by_key(|k| std::cmp::Reverse(k.0));
        let mut total = own + kids[0].0 + kids[1].0;
        for (w, k) in kids {
            if k != NONE && (total > block_bytes || own > block_bytes) && w > 0 {
                cut[k as usize] = true;
                total -= w;
            }
        }
        residual[v as usize] = total;
    }
    let mut of_node = vec![NONE; n];
    let mut list: Vec<Supernode> = Vec::new();
    // Forward: a node joins its binary parent's supernode unless it was cut.
    let mut prev_sibling = vec![NONE; n];
    for v in 0..n as u32 {
        let node = doc.node(v);
        if node.next_sibling != NONE {
            prev_sibling[node.next_sibling as usize] = v;
        }
        let s = if cut[v as usize] {
            let parent = if node.parent == NONE {
                NONE
            } else {
                of_node[node.parent as usize]
            };
            list.push(Supernode {
                first_node: v,
                nodes: 0,
                bytes: 0,
                blocks: blocks_for(node.size_bytes as u64, block_bytes),
                parent,
                children: Vec::new(),
            });
            list.len() as u32 - 1
        } else if prev_sibling[v as usize] != NONE {
            of_node[prev_sibling[v as usize] as usize]
        } else {
            of_node[node.parent as usize]
        };
        of_node[v as usize] = s;
        list[s as usize].nodes += 1;
        list[s as usize].bytes += node.size_bytes as u64;
    }
    (of_node, list)
}

impl Supernodes {
    /// Groups `doc` into supernodes of `block_bytes`.
    pub fn build(doc: &Document, grouping: Grouping, block_bytes: u64) -> Supernodes {
        let (of_node, mut list) = match grouping {
            Grouping::Sequential => fill(doc, block_bytes, false, 0..doc.len() as u32),
            Grouping::TreePreserving => fill(doc, block_bytes, true, 0..doc.len() as u32),
            Grouping::Ekm => ekm(doc, block_bytes),
            Grouping::BreadthFirst => {
                fill(doc, block_bytes, true, breadth_first_order(doc).into_iter())
            }
        };
        for s in 0..list.len() {
            let p = list[s].parent;
            if p != NONE {
                list[p as usize].children.push(s as u32);
            }
        }
        Supernodes {
            grouping,
            block_bytes,
            of_node,
            list,
        }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    pub fn total_blocks(&self) -> u64 {
        self.list.iter().map(|s| s.blocks as u64).sum()
    }
    /// Depth of every supernode in the supernode tree (the root's is 1).
    pub fn depths(&self) -> Vec<u32> {
        let mut d = vec![1u32; self.list.len()];
        // Parents come before children (their first nodes come first).
        for s in 0..self.list.len() {
            let p = self.list[s].parent;
            if p != NONE {
                d[s] = d[p as usize] + 1;
            }
        }
        d
    }

    pub fn summary(&self) -> GroupingSummary {
        let nodes: u64 = self.list.iter().map(|s| s.nodes as u64).sum();
        let bytes: u64 = self.list.iter().map(|s| s.bytes).sum();
        let n = self.list.len().max(1) as f64;
        let inner = self.list.iter().filter(|s| !s.children.is_empty()).count();
        GroupingSummary {
            supernodes: self.list.len(),
            nodes_per_supernode: nodes as f64 / n,
            bytes_per_supernode: bytes as f64 / n,
            internal_fragmentation: 1.0
                - bytes as f64 / (self.total_blocks().max(1) * self.block_bytes) as f64,
            tree_height: self.depths().into_iter().max().unwrap_or(0),
            tree_fanout: if inner == 0 {
                0.0
            } else {
                (self.list.len() - 1) as f64 / inner as f64
            },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::doc::Builder;

    /// The chapter's Figure 2.3 tree, nodes A..U in depth-first order (the figure itself
    /// is not in our copy of the text; this tree follows what the text says of it: root
    /// A with children B, I and N, alphabetical depth-first order, S an inner node):
    /// A(B(C, D(E, F, G), H), I(J, K, L, M), N(O, P, Q, R, S(T, U))).
    pub(crate) fn figure_2_3() -> Document {
        from_outline("A(B(C,D(E,F,G),H),I(J,K,L,M),N(O,P,Q,R,S(T,U)))")
    }

    /// Builds the tree of a `A(B,C(D))` string: a letter followed by `(` opens, else is a
    /// leaf.
    pub(crate) fn from_outline(tree: &str) -> Document {
        let mut b = Builder::default();
        let chars: Vec<char> = tree.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            match c {
                ',' | '(' => {}
                ')' => b.close(),
                tag => {
                    b.open(&tag.to_string(), &[]);
                    if chars.get(i + 1) != Some(&'(') {
                        b.close();
                    }
                }
            }
        }
        b.finish()
    }

    /// Every node is 9 bytes (8 of pointers, a 1-letter tag): 45-byte blocks hold five,
    /// as in the chapter's examples.
    const FIVE: u64 = 45;

    fn letters(doc: &Document, sn: &Supernodes) -> Vec<String> {
        let mut out = vec![String::new(); sn.len()];
        for v in 0..doc.len() {
            out[sn.of_node[v] as usize].push_str(doc.name(doc.node(v as u32).name));
        }
        out
    }

    #[test]
    fn sequential_grouping_of_figure_2_3() {
        let d = figure_2_3();
        assert_eq!(d.len(), 21);
        let s = Supernodes::build(&d, Grouping::Sequential, FIVE);
        assert_eq!(letters(&d, &s), ["ABCDE", "FGHIJ", "KLMNO", "PQRST", "U"]);
        let parents: Vec<u32> = s.list.iter().map(|x| x.parent).collect();
        assert_eq!(parents, [NONE, 0, 1, 2, 3]);
        assert!((s.summary().internal_fragmentation - (1.0 - 21.0 / 25.0)).abs() < 1e-9);
    }

    #[test]
    fn tree_preserving_grouping_of_figure_2_3() {
        let d = figure_2_3();
        let s = Supernodes::build(&d, Grouping::TreePreserving, FIVE);
        // K..M cannot take N: N's parent A is neither in {K,L,M} nor in its parent {F..J}.
        assert_eq!(letters(&d, &s), ["ABCDE", "FGHIJ", "KLM", "NOPQR", "STU"]);
        let parents: Vec<u32> = s.list.iter().map(|x| x.parent).collect();
        assert_eq!(parents, [NONE, 0, 1, 0, 3]);
        assert_eq!(s.list[0].children, vec![1, 3]);
    }

    #[test]
    fn ekm_grouping_of_figure_2_3() {
        let d = figure_2_3();
        let s = Supernodes::build(&d, Grouping::Ekm, FIVE);
        // Hand-run Kundu-Misra on the binary tree: C+D's part is 6 > 5, D is cut; at I,
        // J's part (4) is heavier than N's (3) and is cut; at B, I's part is cut.
        assert_eq!(letters(&d, &s), ["ABC", "DEFGH", "INOP", "JKLM", "QRSTU"]);
        let parents: Vec<u32> = s.list.iter().map(|x| x.parent).collect();
        assert_eq!(parents, [NONE, 0, 0, 2, 2]);
    }

    #[test]
    fn breadth_first_grouping_of_figure_2_3() {
        let d = figure_2_3();
        let s = Supernodes::build(&d, Grouping::BreadthFirst, FIVE);
        // Level order A B I N | C D H J K L M O P Q R S | E F G T U, with the
        // tree-preserving rule: S cannot take E (its parent D is in DHJKL, neither S
        // nor S's parent), EFG cannot take T.
        assert_eq!(
            letters(&d, &s),
            ["ABCIN", "DHJKL", "MOPQR", "S", "EFG", "TU"]
        );
        let parents: Vec<u32> = s.list.iter().map(|x| x.parent).collect();
        assert_eq!(parents, [NONE, 0, 0, 0, 1, 3]);
        // Cousins share a supernode: the children of B (D, H) and of I (J, K, L).
        assert_eq!(s.of_node[3], s.of_node[9]);
    }

    #[test]
    fn a_node_larger_than_a_block_spans_consecutive_blocks() {
        let mut b = Builder::default();
        b.open("r", &[]);
        b.text(100);
        b.open("x", &[]);
        b.close();
        b.close();
        let d = b.finish();
        for g in Grouping::ALL {
            let s = Supernodes::build(&d, g, FIVE);
            let big = s.of_node[1] as usize;
            assert_eq!(s.list[big].blocks, 3, "{g:?}"); // 108 bytes in 45-byte blocks
            assert_eq!(s.list[big].nodes, 1, "{g:?}");
        }
    }
}
