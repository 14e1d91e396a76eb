//! The native half of the `reblock` Python package: traces handed to pyarrow through
//! Arrow's C stream interface (no copy: pyarrow takes over the buffers reblock decoded),
//! and the library's analysis and pair mining returning the JSON `reblock analyze --json`
//! and `reblock pairs --json` print (the Python half turns it into dicts). Long work runs
//! without the GIL.

use std::ffi::CString;
use std::path::Path;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use reblock_analyze::{analyze_trace, device_bytes, sidecar, units, Config};
use reblock_parallel::evaluate_array_with_pairs;
use reblock_parallel::pairs::{mine_pairs, PairMining, PairsFile, PairsFileError};
use reblock_parallel::session::{Blocking, OpFilter, SessionConfig, SessionMode};
use reblock_eval::config::parse_duration_ns;
use reblock_eval::array_options::ArrayOptions;
use reblock_eval::options::TraceOrigin;
use reblock_eval::sizing::DEFAULT_DISK;
use reblock_eval::{evaluate_trace, evaluation_json, plan_trace, EvalOptions, PlanOptions};
use reblock_sim::{Pacing, Replay, SimulationOutput, TraceSource};
use reblock_trace::parquet::TraceBatches;
use reblock_trace::{FormatChoice, ReadOptions, Request, TraceReader, SECTOR_BYTES};

create_exception!(
    _reblock,
    TraceError,
    PyException,
    "A trace that cannot be read: the message names the file, the line or row, and the field."
);

fn trace_error(e: reblock_trace::TraceError) -> PyErr {
    TraceError::new_err(e.to_string())
}

fn bad_argument(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn open(path: &str, format: &str, skip_bad: usize) -> PyResult<TraceReader> {
    let format: FormatChoice = format.parse().map_err(bad_argument)?;
    TraceReader::open(path, &ReadOptions { format, skip_bad }).map_err(trace_error)
}

/// A PyCapsule named `arrow_array_stream` holding the trace's record batches, read as
/// pyarrow asks for them.
#[pyfunction]
#[pyo3(signature = (path, format = "auto", skip_bad = 0))]
fn trace_stream<'py>(
    py: Python<'py>,
    path: &str,
    format: &str,
    skip_bad: usize,
) -> PyResult<Bound<'py, PyCapsule>> {
    let reader = open(path, format, skip_bad)?;
    let stream = FFI_ArrowArrayStream::new(Box::new(TraceBatches::new(reader)));
    let name = CString::new("arrow_array_stream").expect("no NUL");
    PyCapsule::new(py, stream, Some(name))
}

/// `analyze --json` of the trace at `path`.
#[pyfunction]
#[pyo3(signature = (path, page_size, interval, device_size, idle_threshold, burst_window, format, skip_bad))]
#[allow(clippy::too_many_arguments)]
fn analyze_json(
    py: Python<'_>,
    path: &str,
    page_size: &str,
    interval: &str,
    device_size: Option<&str>,
    idle_threshold: &str,
    burst_window: &str,
    format: &str,
    skip_bad: usize,
) -> PyResult<String> {
    let meta = sidecar::find(Path::new(path)).map_err(TraceError::new_err)?;
    let page_bytes = units::parse_size_bytes(page_size).map_err(bad_argument)?;
    if page_bytes == 0 || !page_bytes.is_multiple_of(SECTOR_BYTES) {
        return Err(bad_argument(format!(
            "page_size {page_size}: must be a whole number of 512-byte sectors"
        )));
    }
    let mut reader = open(path, format, skip_bad)?;
    let flag = device_size.map(units::parse_size_bytes).transpose();
    let device_bytes = device_bytes(flag.map_err(bad_argument)?, meta.as_ref(), &reader);
    let config = Config {
        page_bytes,
        interval: sidecar::interval(interval, meta.as_ref()).map_err(bad_argument)?,
        device_bytes,
        idle_threshold_ns: units::parse_duration_ns(idle_threshold).map_err(bad_argument)?,
        burst_window_ns: units::parse_duration_ns(burst_window).map_err(bad_argument)?,
    };
    let analysis = py
        .allow_threads(|| analyze_trace(&mut reader, config, |_| {}))
        .map_err(trace_error)?;
    if analysis.requests == 0 {
        return Err(TraceError::new_err(format!(
            "{path}: the trace holds no requests"
        )));
    }
    serde_json::to_string(&analysis).map_err(bad_argument)
}

