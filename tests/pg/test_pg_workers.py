"""Indexing workers on the shared index: real `codeloupe worker` processes claiming queued batches with
SKIP LOCKED, one of them killed mid-batch (its lease runs out and its batch is redone), and the vector cache
shared by every repository (content embedded once is never sent to the model again)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from codeloupe.api import Workspace, drop_shared_repository
from codeloupe.settings import Settings, load_settings
from codeloupe.shared_index import QueuedRun, WorkerStopped, enqueue_workspace, run_worker
from codeloupe.store.postgres import PgStore, WorkItem, WorkQueue

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # chat_server.py

from test_pg_lexical import assert_statistics_match_the_chunks  # noqa: E402

from chat_server import ChatServer, embedding_for  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
REPO = Path(__file__).resolve().parents[2]
MARKER = "the worker embedding this is killed"
LEASE_S = 3


def _worker(pg_url: str, embed_url: str, idle_exit_s: float, lease_s: float = LEASE_S) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "engine"), str(REPO / "server")])}
    return subprocess.Popen(
        [sys.executable, "-m", "codeloupe", "worker", "--store", pg_url, "--embed-provider", "openai",
         "--embed-base-url", embed_url, "--embed-model", "scripted", "--lease-s", str(lease_s),
         "--exit-when-idle", str(idle_exit_s)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


def _held_at_the_marker() -> tuple[threading.Event, threading.Event, Callable[[str], list[float]]]:
    """(blocked, release, embedder): the embedder holds the worker embedding a text that holds MARKER until
    `release` is set, and sets `blocked` once it holds it (a worker kept mid-batch, its claim live)."""
    blocked, release = threading.Event(), threading.Event()

    def embedder(text: str) -> list[float]:
        if MARKER in text and not release.is_set():
            blocked.set()
            release.wait(60)
        return embedding_for(text)

    return blocked, release, embedder


def _indexed(store: PgStore) -> dict[str, int]:
    """path -> chunk count"""
    table = store.chunk_table()
    paths = {row.id: path for path, row in store.file_rows().items()}
    out = dict.fromkeys(paths.values(), 0)
    for file_id in table.file_ids.tolist():
        out[paths[file_id]] += 1
    return out


def test_two_workers_index_the_queue_and_redo_the_batch_of_a_killed_one(tmp_path: Path, pg_url: str) -> None:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES, root)
    (root / "000_marker.py").write_text(f'"""{MARKER}"""\n')
    blocked, release, embedder = _held_at_the_marker()

    settings = Settings(embed_provider="none", store_url=pg_url)
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    workers: list[subprocess.Popen] = []
    with ChatServer(embedder=embedder) as chat:
        try:
            batches = enqueue_workspace(store, root, settings, batch_files=8).batches
            assert batches > 4
            doomed = _worker(pg_url, chat.base_url, idle_exit_s=60)
            workers.append(doomed)
            assert blocked.wait(60), "the first worker never reached the marked batch"
            workers += [_worker(pg_url, chat.base_url, idle_exit_s=LEASE_S + 1) for _ in range(2)]
            doomed.send_signal(signal.SIGKILL)
            doomed.wait(10)
            release.set()
            for worker in workers[1:]:
                out, _ = worker.communicate(timeout=120)
                assert worker.returncode == 0, out
        finally:
            release.set()
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait(10)
                worker.stdout.close()  # the killed one's was never read
        embedded_once = _texts_embedded(chat)

        with psycopg.connect(pg_url) as conn:
            queue = conn.execute("SELECT paths, attempts, done_at IS NOT NULL FROM work_queue ORDER BY id").fetchall()
        assert all(done for _, _, done in queue)
        marked = [attempts for paths, attempts, _ in queue if "000_marker.py" in paths]
        assert marked == [2]  # claimed by the killed worker, then again once its lease ran out

        local = Workspace(root, overrides={"embed_provider": "none"})
        try:
            local.index()
            assert _indexed(store) == _indexed(local.store)  # every file, with the same chunks
            assert_statistics_match_the_chunks(store)  # written with each batch; the killed one's rolled back
        finally:
            local.close()
        counts = store.counts()
        assert store.vector_counts(_model(store)) == {"chunks_done": counts["chunks"],
                                                       "skeletons_done": counts["files"]}

        # A second repository with the same content: a worker (in this process) takes every vector from the
        # shared cache.
        copy = tmp_path / "copy"
        shutil.copytree(root, copy)
        other = PgStore(pg_url, "copy", local_dir=tmp_path / "local")
        try:
            enqueue_workspace(other, copy, settings, batch_files=8)
            report = run_worker(pg_url, {"embed_provider": "openai", "embed_base_url": chat.base_url,
                                         "embed_model": "scripted"}, idle_exit_s=0, poll_s=0.1)
            assert report.files == len(other.file_rows()) and report.embedded == 0
            assert _texts_embedded(chat) == embedded_once
            assert _indexed(other) == _indexed(store)
            assert other.vector_counts(_model(store)) == store.vector_counts(_model(store))
        finally:
            other.close()
            store.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_worker_stopped_mid_batch_gives_its_claim_back(tmp_path: Path, pg_url: str, stop: signal.Signals) -> None:
    """A worker stopped by SIGTERM (the default action: killed) or Ctrl-C (a traceback-free 'interrupted') kept
    its claim until the 120-s lease ran out, no other worker taking the batch meanwhile. It now gives the claim
    back as it stops, that claim not counted among the batch's attempts, and says so in a line (exit status
    128 + the signal's number)."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "000_marker.py").write_text(f'"""{MARKER}"""\n')
    (root / "app.py").write_text("def run():\n    return 1\n")
    blocked, release, embedder = _held_at_the_marker()

    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    other = WorkQueue(pg_url, "next-worker")
    try:
        with ChatServer(embedder=embedder) as chat:
            assert enqueue_workspace(store, root, Settings(embed_provider="none", store_url=pg_url)).batches == 1
            worker = _worker(pg_url, chat.base_url, idle_exit_s=60, lease_s=120)
            try:
                assert blocked.wait(60), "the worker never reached the batch"  # it holds the claim, embedding
                assert other.claim(120) is None
                worker.send_signal(stop)
                out, _ = worker.communicate(timeout=60)
            finally:
                release.set()
                if worker.poll() is None:
                    worker.kill()
                    worker.communicate(10)
        batch = store.query("SELECT id FROM work_queue")[0][0]
        assert worker.returncode == 128 + stop, out
        assert out.strip().splitlines()[-1] == (f"codeloupe: worker stopped by {stop.name}: batch {batch} of repo"
                                                " given back to the queue, for a worker to take now"), out
        # It said what it was doing as it did it, and what it did in all as it stopped: it printed nothing before.
        assert out.strip().splitlines()[:2] == ["worker: taking the batches queued in the shared index",
                                                f"worker: indexing batch {batch} of repo (2 files, claim 1 of 5)"], out
        assert out.strip().splitlines()[-2] == "worker: 0 batches, 0 files, 0 texts embedded", out
        assert "Traceback" not in out, out
        taken = other.claim(120)  # at once, not when the stopped worker's lease would have run out
        assert taken is not None and taken.id == batch and taken.attempts == 1
    finally:
        other.close()
        store.close()


