//! One file per subcommand: its arguments and its `run`.

pub mod analyze;
pub mod check;
pub mod convert;
pub mod demo;
pub mod detach;
pub mod evaluate;
pub mod evaluate_array;
pub mod formats;
pub mod freemap;
pub mod pairs;
pub mod plan;
pub mod reconfigure;
pub mod record;
pub mod replay;
pub mod serve;
pub mod serve_free;
pub mod simulate;
pub mod status;
pub mod tree;
