"""What a command waits for on the shared index is bounded: a lock another indexer or worker holds on the
repository (a stalled one holds it until it is stopped), and a database that does not answer; the store URL's
own settings of either bound win."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import psycopg
import pytest
from pg_locks import SAFETY_VALVE_S, TAKE_THE_ROW, indexed_as_svc, stalled_writer

from codeloupe.cli import main
from codeloupe.store import postgres
from codeloupe.store.postgres import PgStore


def _index_again_refused(root: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> str:
    """A file added and the tree indexed again, refused (exit 2): what the command said on stderr."""
    (root / "new.py").write_text("def added():\n    return 1\n")
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 2
    return capsys.readouterr().err


def test_index_behind_a_stalled_writer_of_the_repository_fails_saying_who_holds_it(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    root = indexed_as_svc(tmp_path, pg_url, capsys, monkeypatch)
    # A worker stopped mid-write: the repository's row taken, never let go.
    with stalled_writer(pg_url) as stalled:
        err = _index_again_refused(root, pg_url, capsys)
        assert "'svc' is held by another indexer or worker" in err and "admin --store URL queue" in err
        # Named as `admin drop` names it: its session on the server, its application, its last statement.
        assert f"session {stalled.info.backend_pid} (stalled-worker, from local)" in err, err
        assert "its last statement: UPDATE repositories SET content_generation" in err, err
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0


def test_the_store_urls_own_lock_timeout_wins(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 1500)
    for url, expected in ((pg_url, "1500ms"),
                          (f"{pg_url}&options=-c%20lock_timeout%3D4321", "4321ms"),
                          (f"{pg_url}&options=-c%20lock_timeout%3D0", "0")):
        store = PgStore(url, "svc", local_dir=tmp_path)
        try:
            assert store.query("SHOW lock_timeout") == [(expected,)], url
        finally:
            store.close()


def _never_answering() -> socket.socket:
    """A server on 127.0.0.1 that takes connections (the kernel completes them) and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    return listener


@pytest.mark.parametrize("own", ["", "&connect_timeout=1"])
def test_a_database_that_never_answers_is_given_up_on(tmp_path: Path, own: str, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq waits for a connection until TCP gives up, forever for a server that accepted and never answers:
    without a `connect_timeout` in the URL, the default bounds it; with one, the URL's (the default is made
    one no test would wait for)."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    monkeypatch.setattr(postgres, "CONNECT_TIMEOUT_S", 3600 if own else 1)
    listener = _never_answering()
    valve = threading.Timer(SAFETY_VALVE_S, listener.close)  # closing it resets the waiting connection
    valve.start()
    try:
        url = f"postgresql://someone@127.0.0.1:{listener.getsockname()[1]}/x?sslmode=disable{own}"
        assert main(["index", str(tmp_path), "--store", url]) == 2
        assert "cannot connect to the shared index" in (err := capsys.readouterr().err) and "timeout expired" in err
    finally:
        valve.cancel()
        listener.close()


def _bystanders(pg_url: str) -> list[psycopg.Connection]:
    """Sessions idle in a transaction that read the shared index, opened before any blocker (the longest open):
    a reader of another table than the one a write waits for, and one of the same table without a lock that
    conflicts with it."""
    readers = []
    for table in ("files", "repositories"):
        reader = psycopg.connect(f"{pg_url}&application_name=reader-of-{table}")
        reader.execute(f"SELECT count(*) FROM public.{table}")
        readers.append(reader)
    return readers