def test_a_stop_that_lands_as_a_claim_commits_gives_that_claim_back(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch given back was the one the worker had in hand: a stop landing after the claim's commit but before
    the claim reached the worker's loop left the batch claimed for the whole lease, its attempt counted. Every live
    claim of the stopped worker is given back now."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text("def run():\n    return 1\n")
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    other = WorkQueue(pg_url, "next-worker")
    claim = WorkQueue.claim

    def claimed_then_stopped(queue: WorkQueue, lease_s: float) -> WorkItem | None:
        item = claim(queue, lease_s)
        if item is not None:  # committed: the stop arrives before the worker holds the batch
            raise KeyboardInterrupt
        return item

    try:
        assert enqueue_workspace(store, root, Settings(embed_provider="none", store_url=pg_url)).batches == 1
        batch = store.query("SELECT id FROM work_queue")[0][0]
        monkeypatch.setattr(WorkQueue, "claim", claimed_then_stopped)
        with pytest.raises(WorkerStopped) as stopped:
            run_worker(pg_url, {"embed_provider": "none"}, lease_s=120, idle_exit_s=0, poll_s=0.01)
        monkeypatch.undo()
        assert stopped.value.given_back == [(batch, "repo")]
        taken = other.claim(120)  # at once, not when the lease would have run out
        assert taken is not None and taken.id == batch and taken.attempts == 1
    finally:
        other.close()
        store.close()


def _model(store: PgStore) -> str:
    return store.query("SELECT DISTINCT model FROM chunk_vectors")[0][0]


def _texts_embedded(chat: ChatServer) -> int:
    return sum(len(json.loads(r.body)["input"]) for r in chat.received if r.path.rstrip("/").endswith("/embeddings"))


def test_a_worker_applies_the_walks_rules_to_queued_paths(tmp_path: Path, pg_url: str) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text("def run():\n    return 1\n")
    (root / ".gitignore").write_text("secret.txt\n")
    (root / "secret.txt").write_text("token = 123\n")
    (tmp_path / "outside.py").write_text("x = 1\n")
    (root / "link.py").symlink_to(tmp_path / "outside.py")
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    try:
        store.enqueue(str(root), "", [["app.py", "secret.txt", "../outside.py", "link.py"]])
        report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1)
        assert report.batches == 1
        assert set(store.file_rows()) == {"app.py"}
    finally:
        store.close()


