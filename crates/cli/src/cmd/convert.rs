//! `reblock convert`: any supported trace to Parquet (for pandas, polars, DuckDB, Spark) or
//! to native text (seed 002's profiler format), streaming in bounded memory.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use reblock_trace::format::native::write_line_with_device;
use reblock_trace::parquet::{Codec, ParquetWriter, TraceMeta};
use reblock_trace::{Commands, Request, TraceError, TraceReader};

use crate::input::{is_stdio, report_bad_lines, TraceInput};
use crate::progress::Progress;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFormat {
    /// Columnar Parquet, one row per request (compression: see --compression).
    Parquet,
    /// Native text: `<ts_ns> <pid> <command> <sector> <sectors> <R|W>` per line.
    Native,
}

impl OutFormat {
    fn name(self) -> &'static str {
        match self {
            OutFormat::Parquet => "parquet",
            OutFormat::Native => "native",
        }
    }

    /// `.parquet` means Parquet; any other name native text.
    fn from_extension(path: &Path) -> OutFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("parquet") => OutFormat::Parquet,
            _ => OutFormat::Native,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: TraceInput,
    /// Output file: `.parquet` is written as Parquet, any other name as native text; `-`
    /// writes to standard output (native text unless --to parquet), and the summary then
    /// goes to standard error.
    pub out: PathBuf,
    /// Output format, overriding what OUT's extension says.
    #[arg(long, value_enum)]
    pub to: Option<OutFormat>,
    /// Parquet compression [default: zstd]. Times and sectors are delta-encoded whatever
    /// the codec.
    #[arg(long, value_enum)]
    pub compression: Option<Compression>,
    /// Print the summary as one JSON object on stdout (for scripts).
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// The smallest files.
    Zstd,
    /// Reads about 25% faster than zstd; files about 10% larger (LZ4_RAW).
    Lz4,
    /// For old Parquet readers.
    Snappy,
    /// The fastest to read; files about 50% larger than zstd's.
    None,
}

impl From<Compression> for Codec {
    fn from(c: Compression) -> Codec {
        match c {
            Compression::Zstd => Codec::Zstd,
            Compression::Lz4 => Codec::Lz4,
            Compression::Snappy => Codec::Snappy,
            Compression::None => Codec::None,
        }
    }
}

enum Sink {
    Parquet(Box<ParquetWriter<File>>),
    Native(BufWriter<Box<dyn Write>>),
}

/// Standard output as a file of its own (Parquet's writer wants an owned file).
fn stdout_file() -> Result<File> {
    use std::os::fd::AsFd;
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("standard output")?;
    Ok(File::from(fd))
}

impl Sink {
    fn create(path: &Path, format: OutFormat, codec: Codec, meta: &TraceMeta) -> Result<Sink> {
        let file = || -> Result<File> {
            if is_stdio(path) {
                stdout_file()
            } else {
                File::create(path).with_context(|| format!("{}", path.display()))
            }
        };
        Ok(match format {
            OutFormat::Parquet => Sink::Parquet(Box::new(ParquetWriter::with_meta(
                file()?,
                path,
                codec,
                meta,
            )?)),
            OutFormat::Native => {
                let out: Box<dyn Write> = Box::new(file()?);
                Sink::Native(BufWriter::with_capacity(1 << 20, out))
            }
        })
    }

    fn push(&mut self, r: Request, commands: &Commands, path: &Path) -> Result<()> {
        match self {
            Sink::Parquet(w) => w.push(r, commands)?,
            Sink::Native(w) => write_line_with_device(w, &r, commands.name(r.command))
                .with_context(|| format!("{}", path.display()))?,
        }
        Ok(())
    }

    fn finish(self, commands: &Commands, path: &Path) -> Result<()> {
        match self {
            Sink::Parquet(w) => {
                w.finish(commands)?;
            }
            Sink::Native(mut w) => w.flush().with_context(|| format!("{}", path.display()))?,
        }
        Ok(())
    }
}

/// Streams every request of `reader` into `sink`; returns how many.
fn copy(reader: &mut TraceReader, sink: &mut Sink, out: &Path, bar: &mut Progress) -> Result<u64> {
    let mut n = 0u64;
    while let Some(r) = reader.next_request()? {
        sink.push(r, reader.commands(), out)?;
        n += 1;
        if n.is_multiple_of(65_536) {
            bar.set_position(n);
        }
    }
    Ok(n)
}

pub fn run(args: Args) -> Result<()> {
    let to = args
        .to
        .unwrap_or_else(|| OutFormat::from_extension(&args.out));
    if to == OutFormat::Native && args.compression.is_some() {
        anyhow::bail!(
            "--compression applies to Parquet output; {} is written as native text \
             (name it .parquet or add --to parquet)",
            args.out.display()
        );
    }
    let codec = args.compression.map(Codec::from).unwrap_or_default();
    let (mut reader, mut progress) = args.input.open_with_progress("converting")?;
    let meta = trace_meta(&reader)?;
    let mut sink = Sink::create(&args.out, to, codec, &meta)?;
    let result = copy(&mut reader, &mut sink, &args.out, &mut progress).and_then(|n| {
        sink.finish(reader.commands(), &args.out)?;
        Ok(n)
    });
    progress.finish();
    let requests = match result {
        Ok(0) => Err(TraceError::Empty {
            path: reader.path().to_path_buf(),
        }
        .into()),
        other => other,
    }
    .inspect_err(|_| {
        if !is_stdio(&args.out) {
            let _ = std::fs::remove_file(&args.out);
        }
    })?;
    report_bad_lines(&reader);
    summarize(&args, &reader, requests, to)
}

/// What the Parquet footer records of the input: its format and the device's size, from
/// the capture's .meta.json beside the trace, or carried over from a Parquet input.
fn trace_meta(reader: &TraceReader) -> Result<TraceMeta> {
    let carried = reader.parquet_meta().cloned().unwrap_or_default();
    let sidecar = reblock_analyze::sidecar::find(reader.path()).map_err(anyhow::Error::msg)?;
    let device_sectors = sidecar
        .and_then(|s| s.device_bytes)
        .map(|b| b / reblock_trace::SECTOR_BYTES)
        .or(carried.device_sectors);
    Ok(TraceMeta {
        device_sectors,
        source_format: carried
            .source_format
            .or_else(|| Some(reader.format_name().to_string())),
        schema_version: None,
    })
}

fn summarize(args: &Args, reader: &TraceReader, requests: u64, to: OutFormat) -> Result<()> {
    // With the trace itself on standard output, the summary goes to standard error.
    let to_stdout = is_stdio(&args.out);
    let say = |line: String| {
        if to_stdout {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    if args.json {
        let v = serde_json::json!({
            "requests": requests,
            "input": reader.path(),
            "input_format": reader.format_name(),
            "output": args.out,
            "output_format": to.name(),
            "bad_lines": reader.bad_lines().len(),
        });
        say(v.to_string());
    } else {
        say(format!(
            "converted {requests} requests from {} ({}) to {} ({}){}",
            reader.path().display(),
            reader.format_name(),
            args.out.display(),
            to.name(),
            match reader.bad_lines().len() {
                0 => String::new(),
                n => format!("; skipped {n} malformed line(s)"),
            }
        ));
    }
    Ok(())
}
