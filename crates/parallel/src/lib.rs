//! The parallel-array layout optimizer of seed 003 ("Dynamic Data Layout Optimization for
//! High Performance Parallel I/O") and its evaluation.
//!
//! Pipeline (seed 003 Figure 3): [`session`] groups requested blocks into sessions
//! (§IV-A); [`mining`] counts the block pairs of sessions with a minimum support (§IV-B);
//! [`graph`] is the correlation graph and [`colouring`] the min-conflict bin-packing
//! heuristic of Algorithm 1 (§IV-C); [`reorganize`] maps colours to disks moving the
//! fewest bytes (§IV-D); [`grouping`] is the HDD optimization (§IV-E); [`plan`] chains
//! them. [`evaluate`] reproduces §V: a Zipf-like initial placement ([`zipf`]), training
//! on the first part of a trace and replaying the rest on an explicit-placement array;
//! [`report`] draws the per-alpha figures and the cost tables.

pub mod colouring;
pub mod evaluate;
pub mod graph;
pub mod grouping;
pub mod mining;
pub mod output;
pub mod pairs;
pub mod plan;
pub mod reorganize;
pub mod report;
pub mod session;
pub mod zipf;

pub use evaluate::{
    evaluate_array, evaluate_array_with_pairs, ArrayEvalConfig, ArraySpec, Policy, Progress,
};
pub use output::{ArrayEvalOutput, ArrayRun, PolicyResult};
pub use pairs::{mine_pairs, MinedPair, MinedPairs, PairMining, PairsFile, PairsFileError};

/// Errors of an evaluation: a bad setting (naming the flag) or a failed replay.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("replay: {0}")]
    Sim(#[from] reblock_sim::SimError),
    #[error(transparent)]
    PairsFile(#[from] PairsFileError),
    #[error("report: {0}")]
    Io(#[from] std::io::Error),
}