def test_a_worker_logs_a_queued_folder_s_settings_warnings_once(tmp_path: Path, pg_url: str, caplog) -> None:
    """Each batch is read on its folder's settings; what they hold that cannot be used was said nowhere once the
    settings files warned instead of failing. Now once per worker, not once per batch."""
    root = tmp_path / "repo"
    root.mkdir()
    for n in range(3):
        (root / f"mod{n}.py").write_text(f"def run_{n}():\n    return {n}\n")
    (root / ".codeloupe.toml").write_text("chunk_budgett = 900\n")
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    try:
        store.enqueue(str(root), "", [["mod0.py"], ["mod1.py"], ["mod2.py"]])
        with caplog.at_level(logging.WARNING, logger="codeloupe"):
            report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1)
        assert report.batches == 3
    finally:
        store.close()
    warning = (f"unknown setting 'chunk_budgett' in {root.resolve() / '.codeloupe.toml'} "
               "(did you mean 'chunk_budget'?); ignored")
    assert [r.getMessage() for r in caplog.records].count(warning) == 1, caplog.text


def test_two_workers_reaching_the_same_new_text_at_once_embed_it_once(tmp_path: Path, pg_url: str) -> None:
    """Two repositories holding the same new file, one batch each, taken by two real worker processes: the
    first to reach the text embeds it while the second waits for its vector, so the model sees it once."""
    text = f'"""{MARKER}, twice over"""\n\ndef shared():\n    return 42\n'
    stores = []
    for name in ("first", "second"):
        root = tmp_path / name
        root.mkdir()
        (root / "shared.py").write_text(text)
        store = PgStore(pg_url, name, local_dir=tmp_path / "local")
        enqueue_workspace(store, root, Settings(embed_provider="none", store_url=pg_url))
        stores.append(store)
    both_claimed = threading.Event()

    def embedder(text: str) -> list[float]:
        if MARKER in text and not both_claimed.is_set():
            # Hold the first worker inside the model until the second has its batch (and a second more to
            # reach the same text): without a claim on the content, both would be here now.
            with psycopg.connect(pg_url) as conn:
                for _ in range(600):
                    if conn.execute("SELECT count(*) FROM work_queue WHERE claimed_by != ''").fetchone()[0] == 2:
                        break
                    threading.Event().wait(0.1)
            threading.Event().wait(1.0)
            both_claimed.set()
        return embedding_for(text)

    with ChatServer(embedder=embedder) as chat:
        workers = [_worker(pg_url, chat.base_url, idle_exit_s=2) for _ in range(2)]
        try:
            for worker in workers:
                out, _ = worker.communicate(timeout=180)
                assert worker.returncode == 0, out
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait(10)
        sent = [text for r in chat.received if r.path.rstrip("/").endswith("/embeddings")
                for text in json.loads(r.body)["input"]]
    assert both_claimed.is_set()
    assert sum(MARKER in t for t in sent) == len({t for t in sent if MARKER in t}) > 0  # each text once
    model = _model(stores[0])
    assert stores[0].vector_counts(model) == stores[1].vector_counts(model) != {"chunks_done": 0,
                                                                                "skeletons_done": 0}
    for store in stores:
        store.close()


