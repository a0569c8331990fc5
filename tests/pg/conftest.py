"""A real PostgreSQL with pgvector for the PostgreSQL store's tests: started once per test session from the
`pgserver` wheel (no root, no Docker), in a temporary directory, listening on a unix socket only (pgserver
starts postgres with `-h ""`: no TCP address at all). Each test gets its own empty database, so tests never
see each other's repositories."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL store's tests need psycopg (the test extra)")
pgserver = pytest.importorskip("pgserver", reason="the PostgreSQL store's tests need pgserver (the test extra)")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The server's admin URL (the `postgres` database); the data directory is deleted at the end.

    The data directory is made here rather than under pytest's temporary tree: run as root, pgserver runs
    postgres as its own user, and pytest's per-run directories are private to root (a server there lost its
    data directory the moment pytest tightened their permissions)."""
    data = Path(tempfile.mkdtemp(prefix="codeloupe-test-pg-"))
    server = pgserver.get_server(data, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """The URL of a fresh database on the session's server, dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield pg_server.replace("/postgres?", f"/{name}?", 1)
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def fixture_root() -> Path:
    return Path(__file__).resolve().parent.parent / "fixtures"
