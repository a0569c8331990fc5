"""A lexical index built from parts counted apart (in worker processes) is the index of one pass, to the bit."""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Callable
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest

from codeloupe import parallel
from codeloupe.api import Workspace
from codeloupe.lanes.lexical import BM25Index, IndexedCounts, count_terms

search = import_module("codeloupe.search")  # the module (the package's `search` is its entry function)


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
    again = Workspace(root, overrides={"embed_provider": "none"})
    with again.store.transaction() as conn:  # an index written before counts were kept: every chunk tokenised
        conn.execute("DELETE FROM file_terms")
    try:
        _same(again.searcher().snapshot().bm25, one_pass)
    finally:
        again.close()
    assert saved.is_file() and not caplog.records


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
        for saved in ws.store.path.parent.glob("*.npz"):
            saved.unlink()
        change(ws)
        return ws.searcher().snapshot().bm25
    finally:
        ws.close()


def _same_columns(a: BM25Index, b: BM25Index) -> None:
    """The same terms, each column holding the same entries to the bit (the columns may come in another
    order: an index joined from kept counts numbers its terms by their ids, tokenising by first appearance)."""
    assert set(a.vocab) == set(b.vocab) and len(a.vocab) == len(b.vocab)
    order = [b.vocab[term] for term in a.vocab]
    for mine, theirs in ((a._matrix, b._matrix[:, order]), (a._counts, b._counts[:, order])):
        for name in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(getattr(mine, name), getattr(theirs, name))
    assert (a.n_docs, a.avg_len) == (b.n_docs, b.avg_len)
    np.testing.assert_array_equal(a._idf, b._idf[order])


def _kept(ws: Workspace) -> dict[str, int]:
    return {path: file_id for file_id, path in ws.store.query(
        "SELECT files.id, path FROM files JOIN file_terms ON file_terms.file_id = files.id")}


def _forget_all(ws: Workspace) -> None:
    with ws.store.transaction() as conn:
        conn.execute("DELETE FROM file_terms")