def test_a_worker_gives_rows_with_nothing_to_embed_the_zero_vector_without_the_model(tmp_path: Path,
                                                                                    pg_url: str) -> None:
    """As `embed_pending` does for an index of its own: an empty file's skeleton and a file of blank lines (its
    chunk and its skeleton) are never sent to the model nor cached, and are stored as zero vectors."""
    root = tmp_path / "blanks"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "spaces.py").write_text("\n   \n\t\n")
    (root / "code.py").write_text("def answer():\n    return 42\n")
    store = PgStore(pg_url, "blanks", local_dir=tmp_path / "local")
    enqueue_workspace(store, root, Settings(embed_provider="none", store_url=pg_url))
    with ChatServer() as chat:
        worker = _worker(pg_url, chat.base_url, idle_exit_s=2)
        out, _ = worker.communicate(timeout=180)
        assert worker.returncode == 0, out
        sent = [text for r in chat.received if r.path.rstrip("/").endswith("/embeddings")
                for text in json.loads(r.body)["input"]]
    assert [text for text in sent if text.startswith("code.py")]
    assert not [text for text in sent if text.startswith(("pkg/__init__.py", "spaces.py"))], sent
    with psycopg.connect(pg_url, autocommit=True) as conn:
        zero = sum(conn.execute(f"SELECT count(*) FROM {table} WHERE repo_id = %s AND vector_norm(vec) = 0",
                                (store.repo_id,)).fetchone()[0] for table in ("skeleton_vectors", "chunk_vectors"))
        assert conn.execute("SELECT count(*) FROM embeddings WHERE vector_norm(vec) = 0").fetchone()[0] == 0
    assert zero == 3  # both skeletons and the blank chunk
    store.close()


STRATEGY = '''EXTENSIONS = (".zog",)


def chunk(text, lines):
    starts = [i + 1 for i, line in enumerate(lines) if line.startswith("rule ")] or [1]
    starts[0] = 1
    ends = [s - 1 for s in starts[1:]] + [len(lines)]
    return [(s, e, lines[s - 1].split()[-1]) for s, e in zip(starts, ends)]
'''


def test_workers_resolve_the_graph_when_a_repository_is_done_and_run_only_strategies_their_user_trusts(
        tmp_path: Path, pg_url: str, capsys) -> None:
    from codeloupe.cli import main

    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "python", root)
    (root / "rules.zog").write_text("rule first\n  a\nrule second\n  b\n")
    strategy = root / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(STRATEGY)
    settings = Settings(embed_provider="none", store_url=pg_url)
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    local = Workspace(root, overrides={"embed_provider": "none"})  # the same tree in a workspace's own index
    try:
        local.index()
        expected_edges = local.store.query("SELECT count(*) FROM edges")[0][0]
    finally:
        local.close()
    assert expected_edges > 0

    def kinds() -> list[str]:
        return [r[0] for r in store.query("SELECT c.kind FROM chunks c JOIN files f ON f.id = c.file_id"
                                          " WHERE f.path = 'rules.zog' ORDER BY c.ord")]

    try:
        assert enqueue_workspace(store, root, settings, batch_files=3).batches > 2
        report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1)
        # The last batch written: the graph's edges resolved by the worker, as a workspace's index has them.
        assert report.graphs == 1
        assert store.query("SELECT count(*) FROM edges")[0][0] == expected_edges
        assert "block" not in kinds()  # the strategy file is code this user never trusted: not run

        assert main(["trust", "--strategy", str(strategy)]) == 0
        capsys.readouterr()
        assert enqueue_workspace(store, root, settings).batches == 1  # the files the strategy claims, again
        report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1)
        assert report.files == 1 and kinds() == ["block", "block"]
        assert store.query("SELECT count(*) FROM edges")[0][0] == expected_edges
    finally:
        store.close()