/// `pairs --json` of the trace at `path`.
#[pyfunction]
#[pyo3(signature = (path, support, session, mine, block_size, window, format, skip_bad))]
#[allow(clippy::too_many_arguments)]
fn pairs_json(
    py: Python<'_>,
    path: &str,
    support: u32,
    session: &str,
    mine: &str,
    block_size: u64,
    window: usize,
    format: &str,
    skip_bad: usize,
) -> PyResult<String> {
    if support == 0 || window == 0 {
        return Err(bad_argument("support and window must be at least 1"));
    }
    if block_size == 0 || !block_size.is_multiple_of(SECTOR_BYTES) {
        return Err(bad_argument(format!(
            "block_size {block_size}: must be a positive multiple of 512 bytes"
        )));
    }
    let mode = match session {
        "request" => SessionMode::Request,
        s => SessionMode::WindowNs(parse_duration_ns(s).map_err(|e| {
            bad_argument(format!("session: {e}; or `request`"))
        })?),
    };
    let ops = OpFilter::parse(mine)
        .ok_or_else(|| bad_argument(format!("mine `{mine}`: reads, writes or both")))?;
    let cfg = PairMining {
        sessions: SessionConfig {
            blocking: Blocking {
                block_sectors: block_size / SECTOR_BYTES,
                wrap_sectors: None,
            },
            mode,
            ops,
        },
        window,
        support,
    };
    let mut reader = open(path, format, skip_bad)?;
    let mined = py
        .allow_threads(|| mine_pairs(&mut reader, &cfg, |_| {}))
        .map_err(trace_error)?;
    serde_json::to_string(&mined).map_err(bad_argument)
}

/// `simulate --json` of the trace at `path` on the device `spec`.
#[pyfunction]
#[pyo3(signature = (path, device, speed, queue_depth, scheduler, max_merge_sectors, window, wrap, format, skip_bad))]
#[allow(clippy::too_many_arguments)]
fn simulate_json(
    py: Python<'_>,
    path: &str,
    device: &str,
    speed: Option<f64>,
    queue_depth: Option<usize>,
    scheduler: &str,
    max_merge_sectors: u32,
    window: Option<&str>,
    wrap: bool,
    format: &str,
    skip_bad: usize,
) -> PyResult<String> {
    let pacing = match (queue_depth, speed) {
        (Some(_), Some(_)) => return Err(bad_argument("give speed or queue_depth, not both")),
        (Some(depth), None) => Pacing::Closed { depth },
        (None, speed) => Pacing::Open {
            speed: speed.unwrap_or(1.0),
        },
    };
    let config = reblock_sim::Config {
        pacing,
        scheduler: scheduler.parse().map_err(bad_argument)?,
        max_merge_sectors,
        window: window.map(str::parse).transpose().map_err(bad_argument)?,
        wrap,
    };
    let factory = reblock_sim::device_factory(device).map_err(bad_argument)?;
    let replay = Replay::per_trace_device(factory, config.clone()).map_err(bad_argument)?;
    let mut source = TraceSource::new(open(path, format, skip_bad)?);
    let report = py
        .allow_threads(|| replay.run(&mut source, &mut ()))
        .map_err(|e| TraceError::new_err(format!("simulating {path}: {e}")))?;
    if report.overall.requests == 0 {
        return Err(TraceError::new_err(format!("{path}: the trace holds no requests")));
    }
    let out = SimulationOutput::new(path.to_string(), device, &config, &report);
    serde_json::to_string(&out).map_err(bad_argument)
}

/// The trace's requests, its Parquet footer's device size and its discards (TRIM).
type TraceData = (Vec<Request>, Option<u64>, Vec<reblock_trace::Discard>);

/// Every request of the trace at `path`, the device size its Parquet footer records, and
/// its discards.
fn read_all(path: &str, format: &str, skip_bad: usize) -> PyResult<TraceData> {
    let mut reader = open(path, format, skip_bad)?;
    let mut requests = Vec::new();
    while let Some(r) = reader.next_request().map_err(trace_error)? {
        requests.push(r);
    }
    let footer = reader.parquet_meta().and_then(|m| m.device_sectors);
    Ok((requests, footer, reader.discards().to_vec()))
}

fn eval_error(path: &str, e: reblock_eval::EvalError) -> PyErr {
    match e {
        reblock_eval::EvalError::Param(_) => bad_argument(e),
        e => TraceError::new_err(format!("evaluating {path}: {e}")),
    }
}

