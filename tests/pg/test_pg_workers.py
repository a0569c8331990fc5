"""Indexing workers on the shared index: real `codeloupe worker` processes claiming queued batches with
SKIP LOCKED, one of them killed mid-batch (its lease runs out and its batch is redone), and the vector cache
shared by every repository (content embedded once is never sent to the model again)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psycopg

from codeloupe.api import Workspace
from codeloupe.settings import Settings
from codeloupe.shared_index import enqueue_workspace, run_worker
from codeloupe.store.postgres import PgStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # chat_server.py

from test_pg_lexical import assert_statistics_match_the_chunks  # noqa: E402

from chat_server import ChatServer, embedding_for  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
REPO = Path(__file__).resolve().parents[2]
MARKER = "the worker embedding this is killed"
LEASE_S = 3


def _worker(pg_url: str, embed_url: str, idle_exit_s: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "engine"), str(REPO / "server")])}
    return subprocess.Popen(
        [sys.executable, "-m", "codeloupe", "worker", "--store", pg_url, "--embed-provider", "openai",
         "--embed-base-url", embed_url, "--embed-model", "scripted", "--lease-s", str(LEASE_S),
         "--exit-when-idle", str(idle_exit_s)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


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
    blocked, release = threading.Event(), threading.Event()

    def embedder(text: str) -> list[float]:
        if MARKER in text and not release.is_set():
            blocked.set()
            release.wait(60)
        return embedding_for(text)

    settings = Settings(embed_provider="none", store_url=pg_url)
    store = PgStore(pg_url, "repo", local_dir=tmp_path / "local")
    workers: list[subprocess.Popen] = []
    with ChatServer(embedder=embedder) as chat:
        try:
            batches = enqueue_workspace(store, root, settings, batch_files=8)
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
