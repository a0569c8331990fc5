"""Communities and the semantic lane after a save: label propagation runs again only when what it weighs changed
(a pair of files gained or lost a kind of edge, or the semantic lane moved), otherwise the last communities
stand; the saved file's skeleton embedded again is multiplied by every row, not the whole product again; names
are worked out again only for the communities a save reached. Either way the graph is the one built from
scratch from the same index state."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.graph import analysis, semantic
from codeloupe.graph.build import Graph, _name_parts, graph_file, load_graph
from codeloupe.graph.compact import EdgeTable, NodeDefinitions, PackedFacts
from codeloupe.saved import save_arrays
from test_graph_incremental import checking_replays, rewrite
from test_graph_saved import everything, in_a_new_process, index_with_vectors, never, opened

FIXTURES = Path(__file__).parent / "fixtures" / "graph"


def propagations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The node count of every label propagation run from now on (the real one runs)."""
    runs: list[int] = []
    real = analysis.propagate

    def counting(n: int, weights: analysis.Weights, replay: analysis.Replay | None = None
                 ) -> analysis.Propagation:
        runs.append(n)
        return real(n, weights, replay)

    monkeypatch.setattr(analysis, "propagate", counting)
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
    replays = checking_replays(monkeypatch)
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
    assert replays and not any(missed for missed in replays)


# ------------------------------------------------------------------ names after a save, on hand-built graphs

NAMED_PATHS = ["core/c.py", "core/helper.py", "ui/s.py", "ui/t.py", "ui/u.py"]
NAMED_COMMUNITIES = [0, 0, 1, 1, 1]
# (source, target, kind, carrier symbols): c.py is community 0's most connected file; s.py and t.py (community
# 1) call it, one name each, so its dominant symbol is the tie's first; c.py imports s.py, so s.py stays its
# neighbour whatever s.py calls.
BASE_EDGES = [(0, 1, "import", ()), (0, 2, "import", ()), (2, 0, "call", ("alpha",)), (3, 0, "call", ("beta",)),
              (4, 3, "import", ())]


def named_graph(edges: list[tuple[int, int, str, tuple[str, ...]]], paths: list[str] = NAMED_PATHS,
                community: list[int] = NAMED_COMMUNITIES) -> Graph:
    """A graph of `paths` in `community` with `edges`, its degrees counted as the build counts them."""
    n = len(paths)
    table = EdgeTable(paths, [(s, kind, t, "", symbols, line) for line, (s, t, kind, symbols)
                              in enumerate(edges, 1)])
    neighbours: list[set[int]] = [set() for _ in range(n)]
    for s, t, _, _ in edges:
        neighbours[s].add(t)
        neighbours[t].add(s)
    return Graph(paths=paths, languages=["python"] * n, file_ids=list(range(n)),
                 definitions=NodeDefinitions(PackedFacts(), paths), edges=table, semantic=[], surprises=[],
                 community=community, community_names=[], degree=[len(x) for x in neighbours])


WITHOUT_CALL_FROM_S = [e for e in BASE_EDGES if e[0] != 2 or e[2] != "call"]
# (the save: edges before, the node whose edges it re-resolved, edges after): each changes community 0's name
# parts without changing its membership, and only one of the ways a community is found touched sees it.
NAME_SAVES = {
    # c.py's degree is unchanged (it imports s.py): only the edge gone from the last edges shows it
    "a call from another community dropped": (BASE_EDGES, 2, WITHOUT_CALL_FROM_S),
    # likewise, only the new edges show this one
    "a call from another community added": (WITHOUT_CALL_FROM_S, 2, WITHOUT_CALL_FROM_S + [
        (2, 0, "call", ("gamma",)), (2, 0, "call", ("gamma",))]),
    # helper.py now outranks c.py in its own community: its degree changed, it has no edge into community 0
    "a member gains neighbours elsewhere": (BASE_EDGES, 1, BASE_EDGES + [
        (1, 2, "import", ()), (1, 3, "import", ()), (1, 4, "import", ())]),
}


