"""A folder's first index stopped when the folder closes or the server exits, over real stdio: the index stops at its
next file, its chunking workers ended, each file it wrote whole in the index (the next start indexes the rest). So
does the graph refresh after it while it takes the edges' facts (none kept, its workers ended)."""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import RawServer, uri, write_project

from processes import (
    alive,
    children_but_parse_workers,
    children_of,
    children_running,
    many_small_files,
    parse_workers,
)

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="no chunking worker pool on one core")
FILES = 1500


class Session:
    """A `RawServer` initialised on one folder, asked in turn."""

    def __init__(self, root: Path, errlog: Path, embed_provider: str = "none", process_id: int | None = None) -> None:
        self.server = RawServer(errlog)
        self.errlog = errlog
        self.server.initialize([root], process_id=process_id, embedProvider=embed_provider)
        self._ids = itertools.count(2)  # 1 was the handshake's

    def ask(self, method: str, params: Any = None) -> Any:
        sent = next(self._ids)
        self.server.send_bytes(self.server.request(sent, method, params))
        reply = self.server.next_reply()
        assert reply.get("id") == sent and "error" not in reply, reply
        return reply["result"]

    def tell(self, method: str, params: Any) -> None:
        self.server.send_bytes(self.server.frame({"jsonrpc": "2.0", "method": method, "params": params}))

    def first_index_under_way(self) -> dict[str, Any]:
        """The folder's status once its first index wrote files and is still running."""
        deadline = time.monotonic() + 120
        while not ((folders := self.ask("codeloupe/status", {})["folders"]) and folders[0]["files"] > 0):
            assert time.monotonic() < deadline, folders
            time.sleep(0.05)
        assert folders[0]["state"] == "indexing" and folders[0]["files"] < FILES, folders
        return folders[0]

    def graph_facts_under_way(self) -> list[int]:
        """The worker processes taking the folder's graph facts, once its first index is done: the graph refresh that
        follows it is the only work left that runs in workers (no embedding), for seconds at `FILES` files. The kept
        parse worker the server starts for saves once the first index is done is the server's, not the folder's:
        not among them."""
        deadline = time.monotonic() + 120
        while not ((folders := self.ask("codeloupe/status", {})["folders"]) and folders[0]["state"] == "ready"):
            assert time.monotonic() < deadline, folders
            time.sleep(0.05)
        assert folders[0]["files"] == FILES, folders
        while not (workers := self._facts_workers()):
            assert time.monotonic() < deadline, "no graph facts workers seen"
            time.sleep(0.05)
        return workers

    def _facts_workers(self) -> list[int]:
        """The live children but the kept parse worker, once that one is started and named (until then it is not
        told from the others)."""
        if not parse_workers(children_of(self.server.proc.pid)):
            return []
        return [pid for pid in children_but_parse_workers(self.server.proc.pid) if alive(pid)]

    def remove(self, root: Path, workers: list[int], what: str) -> None:
        """Remove the folder at `root` from the workspace, and wait until its `workers` (`what` they are) are gone."""
        self.tell("workspace/didChangeWorkspaceFolders",
                  {"event": {"added": [], "removed": [{"uri": uri(root), "name": root.name}]}})
        deadline = time.monotonic() + 60
        while any(alive(pid) for pid in workers):
            assert time.monotonic() < deadline, f"{what} outlived the folder's removal"
            time.sleep(0.05)

    def exit(self) -> None:
        """`shutdown`, then `exit`: the server ends by itself, with status 0."""
        self.ask("shutdown")
        self.tell("exit", None)
        assert self.server.proc.wait(timeout=30) == 0

    def quiet(self) -> None:
        """Nothing failed in the server's log, and no worker pool was abandoned."""
        log = self.errlog.read_text()
        assert "Traceback" not in log and "failed" not in log and "leaked semaphore" not in log, log