def test_the_index_from_the_counts_kept_at_indexing_is_the_index_of_tokenising_every_chunk(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    root = tmp_path / "repo"
    _tree(root)
    ws = lexical_workspace(root)
    kept = _kept(ws)
    assert len(kept) == ws.store.counts()["files"] == 11  # counted by indexing, the empty file's (none) too
    ws.close()
    joined = _rebuilt(root)

    # Rows that cannot be used are counted again: damaged, of another tokeniser, one chunk short, naming a term
    # the table lacks, gone.
    def damage(ws: Workspace) -> None:
        with ws.store.transaction() as conn:
            conn.execute("UPDATE file_terms SET term_ids = x'01' WHERE file_id = ?", (kept["pkg0/mod0.py"],))
            conn.execute("UPDATE file_terms SET counts = 'text' WHERE file_id = ?", (kept["pkg1/mod1.py"],))
            conn.execute("UPDATE file_terms SET version = version - 1 WHERE file_id = ?", (kept["pkg2/mod2.py"],))
            conn.execute("UPDATE file_terms SET ends = substr(ends, 1, length(ends) - 4) WHERE file_id = ?",
                         (kept["pkg0/mod3.py"],))
            conn.execute("UPDATE file_terms SET term_ids = ? WHERE file_id = ?",
                         (_ids_replaced(ws, kept["pkg1/mod4.py"], {}, 10**6).packed()[0], kept["pkg1/mod4.py"]))
            conn.execute("DELETE FROM file_terms WHERE file_id = ?", (kept["README.md"],))
    damaged = _rebuilt(root, damage)
    tokenised = _rebuilt(root, _forget_all)  # last: the rows are gone for good
    _same_columns(joined, tokenised)
    _same_columns(damaged, tokenised)
    query = ["handler", "request", "pars", "header", "retri", "mod4", "pkg1"]
    np.testing.assert_array_equal(joined.scores(query), tokenised.scores(query))


def _ids_replaced(ws: Workspace, file_id: int, replaced: dict[str, int], default: int = -1):
    """The file's kept counts with the ids of the terms `replaced` names made theirs there (all of them
    `default` when it is not -1)."""
    counted = ws.store.file_term_counts([file_id])[file_id]
    names = ws.store.term_names()
    ids = counted.term_ids.copy()
    for at, term_id in enumerate(ids.tolist()):
        ids[at] = default if default >= 0 else replaced.get(names[term_id], term_id)
    counted.term_ids = ids
    return counted


def test_the_kept_counts_are_what_the_index_is_built_from(tmp_path: Path,
                                                           lexical_workspace: Callable[[Path], Workspace]) -> None:
    root = tmp_path / "repo"
    _tree(root)
    ws = lexical_workspace(root)
    file_id = _kept(ws)["pkg1/mod4.py"]
    chunks = len(ws.store.file_term_counts([file_id])[file_id].ends)
    ws.close()

    def plant(ws: Workspace) -> None:  # a term no file holds, in place of one in every chunk of one file
        with ws.store.transaction() as conn:
            planted = conn.execute("INSERT INTO terms (term) VALUES ('planted')").lastrowid
        counted = _ids_replaced(ws, file_id, {"handler": planted})
        with ws.store.transaction() as conn:
            conn.execute("UPDATE file_terms SET term_ids = ? WHERE file_id = ?", (counted.packed()[0], file_id))
    before = _rebuilt(root).term_stats(["handler"]).df["handler"]
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


def test_a_term_id_given_in_a_transaction_that_failed_is_forgotten(tmp_path: Path) -> None:
    from array import array

    from codeloupe.lanes.lexical import TermCounts, count_chunk_terms
    from codeloupe.store import Store
    from codeloupe.types import Chunk, ChunkedFile, FileSkeleton

    store = Store(tmp_path / "index.sqlite")

    def write(rel: str, terms: TermCounts) -> None:
        chunks = [Chunk(1, 1, "module", rel, rel, "text")]
        store.replace_file(ChunkedFile(rel, "python", chunks, [], FileSkeleton(rel, "")), hash=rel, size=1,
                           mtime=1.0, is_doc=False, encoding="utf-8", chunker_version=1, line_count=1, terms=terms)
    # Counts naming a column past their terms: the write fails once the terms have been given ids.
    broken = TermCounts(["zebra", "giraffe"], array("i", [0, 5]), array("f", [1, 1]), array("q", [2]))
    with pytest.raises(IndexError):
        write("a.py", broken)
    assert store.file_rows() == {} and store.term_names() == []  # rolled back, ids and all
    write("b.py", count_chunk_terms([([], "", "okapi zebra")]))
    (counted,) = store.file_term_counts([r.id for r in store.file_rows().values()]).values()
    names = store.term_names()
    assert [names[i] for i in counted.term_ids.tolist()] == ["okapi", "zebra"]


@pytest.mark.parametrize(("entries", "top"), [(5, 3), (70_000, 3), (5, 70_000), (0, 0)])
def test_counts_packed_read_back_as_they_were(entries: int, top: int) -> None:
    rng = np.random.default_rng(entries + top)
    counted = IndexedCounts(rng.integers(0, 2**32, entries, dtype=np.uint32),
                            rng.integers(1, top + 1, entries).astype(np.float32) if entries else np.zeros(0, np.float32),
                            np.array([0, entries // 3, entries], np.int64) if entries else np.zeros(0, np.int64))
    again = IndexedCounts.unpacked(*counted.packed())
    assert again is not None
    for name in ("term_ids", "counts", "ends"):
        np.testing.assert_array_equal(getattr(again, name), getattr(counted, name))


@pytest.mark.parametrize("damage", [
    lambda p: (b"\xff\xfe", *p[1:]),  # ids not deflated
    lambda p: (p[0], p[1] + b"\0", p[2]),  # bytes after the counts' deflated stream
    lambda p: (p[0], p[1][:-1], p[2]),  # the counts' stream cut short
    lambda p: (zlib.compress(bytes(12)), *p[1:]),  # ids that are not four bytes an entry
    lambda p: (p[0], zlib.compress(bytes(3)), p[2]),  # counts that are not a whole number per entry
    lambda p: (p[0], p[1], p[2][4:] + p[2][:4]),  # ends out of order
    lambda p: (zlib.compress(bytes(1 << 20)), *p[1:]),  # inflating to more than five entries' ids
    lambda p: (p[0], p[1], b""),  # no ends, yet entries
])
def test_damaged_packed_counts_read_as_none(damage: Callable[[tuple], tuple]) -> None:
    packed = IndexedCounts(np.array([3, 1, 4, 1, 5], np.uint32), np.array([2, 1, 1, 1, 3], np.float32),
                           np.array([2, 3, 5], np.int64)).packed()
    assert IndexedCounts.unpacked(*damage(packed)) is None
