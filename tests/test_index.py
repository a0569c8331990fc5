"""The indexer over a real SQLite file: incremental by hash, deletes, renames, kills, corrupt files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from codeloupe.api import IndexStopped, Workspace, WorkspaceError
from codeloupe.chunk import CHUNKER_VERSION, validate_partition
from codeloupe.store import SCHEMA_VERSION, SkippedFile, Store
from codeloupe.types import Progress
from processes import alive, children_of, many_small_files


def make_repo(root: Path, n: int = 5) -> Path:
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / "pkg" / f"mod{i}.py").write_text(textwrap.dedent(f'''\
            """Module {i}."""

            LIMIT_{i} = {i}


            def handler_{i}(request):
                """Handle request number {i}."""
                return request + {i}


            class Service{i}:
                def run(self, value):
                    return handler_{i}(value)
            '''))
    return root


def chunk_rows(ws: Workspace, path: str) -> list[tuple[int, int, str]]:
    rows = ws.store.query(
        "SELECT c.start_line, c.end_line, c.text FROM chunks c JOIN files f ON f.id=c.file_id"
        " WHERE f.path=? ORDER BY c.ord", (path,))
    return [tuple(r) for r in rows]


def test_index_then_unchanged_reindex_touches_nothing(tmp_path: Path) -> None:
    ws = Workspace(make_repo(tmp_path / "repo"))
    first = ws.index()
    assert first.files_indexed == 5 and first.chunks > 0 and first.symbols >= 15
    assert first.languages == {"python": 5}
    gen = ws.store.generation("content")
    second = ws.index()
    assert second.files_indexed == 0 and second.files_unchanged == 5
    assert ws.store.generation("content") == gen  # nothing rewritten


def test_every_stored_file_is_a_line_partition(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    ws = Workspace(repo)
    ws.index()
    for path in ws.store.file_rows():
        rows = chunk_rows(ws, path)
        text = (repo / path).read_text()
        assert "".join(r[2] for r in rows) == text
        from codeloupe.types import Chunk
        validate_partition(text, [Chunk(s, e, "block", "", "", t) for s, e, t in rows])


def test_edit_delete_rename_and_touch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    ws = Workspace(repo)
    ws.index()
    # edit
    (repo / "pkg/mod0.py").write_text("def renamed_handler():\n    return 42\n")
    # delete
    (repo / "pkg/mod1.py").unlink()
    # rename
    (repo / "pkg/mod2.py").rename(repo / "pkg/moved.py")
    # touch without change: mtime moves, content does not
    os.utime(repo / "pkg/mod3.py", (time.time() + 5, time.time() + 5))
    report = ws.index()
    assert report.files_indexed == 2  # the edit and the rename target
    assert report.files_deleted == 2  # mod1 and the rename source
    assert report.files_unchanged == 2
    files = set(ws.store.file_rows())
    assert files == {"pkg/mod0.py", "pkg/moved.py", "pkg/mod3.py", "pkg/mod4.py"}
    names = {s.name for s in ws.store.symbol_rows()}
    assert "renamed_handler" in names and "handler_1" not in names and "handler_0" not in names
    orphans = ws.store.query("SELECT count(*) FROM chunks WHERE file_id NOT IN (SELECT id FROM files)")
    assert orphans[0][0] == 0


def test_update_files_fast_path_and_escape_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    ws = Workspace(repo)
    ws.index()
    (repo / "pkg/new.py").write_text("def brand_new_function():\n    pass\n")
    report = ws.update_files([repo / "pkg/new.py"])
    assert report.files_indexed == 1
    assert "brand_new_function" in {s.name for s in ws.store.symbol_rows()}
    (repo / "pkg/new.py").unlink()
    assert ws.update_files(["pkg/new.py"]).files_deleted == 1
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.update_files(["../elsewhere.py"])
    with pytest.raises(WorkspaceError, match="NUL byte"):  # was a bare ValueError, which surfaces took for a fault
        ws.relative("pkg/a\x00b.py")


def test_a_save_reads_the_saved_files_rows_and_no_other(tmp_path: Path) -> None:
    """Nothing on a save's path touches the whole workspace: at 40K files reading every file's row took 0.3 s
    of each save. The statements SQLite runs for a saved, a new and a deleted file name those files."""
    repo = make_repo(tmp_path / "repo", n=30)
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    ws.index()
    every = ws.store.file_rows()
    assert ws.store.file_rows(["pkg/mod3.py", "pkg/none.py", "pkg/mod3.py"]) == {"pkg/mod3.py": every["pkg/mod3.py"]}
    assert ws.store.file_rows([]) == {}
    (repo / "pkg/mod3.py").write_text("def edited():\n    return 3\n")
    (repo / "pkg/added.py").write_text("def added():\n    return 4\n")
    (repo / "pkg/mod4.py").unlink()
    statements: list[str] = []
    ws.store._conn.set_trace_callback(statements.append)
    try:
        report = ws.update_files(["pkg/mod3.py", "pkg/added.py", "pkg/mod4.py"])
    finally:
        ws.store._conn.set_trace_callback(None)
    assert (report.files_indexed, report.files_deleted) == (2, 1)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT") and " FROM FILES" in s.upper()]
    assert reads and all(" WHERE " in s.upper() for s in reads), reads
    rows = ws.store.file_rows()
    assert "pkg/added.py" in rows and "pkg/mod4.py" not in rows and len(rows) == len(every)
    ws.close()


def test_bad_files_are_counted_not_fatal(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "empty.py").write_text("")
    (repo / "comments.py").write_text("# just\n# comments\n")
    (repo / "latin.py").write_bytes("s = 'caf\xe9'\n".encode("cp1252"))
    (repo / "blob.bin.py").write_bytes(b"\x00\x01\x02")
    (repo / "huge.js").write_text("a" * (5 * 1024 * 1024))
    (repo / "broken.py").write_text("def f(:\n  return\n")
    report = Workspace(repo).index()
    assert report.skipped.get("binary") == 1
    assert report.skipped.get("too large") == 1
    assert report.decoded_fallback == 1
    assert report.files_indexed == 4  # empty, comments, latin, broken
    assert report.partition_violations == 0


def test_corrupt_and_old_schema_index_is_rebuilt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    ws = Workspace(repo)
    ws.index()
    path = ws.store.path
    ws.close()
    path.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    store = Store(path)
    assert "corrupt" in store.rebuilt_reason or "unreadable" in store.rebuilt_reason
    store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
    store.close()
    again = Store(path)
    assert "schema version" in again.rebuilt_reason
    again.close()
    assert Workspace(repo).index().files_indexed == 5


def test_kill_during_index_then_resume(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, n=400)
    script = (
        "import sys; from codeloupe.api import Workspace\n"
        "ws = Workspace(sys.argv[1])\n"
        "def progress(p):\n"
        "    if p.done >= 100: print('ready', flush=True)\n"
        "ws.index(progress)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(repo)], stdout=subprocess.PIPE, text=True,
                            env=os.environ.copy())
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ws = Workspace(repo)
    done_before = len(ws.store.file_rows())
    assert 0 < done_before < 400
    report = ws.index()
    assert report.files_unchanged == done_before
    assert report.files_indexed == 400 - done_before
    assert ws.store.query("PRAGMA integrity_check")[0][0] == "ok"


def test_a_script_without_a_main_guard_can_index_a_large_tree(tmp_path: Path) -> None:
    """Worker processes must not re-run the caller's script (the spawn start method would)."""
    repo = make_repo(tmp_path / "repo", n=250)
    script = tmp_path / "plain_script.py"
    script.write_text(
        "import sys\nfrom codeloupe.api import Workspace\n"
        f"report = Workspace({str(repo)!r}).index()\nprint('indexed', report.files_indexed)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines() == ["indexed 250"]


def _rewrite_keeping_stat(path: Path, content: bytes) -> None:
    """New bytes of the same length, with the old mtime put back: only reading the file can tell."""
    before = path.stat()
    assert len(content) == before.st_size
    path.write_bytes(content)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_skip_remembered_under_older_content_rules_is_judged_again(tmp_path: Path) -> None:
    """An index keeps the files it skipped for their content, and does not read them again while they are
    untouched; one judged by an older version's rules (here: a hand-written README that read as generated,
    remembered under that version's rule string) is read again once and indexed."""
    repo = make_repo(tmp_path / "repo", n=1)
    readme = repo / "lib" / "README.md"
    readme.parent.mkdir()
    readme.write_text("# env\n\nThe `data.js` file is updated automatically when the package version is upgrading."
                      " Please do not edit it manually.\n")
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    ws.index()
    row = ws.store.file_rows(["lib/README.md"])["lib/README.md"]
    ws.store.delete_files(["lib/README.md"])
    settings = ws.settings
    earlier_rules = f"{CHUNKER_VERSION}:{settings.max_file_bytes}:{settings.max_line_chars}"
    ws.store.set_skipped([SkippedFile("lib/README.md", row.size, row.mtime, earlier_rules, "generated")])
    again = ws.index()
    assert again.files_indexed == 1 and again.skipped == {}
    assert ws.store.skipped_files() == {}
    assert "lib/README.md" in [f.path for f in ws.search("package version upgrading", mode="docs").files]
    ws.close()


def test_a_no_op_reindex_reads_no_file_not_even_one_skipped_for_its_content(tmp_path: Path) -> None:
    check_no_op_reindex_reads_no_file(tmp_path, {})


def check_no_op_reindex_reads_no_file(tmp_path: Path, overrides: dict[str, str]) -> None:
    """A re-index of an unchanged tree reads no file, skipped ones included (with `overrides`: the store)."""
    repo = make_repo(tmp_path / "repo", n=2)
    binary = b"\x00\x01 not text " * 10
    (repo / "blob.py").write_bytes(binary)
    (repo / "bundle.js").write_text("var a=" + "1+" * 300 + "1;\n")
    ws = Workspace(repo, overrides={"embed_provider": "none", "max_line_chars": 100, **overrides})
    first = ws.index()
    assert first.skipped == {"binary": 1, "minified": 1} and first.files_indexed == 2
    text = b"def rewritten_unread():\n    return 1\n"
    _rewrite_keeping_stat(repo / "blob.py", text.ljust(len(binary), b"#"))
    _rewrite_keeping_stat(repo / "pkg/mod0.py", (repo / "pkg/mod0.py").read_bytes().replace(b"handler_0",
                                                                                             b"handler_X"))
    again = ws.index()
    assert again.skipped == first.skipped and again.files_indexed == 0 and again.files_unchanged == 2
    assert ws.search("rewritten_unread").files == []  # blob.py was not read again
    assert all("handler_X" not in text for _, _, text in chunk_rows(ws, "pkg/mod0.py"))
    # A real change is read; so is an untouched file judged under rules that have changed since.
    os.utime(repo / "blob.py", ns=(time.time_ns(), time.time_ns()))
    assert ws.index().files_indexed == 1
    assert [f.path for f in ws.search("rewritten_unread").files] == ["blob.py"]
    assert set(ws.store.skipped_files()) == {"bundle.js"}
    ws.close()
    loose = Workspace(repo, overrides={"embed_provider": "none", **overrides})
    assert loose.index().files_indexed == 1 and loose.store.skipped_files() == {}
    (repo / "bundle.js").unlink()
    loose.close()


def test_a_stopped_index_forgets_the_skip_of_a_file_it_wrote(tmp_path: Path) -> None:
    """A file skipped for its content (binary), then made text, is indexed by a run stopped (`should_stop`, a
    served workspace closing) before its last file: the index stopped remembering it as skipped with the group
    that wrote it. It was left remembered for good (`stats --skipped` named an indexed file), since the next run
    finds the file current and never reads it again."""
    repo = make_repo(tmp_path / "repo", n=2)
    (repo / "blob.py").write_bytes(b"\x00\x01 not text " * 10)
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    ws.index()
    assert set(ws.store.skipped_files()) == {"blob.py"}
    (repo / "blob.py").write_text("def no_longer_binary():\n    return 1\n")
    for module in repo.glob("pkg/mod*.py"):
        module.write_text(module.read_text() + "\n# changed\n")
    answers = iter([False])  # blob.py (first in the walk's order) is drawn, then the run stops
    with pytest.raises(IndexStopped):
        ws.index(should_stop=lambda: next(answers, True))
    assert "blob.py" in ws.store.file_rows(["blob.py"])
    assert ws.store.skipped_files() == {}
    assert ws.index().files_indexed == 2 and ws.store.skipped_files() == {}
    assert [path for path, _ in ws.skipped_files()] == []
    ws.close()


def test_a_stop_while_the_tree_is_listed_ends_the_run_before_any_file_is_read(tmp_path: Path) -> None:
    """`should_stop` (a served workspace closing) was first asked once the whole tree was listed, seconds at 40K
    files that a closing server waited out: it is now asked as the folders are listed (every few hundred entries),
    and a stop then ends the run with nothing written. Here the listing meets 600 images (skipped by name) before
    the two modules, and the stop comes at the second ask, which was the second module's before."""
    repo = make_repo(tmp_path / "repo", n=2)
    (repo / "assets").mkdir()
    for i in range(600):
        (repo / "assets" / f"icon{i}.png").write_bytes(b"")
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    answers = iter([False])
    with pytest.raises(IndexStopped, match="listing the files"):
        ws.index(should_stop=lambda: next(answers, True))
    assert ws.store.counts()["files"] == 0
    with pytest.raises(IndexStopped):
        ws.walk(should_stop=lambda: True)
    assert ws.index().files_indexed == 2  # the next run does it all
    ws.close()


def test_an_index_without_edges_that_wrote_every_file_is_not_reported_stopped(tmp_path: Path) -> None:
    """A stop asked for once the last file is written (a folder closing as the editor's first index ends) does not
    make a run without edges report itself stopped: it has nothing left to do, and raised `IndexStopped` as if the
    edges it was never to resolve were cut short, losing its report."""
    ws = Workspace(make_repo(tmp_path / "repo"), overrides={"embed_provider": "none"})
    told: list[Progress] = []
    report = ws.index(told.append, edges=False,
                      should_stop=lambda: any(event.done == event.total for event in told))
    assert told[-1].done == told[-1].total == 5  # the stop was asked for before the run returned
    assert report.files_indexed == 5 and ws.store.counts()["files"] == 5
    ws.close()


def test_a_stop_while_the_graph_facts_are_taken_keeps_none_of_them(tmp_path: Path) -> None:
    """The edges after an index (a served workspace's refresh resolves them, a minute at 40K files) asked
    `should_stop` only before they began, so a workspace closing then waited them out. Their facts are now taken
    while it is false: a stop keeps none of them (nor any edge), and the next run takes them all. Here the stop
    comes at the third ask once the files are written: the edges', then the first file's facts', then this one."""
    repo = make_repo(tmp_path / "repo")
    (repo / "app.py").write_text("from pkg.mod0 import handler_0\n\n\ndef main():\n    return handler_0(1)\n")
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    told: list[Progress] = []
    asked_once_written: list[bool] = []

    def stop() -> bool:
        if told and told[-1].done == told[-1].total:
            asked_once_written.append(len(asked_once_written) >= 2)
            return asked_once_written[-1]
        return False

    def stored(table: str) -> int:
        return ws.store.query(f"SELECT count(*) FROM {table}")[0][0]

    with pytest.raises(IndexStopped, match="graph's facts"):
        ws.index(told.append, should_stop=stop)
    assert stored("files") == 6 and stored("graph_facts") == stored("edges") == 0
    assert ws.index().files_indexed == 0
    assert stored("graph_facts") == 6 and stored("edges") > 0
    ws.close()


def test_graph_facts_cut_short_by_a_stop_are_never_taken_as_all_of_them(tmp_path: Path) -> None:
    """A `should_stop` that said stop once and go on when asked again (a caller's own condition, not a latch) cut
    the facts short yet let the run go on: the facts of the files taken so far were kept, the edges resolved and
    marked current, and the files left without facts had no edges until they changed (the next run found the edges
    current). Facts cut short now end the run with `IndexStopped` whatever the next answer, as the files' own
    writes do. Here the stop is said once, at the second file's facts."""
    repo = make_repo(tmp_path / "repo")
    (repo / "app.py").write_text("from pkg.mod0 import handler_0\n\n\ndef main():\n    return handler_0(1)\n")
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    told: list[Progress] = []
    answers = iter([False, False, True])  # once the files are written: the edges', the first file's facts', ...

    def stop() -> bool:
        return bool(told and told[-1].done == told[-1].total and next(answers, False))

    with pytest.raises(IndexStopped, match="graph's facts"):
        ws.index(told.append, should_stop=stop)
    assert ws.store.query("SELECT count(*) FROM graph_facts")[0][0] == 0
    ws.index()
    assert ws.store.query("SELECT count(*) FROM graph_facts")[0][0] == 6
    ws.close()


def test_a_graph_refresh_waiting_for_another_threads_build_stops_when_asked(tmp_path: Path) -> None:
    """A closing workspace's graph refresh waited out a build of the graph another thread held (a search's or a lens's,
    in the background: minutes at 40K files), and the language server's close of the folder with it. It now asks
    `should_stop` while it waits and raises `IndexStopped`, nothing taken; the next refresh builds the graph. Here
    the other build is this test holding the graph's lock (let go within 60 s whatever happens), and the stop comes
    at the second ask."""
    from codeloupe.graph.build import _lock

    repo = make_repo(tmp_path / "repo")
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    ws.index(edges=False)
    held, release = threading.Event(), threading.Event()

    def build_elsewhere() -> None:
        with _lock(ws):
            held.set()
            release.wait(60)

    other = threading.Thread(target=build_elsewhere)
    other.start()
    held.wait()
    asked: list[bool] = []
    try:
        with pytest.raises(IndexStopped, match="another thread's graph build"):
            ws.refresh_graph(lambda: asked.append(True) or len(asked) > 1)
    finally:
        release.set()
        other.join()
    assert ws.store.query("SELECT count(*) FROM graph_facts")[0][0] == 0
    ws.refresh_graph()
    assert ws.store.query("SELECT count(*) FROM graph_facts")[0][0] == 5
    ws.close()

def test_closing_a_workspace_stops_the_graph_build_a_search_started(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A large workspace's graph is built on a thread of its own when a search (or a lens) first needs it, taking
    the edges' facts in worker processes after an index without edges (the editor's first index): minutes at 40K
    files. That build asked nothing: the workspace closed under it, its workers went on with their files and its
    thread on a closed index. Closing the workspace now stops it (as a refresh stops: none of its facts kept, its
    workers killed) before the index is closed."""
    from codeloupe.graph import build

    root = many_small_files(tmp_path / "many", 1500)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    ws.index(edges=False)
    ws.close()
    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setattr(build, "BACKGROUND_START_DELAY_S", 0.0)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    before = set(children_of(os.getpid()))
    ws.search("step value")  # the summary lane asks for the graph: built on its own thread
    deadline = time.monotonic() + 120
    while not (workers := [pid for pid in children_of(os.getpid()) if pid not in before and alive(pid)]):
        assert time.monotonic() < deadline, "no graph facts workers seen"
        time.sleep(0.05)
    ws.close()
    assert not [t for t in threading.enumerate() if t.name == "codeloupe-graph-build" and t.is_alive()]
    assert not [pid for pid in workers if alive(pid)]
    reopened = Workspace(root, overrides={"embed_provider": "none"})
    assert reopened.store.query("SELECT count(*) FROM graph_facts")[0][0] == 0
    reopened.close()


def test_closing_a_workspace_stops_the_graph_build_a_search_does_itself(tmp_path: Path) -> None:
    """A small workspace's graph is built by the first search that needs it, on that search's own thread (a language
    server's request thread), taking the edges' facts in worker processes after an index without edges (the
    editor's first index). The close neither stopped nor waited for that build: a language server leaving by
    os._exit right after left the facts workers' pool to the resource tracker ('leaked semaphore objects' on the
    editor's output, most SIGTERMed starts on a loaded machine), and the search went on over a closed index. Closing
    the workspace now stops it (none of its facts kept, its workers killed), the search raising `IndexStopped`, and
    returns once it has stopped."""
    root = many_small_files(tmp_path / "many", 1500)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    ws.index(edges=False)
    ws.close()
    ws = Workspace(root, overrides={"embed_provider": "none"})
    ws.warm(graph=False)  # the search snapshot built first: the search's only workers are then the graph's facts'
    before = set(children_of(os.getpid()))
    raised: list[BaseException] = []

    def search() -> None:
        try:
            ws.search("step value")
        except BaseException as exc:
            raised.append(exc)

    searching = threading.Thread(target=search)
    searching.start()
    deadline = time.monotonic() + 120
    while not (workers := [pid for pid in children_of(os.getpid()) if pid not in before and alive(pid)]):
        assert time.monotonic() < deadline, "no graph facts workers seen"
        time.sleep(0.05)
    ws.close()
    left = [pid for pid in workers if alive(pid)]
    searching.join(60)
    assert left == []
    assert [type(exc) for exc in raised] == [IndexStopped]
    reopened = Workspace(root, overrides={"embed_provider": "none"})
    assert reopened.store.query("SELECT count(*) FROM graph_facts")[0][0] == 0
    reopened.close()


def test_an_index_without_edges_answers_lexically_and_the_graph_follows(tmp_path: Path) -> None:
    """The editor's first index: chunks stored and searchable before any edge is resolved (minutes at 40K
    files); `refresh_graph` resolves them afterwards, off the query's path."""
    from codeloupe.store.edges import iter_edges

    repo = make_repo(tmp_path / "repo", n=3)
    (repo / "pkg/main.py").write_text("from pkg.mod1 import handler_1\n\n\ndef main():\n    return handler_1(2)\n")
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    assert ws.index(edges=False).files_indexed == 4
    assert list(iter_edges(ws.store)) == []
    assert ws.search("handler_2").files[0].path == "pkg/mod2.py"
    ws.refresh_graph()
    main_id = ws.store.file_rows()["pkg/main.py"].id
    assert any(edge[0] == main_id and edge[2] == "pkg/mod1.py" for edge in iter_edges(ws.store))
    ws.close()


def test_a_refresh_walked_before_saves_keeps_them_and_finds_the_rest(tmp_path: Path) -> None:
    """The language server walks the tree off its writer at start-up and indexes saves meanwhile (at 40K files the
    first save waited ~10 s behind the whole start-up refresh). The index run given that older walk must keep
    what the saves wrote (a new file, a file rewritten through a new inode as editors save) and still find what
    changed while the editor was closed."""
    repo = make_repo(tmp_path / "repo")
    ws = Workspace(repo)
    ws.index()
    (repo / "pkg/mod0.py").write_text("def changed_while_closed():\n    return 0\n")
    (repo / "pkg/mod4.py").unlink()
    found = ws.walk()
    (repo / "pkg/saved_new.py").write_text("def saved_after_the_walk():\n    pass\n")
    (repo / "pkg/mod1.py.new").write_text("def rewritten_by_a_save():\n    pass\n")
    os.replace(repo / "pkg/mod1.py.new", repo / "pkg/mod1.py")
    ws.update_files(["pkg/saved_new.py", "pkg/mod1.py"])

    report = ws.index(found=found)
    assert set(ws.store.file_rows()) == {"pkg/mod0.py", "pkg/mod1.py", "pkg/mod2.py", "pkg/mod3.py",
                                         "pkg/saved_new.py"}
    names = {s.name for s in ws.store.symbol_rows()}
    assert {"changed_while_closed", "rewritten_by_a_save", "saved_after_the_walk"} <= names
    assert not {"handler_0", "handler_1", "handler_4"} & names
    assert (report.files_indexed, report.files_deleted) == (1, 1)


def test_a_saved_source_map_judges_the_file_beside_it_again(tmp_path: Path) -> None:
    """A compiler writes its output, then the map beside it (tsc --watch): the output, indexed when saved alone, is
    a compiled copy once its map names a source the index holds, and leaves the index with the map's save; deleting
    the map makes it a file of its own again, indexed with that save. Until now either waited for the next walk."""
    repo = make_repo(tmp_path / "repo", n=1)
    ws = Workspace(repo)
    ws.index()
    (repo / "lib").mkdir()
    (repo / "lib/mod0.js").write_text("function handler_0(request) { return request }\n")
    ws.update_files(["lib/mod0.js"])
    assert "lib/mod0.js" in ws.store.file_rows()
    (repo / "lib/mod0.js.map").write_text('{"version": 3, "sources": ["../pkg/mod0.py"], "mappings": "AAAA"}')
    report = ws.update_files(["lib/mod0.js.map"])
    assert "lib/mod0.js" not in ws.store.file_rows() and report.skipped.get("compiled copy") == 1
    assert [c.rel_path for c in ws.walk().candidates] == ["pkg/mod0.py"]
    (repo / "lib/mod0.js.map").unlink()
    ws.update_files(["lib/mod0.js.map"])
    assert "lib/mod0.js" in ws.store.file_rows()


def test_a_compiled_copy_whose_map_is_gone_is_indexed_by_the_next_walk(tmp_path: Path) -> None:
    """The index remembers a compiled copy by path (`stats --skipped` lists it); once its map is deleted the next
    index indexes it, though the file itself is untouched (it was a copy for its map, not for its content)."""
    repo = make_repo(tmp_path / "repo", n=1)
    (repo / "lib").mkdir()
    (repo / "lib/mod0.js").write_text("function handler_0(request) { return request }\n")
    (repo / "lib/mod0.js.map").write_text('{"version": 3, "sources": ["../pkg/mod0.py"], "mappings": "AAAA"}')
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    assert ws.index().skipped.get("compiled copy") == 1
    assert ("lib/mod0.js", "compiled copy") in [(s.path, s.reason) for s in ws.skipped_files()]
    (repo / "lib/mod0.js.map").unlink()
    again = ws.index()
    assert again.files_indexed == 1 and "compiled copy" not in again.skipped
    assert "lib/mod0.js" in ws.store.file_rows() and "lib/mod0.js" not in {s.path for s in ws.skipped_files()}
    ws.close()


def test_a_skipped_file_a_save_indexes_or_deletes_is_no_longer_listed_as_skipped(tmp_path: Path) -> None:
    """The editor's save path indexes a compiled copy whose map was deleted, and a file no longer generated, and
    forgets a deleted PNG: `stats --skipped` no longer lists them. The compiled copy, current in the index, was
    listed (and counted) as skipped for good: no later walk judged it again."""
    repo = make_repo(tmp_path / "repo", n=1)
    (repo / "lib").mkdir()
    (repo / "lib/mod0.js").write_text("function handler_0(request) { return request }\n")
    (repo / "lib/mod0.js.map").write_text('{"version": 3, "sources": ["../pkg/mod0.py"], "mappings": "AAAA"}')
    (repo / "pkg/made.py").write_text("# Code generated by hand-gen. DO NOT EDIT.\nVALUE = 1\n")
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n")
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    ws.index()
    assert {"lib/mod0.js", "pkg/made.py", "logo.png"} <= {s.path for s in ws.skipped_files()}
    (repo / "lib/mod0.js.map").unlink()
    (repo / "pkg/made.py").write_text("VALUE = 1\n")
    (repo / "logo.png").unlink()
    ws.update_files(["lib/mod0.js.map", "pkg/made.py", "logo.png"])
    assert {"lib/mod0.js", "pkg/made.py"} <= set(ws.store.file_rows())
    assert not {"lib/mod0.js", "pkg/made.py", "logo.png"} & {s.path for s in ws.skipped_files()}
    assert "compiled copy" not in ws.status().skipped
    ws.close()


def test_a_save_uncounts_a_skipped_file_past_the_thousand_the_index_names(tmp_path: Path) -> None:
    """The index names the first 1,000 files the walk skipped by name or size; a save that deleted one past them, or
    indexed one no longer too large, left the count one too high (`stats` said 1,003 images of 1,002) until the next
    walk: which reason, if any, had counted the path was not kept."""
    repo = make_repo(tmp_path / "repo", n=1)
    (repo / "assets").mkdir()
    for n in range(1003):
        (repo / f"assets/icon{n:04}.png").write_bytes(b"\x89PNG\r\n")
    (repo / "assets/zz_notes.txt").write_text("x" * 2000 + "\n")
    ws = Workspace(repo, overrides={"embed_provider": "none", "max_file_bytes": 1000})
    ws.index()
    assert ws.status().skipped == {"binary": 1003, "too large": 1}
    (repo / "assets/icon1002.png").unlink()
    (repo / "assets/zz_notes.txt").write_text("notes\n")
    ws.update_files(["assets/icon1002.png", "assets/zz_notes.txt"])
    assert "assets/zz_notes.txt" in ws.store.file_rows()
    assert ws.status().skipped == {"binary": 1002}
    (repo / "assets/icon0000.png").unlink()  # a named one, then one past them again: each is uncounted once
    (repo / "assets/icon1001.png").unlink()
    ws.update_files(["assets/icon0000.png", "assets/icon1001.png", "assets/icon1001.png"])
    assert ws.status().skipped == {"binary": 1000}
    named = [s.path for s in ws.skipped_files()]  # the first 1,000 by path, as the walk names them
    assert len(named) == 1000 and "assets/icon0000.png" not in named and named[-1] == "assets/icon1000.png"
    (repo / "assets/icon1000.png").unlink()
    ws.update_files(["assets/icon1000.png"])
    assert ws.status().skipped == {"binary": 999}
    ws.index()  # the next walk counts what the saves left
    assert ws.status().skipped == {"binary": 999} and len(ws.skipped_files()) == 999
    ws.close()


def test_a_save_that_creates_a_file_skipped_by_name_counts_it_as_the_next_walk_would(tmp_path: Path) -> None:
    """A save that created a file the walk skips by name (an image) counted it nowhere until the next walk: `stats`
    said 1,003 images of 1,005. A save now counts it and names it as the walk does (the first 1,000 by path), once
    however often it is saved; one in a folder the walk skips, or ignored, it leaves to the folder's count."""
    repo = make_repo(tmp_path / "repo", n=1)
    (repo / "assets").mkdir()
    for n in range(1003):
        (repo / f"assets/icon{n:04}.png").write_bytes(b"\x89PNG\r\n")
    (repo / ".gitignore").write_text("scratch.txt\n")
    (repo / "node_modules").mkdir()
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    ws.index()
    assert ws.status().skipped["binary"] == 1003
    for rel in ("a_logo.png", "assets/zz_new.png", "node_modules/pic.png", "scratch.txt"):
        (repo / rel).write_bytes(b"\x89PNG\r\n")
    ws.update_files(["a_logo.png", "assets/zz_new.png", "node_modules/pic.png", "scratch.txt"])
    ws.update_files(["a_logo.png", "assets/zz_new.png"])  # saved again: counted once
    saved = ws.status().skipped
    named = ws.skipped_files()
    assert saved["binary"] == 1005 and "a_logo.png" in {s.path for s in named}
    ws.index()  # the walk counts and names the same
    assert ws.status().skipped == saved and ws.skipped_files() == named
    (repo / "a_logo.png").unlink()
    (repo / "assets/zz_new.png").unlink()
    ws.update_files(["a_logo.png", "assets/zz_new.png"])
    assert ws.status().skipped["binary"] == 1003
    ws.close()


def test_a_save_that_finds_a_file_skipped_for_its_content_remembers_it_as_a_walk_does(tmp_path: Path) -> None:
    """A save that created a file skipped for its content (binary bytes in a .py) or made an indexed one so counted
    and named it nowhere until the next walk (`stats` said no file skipped); it is remembered as the walk remembers
    it, and forgotten once a save indexes it."""
    repo = make_repo(tmp_path / "repo", n=1)
    ws = Workspace(repo, overrides={"embed_provider": "none"})
    ws.index()
    (repo / "pkg/blob.py").write_bytes(b"\x00\x01binary\x00")
    (repo / "pkg/mod0.py").write_bytes(b"\x00\x02binary\x00")
    ws.update_files(["pkg/blob.py", "pkg/mod0.py"])
    saved = ws.status().skipped
    named = ws.skipped_files()
    assert saved == {"binary": 2} and {s.path for s in named} == {"pkg/blob.py", "pkg/mod0.py"}
    ws.index()  # the walk remembers the same
    assert ws.status().skipped == saved and ws.skipped_files() == named
    (repo / "pkg/blob.py").write_text("BLOB = 1\n")
    ws.update_files(["pkg/blob.py"])
    assert ws.status().skipped == {"binary": 1} and "pkg/blob.py" in ws.store.file_rows()
    ws.close()


def test_a_save_that_finds_a_file_once_skipped_for_its_content_now_skipped_by_size_counts_it_once(
        tmp_path: Path) -> None:
    """A file remembered as skipped for its content (binary bytes in a .py) that a save found skipped by its size
    was counted twice until the next walk (`stats`: 1 binary, 1 too large, for one file): the save counted it
    among the walk's skips and kept the content's record. It forgets that record, as the walk does."""
    repo = make_repo(tmp_path / "repo", n=1)
    ws = Workspace(repo, overrides={"embed_provider": "none", "max_file_bytes": 4096})
    ws.index()
    (repo / "pkg/blob.py").write_bytes(b"\x00\x01binary\x00")
    ws.update_files(["pkg/blob.py"])
    assert ws.status().skipped == {"binary": 1}
    (repo / "pkg/blob.py").write_text("BLOB = 1\n" * 1000)
    ws.update_files(["pkg/blob.py"])
    saved = ws.status().skipped
    ws.index()  # the walk counts it once
    assert saved == ws.status().skipped and sum(saved.values()) == 1
    ws.close()


def test_a_save_that_finds_a_file_once_too_large_now_skipped_for_its_content_counts_it_once(tmp_path: Path) -> None:
    """A file the walk skipped by its size that a save found skipped for its content (rewritten small, with binary
    bytes) was counted under both until the next walk: the save remembered its content's skip and left it among
    the walk's skips. It leaves them, as the walk does."""
    repo = make_repo(tmp_path / "repo", n=1)
    (repo / "pkg/blob.py").write_text("BLOB = 1\n" * 1000)
    ws = Workspace(repo, overrides={"embed_provider": "none", "max_file_bytes": 4096})
    ws.index()
    assert ws.status().skipped == {"too large": 1}
    (repo / "pkg/blob.py").write_bytes(b"\x00\x01binary\x00")
    ws.update_files(["pkg/blob.py"])
    saved = ws.status().skipped
    ws.index()  # the walk counts it once
    assert saved == ws.status().skipped == {"binary": 1}
    ws.close()


def test_a_changed_chunk_budget_chunks_unchanged_files_again(tmp_path: Path) -> None:
    """`chunk_budget` changed (the settings, an editor's `codeloupe.chunkBudget`, CODELOUPE_CHUNK_BUDGET) left every
    unchanged file in the chunks of the old budget: the run took each as current by its size and time. The next run
    under another budget chunks every file again, and one under the same budget none."""
    from codeloupe.api import load_settings

    body = "".join(f"def step_{i}(total):\n    return total + {i} * {i}\n\n\n" for i in range(12))
    (tmp_path / "steps.py").write_text(body, encoding="utf-8")

    def chunks_under(budget: int) -> tuple[int, int]:
        ws = Workspace(tmp_path, load_settings(None, {"chunk_budget": budget, "embed_provider": "none"}))
        try:
            report = ws.index()
            file_id = ws.store.file_rows(["steps.py"])["steps.py"].id
            return len(ws.store.chunk_table([file_id]).file_ids), report.files_unchanged
        finally:
            ws.close()

    whole, _ = chunks_under(4000)
    cut, unchanged = chunks_under(100)
    assert whole == 1 and cut > 1 and unchanged == 0
    assert chunks_under(100) == (cut, 1)
