"""The Spark job builds BORG's access graph exactly as `reblock graph` does, byte for
byte (run locally on two cores): the kernel capture through the command line, then
several devices, processes without pid or command, requests out of time order and a
directory of files in one Spark session."""

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
from reblock import spark_graph  # noqa: E402
from conftest import reblock_binary  # noqa: E402


def cli_graph(trace, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([reblock_binary(), "graph", str(trace), *options, "--json"],
                          capture_output=True, text=True)


def test_command_line_prints_the_clis_bytes(kernel_parquet):
    got = subprocess.run(
        [sys.executable, "-m", "reblock.spark", "graph", str(kernel_parquet), "--master",
         "local[2]", "--json"], check=True, capture_output=True, text=True).stdout.strip()
    want = cli_graph(kernel_parquet)
    assert want.returncode == 0, want.stderr
    assert got == want.stdout.strip()
    (graph,) = json.loads(got)["graphs"]
    assert graph["processes"] > 100 and len(graph["edges"]) > 10_000


def mixed_trace(n: int) -> pa.Table:
    """Two devices, 40 processes of which some have no pid or no command, extents that
    overlap (so vertices split and chain edges appear), up to 2 ms out of time order;
    written as polars would (Int64, large strings)."""
    rng = np.random.default_rng(17)
    ts = np.cumsum(rng.exponential(200_000, n).astype(np.int64))
    ts = ts - rng.integers(0, 2_000_000, n) * (rng.random(n) < 0.05)
    pid = rng.integers(1, 40, n)
    command = np.array([f"app{p % 7}" for p in pid], dtype=object)
    command[pid % 11 == 0] = None
    start = rng.integers(0, 300, n) * 8 + rng.choice([0, 4], n)
    return pa.table({
        "ts_ns": ts,
        "pid": pa.array(np.where(pid % 13 == 0, None, pid).tolist(), pa.uint32()),
        "command": pa.array(command.tolist(), pa.large_string()),
        "device": pa.array(rng.integers(0, 2, n), pa.uint32()),
        "sector": start,
        "sectors": pa.array(rng.choice([4, 8, 16, 24], n), pa.uint32()),
        "op": pa.array(rng.choice(["R", "W"], n), pa.large_string()),
    })


def test_devices_processes_and_time_order_as_reblock_reads_them(tmp_path):
    table = mixed_trace(20_000)
    pq.write_table(table, tmp_path / "whole.parquet")
    (tmp_path / "parts").mkdir()
    pq.write_table(table.slice(12_000), tmp_path / "parts" / "part-1.parquet")
    pq.write_table(table.slice(0, 12_000), tmp_path / "parts" / "part-0.parquet")
    spark = job._session("local[2]")
    try:
        for weight in (1, 3):
            want = cli_graph(tmp_path / "whole.parquet", "--min-weight", str(weight))
            assert want.returncode == 0, want.stderr
            assert "put in time order" in want.stderr
            graphs = spark_graph.access_graphs(spark, str(tmp_path / "parts"),
                                               min_weight=weight)
            got = spark_graph.graphs_json(graphs)
            assert got == want.stdout.strip(), f"min weight {weight}"
        parsed = json.loads(got)["graphs"]
        assert [g["device"] for g in parsed] == [0, 1]
        # Overlapping extents were split: some edge joins two pieces of one request.
        assert any(e["to"] - e["from"] == 4 for g in parsed for e in g["edges"])
    finally:
        spark.stop()
