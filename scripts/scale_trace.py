#!/usr/bin/env python3
"""Writes a synthetic block trace of N requests over P distinct 4 KiB pages as reblock's
Parquet schema (docs/parquet.md), for measuring memory and throughput at scale.

The workload is reproducible (a fixed seed) and shaped like a file-system trace: page
popularity is Zipf-like (a few hot files, a long tail), 70 % of requests are reads, a
request covers 1 to 16 pages, a third of requests continue sequentially from the
previous one, and arrivals are exponential with a 100 us mean. The footer records the
device size (twice the touched range), so `analyze` reports the fraction touched.

    python3 scripts/scale_trace.py --requests 20000000 --pages 2000000 OUT.parquet

Needs numpy and pyarrow. Writes in row groups of 1 Mi rows, so memory stays small.
"""

import argparse
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

PAGE_SECTORS = 8
CHUNK = 1 << 20


def schema(device_sectors: int) -> pa.Schema:
    fields = [
        pa.field("ts_ns", pa.int64(), nullable=False),
        pa.field("pid", pa.uint32()),
        pa.field("command", pa.dictionary(pa.int32(), pa.utf8())),
        pa.field("device", pa.uint32(), nullable=False),
        pa.field("sector", pa.int64(), nullable=False),
        pa.field("sectors", pa.uint32(), nullable=False),
        pa.field("op", pa.utf8(), nullable=False),
    ]
    meta = {
        "reblock.schema_version": "2",
        "reblock.source_format": "synthetic",
        "reblock.device_sectors": str(device_sectors),
    }
    return pa.schema(fields, metadata=meta)


def chunk(rng: np.random.Generator, n: int, pages: int, state: dict) -> pa.RecordBatch:
    # Zipf-like popularity: rank r drawn with density ~ 1/r over 1..pages, then scattered
    # by a fixed permutation so that hot pages are not all at the device's start.
    ranks = np.minimum((pages ** rng.random(n)).astype(np.int64), pages) - 1
    page = state["scatter"][ranks]
    length = rng.integers(1, 17, n, dtype=np.int64)
    page = np.minimum(page, pages - length)
    sequential = rng.random(n) < 1 / 3
    prev_end = np.empty(n, dtype=np.int64)
    prev_end[0] = state["end"]
    prev_end[1:] = page[:-1] + length[:-1]
    page = np.where(sequential & (prev_end + length <= pages), prev_end, page)
    state["end"] = int(page[-1] + length[-1])
    gaps = rng.exponential(100_000, n).astype(np.int64) + 1
    ts = state["ts"] + np.cumsum(gaps)
    state["ts"] = int(ts[-1])
    op = np.where(rng.random(n) < 0.7, "R", "W")
    command = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, dtype=np.int32)), pa.array(["app"]))
    return pa.record_batch([
        pa.array(ts, pa.int64()),
        pa.array(np.full(n, 4242, dtype=np.uint32)),
        command,
        pa.array(np.zeros(n, dtype=np.uint32)),
        pa.array(page * PAGE_SECTORS, pa.int64()),
        pa.array((length * PAGE_SECTORS).astype(np.uint32)),
        pa.array(op, pa.utf8()),
    ], schema=state["schema"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="Parquet file to write")
    ap.add_argument("--requests", type=int, required=True, help="number of requests")
    ap.add_argument("--pages", type=int, default=2_000_000,
                    help="4 KiB pages the requests spread over (default 2,000,000)")
    ap.add_argument("--seed", type=int, default=15)
    args = ap.parse_args()
    if args.requests < 1 or args.pages < 16:
        ap.error("--requests must be at least 1 and --pages at least 16")
    rng = np.random.default_rng(args.seed)
    state = {
        "scatter": rng.permutation(args.pages).astype(np.int64),
        "end": 0,
        "ts": 0,
        "schema": schema(2 * args.pages * PAGE_SECTORS),
    }
    with pq.ParquetWriter(args.out, state["schema"], compression="zstd") as w:
        left = args.requests
        while left > 0:
            n = min(CHUNK, left)
            w.write_batch(chunk(rng, n, args.pages, state), row_group_size=CHUNK)
            left -= n
            print(f"\r{args.requests - left} / {args.requests} requests", end="",
                  file=sys.stderr)
    print(file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