def stored(index: str) -> tuple[int, int]:
    """Files in the index at `index`, and those of them without a chunk (a file written in part)."""
    with contextlib.closing(sqlite3.connect(f"{Path(index).as_uri()}?mode=ro", uri=True)) as conn:
        files = conn.execute("SELECT count(*) FROM files").fetchone()[0]
        chunkless = conn.execute("SELECT count(*) FROM files WHERE id NOT IN (SELECT file_id FROM chunks)").fetchone()[0]
    return files, chunkless


def test_removing_a_folder_stops_its_first_index(tmp_path: Path) -> None:
    """A folder removed from the workspace (workspace/didChangeWorkspaceFolders) during its first index was closed
    only once that whole index was done (minutes at 40K files), its chunking workers running until then: the index
    now stops at its next file."""
    root = many_small_files(tmp_path / "many", FILES)
    session = Session(root, tmp_path / "stderr.txt")
    try:
        status = session.first_index_under_way()
        workers = children_of(session.server.proc.pid)
        session.remove(root, workers, "the chunking workers")
        assert workers and session.ask("codeloupe/status", {})["folders"] == []
        files, chunkless = stored(status["indexPath"])
        assert 0 < files < FILES and chunkless == 0  # stopped part way, every file written whole
        session.exit()
    finally:
        session.server.close()


def test_exit_during_a_first_index_stops_and_closes_it(tmp_path: Path) -> None:
    """`shutdown` then `exit` during a first index: the server left at once mid-index, its chunking pool never let
    go (the resource tracker then reported leaked semaphores on the editor's output) and its index never closed
    (its write-ahead log left beside it). The index now stops at its next file and is closed before the process
    exits."""
    root = many_small_files(tmp_path / "many", FILES)
    session = Session(root, tmp_path / "stderr.txt")
    try:
        status = session.first_index_under_way()
        workers = children_of(session.server.proc.pid)
        session.exit()
    finally:
        session.server.close()
    assert workers and not any(alive(pid) for pid in workers)
    assert "leaked semaphore" not in session.errlog.read_text(), session.errlog.read_text()
    assert not Path(status["indexPath"] + "-wal").exists()  # closed, its log folded in
    files, chunkless = stored(status["indexPath"])
    assert 0 < files < FILES and chunkless == 0


def test_sigterm_during_a_first_index_stops_and_closes_it(tmp_path: Path) -> None:
    """SIGTERM (Neovim's forced stop, a session's logout) during a first index: its default action killed the server
    mid-index, the index never closed (its write-ahead log left beside it) and its chunking pool never let go (the
    resource tracker's leaked semaphores on the editor's output). It now ends the server as `exit` does: status 0,
    the index stopped at its next file and closed, its workers ended."""
    root = many_small_files(tmp_path / "many", FILES)
    session = Session(root, tmp_path / "stderr.txt")
    try:
        status = session.first_index_under_way()
        workers = children_of(session.server.proc.pid)
        session.server.proc.send_signal(signal.SIGTERM)
        assert session.server.proc.wait(timeout=30) == 0
    finally:
        session.server.close()
    assert workers and not any(alive(pid) for pid in workers)
    session.quiet()
    assert not Path(status["indexPath"] + "-wal").exists()  # closed, its log folded in
    files, chunkless = stored(status["indexPath"])
    assert 0 < files < FILES and chunkless == 0


def test_sigterm_during_a_graph_refresh_stops_it(tmp_path: Path) -> None:
    """SIGTERM while the graph refresh after a first index takes the edges' facts: killed outright, the facts
    workers' pool was never let go (leaked semaphores on the editor's output). Now as `exit`: status 0, the refresh
    stopped, its workers ended."""
    root = many_small_files(tmp_path / "many", FILES)
    session = Session(root, tmp_path / "stderr.txt")
    try:
        workers = session.graph_facts_under_way()
        session.server.proc.send_signal(signal.SIGTERM)
        assert session.server.proc.wait(timeout=30) == 0
    finally:
        session.server.close()
    assert not any(alive(pid) for pid in workers)
    session.quiet()



