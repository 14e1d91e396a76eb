"""BORG's access graph on Spark: the per-process graphs merged with range splitting, one
graph per device, exactly as ``reblock graph`` (and the ``borg`` policy) builds them.
Prints exactly what ``reblock graph --json`` prints for the same trace::

    python -m reblock.spark graph TRACE.parquet --json

How it is built, step for step as reblock does it (docs/layout.md "Access graphs"):

1. Each process stream (device, pid, command) in time order (file order among equal
   times, as reblock's reader puts requests in order); a vertex is an extent (first
   sector, sectors) exactly as requested, with its request count; an edge ``a -> b`` counts
   how often ``b`` directly followed ``a`` in that stream (a window function: ``lag``).
2. The master graph's vertices are the elementary intervals between the sorted starts and
   ends of every extent of a device that some extent covers; a vertex's hits are the
   requests covering it.
3. An edge ``a -> b`` lands on the last piece of ``a`` and the first piece of ``b``; an
   extent split into pieces gains a chain of edges between its pieces, each weighing the
   larger of the extent's incoming and outgoing weight in its process. Edges on the same
   pair add up, over every process.

Steps 1 and 3's edge counting run on the cluster; the boundaries of step 2 (two numbers
per distinct extent) are brought to the driver, which is also where the JSON is printed.
"""

from __future__ import annotations

import sys
from typing import Dict, List

import numpy as np

# The columns that name a process stream; each is optional in a Parquet trace (absent:
# one device 0, no pid, no command).
PROCESS_COLUMNS = ("device", "pid", "command")


def _process_columns(reqs):
    """The requests (with the ``PROCESS_COLUMNS`` read) keyed for joins: a null pid or
    command is replaced by a value no real one has (-1, and a flag for the command), so
    that joins on the process match as reblock's interning does."""
    from pyspark.sql import functions as F

    return reqs.select(
        "key", "ts", "sector", "sectors",
        F.coalesce(F.col("device").cast("long"), F.lit(0)).alias("device"),
        F.coalesce(F.col("pid").cast("long"), F.lit(-1)).alias("pid"),
        F.coalesce(F.col("command").cast("string"), F.lit("")).alias("command"),
        F.col("command").isNull().alias("no_command"))


