"""A warm query's shortcuts must not change what it answers: the vectorised cuts, the merged vector matrix,
the symbol lane's array add and the batched reads give exactly what the row-by-row forms gave."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from codeloupe import ranking as R
from codeloupe.api import Workspace
from codeloupe.lanes.dense import Int8Vectors
from codeloupe.lanes.symbols import SymbolIndex
from codeloupe.lanes.top import top_rows
from codeloupe.search import _rank
from codeloupe.store import ChunkTable, JsonLists, SymbolRow, VectorMatrix, quantize


def test_the_best_rows_are_a_full_sort_cut_with_ties_by_row_whatever_else_the_array_holds() -> None:
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 6, 5000).astype(np.float32)  # thousands of ties at every value
    keep = rng.random(5000) < 0.7
    for depth in (1, 7, 200, 4999, 6000):
        expected = sorted(np.flatnonzero(keep).tolist(), key=lambda r: (-scores[r], r))[:depth]
        assert top_rows(scores, keep, depth) == top_rows(scores, np.flatnonzero(keep), depth) == expected
        # rows that cannot make the cut, scored otherwise, change nothing
        other = scores.copy()
        other[[r for r in np.flatnonzero(keep) if r not in set(expected)]] = -1.0
        assert top_rows(other, keep, depth) == expected
    assert top_rows(scores, keep, 0) == [] and top_rows(scores, np.zeros(5000, bool), 5) == []


def test_a_large_mask_narrowed_by_a_sampled_threshold_cuts_as_the_full_partition_does() -> None:
    """Past a few thousand kept rows the cut first keeps the rows scoring at least a threshold read off a sample
    of the rows; whatever the sample says (ties at the threshold, a threshold too high to leave `depth` rows),
    the cut is the full sort's."""
    rng = np.random.default_rng(5)
    n = 60_000
    cosines = rng.standard_normal(n).astype(np.float32)
    ties = np.round(cosines, 1)  # a few dozen values: thousands of rows tie with the cut
    sampled_high = np.where(np.arange(n) % 64 == 0, 10.0 + cosines, cosines)  # the sample overstates the top
    for scores in (cosines, ties, sampled_high):
        for density in (0.05, 0.9):
            keep = rng.random(n) < density
            kept = np.flatnonzero(keep)
            for depth in (1, 50, 200, 1000):
                expected = kept[np.lexsort((kept, -scores[kept]))][:depth].tolist()
                assert top_rows(scores, keep, depth) == expected


def test_a_word_lane_ranks_its_positive_finite_rows_under_the_mask_as_a_full_sort_does() -> None:
    """Zero (no match), NaN and infinities never rank in a word lane, however many rows match; a cosine ranks at
    any finite value."""
    rng = np.random.default_rng(7)
    n = 60_000
    for matching in (0.001, 0.4, 0.95):  # a rare word, a common one (85K of 200K chunks), nearly every row
        scores = np.where(rng.random(n) < matching, np.round(rng.gamma(2.0, 1.5, n), 1), 0.0).astype(np.float32)
        scores[rng.choice(n, 30, replace=False)] = np.nan
        scores[rng.choice(n, 30, replace=False)] = np.inf
        scores[rng.choice(n, 30, replace=False)] = -np.inf
        mask = rng.random(n) < 0.8
        for depth in (1, 200, 5000):
            kept = np.flatnonzero(mask & np.isfinite(scores) & (scores > 0))
            assert _rank(scores, mask, depth) == kept[np.lexsort((kept, -scores[kept]))][:depth].tolist()
            finite = np.flatnonzero(mask & np.isfinite(scores))
            assert _rank(scores, mask, depth, positive_only=False) == \
                finite[np.lexsort((finite, -scores[finite]))][:depth].tolist()


def test_chunks_and_skeletons_in_one_matrix_score_each_row_as_its_own_matrix_did() -> None:
    rng = np.random.default_rng(2)
    unit = rng.standard_normal((900, 384)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    chunks, skeletons = VectorMatrix(np.arange(600), *quantize(unit[:600])), VectorMatrix(np.arange(300),
                                                                                             *quantize(unit[600:]))
    rows = np.arange(0, 600, 3)
    merged = Int8Vectors.stacked([(chunks, rows), (skeletons, None)])
    for query in unit[:5]:
        got = merged.dot(query)
        assert np.array_equal(got[:200], Int8Vectors.stacked([(chunks, rows)]).dot(query))
        assert np.array_equal(got[200:], Int8Vectors.stacked([(skeletons, None)]).dot(query))


def test_a_name_defined_in_many_chunks_scores_each_chunk_once() -> None:
    n = 50
    table = ChunkTable(ids=np.arange(1, n + 1), file_ids=np.repeat(np.arange(10), 5),
                       start_lines=np.tile(np.arange(1, 50, 10), 10).astype(np.int32),
                       end_lines=np.tile(np.arange(10, 60, 10), 10).astype(np.int32), kinds=["function"] * n,
                       names=[""] * n, breadcrumbs=[""] * n, symbols=JsonLists(["[]"] * n), texts=[""] * n)
    # `render` in every file (twice in file 0's first chunk: an overload), `Render` once
    symbols = [SymbolRow(f, "render", "function", 1, 5, "", "") for f in range(10)]
    symbols += [SymbolRow(0, "render", "function", 2, 3, "", ""), SymbolRow(3, "Render", "class", 21, 25, "", "")]
    index = SymbolIndex(table, symbols)
    scores = index.scores("render")
    share = R.SYMBOL_EXACT_IDENTIFIER / math.log2(1 + 10)
    assert np.flatnonzero(scores).tolist() == list(range(0, n, 5))
    assert np.array_equal(scores[::5], np.full(10, np.float32(0.0) + np.float32(share)))


def test_a_warm_search_reads_its_shown_texts_in_one_statement(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    files = {f"ledger/book_{i}.py": "".join(f"def ledger_total_{i}_{j}(rows):\n    return sum(rows) * {j}\n\n\n"
                                            for j in range(3)) for i in range(6)}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    ws = lexical_workspace(tmp_path)
    ws.search("ledger total rows")
    statements: list[str] = []
    ws.store._conn.set_trace_callback(statements.append)
    bundle = ws.search("ledger total rows", limit=4)
    ws.store._conn.set_trace_callback(None)
    shown = [c for hit in bundle.files for c in hit.chunks]
    assert len(shown) > 2
    assert len([s for s in statements if "FROM chunks WHERE id IN" in s]) == 1
    for chunk in shown:  # each shown chunk still carries its own text
        assert chunk.snippet.text in files[chunk.path]
        assert (chunk.text or chunk.snippet.text) in files[chunk.path]


def test_a_lane_s_votes_added_at_once_round_as_one_add_per_row() -> None:
    from codeloupe.search import Fusion

    file_ids = np.repeat(np.arange(40), 5)
    rows = np.random.default_rng(4).permutation(200)[:120].tolist()
    fusion = Fusion(file_ids)
    fusion.chunk += np.float32(0.3)  # votes already there from another lane
    fusion.add_lane("lexical", rows, 0.7, record=True)
    expected = np.full(200, np.float32(0.3))
    for rank, row in enumerate(rows, 1):
        expected[row] += 0.7 / (R.RRF_K + rank)
    assert np.array_equal(fusion.chunk, expected)
    assert list(fusion.file_ranks["lexical"]) == list(dict.fromkeys(file_ids[rows].tolist()))
    assert fusion.chunk_ranks["lexical"] == {row: rank for rank, row in enumerate(rows, 1)}
