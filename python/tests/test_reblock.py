"""The package against the CLI: the same trace gives the same tables and dicts."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import reblock
from conftest import KERNEL, cli_json


def test_read_trace_matches_reblocks_parquet(kernel_parquet):
    t = reblock.read_trace(KERNEL)
    assert t.num_rows == 97_129
    assert t.schema.field("ts_ns").type == pa.int64()
    assert t.schema.field("sector").type == pa.int64()
    assert t.schema.field("sectors").type == pa.uint32()
    written = pq.read_table(kernel_parquet)
    for column in ["ts_ns", "pid", "device", "sector", "sectors", "op"]:
        assert t[column].to_pylist() == written[column].to_pylist(), column
    assert t["command"].to_pylist() == written["command"].to_pylist()
    # Reading back what reblock wrote gives the same table.
    assert reblock.read_trace(kernel_parquet)["sector"].equals(t["sector"])


def test_read_trace_hands_over_rusts_buffers_without_a_copy():
    before = pa.total_allocated_bytes()
    t = reblock.read_trace(KERNEL)
    # 97k rows of 7 columns are megabytes; none of it came from pyarrow's allocator.
    assert t.nbytes > 2_000_000
    assert pa.total_allocated_bytes() - before < 100_000


def test_read_batches_streams():
    batches = list(reblock.read_batches(KERNEL))
    assert len(batches) == 2  # 64 Ki rows a batch
    assert sum(b.num_rows for b in batches) == 97_129


def test_analyze_is_the_clis_json(kernel_parquet):
    assert reblock.analyze(KERNEL) == cli_json("analyze", str(KERNEL))
    got = reblock.analyze(kernel_parquet, page_size="8K", interval="10000")
    assert got == cli_json("analyze", str(kernel_parquet), "--page-size", "8K",
                           "--interval", "10000")
    # The device size comes from the Parquet footer.
    assert got["device_bytes"] == 8 << 30


def test_simulate_is_the_clis_json(kernel_parquet):
    got = reblock.simulate(KERNEL, "hdd:barracuda", speed=168, wrap=True)
    assert got == cli_json("simulate", str(KERNEL), "--device", "hdd:barracuda",
                           "--speed", "168", "--wrap")
    assert got["pacing"] == "open" and got["speed"] == 168
    got = reblock.simulate(kernel_parquet, "ssd:k9", queue_depth=4, scheduler="sstf",
                           window="10000", wrap=True)
    assert got == cli_json("simulate", str(kernel_parquet), "--device", "ssd:k9",
                           "--queue-depth", "4", "--scheduler", "sstf", "--window", "10000",
                           "--wrap")
    assert got["queue_depth"] == 4 and got["speed"] is None
    with pytest.raises(ValueError, match="hdd:nosuch"):
        reblock.simulate(KERNEL, "hdd:nosuch")


def test_pairs_is_the_clis_json(kernel_parquet):
    got = reblock.pairs(kernel_parquet, support=3)
    assert got == cli_json("pairs", str(kernel_parquet), "--support", "3")
    assert len(got["pairs"]) > 100
    assert all(p["a"] < p["b"] and p["support"] >= 3 for p in got["pairs"])
    got = reblock.pairs(KERNEL, 2, session="request", block_size=4096, window=3)
    assert got == cli_json("pairs", str(KERNEL), "--support", "2", "--session", "request",
                           "--block-size", "4096", "--window", "3")


def test_trace_metadata(kernel_parquet):
    assert reblock.trace_metadata(kernel_parquet) == {
        "device_sectors": 16_777_216, "source_format": "native", "schema_version": 2}


def test_errors_name_the_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 1 app 8 8 R\n2 1 app 8 x R\n")
    with pytest.raises(reblock.TraceError, match=r"bad.txt:2: field"):
        reblock.read_trace(bad, format="native")
    with pytest.raises(reblock.TraceError, match="bad.txt:2"):
        reblock.analyze(bad, format="native")
    with pytest.raises(ValueError, match="mine"):
        reblock.pairs(KERNEL, mine="sometimes")
    with pytest.raises(reblock.TraceError, match="missing.txt"):
        reblock.read_trace(tmp_path / "missing.txt")
