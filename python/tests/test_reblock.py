"""The package against the CLI: the same trace gives the same tables and dicts."""

import json

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
    # The message starts with the file: no "External error: " from the Arrow stream.
    with pytest.raises(reblock.TraceError, match=r"^/\S*bad\.txt:2: field"):
        reblock.read_trace(bad, format="native")
    with pytest.raises(reblock.TraceError, match="bad.txt:2"):
        reblock.analyze(bad, format="native")
    with pytest.raises(ValueError, match="mine"):
        reblock.pairs(KERNEL, mine="sometimes")
    with pytest.raises(reblock.TraceError, match="missing.txt"):
        reblock.read_trace(tmp_path / "missing.txt")


#: Measured anew on every run: CPU and wall time, peak memory.
TIMINGS = {"cpu_s", "wall_s", "peak_rss_bytes", "planning_cpu_s"}


def without_timings(v):
    if isinstance(v, dict):
        return {k: without_timings(x) for k, x in v.items() if k not in TIMINGS}
    if isinstance(v, list):
        return [without_timings(x) for x in v]
    return v


@pytest.fixture(scope="session")
def kernel_head(tmp_path_factory):
    """The kernel trace's first 20,000 requests, as Parquet written by pyarrow."""
    out = tmp_path_factory.mktemp("head") / "kernel_head.parquet"
    pq.write_table(reblock.read_trace(KERNEL).slice(0, 20_000), out)
    return out


def test_evaluate_is_the_clis_json(kernel_head):
    got = reblock.evaluate(kernel_head, policies="vanilla,borg")
    want = cli_json("evaluate", str(kernel_head), "--policies", "vanilla,borg")
    assert without_timings(got) == without_timings(want)
    assert got["device_choice"]["data_area_from"] in ("metadata", "trace span")
    assert set(got["policies"]) == {"vanilla", "borg"}
    got = reblock.evaluate(kernel_head, policies="hot", device="hdd:barracuda", wrap=True,
                           bopt_size="16MiB", guard=False, interval=2, page_size=8192)
    want = cli_json("evaluate", str(kernel_head), "--policies", "hot", "--device",
                    "hdd:barracuda", "--wrap", "--bopt-size", "16MiB", "--no-guard",
                    "--interval", "2", "--page-size", "8192")
    assert without_timings(got) == without_timings(want)
    assert "device_choice" not in got and got["config"]["guard"] is False


def test_evaluate_lays_out_each_trace_device_on_its_own(tmp_path):
    trace = tmp_path / "two.txt"
    lines = [f"{i * 1000} 1 app {(i * 97) % 4096 * 8} 8 {'RW'[i % 3 == 0]} {i % 2}"
             for i in range(4000)]
    trace.write_text("\n".join(lines) + "\n")
    got = reblock.evaluate(trace, policies="vanilla,hot", format="native")
    want = cli_json("evaluate", str(trace), "--policies", "vanilla,hot", "--format",
                    "native")
    assert without_timings(got) == without_timings(want)
    assert [d["trace_device"] for d in got["devices"]] == [0, 1]


def test_evaluate_refuses_bad_options_by_name(kernel_head):
    with pytest.raises(ValueError, match="interval"):
        reblock.evaluate(kernel_head, interval="soon")
    with pytest.raises(ValueError, match="no option"):
        reblock._reblock.evaluate_json(str(kernel_head), {"colour": "red"}, "auto", 0)


def test_plan_is_the_clis_json(kernel_parquet, tmp_path):
    out = tmp_path / "plan.json"
    got = reblock.plan(kernel_parquet, "borg", out=out)
    cli_out = tmp_path / "cli-plan.json"
    want = cli_json("plan", str(kernel_parquet), "--out", str(cli_out))
    assert without_timings(got) == without_timings({**want, "out": str(out)})
    assert got["pages_placed"] > 0 and got["policy"] == "borg"
    assert out.read_text() == cli_out.read_text()
    got = reblock.plan(KERNEL, "dlr-seq", bopt_size="8MiB", write_buffer=0.1, k_window=4)
    want = cli_json("plan", str(KERNEL), "--policy", "dlr-seq", "--bopt-size", "8MiB",
                    "--write-buffer", "0.1", "--k-window", "4")
    assert without_timings(got) == without_timings(want)
    with pytest.raises(ValueError, match="page-size"):
        reblock.plan(KERNEL, page_size=1000)


