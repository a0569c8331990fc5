"""A throwaway PostgreSQL + pgvector for the org-scale benches, started from the `pgserver` wheel.

The wheel (pin 0.1.4: its pgvector runs HNSW on this kind of machine, newer forks crashed with an illegal
instruction) bundles PostgreSQL and pgvector and starts them without root or Docker, listening on a unix
socket only. `running(parent, settings)` initialises a cluster in a fresh directory under `parent` (two runs
never share one: pgserver would stop a server it finds on the same directory), applies server settings (a
restart, since `shared_buffers` needs one), yields a connection URI, and always stops the server and removes
the directory on the way out.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def running(parent: Path, settings: dict[str, str]) -> Iterator[str]:
    """A server in a new directory under `parent` with `settings` applied."""
    import pgserver  # the wheel; imported here so `--help` works without it

    # `timeout` ends a bench with SIGTERM, which skips `finally` blocks: raise instead, so the server stops.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    parent.mkdir(parents=True, exist_ok=True)
    pgdata = Path(tempfile.mkdtemp(prefix="pgdata-", dir=parent))
    try:
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
        try:
            server.psql("".join(f"ALTER SYSTEM SET {key} = '{value}';\n" for key, value in settings.items()))
        finally:
            server.cleanup()
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
        try:
            server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
            yield server.get_uri()
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(pgdata, ignore_errors=True)


def pgvector_version(conn) -> str:  # noqa: ANN001 - a psycopg connection; psycopg is imported lazily
    return conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]


def emit(report: dict, out: Path | None) -> int:
    """Print a bench's report, and write it to `out` when given; the bench's exit status."""
    text = json.dumps(report, indent=1)
    print(text)
    if out:
        out.write_text(text)
    return 0
