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

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--queries", type=Path, default=Path(__file__).parents[1] / "../shared/golden/public.json")
    args = parser.parse_args()
    os.environ.setdefault("CODELOUPE_CACHE_DIR", tempfile.mkdtemp(prefix="codeloupe-scale-"))

    from codeloupe.api import Workspace
    from codeloupe.embed import describe_provider
    from codeloupe.types import Chunk, ChunkedFile, FileSkeleton, Symbol

    ws = Workspace(args.tree)
    t = time.perf_counter()
    report = ws.index()
    print(f"base index: {report.files_indexed} files, {report.chunks} chunks in {time.perf_counter() - t:.1f}s")
    store = ws.store
    base_files = store.query("SELECT id, path, hash, language, size, mtime, line_count FROM files")
    copies = max(0, (args.chunks - report.chunks) // max(report.chunks, 1) + 1)
    t = time.perf_counter()
    for copy in range(1, copies + 1):
        for file_id, path, digest, language, size, mtime, line_count in base_files:
            chunks = [Chunk(*row[:5], row[5], tuple(json.loads(row[6]))) for row in store.query(
                "SELECT start_line, end_line, kind, name, breadcrumb, text, symbols FROM chunks"
                " WHERE file_id=? ORDER BY ord", (file_id,))]
            symbols = [Symbol(*row) for row in store.query(
                "SELECT name, kind, start_line, end_line, parent, signature FROM symbols WHERE file_id=?",
                (file_id,))]
            skeleton = store.query("SELECT text FROM skeletons WHERE file_id=?", (file_id,))
            new_path = f"copy-{copy}/{path}"
            store.replace_file(ChunkedFile(new_path, language, chunks, symbols,
                                           FileSkeleton(new_path, skeleton[0][0] if skeleton else "")),
                               hash=digest, size=size, mtime=mtime, is_doc=False, encoding="utf-8",
                               chunker_version=0, line_count=line_count)
    total = store.counts()["chunks"]
    print(f"copied to {total} chunks ({copies} copies) in {time.perf_counter() - t:.1f}s")

    _, model = describe_provider(ws.settings)
    provider = ws.embedding_provider()
    rng = np.random.default_rng(0)
    for table, sql in (("chunk", "SELECT id FROM chunks"), ("skeleton", "SELECT file_id FROM skeletons")):
        ids = [r[0] for r in store.query(sql)]
        for start in range(0, len(ids), 20_000):
            part = ids[start:start + 20_000]
            vectors = rng.standard_normal((len(part), provider.dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            store.put_vectors(table, model, part, vectors)

    queries = [q["query"] for c in json.loads(args.queries.read_text())["corpora"] for q in c["queries"]
               if q["kind"] != "issue"]
    t = time.perf_counter()
    ws.search("warm up: load the matrices")
    print(f"first query (snapshot build: BM25 matrix, symbol table, vectors): {time.perf_counter() - t:.1f}s")
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