def test_a_repository_queued_again_unchanged_queues_nothing(tmp_path: Path, pg_url: str) -> None:
    """Files the worker skipped for their content are remembered, and a file whose content did not change has
    its new size and mtime recorded: neither is queued (and read) again by every `index --queue`."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text("def run():\n    return 1\n")
    (root / "blob.py").write_bytes(b"x = 1\0\0\0\n")  # binary: skipped for its content
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    settings = load_settings(root, {"store_url": pg_url, "embed_provider": "none"})
    try:
        assert enqueue_workspace(store, root, settings).batches == 1
        assert run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1).files == 2
        assert set(store.file_rows()) == {"app.py"}
        assert set(store.skipped_files()) == {"blob.py"}
        assert enqueue_workspace(store, root, settings).batches == 0
        stat = (root / "app.py").stat()
        os.utime(root / "app.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))  # touched, same text
        assert enqueue_workspace(store, root, settings).batches == 1
        assert run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1).files == 1
        assert enqueue_workspace(store, root, settings).batches == 0
        (root / "blob.py").unlink()
        assert enqueue_workspace(store, root, settings).batches == 0
        assert store.skipped_files() == {}
    finally:
        store.close()


def test_a_running_worker_indexes_a_repository_dropped_and_queued_again(tmp_path: Path, pg_url: str) -> None:
    """A worker keeps each repository's store open between batches; one dropped (`admin drop`) and queued again
    is another row, whose batches it writes there (it failed every one of them, against the old row)."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text("def run():\n    return 1\n")
    (root / "util.py").write_text("def helper():\n    return 2\n")
    settings = load_settings(root, {"store_url": pg_url, "embed_provider": "none"})
    claimed: list[WorkItem] = []
    stores: list[PgStore] = []

    def opened() -> PgStore:
        stores.append(PgStore(pg_url, "repo", local_dir=tmp_path / "local"))
        return stores[-1]

    def drop_and_queue_again(item: WorkItem) -> None:
        claimed.append(item)
        if len(claimed) == 2:  # the worker wrote the first batch: it holds the repository's store
            drop_shared_repository(pg_url, "repo")
            enqueue_workspace(opened(), root, settings)

    try:
        first = opened()
        assert enqueue_workspace(first, root, settings, batch_files=1).batches == 2
        report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1,
                            on_batch=drop_and_queue_again)
        assert report.failed == 0
        store = opened()
        assert store.repo_id != first.repo_id and set(store.file_rows()) == {"app.py", "util.py"}
    finally:
        for store in stores:
            store.close()


def test_a_batch_queued_from_a_folder_replaced_since_as_the_source_is_left_unwritten(
        tmp_path: Path, pg_url: str) -> None:
    """A batch queued from folder A (`index A --queue`) and claimed after another folder B was made the
    repository's source (`index B --replace`) was written into the repository, A's files among B's. It is now
    done with nothing written, and the worker says so."""
    from codeloupe.api import Workspace

    first, other = tmp_path / "a" / "repo", tmp_path / "b" / "repo"
    for folder, name in ((first, "old.py"), (other, "new.py")):
        folder.mkdir(parents=True)
        (folder / name).write_text("def run():\n    return 1\n")
    shared = {"store_url": pg_url, "embed_provider": "none"}
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    try:
        assert enqueue_workspace(store, first, load_settings(first, shared)).batches == 1
        replacing = Workspace(other, overrides=shared, replace_source=True)
        replacing.index()
        replacing.close()
        report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1)
        assert (report.replaced, report.batches, report.failed) == (1, 0, 0)
        assert set(store.file_rows()) == {"new.py"} and store.source_root == str(other)
        assert store.query("SELECT count(*) FROM work_queue WHERE done_at IS NULL") == [(0,)]
    finally:
        store.close()


