#!/usr/bin/env python3
"""Evaluate every trace of a corpus and print each policy's total busy time against vanilla.

Runs `reblock evaluate TRACE --device DEVICE --json` on each trace (traces whose addresses
run past the device get `--wrap`: a raw blkparse capture and the FIU excerpt) and prints
one table: per trace, and for a trace of several devices per device plus the trace's
headline (every device's busy time summed), each policy's total (normal phases plus the
copies of every reconfiguration) over vanilla's, then the worst figure of each policy.

Given two binaries (`--reblock NEW --baseline OLD`) it runs both on the same traces in
the same run and prints `old -> new` in each cell, so that a change is judged against a
baseline measured on the same machine at the same time.

    python3 scripts/evaluate_all.py --reblock target/release/reblock \
        --traces '/work/shared/traces/*/*' --traces captures/startup.trace.txt \
        --baseline /tmp/reblock-main --json-out results.json

The exit status is 1 when any figure exceeds `--limit` (default 1.02), so a CI job can
hold the line; `--limit 0` never fails.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

# Files next to traces that are not traces.
NOT_TRACES = (".md", ".json", ".img", ".log", ".files")
# Traces whose addresses exceed the modelled drive: their requests are folded in.
WRAP_HINTS = ("blktrace.txt", "fiu_first10000")


def traces_of(patterns):
    """The trace files the glob patterns name, sorted, without side files."""
    out = []
    for p in patterns:
        hits = sorted(glob.glob(p)) or ([p] if os.path.isfile(p) else [])
        if not hits:
            sys.exit(f"evaluate_all: no file matches {p}")
        out += [h for h in hits if os.path.isfile(h) and not h.endswith(NOT_TRACES)]
    return out


def evaluate(binary, trace, device, extra):
    """One `reblock evaluate --json` run: (parsed JSON, wall seconds)."""
    cmd = [binary, "evaluate", trace, "--json"] + extra
    if device != "default":
        cmd[3:3] = ["--device", device]
    # Without --device, evaluate sizes the disk itself and folds addresses when needed.
    if device != "default" and any(h in os.path.basename(trace) for h in WRAP_HINTS):
        cmd.append("--wrap")
    env = dict(os.environ, REBLOCK_PROGRESS_SECS="0")
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return json.loads(p.stdout), time.monotonic() - t0


def ratios(policies):
    """policy -> total busy over vanilla's total, from one evaluation's `policies`."""
    base = policies["vanilla"]["busy_time_s"]
    return {k: (v["busy_time_s"] / base if base > 0 else 1.0) for k, v in policies.items()}


def rows_of(name, doc):
    """(row label, {policy: ratio}) for a trace: one row, or per device and the sum."""
    if "devices" not in doc:
        return [(name, ratios(doc["policies"]))]
    rows, sums = [], {}
    for d in doc["devices"]:
        rows.append((f"{name} dev {d['trace_device']}", ratios(d["policies"])))
        for k, v in d["policies"].items():
            sums[k] = sums.get(k, 0.0) + v["busy_time_s"]
    summed = {k: {"busy_time_s": v} for k, v in sums.items()}
    return [(f"{name} (all devices)", ratios(summed))] + rows


def cell(old, new):
    if old is None:
        return f"{new:.3f}"
    return f"{old:.3f} -> {new:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reblock", default="target/release/reblock", help="binary to judge")
    ap.add_argument("--baseline", help="a second binary run on the same traces (before)")
    ap.add_argument("--traces", action="append",
                    help="glob of trace files (repeatable); default the shared corpus and "
                         "the start-up capture")
    ap.add_argument("--device", default="hdd:wd2500aaks",
                    help="device spec for every trace; 'default' lets evaluate choose the "
                         "disk from each trace's size, as a user running it without "
                         "--device gets")
    ap.add_argument("--limit", type=float, default=1.02,
                    help="fail when any figure is above this (0: never)")
    ap.add_argument("--json-out", help="write every run's figures here")
    ap.add_argument("extra", nargs="*", help="more arguments for evaluate (after --)")
    a = ap.parse_args()
    patterns = a.traces or ["/work/shared/traces/*/*", "/work/captures/startup.trace.txt"]
    traces = traces_of(patterns)
    binaries = ([("old", a.baseline)] if a.baseline else []) + [("new", a.reblock)]
    table, worst, dump = [], {}, {}
    for t in traces:
        name = os.path.relpath(t, os.path.dirname(os.path.dirname(t)))
        runs = {}
        for tag, b in binaries:
            doc, secs = evaluate(b, t, a.device, a.extra)
            runs[tag] = dict(rows_of(name, doc))
            print(f"  {tag}: {name} in {secs:.0f} s", file=sys.stderr, flush=True)
        dump[name] = runs
        for label, new in runs["new"].items():
            old = runs.get("old", {}).get(label)
            table.append((label, {k: cell(old and old.get(k), v) for k, v in new.items()}))
            for k, v in new.items():
                if k != "vanilla" and (k not in worst or v > worst[k][0]):
                    worst[k] = (v, label)
    policies = sorted({k for _, r in table for k in r if k != "vanilla"})
    print("| trace | " + " | ".join(policies) + " |")
    print("|---" * (len(policies) + 1) + "|")
    for label, r in table:
        print(f"| {label} | " + " | ".join(r.get(k, "") for k in policies) + " |")
    print()
    for k in policies:
        v, label = worst[k]
        print(f"worst {k}: {v:.3f} ({label})")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(dump, f, indent=1)
    over = [k for k in policies if a.limit > 0 and worst[k][0] > a.limit]
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
