"""`codeloupe admin --store URL`: list repositories, drop one (every row and its HNSW index), the work queue's
status and its pruning, on a real PostgreSQL."""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from codeloupe.api import (
    Workspace,
    drop_shared_repository,
    prune_work_queue,
    shared_repositories,
    work_queue_status,
)
from codeloupe.cli import main
from codeloupe.store import StoreError, postgres
from codeloupe.store.postgres import MAX_ATTEMPTS, PgStore, WorkQueue

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # chat_server.py

from pg_locks import LOCK_WAIT, Locked, indexed_as_svc  # noqa: E402

from chat_server import ChatServer  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
# Every table with a repository's rows.
TABLES = ("files", "chunks", "symbols", "skeletons", "chunk_vectors", "skeleton_vectors", "graph_facts", "edges",
          "flows", "flow_files", "work_queue", "repo_meta", "skipped_files", "lex_chunk_terms", "lex_terms", "lex_files")


def _rows_of(pg_url: str, repo_id: int) -> dict[str, int]:
    with psycopg.connect(pg_url) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM public.{t} WHERE repo_id = %s", (repo_id,)).fetchone()[0]
                for t in TABLES}


def _hnsw_indexes(pg_url: str) -> list[str]:
    with psycopg.connect(pg_url) as conn:
        return [r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE '%hnsw%'"
                                           " ORDER BY 1")]


def test_repositories_are_listed_and_one_is_dropped_with_every_row_and_its_hnsw_index(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "EXACT_SEARCH_MAX_VECTORS", 0)  # the fixtures' few vectors get an index too
    with ChatServer() as chat:
        embed = {"embed_provider": "openai", "embed_base_url": chat.base_url, "embed_model": "scripted"}
        for name in ("python", "go"):
            root = tmp_path / name
            shutil.copytree(FIXTURES / name, root)
            ws = Workspace(root, overrides={**embed, "store_url": pg_url})
            try:
                ws.index()  # the graph's edges too
                ws.embed()
            finally:
                ws.close()
    listed = {r.name: r for r in shared_repositories(pg_url)}
    assert set(listed) == {"python", "go"}
    python = listed["python"]
    assert python.files and python.chunks and python.vectors == python.chunks and python.open_batches == 0
    assert python.root == str((tmp_path / "python").resolve()) and python.indexed_at.startswith("20")
    assert main(["admin", "--store", pg_url, "repos"]) == 0
    assert f"python  {python.files} files, {python.chunks} chunks" in capsys.readouterr().out

    store = PgStore(pg_url, "python", local_dir=tmp_path / "local")
    repo_id = store.repo_id
    store.enqueue(str(tmp_path / "python"), "", [["a.py"]])
    before = _rows_of(pg_url, repo_id)
    assert all(before[t] for t in ("files", "chunks", "symbols", "chunk_vectors", "edges", "work_queue",
                                   "lex_chunk_terms", "lex_terms", "lex_files"))
    indexes = _hnsw_indexes(pg_url)
    assert len(indexes) == 2
    go_rows = _rows_of(pg_url, PgStore(pg_url, "go", local_dir=tmp_path / "local").repo_id)

    assert main(["admin", "--store", pg_url, "--json", "drop", "python"]) == 0
    dropped = json.loads(capsys.readouterr().out)
    assert dropped["files"] == python.files and len(dropped["vector_indexes"]) == 1
    assert _rows_of(pg_url, repo_id) == dict.fromkeys(TABLES, 0)
    assert _hnsw_indexes(pg_url) == [i for i in indexes if i not in dropped["vector_indexes"]]
    assert _rows_of(pg_url, PgStore(pg_url, "go", local_dir=tmp_path / "local").repo_id) == go_rows
    assert [r.name for r in shared_repositories(pg_url)] == ["go"]
    with pytest.raises(StoreError, match="python: not in the shared index"):
        drop_shared_repository(pg_url, "python")
    assert main(["admin", "--store", pg_url, "drop", "python"]) == 2


