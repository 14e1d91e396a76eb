//! One file per subcommand: its arguments and its `run`.

pub mod analyze;
pub mod convert;
pub mod demo;
pub mod formats;
pub mod record;
pub mod simulate;
