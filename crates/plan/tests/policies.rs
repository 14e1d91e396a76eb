//! Hand-made graphs with answers worked by hand, one behaviour each.

use reblock_plan::{
    build_graphs, by_name, policies, Extent, MasterGraph, Placement, PlanParams, TargetSpace,
    Vertex, VertexId,
};
use reblock_trace::{Op, Request};

/// Vertices named by letters, one page each at page 10 * (index + 1), except `sizes`.
fn graph(names: &str, sizes: &[(char, u32)], edges: &[(char, char, u64)]) -> MasterGraph {
    let id = |c: char| names.find(c).unwrap() as VertexId;
    let vertices = names
        .chars()
        .enumerate()
        .map(|(i, c)| {
            let pages = sizes.iter().find(|s| s.0 == c).map_or(1, |s| s.1);
            Vertex {
                extent: Extent::new(80 * (i as u64 + 1), 8 * pages),
                hits: 1,
            }
        })
        .collect();
    let edges = edges.iter().map(|&(a, b, w)| (id(a), id(b), w)).collect();
    MasterGraph::from_edges(vertices, edges)
}

/// The letters of the first page of every vertex placed, in order.
fn letters(names: &str, p: &Placement) -> String {
    p.fs_pages()
        .iter()
        .filter(|page| *page % 10 == 0)
        .map(|page| names.as_bytes()[(page / 10 - 1) as usize] as char)
        .collect()
}

/// The Figure 5 weights of tests/golden.rs.
const FIG5: &[(char, char, u64)] = &[
    ('C', 'B', 9),
    ('G', 'C', 7),
    ('B', 'E', 6),
    ('A', 'G', 4),
    ('A', 'C', 3),
    ('E', 'D', 4),
    ('D', 'B', 1),
    ('J', 'A', 3),
    ('H', 'J', 2),
    ('F', 'H', 1),
];

fn params(read_cache_pages: Option<u64>, min_edge_weight: u64, k_window: usize) -> PlanParams {
    PlanParams {
        read_cache_pages,
        min_edge_weight,
        k_window,
        ..PlanParams::default()
    }
}

fn borg(g: &MasterGraph, p: PlanParams) -> Placement {
    by_name("borg").unwrap().plan(g, &p)
}

/// Two components: Figure 5 and P->Q 2, Q->R 2. The second group starts from Q (degree
/// 4); P and R tie at 2 and the lower LBA (P) goes first, before Q; R after.
#[test]
fn components_are_placed_as_separate_groups() {
    let mut edges = FIG5.to_vec();
    edges.extend([('P', 'Q', 2), ('Q', 'R', 2)]);
    let names = "ABCDEFGHJPQR";
    let g = graph(names, &[], &edges);
    assert_eq!(
        letters(names, &borg(&g, params(None, 1, 0))),
        "FHJAGCBEDPQR"
    );
}

/// Threshold 4: J (3), H (2) and F (1) are too weakly tied to join, and none of them has
/// an edge of weight 4 to start a group of its own.
#[test]
fn threshold_stops_at_light_edges() {
    let names = "ABCDEFGHJ";
    let g = graph(names, &[], FIG5);
    assert_eq!(letters(names, &borg(&g, params(None, 4, 0))), "AGCBED");
    assert_eq!(letters(names, &borg(&g, params(None, 3, 0))), "JAGCBED");
    // With 0 even an isolated vertex is placed, as a group of its own after the rest.
    let g = graph("ABCDEFGHJK", &[], FIG5);
    let p = borg(&g, params(None, 0, 0));
    assert_eq!(letters("ABCDEFGHJK", &p), "FHJAGCBEDK");
}

/// Capacity 4 pages: C, B, G, A are placed, then the cache is full.
#[test]
fn capacity_stops_when_the_read_cache_is_full() {
    let names = "ABCDEFGHJ";
    let g = graph(names, &[], FIG5);
    let p = borg(&g, params(Some(4), 1, 0));
    assert_eq!(letters(names, &p), "AGCB");
    assert_eq!(p.pages(), 4);
}

/// Capacity 5 with E three pages long: after C B G A (4 pages) E (score 6) does not fit
/// in the one page left and is left out rather than ending the run; J (J->A 3) then beats
/// D (D->B 1) for the last page.
#[test]
fn capacity_skips_a_vertex_that_does_not_fit() {
    let names = "ABCDEFGHJ";
    let g = graph(names, &[('E', 3)], FIG5);
    let p = borg(&g, params(Some(5), 1, 0));
    assert_eq!(letters(names, &p), "JAGCB");
    assert_eq!(p.pages(), 5);
}

/// C->B 9, Y->C 6, X->B 5. Whole-list scoring pulls X before the group through its edge
/// to B at the far end: [X Y C B]. With k = 1 only the end members count, so X is left
/// out of C's group and placed as its own group, to the right: [Y C B] [X]. In a 8-page
/// region the middle is page 4, where C goes.
#[test]
fn dlr_k_window_scores_only_the_nearest_members() {
    let names = "BCXY";
    let edges = [('C', 'B', 9), ('Y', 'C', 6), ('X', 'B', 5)];
    let g = graph(names, &[], &edges);
    let slots = |k| {
        let p = by_name("dlr-seq").unwrap().plan(&g, &params(Some(8), 1, k));
        let order = letters(names, &p);
        let slots: Vec<u64> = p.page_pairs().map(|x| x.1).collect();
        (order, slots)
    };
    assert_eq!(slots(0), ("XYCB".to_string(), vec![2, 3, 4, 5]));
    assert_eq!(slots(1), ("YCBX".to_string(), vec![3, 4, 5, 6]));
}

