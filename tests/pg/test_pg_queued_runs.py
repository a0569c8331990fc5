"""A queued index run of the shared index (`index --queue`, then workers): the repository keeps naming the commit
its rows were read at until the run's batches are all written, the files that left the folder go in the same
transaction as the run's last batch, and a run superseded by a newer index of the repository writes nothing; each
file is cited at the commit its own text was read at meanwhile."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest
from test_pg_workers import _expire_leases, _Said

from chat_server import ChatServer, Reply, excerpt_numbers
from codeloupe.api import (
    Workspace,
    WorkspaceError,
    open_shared,
    prune_work_queue,
    search_repositories,
    shared_repositories,
)
from codeloupe.cli import main
from codeloupe.settings import load_settings
from codeloupe.shared_index import enqueue_workspace, run_worker
from codeloupe.store import postgres
from codeloupe.store.postgres import MAX_ATTEMPTS, PgStore, WorkItem, WorkQueue
from codeloupe.types import short_revision
from codeloupe_lsp.convert import search_result
from codeloupe_lsp.shared import Target, index_uri, parse_index_uri, read_document
from codeloupe_mcp.sized import bundle_text, flat_json

NO_MODEL = {"embed_provider": "none"}


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _commit(root: Path, files: dict[str, str | None]) -> str:
    """Write (None: delete) `files` in `root`, commit them all, and return the commit."""
    if shutil.which("git") is None:
        pytest.fail("git is not installed: these tests need it, as CI has it")
    if not (root / ".git").exists():
        root.mkdir(parents=True, exist_ok=True)
        _git(root, "init", "-q")
    for path, text in files.items():
        if text is None:
            (root / path).unlink()
        else:
            (root / path).write_text(text)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "c")
    return _git(root, "rev-parse", "HEAD")


def _drain(pg_url: str):
    return run_worker(pg_url, NO_MODEL, idle_exit_s=0, poll_s=0.01)


def _texts(store: PgStore) -> dict[str, tuple[str, str]]:
    """path -> (the commit its row names, its text)"""
    return {path: (commit, text) for path, commit, text in store.query(
        "SELECT f.path, f.commit_sha, string_agg(c.text, '' ORDER BY c.ord) FROM files f JOIN chunks c"
        " ON c.file_id = f.id GROUP BY f.path, f.commit_sha")}


def test_a_queued_run_moves_the_commit_and_deletes_the_files_that_left_once_its_batches_are_all_written(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`index --queue` pinned the repository to the folder's new commit at once, while its rows held the old
    commit's text until workers wrote the new: every answer cited the new commit for the old code. The files that
    left the folder went with the last batch queued, which a second worker wrote while the first still wrote an
    earlier one. Until a run's batches are all written the repository now names the commit its rows hold, the
    files that left included; the transaction writing the last batch deletes them and moves the commit."""
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)  # the repository's row read at each question
    root = tmp_path / "repo"
    first = _commit(root, {"app.py": "def total_at_first():\n    return 1\n",
                           "old.py": "def leaves_at_second():\n    return 2\n"})
    overrides = {**NO_MODEL, "store_url": pg_url}
    direct = Workspace(root, overrides=overrides)
    direct.index()
    direct.close()
    second = _commit(root, {"app.py": "def total_at_second():\n    return 3\n", "old.py": None,
                            "new.py": "def added_at_second():\n    return 4\n"})
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    [served] = open_shared(["repo"], overrides)
    try:
        enqueue_workspace(store, root, load_settings(root, overrides), batch_files=1)
        assert store.query("SELECT count(*) FROM work_queue") == [(2,)]
        assert served.revision == first  # its rows hold the first commit's files
        held = WorkQueue(pg_url, "another-worker").claim(600)  # a worker writing the first batch, slowly
        assert held is not None and held.paths == ["app.py"]
        meanwhile = []

        def then_its_lease_runs_out() -> None:
            meanwhile.append((served.revision, set(store.file_rows()), _texts(store)["app.py"]))
            _expire_leases(pg_url)

        # The worker writes new.py, then waits for the batch held (until its lease runs out) and writes it.
        waited = _Said("the queue is empty but for", then=then_its_lease_runs_out)
        logging.getLogger("codeloupe").addHandler(waited)
        try:
            assert _drain(pg_url).batches == 2
        finally:
            logging.getLogger("codeloupe").removeHandler(waited)
        # new.py written, app.py not yet: old.py goes with the run's end
        assert meanwhile == [(first, {"app.py", "old.py", "new.py"}, (first, "def total_at_first():\n    return 1\n"))]
        assert served.revision == second
        assert set(store.file_rows()) == {"app.py", "new.py"}
        assert {path: commit for path, (commit, _) in _texts(store).items()} == {"app.py": second,
                                                                                "new.py": second}
    finally:
        served.close()
        store.close()


