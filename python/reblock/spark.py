"""Frequent block pairs on Spark: the sessionization and pair counting of
``reblock pairs`` (the parallel-array optimizer's mining) for traces too large for one
machine. Prints exactly what ``reblock pairs --json`` prints for the same trace and
options::

    python -m reblock.spark pairs TRACE.parquet --support 5 --json            # local[*]
    spark-submit --master yarn "$(python -c 'import reblock.spark as s; print(s.__file__)')" \\
        pairs hdfs:///traces/t.parquet --support 5 --json                      # a cluster

Needs pyspark (``pip install ./python[spark]``) and a Parquet trace (``reblock convert``
writes one; any file with the columns ts_ns, sector, sectors, op works; a directory of
files is read as their concatenation in path order).

How it stays exact and parallel. First the order: one pass summarizes runs of rows
(least and greatest time, the latest-coming request), which tells whether the trace is
in time order and, as reblock's reader, refuses a request further behind than the
reorder window; a trace out of order is sorted by (time, file order) into ranges of time.
A session holds the requests arriving within the window
of its *first* request, so where a session starts depends on where the one before
started: a recurrence, not a gap rule that a window function could express. The requests
are cut into chunks of consecutive rows; within a chunk, whose times never decrease,
every request's successor session start is found for all requests at once (a binary
search for its time plus the window), and the starts reachable from the chunk's first
request are found by pointer doubling: numpy over the whole chunk, no loop over
requests. The session open
at a chunk's end is carried into the next chunk: each chunk's end is computed from the
chunk alone, and recomputed in parallel with its predecessor's end only when it can
depend on it (no gap of a window in the chunk) until nothing changes. The pairs: each
session's requests are brought together in order (hash partitioned by session, sorted
within), and numpy counts the pairs of whole sessions in steps (blocks exploded, each
session's distinct blocks in first-requested order, each paired with the next
``window``); Spark sums the counts across the cluster.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

DEFAULT_PAIR_WINDOW = 13
# Rows per sessionization chunk at most: a chunk is one pandas group in one Python
# worker, about 200 bytes a row there (its columns, their sorted copy, the session
# arrays, the Arrow batches in and out), so about 200 MB at 2^20 rows.
MAX_CHUNK_ROWS = 1 << 20
# A request's order key: its file's rank (in path order) above this bit, its row below.
FILE_SHIFT = 40
_UNITS_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
             "m": 60_000_000_000, "min": 60_000_000_000,
             "h": 3_600_000_000_000, "d": 86_400_000_000_000}
_OPS = {"both": ("R", "W"), "reads": ("R",), "read": ("R",),
        "writes": ("W",), "write": ("W",)}
# The session open at a chunk's end: its id (the order key of its first request) and the
# arrival time of that request.
Carry = Tuple[int, int]


def parse_session(text: str) -> Optional[int]:
    """``request`` -> None (one session per request), or a duration (``100us``,
    ``1.5ms``) in nanoseconds, parsed as ``reblock pairs --session`` parses it."""
    if text == "request":
        return None
    m = re.fullmatch(r"([0-9.]+)([a-z]*)", text)
    if not m or m.group(2) not in _UNITS_NS:
        raise ValueError(f"--session `{text}`: a duration like 100us, 1ms, or `request`")
    ns = float(m.group(1)) * _UNITS_NS[m.group(2)]
    if not 1.0 <= ns < 1.8e19:
        raise ValueError(f"--session `{text}`: must be positive")
    return int(ns)


def _chain(successor: np.ndarray, start: int, n: int) -> np.ndarray:
    """``start, successor[start], successor[successor[start]], ...`` below n, sorted.
    Pointer doubling: after round k the steps below 2^(k+1) are known, so log2(n)
    rounds of whole-array indexing instead of one step per session."""
    found = np.array([start], dtype=np.int64)
    jump = successor
    while True:
        more = jump[found]
        found = np.concatenate([found, more])
        if more.max() >= n:
            break
        jump = jump[jump]
    return np.unique(found[found < n])


def session_ids(ts: np.ndarray, keys: np.ndarray, window_ns: int,
                carry: Optional[Carry]) -> Tuple[np.ndarray, Optional[Carry]]:
    """The session of each request of one chunk (sorted by order key), as reblock's
    Sessionizer forms them: a request joins the open session when it arrives at or after
    the session's first request and less than ``window_ns`` after it; otherwise it starts
    a new one. ``carry`` is the session open before the chunk. Returns each request's
    session id (the order key of the session's first request) and the session open at
    the chunk's end.

    Precondition: ``ts`` never decreases and the carried session began no later than
    ``ts[0]``. The job guarantees it: a trace in order (behind by 0) has times that never
    decrease in key order; one out of order is first sorted by time (see
    :func:`time_order`)."""
    n = len(ts)
    if n == 0:
        return np.empty(0, dtype=np.int64), carry
    # Unsigned, so that time + window cannot overflow (times are below 2^63; a window
    # of 2^63 or more admits every later request, as in reblock).
    ts = ts.astype(np.uint64)
    window = np.uint64(min(window_ns, 1 << 63))
    # Times never decrease here (see the docstring), so the first request at or after
    # i outside [ts_i, ts_i + window) is the first whose time reaches ts_i + window.
    start = 0
    if carry is not None:
        start = int(np.searchsorted(ts, np.uint64(carry[1]) + window, side="left"))
    successor = np.empty(n + 1, dtype=np.int64)
    successor[n] = n
    successor[:n] = np.searchsorted(ts, ts + window, side="left")  # > i: window >= 1
    starts = _chain(successor, start, n)
    sids = np.empty(n, dtype=np.int64)
    if carry is not None:
        sids[:start] = carry[0]
    if len(starts) == 0:
        return sids, carry
    is_start = np.zeros(n, dtype=bool)
    is_start[starts] = True
    sids[start:] = keys[starts[np.cumsum(is_start[start:]) - 1]]
    return sids, (int(keys[starts[-1]]), int(ts[starts[-1]]))


def _sorted_chunk(pdf):
    """One chunk's rows in order-key order."""
    return pdf.sort_values("key", kind="stable")


def end_is_fixed(ts: np.ndarray, window_ns: int) -> bool:
    """Whether a chunk's last session is the same whatever session is carried into it:
    true when some request (after the first) comes a window or more after the one
    before it. That request arrives a window or more after its predecessor's session
    began, so it starts a session under any carry, and so does everything after it."""
    ts = ts.astype(np.uint64)
    return bool(np.any(ts[1:] >= ts[:-1] + np.uint64(min(window_ns, 1 << 63))))


def _chunk_ends(reqs, window_ns: int, carries: Dict[int, Carry], chunks=None):
    """For each chunk (of ``chunks``, or all): the session open at its end given the
    session carried into it, and whether that end is fixed whatever the carry. One
    parallel pass; a row per chunk comes to the driver."""
    import pandas as pd

    def end(pdf):
        pdf = _sorted_chunk(pdf)
        chunk = int(pdf["chunk"].iloc[0])
        ts = pdf["ts"].to_numpy()
        _, out = session_ids(ts, pdf["key"].to_numpy(), window_ns, carries.get(chunk))
        return pd.DataFrame({"chunk": [chunk], "sid": [out[0]], "ts": [out[1]],
                             "fixed": [end_is_fixed(ts, window_ns)]})

    part = reqs.select("chunk", "key", "ts")
    if chunks is not None:
        part = part.where(part["chunk"].isin(list(chunks)))
    rows = part.groupBy("chunk").applyInPandas(
        end, "chunk long, sid long, ts long, fixed boolean").collect()
    return {r["chunk"]: ((r["sid"], r["ts"]), r["fixed"]) for r in rows}


def chunk_carries(reqs, window_ns: int) -> Dict[int, Carry]:
    """The session carried into each chunk. Each chunk's end is first computed from the
    chunk alone; the ends that depend on the carry are recomputed with their
    predecessor's end until none changes. A chunk is last computed from its
    predecessor's final end, so by induction from the first chunk every end is exact;
    usually no round is needed (every chunk has a gap of a window somewhere), else one
    (session chains meet), at worst one per chunk."""
    first = _chunk_ends(reqs, window_ns, {})
    order = sorted(first)
    ends = {c: e for c, (e, _) in first.items()}
    fixed = {c for c, (_, f) in first.items() if f}
    after = dict(zip(order, order[1:]))
    stale = set(order[1:]) - fixed
    while stale:
        carries = {c: ends[p] for p, c in after.items()}
        fresh = {c: e for c, (e, _) in _chunk_ends(reqs, window_ns, carries, stale).items()}
        changed = {c for c, e in fresh.items() if ends[c] != e}
        ends.update(fresh)
        stale = {after[c] for c in changed if c in after} - fixed
    return {c: ends[p] for p, c in after.items()}


def _requests(spark, trace, files: List[str], extra: Tuple[str, ...] = ()):
    """Every request of the read Parquet ``trace`` (whose files are ``files``, in path
    order) with an order key: file rank << 40 | row within the file, the order reblock
    reads them in; and the ``extra`` columns, null where the trace has none."""
    from pyspark.sql import functions as F

    df = trace.select(
        F.col("_metadata.row_index").alias("row"),
        F.regexp_replace("_metadata.file_path", "^file:/+", "file:/").alias("file"),
        F.col("ts_ns").cast("long").alias("ts"), F.col("sector").cast("long").alias("sector"),
        F.col("sectors").cast("long").alias("sectors"), F.col("op").cast("string").alias("op"),
        *(F.col(c) if c in trace.columns else F.lit(None).alias(c) for c in extra))
    key = F.col("row")
    if len(files) > 1:
        ranks = spark.createDataFrame(list(enumerate(files)), "rank long, file string")
        df = df.join(F.broadcast(ranks), "file")
        key = F.shiftleft(F.col("rank"), FILE_SHIFT) + key
    return df.select(key.cast("long").alias("key"), "ts", "sector", "sectors", "op", *extra)


def _trace_files(trace) -> List[str]:
    """The files of a read trace, in path order (the order of their requests)."""
    return sorted({re.sub(r"^file:/+", "file:/", f) for f in trace.inputFiles()})


class LateRequest(ValueError):
    """A request further behind one read before it than the reorder window allows:
    ``reblock pairs`` refuses such a trace (without ``--sort``), and so does the job."""


class MissingColumn(ValueError):
    """A Parquet file without a column the job reads (``ts_ns``, ``sector``,
    ``sectors``, ``op``)."""


# The columns the job reads; any integer width or signedness, any string type.
TRACE_COLUMNS = ("ts_ns", "sector", "sectors", "op")


def _require_columns(trace, path: str) -> None:
    """Raises :class:`MissingColumn` naming the path and the first column it lacks."""
    for name in TRACE_COLUMNS:
        if name not in trace.columns:
            raise MissingColumn(
                f"{path}: no column `{name}` (a trace needs {', '.join(TRACE_COLUMNS)}; "
                f"it has {', '.join(trace.columns) or 'none'}; `reblock convert` writes one)")


# A run of consecutive order keys: first key, last key, least and greatest time, and how
# far its latest-coming request is behind the latest one before it within the run.
Run = Tuple[int, int, int, int, int]


def _run_of(keys: np.ndarray, ts: np.ndarray) -> Run:
    latest = np.maximum.accumulate(ts)
    behind = int((latest[:-1] - ts[1:]).max(initial=0))
    return int(keys[0]), int(keys[-1]), int(ts.min()), int(ts.max()), max(behind, 0)


def _joined(a: Run, b: Run) -> Run:
    """Two runs, ``b`` right after ``a``, as one."""
    return a[0], b[1], min(a[2], b[2]), max(a[3], b[3]), max(a[4], b[4], a[3] - b[2])


def _order_runs(reqs) -> List[Run]:
    """The trace as runs of consecutive keys, each summarized (one pass over the times,
    no shuffle: a Parquet split is a range of rows)."""
    import pandas as pd

    def runs(batches):
        out: List[Run] = []
        for pdf in batches:
            pdf = pdf.sort_values("key")
            keys, ts = pdf["key"].to_numpy(), pdf["ts"].to_numpy()
            cuts = np.flatnonzero(np.diff(keys) != 1) + 1
            for k, t in zip(np.split(keys, cuts), np.split(ts, cuts)):
                if len(k) == 0:
                    continue
                run = _run_of(k, t)
                if out and out[-1][1] + 1 == run[0]:
                    out[-1] = _joined(out[-1], run)
                else:
                    out.append(run)
        yield pd.DataFrame(out, columns=["first", "last", "lo", "hi", "behind"])

    rows = reqs.select("key", "ts").mapInPandas(
        runs, "first long, last long, lo long, hi long, behind long").collect()
    return sorted(tuple(r) for r in rows)


def _seconds(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d} s"


def _late_request(reqs, run: Run, latest: int, window_ns: int,
                  files: List[str]) -> LateRequest:
    """The error for the first request of ``run`` further than the window behind the
    latest one before it (``latest``: the latest before the run), worded as reblock's."""
    part = reqs.where(reqs["key"].between(run[0], run[1])).select("key", "ts").toPandas()
    part = part.sort_values("key")
    ts = part["ts"].to_numpy()
    before = np.maximum(latest, np.maximum.accumulate(np.concatenate([[latest], ts[:-1]])))
    i = int(np.argmax(before - ts > window_ns))
    key, late, ahead = int(part["key"].iloc[i]), int(ts[i]), int(before[i])
    path = re.sub(r"^file:", "", files[key >> FILE_SHIFT] if len(files) > 1 else files[0])
    row = key & ((1 << FILE_SHIFT) - 1)
    return LateRequest(
        f"{path}: request {row + 1}: field timestamp: {_seconds(late)} is "
        f"{_seconds(ahead - late)} before a request already read (at {_seconds(ahead)}), "
        f"more than the {_seconds(window_ns)} reorder window; pass --sort to sort the whole "
        "trace, or a wider --reorder-window")


def time_order(reqs, window_ns: Optional[int], files: List[str]) -> int:
    """Checks the order of the requests as reblock's reader does: a request at most
    ``window_ns`` behind the latest one read before it is put in its place, one further
    behind is an error (raises :class:`LateRequest`); ``None`` (``--sort``) accepts any.
    Returns how far behind the latest-coming request was (0: the trace is in order)."""
    latest, worst = None, 0
    for run in _order_runs(reqs):
        behind = run[4] if latest is None else max(run[4], latest - run[2])
        if window_ns is not None and behind > window_ns:
            raise _late_request(reqs, run, -1 if latest is None else latest, window_ns,
                                files)
        worst = max(worst, behind)
        latest = run[3] if latest is None else max(latest, run[3])
    return worst


def _in_time_order(reqs, chunks: int):
    """``reqs`` sorted by time, file order among equal times (reblock's stable order),
    with the position in that order as ``key`` and a ``chunk`` per range of it: range
    partitions sorted within, numbered by partition in their upper bits."""
    from pyspark.sql import functions as F

    ordered = reqs.repartitionByRange(chunks, "ts", "key").sortWithinPartitions("ts", "key")
    ordered = ordered.withColumn("key", F.monotonically_increasing_id())
    return ordered.withColumn("chunk", F.shiftright("key", 33))


def sessionize(spark, reqs, window_ns: Optional[int], rows: int,
               partitions: Optional[int] = None, files: int = 1, in_order: bool = True):
    """``reqs`` (``rows`` rows in ``files`` files) with each request's session id
    ``sid``; not ``in_order``: first put in time order (see :func:`time_order`)."""
    from pyspark.sql import functions as F

    if window_ns is None:
        return reqs.withColumn("sid", F.col("key"))
    # Chunks only as small as a worker's memory needs: sessionizing is cheap next to
    # the pairs, and one chunk needs no pass to carry sessions across.
    chunks = max(partitions or 1, -(-rows // MAX_CHUNK_ROWS), 1)
    if in_order:
        chunk_rows = max(1, -(-rows // chunks))
        reqs = reqs.withColumn("chunk", F.expr(f"key div {chunk_rows}"))
        # Each file's keys begin at a new multiple of 2^40: files are chunks of their own.
        across = chunks > 1 or files > 1
    else:
        reqs = _in_time_order(reqs, chunks)
        across = chunks > 1
    reqs = reqs.repartition(min(chunks, 4 * spark.sparkContext.defaultParallelism),
                            "chunk").persist()
    carries = chunk_carries(reqs, window_ns) if across else {}

    def ids(pdf):
        pdf = _sorted_chunk(pdf)
        chunk = int(pdf["chunk"].iloc[0])
        sids, _ = session_ids(pdf["ts"].to_numpy(), pdf["key"].to_numpy(), window_ns,
                              carries.get(chunk))
        return pdf[["key", "sector", "sectors"]].assign(sid=sids)

    return reqs.groupBy("chunk").applyInPandas(
        ids, "key long, sector long, sectors long, sid long")


# Blocks one numpy step of the pair counting explodes at most (a session larger than
# this is one step of its own): about 16 bytes x (1 + 2 x window) each.
MAX_STEP_BLOCKS = 1 << 18


def block_spans(sector: np.ndarray, sectors: np.ndarray,
                block_sectors: int) -> Tuple[np.ndarray, np.ndarray]:
    """Each request's first block and how many blocks it touches (a request of 0
    sectors touches the block of its sector, as in reblock)."""
    first = sector // block_sectors
    return first, (sector + np.maximum(sectors, 1) - 1) // block_sectors - first + 1


def session_pair_counts(sid: np.ndarray, first: np.ndarray, per_row: np.ndarray,
                        window: int):
    """The pairs of whole sessions (rows sorted by session, then by order key; each
    request's blocks as :func:`block_spans` gives them) counted as reblock's PairCounts
    counts them: each session's distinct blocks in the order first requested, each
    paired with the next ``window``; a pandas DataFrame ``a, b, n`` (a < b, n
    sessions)."""
    import pandas as pd

    rows = np.repeat(np.arange(len(sid)), per_row)
    blocks = first[rows] + (np.arange(len(rows)) - np.repeat(np.cumsum(per_row) - per_row,
                                                             per_row))
    sids = sid[rows]
    # A block's first place in its session: the stable sort keeps request order among
    # equal (session, block).
    order = np.lexsort((blocks, sids))
    s, b = sids[order], blocks[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (s[1:] != s[:-1]) | (b[1:] != b[:-1])
    keep = np.zeros(len(order), dtype=bool)
    keep[order[new]] = True
    blocks, sids = blocks[keep], sids[keep]
    xs, ys = [], []
    for d in range(1, min(window, len(blocks) - 1) + 1):
        same = sids[d:] == sids[:-d]
        x, y = blocks[:-d][same], blocks[d:][same]
        xs.append(np.minimum(x, y))
        ys.append(np.maximum(x, y))
    if not xs:
        return pd.DataFrame({"a": [], "b": [], "n": []}, dtype=np.int64)
    pairs = pd.DataFrame({"a": np.concatenate(xs), "b": np.concatenate(ys)})
    return pairs.groupby(["a", "b"], sort=False).size().reset_index(name="n")


def _steps(sid: np.ndarray, blocks_per_row: np.ndarray):
    """Row ranges of whole sessions (rows sorted by session) holding at most
    MAX_STEP_BLOCKS blocks each, or one session each when it alone holds more."""
    n = len(sid)
    starts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
    before = np.r_[0, np.cumsum(blocks_per_row)]  # blocks before each row
    at_starts = before[starts]
    i = 0  # index in starts of the step's first session
    while i < len(starts):
        j = int(np.searchsorted(at_starts, at_starts[i] + MAX_STEP_BLOCKS, side="right"))
        j = max(j, i + 1)  # the sessions starts[i:j]
        yield int(starts[i]), int(starts[j]) if j < len(starts) else n
        i = j


def whole_sessions(batches):
    """The rows of ``batches`` (pandas DataFrames in ``sid`` order, one session's rows
    possibly spread over several consecutive batches) as DataFrames of whole sessions,
    in order. The pieces of the session still open at a batch's end are kept in a list
    and joined once, when it ends: a session spanning k batches is copied once, not k
    times (joining it to every next batch made long sessions cost quadratic time)."""
    import pandas as pd

    held: list = []  # the pieces of the session open at the last batch's end
    for pdf in batches:
        if pdf.empty:
            continue
        sid = pdf["sid"].to_numpy()
        cut = int(np.searchsorted(sid, sid[-1], side="left"))  # the batch's last session
        if cut == 0 and held and held[-1]["sid"].iat[-1] == sid[0]:
            held.append(pdf)  # the open session goes on through the whole batch
            continue
        done = [p for p in (*held, pdf.iloc[:cut]) if not p.empty]
        if done:
            yield done[0] if len(done) == 1 else pd.concat(done, ignore_index=True)
        held = [pdf.iloc[cut:]]
    if held:
        yield held[0] if len(held) == 1 else pd.concat(held, ignore_index=True)


def frequent_pairs(sessions, block_sectors: int, window: int, support: int):
    """DataFrame ``a, b, support`` of the pairs of blocks (a < b) sharing at least
    ``support`` sessions, as reblock's PairCounts: each session's requests brought
    together in order, its pairs counted with numpy (:func:`session_pair_counts`) in
    steps of whole sessions, the counts summed across the cluster."""
    from pyspark.sql import functions as F

    def counts(batches):
        for pdf in whole_sessions(batches):
            yield from _counted(pdf)

    def _counted(pdf):
        sid = pdf["sid"].to_numpy()
        first, per_row = block_spans(pdf["sector"].to_numpy(), pdf["sectors"].to_numpy(),
                                     block_sectors)
        for begin, end in _steps(sid, per_row):
            yield session_pair_counts(sid[begin:end], first[begin:end], per_row[begin:end],
                                      window)

    # An explicit partition count: adaptive execution would otherwise coalesce the few
    # requests into one task, and the pair work with them.
    parts = int(sessions.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    together = sessions.repartition(parts, "sid").sortWithinPartitions("sid", "key")
    pairs = together.select("sid", "sector", "sectors").mapInPandas(
        counts, "a long, b long, n long")
    totals = pairs.groupBy("a", "b").agg(F.sum("n").alias("support"))
    return totals.where(F.col("support") >= support)


def parse_reorder_window(text: str) -> int:
    """``--reorder-window``: a duration (``10ms``), or ``0`` for a trace in order."""
    if text.strip() == "0":
        return 0
    try:
        return parse_session(text.strip())
    except ValueError:
        raise ValueError(f"--reorder-window `{text}`: a duration like 10ms, or 0") from None


def read_in_order(spark, path: str, reorder_window: str, sort: bool,
                  extra: Tuple[str, ...] = ()):
    """The Parquet trace at ``path`` read as reblock reads it: ``(trace, files, requests,
    behind)`` with the requests' order key (and the ``extra`` columns), their order
    checked (see :func:`time_order`; ``behind``: how far the latest-coming request was
    behind, 0 for a trace in order, told on stderr)."""
    reorder_ns = None if sort else parse_reorder_window(reorder_window)
    trace = spark.read.parquet(path)
    _require_columns(trace, path)
    files = _trace_files(trace)
    every = _requests(spark, trace, files, extra)
    behind = time_order(every, reorder_ns, files)
    if behind:
        how = "--sort" if sort else f"--reorder-window {reorder_window}"
        print(f"reblock.spark: note: requests of {path} came after later ones (by up to "
              f"{behind / 1e6:g} ms) and were put in time order ({how})", file=sys.stderr)
    return trace, files, every, behind


def mined_pairs(spark, path: str, support: int = 1, session: str = "100us",
                mine: str = "both", block_size: int = 512,
                window: int = DEFAULT_PAIR_WINDOW, partitions: Optional[int] = None,
                reorder_window: str = "10ms", sort: bool = False):
    """The frequent pairs of the Parquet trace at ``path`` as a pandas DataFrame
    ``a, b, support`` sorted by a, then b, exactly as ``reblock pairs`` mines them.
    Requests out of time order are put in order as reblock's reader does (at most
    ``reorder_window`` behind, else :class:`LateRequest`; ``sort``: any order)."""
    if support < 1 or window < 1:
        raise ValueError("support and window must be at least 1")
    if block_size < 512 or block_size % 512:
        raise ValueError(f"block size {block_size}: a positive multiple of 512 bytes")
    ops = _OPS.get(mine)
    if ops is None:
        raise ValueError(f"--mine `{mine}`: expected reads, writes or both")
    window_ns = parse_session(session)
    trace, files, every, behind = read_in_order(spark, path, reorder_window, sort)
    reqs = every.where(every["op"].isin(*ops)).drop("op")
    # A Parquet count reads only the footers.
    rows = trace.count() if window_ns is not None else 0
    sessions = sessionize(spark, reqs, window_ns, rows, partitions, len(files), behind == 0)
    counts = frequent_pairs(sessions, block_size // 512, window, support)
    out = counts.toPandas().sort_values(["a", "b"], kind="stable", ignore_index=True)
    spark.catalog.clearCache()
    return out


def mine_pairs(spark, path: str, support: int = 1, session: str = "100us",
               mine: str = "both", block_size: int = 512,
               window: int = DEFAULT_PAIR_WINDOW,
               partitions: Optional[int] = None, reorder_window: str = "10ms",
               sort: bool = False) -> Dict[str, list]:
    """``{"pairs": [{"a", "b", "support"}, ...]}`` of the Parquet trace at ``path``,
    exactly as ``reblock pairs`` mines them with the same options."""
    out = mined_pairs(spark, path, support, session, mine, block_size, window, partitions,
                      reorder_window, sort)
    return {"pairs": [{"a": a, "b": b, "support": c} for a, b, c in
                      zip(*(out[k].tolist() for k in ("a", "b", "support")))]}


def pairs_json(out) -> str:
    """The JSON ``reblock pairs --json`` prints, byte for byte, for ``mined_pairs``'s
    table (built as text: millions of pairs would not fit as Python dicts)."""
    cols = zip(*(out[k].tolist() for k in ("a", "b", "support")))
    body = ",".join(f'{{"a":{a},"b":{b},"support":{c}}}' for a, b, c in cols)
    return f'{{"pairs":[{body}]}}'


def _session(master: Optional[str]):
    """A Spark session: spark-submit's master, ``master``, or every local core; in local
    mode as many shuffle partitions as twice the cores (Spark's 200 are for clusters)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("reblock pairs")
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Not under spark-submit (which sets the master): run locally on every core.
        builder = builder.master("local[*]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    conf = spark.sparkContext.getConf()
    if spark.sparkContext.master.startswith("local") and \
            not conf.contains("spark.sql.shuffle.partitions"):
        spark.conf.set("spark.sql.shuffle.partitions",
                       str(2 * spark.sparkContext.defaultParallelism))
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    return spark


def _add_trace_order(p) -> None:
    """The flags every subcommand shares: the Spark master and the time order."""
    p.add_argument("--master", default=None, metavar="URL",
                   help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--reorder-window", default="10ms", metavar="DURATION",
                   help="put requests up to this far behind a later one back in time "
                        "order, as reblock's reader does; one further behind is an error "
                        "(default 10ms; 0: the trace must be in order)")
    p.add_argument("--sort", action="store_true",
                   help="sort the whole trace by time instead (any disorder)")


def _add_graph(sub) -> None:
    g = sub.add_parser("graph", help="build BORG's access graph of each device")
    g.add_argument("trace", help="Parquet trace (a file, or a directory of files read in "
                                 "path order)")
    g.add_argument("--min-weight", type=int, default=1, metavar="W",
                   help="keep only the edges of at least this weight (default 1)")
    _add_trace_order(g)
    g.add_argument("--json", action="store_true",
                   help='print {"graphs": [{"device", "requests", "processes", "vertices", '
                        '"edges"}, ...]} as reblock graph does')


def _run_graph(parser, args) -> int:
    """``python -m reblock.spark graph``: what ``reblock graph`` prints."""
    from .spark_graph import access_graphs, print_graphs

    if args.min_weight < 1:
        parser.error(f"--min-weight {args.min_weight}: must be at least 1")
    graphs = _run_job(args, lambda spark: access_graphs(
        spark, args.trace, args.reorder_window, args.sort, args.min_weight))
    if graphs is None:
        return 1
    print_graphs(graphs, args.min_weight, args.json)
    return 0


def _run_job(args, job):
    """``job(spark)`` in a session for ``--master``; None (the error told on stderr, as
    reblock words it) for a trace that is missing, not Parquet, lacks a column or has a
    request later than the reorder window."""
    from pyspark.errors import AnalysisException

    spark = _session(args.master)
    try:
        return job(spark)
    except (LateRequest, MissingColumn) as e:
        print(f"reblock.spark: error: {e}", file=sys.stderr)
    except AnalysisException as e:  # a path that is not there, or not Parquet
        print(f"reblock.spark: error: {args.trace}: {e}", file=sys.stderr)
    finally:
        spark.stop()
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reblock.spark",
        description="Frequent block pairs (`pairs`) or BORG's access graph (`graph`) of a "
                    "Parquet trace on Spark; the same output as `reblock pairs` / "
                    "`reblock graph` for the same options.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pairs", help="mine the frequent block pairs")
    p.add_argument("trace", help="Parquet trace (a file, or a directory of files read in "
                                 "path order)")
    p.add_argument("--support", type=int, default=1, metavar="N",
                   help="keep pairs shared by at least N sessions (default 1)")
    p.add_argument("--session", default="100us", metavar="S",
                   help="session window from its first request (100us, 1ms) or `request`")
    p.add_argument("--mine", default="both", choices=["reads", "writes", "both"],
                   help="which requests form sessions (default both)")
    p.add_argument("--block-size", type=int, default=512, metavar="BYTES",
                   help="block size in bytes, a multiple of 512 (default 512)")
    p.add_argument("--window", type=int, default=DEFAULT_PAIR_WINDOW, metavar="K",
                   help="pair each block with the next K blocks of its session (default 13)")
    p.add_argument("--partitions", type=int, default=None, metavar="N",
                   help="cut the trace into at least N chunks of consecutive requests "
                        f"for sessionizing (default: as few as hold at most "
                        f"{MAX_CHUNK_ROWS} requests each)")
    _add_trace_order(p)
    p.add_argument("--json", action="store_true",
                   help='print {"pairs": [{"a", "b", "support"}, ...]} as reblock pairs does')
    _add_graph(sub)
    args = parser.parse_args(argv)
    if args.sort and args.reorder_window != "10ms":
        parser.error("--sort cannot be used with --reorder-window")
    try:
        parse_reorder_window(args.reorder_window)
    except ValueError as e:
        parser.error(str(e))
    if args.command == "graph":
        return _run_graph(parser, args)
    try:
        parse_session(args.session)  # fail on a bad flag before starting Spark
    except ValueError as e:
        parser.error(str(e))
    if args.partitions is not None and args.partitions < 1:
        parser.error(f"--partitions {args.partitions}: must be at least 1")

    out = _run_job(args, lambda spark: mined_pairs(
        spark, args.trace, args.support, args.session, args.mine, args.block_size,
        args.window, args.partitions, args.reorder_window, args.sort))
    if out is None:
        return 1
    if args.json:
        print(pairs_json(out))
    else:
        print(f"{len(out)} pairs seen in at least {args.support} session(s):")
        for a, b, c in zip(out["a"].tolist(), out["b"].tolist(), out["support"].tolist()):
            print(f"{a:>14} {b:>14} {c:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
