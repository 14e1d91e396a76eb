"""reblock in the data stack: block traces as pyarrow Tables; workload analysis,
simulation, layout evaluation and planning, and frequent block pairs as the dicts
``reblock analyze|simulate|evaluate|plan|pairs --json`` print, computed by reblock's own
Rust library (no subprocess).

>>> import reblock
>>> table = reblock.read_trace("trace.parquet")      # any format reblock reads
>>> reblock.analyze("trace.parquet")["requests"]
>>> reblock.evaluate("trace.parquet", policies="vanilla,borg")["policies"]["borg"]
>>> reblock.pairs("trace.parquet", support=5)["pairs"][:3]

The pair mining also runs on Spark: ``python -m reblock.spark pairs TRACE.parquet``
(``pip install ./python[spark]``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional, Union

import pyarrow as pa

from . import _reblock
from ._reblock import TraceError

__all__ = [
    "TraceError",
    "read_trace",
    "read_batches",
    "trace_metadata",
    "analyze",
    "simulate",
    "evaluate",
    "plan",
    "pairs",
    "DEFAULT_PAIR_WINDOW",
]

PathLike = Union[str, "os.PathLike[str]"]

#: The pair window ``reblock pairs`` uses when none is given: 13, the disks less one of
#: the default 14-disk array.
DEFAULT_PAIR_WINDOW = 13


def read_batches(path: PathLike, format: str = "auto", skip_bad: int = 0) -> pa.RecordBatchReader:
    """The requests of the trace at ``path`` as a stream of record batches (64 Ki rows
    each), decoded as they are read: for traces larger than memory.

    ``format`` is a name ``reblock formats`` lists, or ``auto`` (sniffed; Parquet by its
    magic). ``skip_bad`` tolerates that many malformed lines or rows. The batches have
    reblock's Parquet schema (docs/parquet.md): ts_ns and sector Int64, pid, device and
    sectors UInt32, command a dictionary, op "R" or "W". They cross from Rust through
    Arrow's C stream interface: pyarrow takes over the buffers without copying them.

    Raises :class:`TraceError` naming the file, line or row, and field.
    """
    capsule = _reblock.trace_stream(os.fspath(path), format, skip_bad)
    return pa.RecordBatchReader._import_from_c_capsule(capsule)


def read_trace(path: PathLike, format: str = "auto", skip_bad: int = 0) -> pa.Table:
    """The whole trace at ``path`` as a pyarrow Table (see :func:`read_batches`).

    >>> t = read_trace("dev_kernel.trace.txt.zst")
    >>> t.num_rows, t.schema.names
    """
    try:
        return read_batches(path, format, skip_bad).read_all()
    except (pa.ArrowException, OSError) as e:
        # A bad row found while streaming arrives as an Arrow error, its message wrapped
        # by Arrow's C stream as "External error: ...": give reblock's own message.
        raise TraceError(_unwrap_arrow_message(str(e))) from None


def _unwrap_arrow_message(message: str) -> str:
    prefix = "External error: "
    return message[len(prefix):] if message.startswith(prefix) else message


def trace_metadata(path: PathLike) -> Dict[str, Any]:
    """The reblock metadata in a Parquet trace's footer: ``device_sectors``,
    ``source_format`` and ``schema_version`` (each None when absent)."""
    device_sectors, source_format, schema_version = _reblock.parquet_meta(os.fspath(path))
    return {
        "device_sectors": device_sectors,
        "source_format": source_format,
        "schema_version": schema_version,
    }


def analyze(
    path: PathLike,
    *,
    page_size: Union[int, str] = 4096,
    interval: str = "1d",
    device_size: Optional[Union[int, str]] = None,
    idle_threshold: str = "100ms",
    burst_window: str = "1s",
    format: str = "auto",
    skip_bad: int = 0,
) -> Dict[str, Any]:
    """Workload characterization of the trace at ``path``: the dict ``reblock analyze
    --json`` prints (same keys, same values), with the same options.

    ``interval`` is the working-set interval: a duration (``1d``, ``1h``, ``30m``), a
    plain number of requests, or ``days`` for the capture's "DAY N START" markers.
    ``device_size`` (bytes, or ``8G``) defaults to the capture's .meta.json or the
    Parquet footer. The analysis streams: memory follows the distinct pages, not the
    requests.
    """
    text = _reblock.analyze_json(
        os.fspath(path),
        str(page_size),
        str(interval),
        None if device_size is None else str(device_size),
        idle_threshold,
        burst_window,
        format,
        skip_bad,
    )
    return json.loads(text)


def simulate(
    path: PathLike,
    device: str,
    *,
    speed: Optional[float] = None,
    queue_depth: Optional[int] = None,
    scheduler: str = "fcfs",
    max_merge_sectors: int = 256,
    window: Optional[str] = None,
    wrap: bool = False,
    format: str = "auto",
    skip_bad: int = 0,
) -> Dict[str, Any]:
    """Replays the trace at ``path`` on a modelled device: the dict ``reblock simulate
    --json`` prints (same keys, same values), with the same options.

    ``device`` is a model (``hdd:barracuda``, ``ssd:k9``), a parameter file, or an array
    (``raid0:4xhdd:cheetah15k5:stripe=128``). Open loop at the trace's times divided by
    ``speed`` (default 1, real time), or closed loop with ``queue_depth`` requests
    outstanding. ``scheduler`` is fcfs, sstf or clook; ``window`` (``60s`` or a request
    count) adds per-window metrics; ``wrap`` folds addresses past the device's end.
    """
    text = _reblock.simulate_json(
        os.fspath(path), device, speed, queue_depth, scheduler, max_merge_sectors,
        window, wrap, format, skip_bad,
    )
    return json.loads(text)


def evaluate(
    path: PathLike,
    *,
    policies: Optional[str] = None,
    device: Optional[str] = None,
    bopt_at: Optional[str] = None,
    bopt_size: Optional[str] = None,
    write_buffer: Optional[Union[float, str]] = None,
    interval: Optional[Union[int, str]] = None,
    training: Optional[str] = None,
    speed: Optional[float] = None,
    sweep: Optional[str] = None,
    guard: Optional[bool] = None,
    guard_epoch: Optional[int] = None,
    trigger: Optional[str] = None,
    data_area: Optional[str] = None,
    wrap: Optional[bool] = None,
    free_space: Optional[str] = None,
    page_size: Optional[int] = None,
    min_edge_weight: Optional[int] = None,
    array: Optional[str] = None,
    initial: Optional[str] = None,
    train_fraction: Optional[float] = None,
    support: Optional[Union[int, str]] = None,
    session: Optional[str] = None,
    mine: Optional[str] = None,
    block_size: Optional[Union[int, str]] = None,
    max_group: Optional[Union[int, str]] = None,
    capacity: Optional[Union[int, str]] = None,
    seed: Optional[int] = None,
    pairs: Optional[Union[PathLike, Mapping[str, Any]]] = None,
    format: str = "auto",
    skip_bad: int = 0,
) -> Dict[str, Any]:
    """Compares layout policies on the trace at ``path`` by replaying it with periodic
    reconfiguration: the dict ``reblock evaluate --json`` prints (same keys, same
    values; timing fields such as ``planning_cpu_s`` are measured anew), with the same
    options under the flags' names (``bopt_size="64MiB"`` for ``--bopt-size 64MiB``,
    ``guard=False`` for ``--no-guard``). An option left None takes the CLI's default.

    ``policies`` is a comma separated list (vanilla, hot, borg, dlr-seq, dlr-frag, fs2,
    borg+fs2). Without ``device`` the disk is sized from the data and the dict carries
    ``device_choice``. A trace of several devices gives ``{"trace", "devices": [...]}``,
    each evaluated on a device of its own. Bad options raise ValueError naming the
    option; an unreadable trace raises :class:`TraceError`.

    With ``array`` (``"ssd:14"``, ``"hdd:100"``, ``"8xhdd:barracuda"``) it is the
    parallel-array evaluation, as ``evaluate --array``: policies static, parallel,
    parallel-hdd; ``initial`` (``"zipf:0,0.5,1"``), ``train_fraction``, ``support``
    (``"1,5,10"``), ``session``, ``mine``, ``block_size``, ``max_group``, ``seed``, and
    ``capacity``, the colouring capacity W of a disk (``"64MiB"``; default a member's
    size). Those options apply only with ``array``.

    ``pairs`` (with ``array``), as ``evaluate --pairs FILE``: the optimizer uses these
    frequent pairs of the training part instead of mining it; a path to the JSON
    ``reblock pairs --json`` or the Spark job prints, or the dict :func:`pairs` or
    :func:`reblock.spark.mine_pairs` returns. Each ``support`` keeps the pairs seen at
    least that often. A path is echoed as ``pairs_file`` in the result, as the CLI does;
    a dict is not. Pairs that do not fit raise ValueError naming the file (or
    ``pairs``), the pair (``pairs[i]``) and the field; a support below every support
    given warns (the pairs may have been mined with a higher one).
    """
    given = dict(policies=policies, device=device, bopt_at=bopt_at, bopt_size=bopt_size,
                 write_buffer=write_buffer, interval=interval, training=training,
                 speed=speed, sweep=sweep, guard=guard, guard_epoch=guard_epoch,
                 trigger=trigger, data_area=data_area, wrap=wrap, free_space=free_space,
                 page_size=page_size, min_edge_weight=min_edge_weight, array=array,
                 initial=initial, train_fraction=train_fraction, support=support,
                 session=session, mine=mine, block_size=block_size, max_group=max_group,
                 capacity=capacity, seed=seed)
    options = {k: v for k, v in given.items() if v is not None}
    if pairs is not None and array is None:
        raise ValueError("evaluate: `pairs` applies only with `array` (the array "
                         "evaluation's optimizer uses them)")
    if isinstance(pairs, Mapping):
        options["pairs_json"] = json.dumps(dict(pairs))
    elif pairs is not None:
        options["pairs"] = os.fspath(pairs)
    text = _reblock.evaluate_json(os.fspath(path), options, format, skip_bad)
    return json.loads(text)


def plan(
    path: PathLike,
    policy: str = "borg",
    *,
    bopt_size: Union[int, str] = "64MiB",
    write_buffer: Union[float, str] = 0.2,
    page_size: int = 4096,
    min_edge_weight: int = 2,
    k_window: int = 0,
    out: Optional[PathLike] = None,
    format: str = "auto",
    skip_bad: int = 0,
) -> Dict[str, Any]:
    """Plans a layout from the whole trace at ``path``: the dict ``reblock plan --json``
    prints (the access graph's size, the pages placed, what planning cost), with the
    same options. ``out`` writes the plan as ``reblock plan --out`` does (plan.json, or
    for dlr-frag the data-area placement).

    ``policy`` is borg, hot, dlr-seq, dlr-frag or vanilla; the BOPT of ``bopt_size``
    bytes (``"64MiB"``) gives ``write_buffer`` of itself to the write buffer, the rest
    bounds the pages placed.
    """
    text = _reblock.plan_json(
        os.fspath(path), policy, str(bopt_size), str(write_buffer), page_size,
        min_edge_weight, k_window, None if out is None else os.fspath(out), format, skip_bad,
    )
    return json.loads(text)


def pairs(
    path: PathLike,
    support: int = 1,
    *,
    session: str = "100us",
    mine: str = "both",
    block_size: int = 512,
    window: int = DEFAULT_PAIR_WINDOW,
    format: str = "auto",
    skip_bad: int = 0,
) -> Dict[str, Any]:
    """The frequent block pairs of the trace at ``path``: the dict ``reblock pairs
    --json`` prints, ``{"pairs": [{"a": .., "b": .., "support": ..}, ...]}`` with blocks
    ``a < b`` sorted.

    Sessions group the requests arriving within ``session`` of a session's first request
    (or ``"request"``: one session per request), of the ops ``mine`` names (``reads``,
    ``writes``, ``both``); blocks are ``block_size`` bytes; each block pairs with the
    next ``window`` blocks of its session; pairs shared by at least ``support`` sessions
    are kept. The parallel-array optimizer's pair mining, as ``reblock evaluate --array``
    runs it.
    """
    text = _reblock.pairs_json(
        os.fspath(path), support, session, mine, block_size, window, format, skip_bad
    )
    return json.loads(text)
