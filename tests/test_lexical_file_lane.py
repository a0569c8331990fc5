"""The file-level BM25 lane: one document per file, built from the chunk index's counts without tokenising."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from codeloupe.api import Workspace
from codeloupe.lanes.lexical import BM25Index

CHUNKS = [["parse", "header", "value"], ["header", "cookie"], ["render", "body"], ["cookie", "cookie", "jar"]]
GROUPS = np.array([0, 0, 1, 2])


def test_grouping_chunks_equals_indexing_whole_files() -> None:
    whole = BM25Index([CHUNKS[0] + CHUNKS[1], CHUNKS[2], CHUNKS[3]])
    grouped = BM25Index.grouped(BM25Index(CHUNKS), GROUPS, 3)
    for terms in (["header"], ["cookie", "parse"], ["jar", "render", "missing"]):
        np.testing.assert_allclose(grouped.scores(terms), whole.scores(terms), rtol=1e-6)


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
