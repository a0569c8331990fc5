"""Rule 2 on a real index: the bundle keeps every lane's short list and the code CORE's matched chunks reach."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe import ranking
from codeloupe.api import Workspace


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_every_file_a_lane_shortlists_stays_past_the_limit(tmp_path: Path,
                                                           lexical_workspace: Callable[[Path], Workspace]) -> None:
    files = {f"ledger/book_{i}.py": f"def ledger_total_{i}(rows):\n    return sum(rows) * {i}\n" for i in range(6)}
    ws = lexical_workspace(write(tmp_path / "repo", files))
    bundle = ws.search("ledger total", limit=2)
    assert sorted(h.path for h in bundle.files) == sorted(files)
    assert [h.rank for h in bundle.files] == list(range(1, 7))


def test_the_callee_of_a_matched_chunk_joins_related_however_many_neighbours(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    # feedback would find the callee by its name in the matched chunk, and the summary lane by the name of its
    # caller (tests/test_graph_evidence.py); here only the graph may bring it
    monkeypatch.setitem(ranking.LANE_WEIGHTS_NATURAL, "feedback", 0.0)
    monkeypatch.setitem(ranking.LANE_WEIGHTS_NATURAL, "summary", 0.0)
    unrelated = {f"app/aux_{i}.py": f"def aux_{i}():\n    return {i}\n" for i in range(10)}
    imports = "\n".join(f"from app.aux_{i} import aux_{i}" for i in range(10))
    calls = " + ".join(f"aux_{i}()" for i in range(10))
    api = (f"from app.quantities import clamp_amounts\n{imports}\n\n\n"
           "def submit_order(order):\n    \"\"\"Submit an order to the warehouse.\"\"\"\n"
           "    return clamp_amounts(order)\n\n\n"
           f"def housekeeping():\n    return {calls}\n")
    ws = lexical_workspace(write(tmp_path / "repo", {
        **unrelated, "app/__init__.py": "", "app/api.py": api,
        "app/quantities.py": "def clamp_amounts(items):\n    return [max(0, n) for n in items]\n",
    }))
    bundle = ws.search("submit an order to the warehouse")
    assert bundle.core[0].path == "app/api.py"
    linked = {h.path: h for h in bundle.related if h.via == "graph"}
    assert "app/quantities.py" in linked
    assert linked["app/quantities.py"].why == "clamp_amounts called from app/api.py"


def test_a_question_about_versions_brings_the_docs_and_manifests(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(write(tmp_path / "repo", {
        "README.md": "# Relay\n\n## Compatibility\n\nRelay runs on Node 18 and later; Node 16 is not supported.\n",
        "package.json": '{"name": "relay", "engines": {"node": ">=18"}, "dependencies": {"ws": "^8"}}\n',
        "lib/relay.js": "function relay(socket) {\n  return socket.pipe(socket);\n}\nmodule.exports = relay;\n",
        "lib/node.js": "function nodeOf(tree, id) {\n  return tree.nodes[id];\n}\nmodule.exports = nodeOf;\n",
    }))
    bundle = ws.search("which node versions are supported")
    found = {h.path: h.why for h in bundle.files}
    assert "docs & manifests" in found["README.md"] and "docs & manifests" in found["package.json"]
    assert bundle.core[0].path != "README.md"  # a candidate source, not a vote that outranks the code
    assert "README.md" not in {h.path for h in ws.search("how is a socket relayed").files}
