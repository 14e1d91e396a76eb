#!/usr/bin/env python3
"""Compare reblock's simulator with DiskSim 4.0 on the same request streams.

Generates the workloads (fixed seeds), runs DiskSim on the validated Seagate Cheetah 15K.5
package and on the MSR SSD extension's packaged `ssd-iozone.parv`, runs `reblock simulate`
on the same streams, and prints a table: workload / DiskSim / reblock / error. With
`--doc FILE` it also rewrites the table between the markers in FILE (docs/fidelity.md).
With `--bench N` it times both simulators on one N-request stream (requests per second,
same run) and reports the ratio.

DiskSim stays outside the repository: pass the path of its binary (a build with the SSD
extension serves both the disk and the SSD runs) and of the two parameter directories.

    python3 scripts/fidelity.py --disksim ~/disksim/src/disksim \
        --cheetah ~/Seagate-Cheetah15k5 --ssd ~/disksim/ssdmodel/valid \
        --reblock target/release/reblock --doc docs/fidelity.md --bench 200000
"""

import argparse
import hashlib
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time

HDD_SECTORS = 286_749_487
SSD_SECTORS = 56_157_696
GIB_SECTORS = 2 * 1024 * 1024


class Stream:
    """One workload: requests (time_ms, sector, sectors, read) on one device."""

    def __init__(self, name, kind, what, seed):
        self.name, self.kind, self.what = name, kind, what
        self.rng = random.Random(seed)
        self.reqs = []

    def add(self, t_ms, sector, sectors, read):
        self.reqs.append((t_ms, sector, sectors, read))