def test_a_batch_that_changed_no_file_leaves_the_graph_unresolved_and_the_generation_as_it_was(
        tmp_path: Path, pg_url: str) -> None:
    """A worker resolves a repository's graph edges again only when its batches changed a file: a batch of
    files touched with the same content, or of a file skipped for its content, moves nothing (every reader's
    snapshot stays current too)."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "python", root)
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    settings = load_settings(root, {"store_url": pg_url, "embed_provider": "none"})

    def drained() -> int:
        """Graph resolutions of a worker run over what is queued."""
        return run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1).graphs

    try:
        assert enqueue_workspace(store, root, settings).batches == 1
        assert drained() == 1
        generation = store.generation("content")
        first = sorted(root.rglob("*.py"))[0]
        stat = first.stat()
        os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))  # touched, same text
        (root / "blob.py").write_bytes(b"x = 1\0\0\0\n")  # new, and skipped for its content
        assert enqueue_workspace(store, root, settings).batches == 1
        assert drained() == 0
        assert store.generation("content") == generation
        first.write_text(first.read_text() + "\n\ndef added():\n    return 3\n")
        assert enqueue_workspace(store, root, settings).batches == 1
        assert drained() == 1
        assert store.generation("content") > generation
    finally:
        store.close()


def test_a_worker_that_cannot_see_a_batch_s_folder_deletes_nothing(tmp_path: Path, pg_url: str, caplog) -> None:
    """A batch whose folder was moved away (or is not a directory, or an unmounted, empty mount point) read
    every file as deleted: the repository lost its files. Such a batch now fails in a line naming the folder,
    is claimed again per the lease, and is left stuck after MAX_ATTEMPTS claims; a file missing from a folder
    that holds the repository is still deleted."""
    from codeloupe.store.postgres import MAX_ATTEMPTS

    root = tmp_path / "repo"
    root.mkdir()
    for n in range(4):
        (root / f"mod{n}.py").write_text(f"def run_{n}():\n    return {n}\n")
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    settings = load_settings(root, {"store_url": pg_url, "embed_provider": "none"})

    def drain(**kwargs: float):
        return run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.01, **kwargs)

    def claimable_again() -> None:
        with psycopg.connect(pg_url) as conn:
            conn.execute("UPDATE work_queue SET attempts = 0 WHERE done_at IS NULL")

    try:
        assert enqueue_workspace(store, root, settings).batches == 1 and drain().files == 4
        for n in range(3):
            (root / f"mod{n}.py").write_text(f"def run_{n}():\n    return {n + 10}\n")
        assert enqueue_workspace(store, root, settings).batches == 1
        moved = tmp_path / "moved"
        root.rename(moved)
        with caplog.at_level(logging.WARNING, logger="codeloupe"):
            report = drain(lease_s=0)  # each claim's lease over at once: claimed again until given up on
        assert (report.batches, report.failed, report.stuck) == (0, MAX_ATTEMPTS, 1)
        assert set(store.file_rows()) == {f"mod{n}.py" for n in range(4)}
        said = [r for r in caplog.records if "mod" not in r.getMessage()]
        assert len(said) == MAX_ATTEMPTS and all(str(root) in r.getMessage() and r.exc_info is None for r in said)

        root.write_text("not a folder\n")  # in its place, a file
        claimable_again()
        assert drain(lease_s=0).failed == MAX_ATTEMPTS
        root.unlink()
        root.mkdir()  # an empty mount point: none of the batch's files, nor the repository's fourth
        claimable_again()
        assert drain(lease_s=0).failed == MAX_ATTEMPTS
        assert set(store.file_rows()) == {f"mod{n}.py" for n in range(4)}

        root.rmdir()
        moved.rename(root)  # back: its files are written, and one deleted from it since is deleted
        (root / "mod2.py").unlink()
        claimable_again()
        assert drain().batches == 1
        assert set(store.file_rows()) == {"mod0.py", "mod1.py", "mod3.py"}
    finally:
        store.close()


def _two_batches(tmp_path: Path, pg_url: str) -> PgStore:
    root = tmp_path / "repo"
    root.mkdir()
    for n in range(2):
        (root / f"mod{n}.py").write_text(f"def run_{n}():\n    return {n}\n")
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    assert enqueue_workspace(store, root, load_settings(root, {"store_url": pg_url, "embed_provider": "none"}),
                             batch_files=1).batches == 2
    return store


@pytest.mark.parametrize("restart_at", [1, 2], ids=["after-the-first-claim", "before-the-graph-step"])
def test_a_worker_reconnects_after_the_database_ended_its_sessions(tmp_path: Path, pg_url: str, pg_server: str,
                                                                  caplog, restart_at: int) -> None:
    """A restart of the database (its sessions ended, as `pg_terminate_backend` does) killed the worker with a
    traceback through its next claim (AdminShutdown). At the last claim it also hit the graph step that follows a
    repository's last batch, which ran outside the reconnect that covers claiming and writing batches, and left the
    graph unresolved. Either way the worker now says so in one line, connects again, goes on and resolves the
    graph."""
    from test_pg_outage import _end_sessions

    store = _two_batches(tmp_path, pg_url)
    claimed: list[WorkItem] = []

    def restart_at_a_claim(item: WorkItem) -> None:
        claimed.append(item)
        if len(claimed) == restart_at:
            _end_sessions(pg_server, pg_url)

    try:
        with caplog.at_level(logging.INFO, logger="codeloupe"):
            report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.01,
                                on_batch=restart_at_a_claim)
        assert (report.batches, report.failed, report.graphs) == (2, 0, 1)
        assert set(store.file_rows()) == {"mod0.py", "mod1.py"}
        lost = [r for r in caplog.records if r.getMessage().startswith("lost the shared index")]
        assert len(lost) == 1 and all(r.exc_info is None for r in caplog.records), caplog.text
    finally:
        store.close()


def test_a_worker_waits_for_a_database_refusing_connections_and_redoes_the_batch_it_lost(
        tmp_path: Path, pg_url: str, pg_server: str) -> None:
    """The database going away mid-batch and refusing connections for a while: the batch fails without a
    traceback, the worker waits (backing off) until the database takes connections again, and the batch is
    claimed again and written."""
    from test_pg_outage import _accept, _end_sessions

    store = _two_batches(tmp_path, pg_url)
    outage = threading.Event()

    class Outage(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("lost the shared index"):
                outage.set()

    def go_away_during_the_first_batch(item: WorkItem) -> None:
        if not outage.is_set() and item.attempts == 1 and item.id == min_id:
            _end_sessions(pg_server, pg_url, refuse_new=True)
            threading.Thread(target=lambda: outage.wait(60) and _accept(pg_server, pg_url), daemon=True).start()

    min_id = store.query("SELECT min(id) FROM work_queue")[0][0]
    handler = Outage()
    logging.getLogger("codeloupe").addHandler(handler)
    try:
        # Idle for 10 s at the end: with --exit-when-idle, an outage longer than that is given up on.
        report = run_worker(pg_url, {"embed_provider": "none"}, lease_s=0, idle_exit_s=10, poll_s=0.01,
                            on_batch=go_away_during_the_first_batch)
        assert outage.is_set()
        assert (report.batches, report.failed) == (2, 1)
        assert set(store.file_rows()) == {"mod0.py", "mod1.py"}
    finally:
        logging.getLogger("codeloupe").removeHandler(handler)
        _accept(pg_server, pg_url)
        store.close()


class _Said(logging.Handler):
    """Calls `then` on each codeloupe log line that starts with `start`, and keeps those lines."""

    def __init__(self, start: str, then: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.start, self.then, self.lines = start, then, []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.start):
            self.lines.append(record.getMessage())
            self.then()


def _expire_leases(pg_url: str) -> None:
    """What the lease running out does: the batch can be claimed again."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE work_queue SET lease_until = now() - interval '1 second' WHERE done_at IS NULL")


