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
pub mod graph;
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

/// A command's flags parsed from `argv` (its name first), as the command line would.
#[cfg(test)]
pub(crate) fn parse_flags<A: clap::Args + clap::FromArgMatches>(argv: &[&str]) -> A {
    let cmd = A::augment_args(clap::Command::new("reblock"));
    A::from_arg_matches(&cmd.get_matches_from(argv)).expect("the flags parse")
}
