"""What the graph lends ranking on a real index: the names a file's neighbours know it by (summary lane), and
its neighbours' evidence as a tie-breaker and a candidate source (never a score of its own, rule 3)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe import ranking
from codeloupe.api import Workspace
from codeloupe.graph import build


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# The helper's own text never says "backoff" or "retry": only the definition that calls it does.
def _helper_and_caller() -> dict[str, str]:
    return {
        "app/__init__.py": "",
        "app/pacing.py": "def wait_before(attempt):\n    return min(2 ** attempt, 60)\n",
        "app/client.py": "from app.pacing import wait_before\n\n\n"
                         "def retry_with_backoff(request, attempts):\n"
                         "    for attempt in range(attempts):\n"
                         "        if request.send():\n            return True\n"
                         "        request.sleep(wait_before(attempt))\n    return False\n",
        "app/other.py": "def unrelated(x):\n    return x\n",
    }


def test_a_helper_is_found_by_the_name_of_the_caller_that_uses_it(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ranking.LANE_WEIGHTS_NATURAL, "summary", 0.3)
    ws = lexical_workspace(write(tmp_path / "repo", _helper_and_caller()))
    bundle = ws.search("retry backoff delay")
    pacing = next(h for h in bundle.files if h.path == "app/pacing.py")
    assert "summary #" in pacing.why
    assert pacing.score > 0


def _tied_helpers() -> dict[str, str]:
    """Two helpers that match the question equally (same words, same length); the API file that matches it
    best calls only the second one."""
    helper = "def {name}(ledger):\n    # ledger rounding\n    return round(ledger, 2)\n"
    return {
        "app/__init__.py": "",
        "app/alpha.py": helper.format(name="alpha"),
        "app/omega.py": helper.format(name="omega"),
        "app/api.py": "from app.omega import omega\n\n\n"
                      "def ledger_rounding(ledger):\n"
                      "    \"\"\"Ledger rounding: round the ledger, each ledger line's rounding first.\"\"\"\n"
                      "    return omega(ledger)\n",
        "app/noise.py": "def noise():\n    return 0\n",
    }


def test_a_neighbour_of_the_top_file_wins_a_tie(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    ws = lexical_workspace(write(tmp_path / "repo", _tied_helpers()))
    query = "ledger rounding"
    monkeypatch.setattr(ranking, "NEIGHBOUR_TIEBREAK", 0.0)
    before = [h.path for h in ws.search(query).files]
    assert before[0] == "app/api.py"
    assert before.index("app/alpha.py") < before.index("app/omega.py")  # a tie, broken by path
    monkeypatch.setattr(ranking, "NEIGHBOUR_TIEBREAK", 0.05)
    after = ws.search(query).files
    paths = [h.path for h in after]
    assert paths[0] == "app/api.py"
    assert paths.index("app/omega.py") < paths.index("app/alpha.py")
    # the lift is a tie-breaker: at most the strength, never past the file that earned the top score
    scores = {h.path: h.score for h in after}
    assert scores["app/omega.py"] <= scores["app/alpha.py"] * 1.05 + 1e-9 < scores["app/api.py"]


def test_a_neighbour_without_evidence_of_its_own_is_never_lifted(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "NEIGHBOUR_TIEBREAK", 0.05)
    monkeypatch.setitem(ranking.LANE_WEIGHTS_NATURAL, "feedback", 0.0)  # feedback would find it by its name
    ws = lexical_workspace(write(tmp_path / "repo", {
        "app/__init__.py": "",
        "app/quantities.py": "def clamp(items):\n    return [max(0, n) for n in items]\n",
        "app/api.py": "from app.quantities import clamp\n\n\n"
                      "def submit_order(order):\n    \"\"\"Submit an order to the warehouse.\"\"\"\n"
                      "    return clamp(order)\n",
    }))
    bundle = ws.search("submit an order to the warehouse")
    assert bundle.core[0].path == "app/api.py"
    helper = next(h for h in bundle.files if h.path == "app/quantities.py")
    assert (helper.score, helper.via) == (0.0, "graph")  # in the bundle as a graph neighbour, unscored


def test_a_large_workspace_answers_at_once_and_summarises_off_the_query_path(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setitem(ranking.LANE_WEIGHTS_NATURAL, "summary", 0.3)
    ws = lexical_workspace(write(tmp_path / "repo", _helper_and_caller()))
    first = ws.search("retry backoff delay")
    assert [(s.ready, s.note) for s in first.lanes if s.name == "summary"] == \
        [(False, "file summaries are being built")]
    assert first.core[0].path == "app/client.py"  # the other lanes answered meanwhile
    deadline = time.monotonic() + 60  # the graph, then the summaries with its words, on their own threads
    while "summary #" not in next((h.why for h in ws.search("retry backoff delay").files
                                   if h.path == "app/pacing.py"), ""):
        assert time.monotonic() < deadline, "the summaries never arrived"
        time.sleep(0.05)
