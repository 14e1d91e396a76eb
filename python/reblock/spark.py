"""Frequent block pairs on Spark: the sessionization and pair counting of
``reblock pairs`` (the parallel-array optimizer's mining) for traces too large for one
machine. Prints exactly what ``reblock pairs --json`` prints for the same trace and
options::

    python -m reblock.spark pairs TRACE.parquet --support 5 --json            # local[*]
    spark-submit --master yarn -m reblock.spark ...                            # see docs

Needs pyspark (``pip install ./python[spark]``) and a Parquet trace (``reblock convert``
writes one; any file with the columns ts_ns, sector, sectors, op works).

How it stays exact: sessions depend on request order (a session holds the requests
arriving within the window of its first request), so the rows are range-partitioned in
file order and one small job per partition carries the open session across partition
boundaries; then every partition forms its sessions and counts their pairs in parallel,
and the sessions that straddle a boundary are joined by their id before counting.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

DEFAULT_PAIR_WINDOW = 13
_UNITS_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
             "m": 60_000_000_000, "min": 60_000_000_000,
             "h": 3_600_000_000_000, "d": 86_400_000_000_000}


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


def blocks_of(sector: int, sectors: int, block_sectors: int) -> range:
    """The blocks a request touches, as reblock's Blocking::blocks (no wrap)."""
    first = sector // block_sectors
    last = (sector + max(sectors, 1) - 1) // block_sectors
    return range(first, last + 1)


def session_pairs(blocks: Sequence[int], window: int) -> Iterator[Tuple[int, int]]:
    """The pairs of one session: distinct blocks in first-requested order, each paired
    with the next ``window`` (as reblock's PairCounts::add_session)."""
    for i, x in enumerate(blocks):
        for y in blocks[i + 1:i + 1 + window]:
            yield (x, y) if x < y else (y, x)


class _Session:
    """An open session: its id (the order key of its first row) and distinct blocks."""

    def __init__(self, sid: int, start_ns: int):
        self.sid, self.start_ns = sid, start_ns
        self.blocks: List[int] = []
        self.seen: set = set()

    def add(self, blocks: Iterable[int]) -> None:
        for b in blocks:
            if b not in self.seen:
                self.seen.add(b)
                self.blocks.append(b)


def _carry(rows: Iterable[tuple], carry: Optional[Tuple[int, int]], window_ns: int):
    """The open session (id, start) after ``rows`` (sorted), given the one before."""
    for key, ts, _sector, _sectors in rows:
        if carry is None or not (ts >= carry[1] and ts - carry[1] < window_ns):
            carry = (key, ts)
    return carry


def _partition_sessions(rows, carry, window_ns, block_sectors, window):
    """Forms the sessions of one sorted partition. Sessions wholly inside it yield their
    pairs as ("pair", (a, b)); the first (when it began in an earlier partition) and the
    last (which may go on in the next) yield ("part", (sid, first key here, blocks)), to
    be joined across partitions by session id."""
    cur: Optional[_Session] = None
    carried = carry is not None
    if carried:
        cur = _Session(carry[0], carry[1])
    first_key = None
    for key, ts, sector, sectors in rows:
        same = (cur is not None and window_ns is not None
                and ts >= cur.start_ns and ts - cur.start_ns < window_ns)
        if not same:
            if cur is not None:
                yield from _close(cur, first_key, carried, window)
            cur, carried, first_key = _Session(key, ts), False, key
        elif first_key is None:
            first_key = key
        cur.add(blocks_of(sector, sectors, block_sectors))
    if cur is not None and cur.blocks:
        yield ("part", (cur.sid, first_key, cur.blocks))


def _close(session: _Session, first_key, carried: bool, window: int):
    """A finished session: its pairs, or its part when it began in another partition."""
    if carried:
        if session.blocks:
            yield ("part", (session.sid, first_key, session.blocks))
        return
    for p in session_pairs(session.blocks, window):
        yield ("pair", p)


def _joined_pairs(parts: Iterable[Tuple[int, List[int]]], window: int):
    """Pairs of one session assembled from its parts, in row order."""
    s = _Session(0, 0)
    for _key, blocks in sorted(parts, key=lambda p: p[0]):
        s.add(blocks)
    return list(session_pairs(s.blocks, window))


