//! The seeds' worked examples, reconstructed from their prose (the figures themselves are
//! missing from the text).

use reblock_plan::{
    build_graphs, by_name, Extent, MasterGraph, PlanParams, TargetSpace, Vertex, VertexId,
};
use reblock_trace::{Op, Request};

fn req(pid: u32, command: u32, sector: u64, sectors: u32) -> Request {
    Request {
        ts_ns: 0,
        pid: Some(pid),
        command,
        device: 0,
        sector,
        sectors,
        op: Op::Read,
    }
}

/// Seed 001 §3.4.2, Figure 3.5. The prose fixes r1 = (LBA 0, size 3) and s1 = (LBA 1,
/// size 2): "r1 is split into two vertices, one with size 1 and the other with the
/// overlapping s1 blocks, starting at LBA 1 with size 2", and the edge between the two
/// pieces of r1 carries r1's weight. We add, as the figure's "likewise, all the
/// overlapping vertices are split", a partial overlap r2 = (4, 4) / s2 = (6, 4) that
/// needs the three-way split J = U - V, I = U ∩ V, K = V - U of Algorithm 4 (whose
/// `i = U ∪ V` can only mean the intersection). Process r reads r1 r2 r1 r2, process s
/// reads s1 s2. Expected master graph, worked by hand with Algorithm 4 lines 7-9:
///
/// vertices  a=(0,1) b=(1,2) c=(4,2) d=(6,2) e=(8,2); hits 2 3 2 3 1
/// r1 -> r2 (2): last piece of r1 (b) -> first piece of r2 (c)      b->c 2
/// r2 -> r1 (1): last piece of r2 (d) -> first piece of r1 (a)      d->a 1
/// s1 -> s2 (1): s1 is whole (b) -> first piece of s2 (d)            b->d 1
/// chain r1: max(in 1, out 2) = 2                                    a->b 2
/// chain r2: max(in 2, out 1) = 2                                    c->d 2
/// chain s2: max(in 1, out 0) = 1                                    d->e 1
#[test]
fn master_graph_splits_overlaps_as_in_seed_001_figure_3_5() {
    let (r, s) = (1, 2);
    let trace = [
        req(10, r, 0, 3),
        req(20, s, 1, 2),
        req(10, r, 4, 4),
        req(20, s, 6, 4),
        req(10, r, 0, 3),
        req(10, r, 4, 4),
    ];
    let g = build_graphs(trace);
    let extents: Vec<(u64, u32, u64)> = g
        .vertices()
        .iter()
        .map(|v| (v.extent.start_sector, v.extent.sectors, v.hits))
        .collect();
    assert_eq!(
        extents,
        vec![(0, 1, 2), (1, 2, 3), (4, 2, 2), (6, 2, 3), (8, 2, 1)]
    );
    let (a, b, c, d, e) = (0, 1, 2, 3, 4);
    let edges: Vec<_> = g.edges().collect();
    assert_eq!(
        edges,
        vec![
            (a, b, 2),
            (b, c, 2),
            (b, d, 1),
            (c, d, 2),
            (d, a, 1),
            (d, e, 1)
        ]
    );
    assert_eq!(g.processes(), 2);
    assert_eq!(g.requests(), 6);
    // Every requested sector is in exactly one vertex; sector 3 was never requested.
    assert_eq!(g.vertex_at(3), None);
    assert_eq!(g.vertex_at(2), Some(b));
    assert_eq!(g.vertex_at(9), Some(e));
    assert_eq!(g.vertex_at(10), None);
}

const LETTERS: [&str; 9] = ["A", "B", "C", "D", "E", "F", "G", "H", "J"];