def test_a_search_in_flight_when_its_folder_is_removed_is_answered_content_modified(tmp_path: Path) -> None:
    """A search meeting the graph refresh after a first index waits for that build; its folder removed meanwhile
    (normal editor use), the build stops and so does the search (`IndexStopped`, 1f794d5), which the editor was
    answered as a fault: -32803 "codeloupe engine error: IndexStopped: ...", a traceback logged as an error. It is
    answered -32801 ContentModified (the state the request was made on is gone; an editor drops such an answer
    quietly) naming the closed folder, and nothing is logged as failed."""
    root = many_small_files(tmp_path / "many", FILES)
    session = Session(root, tmp_path / "stderr.txt")
    try:
        workers = session.graph_facts_under_way()
        sent = 100
        session.server.send_bytes(session.server.request(sent, "codeloupe/search", {"query": "step total"}))
        session.remove(root, workers, "the graph facts workers")
        reply = session.server.next_reply()
        assert reply.get("id") == sent and reply.get("error", {}).get("code") == -32801, reply
        assert reply["error"]["message"] == ("the folder this request read was closed while it ran (removed from the"
                                             " workspace, reopened on new settings, or the server stopping)"), reply
        session.exit()
    finally:
        session.server.close()
    session.quiet()


def test_sigterm_at_any_point_of_a_start_closes_the_index_and_exits(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM at points drawn at random over a start (the first index, searches meeting it, the graph refresh after
    it): its handler raised SystemExit in the main thread wherever that was, inside the loop's own work, a pool's
    submit or an import, and the close could then wait on a lock left held: the process left after its exit wait
    with the index unclosed and its workers' pool never let go (leaked semaphores on the editor's output, 8 runs
    of 30 on an idle machine). The loop now cancels its own serving: each run exits 0, quiet, its index closed.
    The initialize is answered first, so the server's handler is in place: the drawn waits pick points, the
    bound is generous."""
    root = many_small_files(tmp_path / "many", 300)
    moments = random.Random(31)
    for run in range(10):
        cache = tmp_path / f"cache{run}"
        monkeypatch.setenv("CODELOUPE_CACHE_DIR", str(cache))
        session = Session(root, tmp_path / f"stderr{run}.txt")
        try:
            for sent in range(2, 6):
                session.server.send_bytes(session.server.request(sent, "codeloupe/search", {"query": "step total"}))
            time.sleep(moments.uniform(1, 3))
            session.server.proc.send_signal(signal.SIGTERM)
            assert session.server.proc.wait(timeout=60) == 0, session.errlog.read_text()
        finally:
            session.server.close()
        session.quiet()
        assert list(cache.glob("indexes/*-wal")) == []  # closed, its log folded in

# An editor: starts the server on a folder, says the server's pid, then reads (and drops) all it sends until killed.
EDITOR = textwrap.dedent("""
    import json, subprocess, sys
    def frame(message):
        body = json.dumps(message).encode()
        return b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body
    server = subprocess.Popen([sys.executable, "-m", "codeloupe_lsp"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=open(sys.argv[2], "w"))
    folder = {"uri": sys.argv[1], "name": "many"}
    server.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": None, "capabilities": {}, "workspaceFolders": [folder],
        "initializationOptions": {"embedProvider": "none"}}}))
    server.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    server.stdin.flush()
    print(server.pid, flush=True)
    while server.stdout.read(4096):
        pass
""")


def _indexes() -> Iterator[Path]:
    return (Path(os.environ["CODELOUPE_CACHE_DIR"]) / "indexes").glob("*.sqlite")


def _files_written() -> int:
    """Files the server's first index has written so far (the test cannot ask the server: the editor speaks to it)."""
    for index in _indexes():
        with contextlib.suppress(sqlite3.Error):
            return stored(str(index))[0]
    return 0