def test_admin_prints_its_counts_with_thousands_separated_and_its_json_as_numbers(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Its counts run to millions (a repository's chunks, an organisation's vectors): "1234 waiting" read as the
    README's numbers do not ("300,000 vectors")."""
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    store.enqueue(str(tmp_path), "", [[f"{i}.py"] for i in range(1234)])
    assert main(["admin", "--store", pg_url, "queue"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "1,234 waiting, 0 claimed, 0 with an expired lease, 0 stuck, 0 done", "  repo: 1,234 open"]
    assert main(["admin", "--store", pg_url, "repos"]) == 0
    assert "  1,234 batches queued  " in capsys.readouterr().out
    assert main(["admin", "--store", pg_url, "--json", "queue"]) == 0
    assert json.loads(capsys.readouterr().out)["waiting"] == 1234


def test_the_queue_status_counts_each_state_and_prune_deletes_finished_and_given_up_batches(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    store.enqueue(str(tmp_path), "", [[f"{i}.py"] for i in range(5)])
    queue = WorkQueue(pg_url, "host:1")
    try:
        live = queue.claim(600)
        expired = queue.claim(600)
        finished = queue.claim(600)
        given_up = queue.claim(600)
        assert live and expired and finished and given_up
    finally:
        queue.close()
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE work_queue SET done_at = now() WHERE id = %s", (finished.id,))
        # A lease already over: its worker died.
        conn.execute("UPDATE work_queue SET lease_until = now() - interval '1 second' WHERE id = %s", (expired.id,))
        conn.execute("UPDATE work_queue SET attempts = %s, lease_until = now() - interval '1 second' WHERE id = %s",
                     (MAX_ATTEMPTS, given_up.id))
    status = work_queue_status(pg_url)
    assert (status.waiting, status.claimed, status.expired, status.stuck, status.done) == (1, 1, 1, 1, 1)
    assert status.workers == ["host:1"] and status.open_by_repository == {"repo": 4}
    assert main(["admin", "--store", pg_url, "queue"]) == 0
    assert "1 waiting, 1 claimed, 1 with an expired lease, 1 stuck, 1 done" in capsys.readouterr().out

    assert main(["admin", "--store", pg_url, "queue", "prune"]) == 0
    assert "deleted 1 finished and 1 given-up batches" in capsys.readouterr().out
    status = work_queue_status(pg_url)
    assert (status.waiting, status.claimed, status.expired, status.stuck, status.done) == (1, 1, 1, 0, 0)
    assert prune_work_queue(pg_url).done == 0
    store.close()


def test_a_drop_behind_a_stalled_writer_fails_naming_its_session_and_waits_when_asked(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`admin drop` behind a writer stopped mid-transaction on the repository's row gives up after the lock wait,
    saying which session holds it and what to do, and drops nothing; `drop --wait` waits for it."""
    indexed_as_svc(tmp_path, pg_url, capsys, monkeypatch)
    # Open longer, and never in its way: a session idle in a transaction that read the repository's row.
    reader = psycopg.connect(pg_url)
    reader.execute("SELECT * FROM repositories")
    stalled = psycopg.connect(pg_url)  # a worker stopped mid-batch (kill -STOP): the row taken, never let go
    stalled.execute("UPDATE repositories SET content_generation = content_generation WHERE name = 'svc'")
    valve = threading.Timer(60, stalled.rollback)  # only what keeps a failing test from hanging the run
    valve.start()
    try:
        assert main(["admin", "--store", pg_url, "drop", "svc"]) == 2
        err = capsys.readouterr().err
        assert "'svc' was not dropped" in err and f"session {stalled.info.backend_pid}" in err
        assert f"session {reader.info.backend_pid} " not in err, err
        assert "idle in transaction" in err and "UPDATE repositories" in err
        assert "admin --store URL queue" in err and "--wait" in err
    finally:
        valve.cancel()
        stalled.rollback()
        stalled.close()
        reader.close()
    assert [r.name for r in shared_repositories(pg_url)] == ["svc"]
    with Locked(pg_url, "repositories", release_at_wait=1):  # let go once the drop waits for it
        assert main(["admin", "--store", pg_url, "drop", "--wait", "svc"]) == 0
    assert shared_repositories(pg_url) == []


def test_a_drop_behind_a_migration_fails_naming_its_session(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A drop takes the schema's advisory lock to drop the repository's HNSW indexes, which a migration (a process
    opening the database) holds until it commits: behind one, the drop gives up naming its session, as it names
    a writer holding the repository, whether the store URL's `lock_timeout` or codeloupe's own bounds the wait.
    Opening the up-to-date database on the way waits for no lock (it raised PostgreSQL's raw LockNotAvailable)."""
    indexed_as_svc(tmp_path, pg_url, capsys, monkeypatch)
    migrating = psycopg.connect(f"{pg_url}&application_name=migrating")
    try:
        migrating.execute(f"SELECT pg_advisory_xact_lock({postgres._SCHEMA_LOCK})")
        for url in (pg_url + LOCK_WAIT, pg_url):
            assert main(["admin", "--store", url, "drop", "svc"]) == 2, url
            refused = capsys.readouterr().err
            assert "'svc' was not dropped" in refused, refused
            assert f"session {migrating.info.backend_pid} (migrating, from local)" in refused, refused
    finally:
        migrating.close()
    assert [r.name for r in shared_repositories(pg_url)] == ["svc"]


def test_opening_a_database_behind_another_migration_fails_naming_its_session(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A database that needs a migration (here a new one) is migrated under the schema's advisory lock: behind
    another process migrating it, or a drop holding the lock, opening it gives up as a write does (the store
    URL's `lock_timeout`, else codeloupe's own), naming the session holding it, for a store as for `admin`.
    (It raised PostgreSQL's raw LockNotAvailable, and without a `lock_timeout` waited for as long as the other
    held it.)"""
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 200)
    migrating = psycopg.connect(f"{pg_url}&application_name=migrating")
    holder = f"session {migrating.info.backend_pid} (migrating, from local)"
    valve = threading.Timer(60, migrating.rollback)  # only what keeps a failing test from hanging the run
    try:
        migrating.execute(f"SELECT pg_advisory_xact_lock({postgres._SCHEMA_LOCK})")
        valve.start()
        for url in (pg_url + LOCK_WAIT, pg_url):
            assert main(["admin", "--store", url, "drop", "svc"]) == 2, url
            refused = capsys.readouterr().err
            assert "cannot open the shared index: another session holds its schema" in refused, refused
            assert holder in refused, refused
            with pytest.raises(StoreError, match=r"cannot open the shared index: another session holds its schema"
                               r"[^\n]*" + re.escape(holder)):
                PgStore(url, "svc", local_dir=tmp_path / "local").close()
    finally:
        valve.cancel()
        migrating.close()
    assert shared_repositories(pg_url) == []  # the next process to open it migrates it


def _before_the_last_migration(pg_url: str) -> None:
    """Make the database at `pg_url` as it was before migration 7: every table there, migrations 7 (which alters
    `symbols`), 8, 9, 10 and 11 to apply."""
    shared_repositories(pg_url)  # a database at the current version
    assert postgres.SCHEMA_VERSION == 11, "replays migrations 7 to 11: a later one needs undoing here too"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE repositories DROP COLUMN run_from")
        conn.execute("ALTER TABLE repositories DROP COLUMN pinned_through")
        conn.execute("DROP INDEX work_queue_open_run")
        conn.execute("ALTER TABLE work_queue DROP COLUMN run")
        conn.execute("ALTER TABLE repositories DROP COLUMN latest_run, DROP COLUMN latest_gone")
        conn.execute("ALTER TABLE repositories DROP COLUMN index_run, DROP COLUMN index_started")
        conn.execute("CREATE INDEX symbols_repo_name ON symbols(repo_id, lower(name))")
        # 7 drops that index, 8, 9, 10 and 11 add the columns (10 the queue's run index too).
        conn.execute("DELETE FROM schema_migrations WHERE version >= 7")


def test_a_migration_behind_the_schema_lock_names_its_holder_not_a_session_locking_a_table(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration that gave up waiting for the schema's advisory lock names the sessions holding that lock. It
    named every session holding a table against writes too, which a migration waiting for the schema's lock
    does not wait for (an `admin drop` does: its message names both)."""
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 200)
    _before_the_last_migration(pg_url)
    migrating = psycopg.connect(f"{pg_url}&application_name=migrating")
    sharing = psycopg.connect(f"{pg_url}&application_name=sharing")
    holder, bystander = migrating.info.backend_pid, sharing.info.backend_pid
    valve = threading.Timer(60, lambda: (migrating.rollback(), sharing.rollback()))  # a failing test never hangs
    try:
        migrating.execute(f"SELECT pg_advisory_xact_lock({postgres._SCHEMA_LOCK})")
        sharing.execute("LOCK TABLE public.files IN SHARE MODE")  # blocks writes to files, not the schema's lock
        valve.start()
        with pytest.raises(StoreError, match="another session holds its schema") as refused:
            PgStore(pg_url, "svc", local_dir=tmp_path / "local").close()
    finally:
        valve.cancel()
        migrating.close()
        sharing.close()
    assert f"session {holder} (migrating, from local)" in str(refused.value), refused.value
    assert f"session {bystander} " not in str(refused.value), refused.value


def test_a_drop_that_waits_waits_for_the_migration_opening_the_database_needs_first(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`drop --wait` on a database that needs a migration, behind another session holding the schema's lock,
    waits for it and drops the repository once it lets go (it gave up after the lock wait, as without --wait:
    the wait applied only to the drop's own locks, not to the migration opening the database)."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "svc"
    shutil.copytree(FIXTURES / "python", root)
    assert main(["index", str(root), "--store", pg_url]) == 0
    _before_the_last_migration(pg_url)
    # The wait a bounded one gives up after: far shorter than this test takes to see the drop wait and let go.
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 1)
    outcome: list[int] = []
    dropping = threading.Thread(target=lambda: outcome.append(
        main(["admin", "--store", f"{pg_url}&application_name=drop", "drop", "--wait", "svc"])))
    migrating = psycopg.connect(f"{pg_url}&application_name=migrating")
    valve = threading.Timer(60, migrating.rollback)  # only what keeps a failing test from hanging the run
    try:
        migrating.execute(f"SELECT pg_advisory_xact_lock({postgres._SCHEMA_LOCK})")
        valve.start()
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            dropping.start()
            while dropping.is_alive() and not watcher.execute(
                    "SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
                    " AND NOT l.granted AND a.application_name = 'drop'").fetchone():
                dropping.join(0.02)
        migrating.rollback()
        dropping.join(60)
    finally:
        valve.cancel()
        migrating.close()
    assert outcome == [0], capsys.readouterr().err
    assert shared_repositories(pg_url) == []


def test_a_migration_behind_a_long_read_gives_up_and_changes_nothing(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration that alters a table a long report or dump reads waits for it as a write waits for a repository
    (it queued every other session's read of the table behind its own wait meanwhile), then gives up saying so,
    rolled back: the next process to open the database migrates it."""
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 200)
    _before_the_last_migration(pg_url)
    reading = psycopg.connect(f"{pg_url}&application_name=report")
    try:
        reading.execute("SELECT count(*) FROM public.symbols")  # its lock on the table is held until it ends
        for url in (pg_url + LOCK_WAIT, pg_url):
            with pytest.raises(StoreError, match=f"migrating it to schema version {postgres.SCHEMA_VERSION} waited"
                                                 " for a table another session holds"):
                PgStore(url, "svc", local_dir=tmp_path / "local").close()
    finally:
        reading.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert postgres.migrate(conn) == postgres.SCHEMA_VERSION
        assert conn.execute("SELECT to_regclass('symbols_repo_name')").fetchone() == (None,)


def _waiting_on(watcher: psycopg.Connection, application: str, statement: str) -> bool:
    """Whether the session of `application` waits for a lock in a statement starting with `statement`."""
    return bool(watcher.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND wait_event_type ="
                                " 'Lock' AND starts_with(query, %s)", (application, statement)).fetchone())


def test_a_drop_and_a_workers_batch_of_the_repository_wait_for_each_other_in_turn_never_in_a_circle(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A drop takes the repository's row, then deletes its queued batches; a worker's batch takes the repository's
    row before its queued batch, so the one that comes second waits for the other. (The batch took its queued
    batch first: each then waited for the other, and PostgreSQL ended the drop with a deadlock error.)

    Played in that order: a third session holds `lex_terms` so that the drop stops once it holds the repository's
    row, the batch starts then, and the drop goes on once the batch waits. Only the drop looks for a deadlock
    soon after it starts waiting (its `deadlock_timeout`), so it is the one PostgreSQL would end."""
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 600_000)  # what this test is about is not a lock timeout
    root = tmp_path / "svc"
    root.mkdir()
    (root / "a.py").write_text("def run():\n    return 1\n")
    batch_url = f"{pg_url}&application_name=batch&options=-c%20deadlock_timeout%3D600s"
    store = PgStore(batch_url, "svc", local_dir=tmp_path / "local")
    store.set_source(str(root))
    store.enqueue(str(root), "", [["a.py"]])
    queue = WorkQueue(pg_url, "w1")
    item = queue.claim(600)
    assert item is not None
    outcomes: dict[str, object] = {}

    def run(name: str, call: Any) -> None:
        try:
            outcomes[name] = call()
        except Exception as exc:
            outcomes[name] = exc

    drop_url = f"{pg_url}&application_name=drop&options=-c%20deadlock_timeout%3D10ms"
    dropping = threading.Thread(target=run, args=("drop", lambda: drop_shared_repository(drop_url, "svc")))
    writing = threading.Thread(target=run, args=("batch", lambda: store.write_batch([], [], "", {}, item)))
    holder = psycopg.connect(pg_url)
    holder.execute("LOCK TABLE public.lex_terms IN ACCESS EXCLUSIVE MODE")
    valve = threading.Timer(60, holder.rollback)  # only what keeps a failing test from hanging the run
    valve.start()
    try:
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            dropping.start()
            while not _waiting_on(watcher, "drop", "DELETE FROM lex_terms"):  # the repository's row taken
                dropping.join(0.02)
            writing.start()
            while not _waiting_on(watcher, "batch", "SELECT root FROM repositories"):
                writing.join(0.02)
        holder.rollback()
        dropping.join(60)
        writing.join(60)
    finally:
        valve.cancel()
        holder.close()
        store.close()
        queue.close()
    assert not isinstance(outcomes["drop"], Exception), outcomes["drop"]
    assert outcomes["batch"] is False  # its queued batch went with the repository: nothing written
    assert shared_repositories(pg_url) == []


def test_a_drop_ended_by_a_deadlock_says_so_and_to_try_again(tmp_path: Path, pg_url: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A session that holds rows of the repository (here, its files) and then waits for the repository's row,
    which the drop holds and deletes along with those files: each waits for the other, and PostgreSQL ends one.
    Where it ends the drop, the drop says what happened and to try again (nothing was dropped), as its other
    refusals do, rather than PostgreSQL's raw error.

    Played in that order, as above: a third session holds `lex_terms` so that the drop stops once it holds the
    repository's row; the other session takes the files and waits for the row; the drop goes on, to wait for the
    files last, and only it looks for a deadlock soon after it starts waiting."""
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 600_000)  # what this test is about is not a lock timeout
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "svc"
    shutil.copytree(FIXTURES / "python", root)
    assert main(["index", str(root), "--store", pg_url]) == 0
    other = psycopg.connect(f"{pg_url}&application_name=other&options=-c%20deadlock_timeout%3D600s")
    holder = psycopg.connect(pg_url)
    holder.execute("LOCK TABLE public.lex_terms IN ACCESS EXCLUSIVE MODE")
    valve = threading.Timer(60, holder.rollback)  # only what keeps a failing test from hanging the run
    valve.start()
    outcomes: dict[str, object] = {}

    def drop() -> None:
        try:
            outcomes["drop"] = drop_shared_repository(
                f"{pg_url}&application_name=drop&options=-c%20deadlock_timeout%3D10ms", "svc")
        except Exception as exc:
            outcomes["drop"] = exc

    dropping = threading.Thread(target=drop)
    waiting = threading.Thread(target=other.execute, args=(
        "SELECT 1 FROM public.repositories WHERE name = 'svc' FOR KEY SHARE",))
    try:
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            dropping.start()
            while not _waiting_on(watcher, "drop", "DELETE FROM lex_terms"):  # the repository's row taken
                dropping.join(0.02)
            other.execute("SELECT 1 FROM public.files f JOIN public.repositories r ON r.id = f.repo_id"
                          " WHERE r.name = 'svc' FOR UPDATE OF f")
            waiting.start()
            while not _waiting_on(watcher, "other", "SELECT 1 FROM public.repositories"):
                waiting.join(0.02)
        holder.rollback()
        dropping.join(60)
        waiting.join(60)
    finally:
        valve.cancel()
        holder.close()
        other.rollback()
        other.close()
    refused = outcomes["drop"]
    assert isinstance(refused, StoreError), repr(refused)
    assert "'svc' was not dropped" in str(refused) and "deadlock" in str(refused), refused
    assert "try again" in str(refused).lower(), refused
    assert [r.name for r in shared_repositories(pg_url)] == ["svc"]


def test_repos_and_queue_show_paths_and_workers_escaped(tmp_path: Path, pg_url: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`admin repos` printed the folder a repository was indexed from raw, and `admin queue` each worker's name:
    any machine writing the shared index names them, and an escape sequence in one drove the reader's terminal
    (a bidi override reordered the line, a newline forged a repository of its own). Each line shows them
    escaped, as a file's name is shown elsewhere."""
    from codeloupe.types import CONTROL_CHARACTERS, one_line

    root = tmp_path / "svc\u202egnp.py\x1b[2J\nbilling  9 files"
    root.mkdir()
    (root / "app.py").write_text("def main():\n    return 1\n")
    ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url, "store_repository": "svc"})
    try:
        ws.index()
    finally:
        ws.close()
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    store.enqueue(str(root), "", [["app.py"]])
    queue = WorkQueue(pg_url, "host\x1b]0;owned\x07:1")
    try:
        assert queue.claim(600)
        assert main(["admin", "--store", pg_url, "repos"]) == 0
        assert main(["admin", "--store", pg_url, "queue"]) == 0
    finally:
        queue.close()
        store.close()
    out = capsys.readouterr().out
    assert not CONTROL_CHARACTERS.search(out) and "\nbilling" not in out, out
    assert f"from {one_line(str(root.resolve()))}" in out, out
    assert "  claimed by host\\x1b]0;owned\\x07:1" in out.splitlines(), out


def test_repos_shows_a_repositorys_indexing_warning_on_a_line_of_its_own(tmp_path: Path, pg_url: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`admin repos` joined a repository's warning (a queued run not written yet, a run cut off) to its line with
    a newline, which the escaping of each line then showed as a literal `\\n`: `... from /src/svc\\n  WARNING an
    index run queued for svc is under way ...`, one long line."""
    root = tmp_path / "svc"
    root.mkdir()
    (root / "app.py").write_text("def main():\n    return 1\n")
    assert main(["index", str(root), "--store", pg_url, "--queue", "--embed-provider", "none"]) == 0
    capsys.readouterr()
    assert main(["admin", "--store", pg_url, "repos"]) == 0
    [listed] = shared_repositories(pg_url)
    assert listed.indexing.startswith("an index run queued for svc is under way")
    assert capsys.readouterr().out.splitlines() == [
        f"svc  0 files, 0 chunks, 0 vectors  @ (no commit)  indexed never  1 batch queued  from {root.resolve()}",
        f"  WARNING {listed.indexing}"]
