"""A lexical index built from parts counted apart (in worker processes) is the index of one pass, to the bit."""

from __future__ import annotations

import email
import json
import logging
import os
import shutil
import threading
import time
import zlib
from collections.abc import Callable
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest

from codeloupe import parallel
from codeloupe.api import IndexStopped, Workspace
from codeloupe.lanes.lexical import BM25Index, TermCounts, count_chunk_terms, count_terms
from codeloupe.lanes.symbols import SymbolIndex
from codeloupe.types import Progress
from processes import alive

search = import_module("codeloupe.search")  # the module (the package's `search` is its entry function)
index_module = import_module("codeloupe.index")


def _same(a: BM25Index, b: BM25Index) -> None:
    assert list(a.vocab) == list(b.vocab)  # the same columns, in the same order
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(a._matrix, name), getattr(b._matrix, name))
    np.testing.assert_array_equal(a._counts.data, b._counts.data)
    assert (a.n_docs, a.avg_len) == (b.n_docs, b.avg_len)


@pytest.mark.parametrize("cuts", [[0, 300], [0, 1, 2, 150, 299, 300], [0, 0, 40, 40, 300]])
def test_parts_counted_apart_make_the_index_of_one_pass(cuts: list[int]) -> None:
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(200)]
    documents = [[str(w) for w in rng.choice(words, rng.integers(0, 25))] for _ in range(300)]  # some empty
    parts = [count_terms(documents[a:b]) for a, b in zip(cuts, cuts[1:])]
    _same(BM25Index.from_counts(iter(parts)), BM25Index(documents))


