"""What a command waits for on the shared index is bounded: a lock another indexer or worker holds on the
repository (a stalled one holds it until it is stopped), and a database that does not answer; the store URL's
own settings of either bound win."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import psycopg
import pytest

from codeloupe.cli import main
from codeloupe.store import postgres
from codeloupe.store.postgres import PgStore

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
# Only what keeps a test that fails from hanging the run: never a bound any assertion is about.
SAFETY_VALVE_S = 60


def test_index_behind_a_stalled_writer_of_the_repository_fails_saying_who_holds_it(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 200)
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0
    capsys.readouterr()
    stalled = psycopg.connect(pg_url)  # a worker stopped mid-write: the repository's row taken, never let go
    stalled.execute("UPDATE repositories SET content_generation = content_generation WHERE name = 'svc'")
    valve = threading.Timer(SAFETY_VALVE_S, stalled.rollback)
    valve.start()
    try:
        (root / "new.py").write_text("def added():\n    return 1\n")
        assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 2
        err = capsys.readouterr().err
        assert "'svc' is held by another indexer or worker" in err and "admin --store URL queue" in err
    finally:
        valve.cancel()
        stalled.rollback()
        stalled.close()
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0


def test_the_store_urls_own_lock_timeout_wins(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 1500)
    for url, expected in ((pg_url, "1500ms"),
                          (f"{pg_url}&options=-c%20lock_timeout%3D4321", "4321ms"),
                          (f"{pg_url}&options=-c%20lock_timeout%3D0", "0")):
        store = PgStore(url, "svc", local_dir=tmp_path)
        assert store.query("SHOW lock_timeout") == [(expected,)], url
