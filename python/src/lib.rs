//! The native half of the `reblock` Python package: traces handed to pyarrow through
//! Arrow's C stream interface (no copy: pyarrow takes over the buffers reblock decoded),
//! and the library's analysis and pair mining returning the JSON `reblock analyze --json`
//! and `reblock pairs --json` print (the Python half turns it into dicts). Long work runs
//! without the GIL.

use std::ffi::CString;
use std::path::Path;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use reblock_analyze::{analyze_trace, device_bytes, sidecar, units, Config};
use reblock_parallel::pairs::{mine_pairs, PairMining};
use reblock_parallel::session::{Blocking, OpFilter, SessionConfig, SessionMode};
use reblock_eval::config::parse_duration_ns;
use reblock_sim::{Pacing, Replay, SimulationOutput, TraceSource};
use reblock_trace::parquet::TraceBatches;
use reblock_trace::{FormatChoice, ReadOptions, TraceReader, SECTOR_BYTES};

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
    Ok(())
}