def test_a_workspace_tokenised_in_worker_processes_gets_the_index_of_one_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        lexical_workspace: Callable[[Path], Workspace]) -> None:
    root = tmp_path / "repo"
    for i in range(12):
        (root / f"pkg{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"pkg{i % 3}" / f"mod{i}.py").write_text(
            "".join(f"def handler_{i}_{j}(request, retries={j}):\n    return parse_header{i % 4}(request)\n\n\n"
                    for j in range(6)))
    ws = lexical_workspace(root)
    one_pass = ws.searcher().snapshot().bm25
    saved = ws.store.path.with_name(ws.store.path.name + ".bm25.npz")
    ws.close()
    saved.unlink()
    # Every chunk its own part, and a pool of two workers for any number of parts: the workers' path on a
    # small tree (a pool that fails falls back to this process with a warning, which would fail the test).
    monkeypatch.setattr(search, "_CHUNKS_PER_PART", 1)
    monkeypatch.setattr(parallel, "POOL_MIN_ITEMS", 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    caplog.set_level(logging.WARNING, logger="codeloupe.parallel")
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("CODELOUPE_TEST_PIDS", str(pids))
    monkeypatch.setattr(search, "count_chunk_terms", _counted_noting_where)
    again = Workspace(root, overrides={"embed_provider": "none"})
    with again.store.transaction() as conn:  # an index written before counts were kept: every chunk tokenised
        conn.execute("DELETE FROM file_terms")
    try:
        _same(again.searcher().snapshot().bm25, one_pass)
    finally:
        again.close()
    assert saved.is_file() and not caplog.records
    assert {p.name for p in pids.iterdir()} - {str(os.getpid())}  # counted in other processes, not here


def _counted_noting_where(chunks: list[tuple[list[str], str, str]]) -> TermCounts:
    """`count_chunk_terms`, leaving the id of the process that ran it in $CODELOUPE_TEST_PIDS."""
    (Path(os.environ["CODELOUPE_TEST_PIDS"]) / str(os.getpid())).touch()
    return count_chunk_terms(chunks)


def _tree(root: Path) -> None:
    for i in range(9):
        (root / f"pkg{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"pkg{i % 3}" / f"mod{i}.py").write_text(
            "".join(f"def handler_{i}_{j}(request, retries={j}):\n    return parse_header{i % 4}(request)\n\n\n"
                    for j in range(5 + i)))
    (root / "README.md").write_text("# Handlers\n\nEach handler parses a header.\n")
    (root / "empty.py").write_text("")


def _rebuilt(root: Path, change: Callable[[Workspace], None] = lambda ws: None) -> BM25Index:
    """The lexical index a new process builds (nothing saved beside the store), after `change` to the store."""
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        ws.store.path.with_name(ws.store.path.name + ".bm25.npz").unlink(missing_ok=True)
        for saved in ws.store.path.parent.glob("*.snapshot*"):
            saved.unlink()
        change(ws)
        return ws.searcher().snapshot().bm25
    finally:
        ws.close()


def _kept(ws: Workspace) -> dict[str, int]:
    return {path: file_id for file_id, path in ws.store.query(
        "SELECT files.id, path FROM files JOIN file_terms ON file_terms.file_id = files.id")}


@pytest.mark.parametrize("joined", ["here", "in workers", "in workers that cannot read the index"])
def test_the_index_from_the_counts_kept_at_indexing_is_the_index_of_tokenising_every_chunk(
        joined: str, tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "repo"
    _tree(root)
    ws = lexical_workspace(root)
    kept = _kept(ws)
    assert len(kept) == ws.store.counts()["files"] == 11  # counted by indexing, the empty file's (none) too
    ws.close()
    pids = tmp_path / "pids"
    pids.mkdir()
    if joined != "here":  # a pool of two for any tree: each task a file or two
        monkeypatch.setattr(search, "_KEPT_POOL_MIN_CHUNKS", 1)
        monkeypatch.setattr(os, "cpu_count", lambda: 2)
        monkeypatch.setenv("CODELOUPE_TEST_PIDS", str(pids))
        monkeypatch.setattr(search, "_joined_kept", _joined_noting_where)
        caplog.set_level(logging.WARNING, logger="codeloupe.parallel")
    if joined == "in workers that cannot read the index":  # each task's read fails: done again here
        monkeypatch.setattr(search, "_joined_kept", _joined_from_a_missing_index)

    from_kept = _rebuilt(root)
    # Every task read its rows where it ran, unless it could not (then done again here).
    assert (pids / "a-task-gave-none").exists() == (joined == "in workers that cannot read the index")

    # Rows that cannot be used are counted again: damaged, of another tokeniser, one chunk short, gone.
    def damage(ws: Workspace) -> None:
        with ws.store.transaction() as conn:
            conn.execute("UPDATE file_terms SET columns = x'01' WHERE file_id = ?", (kept["pkg0/mod0.py"],))
            conn.execute("UPDATE file_terms SET counts = 'text' WHERE file_id = ?", (kept["pkg1/mod1.py"],))
            conn.execute("UPDATE file_terms SET version = version - 1 WHERE file_id = ?", (kept["pkg2/mod2.py"],))
            conn.execute("UPDATE file_terms SET ends = substr(ends, 1, length(ends) - 4) WHERE file_id = ?",
                         (kept["pkg0/mod3.py"],))
            conn.execute("DELETE FROM file_terms WHERE file_id = ?", (kept["README.md"],))
            assert conn.execute("SELECT count(*) FROM file_terms").fetchone()[0] == 10  # the rows were there
    damaged = _rebuilt(root, damage)

    def forget_all(ws: Workspace) -> None:
        with ws.store.transaction() as conn:
            conn.execute("DELETE FROM file_terms")

    tokenised = _rebuilt(root, forget_all)
    _same(from_kept, tokenised)
    _same(damaged, tokenised)
    if joined != "here":  # joined in other processes (a pool that failed would have warned)
        assert {p.name for p in pids.iterdir() if p.name.isdigit()} - {str(os.getpid())} and not caplog.records
        assert (pids / "read-by-the-task").exists()  # each task read its rows itself


_JOINED_KEPT = search._joined_kept


def _joined_from_a_missing_index(rows_path: Path | None, files: list) -> object:
    """`_joined_noting_where`, each task sent to read its rows from an index that is not there (a worker
    that cannot open the index). Passed to the workers by name, so it holds under spawn as under fork."""
    return _joined_noting_where(None if rows_path is None else rows_path.with_name("missing.sqlite"), files)


def _joined_noting_where(rows_path: Path | None, files: list) -> object:
    """`search._joined_kept`, leaving the id of the process that ran it in $CODELOUPE_TEST_PIDS (and the
    path it was to read its rows from, when it read them itself)."""
    (Path(os.environ["CODELOUPE_TEST_PIDS"]) / str(os.getpid())).touch()
    if rows_path is not None:
        (Path(os.environ["CODELOUPE_TEST_PIDS"]) / "read-by-the-task").touch()
    joined = _JOINED_KEPT(rows_path, files)
    if joined is None:
        (Path(os.environ["CODELOUPE_TEST_PIDS"]) / "a-task-gave-none").touch()
    return joined


def test_the_kept_counts_are_what_the_index_is_built_from(tmp_path: Path,
                                                           lexical_workspace: Callable[[Path], Workspace]) -> None:
    root = tmp_path / "repo"
    _tree(root)
    ws = lexical_workspace(root)
    file_id = _kept(ws)["pkg1/mod4.py"]
    counted = ws.store.kept_term_counts([file_id])[file_id].unpacked()
    ws.close()
    counted.terms[counted.terms.index("handler")] = "planted"  # a term no file holds, in place of one

    def plant(ws: Workspace) -> None:
        with ws.store.transaction() as conn:
            conn.execute("UPDATE file_terms SET terms = ? WHERE file_id = ?", (counted.kept().terms, file_id))
    before = _rebuilt(root).term_stats(["handler"]).df["handler"]
    chunks = len(counted.ends)
    assert chunks and before > chunks
    assert _rebuilt(root, plant).term_stats(["planted", "handler"]).df == {"planted": chunks,
                                                                          "handler": before - chunks}


def test_a_deleted_file_takes_its_counts_with_it(tmp_path: Path,
                                                 lexical_workspace: Callable[[Path], Workspace]) -> None:
    root = tmp_path / "repo"
    _tree(root)
    ws = lexical_workspace(root)
    (root / "pkg0" / "mod0.py").unlink()
    (root / "pkg1" / "mod1.py").write_text("def changed():\n    return 1\n")
    ws.index()
    assert ws.store.query("SELECT count(*) FROM file_terms")[0][0] == ws.store.counts()["files"] == 10
    assert "pkg0/mod0.py" not in _kept(ws)


@pytest.mark.parametrize(("distinct", "top"), [(5, 3), (70_000, 3), (5, 70_000), (0, 0)])
def test_counts_packed_read_back_as_they_were(distinct: int, top: int) -> None:
    rng = np.random.default_rng(distinct + top)
    words = [f"t{i}" for i in range(distinct)]
    documents = [list(rng.choice(words, 40)) for _ in range(3)] if distinct else [[], []]
    if top:
        documents.append(["many"] * top)
    counted = count_terms(documents)
    kept = counted.kept()
    again = TermCounts.unpacked(kept.terms, kept.columns, kept.counts, kept.ends)
    assert again is not None and again.terms == counted.terms
    for name in ("columns", "counts", "ends"):
        assert getattr(again, name) == getattr(counted, name)


@pytest.mark.parametrize("damage", [
    lambda p: (zlib.compress(b"\xff\xfe"), *p[1:]),  # terms not UTF-8
    lambda p: (b"\xff\xfe", *p[1:]),  # terms not deflated
    lambda p: (p[0], p[1], p[2] + b"\0", p[3]),  # bytes after the counts' deflated stream
    lambda p: (p[0], p[1], p[2][:-1], p[3]),  # the counts' stream cut short
    lambda p: (p[0], p[1][:-1], *p[2:]),  # a column cut short
    lambda p: (p[0], p[1], zlib.compress(bytes(12)), p[3]),  # counts that are not a whole number per entry
    lambda p: (p[0], p[1], p[2], p[3][4:] + p[3][:4]),  # ends out of order
    lambda p: (zlib.compress(b"one"), *p[1:]),  # columns beyond the terms
    lambda p: (zlib.compress(bytes(1 << 20)), *p[1:]),  # inflating to more than any five entries' terms
])
def test_damaged_packed_counts_read_as_none(damage: Callable[[tuple], tuple]) -> None:
    kept = count_terms([["a", "b", "a"], ["c"], ["b", "d"]]).kept()
    packed = (kept.terms, kept.columns, kept.counts, kept.ends)
    assert TermCounts.unpacked(*packed) is not None
    assert TermCounts.unpacked(*damage(packed)) is None


def _written_in_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tree whose first index writes a file a group and joins its kept counts a part every few chunks in a
    worker (`JoinedAsWritten`), each join leaving the id of the process that ran it in the returned folder,
    and a file "joined" once a join is done."""
    monkeypatch.setattr(search, "_JOINED_AS_WRITTEN_CHUNKS", 4)
    monkeypatch.setattr(index_module, "WRITE_BATCH", 1)
    monkeypatch.setattr(index_module, "PROGRESS_EVERY", 1)
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("CODELOUPE_TEST_PIDS", str(pids))
    monkeypatch.setattr(search, "_joined_kept", _joined_then_noted)
    return pids


def _joined_then_noted(rows_path: Path | None, files: list) -> object:
    """`_joined_noting_where`, then a file "joined" left beside the ids."""
    joined = _joined_noting_where(rows_path, files)
    (Path(os.environ["CODELOUPE_TEST_PIDS"]) / "joined").touch()
    return joined


# The graph's edges after the run, in a process with one thread (the worker forked); or left to later, in a
# process with another thread running (the worker spawned), as in the language server.
@pytest.mark.parametrize("edges", [True, False])
def test_a_first_index_joins_its_counts_as_it_writes_them_into_the_index_of_one_pass(
        edges: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "repo"
    _tree(root)
    pids = _written_in_parts(tmp_path, monkeypatch)
    caplog.set_level(logging.WARNING)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    if not edges:
        other.start()
    try:
        ws.index(edges=edges)
        first = ws.searcher().snapshot().bm25
    finally:
        done.set()
        ws.close()
    # Every part was joined by the worker, and the build joined nothing itself: every file was in a part.
    joined_by = {p.name for p in pids.iterdir() if p.name.isdigit()}
    assert joined_by and str(os.getpid()) not in joined_by
    _same(first, _rebuilt(root))
    assert not caplog.records


@pytest.mark.parametrize("change", ["written again", "deleted"])
def test_a_file_changed_after_its_part_was_joined_leaves_the_part_out(
        change: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "repo"
    _tree(root)
    pids = _written_in_parts(tmp_path, monkeypatch)
    monkeypatch.setattr(search, "_symbols_of_part", _gathered_noting_where)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    changed: list[str] = []

    def meanwhile(event: Progress) -> None:
        """Once the run has written its last file and a part is joined, the second file written with chunks
        (in the first part) is saved again, or deleted, before the run ends."""
        if event.done < event.total or changed:
            return
        for _ in range(6000):  # the worker joins the first part within seconds
            if (pids / "joined").exists():
                break
            time.sleep(0.01)
        second = ws.store.query("SELECT path FROM files WHERE id IN (SELECT file_id FROM chunks) ORDER BY id"
                                " LIMIT 1 OFFSET 1")[0][0]
        if change == "deleted":
            (root / second).unlink()
        else:
            (root / second).write_text("def written_again(header):\n    return parse_header9(header)\n")
        ws.update_files([second])
        changed.append(second)

    caplog.set_level(logging.INFO, logger="codeloupe.search")
    try:
        ws.index(meanwhile)
        snapshot = ws.searcher().snapshot()
        first, symbols = snapshot.bm25, snapshot.symbols
        whole = SymbolIndex.of_names(snapshot.table, ws.store.iter_symbol_names())
    finally:
        ws.close()
    # The parts were joined (a part that took the changed file's place would make another index).
    assert changed and {p.name for p in pids.iterdir() if p.name.isdigit()} - {str(os.getpid())}
    assert (changed[0] in _kept_paths(root)) == (change == "written again")
    _same(first, _rebuilt(root))
    # The symbols gathered as written no longer fit the table: read from the store whole, as before.
    assert "do not fit its chunk table" in caplog.text
    _same_symbols(symbols, whole)
    # Nor were the run's last files' symbols gathered here first: the files written no longer are the table's.
    assert not (pids / f"gathered-{os.getpid()}").exists()


def test_a_first_index_gathers_its_symbols_as_it_writes_them_into_the_table_of_one_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Real code (two packages of the standard library, names defined again and again): the first snapshot's
    symbol table, put together from the parts gathered as the files were written (in the worker, the last
    part here), is the table read from the store whole, map for map and key for key."""
    root = tmp_path / "repo"
    for package in (json, email):
        shutil.copytree(Path(package.__file__).parent, root / package.__name__,
                        ignore=shutil.ignore_patterns("__pycache__"))
    pids = _written_in_parts(tmp_path, monkeypatch)
    monkeypatch.setattr(search, "_JOINED_AS_WRITTEN_CHUNKS", 25)
    monkeypatch.setattr(search, "_symbols_of_part", _gathered_noting_where)
    caplog.set_level(logging.INFO, logger="codeloupe.search")
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        ws.index(edges=False)
        snapshot = ws.searcher().snapshot()
        whole = SymbolIndex.of_names(snapshot.table, ws.store.iter_symbol_names())
        _same(snapshot.bm25, _rebuilt_bm25_here(ws))
    finally:
        ws.close()
    assert len(whole.by_name.arrays("n")["n_rows"]) > 500 and len(snapshot.table.ids) > 100
    _same_symbols(snapshot.symbols, whole)
    # Gathered in the worker, and the last part here; none was read again.
    gathered_by = {p.name.removeprefix("gathered-") for p in pids.glob("gathered-*")}
    assert str(os.getpid()) in gathered_by and len(gathered_by) > 1
    assert "symbols" not in caplog.text


def _rebuilt_bm25_here(ws: Workspace) -> BM25Index:
    """The lexical index of `ws`'s store, built again from it (no part joined as written)."""
    return search._lexical_index(ws.store, ws.store.chunk_table(), list(ws.store.file_rows().values()))


def _gathered_noting_where(path: Path, file_ids: list[int]) -> object:
    """`search._symbols_of_part`, leaving "gathered-PID" in $CODELOUPE_TEST_PIDS for the process that ran it."""
    (Path(os.environ["CODELOUPE_TEST_PIDS"]) / f"gathered-{os.getpid()}").touch()
    return _SYMBOLS_OF_PART(path, file_ids)


_SYMBOLS_OF_PART = search._symbols_of_part


def _same_symbols(a: SymbolIndex, b: SymbolIndex) -> None:
    """The same name maps: the same keys in the same order, each with the same rows in the same order."""
    saved_a, saved_b = a.arrays(), b.arrays()
    assert saved_a.keys() == saved_b.keys()
    for name, array in saved_a.items():
        np.testing.assert_array_equal(array, saved_b[name], err_msg=name)
        assert array.dtype == saved_b[name].dtype, name


def _kept_paths(root: Path) -> set[str]:
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        return set(_kept(ws))
    finally:
        ws.close()


def test_a_worker_that_dies_while_joining_as_written_leaves_the_join_to_the_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "repo"
    _tree(root)
    _written_in_parts(tmp_path, monkeypatch)
    monkeypatch.setenv("CODELOUPE_TEST_PARENT", str(os.getpid()))
    monkeypatch.setattr(search, "_joined_kept", _joined_unless_a_worker)
    caplog.set_level(logging.WARNING, logger="codeloupe.search")
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        report = ws.index()  # the run goes on without its parts
        first = ws.searcher().snapshot().bm25
    finally:
        ws.close()
    assert report.files_indexed == 11
    assert "joined as written were not there" in caplog.text  # said, then joined by the build
    _same(first, _rebuilt(root))


def _joined_unless_a_worker(rows_path: Path | None, files: list) -> object:
    """`search._joined_kept` in the test's own process; a worker running it dies at once."""
    if os.getpid() != int(os.environ["CODELOUPE_TEST_PARENT"]):
        os._exit(1)
    return _JOINED_KEPT(rows_path, files)


def _joined_once_released(rows_path: Path | None, files: list) -> object:
    """`_joined_noting_where`, once a file "release" is in the ids' folder (at most a minute); a file "held-PID"
    there says which process holds a part meanwhile."""
    release = Path(os.environ["CODELOUPE_TEST_PIDS"]) / "release"
    (release.parent / f"held-{os.getpid()}").touch()
    for _ in range(600):
        if release.exists():
            break
        time.sleep(0.1)
    return _joined_noting_where(rows_path, files)


def test_a_first_index_stopped_midway_kills_the_worker_joining_its_counts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A served workspace closing stops its first index (`should_stop`): the part being joined is abandoned and
    its worker killed, not waited for."""
    asked = iter(range(1_000))
    _stops_without_waiting_for_its_parts(tmp_path, monkeypatch, lambda _: None, lambda: next(asked) >= 8,
                                         edges=False)


def test_a_first_index_stopped_once_its_last_file_is_written_waits_for_no_part(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A served workspace (its index resolves the edges after the run: the parts are waited for then) closing as
    the run's last file is written: the parts still being joined are abandoned, not waited for."""
    closing = threading.Event()

    def written(event: Progress) -> None:
        if event.done == event.total:
            closing.set()

    _stops_without_waiting_for_its_parts(tmp_path, monkeypatch, written, closing.is_set, edges=True)


def _stops_without_waiting_for_its_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         progress: Callable[[Progress], None], should_stop: Callable[[], bool], *,
                                         edges: bool) -> None:
    """A first index whose parts are each held a minute in their worker, stopped by `should_stop`, raises
    `IndexStopped` without waiting for them."""
    root = tmp_path / "repo"
    _tree(root)
    pids = _written_in_parts(tmp_path, monkeypatch)
    monkeypatch.setattr(search, "_joined_kept", _joined_once_released)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    stopped: list[BaseException] = []

    def stop() -> bool:
        """`should_stop`, once a worker holds a part (waited for: a part must be under way when the stop comes)."""
        if not should_stop():
            return False
        for _ in range(300):
            if any(pids.glob("held-*")):
                return True
            time.sleep(0.1)
        return True

    def index() -> None:
        try:
            ws.index(progress, edges=edges, should_stop=stop)
        except IndexStopped as exc:
            stopped.append(exc)

    run = threading.Thread(target=index)
    run.start()
    try:
        run.join(30)  # a worker waited for would hold the run until released, a minute on
        assert not run.is_alive() and stopped
        # The process that held a part is gone, not left to finish it (let go without waiting would pass above).
        held = [int(p.name.removeprefix("held-")) for p in pids.glob("held-*")]
        assert held and not [pid for pid in held if _running(pid)]
    finally:
        (pids / "release").touch()
        run.join()
        ws.close()


def test_a_searcher_let_go_during_a_first_index_leaves_no_worker_joining_its_counts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The searcher a first index joins its counts for is let go while the run ends (a search across many
    repositories letting go of the oldest snapshots, or the workspace closing): its worker goes with the run."""
    root = tmp_path / "repo"
    _tree(root)
    pids = _written_in_parts(tmp_path, monkeypatch)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    held = ws.searcher()  # a search still holding it

    def written(event: Progress) -> None:
        if event.done == event.total:
            for _ in range(6000):  # the worker joins the first part within seconds
                if (pids / "joined").exists():
                    break
                time.sleep(0.01)
            ws.release_searcher()

    try:
        ws.index(written, edges=False)
        workers = {int(p.name) for p in pids.iterdir() if p.name.isdigit()} - {os.getpid()}
        assert workers and not any(alive(pid) for pid in workers)
    finally:
        held.close()
        ws.close()


def _running(pid: int) -> bool:
    """Whether process `pid` is alive (a zombie not yet reaped is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