def test_a_worker_gives_up_its_claim_on_a_batch_the_database_restart_failed(
        tmp_path: Path, pg_url: str, pg_server: str) -> None:
    """The database restarting while a worker wrote a batch failed the batch, and the worker reconnected, but its
    claim on the batch stayed until the lease (120 s) ran out: with --exit-when-idle the worker exited meanwhile,
    the batch unwritten. Once it reaches the database again it now gives the claim up and writes the batch."""
    from test_pg_outage import _accept, _end_sessions

    store = _two_batches(tmp_path, pg_url)
    write_batch = PgStore.write_batch

    def restart_mid_write(self: PgStore, *args: object, **kwargs: object) -> object:
        if not lost.lines:  # the first write: the database restarts, refusing connections until the worker says so
            _end_sessions(pg_server, pg_url, refuse_new=True)
        return write_batch(self, *args, **kwargs)

    lost = _Said("lost the shared index", then=lambda: _accept(pg_server, pg_url))
    # Were its own claim kept, the worker would wait for it: the lease is ended then, so that nothing hangs.
    waited = _Said("the queue is empty but for", then=lambda: _expire_leases(pg_url))
    for handler in (lost, waited):
        logging.getLogger("codeloupe").addHandler(handler)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(PgStore, "write_batch", restart_mid_write)
            # Idle for 5 s at the end: with --exit-when-idle, an outage longer than that is given up on (this one
            # ends as the worker says it began).
            report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=5, poll_s=0.01)  # the 120-s lease
        assert len(lost.lines) == 1 and waited.lines == []
        assert (report.batches, report.failed) == (2, 1)
        assert set(store.file_rows()) == {"mod0.py", "mod1.py"}
        assert store.query("SELECT count(*) FROM work_queue WHERE done_at IS NULL")[0][0] == 0
    finally:
        for handler in (lost, waited):
            logging.getLogger("codeloupe").removeHandler(handler)
        _accept(pg_server, pg_url)
        store.close()


