"""Shared fixtures: the bundled kernel-build trace, and the `reblock` binary the
package's results are compared with (built by `cargo build`; REBLOCK overrides)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "data" / "dev_kernel.trace.txt.zst"


def reblock_binary() -> str:
    candidates = [os.environ.get("REBLOCK"), REPO / "target/debug/reblock",
                  REPO / "target/release/reblock", shutil.which("reblock")]
    for c in candidates:
        if c and Path(c).is_file():
            return str(c)
    pytest.fail("no reblock binary: run `cargo build` first or set REBLOCK")


def cli_json(*args: str):
    out = subprocess.run([reblock_binary(), *args, "--json"], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="session")
def kernel_parquet(tmp_path_factory) -> Path:
    """The kernel trace converted to Parquet by reblock (device size in its footer)."""
    out = tmp_path_factory.mktemp("kernel") / "dev_kernel.parquet"
    subprocess.run([reblock_binary(), "convert", str(KERNEL), str(out)], check=True,
                   capture_output=True)
    return out
