"""Warm query latency at scale: a 200,000-chunk index built from copies of a real tree.

    .venv/bin/python bench/search_scale.py [--tree DIR] [--chunks 200000] [--queries GOLDEN.json]

The tree (default: this interpreter's standard library) is indexed once for real; its files, chunks and
symbols are then copied under `copy-N/` prefixes until the index holds `--chunks` chunks. Chunk and skeleton
vectors are random unit vectors stored through the real store (the cost of a query does not depend on the
values), tagged with the configured model id so the dense lane loads them; queries are embedded by the real
model. Prints load time, memory, and p50/p95 warm latency with the query vector cached and uncached.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--queries", type=Path, default=Path(__file__).parents[1] / "../shared/golden/public.json")
    args = parser.parse_args()
    os.environ.setdefault("CODELOUPE_CACHE_DIR", tempfile.mkdtemp(prefix="codeloupe-scale-"))

    from codeloupe.api import Workspace
    from codeloupe.embed import describe_provider

    sys.path.insert(0, str(Path(__file__).parent))
    from scale_tree import grow, random_vectors

    ws = Workspace(args.tree)
    grow(ws, chunks=args.chunks)
    store = ws.store
    total = store.counts()["chunks"]
    _, model = describe_provider(ws.settings)
    random_vectors(ws, model, ws.embedding_provider().dim)

    queries = [q["query"] for c in json.loads(args.queries.read_text())["corpora"] for q in c["queries"]
               if q["kind"] != "issue"]
    t = time.perf_counter()
    ws.search("warm up: load the matrices")
    print(f"first query (snapshot build: BM25 matrix, symbol table, vectors): {time.perf_counter() - t:.1f}s")
    t = time.perf_counter()
    ws.refresh_graph()  # a large workspace's first query does not wait for the graph: build it before timing
    print(f"graph (facts of the copies extracted, edges, communities, semantic lane): {time.perf_counter() - t:.1f}s")
    uncached, cached = [], []
    for q in queries:
        t = time.perf_counter()
        ws.search(q)
        uncached.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        ws.search(q)
        cached.append((time.perf_counter() - t) * 1000)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for label, values in (("query vector cached", cached), ("query embedded", uncached)):
        values.sort()
        print(f"{total} chunks, {label}: p50 {statistics.median(values):.1f} ms, "
              f"p95 {values[int(len(values) * 0.95)]:.1f} ms")
    print(f"peak RSS {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