/// Seed 000 §4.3 / Figure 5 (= seed 001 Figure 3.6 = seed 002 Figure 2). The text gives
/// the vertices A..J (no I), that C is the most connected vertex, that B joins after C
/// through C's heaviest edge (outgoing), that G joins before {C, B} through an incoming
/// edge, and the final order. The weights are not in the text; we assumed:
///
///   C->B 9, G->C 7, B->E 6, A->G 4, A->C 3, E->D 4, D->B 1, J->A 3, H->J 2, F->H 1
///
/// Degrees: C 19 (the maximum), B 16, G 11, A 10, E 10, D 5, J 5, H 3, F 1. By hand:
/// [C]; B after (C->B 9 beats G->C 7); G before (7 vs B->E 6); A before (A->G 4 + A->C 3
/// = 7: only the sum to the group beats E's 6); E after (6); D after (E->D 4 > D->B 1);
/// J, H, F before (3, 2, 1). Each vertex is one page; vertex X sits at page 10 * (X + 1).
fn figure_5() -> MasterGraph {
    let vertices = (0..9u64)
        .map(|i| Vertex {
            extent: Extent::new(80 * (i + 1), 8),
            hits: 1,
        })
        .collect();
    let v = |name: &str| LETTERS.iter().position(|l| *l == name).unwrap() as VertexId;
    let edges = [
        ("C", "B", 9),
        ("G", "C", 7),
        ("B", "E", 6),
        ("A", "G", 4),
        ("A", "C", 3),
        ("E", "D", 4),
        ("D", "B", 1),
        ("J", "A", 3),
        ("H", "J", 2),
        ("F", "H", 1),
    ];
    let edges = edges.iter().map(|&(a, b, w)| (v(a), v(b), w)).collect();
    MasterGraph::from_edges(vertices, edges)
}

fn letters_of_pages(pages: &[u64]) -> Vec<&'static str> {
    pages
        .iter()
        .map(|p| LETTERS[(p / 10 - 1) as usize])
        .collect()
}

#[test]
fn borg_reproduces_seed_000_figure_5_order() {
    let g = figure_5();
    let p = by_name("borg").unwrap().plan(&g, &PlanParams::default());
    assert_eq!(
        letters_of_pages(&p.fs_pages()),
        ["F", "H", "J", "A", "G", "C", "B", "E", "D"]
    );
    assert_eq!(p.space, TargetSpace::ReadCache);
    let targets: Vec<u64> = p.page_pairs().map(|x| x.1).collect();
    assert_eq!(targets, (0..9).collect::<Vec<_>>());
}

/// Seed 002 Figure 6 on the same graph: C goes to the middle page of S and the others
/// around it. With S = 16 pages the middle is 8, five vertices precede C, so F lands on 3
/// and D on 11.
#[test]
fn dlr_seq_places_figure_5_from_the_middle_outwards() {
    let g = figure_5();
    let params = PlanParams {
        read_cache_pages: Some(16),
        ..PlanParams::default()
    };
    let p = by_name("dlr-seq").unwrap().plan(&g, &params);
    let pairs: Vec<(&str, u64)> = p
        .page_pairs()
        .map(|(page, slot)| (letters_of_pages(&[page])[0], slot))
        .collect();
    let expected = [
        ("F", 3),
        ("H", 4),
        ("J", 5),
        ("A", 6),
        ("G", 7),
        ("C", 8),
        ("B", 9),
        ("E", 10),
        ("D", 11),
    ];
    assert_eq!(pairs, expected);
}

/// dlr-frag keeps the order but reuses the pages the vertices already occupy: the i-th
/// vertex of [F H J A G C B E D] moves to the i-th lowest page (10, 20, ..., 90).
#[test]
fn dlr_frag_permutes_figure_5_into_its_own_pages() {
    let g = figure_5();
    let p = by_name("dlr-frag")
        .unwrap()
        .plan(&g, &PlanParams::default());
    assert_eq!(p.space, TargetSpace::DataArea);
    let pairs: Vec<(&str, u64)> = p
        .page_pairs()
        .map(|(page, target)| (letters_of_pages(&[page])[0], target))
        .collect();
    let order = ["F", "H", "J", "A", "G", "C", "B", "E", "D"];
    let expected: Vec<(&str, u64)> = order
        .iter()
        .enumerate()
        .map(|(i, l)| (*l, 10 * (i as u64 + 1)))
        .collect();
    assert_eq!(pairs, expected);
}
