"""Tables of the shared index held by another session, as a long migration or VACUUM FULL holds them, for tests
of what a search does when the database makes it wait."""

from __future__ import annotations

import threading

import psycopg

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
