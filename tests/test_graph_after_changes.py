"""A process opening an index that moved on since its graph was saved (a `git pull` with the editor closed, then
`codeloupe index` in a terminal, or saves the editor closed on before its graph caught up) starts from the saved
graph: only what the changes reach is resolved again, no file's facts are decoded from the index, no edge is read
but the ones that can differ, and the graph and the stored edges are those a build from scratch gives."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.graph import build as graph_build
from codeloupe.graph.build import load_graph
from codeloupe.store import edges as edge_store
from test_graph_incremental import counting_resolutions, delete, mirrored, move, rewrite
from test_graph_saved import everything, never, opened, with_vectors


def stored_edges(ws: Workspace) -> list[tuple]:
    """Every edge the index holds, by source path."""
    path_of = {file_id: path for file_id, path, _ in edge_store.node_files(ws.store)}
    return sorted((path_of.get(source, "?"), kind, target, raw, symbols, line)
                  for source, kind, target, raw, symbols, line in edge_store.iter_edges(ws.store))


def built_from_scratch(root: Path, cache: Path, copy: Path) -> tuple[tuple, list[tuple]]:
    """(the graph, the stored edges) of a process opening a copy of `cache` with no saved graph: every file's
    facts read, every edge resolved again."""
    shutil.copytree(cache, copy)
    for saved in copy.rglob("*.graph.npz"):
        saved.unlink()
    ws = opened(root, copy)
    try:
        ws.store.set_meta("graph_state", "")  # so that every edge is resolved again, none taken as stored
        graph_build.update_edges(ws)
        return everything(ws), stored_edges(ws)
    finally:
        ws.close()


def with_saved_graph(tmp_path: Path, prepare: Callable[[Path], object] = lambda root: None) -> tuple[Path, Path]:
    """The python fixture (edited by `prepare` first) indexed with vectors, its graph built and saved by a
    process that then closed."""
    root, cache = with_vectors(tmp_path, "python", prepare)
    with closing(opened(root, cache)) as first:
        load_graph(first)
    return root, cache


def reopened(root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple, list[tuple]]:
    """(the graph, the stored edges) of a new process opening `cache`; what `monkeypatch` set is undone once the
    graph is built."""
    again = opened(root, cache)
    try:
        graph = everything(again)
        monkeypatch.undo()
        return graph, stored_edges(again)
    finally:
        again.close()


def pulled(root: Path) -> list[Path]:
    """What a `git pull` brings: a rename whose importers follow, a new module and an import of it, a deletion
    of a module others import, a body edited."""
    return (move(root, "src/shop/pricing.py", "src/shop/prices.py")
            + rewrite(root, "src/shop/cart.py", lambda t: t.replace(".pricing", ".prices"))
            + rewrite(root, "src/shop/__init__.py", lambda t: t.replace(".pricing", ".prices"))
            + rewrite(root, "src/shop/discount.py", lambda _: "def discount(x):\n    return x\n")
            + rewrite(root, "scripts/report.py", lambda t: "from shop.discount import discount\n" + t)
            + delete(root, "src/shop/log.py")
            + rewrite(root, "scripts/helpers.py", lambda t: t.replace(">4", ">6")))


def scripts_pulled(root: Path) -> list[Path]:
    """A pull that reaches only the scripts: a new module the report now imports from, the old one deleted."""
    return (rewrite(root, "scripts/fmt_tools.py", lambda _: "def fmt(v):\n    return v\n")
            + rewrite(root, "scripts/report.py", lambda t: t.replace("from helpers import fmt", "from fmt_tools import fmt"))
            + delete(root, "scripts/helpers.py"))


def indexed_in_a_terminal(root: Path, cache: Path, changed: list[Path]) -> None:
    """`codeloupe index`: the changes indexed and every edge they reach resolved, no graph built or saved."""
    ws = opened(root, cache)
    try:
        ws.index()
    finally:
        ws.close()


def saved_then_closed(root: Path, cache: Path, changed: list[Path]) -> None:
    """An editor's saves, closed before its graph caught up: indexed, no edge resolved."""
    ws = opened(root, cache)
    try:
        ws.update_files(changed)
    finally:
        ws.close()


HOW_INDEXED = {"indexed in a terminal": indexed_in_a_terminal, "saved, then the editor closed": saved_then_closed}


PULLS = {"across the package": pulled, "in the scripts alone": scripts_pulled}
# The files a pull's resolution reaches, where few: the new module and the one importing it (no file of the
# package, the mirror or the tests names a script's module).
REACHED = {"in the scripts alone": ["scripts/fmt_tools.py", "scripts/report.py"]}


@pytest.mark.parametrize("pull", sorted(PULLS))
@pytest.mark.parametrize("how", sorted(HOW_INDEXED))
def test_a_start_after_changes_builds_the_graph_from_the_earlier_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, pull: str) -> None:
    root, cache = with_saved_graph(tmp_path, mirrored)
    HOW_INDEXED[how](root, cache, PULLS[pull](root))
    expected = built_from_scratch(root, cache, tmp_path / "scratch")

    monkeypatch.setattr(graph_build._Resolution, "learn_stored", never)  # no file's facts decoded from the index
    monkeypatch.setattr(graph_build.edge_store, "iter_edges", never)  # no edge read but those that can differ
    resolved = counting_resolutions(monkeypatch)
    found = reopened(root, cache, monkeypatch)
    assert found == expected
    assert len(set(resolved)) < len(found[0][0])  # fewer files resolved than there are nodes
    if pull in REACHED:
        assert sorted(resolved) == REACHED[pull]