def _process_graphs(reqs):
    """(vertices, edges, persisted) of every process graph: vertices ``proc.., sector,
    sectors, hits, chain`` (chain: the larger of the vertex's incoming and outgoing
    weight), edges ``proc.., from_sector, from_sectors, sector, sectors, weight``, and the
    DataFrames persisted for the caller to release (each is read by several actions)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    proc = ["device", "pid", "command", "no_command"]
    stream = Window.partitionBy(*proc).orderBy("ts", "key")
    steps = reqs.where(F.col("sectors") > 0).select(
        *proc, "sector", "sectors",
        F.lag("sector").over(stream).alias("from_sector"),
        F.lag("sectors").over(stream).alias("from_sectors")).persist()
    edges = steps.where(F.col("from_sector").isNotNull()).groupBy(
        *proc, "from_sector", "from_sectors", "sector", "sectors").agg(
        F.count(F.lit(1)).alias("weight")).persist()
    w_in = edges.groupBy(*proc, "sector", "sectors").agg(F.sum("weight").alias("w_in"))
    w_out = edges.groupBy(*proc, F.col("from_sector").alias("sector"),
                          F.col("from_sectors").alias("sectors")).agg(
        F.sum("weight").alias("w_out"))
    on = proc + ["sector", "sectors"]
    vertices = (steps.groupBy(*on).agg(F.count(F.lit(1)).alias("hits"))
                .join(w_in, on, "left").join(w_out, on, "left")
                .select(*on, "hits", F.greatest(F.coalesce("w_in", F.lit(0)),
                                                F.coalesce("w_out", F.lit(0))).alias("chain"))
                .persist())
    # Summed over processes only when landed on master vertices (one shuffle, not two).
    return vertices, edges, (steps, edges, vertices)


def _master(ext) -> Dict[str, np.ndarray]:
    """One device's master vertices and chain edges from its extents (``sector, sectors,
    hits, chain`` per distinct extent, summed over processes; every extent has hits, so
    an interval is covered exactly when requests cover it)."""
    start = ext["sector"].to_numpy(np.int64)
    end = start + ext["sectors"].to_numpy(np.int64)
    bounds = np.unique(np.concatenate([start, end]))
    first, last = np.searchsorted(bounds, start), np.searchsorted(bounds, end)
    n = len(bounds) - 1
    hits = np.zeros(n + 1, np.int64)
    np.add.at(hits, first, ext["hits"].to_numpy(np.int64))
    np.add.at(hits, last, -ext["hits"].to_numpy(np.int64))
    hits = np.cumsum(hits)[:n]
    covered = hits > 0
    chain = np.zeros(n + 1, np.int64)
    c = ext["chain"].to_numpy(np.int64)
    split = (last - first >= 2) & (c > 0)
    np.add.at(chain, first[split], c[split])
    np.add.at(chain, last[split] - 1, -c[split])
    w = np.cumsum(chain)[: max(n - 1, 0)]
    links = np.flatnonzero(w > 0)
    return {
        "bounds": bounds,
        "v_sector": bounds[:n][covered],
        "v_sectors": (bounds[1:] - bounds[:n])[covered],
        "v_hits": hits[covered],
        "c_from": bounds[links], "c_to": bounds[links + 1], "c_weight": w[links],
    }


def _master_edges(spark, edges, bounds: Dict[int, np.ndarray]):
    """The process edges on master vertices: from the last piece of the source extent
    (the greatest boundary below its end) to the first piece of the target (its start),
    summed."""
    import pandas as pd
    from pyspark.sql import functions as F

    shared = spark.sparkContext.broadcast(bounds)

    def land(batches):
        for pdf in batches:
            src = np.empty(len(pdf), np.int64)
            ends = (pdf["from_sector"] + pdf["from_sectors"]).to_numpy(np.int64)
            dev = pdf["device"].to_numpy(np.int64)
            for d in np.unique(dev):
                b, at = shared.value[int(d)], dev == d
                src[at] = b[np.searchsorted(b, ends[at]) - 1]
            yield pd.DataFrame({"device": dev, "from": src,
                                "to": pdf["sector"].to_numpy(np.int64),
                                "weight": pdf["weight"].to_numpy(np.int64)})

    landed = edges.mapInPandas(land, "device long, from long, to long, weight long")
    return landed.groupBy("device", "from", "to").agg(F.sum("weight").alias("weight"))


def access_graphs(spark, path: str, reorder_window: str = "10ms", sort: bool = False,
                  min_weight: int = 1) -> List[dict]:
    """Every device's master access graph of the Parquet trace at ``path`` as
    ``{"device", "requests", "processes", "vertices": DataFrame(sector, sectors, hits),
    "edges": DataFrame(from, to, weight)}``, sorted as ``reblock graph`` prints them."""
    import pandas as pd
    from pyspark.sql import functions as F

    from .spark import read_in_order

    if min_weight < 1:
        raise ValueError(f"--min-weight {min_weight}: must be at least 1")
    _, _, every, _ = read_in_order(spark, path, reorder_window, sort, PROCESS_COLUMNS)
    vertices, edges, persisted = _process_graphs(_process_columns(every))
    try:
        counts = vertices.groupBy("device").agg(
            F.sum("hits").alias("requests"),
            F.countDistinct("pid", "command", "no_command").alias("processes")).toPandas()
        extents = vertices.groupBy("device", "sector", "sectors").agg(
            F.sum("hits").alias("hits"), F.sum("chain").alias("chain")).toPandas()
        masters = {int(d): _master(e.reset_index(drop=True))
                   for d, e in extents.groupby("device")}
        landed = _master_edges(spark, edges, {d: m["bounds"] for d, m in masters.items()})
        landed = landed.toPandas()
    finally:
        # Only what this job cached: the caller's session may hold its own.
        for df in persisted:
            df.unpersist()
    out = []
    for row in counts.sort_values("device").itertuples(index=False):
        d, m = int(row.device), masters[int(row.device)]
        chain = pd.DataFrame({"from": m["c_from"], "to": m["c_to"], "weight": m["c_weight"]})
        mine = landed[landed["device"] == d][["from", "to", "weight"]]
        both = pd.concat([mine, chain]).groupby(["from", "to"], as_index=False)["weight"].sum()
        both = both[both["weight"] >= min_weight].sort_values(["from", "to"],
                                                              ignore_index=True)
        out.append({
            "device": d, "requests": int(row.requests), "processes": int(row.processes),
            "vertices": pd.DataFrame({"sector": m["v_sector"], "sectors": m["v_sectors"],
                                      "hits": m["v_hits"]}),
            "edges": both,
        })
    return out


def graphs_json(graphs: List[dict]) -> str:
    """The JSON ``reblock graph --json`` prints, byte for byte (built as text: millions
    of edges would not fit as Python dicts)."""
    def rows(df, keys):
        cols = zip(*(df[k].tolist() for k in keys))
        return ",".join("{" + ",".join(f'"{k}":{v}' for k, v in zip(keys, c)) + "}"
                        for c in cols)

    parts = []
    for g in graphs:
        parts.append(
            f'{{"device":{g["device"]},"requests":{g["requests"]},'
            f'"processes":{g["processes"]},'
            f'"vertices":[{rows(g["vertices"], ("sector", "sectors", "hits"))}],'
            f'"edges":[{rows(g["edges"], ("from", "to", "weight"))}]}}')
    return '{"graphs":[' + ",".join(parts) + "]}"


def print_graphs(graphs: List[dict], min_weight: int, json: bool,
                 out=None) -> None:
    """``reblock graph``'s output, JSON or the table."""
    out = out or sys.stdout
    if json:
        print(graphs_json(graphs), file=out)
        return
    for g in graphs:
        e = g["edges"]
        print(f"device {g['device']}: {g['requests']} requests of {g['processes']} "
              f"process(es), {len(g['vertices'])} vertices, {len(e)} edges of weight >= "
              f"{min_weight}", file=out)
        print(f"{'from':>14} {'to':>14} {'weight':>10}", file=out)
        for a, b, w in zip(e["from"].tolist(), e["to"].tolist(), e["weight"].tolist()):
            print(f"{a:>14} {b:>14} {w:>10}", file=out)
