//! The XML reader of `reblock tree`: arbitrary bytes are a document or a positioned error,
//! never a panic; a document that parses is a consistent tree that every grouping covers
//! and that queries can walk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reblock_tree::doc::{parse, NONE};
use reblock_tree::group::{Grouping, Supernodes};
use reblock_tree::xpath::Query;

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = parse(data, "fuzz.xml") else {
        return;
    };
    for v in 0..doc.len() as u32 {
        let n = doc.node(v);
        for c in doc.children(v) {
            assert_eq!(doc.node(c).parent, v);
            assert!(c > v, "children come after their parent in document order");
        }
        assert!(n.parent == NONE || n.parent < v);
    }
    for g in Grouping::ALL {
        // A block of 64 bytes makes many nodes larger than one block.
        let sn = Supernodes::build(&doc, g, 64);
        let nodes: u64 = sn.list.iter().map(|s| s.nodes as u64).sum();
        assert_eq!(nodes, doc.len() as u64, "{g:?}");
        assert!(sn.of_node.iter().all(|&s| (s as usize) < sn.len()), "{g:?}");
        // The supernode tree lists parents before children (placement relies on it).
        for (s, node) in sn.list.iter().enumerate() {
            assert!(node.parent == NONE || (node.parent as usize) < s, "{g:?}");
        }
    }
    for q in ["//*", "/*/*", "/*/*[@id]/*"] {
        let (touched, result) = Query::parse(q).unwrap().run(&doc);
        assert!(result.len() <= touched.len());
    }
});