/// `evaluate --json` of the trace at `path`; options left `None` take the CLI's defaults.
#[pyfunction]
#[pyo3(signature = (path, options, format, skip_bad))]
fn evaluate_json(
    py: Python<'_>,
    path: &str,
    options: &Bound<'_, PyDict>,
    format: &str,
    skip_bad: usize,
) -> PyResult<String> {
    if options.contains("array")? {
        return evaluate_array_json(py, path, options, format, skip_bad);
    }
    let opts = eval_options(options)?;
    let first = opts.device.as_deref().unwrap_or(DEFAULT_DISK);
    opts.config(first).map_err(|e| eval_error(path, e))?;
    let (requests, footer_sectors, discards) = read_all(path, format, skip_bad)?;
    let origin = TraceOrigin {
        path: Path::new(path),
        footer_sectors,
        discards: &discards,
    };
    let evals = py
        .allow_threads(|| evaluate_trace(requests, &origin, &opts, &mut |_| {}))
        .map_err(|e| eval_error(path, e))?;
    Ok(evaluation_json(path, &evals).to_string())
}

/// The evaluation options from the keyword arguments `evaluate` was given (Python
/// names: the CLI's flags with `_` for `-`); the rest keep the CLI's defaults.
fn eval_options(kw: &Bound<'_, PyDict>) -> PyResult<EvalOptions> {
    let mut o = EvalOptions::default();
    for (key, value) in kw.iter() {
        let key: String = key.extract()?;
        let text = || -> PyResult<String> { Ok(value.str()?.to_string()) };
        match key.as_str() {
            "policies" => o.policies = Some(text()?),
            "device" => o.device = Some(text()?),
            "bopt_at" => o.bopt_at = text()?,
            "bopt_size" => o.bopt_size = text()?,
            "write_buffer" => o.write_buffer = text()?,
            "interval" => o.interval = text()?,
            "training" => o.training = text()?,
            "speed" => o.speed = Some(value.extract()?),
            "sweep" => o.sweep = Some(text()?),
            "guard" => o.guard = value.extract()?,
            "guard_epoch" => o.guard_epoch = value.extract()?,
            "trigger" => o.trigger = text()?,
            "data_area" => o.data_area = Some(text()?),
            "wrap" => o.wrap = value.extract()?,
            "free_space" => o.free_space = text()?,
            "page_size" => o.page_size = value.extract()?,
            "min_edge_weight" => o.min_edge_weight = value.extract()?,
            other => {
                let why = format!("evaluate: no option `{other}` (array options need `array`)");
                return Err(bad_argument(why));
            }
        }
    }
    Ok(o)
}

/// `evaluate --array SPEC --json` of the trace at `path`: the parallel-array evaluation.
fn evaluate_array_json(
    py: Python<'_>,
    path: &str,
    kw: &Bound<'_, PyDict>,
    format: &str,
    skip_bad: usize,
) -> PyResult<String> {
    let cfg = array_options(kw)?
        .config()
        .map_err(|e| eval_error(path, e))?;
    // Before the trace, so that a bad pairs file fails at once.
    let pairs = given_pairs(kw)?;
    if let Some(note) = pairs
        .as_ref()
        .and_then(|p| p.file.support_note(&cfg.supports))
    {
        let category = py.get_type::<PyUserWarning>();
        PyErr::warn(py, category.as_any(), &CString::new(note)?, 2)?;
    }
    let mut reader = open(path, format, skip_bad)?;
    let mut trace = reblock_trace::Trace::default();
    while let Some(r) = reader.next_request().map_err(trace_error)? {
        trace.push(r);
    }
    if trace.is_empty() {
        return Err(TraceError::new_err(format!("{path}: the trace holds no requests")));
    }
    reblock_sim::require_single_device(trace.device.iter().copied())
        .map_err(|e| TraceError::new_err(e.to_string()))?;
    let file = pairs.as_ref().map(|p| &p.file);
    let mut out = py
        .allow_threads(|| evaluate_array_with_pairs(&trace, path, &cfg, file, |_| {}))
        .map_err(|e| TraceError::new_err(format!("evaluating {path}: {e}")))?;
    if pairs.is_some_and(|p| !p.from_file) {
        out.pairs_file = None;
    }
    serde_json::to_string(&out).map_err(bad_argument)
}

/// The pairs `evaluate(pairs=...)` was given: a file's, or the dict's (as JSON text).
struct GivenPairs {
    file: PairsFile,
    from_file: bool,
}