@pytest.mark.parametrize("save", sorted(NAME_SAVES))
def test_names_after_a_save_are_worked_out_where_a_save_reaches(save: str) -> None:
    before, refreshed, edges = NAME_SAVES[save]
    last = named_graph(before)
    last.name_parts = _name_parts(last)
    after = named_graph(edges)
    full = _name_parts(after)
    assert full[0] != last.name_parts[0], "the save changes community 0's name"
    assert _name_parts(after, last, [refreshed]) == full
    # a save that re-resolved a node and changed nothing keeps every part as it was
    assert _name_parts(named_graph(before), last, [refreshed]) == last.name_parts


SHIFTED = [(s + 1, t + 1, kind, symbols) for s, t, kind, symbols in BASE_EDGES]  # a new file sorts first


@pytest.mark.parametrize("new_edges, community, worked_out", [
    ([], [2, 0, 0, 1, 1, 1], 1),  # a file on its own: only its own community is worked out
    ([(0, 1, "call", ("alpha",))], [0, 0, 0, 1, 1, 1], 1),  # it joins c.py's community: that one again
    ([(0, 4, "import", ())], [2, 0, 0, 1, 1, 1], 2),  # it imports t.py: t.py's degree moves, community 1 again
    ([], [2, 0, 1, 1, 1, 1], 3),  # helper.py moved to community 1: neither is the same files as before
])
def test_names_after_a_file_created_are_worked_out_where_it_reaches(
        new_edges: list, community: list[int], worked_out: int, monkeypatch: pytest.MonkeyPatch) -> None:
    last = named_graph(BASE_EDGES)
    last.name_parts = _name_parts(last)
    after = named_graph(SHIFTED + new_edges, ["a/new.py", *NAMED_PATHS], community)
    full = _name_parts(after)
    directories: list[list[str]] = []
    real = analysis.common_directory
    monkeypatch.setattr(analysis, "common_directory", lambda paths: directories.append(paths) or real(paths))
    assert _name_parts(after, last, [0]) == full
    assert len(directories) == worked_out


def _damaged_course(arrays: dict[str, np.ndarray]) -> None:
    """A round of the saved label propagation's course dropped: it no longer leads to the saved labels."""
    ends = arrays["propagation_ends"]
    first = int(ends[0])
    for part in ("nodes", "steps"):
        arrays[f"propagation_{part}"] = arrays[f"propagation_{part}"][first:]
    arrays["propagation_ends"] = ends[1:] - first


def _other_communities(arrays: dict[str, np.ndarray]) -> None:
    """Two files in different communities swapped: every count still fits, only the label propagation saved
    beside them tells other communities."""
    community = arrays["community"]
    other = int(np.flatnonzero(community != community[0])[0])
    community[0], community[other] = community[other], community[0]


@pytest.mark.parametrize("damage", [
    lambda arrays: arrays.update(name_centrals=arrays["name_centrals"] + 1000),
    _damaged_course,
    _other_communities,
], ids=["name parts out of range", "propagation course", "communities"])
def test_saved_parts_that_do_not_fit_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage) -> None:
    """The name parts and the label propagation saved with the graph are checked like the rest of it: out of
    range, a course that does not lead to its labels, communities that are not its labels', the graph is
    built again (and is the same graph)."""
    root, cache = tmp_path / "python", tmp_path / "cache"
    shutil.copytree(FIXTURES / "python", root)
    first = opened(root, cache)
    try:
        first.index()
        built = everything(first)
        path = graph_file(first)
    finally:
        first.close()
    with np.load(path, allow_pickle=False) as saved:
        arrays = {name: saved[name] for name in saved.files}
    stamp = str(arrays.pop("__stamp__"))
    damage(arrays)
    save_arrays(path, stamp, arrays)
    assert in_a_new_process(root, cache, monkeypatch) == (built, 1)
