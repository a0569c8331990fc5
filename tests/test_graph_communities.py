"""Communities and the semantic lane after a save: label propagation runs again only when what it weighs changed
(a pair of files gained or lost a kind of edge, or the semantic lane moved), otherwise the last communities
stand; the saved file's skeleton embedded again is multiplied by every row, not the whole product again. Either
way the graph is the one built from scratch from the same index state."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.graph import analysis, semantic
from codeloupe.graph.build import load_graph
from test_graph_incremental import rewrite
from test_graph_saved import everything, index_with_vectors, never, opened

FIXTURES = Path(__file__).parent / "fixtures" / "graph"


def propagations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The node count of every label propagation run from now on (the real one runs)."""
    runs: list[int] = []
    real = analysis.label_propagation

    def counting(n: int, weights: list[dict[int, float]]) -> list[int]:
        runs.append(n)
        return real(n, weights)

    monkeypatch.setattr(analysis, "label_propagation", counting)
    return runs


def from_scratch(root: Path, cache: Path, copy: Path, runs: list[int]) -> tuple:
    """The graph a process that finds no saved graph builds from a copy of this index state (its label
    propagation is not counted in `runs`)."""
    counted = len(runs)
    shutil.copytree(cache, copy)
    for saved in copy.rglob("*.graph.npz"):
        saved.unlink()
    cold = opened(root, copy)
    try:
        return everything(cold)
    finally:
        cold.close()
        del runs[counted:]


def embed_again(ws: Workspace, root: Path, saved: list[Path]) -> None:
    """The saved files' skeletons stored again as `index_with_vectors` stores every file's (by path order)."""
    rows = ws.store.file_rows()
    order = sorted(rows)
    paths = [path.relative_to(root).as_posix() for path in saved]
    vectors = np.zeros((len(paths), 8), np.float32)
    for k, path in enumerate(paths):
        vectors[k, order.index(path) % 4] = 1.0
    ws.store.put_vectors("skeleton", "test-model", [rows[p].id for p in paths], vectors)


# (the save, whether label propagation runs again after it)
SAVES = [
    ("a body edited in a file with no similarity edge",
     lambda r: rewrite(r, "src/shop/payments/card.py", lambda t: t.replace('"charge"', '"charge card"')), False),
    ("an import added to a file with no similarity edge",
     lambda r: rewrite(r, "src/shop/payments/card.py", lambda t: "from ..pricing import total_price\n" + t), True),
    # until it is embedded again the saved file has no skeleton vector, so its similarity edges leave the lane
    ("a body edited in a file with similarity edges",
     lambda r: rewrite(r, "src/shop/log.py", lambda t: t.replace("print(message)", "print(message, flush=True)")),
     True),
    ("a new import", lambda r: rewrite(r, "src/shop/cart.py", lambda t: "from .payments.card import charge\n" + t
                                       + "\n\ndef pay(cart):\n    return charge(cart, 't')\n"), True),
    ("a comment added", lambda r: rewrite(r, "src/shop/payments/card.py", lambda t: "# cards\n" + t), False),
]


@pytest.mark.parametrize("restart", [False, True], ids=["warm", "restarted"])
def test_communities_are_computed_again_only_when_their_weights_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restart: bool) -> None:
    root, cache = tmp_path / "python", tmp_path / "cache"
    shutil.copytree(FIXTURES / "python", root)
    ws = opened(root, cache)
    try:
        index_with_vectors(ws)
        assert load_graph(ws).semantic, "the fixture has a semantic lane"
        if restart:  # the next process reads the graph saved beside the index: no weights kept in memory
            ws.close()
            ws = opened(root, cache)
            load_graph(ws)
        runs = propagations(monkeypatch)
        for number, (what, edit, propagates) in enumerate(SAVES):
            before = len(runs)
            saved = edit(root)
            ws.update_files(saved)
            after = everything(ws)
            assert len(runs) == before + propagates, what
            assert after == from_scratch(root, cache, tmp_path / f"scratch-{number}", runs), what
            with monkeypatch.context() as patched:  # the saved file embedded again: its one row multiplied
                patched.setattr(semantic, "close_pairs", never)
                embed_again(ws, root, saved)
                after = everything(ws)
            assert after == from_scratch(root, cache, tmp_path / f"scratch-{number}-embedded", runs), what
        index_with_vectors(ws, 3)  # the same edges, other skeleton vectors: the semantic lane moves
        before = len(runs)
        after = everything(ws)
        assert len(runs) == before + 1
        assert after == from_scratch(root, cache, tmp_path / "scratch-vectors", runs)
    finally:
        ws.close()