def test_an_editor_killed_during_a_first_index_leaves_no_server_and_no_worker(tmp_path: Path) -> None:
    """The editor killed (SIGKILL: it sends nothing more) while the server's first index chunks in worker processes:
    its end of the pipes gone, the server stops the index, closes it and exits by itself, its workers with it."""
    root = many_small_files(tmp_path / "many", FILES)
    errlog = tmp_path / "stderr.txt"
    editor = subprocess.Popen([sys.executable, "-c", EDITOR, uri(root), str(errlog)], stdout=subprocess.PIPE, text=True)
    server, workers = 0, []
    try:
        assert editor.stdout is not None
        server = int(editor.stdout.readline())
        deadline = time.monotonic() + 120
        while len(workers := children_of(server)) < 2 or _files_written() == 0:
            assert time.monotonic() < deadline, "the first index never wrote files from its chunking workers"
            time.sleep(0.02)
        editor.kill()
        editor.wait(timeout=30)
        deadline = time.monotonic() + 30
        while left := [pid for pid in (server, *workers) if alive(pid)]:
            assert time.monotonic() < deadline, f"outlived the editor: {left}"
            time.sleep(0.05)
    finally:
        if editor.poll() is None:
            editor.kill()
        for pid in (server, *workers):
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
    log = errlog.read_text()
    assert "Traceback" not in log and "leaked semaphore" not in log, log
    index = next(_indexes())
    assert not Path(f"{index}-wal").exists()  # closed, its log folded in
    files, chunkless = stored(str(index))
    assert 0 < files < FILES and chunkless == 0  # stopped part way, every file written whole


def test_removing_a_folder_stops_its_graph_refresh(tmp_path: Path) -> None:
    """A folder removed while the graph refresh after its first index takes the edges' facts (minutes at 40K files):
    its index was closed under that refresh ("refreshing the graph ... failed" and a traceback in the log). The
    refresh now stops at its next file, its facts workers ended, and the index is closed after it."""
    root = many_small_files(tmp_path / "many", FILES)
    session = Session(root, tmp_path / "stderr.txt")
    try:
        workers = session.graph_facts_under_way()
        session.remove(root, workers, "the graph facts workers")
        assert session.ask("codeloupe/status", {})["folders"] == []
        session.exit()
    finally:
        session.server.close()
    session.quiet()


def test_exit_during_a_graph_refresh_stops_it(tmp_path: Path) -> None:
    """`shutdown` then `exit` while the graph refresh after a first index takes the edges' facts: the index was closed
    under it (a traceback in the log) or the process left with its facts workers' pool never let go (the resource
    tracker's leaked semaphores on the editor's output). The refresh now stops at its next file, its workers ended,
    before the index is closed and the process exits."""
    root = many_small_files(tmp_path / "many", FILES)
    session = Session(root, tmp_path / "stderr.txt")
    try:
        workers = session.graph_facts_under_way()
        session.exit()
    finally:
        session.server.close()
    assert not any(alive(pid) for pid in workers)
    session.quiet()


def test_removing_a_folder_kills_the_models_first_derivation(tmp_path: Path) -> None:
    """A folder removed while the local model is derived for the first time on the machine (seconds of CPU, before
    anything is embedded): its close waited for the whole derivation, on the folder's writer. The derivation runs in
    a child process, which the removal now kills: it ends before it could have written the model (none is in the
    cache, nor its work dir), and the server exits cleanly after."""
    root = tmp_path / "src"
    root.mkdir()
    (root / "mod.py").write_text("def handler(request):\n    return request\n")
    models = Path(os.environ["CODELOUPE_CACHE_DIR"]) / "models"  # a fresh cache (conftest): the model is derived
    session = Session(root, tmp_path / "stderr.txt", embed_provider="local")
    try:
        deadline = time.monotonic() + 120
        while not (derivers := children_running(session.server.proc.pid, "codeloupe.embed.derive")):
            assert time.monotonic() < deadline, "no derivation seen"
            time.sleep(0.02)
        session.remove(root, derivers, "the derivation")
        # Killed, nothing kept: the server removes the child's work dir once the child has ended (a moment after).
        deadline = time.monotonic() + 30
        while list(models.glob("requantize-*")):
            assert time.monotonic() < deadline, "the killed derivation's work dir was left"
            time.sleep(0.02)
        assert not list(models.glob("*.onnx"))
        session.exit()
    finally:
        session.server.close()
    session.quiet()


