"""The learned reordering of a question's fused top (ranking.RERANK_WEIGHTS): it puts the first files in the order
of its score, each taking the fused score of its new place, and keeps every file (rule 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe import ranking
from codeloupe.api import Workspace

# A shim four folders down repeats the question's words more often than the module that answers it: the fused
# order puts the shim first by under 2% (the lanes' ranks 1 and 2), and the learned score's depth term is worth
# more than that.
TREE = {
    "retry.py": '''\
        def next_delay(attempt):
            """The delay before the next attempt grows with each failure."""
            return min(2 ** attempt, 60)
        ''',
    "lib/compat/legacy/shim/waiting.py": '''\
        def wait_delay(attempt, delay):
            """How long the delay is before the next attempt: the next attempt waits out this delay."""
            return delay * 2
        ''',
    "app.py": '''\
        def run(job):
            return job()
        ''',
}
QUESTION = "how long is the delay before the next attempt"


def _ranked(ws: Workspace, query: str) -> list[tuple[str, float]]:
    return [(h.path, h.score) for h in ws.search(query).files]


def test_the_learned_score_reorders_the_fused_top_with_the_same_scores(
        make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = lexical_workspace(make_tree(TREE))
    learned = _ranked(ws, QUESTION)
    assert [p for p, _ in learned][:2] == ["retry.py", "lib/compat/legacy/shim/waiting.py"]
    # The fused order, as a model that weighs the fused score alone gives it back: the shim first.
    monkeypatch.setattr(ranking, "RERANK_WEIGHTS", {name: float(name == "fused") for name in ranking.RERANK_WEIGHTS})
    fused = _ranked(ws, QUESTION)
    assert [p for p, _ in fused][:2] == ["lib/compat/legacy/shim/waiting.py", "retry.py"]
    # The same files, and the places keep their scores (CORE's gap rule sees what the fusion gave).
    assert sorted(p for p, _ in learned) == sorted(p for p, _ in fused)
    assert [s for _, s in learned] == [s for _, s in fused]

