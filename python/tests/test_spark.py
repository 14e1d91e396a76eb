"""The Spark job agrees pair for pair with `reblock pairs` (run locally)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed: pip install ./python[spark]")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs a Java runtime (17 or later) on PATH or in JAVA_HOME",
                allow_module_level=True)

import reblock  # noqa: E402
from conftest import cli_json  # noqa: E402


def spark_pairs(*args: str):
    out = subprocess.run([sys.executable, "-m", "reblock.spark", "pairs", *args, "--json"],
                         check=True, capture_output=True, text=True)
    return out.stdout


@pytest.mark.parametrize("options", [
    ["--support", "2"],
    # Many partitions, so that sessions straddle partition boundaries; reads only.
    ["--support", "1", "--partitions", "7", "--mine", "reads", "--session", "1ms"],
    ["--support", "2", "--session", "request", "--block-size", "4096", "--window", "3"],
])
def test_spark_agrees_with_reblock_pairs(kernel_parquet, options):
    got = spark_pairs(str(kernel_parquet), "--master", "local[2]", *options)
    cli_options = [o for i, o in enumerate(options)
                   if o != "--partitions" and (i == 0 or options[i - 1] != "--partitions")]
    want = cli_json("pairs", str(kernel_parquet), *cli_options)
    assert json.loads(got) == want
    assert len(want["pairs"]) > 10
    # The same bytes as the CLI prints.
    assert got.strip() == json.dumps(want, separators=(",", ":"))


def test_unit_pieces_match_the_rust_definitions():
    from reblock.spark import blocks_of, parse_session, session_pairs
    assert list(blocks_of(0, 2, 1)) == [0, 1]
    assert list(blocks_of(9, 1, 2)) == [4]
    assert parse_session("100us") == 100_000 and parse_session("request") is None
    assert list(session_pairs([5, 1, 9], 1)) == [(1, 5), (1, 9)]
    assert reblock.DEFAULT_PAIR_WINDOW == 13