def aligned(rng, limit, sectors):
    """A random 4 KiB-aligned start below `limit` with room for `sectors`."""
    return rng.randrange(0, (limit - sectors) // 8) * 8


def random_stream(name, kind, what, seed, n, gap, sizes_kib, read_frac, limit,
                  poisson=False, base=0):
    s = Stream(name, kind, what, seed)
    t = 0.0
    for _ in range(n):
        t += s.rng.expovariate(1.0 / gap) if poisson else gap
        sectors = s.rng.choice(sizes_kib) * 2
        s.add(t, base + aligned(s.rng, limit, sectors), sectors, s.rng.random() < read_frac)
    return s


def sequential_stream(name, kind, what, seed, n, gap, sectors):
    s = Stream(name, kind, what, seed)
    start = aligned(s.rng, HDD_SECTORS // 2, 8)
    for i in range(n):
        s.add((i + 1) * gap, start + i * sectors, sectors, True)
    return s


def workloads(n):
    """The streams of the fidelity table."""
    hdd, ssd = "hdd", "ssd"
    return [
        random_stream("rand4k-idle", hdd, "random 4 KiB reads, 100 ms apart",
                      1, n, 100.0, [4], 1.0, HDD_SECTORS),
        random_stream("band4k-idle", hdd, "random 4 KiB reads in a 1 GB band (short seeks)",
                      2, n, 100.0, [4], 1.0, GIB_SECTORS, base=HDD_SECTORS // 3),
        random_stream("rand4k-queued", hdd,
                      "random 4 KiB reads, Poisson arrivals 8 ms apart (queue builds)",
                      3, n, 8.0, [4], 1.0, HDD_SECTORS, poisson=True),
        random_stream("rand64k-rw-idle", hdd, "random 64 KiB, half writes, 100 ms apart",
                      4, n, 100.0, [64], 0.5, HDD_SECTORS),
        random_stream("mixed-idle", hdd,
                      "random 4-64 KiB, 70% reads, 100 ms apart",
                      5, n, 100.0, [4, 8, 16, 32, 64], 0.7, HDD_SECTORS),
        random_stream("mixed-queued", hdd,
                      "random 4-64 KiB, 70% reads, Poisson 10 ms apart",
                      6, n, 10.0, [4, 8, 16, 32, 64], 0.7, HDD_SECTORS, poisson=True),
        random_stream("rand4k-70r-queued", hdd,
                      "random 4 KiB, 70% reads, Poisson 8 ms apart",
                      7, n, 8.0, [4], 0.7, HDD_SECTORS, poisson=True),
        random_stream("write-burst", hdd,
                      "random 4 KiB writes 1 ms apart (faster than the media)",
                      8, max(n // 5, 100), 1.0, [4], 0.0, HDD_SECTORS),
        sequential_stream("seq4k-idle", hdd, "sequential 4 KiB reads, 100 ms apart",
                          9, n, 100.0, 8),
        random_stream("ssd-rand4k-idle", ssd, "SSD random 4 KiB reads, 1 ms apart",
                      10, n, 1.0, [4], 1.0, SSD_SECTORS),
        random_stream("ssd-rand4k-sat", ssd,
                      "SSD random 4 KiB reads, Poisson 0.02 ms apart (saturating)",
                      11, n, 0.02, [4], 1.0, SSD_SECTORS, poisson=True),
    ]


def write_traces(stream, directory):
    """DiskSim's ascii trace (ms) and reblock's simulator ascii (ns) of one stream, with a
    last request long after the others: DiskSim stops reading at its last record, so
    without it the mean would cover only the requests finished by then."""
    reqs = list(stream.reqs)
    last = reqs[-1][0] + 10_000.0
    reqs.append((last, 0, 8, True))
    ds = os.path.join(directory, stream.name + ".dtr")
    rb = os.path.join(directory, stream.name + ".txt")
    with open(ds, "w") as d, open(rb, "w") as r:
        for t, sector, sectors, read in reqs:
            flag = 1 if read else 0
            d.write(f"{t:.6f} 0 {sector} {sectors} {flag}\n")
            r.write(f"{round(t * 1e6)} 0 {sector} {sectors} {flag}\n")
    return ds, rb


def timed(cmd, **kw):
    """Runs `cmd`; returns the finished process, its wall time and its CPU time (user +
    system, s): on a shared machine the CPU time is the fairer speed figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    p = subprocess.run(cmd, check=True, **kw)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p, wall, cpu


def run_disksim(binary, parv_dir, parv, trace, out_dir, cache=None):
    """DiskSim's mean response (ms) on `trace` and its (wall, CPU) run times; `cache` (a
    dict, saved by the caller) remembers results by the trace's content."""
    with open(trace, "rb") as f:
        key = parv + ":" + hashlib.sha256(f.read()).hexdigest()
    if cache is not None and key in cache:
        return cache[key], None
    out = os.path.join(out_dir, os.path.basename(trace) + ".outv")
    _, wall, cpu = timed([binary, parv, out, "ascii", trace, "0"], cwd=parv_dir,
                         stdout=subprocess.DEVNULL)
    with open(out) as f:
        m = re.search(r"Overall I/O System Response time average:\s*([0-9.eE+-]+)", f.read())
    if not m:
        sys.exit(f"{out}: no 'Overall I/O System Response time average' line")
    if cache is not None:
        cache[key] = float(m.group(1))
    return float(m.group(1)), (wall, cpu)


def run_reblock(binary, trace, device, scheduler="fcfs"):
    """reblock's mean response (ms) and its (wall, CPU) run times; `scheduler` is the
    host queue's order, as the DiskSim package's driver has it."""
    p, wall, cpu = timed([binary, "simulate", trace, "--format", "ascii", "--device", device,
                          "--scheduler", scheduler, "--json"], capture_output=True, text=True)
    return json.loads(p.stdout)["mean_response_ms"], (wall, cpu)


def table(rows):
    lines = ["| workload | what | DiskSim ms | reblock ms | error |",
             "|---|---|---:|---:|---:|"]
    for name, what, ds, rb in rows:
        lines.append(f"| {name} | {what} | {ds:.3f} | {rb:.3f} | {100 * (rb - ds) / ds:+.1f}% |")
    return "\n".join(lines)


BEGIN, END = "<!-- fidelity table begin -->", "<!-- fidelity table end -->"


def rewrite_doc(path, text):
    with open(path) as f:
        doc = f.read()
    a, b = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    with open(path, "w") as f:
        f.write(doc[:a] + "\n" + text + "\n" + doc[b:])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--disksim", required=True, help="DiskSim 4.0 binary (with the SSD extension)")
    ap.add_argument("--cheetah", required=True,
                    help="directory of the unpacked Seagate-Cheetah15k5 package (with statdefs)")
    ap.add_argument("--ssd", help="directory holding ssd-iozone.parv and statdefs")
    ap.add_argument("--reblock", default="target/release/reblock")
    ap.add_argument("--requests", type=int, default=10_000, help="requests per workload")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--cache", help="JSON file remembering DiskSim's results between runs")
    ap.add_argument("--doc", help="rewrite the table between the markers in this file")
    ap.add_argument("--bench", type=int, default=0, metavar="N",
                    help="also time both on N random 4 KiB queued reads")
    args = ap.parse_args()
    disksim = os.path.abspath(args.disksim)
    only = set(args.only.split(",")) if args.only else None
    rows = []
    cache = {}
    if args.cache and os.path.exists(args.cache):
        with open(args.cache) as f:
            cache = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        for s in workloads(args.requests):
            if (only and s.name not in only) or (s.kind == "ssd" and not args.ssd):
                continue
            ds_trace, rb_trace = write_traces(s, tmp)
            if s.kind == "hdd":
                ds, _ = run_disksim(disksim, args.cheetah, "Seagate-Cheetah15k5.parv",
                                    ds_trace, tmp, cache)
                rb, _ = run_reblock(args.reblock, rb_trace, "hdd:cheetah15k5")
            else:
                ds, _ = run_disksim(disksim, args.ssd, "ssd-iozone.parv", ds_trace, tmp,
                                    cache)
                # The SSD package's driver queue is CYCLE_LBN ("Scheduling policy = 3"):
                # an ascending sweep over block numbers, which reblock calls clook.
                rb, _ = run_reblock(args.reblock, rb_trace, "ssd:k9", "clook")
            rows.append((s.name, s.what, ds, rb))
            print(f"{s.name:<20} DiskSim {ds:9.3f} ms  reblock {rb:9.3f} ms  "
                  f"{100 * (rb - ds) / ds:+6.1f}%", file=sys.stderr)
        if args.cache:
            with open(args.cache, "w") as f:
                json.dump(cache, f, indent=1)
        text = table(rows)
        print(text)
        if args.bench:
            s = random_stream("bench", "hdd", "", 12, args.bench, 8.0, [4], 1.0,
                              HDD_SECTORS, poisson=True)
            ds_trace, rb_trace = write_traces(s, tmp)
            _, ds_t = run_disksim(disksim, args.cheetah, "Seagate-Cheetah15k5.parv",
                                  ds_trace, tmp)
            _, rb_t = run_reblock(args.reblock, rb_trace, "hdd:cheetah15k5")
            n = args.bench + 1
            print(f"\nspeed on {n} requests (Cheetah 15K.5, random 4 KiB reads, Poisson 8 ms):")
            for i, what in enumerate(["wall", "CPU"]):
                ds_s, rb_s = ds_t[i], max(rb_t[i], 1e-9)
                print(f"  {what:>4} time: DiskSim {ds_s:.2f} s ({n / ds_s:,.0f} req/s), reblock "
                      f"{rb_s:.2f} s ({n / rb_s:,.0f} req/s), ratio {ds_s / rb_s:.0f}x")
    if args.doc:
        rewrite_doc(args.doc, text)


if __name__ == "__main__":
    main()