@pytest.mark.parametrize("held", ["the repository's row", "a table"])
def test_a_write_that_gave_up_names_only_the_session_blocking_it(
        tmp_path: Path, pg_url: str, held: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions idle in a transaction that only read (an editor's, a dashboard's) hold locks on the shared
    index's tables too, and were open longer: the message names the session that blocks the write, and none
    of them."""
    root = indexed_as_svc(tmp_path, pg_url, capsys, monkeypatch)
    readers = _bystanders(pg_url)
    blocker = psycopg.connect(f"{pg_url}&application_name=blocker")
    # a table: as a plain CREATE INDEX holds it for its whole build
    blocker.execute("LOCK TABLE public.files IN SHARE MODE" if held == "a table" else TAKE_THE_ROW)
    valve = threading.Timer(SAFETY_VALVE_S, blocker.rollback)
    valve.start()
    try:
        err = _index_again_refused(root, pg_url, capsys)
        assert f"session {blocker.info.backend_pid} (blocker, from local)" in err, err
        assert "reader-of" not in err, err
        assert all(f"session {r.info.backend_pid} " not in err for r in readers), err
    finally:
        valve.cancel()
        blocker.rollback()
        blocker.close()
        for reader in readers:
            reader.close()


def _queued_behind(pg_url: str, application: str, statement: str) -> tuple[psycopg.Connection, threading.Thread]:
    """A session of `application` running `statement` in a transaction on a thread, returned once it waits for a
    lock (for as long as it takes: it never gives up on its own)."""
    queued = psycopg.connect(f"{pg_url}&application_name={application}")
    waiting = threading.Thread(target=queued.execute, args=(statement,), daemon=True)
    waiting.start()
    with psycopg.connect(pg_url, autocommit=True) as watcher:
        while not watcher.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s"
                                  " AND wait_event_type = 'Lock'", (application,)).fetchone():
            waiting.join(0.02)
    return queued, waiting


def test_a_write_queued_behind_another_waiter_names_the_session_holding_the_row(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Who blocks is read from the server's catalog, not from the error's words (in the server's language, where
    its `lc_messages` is not English): a write that waited behind another waiter for the repository's row gets
    a timeout whose context names no row at all, and is still told which session holds the row."""
    root = indexed_as_svc(tmp_path, pg_url, capsys, monkeypatch)
    stalled = psycopg.connect(f"{pg_url}&application_name=stalled-worker")
    stalled.execute(TAKE_THE_ROW)
    valve = threading.Timer(SAFETY_VALVE_S, stalled.rollback)
    valve.start()
    queued, waiting = _queued_behind(pg_url, "queued-worker", TAKE_THE_ROW)
    try:
        err = _index_again_refused(root, pg_url, capsys)
        assert "'svc' is held by another indexer or worker" in err, err
        assert f"session {stalled.info.backend_pid} (stalled-worker, from local)" in err, err
    finally:
        valve.cancel()
        stalled.rollback()
        stalled.close()
        waiting.join(SAFETY_VALVE_S)
        queued.rollback()
        queued.close()


def test_a_session_that_only_names_the_repository_in_a_new_row_is_not_named_as_blocking_a_write(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A row inserted that names the repository (a queued batch, a setting) takes a key-share lock on its row
    for the foreign key, which no writer waits for: with a stalled writer on the row too, the row is held by
    both, and only the writer is named. A drop, which deletes the row, waits for both and names both."""
    root = indexed_as_svc(tmp_path, pg_url, capsys, monkeypatch)
    naming = psycopg.connect(f"{pg_url}&application_name=naming-it")
    naming.execute("INSERT INTO public.repo_meta (repo_id, key, value)"
                   " SELECT id, 'note', 'x' FROM public.repositories WHERE name = 'svc'")
    try:
        with stalled_writer(pg_url) as stalled:
            err = _index_again_refused(root, pg_url, capsys)
            assert f"session {stalled.info.backend_pid} (stalled-worker, from local)" in err, err
            assert "naming-it" not in err and f"session {naming.info.backend_pid} " not in err, err
            assert main(["admin", "--store", pg_url, "drop", "svc"]) == 2
            err = capsys.readouterr().err
            assert "'svc' was not dropped" in err, err
            assert f"session {stalled.info.backend_pid} " in err and f"session {naming.info.backend_pid} " in err, err
    finally:
        naming.rollback()
        naming.close()
