"""Warm query latency through the SQLite store and the PostgreSQL store, with database round trips counted.

    PYTHONPATH=engine .venv/bin/python bench/pg_query.py ../shared/golden/public.json --corpora .golden \
        [--corpus click] [--passes 3] --out /tmp/pg_query.json

Every corpus of the golden set is indexed without vectors into both stores (the PostgreSQL one a throwaway
server from the `pgserver` wheel, unix socket). After one unrelated query has loaded each workspace's snapshot,
every query runs through `Workspace.search` (lexical, file, symbol and feedback lanes, the bundle): first asked
(nothing of it cached), then `--passes` more times (repeated: whatever a store keeps per query answers). p50 /
p95 per kind; round trips are the statements the PostgreSQL store sent per query (counted at psycopg's cursor),
postings read the rows of term statistics the database handed over for it;
`index_s` is the time every corpus took to index (no vectors) into that store.
The script runs unchanged against an older checkout (PYTHONPATH=<its engine>), which is how before / after
figures are taken.

`--first-answer DIR` also indexes DIR into PostgreSQL and starts a fresh process with an empty local cache (a
replica's first start) that opens the repository and answers one query: its wall time to that answer, and its
peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FIRST_QUERY = "where are the command line options parsed"


def probe(url: str, root: str, repository: str) -> None:
    """A replica's first answer (this process is fresh): seconds from opening the repository to the answer."""
    from codeloupe.api import Workspace

    started = time.perf_counter()
    ws = Workspace(Path(root), overrides={"embed_provider": "none", "store_url": url,
                                          "store_repository": repository})
    files = len(ws.search(FIRST_QUERY).files)
    print(json.dumps({"first_answer_s": round(time.perf_counter() - started, 2), "files": files,
                      "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def main() -> int:
    if sys.argv[1:2] == ["--probe"]:
        probe(*sys.argv[2:5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--corpus", action="append", help="only this corpus (repeatable)")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--pg-parent", type=Path, default=Path(tempfile.gettempdir()) / "pgbench")
    parser.add_argument("--first-answer", type=Path, help="time a fresh process's first answer from this folder")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cache = tempfile.TemporaryDirectory(prefix="pg-query-cache-")
    os.environ["CODELOUPE_CACHE_DIR"] = cache.name

    import psycopg

    from codeloupe.api import Workspace
    from codeloupe.eval.golden import load_golden
    from codeloupe.eval.runner import corpus_repo

    sys.path.insert(0, str(Path(__file__).parent))
    import pg_server

    statements = [0]
    execute = psycopg.Cursor.execute

    def counted(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202 - psycopg's own signature
        statements[0] += 1
        return execute(self, *a, **k)

    psycopg.Cursor.execute = counted  # Connection.execute goes through it too
    from codeloupe.store import postgres

    postings = [0]
    read_postings = postgres._read_postings

    def counted_postings(count: int, columns: list[bytes]):  # noqa: ANN202 - the engine's own return type
        postings[0] += count
        return read_postings(count, columns)

    postgres._read_postings = counted_postings  # every statement handing postings over reads them through it
    corpora = [c for c in load_golden(args.golden).corpora if not args.corpus or c.id in args.corpus]
    report: dict = {"queries": sum(len(c.queries) for c in corpora), "passes": args.passes,
                    "engine": str(Path(sys.modules["codeloupe"].__file__).parent)}
    with contextlib.ExitStack() as stack:
        stack.callback(cache.cleanup)
        url = stack.enter_context(pg_server.running(args.pg_parent, {"jit": "off"}))
        for label, overrides in (("sqlite", {}), ("postgresql", {"store_url": url})):
            millis: dict[str, list[float]] = {"first": [], "repeated": []}
            trips: dict[str, list[int]] = {"first": [], "repeated": []}
            read: dict[str, list[int]] = {"first": [], "repeated": []}
            index_s = 0.0
            for corpus in corpora:
                ws = Workspace(corpus_repo(args.corpora, corpus.id), overrides={"embed_provider": "none",
                                                                                  **overrides})
                stack.callback(ws.close)
                started = time.perf_counter()
                ws.index()
                index_s += time.perf_counter() - started
                ws.search("warm the snapshot up")
                for n in range(1 + args.passes):
                    kind = "first" if n == 0 else "repeated"
                    for query in corpus.queries:
                        before, postings_before = statements[0], postings[0]
                        started = time.perf_counter()
                        ws.search(query.query, mode="docs" if query.kind == "docs" else "code")
                        millis[kind].append((time.perf_counter() - started) * 1000)
                        trips[kind].append(statements[0] - before)
                        read[kind].append(postings[0] - postings_before)
            report[label] = {kind: {"p50_ms": round(statistics.median(millis[kind]), 2),
                                    "p95_ms": round(float(np.percentile(millis[kind], 95)), 2),
                                    "round_trips_median": statistics.median(trips[kind]),
                                    "round_trips_max": max(trips[kind]),
                                    "postings_read_mean": round(statistics.mean(read[kind]))} for kind in millis}
            report[label]["index_s"] = round(index_s, 2)
            print(label, report[label], flush=True)
        if args.first_answer:
            ws = Workspace(args.first_answer, overrides={"embed_provider": "none", "store_url": url,
                                                         "store_repository": "first-answer"})
            started = time.perf_counter()
            indexed = ws.index()
            report["first_answer"] = {"files": indexed.files_indexed, "chunks": ws.status().chunks,
                                      "index_s": round(time.perf_counter() - started, 1)}
            ws.close()
            with tempfile.TemporaryDirectory(prefix="pg-query-replica-") as replica:
                out = subprocess.run([sys.executable, __file__, "--probe", url, str(args.first_answer),
                                      "first-answer"], env={**os.environ, "CODELOUPE_CACHE_DIR": replica},
                                     capture_output=True, text=True, check=True)
            report["first_answer"].update(json.loads(out.stdout.strip().splitlines()[-1]))
            print("first answer", report["first_answer"], flush=True)
    return pg_server.emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