def mine_pairs(spark, path: str, support: int = 1, session: str = "100us",
               mine: str = "both", block_size: int = 512,
               window: int = DEFAULT_PAIR_WINDOW,
               partitions: Optional[int] = None) -> Dict[str, list]:
    """``{"pairs": [{"a", "b", "support"}, ...]}`` of the Parquet trace at ``path``,
    exactly as ``reblock pairs`` mines them with the same options."""
    from pyspark.sql import functions as F

    if support < 1 or window < 1:
        raise ValueError("support and window must be at least 1")
    if block_size < 512 or block_size % 512:
        raise ValueError(f"block size {block_size}: a positive multiple of 512 bytes")
    ops = {"both": ("R", "W"), "reads": ("R",), "read": ("R",),
           "writes": ("W",), "write": ("W",)}.get(mine)
    if ops is None:
        raise ValueError(f"--mine `{mine}`: expected reads, writes or both")
    window_ns = parse_session(session)
    block_sectors = block_size // 512

    df = spark.read.parquet(path)
    df = df.select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.row_index").alias("row"),
        F.col("ts_ns").cast("long"), F.col("sector").cast("long"),
        F.col("sectors").cast("long"), F.col("op").cast("string"),
    ).where(F.col("op").isin(*ops))
    # One order key over all files, in file then row order (what reblock reads).
    files = sorted(r[0] for r in df.select("file").distinct().collect())
    rank = {f: i for i, f in enumerate(files)}
    rdd = df.rdd.map(lambda r: ((rank[r[0]] << 40) | r[1], r[2], r[3], r[4]))
    n = partitions or spark.sparkContext.defaultParallelism
    rdd = rdd.sortBy(lambda r: r[0], numPartitions=n).cache()

    sc = spark.sparkContext
    carries: List[Optional[Tuple[int, int]]] = [None]
    if window_ns is not None:
        for p in range(rdd.getNumPartitions() - 1):
            c = carries[-1]
            carries.append(sc.runJob(rdd, lambda it, c=c: [_carry(it, c, window_ns)], [p])[0])
    else:
        carries = [None] * rdd.getNumPartitions()

    def sessions(i, it):
        return _partition_sessions(it, carries[i], window_ns, block_sectors, window)

    tagged = rdd.mapPartitionsWithIndex(sessions).cache()
    local = tagged.filter(lambda t: t[0] == "pair").map(lambda t: (t[1], 1))
    joined = (tagged.filter(lambda t: t[0] == "part")
              .map(lambda t: (t[1][0], (t[1][1], t[1][2])))
              .groupByKey()
              .flatMap(lambda kv: _joined_pairs(kv[1], window))
              .map(lambda p: (p, 1)))
    counts = local.union(joined).reduceByKey(lambda x, y: x + y)
    frequent = counts.filter(lambda kv: kv[1] >= support).collect()
    rdd.unpersist()
    tagged.unpersist()
    frequent.sort()
    return {"pairs": [{"a": a, "b": b, "support": c} for (a, b), c in frequent]}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reblock.spark",
        description="Frequent block pairs of a Parquet trace on Spark; the same output "
                    "as `reblock pairs` for the same options.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pairs", help="mine the frequent block pairs")
    p.add_argument("trace", help="Parquet trace (a file or a directory of files)")
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
    p.add_argument("--master", default=None, metavar="URL",
                   help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--partitions", type=int, default=None, metavar="N",
                   help="partitions of the sorted trace (default: the cluster's parallelism)")
    p.add_argument("--json", action="store_true",
                   help='print {"pairs": [{"a", "b", "support"}, ...]} as reblock pairs does')
    args = parser.parse_args(argv)
    try:
        parse_session(args.session)  # fail on a bad flag before starting Spark
    except ValueError as e:
        parser.error(str(e))

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("reblock pairs")
    if args.master:
        builder = builder.master(args.master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Not under spark-submit (which sets the master): run locally on every core.
        builder = builder.master("local[*]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        out = mine_pairs(spark, args.trace, args.support, args.session, args.mine,
                         args.block_size, args.window, args.partitions)
    finally:
        spark.stop()
    if args.json:
        print(json.dumps(out, separators=(",", ":")))
    else:
        print(f"{len(out['pairs'])} pairs seen in at least {args.support} session(s):")
        for q in out["pairs"]:
            print(f"{q['a']:>14} {q['b']:>14} {q['support']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
