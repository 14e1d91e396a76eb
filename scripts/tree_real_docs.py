#!/usr/bin/env python3
"""Measure `reblock tree` on real XML documents: for each one, find its widest sibling
run (the element with the most same-named element children: the "items"), then time
three queries on every layout: the sibling walk (every item), every item's child (the
child name most items have; and the items' first child when different) and a whole
scan (`//*`). Prints one table row per document and query (markdown), or JSON.

Usage: scripts/tree_real_docs.py [--bin target/release/reblock] [--block-size 512]
                                  [--json | --per-document] DOC.xml ...
The documents measured in docs/tree.md: every *.xml, *.svg, *.ui, *.xsl and *.policy
over 40 KB on the machine (find / -xdev -size +40k ...).
"""
import argparse
import collections
import json
import re
import subprocess
import sys
import xml.parsers.expat


def utf8(path):
    """The document's bytes in UTF-8, whatever encoding its declaration names."""
    data = open(path, "rb").read()
    m = re.match(rb"<\?xml[^>]*encoding\s*=\s*[\"']([A-Za-z0-9._-]+)", data)
    if not m:
        return data
    try:
        return data.decode(m.group(1).decode()).encode("utf-8")
    except (LookupError, UnicodeDecodeError):
        return data


def shape(path):
    """The items' path, their count, and child names by how many items have them."""
    parser = xml.parsers.expat.ParserCreate("utf-8")
    stack = []  # [tag, Counter of child tags]
    runs = collections.Counter()  # (parent path, child tag) -> max children of that tag
    child_names = collections.defaultdict(collections.Counter)  # item path -> child tag
    first_child = collections.defaultdict(collections.Counter)

    def start(tag, _attrs):
        if stack:
            stack[-1][1][tag] += 1
            if len(stack[-1][1]) == 1 and sum(stack[-1][1].values()) == 1:
                first_child["/".join(t for t, _ in stack)][tag] += 1
        stack.append((tag, collections.Counter()))

    def end(_tag):
        tag, kids = stack.pop()
        here = "/" + "/".join([t for t, _ in stack] + [tag])
        for k, n in kids.items():
            runs[(here, k)] = max(runs[(here, k)], n)
        if stack:
            child_names[here][None] += 1
            for k in kids:
                child_names[here][k] += 1

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.Parse(utf8(path), True)
    out = []
    for (parent, item), n in runs.most_common(2):
        if out and n < 10:
            break
        items = parent + "/" + item
        names = child_names[items]
        names.pop(None, 0)
        common = [k for k, _ in names.most_common()]
        firsts = first_child.get(items[1:], collections.Counter())
        first = firsts.most_common(1)[0][0] if firsts else None
        out.append((items, n, common, first))
    return out


def run(binary, doc, queries, block):
    cmd = [binary, "tree", doc, "--json", "--block-size", str(block)]
    for q in queries:
        cmd += ["--query", q]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/reblock")
    ap.add_argument("--block-size", default=512, type=int)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--per-document", action="store_true", help="one row per document")
    ap.add_argument("docs", nargs="+")
    a = ap.parse_args()
    rows = []
    for doc in a.docs:
        try:
            runs = shape(doc)
        except (xml.parsers.expat.ExpatError, ValueError) as e:
            print(f"skip {doc}: not well-formed ({e})", file=sys.stderr)
            continue
        queries, counts = [], []
        for items, n, common, first in runs:
            queries.append(("sibling walk", items))
            if common:
                queries.append(("item's child", items + "/" + common[0]))
            if first and first != (common[0] if common else None):
                queries.append(("item's first child", items + "/" + first))
            counts += [n] * (len(queries) - len(counts))
        queries.append(("scan", "//*"))
        counts.append(runs[0][1])
        try:
            res = run(a.bin, doc, [q for _, q in queries], a.block_size)
        except RuntimeError as e:
            print(f"skip {doc}: {e}", file=sys.stderr)
            continue
        g = res["groupings"]
        sn = "/".join(
            str(g[k]["supernodes"]) for k in ("sequential", "tree-preserving", "ekm", "breadth-first")
        )
        for i, (kind, q) in enumerate(queries):
            times = {
                k: v["queries"][i]["io_time_ms"]
                for k, v in res["layouts"].items()
                if not v.get("error")
            }
            default = times.pop("default")
            best = min(times, key=times.get)
            rows.append({
                "document": doc, "items": counts[i], "kind": kind, "query": q,
                "default_ms": default, "best": best, "best_ms": times[best],
                "speedup": default / times[best] if times[best] else float("inf"),
                "supernodes_seq_tp_ekm_bf": sn, "times": times,
            })
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
    elif a.per_document:
        print_per_document(rows)
    else:
        print("| document | items | query | default ms | best tree ms | default/best | Seq/TP/EKM/BF supernodes |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['document'].split('/')[-1]} | {r['items']} | {r['kind']}: `{r['query']}` | "
                  f"{r['default_ms']:.1f} | {r['best_ms']:.1f} ({r['best']}) | {r['speedup']:.2f} | "
                  f"{r['supernodes_seq_tp_ekm_bf']} |")


def print_per_document(rows):
    """One row per document: its first sibling walk and item's child, and the scan."""
    def cell(r):
        if r is None:
            return "-"
        return f"{r['default_ms']:.1f} -> {r['best_ms']:.1f} ({r['speedup']:.1f}x)"
    print("| document | items | sibling walk | every item's child | scan: default vs best tree | Seq/TP/EKM/BF supernodes |")
    print("|---|---|---|---|---|---|")
    docs = list(dict.fromkeys(r["document"] for r in rows))
    for d in docs:
        mine = [r for r in rows if r["document"] == d]
        walk = next((r for r in mine if r["kind"] == "sibling walk"), None)
        child = next((r for r in mine if "child" in r["kind"]), None)
        scan = next(r for r in mine if r["kind"] == "scan")
        query = f"`{child['query']}`" if child else f"`{walk['query']}`"
        print(f"| {d.split('/')[-1]} | {walk['items']} {query} | {cell(walk)} | {cell(child)} | "
              f"{scan['default_ms']:.1f} vs {scan['best_ms']:.1f} | {scan['supernodes_seq_tp_ekm_bf']} |")


if __name__ == "__main__":
    main()