def test_the_server_ends_when_the_editor_s_process_is_gone(tmp_path: Path) -> None:
    """An editor killed (SIGKILL) or crashed whose end of the pipes another process still holds (a wrapper, a UI that
    started `nvim --embed`, an SSH session, a child that inherited them) sends no end of input, and the server ran on
    for good, its index open and its workers with it, though initialize named the editor's process (processId),
    which LSP says the server ends with. The server now ends as on `exit` without `shutdown`: status 1, its index
    closed, its workers ended. The editor is left unreaped (a zombie, as until its own parent waits for it), which a
    look by its pid alone still finds; the test holds the server's pipes."""
    root = write_project(tmp_path / "project")
    editor = subprocess.Popen(["sleep", "1000"])
    session = Session(root, tmp_path / "stderr.txt", process_id=editor.pid)
    try:
        deadline = time.monotonic() + 120
        while (folders := session.ask("codeloupe/status", {})["folders"])[0]["state"] != "ready":
            assert time.monotonic() < deadline, folders
            time.sleep(0.05)
        workers = children_of(session.server.proc.pid)
        assert workers  # the kept parse worker its index chunked in
        editor.kill()
        assert session.server.proc.wait(timeout=60) == 1
        deadline = time.monotonic() + 30
        while left := [pid for pid in workers if alive(pid)]:
            assert time.monotonic() < deadline, f"workers outlived the server: {left}"
            time.sleep(0.05)
    finally:
        editor.kill()
        editor.wait(timeout=30)
        session.server.close()
    session.quiet()
    assert not Path(folders[0]["indexPath"] + "-wal").exists()  # closed, its log folded in


def test_a_server_given_no_editor_process_stays_up_when_another_s_editor_ends(tmp_path: Path) -> None:
    """processId null (an editor that does not say, or a server started by hand): nothing to end with. A server
    given the editor's pid is the clock: once it has seen the editor's end and left, the other still answers."""
    editor = subprocess.Popen(["sleep", "1000"])
    watching, unwatched = RawServer(tmp_path / "watching.txt"), RawServer(tmp_path / "unwatched.txt")
    try:
        watching.initialize(process_id=editor.pid)
        unwatched.initialize()
        editor.kill()
        editor.wait(timeout=30)
        assert watching.proc.wait(timeout=60) == 1
        unwatched.send_bytes(unwatched.request(2, "codeloupe/status", {}))
        reply = unwatched.next_reply()
        assert reply["id"] == 2 and reply["result"]["folders"] == [], reply
        unwatched.send_bytes(unwatched.request(3, "shutdown"))
        assert unwatched.next_reply()["id"] == 3
        unwatched.send_bytes(unwatched.frame({"jsonrpc": "2.0", "method": "exit"}))
        assert unwatched.proc.wait(timeout=30) == 0
    finally:
        if editor.poll() is None:
            editor.kill()
        watching.close()
        unwatched.close()


def test_a_parse_worker_is_ready_for_the_first_save_after_a_pooled_first_index(tmp_path: Path) -> None:
    """A first index of enough files for a pool parses them there, leaving no kept parse worker: the first save then
    waited for one to be spawned and import the chunker (0.5-1 s on a loaded machine) before its file was parsed.
    The server now starts one once the first index is done, off the request's path."""
    root = many_small_files(tmp_path / "project", files=250)
    session = Session(root, tmp_path / "stderr.txt")
    try:
        deadline = time.monotonic() + 300
        while (folders := session.ask("codeloupe/status", {})["folders"])[0]["state"] != "ready":
            assert time.monotonic() < deadline, folders
            time.sleep(0.05)
        deadline = time.monotonic() + 120
        while not parse_workers(children_of(session.server.proc.pid)):
            assert time.monotonic() < deadline, "no parse worker kept after the first index"
            time.sleep(0.05)
    finally:
        session.server.close()
    session.quiet()
