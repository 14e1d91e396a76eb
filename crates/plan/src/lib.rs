//! Access graphs and layout planning.
//!
//! [`build_graphs`] turns a request stream into per-process access graphs and merges them
//! into the master access graph with range splitting (seed 000 §4.2, seed 001 §3.4.2,
//! seed 002 §3). A [`Policy`] turns the master graph into a [`Placement`]: which FS pages
//! go where, in order. Policies: `vanilla`, `hot` (seed 001 §3.6.6), `borg` (seed 000
//! §4.3), `dlr-seq` and `dlr-frag` (seed 002 §4, §6.1).
//!
//! ```
//! use reblock_plan::{build_graphs, by_name, PlanParams};
//! use reblock_trace::{Op, Request};
//!
//! let r = |sector| Request { ts_ns: 0, pid: Some(1), command: 0, device: 0,
//!                            sector, sectors: 8, op: Op::Read };
//! let graph = build_graphs([r(800), r(16), r(800), r(16)]);
//! let placement = by_name("borg").unwrap().plan(&graph, &PlanParams::default());
//! // 800 -> 16 twice, 16 -> 800 once: page 100 goes first, page 2 after it.
//! assert_eq!(placement.fs_pages(), vec![100, 2]);
//! ```

pub mod convert;
pub mod edges;
pub mod graph;
pub mod group;
pub mod learning;
pub mod master;
pub mod placement;
pub mod policy;

pub use convert::NotReadCache;
pub use graph::{Extent, GraphOptions, ProcessGraphs, ProcessKey};
pub use learning::{LearningError, LearningState, ParkedState};
pub use master::{build_graphs, MasterGraph, Vertex, VertexId};
pub use placement::{PlacedRange, Placement, PlanParams, TargetSpace};
pub use policy::{by_name, policies, replica_ranges, Capabilities, Policy, UnknownPolicy};
