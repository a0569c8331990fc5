"""A repository's state read (what every answer over the shared index asks of its repository, at most once a second:
generations, commit, and whether a queued index run of it is under way or stuck) while other repositories hold a
large open queue, against the same read with the queue's run index dropped (the way before migration 10 had it).

    .venv/bin/python bench/pg_queue_state.py [--repositories 50] [--batches 4000]

A PostgreSQL from the `pgserver` wheel in a temporary directory; `--repositories` repositories each with
`--batches` open batches of their newest run (an organisation re-indexing everything), and one more repository,
the one read, with none. Prints the median of 50 reads each way.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pgserver
import psycopg

from codeloupe.store import postgres
from codeloupe.store.postgres import PgStore


def _reads(store: PgStore, n: int = 50) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        store.generation("content")  # the state read (STATE_TTL_S 0: read every time)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repositories", type=int, default=50)
    parser.add_argument("--batches", type=int, default=4000)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="codeloupe-bench-pg-"))
    server = pgserver.get_server(data, cleanup_mode="delete")
    try:
        name = f"q_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(server.get_uri(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        url = server.get_uri().replace("/postgres?", f"/{name}?", 1)
        store = PgStore(url, "read", local_dir=data / "local")
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(args.repositories):
                conn.execute("INSERT INTO repositories (name, latest_run, index_id) VALUES (%s, %s, %s)",
                             (f"r{i}", f"run{i}", uuid.uuid4().hex))
            conn.execute("INSERT INTO work_queue (repo_id, root, paths, run) SELECT r.id, '/x', '[]', r.latest_run"
                         " FROM repositories r, generate_series(1, %s) WHERE r.name <> 'read'", (args.batches,))
            conn.execute("ANALYZE")
            postgres.STATE_TTL_S = 0.0
            with_index = _reads(store)
            conn.execute("DROP INDEX work_queue_open_run")
            without = _reads(store)
        print(f"{args.repositories * args.batches} open batches of other repositories: state read p50"
              f" {with_index:.2f} ms with the queue's run index, {without:.2f} ms without")
        store.close()
    finally:
        server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