/// A group that grows only to one side of the middle would run past the region's edge:
/// the run is shifted inwards and nothing is dropped. In-star X->S 3, Y->S 2, Z->S 1 gives
/// [Z Y X S] with S (the seed) meant for the middle slot 2 of a 4-page region, 3 pages
/// before it: it starts at slot 0, not -1. The out-star S->X 3, S->Y 2, S->Z 1 gives
/// [S X Y Z], which would start at 2 and end past slot 3: it also starts at 0.
#[test]
fn dlr_seq_keeps_the_run_inside_the_region() {
    let names = "SXYZ";
    let dlr = by_name("dlr-seq").unwrap();
    let run = |edges: &[(char, char, u64)]| {
        let p = dlr.plan(&graph(names, &[], edges), &params(Some(4), 1, 0));
        let slots: Vec<u64> = p.page_pairs().map(|x| x.1).collect();
        (letters(names, &p), slots)
    };
    let into = run(&[('X', 'S', 3), ('Y', 'S', 2), ('Z', 'S', 1)]);
    assert_eq!(into, ("ZYXS".to_string(), vec![0, 1, 2, 3]));
    let out = run(&[('S', 'X', 3), ('S', 'Y', 2), ('S', 'Z', 1)]);
    assert_eq!(out, ("SXYZ".to_string(), vec![0, 1, 2, 3]));
}

fn read(sector: u64, sectors: u32) -> Request {
    Request {
        ts_ns: 0,
        pid: Some(1),
        command: 0,
        device: 0,
        sector,
        sectors,
        op: Op::Read,
    }
}

/// Page 5 and page 2 three times each, page 7 twice, pages 20-21 twice (one 16-sector
/// request each time), page 9 once. Most popular first, equal popularity in LBA order:
/// 2 5 | 7 20 21 | 9. With 5 pages of cache page 9 is left out.
#[test]
fn hot_places_the_most_accessed_pages_first() {
    let mut trace = Vec::new();
    for _ in 0..3 {
        trace.extend([read(40, 8), read(16, 8)]);
    }
    for _ in 0..2 {
        trace.extend([read(56, 8), read(160, 16)]);
    }
    trace.push(read(72, 8));
    let g = build_graphs(trace);
    let hot = by_name("hot").unwrap();
    let p = hot.plan(&g, &params(None, 1, 0));
    assert_eq!(p.fs_pages(), vec![2, 5, 7, 20, 21, 9]);
    let p = hot.plan(&g, &params(Some(5), 1, 0));
    assert_eq!(p.fs_pages(), vec![2, 5, 7, 20, 21]);
    let slots: Vec<u64> = p.page_pairs().map(|x| x.1).collect();
    assert_eq!(slots, vec![0, 1, 2, 3, 4]);
}

/// Unaligned requests: (4, 8) once and (8, 8) twice give vertices [4,8) 1 hit, [8,12) 3
/// hits, [12,16) 2 hits. Page 0 holds only [4,8): 1; page 1 holds [8,16): its busiest
/// sector has 3. So page 1 first, then page 0.
#[test]
fn hot_counts_a_shared_page_by_its_busiest_sector() {
    let g = build_graphs([read(4, 8), read(8, 8), read(8, 8)]);
    let p = by_name("hot").unwrap().plan(&g, &params(None, 1, 0));
    assert_eq!(p.fs_pages(), vec![1, 0]);
}

/// Two unaligned vertices sharing page 1 ([4,12) and [12,20), linked both ways): borg
/// places each page once.
#[test]
fn borg_places_a_shared_page_once() {
    let g = build_graphs([read(4, 8), read(12, 8), read(4, 8)]);
    assert_eq!(g.len(), 2);
    let p = borg(&g, params(None, 1, 0));
    // One edge each way: the degrees tie and the seed is the lower LBA, [4,12) (pages 0
    // and 1); [12,20) ties both ways, goes after, and brings only page 2.
    assert_eq!(p.fs_pages(), vec![0, 1, 2]);
}

#[test]
fn vanilla_places_nothing() {
    let g = graph("ABCDEFGHJ", &[], FIG5);
    let p = by_name("vanilla").unwrap().plan(&g, &PlanParams::default());
    assert!(p.ranges.is_empty());
}

#[test]
fn unknown_policy_names_the_known_ones() {
    let err = by_name("lru").err().unwrap();
    assert_eq!(
        err.to_string(),
        "unknown policy `lru` (known: vanilla, hot, borg, dlr-seq, dlr-frag, fs2, borg+fs2)"
    );
    let names: Vec<&str> = policies().iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        ["vanilla", "hot", "borg", "dlr-seq", "dlr-frag", "fs2", "borg+fs2"]
    );
}

#[test]
fn placement_round_trips_through_json() {
    let g = graph("ABCDEFGHJ", &[], FIG5);
    let p = by_name("dlr-frag")
        .unwrap()
        .plan(&g, &PlanParams::default());
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains("\"space\":\"data-area\""), "{json}");
    let back: Placement = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.space, TargetSpace::DataArea);
}

#[test]
fn zero_page_size_is_rejected_when_parsing_params() {
    let err = serde_json::from_str::<PlanParams>(
        r#"{"page_sectors":0,"read_cache_pages":null,"min_edge_weight":1,"k_window":0}"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("nonzero"), "{err}");
}