def test_exit_when_idle_waits_for_a_batch_claimed_under_a_live_lease(tmp_path: Path, pg_url: str) -> None:
    """A worker killed mid-batch leaves its batch claimed until the lease runs out; a worker with --exit-when-idle
    took the queue for idle meanwhile and exited with status 0, the run incomplete. It now says it waits for the
    lease, and takes the batch once the lease has run out."""
    store = _two_batches(tmp_path, pg_url)
    dead = WorkQueue(pg_url, "killed-worker")
    try:
        assert dead.claim(LEASE_S) is not None  # and never written: its worker was killed
        waited = _Said("the queue is empty but for", then=lambda: _expire_leases(pg_url))
        logging.getLogger("codeloupe").addHandler(waited)
        try:
            report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.01)
        finally:
            logging.getLogger("codeloupe").removeHandler(waited)
        assert len(waited.lines) == 1 and "1 batch under a claim's lease" in waited.lines[0], waited.lines
        assert "(--exit-when-idle 0)" in waited.lines[0]
        assert report.batches == 2 and set(store.file_rows()) == {"mod0.py", "mod1.py"}
    finally:
        dead.close()
        store.close()


def test_a_batch_whose_folder_moved_to_another_commit_is_left_unwritten(tmp_path: Path, pg_url: str,
                                                                       caplog) -> None:
    """`index --queue` at commit X, then a commit Y changing a file, then `worker`: the worker wrote Y's text with
    every answer naming X. The batch is now done with nothing written, in a line saying to queue again; queued
    again, it is written under Y."""
    if shutil.which("git") is None:
        pytest.fail("git is not installed: these tests need it, as CI has it")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                              env=env).stdout.strip()

    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text("def committed_at_x():\n    return 1\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "x")
    first = git("rev-parse", "HEAD")
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    settings = load_settings(root, {"store_url": pg_url, "embed_provider": "none"})
    try:
        assert enqueue_workspace(store, root, settings) == QueuedRun(1, first)
        (root / "app.py").write_text("def committed_at_y():\n    return 2\n")
        git("commit", "-q", "-a", "-m", "y")
        second = git("rev-parse", "HEAD")
        with caplog.at_level(logging.WARNING, logger="codeloupe.shared"):
            report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1)
        assert store.query("SELECT commit_sha FROM files") == []  # not Y's text under X
        assert (report.moved, report.batches, report.failed) == (1, 0, 0)
        assert store.query("SELECT count(*) FROM work_queue WHERE done_at IS NULL") == [(0,)]
        assert f"queued at {first} and {root} is at {second} now" in caplog.text
        assert "index --queue" in caplog.text

        assert enqueue_workspace(store, root, settings) == QueuedRun(1, second)
        assert run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.1).batches == 1
        assert store.commit == second
        assert store.query("SELECT commit_sha FROM files") == [(second,)]
        assert "committed_at_y" in store.query("SELECT string_agg(text, '') FROM chunks")[0][0]
    finally:
        store.close()
