#!/usr/bin/env python3
"""Peak memory and throughput of `reblock analyze` and `reblock evaluate` as a trace grows.

For each size it writes a synthetic trace (scripts/scale_trace.py: N requests over a
fixed number of 4 KiB pages, as Parquet), then runs under /usr/bin/time -v:

- the baseline, `reblock convert TRACE OUT.parquet`: one streaming read and write of the
  trace, the least any command that reads every request costs;
- `reblock analyze TRACE --json`;
- `reblock evaluate TRACE --policies vanilla,borg --json` (unless --no-evaluate;
  `--policies vanilla` measures the replays without BORG's planning).

With `--compare OLD_BINARY`, analyze and evaluate also run with that build of reblock on
the same trace in the same run (`old_analyze`, `old_evaluate`), and each new figure is
given as a ratio to the old one. With `--cpu N` every command is pinned to core N
(`taskset -c N`), so a shared machine's other work does not move it between cores.

It prints, per size and command, the peak RSS, the wall and user CPU time, requests per
second, and the time as a ratio to the baseline of the same size measured in the same
run; then the growth of each figure from the smallest size to the largest, and per
decade of requests. On a shared machine the user CPU time is the steadier figure. --json
prints the same as one object.

    python3 scripts/scale_bench.py --sizes 10000000,100000000 --no-evaluate-above 20000000

Build first: cargo build --release -p reblock (or pass --reblock PATH).
"""

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(argv: list, cpu) -> dict:
    """Runs argv under /usr/bin/time -v (pinned to core `cpu` unless None): its peak RSS
    (MB), wall time and user CPU time (s); on a shared machine the CPU time is the
    steadier figure."""
    pin = [] if cpu is None else ["taskset", "-c", str(cpu)]
    started = time.monotonic()
    p = subprocess.run([*pin, "/usr/bin/time", "-v", *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    if p.returncode != 0:
        sys.exit(f"scale_bench: {' '.join(map(str, argv))} failed:\n{p.stderr[-2000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)[1])
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", p.stderr)[1])
    return {"peak_rss_mb": round(rss_kb / 1024, 1), "wall_s": round(wall, 2),
            "user_s": round(user, 2)}


def run_size(n: int, args, work: Path) -> dict:
    trace = work / f"scale-{n}-{args.pages}.parquet"
    if not trace.exists():
        subprocess.run([sys.executable, str(HERE / "scale_trace.py"), str(trace),
                        "--requests", str(n), "--pages", str(args.pages)], check=True,
                       stderr=subprocess.DEVNULL)
    runs = {"baseline_convert": [args.reblock, "convert", trace, work / "copy.parquet"]}
    builds = [("", args.reblock)] + ([("old_", args.compare)] if args.compare else [])
    for prefix, binary in builds:
        runs[f"{prefix}analyze"] = [binary, "analyze", trace, "--json"]
        if not args.no_evaluate and n <= args.no_evaluate_above:
            runs[f"{prefix}evaluate"] = [binary, "evaluate", trace, "--policies",
                                         args.policies, "--json"]
    out = {}
    for name, argv in runs.items():
        print(f"scale_bench: {n} requests: {name}", file=sys.stderr)
        m = measure(argv, args.cpu)
        m["requests_per_s"] = round(n / m["wall_s"])
        out[name] = m
        # As it goes, so that a run cut short still reports what it measured.
        print(f"scale_bench: {n} requests: {name}: {m}", file=sys.stderr)
    base = out["baseline_convert"]["wall_s"]
    for m in out.values():
        m["time_vs_baseline"] = round(m["wall_s"] / base, 2)
    for cmd in ("analyze", "evaluate"):
        new, old = out.get(cmd), out.get(f"old_{cmd}")
        if new and old:
            new["user_vs_old"] = round(new["user_s"] / max(old["user_s"], 0.01), 3)
            new["peak_rss_vs_old"] = round(new["peak_rss_mb"] / old["peak_rss_mb"], 3)
    (work / "copy.parquet").unlink(missing_ok=True)
    return out


def growth(results: dict) -> dict:
    sizes = sorted(results)
    lo, hi = sizes[0], sizes[-1]
    out = {"requests": f"{lo} -> {hi} (x{hi / lo:g})"}
    for cmd in results[hi]:
        if cmd in results[lo]:
            a, b = results[lo][cmd], results[hi][cmd]
            decades = math.log10(hi / lo)
            out[cmd] = {"peak_rss_x": round(b["peak_rss_mb"] / a["peak_rss_mb"], 2),
                        "wall_x": round(b["wall_s"] / a["wall_s"], 2),
                        "user_x": round(b["user_s"] / max(a["user_s"], 0.01), 2),
                        # The factor one decade (x10 requests) multiplies each by.
                        "peak_rss_x_per_decade": round(
                            (b["peak_rss_mb"] / a["peak_rss_mb"]) ** (1 / decades), 2),
                        "user_x_per_decade": round(
                            (b["user_s"] / max(a["user_s"], 0.01)) ** (1 / decades), 2)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000000,20000000",
                    help="comma-separated request counts (default 10000000,20000000)")
    ap.add_argument("--pages", type=int, default=2_000_000,
                    help="distinct 4 KiB pages the requests spread over (default 2,000,000)")
    ap.add_argument("--reblock", default=str(HERE.parent / "target/release/reblock"))
    ap.add_argument("--workdir", help="where traces are written and kept (default: a temp dir)")
    ap.add_argument("--no-evaluate", action="store_true", help="measure analyze only")
    ap.add_argument("--policies", default="vanilla,borg",
                    help="the policies evaluate compares (default: vanilla,borg)")
    ap.add_argument("--no-evaluate-above", type=int, default=10**18, metavar="N",
                    help="skip evaluate for sizes above N requests")
    ap.add_argument("--compare", metavar="OLD_BINARY",
                    help="also run analyze and evaluate with this reblock build, same run")
    ap.add_argument("--cpu", type=int, metavar="N",
                    help="pin every command to core N (taskset -c N)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    sizes = sorted(int(float(s)) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = {n: run_size(n, args, work) for n in sizes}
    report = {"pages": args.pages, "results": results}
    if len(sizes) > 1:
        report["growth"] = growth(results)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{'requests':>11} {'command':<17} {'peak RSS MB':>11} {'wall s':>8} "
          f"{'user s':>8} {'req/s':>10} {'x baseline':>10} {'user/old':>8} {'RSS/old':>8}")
    for n, cmds in results.items():
        for cmd, m in cmds.items():
            print(f"{n:>11} {cmd:<17} {m['peak_rss_mb']:>11} {m['wall_s']:>8} "
                  f"{m['user_s']:>8} {m['requests_per_s']:>10} {m['time_vs_baseline']:>10} "
                  f"{m.get('user_vs_old', ''):>8} {m.get('peak_rss_vs_old', ''):>8}")
    for k, v in report.get("growth", {}).items():
        print(f"growth {k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
