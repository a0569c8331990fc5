"""A lexical index built from parts counted apart (in worker processes) is the index of one pass, to the bit."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest

from codeloupe import parallel
from codeloupe.api import Workspace
from codeloupe.lanes.lexical import BM25Index, count_terms

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
    try:
        _same(again.searcher().snapshot().bm25, one_pass)
    finally:
        again.close()
    assert saved.is_file() and not caplog.records
