"""Type hints of the native module (Rust, PyO3); use the functions of ``reblock``."""

from typing import Any, Dict, Optional, Tuple

class TraceError(Exception):
    """A trace that cannot be read: the message names the file, line or row, and field."""

def trace_stream(path: str, format: str = "auto", skip_bad: int = 0) -> Any:
    """A PyCapsule named ``arrow_array_stream`` over the trace's record batches."""

def analyze_json(
    path: str,
    page_size: str,
    interval: str,
    device_size: Optional[str],
    idle_threshold: str,
    burst_window: str,
    format: str,
    skip_bad: int,
) -> str: ...
def pairs_json(
    path: str,
    support: int,
    session: str,
    mine: str,
    block_size: int,
    window: int,
    format: str,
    skip_bad: int,
) -> str: ...
def simulate_json(
    path: str,
    device: str,
    speed: Optional[float],
    queue_depth: Optional[int],
    scheduler: str,
    max_merge_sectors: int,
    window: Optional[str],
    wrap: bool,
    format: str,
    skip_bad: int,
) -> str: ...
def parquet_meta(path: str) -> Tuple[Optional[int], Optional[str], Optional[int]]: ...
def evaluate_json(path: str, options: Dict[str, Any], format: str, skip_bad: int) -> str: ...
def plan_json(
    path: str,
    policy: str,
    bopt_size: str,
    write_buffer: str,
    page_size: int,
    min_edge_weight: int,
    k_window: int,
    out: Optional[str],
    format: str,
    skip_bad: int,
) -> str: ...