def test_search_answers_cite_the_commit_their_text_was_read_at_while_a_queued_run_waits_for_workers(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the command line: after `index --queue` at a new commit, `search --store` cited the new commit for
    the old text; it cites the old commit until a worker has written the run, and `index --queue` says so."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "svc"
    first = _commit(root, {"billing.py": "def charge_card_total():\n    return 'first'\n"})
    assert main(["index", str(root), "--store", pg_url]) == 0
    second = _commit(root, {"billing.py": "def charge_card_total():\n    return 'second'\n"})
    capsys.readouterr()

    def cited() -> set[tuple[str, str]]:
        """(revision, text) of each chunk `search` answers with"""
        assert main(["search", "--store", pg_url, "--repo", "svc", "charge card total", "--json"]) == 0
        return {(hit["revision"], chunk["text"].strip().splitlines()[-1].strip())
                for hit in json.loads(capsys.readouterr().out)["core"] for chunk in hit["chunks"]}

    assert cited() == {(first, "return 'first'")}
    assert main(["index", str(root), "--store", pg_url, "--queue"]) == 0
    assert capsys.readouterr().out == (f"queued 1 batch of svc at {second} for `codeloupe worker` (answers name"
                                       f" {first}, the commit its files were read at, for each file until a worker"
                                       " has written it)\n")
    assert cited() == {(first, "return 'first'")}
    assert main(["worker", "--store", pg_url, "--exit-when-idle", "0"]) == 0
    capsys.readouterr()
    assert cited() == {(second, "return 'second'")}


def test_a_batch_of_a_run_superseded_by_a_newer_index_is_left_unwritten(
        tmp_path: Path, pg_url: str, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`index --queue` at commit X, then at Y (the repository pinned to Y), then the folder checked out at X
    again: the worker compared the folder with the commit each batch was queued at, so X's batches were
    written, X's text under Y. A batch of a run that a newer index of the repository superseded is now done with
    nothing written, in a log line; the newer run's batches are written once the folder is at their commit."""
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)
    root = tmp_path / "repo"
    x = _commit(root, {"app.py": "def at_x():\n    return 1\n"})
    overrides = {**NO_MODEL, "store_url": pg_url}
    settings = load_settings(root, overrides)
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    try:
        enqueue_workspace(store, root, settings)
        assert store.commit == x  # pinned at once: the repository holds no file another commit's text could be
        y = _commit(root, {"app.py": "def at_y():\n    return 2\n", "util.py": "def helper():\n    return 3\n"})
        enqueue_workspace(store, root, settings)
        _git(root, "checkout", "-q", x)
        with caplog.at_level(logging.WARNING, logger="codeloupe.shared"):
            report = _drain(pg_url)
        assert _texts(store) == {}  # not X's text under Y
        assert (report.superseded, report.moved, report.batches) == (1, 1, 0)
        assert "superseded" in caplog.text and f"queued at {y}" in caplog.text
        assert store.query("SELECT count(*) FROM work_queue WHERE done_at IS NULL") == [(0,)]

        _git(root, "checkout", "-q", "-")
        enqueue_workspace(store, root, settings)  # the first run at Y gave up: queued again
        assert enqueue_workspace(store, root, settings).batches == 1  # once more: the one before is superseded
        report = _drain(pg_url)
        assert (report.superseded, report.batches) == (1, 1)
        assert store.commit == y
        assert _texts(store) == {"app.py": (y, "def at_y():\n    return 2\n"),
                                 "util.py": (y, "def helper():\n    return 3\n")}
    finally:
        store.close()


def _three_files(tmp_path: Path, pg_url: str) -> tuple[Path, PgStore]:
    """A folder of three files indexed directly as repository "repo" (no git: pinned to no commit)."""
    root = tmp_path / "repo"
    root.mkdir()
    for n in range(3):
        (root / f"mod{n}.py").write_text(f"def run_{n}():\n    return {n}\n")
    direct = Workspace(root, overrides={**NO_MODEL, "store_url": pg_url})
    direct.index()
    direct.close()
    return root, PgStore(pg_url, "repo", local_dir=tmp_path / "local")


def test_the_end_of_a_run_deletes_nothing_from_a_folder_that_no_longer_holds_the_repository(
        tmp_path: Path, pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """The files that had left the folder are deleted by the run's last batch only where the folder is seen to
    hold the repository: an empty mount point in its place fails the batch, deleting nothing."""
    root, store = _three_files(tmp_path, pg_url)
    try:
        (root / "mod2.py").unlink()
        assert enqueue_workspace(store, root, load_settings(root, NO_MODEL)).batches == 1  # only to end the run
        root.rename(tmp_path / "away")
        root.mkdir()
        with caplog.at_level(logging.WARNING, logger="codeloupe.shared"):
            report = run_worker(pg_url, NO_MODEL, lease_s=0, idle_exit_s=0, poll_s=0.01)  # claimed until stuck
        assert (report.batches, report.failed, report.stuck) == (0, MAX_ATTEMPTS, 1)
        assert f"none of the 1 files the batch would delete, and none of the other files the index holds, is in" \
               f" {root}" in caplog.text
        assert set(store.file_rows()) == {"mod0.py", "mod1.py", "mod2.py"}

        root.rmdir()
        (tmp_path / "away").rename(root)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE work_queue SET attempts = 0 WHERE done_at IS NULL")
        assert _drain(pg_url).batches == 1
        assert set(store.file_rows()) == {"mod0.py", "mod1.py"}
    finally:
        store.close()


def test_a_run_whose_batch_was_pruned_as_given_up_is_given_up(tmp_path: Path, pg_url: str) -> None:
    """`admin queue prune` deletes a batch no worker could write: the run's other batches would otherwise end it,
    its commit pinned and the files that left deleted without that batch's files. The run is given up with it."""
    root, store = _three_files(tmp_path, pg_url)
    try:
        for n in range(2):
            (root / f"mod{n}.py").write_text(f"def run_{n}():\n    return {n + 10}\n")
        (root / "mod2.py").unlink()
        assert enqueue_workspace(store, root, load_settings(root, NO_MODEL), batch_files=1).batches == 2
        failing = WorkQueue(pg_url, "failing")
        given_up = failing.claim(600)
        failing.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE work_queue SET attempts = %s, lease_until = now() - interval '1 second'"
                         " WHERE id = %s", (MAX_ATTEMPTS, given_up.id))
        assert prune_work_queue(pg_url).stuck == 1
        report = _drain(pg_url)
        assert (report.superseded, report.batches) == (1, 0)
        assert set(store.file_rows()) == {"mod0.py", "mod1.py", "mod2.py"}
    finally:
        store.close()


def test_a_database_restart_as_a_batch_is_left_unwritten_is_reconnected_from(
        tmp_path: Path, pg_url: str, pg_server: str, caplog: pytest.LogCaptureFixture) -> None:
    """A batch whose folder moved to another commit was marked done on the worker's own session outside the
    reconnect that covers claiming and writing: a database restart then ended the worker in a traceback. It is
    marked done through the repository's connections, which a restart does not leave broken."""
    from test_pg_outage import _end_sessions

    root = tmp_path / "repo"
    _commit(root, {"app.py": "def at_x():\n    return 1\n"})
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    try:
        enqueue_workspace(store, root, load_settings(root, NO_MODEL))
        _commit(root, {"app.py": "def at_y():\n    return 2\n"})
        with caplog.at_level(logging.INFO, logger="codeloupe"):
            report = run_worker(pg_url, NO_MODEL, idle_exit_s=0, poll_s=0.01,
                                on_batch=lambda item: _end_sessions(pg_server, pg_url))
        assert (report.moved, report.failed) == (1, 0)
        assert store.query("SELECT count(*) FROM work_queue WHERE done_at IS NULL") == [(0,)]
        lost = [r for r in caplog.records if r.getMessage().startswith("lost the shared index")]
        assert len(lost) == 1 and all(r.exc_info is None for r in caplog.records), caplog.text
    finally:
        store.close()


def test_a_queued_run_under_way_is_said_until_its_last_batch_is_written(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a queued run's batches are written one by one, the repository holds some of its files new and the
    rest old (or not yet at all), yet only `admin repos`' count of queued batches told of it: admin repos, the
    status and every answer's notes now say a queued run is under way and how much of it is not written yet."""
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)  # the repository's row read again at every answer
    root, store = _three_files(tmp_path, pg_url)
    try:
        for n in range(3):
            (root / f"mod{n}.py").write_text(f"def run_{n}():\n    return {n + 10}\n")
        assert enqueue_workspace(store, root, load_settings(root, NO_MODEL), batch_files=1).batches == 3

        def said() -> list[str]:
            [ws] = open_shared(["repo"], {**NO_MODEL, "store_url": pg_url})
            try:
                answered = ws.search("run").notes
                return [shared_repositories(pg_url)[0].indexing, ws.status().indexing,
                        next((note for note in answered if "queued" in note), "")]
            finally:
                ws.close()

        def note(batches: int) -> list[str]:  # admin repos, the status, an answer's notes
            return [f"an index run queued for repo is under way: {batches} batches of it are not written yet, so"
                    " answers may miss its new files or show older text of their files until `codeloupe worker`"
                    " writes them"] * 3

        assert said() == note(3)
        claimed: list[object] = []

        def stop_at_the_second(item: object) -> None:  # the worker stopped as it claims the second batch
            claimed.append(item)
            if len(claimed) == 2:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_worker(pg_url, NO_MODEL, idle_exit_s=0, poll_s=0.01, on_batch=stop_at_the_second)
        assert said() == note(2)
        assert _drain(pg_url).batches == 2
        assert said() == ["", "", ""]
    finally:
        store.close()


def test_a_queued_run_left_open_by_a_batch_no_worker_could_write_is_said_with_what_to_do(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that failed its 5 claims left its run open for good (its files not written, the run's commit never
    pinned) with nothing but `admin queue`'s count of stuck batches saying so: admin repos, stats, the status and
    every answer's notes, which say an index run cut off, now say this too, and what to do, until a run is queued
    again."""
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)  # the repository's row read again at every answer
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root, store = _three_files(tmp_path, pg_url)
    away = tmp_path / "away"
    try:
        (root / "mod0.py").write_text("def run_0():\n    return 10\n")
        assert enqueue_workspace(store, root, load_settings(root, NO_MODEL)).batches == 1
        root.rename(away)  # the workers cannot read the folder: each claim fails
        report = run_worker(pg_url, NO_MODEL, lease_s=0, idle_exit_s=0, poll_s=0.01)  # claimed until stuck
        assert report.stuck == 1
        said = (f"1 batch of the index run queued for repo failed {MAX_ATTEMPTS} times and is left unwritten: answers"
                " may miss its files or show their older text; `codeloupe admin queue` counts it stuck and the"
                " workers' log says why: fix that, then run `codeloupe index --queue` in the folder again")

        def notes() -> tuple[str, list[str]]:
            [ws] = open_shared(["repo"], {**NO_MODEL, "store_url": pg_url})
            try:
                return ws.status().indexing, ws.search("run").notes
            finally:
                ws.close()

        assert shared_repositories(pg_url)[0].indexing == said
        indexing, answered = notes()
        assert indexing == said and answered[0] == said
        capsys.readouterr()
        assert main(["admin", "--store", pg_url, "repos"]) == 0
        assert f"WARNING {said}" in capsys.readouterr().out
        away.rename(root)
        assert main(["stats", str(root), "--store", pg_url, "--repo", "repo"]) == 0
        assert f"WARNING   {said}" in capsys.readouterr().out

        assert enqueue_workspace(store, root, load_settings(root, NO_MODEL)).batches == 1  # a run that supersedes it
        assert _drain(pg_url).batches == 1
        assert shared_repositories(pg_url)[0].indexing == "" and notes()[0] == ""
        assert not any("index run" in note for note in notes()[1])
    finally:
        store.close()


def test_each_file_is_cited_at_the_commit_its_text_was_read_at_while_a_queued_run_is_written(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """While a queued run's batches were written, every answer cited the repository's commit, the old one, for
    every file: those an earlier batch had written, new text, too (a citation naming a commit whose file differs
    from what is shown). Each file is now cited at the commit its row was read at, wherever a revision is shown
    or opens a document: a search, one across repositories, the command line, MCP's answers, ask's citations, the
    editor's read-only documents (their URIs, what `codeloupe/read` returns and refuses); once the run ends, all
    at the new commit, the file it left unchanged too."""
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)  # the repository's row read at each question
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "svc"
    query = "charge total"
    first = _commit(root, {f"{name}.py": f"def charge_{name}_total():\n    return 'first'\n"
                           for name in ("alpha", "beta", "gamma")})
    overrides = {**NO_MODEL, "store_url": pg_url}
    direct = Workspace(root, overrides=overrides)
    direct.index()
    direct.close()
    second = _commit(root, {f"{name}.py": f"def charge_{name}_total():\n    return 'second'\n"
                            for name in ("alpha", "beta")})

    def cited(served: Workspace) -> dict[str, dict[str, str]]:
        """Each surface: path -> the revision it cites the file at (ask's and the editor's: with the text shown)."""
        bundle = served.search(query)
        assert main(["search", "--store", pg_url, "--repo", "svc", query, "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        answered = search_result(bundle, Target(served, "codeloupe-index:///svc", repository="svc").uris(
            bundle.revisions()))
        read = {}
        for hit in answered["core"] + answered["related"]:
            text, revision = read_document(served, parse_index_uri(hit["uri"]))
            read[hit["path"]] = f"{revision} {text.splitlines()[-1].strip()}"
        assert f"3 candidate files · @ {short_revision(bundle.revision)} · " in bundle_text(bundle)  # MCP's names the pin
        events = list(served.ask("which function charges the total?", agents=False))
        citations = events[-1].result.citations
        assert [e.data["revision"] for e in events if e.type == "citation"] == [c.revision for c in citations]
        return {
            "search": {hit.path: hit.revision for hit in bundle.files},
            "across": {hit.path: hit.revision for hit in search_repositories([served], query).files},
            "cli": {hit["path"]: hit["revision"] for hit in printed["core"] + printed["related"]},
            "mcp": {chunk["path"]: chunk["revision"] for chunk in json.loads(flat_json(bundle))["chunks"]},
            "read": read,
            "ask": {c.path: f"{c.revision} {c.text.splitlines()[-1].strip()}" for c in citations},
        }

    def at(alpha: str, beta: str, gamma: str) -> dict[str, dict[str, str]]:
        """What `cited` says with the files at these commits."""
        revisions = {"alpha.py": alpha, "beta.py": beta, "gamma.py": gamma}
        texts = {first: "return 'first'", second: "return 'second'"}
        read = {path: f"{revision} {texts[revision] if path != 'gamma.py' else texts[first]}"
                for path, revision in revisions.items()}
        return {"search": revisions, "across": revisions, "cli": revisions, "mcp": revisions, "read": read,
                "ask": {path: read[path] for path in ("alpha.py", "beta.py")}}

    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    with ChatServer() as chat:
        # Each answer cites alpha.py and beta.py, whatever excerpt numbers they were shown under.
        chat.add(Reply(render=lambda body: " ".join(f"[[{k}:1-2]]" for k, path, _, _ in excerpt_numbers(body)
                                                   if path in ("alpha.py", "beta.py")), times=3))
        [served] = open_shared(["svc"], {**overrides, "chat_base_url": chat.base_url, "chat_model": "scripted"})
        try:
            assert cited(served) == at(first, first, first)
            assert enqueue_workspace(store, root, load_settings(root, overrides), batch_files=1).batches == 2
            meanwhile = []

            def between_the_batches(item: WorkItem) -> None:
                if item.paths == ["beta.py"]:  # alpha.py's batch is written, beta.py's not yet
                    meanwhile.append(cited(served))
                    try:
                        read_document(served, parse_index_uri(index_uri("svc", "alpha.py", first)))
                    except WorkspaceError as exc:
                        meanwhile.append(str(exc))

            assert run_worker(pg_url, NO_MODEL, idle_exit_s=0, poll_s=0.01,
                              on_batch=between_the_batches).batches == 2
            assert meanwhile == [at(second, first, first), f"svc:alpha.py is indexed at {second} now, not {first}:"
                                                           " search again for its current files"]
            assert served.revision == second
            assert cited(served) == at(second, second, second)
        finally:
            served.close()
            store.close()