@pytest.mark.parametrize("pull", sorted(PULLS))
def test_an_index_in_a_terminal_after_changes_resolves_only_what_they_reach(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pull: str) -> None:
    """`codeloupe index` after a pull, in a process that holds no resolution, starts from the graph saved for
    the earlier state: the edges it stores are those a resolution of every file gives, from fewer files."""
    root, cache = with_saved_graph(tmp_path, mirrored)
    PULLS[pull](root)
    ws = opened(root, cache)
    try:
        monkeypatch.setattr(graph_build._Resolution, "learn_stored", never)  # no file's facts decoded from the index
        resolved = counting_resolutions(monkeypatch)
        ws.index()
        monkeypatch.undo()
        found = stored_edges(ws)
        nodes = len(edge_store.node_files(ws.store))
    finally:
        ws.close()
    assert found == built_from_scratch(root, cache, tmp_path / "scratch")[1]
    assert len(set(resolved)) < nodes
    if pull in REACHED:
        assert sorted(resolved) == REACHED[pull]


def test_a_start_after_new_vectors_alone_keeps_the_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """Files embedded again since the graph was saved move the vector generation and nothing else: nothing is
    resolved again, and the semantic lane multiplies only the new vectors' rows."""
    root, cache = with_vectors(tmp_path)
    first = opened(root, cache)
    try:
        before = everything(first)
        rows = first.store.file_rows()
        ids = [rows[p].id for p in sorted(rows)]
        vectors = np.zeros((len(ids), 8), np.float32)
        vectors[:, 0] = 1.0  # every file now reads alike
        first.store.put_vectors("skeleton", "test-model", ids[:3], vectors[:3])
    finally:
        first.close()
    expected = built_from_scratch(root, cache, tmp_path / "scratch")
    monkeypatch.setattr(graph_build._Resolution, "learn_stored", never)
    resolved = counting_resolutions(monkeypatch)
    found = reopened(root, cache, monkeypatch)
    assert found == expected
    assert found[0][4] != before[4]  # the new vectors did reach the semantic lane
    assert resolved == []


def edges_of_a_state_in_between(root: Path, cache: Path) -> None:
    """A module appears and an unchanged file's import starts to name it; edges are resolved (the graph is not
    built); then the module goes again, with no edge resolved since. The unchanged file's stored edge names a
    file that neither the saved graph's state nor the current one has: no change tells of it."""
    ws = opened(root, cache)
    try:
        ws.update_files(rewrite(root, "src/shop/audit.py", lambda _: "def audit(x):\n    return x\n"))
        graph_build.update_edges(ws)
        ws.update_files(delete(root, "src/shop/audit.py"))
    finally:
        ws.close()


def test_edges_resolved_for_a_state_in_between_are_not_built_on(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root, cache = with_saved_graph(
        tmp_path, lambda r: rewrite(r, "tests/check_audit.py", lambda _: "from shop.audit import audit\n"))
    edges_of_a_state_in_between(root, cache)
    expected = built_from_scratch(root, cache, tmp_path / "scratch")
    assert reopened(root, cache, monkeypatch) == expected


def _state_named(stamp: str, state: str) -> str:
    """`stamp` with the index state it names (its tail) replaced by `state`."""
    return stamp[:stamp.index(":(") + 1] + state


# Each takes the saved arrays (changed in place) and stamp, and gives the stamp to save them under.
EARLIER_DAMAGE: dict[str, Callable[[dict[str, np.ndarray], str], str]] = {
    "configuration digests not a mapping": lambda arrays, stamp: arrays.update(configs=np.array("[1, 2]")) or stamp,
    "configuration digests not JSON": lambda arrays, stamp: arrays.update(configs=np.array("{not json")) or stamp,
    "a node path missing":
        lambda arrays, stamp: arrays.update(node_paths_ends=arrays["node_paths_ends"][:-1]) or stamp,
    # int() refuses a number of thousands of digits
    "a state of thousands of digits": lambda arrays, stamp: _state_named(stamp, f"({'9' * 5000}, 1, '1:1')"),
    "a state that is not one": lambda arrays, stamp: _state_named(stamp, "(1, 2, __import__('os'))"),
}


@pytest.mark.parametrize("damage", sorted(EARLIER_DAMAGE))
def test_an_earlier_graph_that_does_not_fit_together_is_not_built_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    from codeloupe.saved import load_arrays, save_arrays, saved_stamp

    root, cache = with_saved_graph(tmp_path)
    path = next(cache.rglob("*.graph.npz"))
    stamp = saved_stamp(path)
    arrays = load_arrays(path, stamp)
    save_arrays(path, EARLIER_DAMAGE[damage](arrays, stamp), arrays)
    indexed_in_a_terminal(root, cache, pulled(root))
    expected = built_from_scratch(root, cache, tmp_path / "scratch")
    assert reopened(root, cache, monkeypatch) == expected


def test_a_layout_changed_by_another_process_is_taken_as_it_resolved_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change of layout (a directory stops being a package) resolves everything again, once: where the process
    that indexed the change did that, the next one reads the edges it stored instead of resolving them again."""
    root, cache = with_saved_graph(tmp_path)
    indexed_in_a_terminal(root, cache, delete(root, "src/shop/payments/__init__.py"))
    expected = built_from_scratch(root, cache, tmp_path / "scratch")
    resolved = counting_resolutions(monkeypatch)
    assert reopened(root, cache, monkeypatch) == expected
    assert resolved == []
