//! The `reblock` binary: thin glue over the library crates. Each subcommand lives in its
//! own file under `cmd/`, with its clap arguments and a `run` function.

use clap::{Parser, Subcommand};

mod cmd;
mod input;
mod progress;

/// reblock: a self-optimizing block storage layer.
///
/// Data flows one way: record or import a trace, analyze it, plan a layout, then simulate
/// it on a device model or serve it over NBD.
#[derive(Parser)]
#[command(name = "reblock", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Log level filter (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Record a block device's requests with process context (tracefs) to a native trace.
    Record(cmd::record::Args),
    /// Convert a trace of any supported format to Parquet or native text.
    Convert(cmd::convert::Args),
    /// Characterize a workload: statistics, plots, and layout advice.
    Analyze(cmd::analyze::Args),
    /// Plan a layout from a trace with a policy (borg, hot, dlr-seq, dlr-frag, vanilla).
    Plan(cmd::plan::Args),
    /// Replay a trace on a modelled HDD, SSD or array and report busy and response times.
    Simulate(cmd::simulate::Args),
    /// Compare layout policies by replaying a trace with periodic reconfiguration.
    Evaluate(cmd::evaluate::Args),
    /// Serve a backing image over NBD, applying the layout online.
    Serve(cmd::serve::Args),
    /// Show a running server's state (JSON over its control socket).
    Status(cmd::status::Args),
    /// Copy every dirty page home so the data area alone is the complete image.
    Detach(cmd::detach::Args),
    /// Verify an image's on-disk optimized region offline (--repair rebuilds what it can).
    Check(cmd::check::Args),
    /// Apply an offline plan (plan.json) to a running server.
    Reconfigure(cmd::reconfigure::Args),
    /// Mine the frequent block pairs of a trace (the parallel-array optimizer's sessions
    /// and pair counts), as JSON for scripts or for a cluster job to be checked against.
    Pairs(cmd::pairs::Args),
    /// Build BORG's access graph of a trace (per-process graphs merged with range
    /// splitting, as the borg policy learns it), as JSON for scripts or a cluster job.
    Graph(cmd::graph::Args),
    /// List the trace formats reblock reads.
    Formats(cmd::formats::Args),
    /// Print the free extents of an ext2/3/4 image, read from its block bitmaps.
    Freemap(cmd::freemap::Args),
    /// Analyze a bundled real trace and write its report: the quickest look at reblock.
    Demo(cmd::demo::Args),
    /// Lay out an XML document on a disk model (default vs tree layouts) and measure queries.
    Tree(cmd::tree::Args),
    /// Send a trace's reads and writes to an NBD export and report latency and throughput.
    Replay(cmd::replay::Args),
}

/// Has the allocator give freed memory back to the system as it is freed. glibc serves an
/// allocation below its mmap threshold from heaps it keeps after a free, and raises that
/// threshold (up to 32 MiB) each time a mapped block is freed. `evaluate` frees and
/// remakes tables of tens to hundreds of MB at every reconfiguration (a plan's graph, its
/// trials' layouts and replays), so the process kept each boundary's high-water mark as
/// resident memory. A fixed 128 KiB threshold maps such tables on their own and unmaps
/// them when freed (docs/scale.md, "The allocator": 8·10^6 requests, 362 -> 306 MB peak
/// at the same CPU). Set before any thread starts; `MALLOC_MMAP_THRESHOLD_` and
/// `MALLOC_TRIM_THRESHOLD_` in the environment are overridden.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_freed_memory() {
    const THRESHOLD: libc::c_int = 128 * 1024;
    // SAFETY: mallopt only sets the allocator's parameters; no allocation is in flight.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD);
    }
}

fn main() {
    let cli = Cli::parse();
    // Not for `serve`: its I/O buffers of 128 KiB and more would each be mapped and
    // unmapped, where glibc's adaptive threshold reuses them; nothing measured it there.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !matches!(cli.command, Command::Serve(_)) {
        return_freed_memory();
    }
    if !matches!(cli.command, Command::Serve(_)) {
        die_quietly_on_closed_pipe();
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&cli.log));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Log files and pipes get plain text; NO_COLOR turns colour off on terminals too.
        .with_ansi(progress::stderr_wants_colour())
        .init();
    let result = match cli.command {
        Command::Record(a) => cmd::record::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Evaluate(a) => cmd::evaluate::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Detach(a) => cmd::detach::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Reconfigure(a) => cmd::reconfigure::run(a),
        Command::Pairs(a) => cmd::pairs::run(a),
        Command::Graph(a) => cmd::graph::run(a),
        Command::Formats(a) => cmd::formats::run(a),
        Command::Freemap(a) => cmd::freemap::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Tree(a) => cmd::tree::run(a),
        Command::Replay(a) => cmd::replay::run(a),
    };
    if let Err(e) = result {
        eprintln!("reblock: error: {}", render(&e));
        std::process::exit(1);
    }
}

/// `reblock analyze T | head` should end quietly when `head` exits, as `cat` does: the
/// Rust runtime ignores SIGPIPE, so every print to the closed pipe would panic instead.
/// Restoring the default action ends the process silently (status 141, as shells expect).
/// `serve` keeps ignoring it: a client hanging up must not kill the server.
fn die_quietly_on_closed_pipe() {
    // SAFETY: called at the start of main, before any thread exists; setting a signal's
    // action to its default is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The error and its causes joined by ": ", leaving out a cause whose text the message
/// already holds (errors that embed their source would otherwise print it twice).
fn render(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