/// Reads `pairs` (a file path) or `pairs_json` (the text of a dict) if given; errors name
/// the file, or `pairs`, and the pair and field at fault.
fn given_pairs(kw: &Bound<'_, PyDict>) -> PyResult<Option<GivenPairs>> {
    let given = |e: PairsFileError| match e {
        PairsFileError::Io { .. } => PyOSError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    };
    if let Some(path) = kw.get_item("pairs")? {
        let file = PairsFile::read(Path::new(&path.extract::<String>()?)).map_err(given)?;
        return Ok(Some(GivenPairs {
            file,
            from_file: true,
        }));
    }
    let Some(text) = kw.get_item("pairs_json")? else {
        return Ok(None);
    };
    let text: String = text.extract()?;
    let file = PairsFile::parse(text.as_bytes(), Path::new("pairs")).map_err(given)?;
    Ok(Some(GivenPairs {
        file,
        from_file: false,
    }))
}

/// The array evaluation's options from `evaluate`'s keyword arguments.
fn array_options(kw: &Bound<'_, PyDict>) -> PyResult<ArrayOptions> {
    let mut o = ArrayOptions::default();
    for (key, value) in kw.iter() {
        let key: String = key.extract()?;
        let text = || -> PyResult<String> { Ok(value.str()?.to_string()) };
        match key.as_str() {
            "array" => o.array = text()?,
            "policies" => o.policies = Some(text()?),
            "speed" => o.speed = Some(value.extract()?),
            "initial" => o.initial = text()?,
            "train_fraction" => o.train_fraction = value.extract()?,
            "support" => o.support = text()?,
            "session" => o.session = text()?,
            "mine" => o.mine = text()?,
            "block_size" => o.block_size = text()?,
            "max_group" => o.max_group = text()?,
            "capacity" => o.capacity = Some(text()?),
            "seed" => o.seed = value.extract()?,
            "pairs" | "pairs_json" => {} // see given_pairs
            other => {
                let why = format!("evaluate: `{other}` does not apply to an array evaluation");
                return Err(bad_argument(why));
            }
        }
    }
    Ok(o)
}

/// `plan --json` of the trace at `path` (and the plan file's text when `out` is given).
#[pyfunction]
#[pyo3(signature = (path, policy, bopt_size, write_buffer, page_size, min_edge_weight, k_window, out, format, skip_bad))]
#[allow(clippy::too_many_arguments)]
fn plan_json(
    py: Python<'_>,
    path: &str,
    policy: &str,
    bopt_size: &str,
    write_buffer: &str,
    page_size: u32,
    min_edge_weight: u64,
    k_window: usize,
    out: Option<&str>,
    format: &str,
    skip_bad: usize,
) -> PyResult<String> {
    let opts = PlanOptions {
        policy: policy.to_string(),
        bopt_size: bopt_size.to_string(),
        write_buffer: write_buffer.to_string(),
        page_size,
        min_edge_weight,
        k_window,
    };
    opts.check().map_err(bad_argument)?;
    let (requests, _, _) = read_all(path, format, skip_bad)?;
    let plan = py
        .allow_threads(|| plan_trace(&requests, path, &opts))
        .map_err(|e| TraceError::new_err(e.to_string()))?;
    if let Some(out) = out {
        let text = plan.file_text().map_err(|e| TraceError::new_err(e.to_string()))?;
        std::fs::write(out, text + "\n")
            .map_err(|e| PyOSError::new_err(format!("writing {out}: {e}")))?;
    }
    let summary = plan.summary(path.to_string(), out.map(str::to_string));
    serde_json::to_string(&summary).map_err(bad_argument)
}

/// The reblock metadata of a Parquet trace: (device_sectors, source_format, schema_version).
#[pyfunction]
fn parquet_meta(path: &str) -> PyResult<(Option<u64>, Option<String>, Option<u32>)> {
    let m = reblock_trace::parquet::read_meta(path).map_err(trace_error)?;
    Ok((m.device_sectors, m.source_format, m.schema_version))
}

#[pymodule]
fn _reblock(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TraceError", m.py().get_type::<TraceError>())?;
    m.add_function(wrap_pyfunction!(trace_stream, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_json, m)?)?;
    m.add_function(wrap_pyfunction!(pairs_json, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_json, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_meta, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate_json, m)?)?;
    m.add_function(wrap_pyfunction!(plan_json, m)?)?;
    Ok(())
}
