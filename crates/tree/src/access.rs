//! From a node access sequence to the disk reads it costs, and what kind of tree move
//! each read is (the dissertation's Table 2.2).
//!
//! Caching follows the chapter's evaluation: the supernodes on the path from the root to
//! the node last touched are in memory, so touching a node whose supernode is on that
//! path costs nothing; any other supernode is read (one request of its blocks).
//!
//! Each read is classified by how its supernode relates to the one read before it in the
//! layout's supernode tree (for the default layout that is a list, so only a1 and a5
//! occur, as in the chapter's Table 2.6):
//! a1 parent to first child, a2 parent to a later child, a3 an inner supernode to its
//! right sibling, a4 a leaf supernode to its right sibling, a5 anything else (and the
//! first read).

use serde::Serialize;

use crate::doc::{Document, NONE};
use crate::group::Supernodes;

/// Counts of the five access types.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Accesses {
    pub a1: u64,
    pub a2: u64,
    pub a3: u64,
    pub a4: u64,
    pub a5: u64,
}

impl Accesses {
    pub fn as_array(&self) -> [u64; 5] {
        [self.a1, self.a2, self.a3, self.a4, self.a5]
    }
    pub fn total(&self) -> u64 {
        self.as_array().iter().sum()
    }
    fn add(&mut self, kind: usize) {
        match kind {
            1 => self.a1 += 1,
            2 => self.a2 += 1,
            3 => self.a3 += 1,
            4 => self.a4 += 1,
            _ => self.a5 += 1,
        }
    }
}

/// The supernodes `touched` reads, in order, with the path cache.
pub fn supernode_reads(doc: &Document, sn: &Supernodes, touched: &[u32]) -> Vec<u32> {
    let mut reads = Vec::new();
    let mut path: Vec<u32> = Vec::new();
    let mut last = NONE;
    for &v in touched {
        let s = sn.of_node[v as usize];
        if !path.contains(&s) {
            reads.push(s);
        }
        if v != last {
            // The new path: the supernodes of v and its ancestors.
            path.clear();
            let mut a = v;
            while a != NONE {
                let sa = sn.of_node[a as usize];
                if path.last() != Some(&sa) {
                    path.push(sa);
                }
                a = doc.node(a).parent;
            }
            last = v;
        }
    }
    reads
}

/// How the layout links supernodes: the default layout's list, or a supernode tree.
#[derive(Clone, Copy)]
pub enum Links<'a> {
    List,
    Tree(&'a Supernodes),
}

/// Table 2.2's type (1..=5) of reading `to` right after `from`.
pub fn classify(links: Links<'_>, from: u32, to: u32) -> usize {
    if from == NONE {
        return 5;
    }
    match links {
        Links::List => {
            if to == from + 1 {
                1
            } else {
                5
            }
        }
        Links::Tree(sn) => {
            let (f, t) = (&sn.list[from as usize], &sn.list[to as usize]);
            if t.parent == from {
                return if f.children.first() == Some(&to) {
                    1
                } else {
                    2
                };
            }
            if t.parent != NONE && t.parent == f.parent {
                let siblings = &sn.list[t.parent as usize].children;
                let i = siblings.iter().position(|&c| c == from);
                if i.is_some_and(|i| siblings.get(i + 1) == Some(&to)) {
                    return if f.children.is_empty() { 4 } else { 3 };
                }
            }
            5
        }
    }
}

/// The access-type counts of a read sequence.
pub fn classify_all(links: Links<'_>, reads: &[u32]) -> Accesses {
    let mut acc = Accesses::default();
    let mut prev = NONE;
    for &r in reads {
        acc.add(classify(links, prev, r));
        prev = r;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::tests::figure_2_3;
    use crate::group::Grouping;

    #[test]
    fn access_types_on_the_tree_preserving_supernode_tree() {
        let d = figure_2_3();
        // Supernodes: 0 ABCDE, 1 FGHIJ (child of 0), 2 KLM (child of 1), 3 NOPQR (child
        // of 0), 4 STU (child of 3).
        let s = Supernodes::build(&d, Grouping::TreePreserving, 45);
        let t = Links::Tree(&s);
        assert_eq!(classify(t, NONE, 0), 5);
        assert_eq!(classify(t, 0, 1), 1); // parent to first child
        assert_eq!(classify(t, 0, 3), 2); // parent to a later child
        assert_eq!(classify(t, 1, 3), 3); // inner supernode to its right sibling
        assert_eq!(classify(t, 3, 4), 1);
        assert_eq!(classify(t, 4, 0), 5); // up the tree
        assert_eq!(classify(t, 2, 3), 5); // a nephew, not a sibling
        let leaf = Supernodes::build(
            &crate::group::tests::from_outline("A(B,C)"),
            Grouping::Ekm,
            9,
        );
        assert_eq!(classify(Links::Tree(&leaf), 1, 2), 4); // leaf to its right sibling
        assert_eq!(classify(Links::List, 1, 2), 1);
        assert_eq!(classify(Links::List, 1, 3), 5);
        let acc = classify_all(t, &[0, 1, 3, 4, 0]);
        assert_eq!(
            acc,
            Accesses {
                a1: 2,
                a2: 0,
                a3: 1,
                a4: 0,
                a5: 2
            }
        );
    }

    #[test]
    fn supernodes_on_the_current_path_are_not_read_again() {
        let d = figure_2_3();
        let s = Supernodes::build(&d, Grouping::Sequential, 45);
        // A B C D E F G: one read of ABCDE, one of FGHIJ.
        let touched: Vec<u32> = (0..7).collect();
        assert_eq!(supernode_reads(&d, &s, &touched), vec![0, 1]);
        // Back to C: G's ancestors D, B and A are in ABCDE, which is on the path.
        assert_eq!(supernode_reads(&d, &s, &[6, 2]), vec![1]);
        // From U (its own supernode; S, N and A above it are in PQRST, KLMNO, ABCDE)
        // K is on the path, F is not.
        assert_eq!(supernode_reads(&d, &s, &[20, 10]), vec![4]);
        assert_eq!(supernode_reads(&d, &s, &[20, 5]), vec![4, 1]);
    }
}
