"""The file-level BM25 lane: one document per file, built from the chunk index's counts without tokenising."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.lanes import lexical
from codeloupe.lanes.lexical import BM25Index

CHUNKS = [["parse", "header", "value"], ["header", "cookie"], ["render", "body"], ["cookie", "cookie", "jar"]]
GROUPS = np.array([0, 0, 1, 2])


def test_grouping_chunks_equals_indexing_whole_files() -> None:
    whole = BM25Index([CHUNKS[0] + CHUNKS[1], CHUNKS[2], CHUNKS[3]])
    grouped = BM25Index.grouped(BM25Index(CHUNKS), GROUPS, 3)
    for terms in (["header"], ["cookie", "parse"], ["jar", "render", "missing"]):
        np.testing.assert_allclose(grouped.scores(terms), whole.scores(terms), rtol=1e-6)


@pytest.mark.parametrize("entries", [1, 2, 5, 10**6])
def test_indexing_and_grouping_a_few_entries_at_a_time_change_no_score(monkeypatch: pytest.MonkeyPatch,
                                                                      entries: int) -> None:
    """Grouping and the documents' lengths go over the counts a slice of entries at a time (a whole-index copy
    was hundreds of MB at 200K chunks): every score is the one of indexing whole files, to the bit."""
    monkeypatch.setattr(lexical, "_ENTRIES_AT_ONCE", entries)
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(40)]
    chunks = [[str(w) for w in rng.choice(words, rng.integers(1, 12))] for _ in range(60)]
    groups = rng.integers(0, 9, len(chunks))  # a file's chunks need not be next to each other
    grouped = BM25Index.grouped(BM25Index(chunks), groups, 9)
    whole = BM25Index([[w for c, g in zip(chunks, groups, strict=True) if g == f for w in c] for f in range(9)])
    assert (grouped.n_docs, grouped.avg_len) == (whole.n_docs, whole.avg_len)
    for word in words:
        np.testing.assert_array_equal(grouped.scores([word]), whole.scores([word]))


@pytest.mark.parametrize("entries", [1, 2, 7, 10**6])
def test_groups_that_are_runs_of_chunks_are_summed_in_place_to_the_same_scores(
        monkeypatch: pytest.MonkeyPatch, entries: int) -> None:
    """A file's chunks lie together in a snapshot's table, so each file's rows are summed where they lie
    (`_summed_in_runs`) rather than through a product: every score as indexing whole files gives, to the bit,
    with files that have no chunk among them."""
    monkeypatch.setattr(lexical, "_ENTRIES_AT_ONCE", entries)
    rng = np.random.default_rng(entries)
    words = [f"w{i}" for i in range(40)]
    chunks = [[str(w) for w in rng.choice(words, rng.integers(1, 12))] for _ in range(80)]
    groups = np.sort(rng.choice([0, 1, 2, 4, 5, 8, 9, 10], len(chunks)))  # 3, 6, 7 and 11 have none
    index = BM25Index(chunks)
    assert index._counts.has_sorted_indices
    grouped = BM25Index.grouped(index, groups, 12)
    whole = BM25Index([[w for c, g in zip(chunks, groups, strict=True) if g == f for w in c] for f in range(12)])
    assert (grouped.n_docs, grouped.avg_len) == (whole.n_docs, whole.avg_len)
    for word in words:
        np.testing.assert_array_equal(grouped.scores([word]), whole.scores([word]))
    shuffled = rng.permutation(len(chunks))  # the same files, their chunks apart: summed by the product
    apart = BM25Index.grouped(BM25Index([chunks[i] for i in shuffled]), groups[shuffled], 12)
    for word in words:
        np.testing.assert_array_equal(apart.scores([word]), grouped.scores([word]))


def test_a_saved_index_still_groups(tmp_path: Path) -> None:
    chunks = BM25Index(CHUNKS)
    ids = np.arange(len(CHUNKS))
    chunks.save(tmp_path / "i.npz", ids, "s")
    loaded = BM25Index.load(tmp_path / "i.npz", ids, "s")
    assert loaded is not None
    np.testing.assert_allclose(BM25Index.grouped(loaded, GROUPS, 3).scores(["cookie"]),
                               BM25Index.grouped(chunks, GROUPS, 3).scores(["cookie"]))


def test_a_report_ranks_the_file_its_words_are_spread_over(tmp_path: Path,
                                                           lexical_workspace: Callable[[Path], Workspace]) -> None:
    words = ["tokenizer", "quoting", "delimiter", "escape", "newline", "dialect", "header", "encoding"]
    big = "\n\n\n".join(f"def step_{i}(state):\n    # handles the {w} of a row\n    return state.{w}\n"
                        for i, w in enumerate(words))
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "reader.py").write_text(big)
    (tmp_path / "repo" / "misc.py").write_text("def other(x):\n    # tokenizer quoting delimiter\n    return x\n")
    ws = lexical_workspace(tmp_path / "repo")
    report = "Reading a CSV fails: " + " ".join(words) + " all misbehave. " + " ".join(
        f"call_{i}()" for i in range(30))
    bundle = ws.search(report)
    assert bundle.issue_mode
    hit = next(h for h in bundle.files if h.path == "reader.py")
    assert "bm25 file #1" in hit.why
