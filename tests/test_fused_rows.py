"""What the fusion and the feedback lane compute from the few rows a query touched equals what a pass over
every row computed, to the bit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.lanes.lexical import BM25Index, StackedBM25
from codeloupe.lanes.top import top_rows
from codeloupe.search import Fusion

WORDS = [f"w{i}" for i in range(300)]


def _documents(seed: int, count: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    # Zipf-like: a few words in most documents, most words in a few (a question's words and its expansion's).
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    return [[str(w) for w in rng.choice(WORDS, rng.integers(0, 40), p=weights / weights.sum())] for _ in range(count)]


@pytest.mark.parametrize("seed", range(6))
def test_scores_adding_terms_equal_scores_of_all_the_terms(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    index = BM25Index(_documents(seed, 700))
    stacked = StackedBM25([index, BM25Index(_documents(seed + 50, 90), stats_from=index)])
    for _ in range(20):
        asked = [str(w) for w in rng.choice(WORDS[:40], rng.integers(0, 6))] + ["absent"]  # repeats, unknown
        terms = list(dict.fromkeys(str(w) for w in rng.choice(WORDS, 8) if w not in asked)) + ["nowhere"]
        for lane in (index, stacked):
            added = lane.scores_adding(lane.scores(asked), asked, terms)
            whole = lane.scores(asked + terms)
            assert added.dtype == whole.dtype and np.array_equal(added, whole)  # bit for bit


def test_scored_rows_are_the_rows_a_pass_over_every_row_finds() -> None:
    rng = np.random.default_rng(3)
    n = 5000
    fusion = Fusion(np.sort(rng.integers(0, 400, n)))
    for lane in ("lexical", "dense", "symbol"):
        fusion.add_lane(lane, rng.permutation(n)[: rng.integers(50, 300)].tolist(), float(rng.uniform(0.2, 1.2)),
                        record=True)
    fusion.add_to_chunk(int(rng.integers(n)), 0.4)
    fusion.add_to_chunk(7, 0.25)
    untouched = fusion.chunk.copy()
    factor = np.array([1.0, 0.85, 0.0, 0.5], np.float32)  # a factor of zero takes a row out of the scored ones
    kind = rng.integers(0, len(factor), n).astype(np.int8)
    fusion.scale_chunks(factor, kind)
    fusion.normalise()
    expected = untouched * factor[kind] / fusion._norm
    assert np.array_equal(fusion.chunk, expected)
    for mask in (np.ones(n, bool), rng.random(n) < 0.5, np.zeros(n, bool)):
        everywhere = np.flatnonzero((fusion.chunk > 0) & mask)
        assert np.array_equal(fusion.scored_rows(mask), everywhere)
        assert top_rows(fusion.chunk, fusion.scored_rows(mask), 3) == top_rows(fusion.chunk, (fusion.chunk > 0) & mask, 3)


def test_feedback_adds_its_expansion_to_the_lexical_lane_s_scores_of_the_question(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(12):
        (tmp_path / f"pkg/mod_{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"pkg/mod_{i}.py").write_text(
            f"def parse_config_{i}(path):\n    \"\"\"Read the settings file and merge defaults {i}.\"\"\"\n"
            f"    return merge_defaults_{i % 3}(load_toml(path))\n\n\n"
            f"def merge_defaults_{i % 3}(values):\n    return dict(values)\n")
    ws = lexical_workspace(tmp_path)
    same: list[bool] = []
    adding = BM25Index.scores_adding

    def checked(self: BM25Index, scores: np.ndarray, asked: list[str], terms: list[str]) -> np.ndarray:
        out = adding(self, scores, asked, terms)
        same.append(np.array_equal(out, self.scores(asked + terms)))  # what feedback scored before
        return out

    monkeypatch.setattr(BM25Index, "scores_adding", checked)
    for question in ("how are the settings read and merged with defaults", "where is the config file parsed"):
        bundle = ws.search(question)
        assert any("feedback" in chunk.lanes for hit in bundle.files for chunk in hit.chunks)
    assert len(same) == 2 and all(same)


def test_the_rarest_terms_come_by_idf_then_by_name() -> None:
    # "zeta" and "alpha" are in one document each (the same IDF), "mid" in two, "common" in all four.
    index = BM25Index([["common", "zeta", "mid"], ["common", "alpha", "mid"], ["common"], ["common"]])
    asked = ["common", "mid", "zeta", "unknown", "alpha", "zeta"]
    assert index.rarest(asked, 3) == ["alpha", "zeta", "mid"]
    assert index.rarest(asked, 10) == ["alpha", "zeta", "mid", "common"]
    assert index.rarest(asked, 0) == [] and index.rarest([], 5) == []
