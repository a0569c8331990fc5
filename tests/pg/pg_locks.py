"""Tables and rows of the shared index held by another session, as a long migration, VACUUM FULL or a stalled
writer holds them, for tests of what a search, a write or a drop does when the database makes it wait."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from codeloupe.cli import main
from codeloupe.store import postgres

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"

# How long a session holding a lock for a test may hold it at most: only what keeps a failing test from hanging.
SAFETY_VALVE_S = 60
# What a writer of repository `svc` takes first, and holds until its transaction ends.
TAKE_THE_ROW = "UPDATE repositories SET content_generation = content_generation WHERE name = 'svc'"

# What a team bounds lock waits with in the store URL (libpq's `options`): a statement that waits longer fails.
LOCK_WAIT = "&options=-c%20lock_timeout%3D300"


class Locked:
    """Another session holding `tables` the way a long migration or VACUUM FULL does, from entering the block;
    `release_at_wait`: let go once that many different statements have waited for the lock (the statements
    before it time out, those after it run)."""

    def __init__(self, pg_url: str, *tables: str, release_at_wait: int = 0) -> None:
        self._url, self._tables, self._release_at = pg_url, tables, release_at_wait
        self._holder = psycopg.connect(pg_url)
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Locked:
        self._holder.execute(f"LOCK TABLE {', '.join(f'public.{t}' for t in self._tables)} IN ACCESS EXCLUSIVE MODE")
        if self._release_at:
            self._watcher.start()
        return self

    def _watch(self) -> None:
        waits: set[tuple[int, object]] = set()
        with psycopg.connect(self._url, autocommit=True) as watcher:
            while not self._done.wait(0.02):
                waits |= set(watcher.execute("SELECT pid, query_start FROM pg_stat_activity WHERE wait_event_type"
                                             " = 'Lock' AND datname = current_database()").fetchall())
                if len(waits) >= self._release_at:
                    self._holder.rollback()
                    return

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._watcher.is_alive():
            self._watcher.join()
        self._holder.close()


@contextlib.contextmanager
def stalled_writer(pg_url: str, application: str = "stalled-worker") -> Iterator[psycopg.Connection]:
    """A writer of repository `svc` stopped mid-transaction (a worker under kill -STOP): its row taken, never let
    go until the block ends (or `SAFETY_VALVE_S`)."""
    stalled = psycopg.connect(f"{pg_url}&application_name={application}")
    stalled.execute(TAKE_THE_ROW)
    valve = threading.Timer(SAFETY_VALVE_S, stalled.rollback)
    valve.start()
    try:
        yield stalled
    finally:
        valve.cancel()
        stalled.rollback()
        stalled.close()


def indexed_as_svc(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small tree indexed as repository `svc`, with writes giving up after 200 ms behind a lock."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 200)
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0
    capsys.readouterr()
    return root
