"""The Spark job agrees pair for pair, byte for byte, with `reblock pairs` (run locally
on two cores): through its command line, then in one Spark session for the cases that
cut the trace into many chunks, mine whole requests, and read several devices from a
directory of files."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed: pip install ./python[spark]")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs a Java runtime (17 or later) on PATH or in JAVA_HOME",
                allow_module_level=True)

from reblock import spark as job  # noqa: E402
from conftest import reblock_binary  # noqa: E402


def cli_pairs(trace, *options: str) -> str:
    """What `reblock pairs --json` prints."""
    return subprocess.run([reblock_binary(), "pairs", str(trace), *options, "--json"],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def spark():
    session = job._session("local[2]")
    yield session
    session.stop()


def mined(spark, trace, **options) -> str:
    return job.pairs_json(job.mined_pairs(spark, str(trace), **options))


def test_command_line_prints_the_clis_bytes(kernel_parquet):
    got = subprocess.run(
        [sys.executable, "-m", "reblock.spark", "pairs", str(kernel_parquet), "--master",
         "local[2]", "--support", "2", "--json"],
        check=True, capture_output=True, text=True).stdout.strip()
    want = cli_pairs(kernel_parquet, "--support", "2")
    assert got == want
    assert len(json.loads(want)["pairs"]) > 1000


def opens_sessions_across(ts: np.ndarray, cuts, window: int) -> bool:
    """Whether a session (by reblock's rule) holds the requests on both sides of a cut."""
    start, across = None, False
    for i, t in enumerate(ts.tolist()):
        if start is None or not (start <= t < start + window):
            start = t
        elif i in cuts:
            across = True
    return across


def test_sessions_straddling_chunks_are_joined(spark, kernel_parquet):
    # Reads only, 1 ms sessions, the trace cut into 7 chunks: sessions straddle the cuts.
    # 4 KiB blocks and support 3: at 512 B and support 1 the answer is 13 M pairs (a
    # 500 MB JSON), which tests the printing, not the mining.
    table = pq.read_table(kernel_parquet, columns=["ts_ns", "op"])
    rows, chunk = table.num_rows, -(-table.num_rows // 7)
    reads = np.flatnonzero(np.asarray(table["op"].to_pylist()) == "R")
    cuts = {int(i) for i in np.searchsorted(reads, range(chunk, rows, chunk))}
    assert opens_sessions_across(table["ts_ns"].to_numpy()[reads], cuts, 1_000_000)
    got = mined(spark, kernel_parquet, support=3, mine="reads", session="1ms",
                block_size=4096, partitions=7)
    assert got == cli_pairs(kernel_parquet, "--support", "3", "--mine", "reads",
                            "--session", "1ms", "--block-size", "4096")
    assert len(json.loads(got)["pairs"]) > 1000


def test_whole_requests_with_large_blocks(spark, kernel_parquet):
    got = mined(spark, kernel_parquet, support=2, session="request", block_size=4096,
                window=3)
    want = cli_pairs(kernel_parquet, "--support", "2", "--session", "request",
                     "--block-size", "4096", "--window", "3")
    assert got == want
    assert len(json.loads(want)["pairs"]) > 100


def several_devices(n: int) -> pa.Table:
    """Two devices' requests interleaved, written as polars would (Int64, large
    strings). In time order: reblock's reader puts requests that arrive out of order
    back in order (its reorder window), which the Spark job does not do yet."""
    rng = np.random.default_rng(15)
    ts = np.cumsum(rng.exponential(60_000, n).astype(np.int64))
    hot = rng.integers(0, 2_000, n) * 8
    return pa.table({
        "ts_ns": ts,
        "pid": pa.array(rng.integers(1, 50, n), pa.uint32()),
        "command": pa.array(["app"] * n, pa.large_string()),
        "device": pa.array(rng.integers(0, 2, n), pa.uint32()),
        "sector": np.where(rng.random(n) < 0.5, hot, rng.integers(0, 10**7, n)),
        "sectors": pa.array(rng.integers(1, 17, n), pa.uint32()),
        "op": pa.array(rng.choice(["R", "W"], n, p=[0.7, 0.3]), pa.large_string()),
    })


def test_several_devices_in_a_directory_of_files(spark, tmp_path):
    table = several_devices(30_000)
    pq.write_table(table, tmp_path / "whole.parquet")
    (tmp_path / "parts").mkdir()
    # Read in path order: part-0 first, whatever order the file system lists them in.
    pq.write_table(table.slice(17_000), tmp_path / "parts" / "part-1.parquet")
    pq.write_table(table.slice(0, 17_000), tmp_path / "parts" / "part-0.parquet")
    for support in (1, 3):
        got = mined(spark, tmp_path / "parts", support=support, block_size=4096,
                    partitions=5)
        want = cli_pairs(tmp_path / "whole.parquet", "--support", str(support),
                         "--block-size", "4096")
        assert got == want, f"support {support}"
        assert len(json.loads(want)["pairs"]) > 100
