//! One document measured end to end: the three groupings, the five layouts, every query
//! replayed on each layout (alone, and interleaved groups under an anticipatory
//! scheduler), and the analytic model.

use std::collections::HashMap;

use reblock_device::{DevRequest, Hdd};
use reblock_sim::{replay_streams, StreamsConfig, StreamsReport};
use serde::Serialize;

use crate::access::{classify_all, supernode_reads, Accesses, Links};
use crate::doc::Document;
use crate::error::TreeError;
use crate::group::{Grouping, GroupingSummary, Supernodes};
use crate::model::Model;
use crate::place::{place, Layout, Placement};
use crate::xpath::Query;

/// Track regions per track of the optimized placement: a quarter track, as in the
/// chapter's experiments.
pub const TRACK_REGIONS: u64 = 4;

/// The layouts: JSON key, grouping, placement. The chapter's five, and the level-order
/// layout of the breadth-first grouping, for queries that go on from every node of a
/// sibling run to its children ("every item's name").
pub const LAYOUTS: [(&str, Grouping, Placement); 6] = [
    ("default", Grouping::Sequential, Placement::Default),
    ("seq-ts", Grouping::Sequential, Placement::Tree),
    ("tp-ts", Grouping::TreePreserving, Placement::Tree),
    ("ekm-ts", Grouping::Ekm, Placement::Tree),
    ("ekm-ots", Grouping::Ekm, Placement::Optimized),
    ("bf-level", Grouping::BreadthFirst, Placement::LevelOrder),
];

/// A query with an optional short name (D1, N5, ...).
#[derive(Clone, Debug)]
pub struct NamedQuery {
    pub name: String,
    pub query: Query,
}