def test_evaluate_array_with_capacity_is_the_clis_json(kernel_head):
    flags = dict(array="ssd:4", initial="zipf:0.5", support=2, capacity="4MiB")
    got = reblock.evaluate(kernel_head, **flags)
    want = cli_json("evaluate", str(kernel_head), "--array", "ssd:4", "--initial",
                    "zipf:0.5", "--support", "2", "--capacity", "4MiB")
    assert without_timings(got) == without_timings(want)
    assert got["disks"] == 4 and got["runs"][0]["support"] == 2
    with pytest.raises(ValueError, match="capacity"):
        reblock.evaluate(kernel_head, **{**flags, "capacity": "100"})
    with pytest.raises(ValueError, match="array"):
        reblock.evaluate(kernel_head, capacity="1GiB")


@pytest.fixture(scope="module")
def kernel_6k(kernel_head):
    """The kernel trace's first 6,000 requests (an array evaluation of them takes a
    fraction of a second)."""
    out = kernel_head.with_name("kernel_6k.parquet")
    pq.write_table(pq.read_table(kernel_head).slice(0, 6_000), out)
    return out


def test_evaluate_array_on_given_pairs_is_the_clis_json(kernel_6k, tmp_path):
    # The training part (the first half, evaluate's default) mined by `pairs`, then fed
    # back as a file and as the dict: the CLI's --pairs evaluation, and the one that
    # mines the training part itself.
    train = tmp_path / "train.parquet"
    pq.write_table(pq.read_table(kernel_6k).slice(0, 3_000), train)
    mined = reblock.pairs(train, support=1, block_size=4096, window=3)
    assert len(mined["pairs"]) > 100
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(mined))
    flags = dict(array="ssd:4", initial="zipf:0.5", support="1,5", block_size=4096)
    got = reblock.evaluate(kernel_6k, pairs=path, **flags)
    want = cli_json("evaluate", str(kernel_6k), "--array", "ssd:4", "--initial",
                    "zipf:0.5", "--support", "1,5", "--block-size", "4096", "--pairs",
                    str(path))
    assert without_timings(got) == without_timings(want)
    assert got["pairs_file"] == str(path)
    del got["pairs_file"]
    assert without_timings(reblock.evaluate(kernel_6k, pairs=mined, **flags)) == \
        without_timings(got)
    itself = reblock.evaluate(kernel_6k, **flags)
    assert without_timings(itself)["runs"] == without_timings(got)["runs"]


def test_evaluate_refuses_pairs_that_do_not_fit(kernel_6k, tmp_path):
    flags = dict(array="ssd:4", block_size=4096)
    with pytest.raises(ValueError, match=r"^pairs: pairs\[0\]: field `b` \(1\)"):
        reblock.evaluate(kernel_6k, pairs={"pairs": [{"a": 2, "b": 1, "support": 1}]},
                         **flags)
    with pytest.raises(ValueError, match=r"pairs\[0\]\.support: invalid type"):
        reblock.evaluate(kernel_6k, pairs={"pairs": [{"a": 1, "b": 2, "support": "x"}]},
                         **flags)
    bad = tmp_path / "bad.json"
    bad.write_text('{"pairs": [{"a": 1, "b": 2}]}')
    with pytest.raises(ValueError, match=r"bad\.json: .*pairs\[0\]: missing field `support`"):
        reblock.evaluate(kernel_6k, pairs=bad, **flags)
    with pytest.raises(OSError, match="missing.json"):
        reblock.evaluate(kernel_6k, pairs=tmp_path / "missing.json", **flags)
    with pytest.raises(ValueError, match="only with `array`"):
        reblock.evaluate(kernel_6k, pairs=bad)
    # Pairs that were perhaps mined at a higher support than an evaluated one: a warning.
    mined = reblock.pairs(kernel_6k, block_size=4096, window=3)["pairs"][:50]
    few = {"pairs": [{"a": p["a"], "b": p["b"], "support": 2} for p in mined]}
    with pytest.warns(UserWarning, match="--support 1, but every pair of pairs"):
        reblock.evaluate(kernel_6k, pairs=few, support=1, initial="zipf:0.5", **flags)
