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
    """Two devices' requests interleaved, in time order, written as polars would (Int64,
    large strings)."""
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


def as_per_cpu_buffers(table: pa.Table, slot_ns: int) -> pa.Table:
    """A trace as blkparse's per-CPU buffers deliver it: requests split over two CPUs by
    process, each CPU's requests of every ``slot_ns`` of trace time written together (CPU
    0 first), so a request comes up to a slot after later ones; written as pandas would
    (Int64 times and sectors, large strings)."""
    ts = table["ts_ns"].to_numpy().astype(np.int64)
    cpu = table["pid"].to_numpy() % 2
    order = np.lexsort((np.arange(len(ts)), cpu, (ts - ts[0]) // slot_ns))
    out = table.take(pa.array(order))
    return out.cast(pa.schema([
        pa.field(f.name, pa.int64() if f.name in ("ts_ns", "sector") else
                 pa.large_string() if pa.types.is_string(f.type) else f.type)
        for f in out.schema]))


def cli_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([reblock_binary(), *args], capture_output=True, text=True)


def test_requests_out_of_time_order_are_put_in_order_as_reblock_does(
        spark, kernel_parquet, tmp_path):
    # The real kernel capture merged from per-CPU buffers, 1 ms slots: hundreds of
    # requests come after later ones (some with equal times: file order breaks the tie).
    merged = tmp_path / "merged.parquet"
    pq.write_table(as_per_cpu_buffers(pq.read_table(kernel_parquet), 1_000_000), merged)
    options = ("--support", "2", "--block-size", "4096")
    cli = cli_run("pairs", str(merged), *options, "--json")
    assert cli.returncode == 0, cli.stderr
    assert "put in time order" in cli.stderr
    assert cli.stdout.strip() != cli_pairs(kernel_parquet, *options)
    # Cut into 5 ranges of time, sessions carried across them.
    got = mined(spark, merged, support=2, block_size=4096, partitions=5)
    assert got == cli.stdout.strip()
    assert len(json.loads(got)["pairs"]) > 1000
    # `reblock convert` writes the requests in the order it read them: in time order.
    converted = tmp_path / "converted.parquet"
    assert cli_run("convert", str(merged), str(converted)).returncode == 0
    assert cli_pairs(converted, *options) == got


def test_a_request_later_than_the_reorder_window_is_refused_unless_sorted(spark, tmp_path):
    table = several_devices(3_000)
    ts = table["ts_ns"].to_numpy().copy()
    ts[2_000] -= 30_000_000  # 30 ms before the request ahead of it
    late = tmp_path / "late.parquet"
    pq.write_table(table.set_column(0, "ts_ns", pa.array(ts)), late)
    cli = cli_run("pairs", str(late), "--json")
    assert cli.returncode != 0 and "request 2001:" in cli.stderr, cli.stderr
    with pytest.raises(job.LateRequest, match="request 2001: field timestamp") as e:
        mined(spark, late)
    assert "more than the 0.010000000 s reorder window" in str(e.value)
    # A 50 ms window admits it; sorting admits any order.
    for spark_opts, cli_opts in [({"reorder_window": "50ms"}, ("--reorder-window", "50ms")),
                                 ({"sort": True}, ("--sort",))]:
        assert mined(spark, late, partitions=3, **spark_opts) == cli_pairs(late, *cli_opts)


def test_a_trace_that_is_missing_or_lacks_a_column_is_refused_by_name(spark, tmp_path):
    partial = tmp_path / "partial.parquet"
    pq.write_table(pa.table({"ts_ns": [1, 2], "sector": [0, 8]}), partial)
    with pytest.raises(job.MissingColumn, match="partial.parquet: no column `sectors`"):
        mined(spark, partial)
    for path, wanted in [(partial, "no column `sectors`"),
                         (tmp_path / "missing.parquet", "missing.parquet: ")]:
        run = subprocess.run(
            [sys.executable, "-m", "reblock.spark", "pairs", str(path), "--master",
             "local[1]"], capture_output=True, text=True)
        assert run.returncode == 1, run.stderr
        assert "reblock.spark: error: " in run.stderr and wanted in run.stderr, run.stderr
        assert "Traceback" not in run.stderr, run.stderr