#[derive(Clone, Debug)]
pub struct StudyConfig {
    pub block_bytes: u64,
    /// Think times in ms between a read and the next, used in turn; their 95th
    /// percentile skews first children.
    pub think_ms: Vec<f64>,
    pub queries: Vec<NamedQuery>,
    /// Groups of query indexes replayed together.
    pub interleave: Vec<(String, Vec<usize>)>,
    pub anticipation_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct DocumentSummary {
    pub name: String,
    pub nodes: usize,
    pub bytes: u64,
    pub height: u32,
    pub mean_fanout: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Groupings {
    pub sequential: GroupingSummary,
    #[serde(rename = "tree-preserving")]
    pub tree_preserving: GroupingSummary,
    pub ekm: GroupingSummary,
    #[serde(rename = "breadth-first")]
    pub breadth_first: GroupingSummary,
}

impl Groupings {
    /// (JSON key, summary) of every grouping.
    pub fn iter(&self) -> [(&'static str, &GroupingSummary); 4] {
        [
            ("sequential", &self.sequential),
            ("tree-preserving", &self.tree_preserving),
            ("ekm", &self.ekm),
            ("breadth-first", &self.breadth_first),
        ]
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct QueryResult {
    pub query: String,
    pub name: String,
    /// Disk busy time of the query's reads, replayed alone on a cold drive.
    pub io_time_ms: f64,
    pub reads: u64,
    pub accesses: Accesses,
    pub seek_ms: f64,
    pub rotate_ms: f64,
    pub transfer_ms: f64,
    /// The analytic model's prediction from the access counts (eq. 2.9 / 2.10; for
    /// `bf-level`, which the chapter does not model, the tree-structured access times).
    pub model_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct InterleavedResult {
    pub name: String,
    pub queries: Vec<String>,
    /// Disk busy time under the anticipatory scheduler.
    pub io_time_ms: f64,
    pub makespan_ms: f64,
    /// Disk busy time first come, first served, for comparison.
    pub fcfs_io_time_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LayoutResult {
    pub grouping: Grouping,
    pub placement: Placement,
    /// Why the layout could not be built (the drive is too small for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub span_sectors: u64,
    /// Free sectors inside the layout's span, as a fraction of it.
    pub external_fragmentation: f64,
    pub queries: Vec<QueryResult>,
    pub interleaved: Vec<InterleavedResult>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Layouts {
    pub default: LayoutResult,
    #[serde(rename = "seq-ts")]
    pub seq_ts: LayoutResult,
    #[serde(rename = "tp-ts")]
    pub tp_ts: LayoutResult,
    #[serde(rename = "ekm-ts")]
    pub ekm_ts: LayoutResult,
    #[serde(rename = "ekm-ots")]
    pub ekm_ots: LayoutResult,
    #[serde(rename = "bf-level")]
    pub bf_level: LayoutResult,
}

impl Layouts {
    /// (key, result) in the order of [`LAYOUTS`].
    pub fn iter(&self) -> [(&'static str, &LayoutResult); 6] {
        [
            ("default", &self.default),
            ("seq-ts", &self.seq_ts),
            ("tp-ts", &self.tp_ts),
            ("ekm-ts", &self.ekm_ts),
            ("ekm-ots", &self.ekm_ots),
            ("bf-level", &self.bf_level),
        ]
    }
}

/// The fastest tree layout (any but `default`) for one query.
#[derive(Clone, Debug, Serialize)]
pub struct BestTreeLayout {
    pub query: String,
    pub name: String,
    pub layout: &'static str,
    pub io_time_ms: f64,
    pub default_ms: f64,
    /// `default_ms / io_time_ms`: above 1, the tree layout is faster.
    pub speedup: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Study {
    pub document: DocumentSummary,
    pub device: String,
    pub block_size: u64,
    pub think_skew_ms: f64,
    pub groupings: Groupings,
    pub layouts: Layouts,
    /// Per query, in order: the tree layout that serves it fastest.
    pub best_tree_layouts: Vec<BestTreeLayout>,
    pub model: Model,
}

/// The 95th percentile of a sample (0 for none).
pub fn percentile_95(sample: &[f64]) -> f64 {
    let mut s = sample.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(((s.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0.0)
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Replays read sequences as synchronous streams on a cold copy of `hdd`.
fn replay(
    hdd: &Hdd,
    layout: &Layout,
    sn: &Supernodes,
    streams: &[&[u32]],
    cfg: &StreamsConfig,
) -> StreamsReport {
    let requests: Vec<Vec<DevRequest>> = streams
        .iter()
        .map(|reads| {
            reads
                .iter()
                .map(|&s| DevRequest {
                    sector: layout.sector_of[s as usize],
                    sectors: (sn.list[s as usize].blocks as u64 * layout.sectors_per_block) as u32,
                    write: false,
                })
                .collect()
        })
        .collect();
    let mut dev = hdd.clone();
    replay_streams(&mut dev, &requests, cfg)
}

struct Context<'a> {
    doc: &'a Document,
    hdd: &'a Hdd,
    cfg: &'a StudyConfig,
    streams: StreamsConfig,
    think_skew_ns: f64,
    touched: Vec<Vec<u32>>,
    model: Model,
}

fn measure_layout(
    cx: &Context<'_>,
    sn: &Supernodes,
    reads: &[Vec<u32>],
    placement: Placement,
) -> LayoutResult {
    let mut out = LayoutResult {
        grouping: sn.grouping,
        placement,
        error: None,
        span_sectors: 0,
        external_fragmentation: 0.0,
        queries: Vec::new(),
        interleaved: Vec::new(),
    };
    let layout = match place(sn, placement, cx.hdd, cx.think_skew_ns) {
        Ok(l) => l,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    out.span_sectors = layout.span_sectors;
    out.external_fragmentation = layout.external_fragmentation;
    let links = match placement {
        Placement::Default => Links::List,
        _ => Links::Tree(sn),
    };
    for (q, r) in cx.cfg.queries.iter().zip(reads) {
        let rep = replay(cx.hdd, &layout, sn, &[r], &cx.streams);
        let accesses = classify_all(links, r);
        out.queries.push(QueryResult {
            query: q.query.text.clone(),
            name: q.name.clone(),
            io_time_ms: ms(rep.busy_ns),
            reads: rep.ios,
            accesses,
            seek_ms: ms(rep.seek_ns),
            rotate_ms: ms(rep.rotate_ns),
            transfer_ms: ms(rep.transfer_ns),
            model_ms: cx
                .model
                .predict_ms(&accesses, placement != Placement::Default),
        });
    }
    let fcfs = StreamsConfig {
        anticipation_ns: 0,
        ..cx.streams.clone()
    };
    for (name, group) in &cx.cfg.interleave {
        let streams: Vec<&[u32]> = group.iter().map(|&i| reads[i].as_slice()).collect();
        let a = replay(cx.hdd, &layout, sn, &streams, &cx.streams);
        let f = replay(cx.hdd, &layout, sn, &streams, &fcfs);
        out.interleaved.push(InterleavedResult {
            name: name.clone(),
            queries: group
                .iter()
                .map(|&i| cx.cfg.queries[i].name.clone())
                .collect(),
            io_time_ms: ms(a.busy_ns),
            makespan_ms: ms(a.makespan_ns),
            fcfs_io_time_ms: ms(f.busy_ns),
        });
    }
    out
}

/// The analytic model for `doc` on `hdd`: span and tree shape of the tree-preserving
/// grouping, as in the chapter's example.
fn model_for(hdd: &Hdd, tp: &Supernodes, block_sectors: u64) -> Model {
    let sectors = tp.total_blocks() * block_sectors;
    let last = hdd.geometry().locate(sectors.saturating_sub(1));
    let s = tp.summary();
    Model::new(
        hdd,
        last.cylinder as f64 + 1.0,
        s.tree_fanout,
        s.tree_height,
        block_sectors,
        TRACK_REGIONS as f64,
    )
}

/// For each query, the tree layout (built, not `default`) with the least I/O time.
fn best_tree_layouts(layouts: &Layouts) -> Vec<BestTreeLayout> {
    let all = layouts.iter();
    let (_, default) = all[0];
    default
        .queries
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let (layout, q) = all[1..]
                .iter()
                .filter(|(_, l)| l.error.is_none())
                .filter_map(|(key, l)| Some((*key, l.queries.get(i)?)))
                .min_by(|a, b| a.1.io_time_ms.total_cmp(&b.1.io_time_ms))?;
            Some(BestTreeLayout {
                query: d.query.clone(),
                name: d.name.clone(),
                layout,
                io_time_ms: q.io_time_ms,
                default_ms: d.io_time_ms,
                speedup: d.io_time_ms / q.io_time_ms.max(1e-9),
            })
        })
        .collect()
}

/// Measures `doc` (named `name`) on `hdd` (named `device`); `progress` hears each stage.
pub fn run(
    doc: &Document,
    name: &str,
    hdd: &Hdd,
    device: &str,
    cfg: &StudyConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<Study, TreeError> {
    if cfg.block_bytes == 0 || !cfg.block_bytes.is_multiple_of(512) {
        return Err(TreeError::BlockSize {
            bytes: cfg.block_bytes,
            message: "must be a positive multiple of 512 (the drive's sector)".into(),
        });
    }
    let think_skew_ms = percentile_95(&cfg.think_ms);
    let groups: HashMap<Grouping, Supernodes> = Grouping::ALL
        .into_iter()
        .map(|g| {
            progress(&format!("grouping: {}", g.name()));
            (g, Supernodes::build(doc, g, cfg.block_bytes))
        })
        .collect();
    progress("evaluating queries");
    let cx = Context {
        doc,
        hdd,
        cfg,
        streams: StreamsConfig {
            think_ns: cfg
                .think_ms
                .iter()
                .map(|t| (t * 1e6).round() as u64)
                .collect(),
            anticipation_ns: (cfg.anticipation_ms * 1e6).round() as u64,
            ..StreamsConfig::default()
        },
        think_skew_ns: think_skew_ms * 1e6,
        touched: cfg.queries.iter().map(|q| q.query.run(doc).0).collect(),
        model: model_for(
            hdd,
            &groups[&Grouping::TreePreserving],
            cfg.block_bytes / 512,
        ),
    };
    let reads: HashMap<Grouping, Vec<Vec<u32>>> = groups
        .iter()
        .map(|(g, sn)| {
            let r = cx
                .touched
                .iter()
                .map(|t| supernode_reads(cx.doc, sn, t))
                .collect();
            (*g, r)
        })
        .collect();
    let mut results: Vec<LayoutResult> = LAYOUTS
        .iter()
        .map(|(key, g, p)| {
            progress(&format!("layout {key}: placing and replaying"));
            measure_layout(&cx, &groups[g], &reads[g], *p)
        })
        .collect();
    let mut take = || results.remove(0);
    let layouts = Layouts {
        default: take(),
        seq_ts: take(),
        tp_ts: take(),
        ekm_ts: take(),
        ekm_ots: take(),
        bf_level: take(),
    };
    Ok(Study {
        best_tree_layouts: best_tree_layouts(&layouts),
        document: DocumentSummary {
            name: name.to_string(),
            nodes: doc.len(),
            bytes: doc.total_bytes(),
            height: doc.height(),
            mean_fanout: doc.mean_fanout(),
        },
        device: device.to_string(),
        block_size: cfg.block_bytes,
        think_skew_ms,
        groupings: Groupings {
            sequential: groups[&Grouping::Sequential].summary(),
            tree_preserving: groups[&Grouping::TreePreserving].summary(),
            ekm: groups[&Grouping::Ekm].summary(),
            breadth_first: groups[&Grouping::BreadthFirst].summary(),
        },
        layouts,
        model: cx.model,
    })
}
