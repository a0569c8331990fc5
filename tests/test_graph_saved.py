"""The graph saved beside the index: a new process opening the same index state loads it instead of decoding
every file's facts and building the graph again, gets the same graph, and keeps saves incremental; a saved file
that is missing or damaged is rebuilt, never trusted, and one saved for an earlier state is only built on."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.graph import build as graph_build
from codeloupe.graph import semantic
from codeloupe.graph.build import graph_file, load_graph
from test_graph_incremental import (
    IN_REACH_OF_MIRRORED_PRICING,
    counting_resolutions,
    mirrored,
    renamed_in_mirror,
    rewrite,
)

FIXTURES = Path(__file__).parent / "fixtures" / "graph"


def everything(ws: Workspace) -> tuple:
    """All a graph holds, by node."""
    graph = load_graph(ws)
    return (graph.paths, graph.languages, graph.file_ids, list(graph.edges), graph.semantic, graph.surprises,
            graph.similar, graph.community, graph.community_names, graph.degree, graph.gods,
            list(graph.definitions), [graph.edges.external(i) for i in range(len(graph.paths))])


def opened(root: Path, cache: Path) -> Workspace:
    return Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(cache)})


def with_vectors(tmp_path: Path, fixture: str = "hub", prepare: Callable[[Path], object] = lambda root: None
                 ) -> tuple[Path, Path]:
    """A fixture (edited by `prepare` first) indexed, with skeleton vectors that give it a semantic lane (pairs
    that read alike)."""
    root, cache = tmp_path / fixture, tmp_path / "cache"
    shutil.copytree(FIXTURES / fixture, root)
    prepare(root)
    ws = opened(root, cache)
    try:
        index_with_vectors(ws)
    finally:
        ws.close()
    return root, cache


def index_with_vectors(ws: Workspace, groups: int = 4) -> None:
    ws.index()
    rows = ws.store.file_rows()
    ids = [rows[p].id for p in sorted(rows)]
    vectors = np.zeros((len(ids), 8), np.float32)
    for k in range(len(ids)):
        vectors[k, k % groups] = 1.0  # files read alike in fours (in `groups`)
    ws.store.put_vectors("skeleton", "test-model", ids, vectors)


def never(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("computed again instead of loaded")


def test_a_new_process_loads_the_graph_it_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, cache = with_vectors(tmp_path)
    first = opened(root, cache)
    try:
        built = everything(first)
    finally:
        first.close()
    assert built[4], "the fixture has a semantic lane"
    monkeypatch.setattr(graph_build, "_build", never)
    monkeypatch.setattr(graph_build._Resolution, "learn_stored", never)
    again = opened(root, cache)
    try:
        assert everything(again) == built
    finally:
        again.close()


def save_in_a_new_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[Path], list[Path]], *,
                          keep_saved_graph: bool) -> tuple[list[str], tuple]:
    """(files resolved again, the graph after) for one save (`edit`) in a process that opens an index whose
    graph was built before, with or without the graph saved beside it; the python fixture with a mirror of
    its package (`mirrored`)."""
    root, cache = with_vectors(tmp_path, "python", mirrored)
    first = opened(root, cache)
    try:
        load_graph(first)
        if not keep_saved_graph:
            graph_file(first).unlink()
    finally:
        first.close()
    again = opened(root, cache)
    try:
        load_graph(again)
        if keep_saved_graph:
            monkeypatch.setattr(graph_build._Resolution, "learn_stored", never)
            monkeypatch.setattr(semantic, "lane_pairs", never)  # a save changes no vector: the lane is kept
        # the graph after the save reads back only the edges it resolved again, in either case
        monkeypatch.setattr(graph_build.edge_store, "iter_edges", never)
        resolved = counting_resolutions(monkeypatch)
        again.update_files(edit(root))
        after = everything(again)  # edges are resolved when the graph is asked for
        return sorted(resolved), after
    finally:
        again.close()
        monkeypatch.undo()


# (the save, the files it resolves again): helpers.py itself and report.py (it imports helpers); the mirror's
# rename reaches only the mirror (both as in test_graph_incremental)
SAVES = {
    "a definition added": (lambda r: rewrite(r, "scripts/helpers.py", lambda t: t + "\n\ndef pad(v):\n    return v\n"),
                           ["scripts/helpers.py", "scripts/report.py"]),
    "a mirrored definition renamed": (renamed_in_mirror, IN_REACH_OF_MIRRORED_PRICING),
}


@pytest.mark.parametrize("save", sorted(SAVES))
def test_a_save_after_a_loaded_graph_resolves_and_builds_what_it_would_without_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, save: str) -> None:
    """The loaded name indexes (who defines, binds and mentions what, whom each file's imports bind) drive a
    save's resolution as the ones worked out from the stored facts do: the same few files are resolved again
    and the graph after is the same."""
    edit, expected = SAVES[save]
    loaded = save_in_a_new_process(tmp_path / "loaded", monkeypatch, edit, keep_saved_graph=True)
    built = save_in_a_new_process(tmp_path / "built", monkeypatch, edit, keep_saved_graph=False)
    assert loaded[0] == built[0] == expected
    assert loaded[1] == built[1]


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for at in range(17, len(data), max(len(data) // 13, 1)):
        data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def _emptied(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [_truncated, _flipped, _emptied])
def test_a_damaged_saved_graph_is_rebuilt(tmp_path: Path, damage) -> None:
    root, cache = with_vectors(tmp_path)
    first = opened(root, cache)
    try:
        built = everything(first)
        path = graph_file(first)
    finally:
        first.close()
    damage(path)
    again = opened(root, cache)
    try:
        assert everything(again) == built
    finally:
        again.close()
    with np.load(path, allow_pickle=False) as rewritten:  # and saved whole again for the next process
        assert "node_ids" in rewritten.files


def test_a_graph_saved_for_an_earlier_index_state_is_built_on_not_taken_as_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The graph of the index before a save is the base the next process builds the current graph from
    (`test_graph_after_changes.py`), never the answer itself."""
    root, cache = with_vectors(tmp_path)
    first = opened(root, cache)
    try:
        load_graph(first)
        path = graph_file(first)
        older = path.read_bytes()
        saved = root / "app" / "f3.py"
        saved.write_text(saved.read_text() + "\n\ndef extra(x):\n    return x\n")
        first.update_files([saved])
        current = everything(first)
    finally:
        first.close()
    path.write_bytes(older)  # the graph of the index before that save
    assert in_a_new_process(root, cache, monkeypatch) == (current, 1)


def in_a_new_process(root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple, int]:
    """(everything a new process opening `cache` has in its graph, how many graphs it built for that)."""
    builds: list[int] = []
    real = graph_build._build

    def counted(ws):
        builds.append(1)
        return real(ws)

    with monkeypatch.context() as patched:
        patched.setattr(graph_build, "_build", counted)
        again = opened(root, cache)
        try:
            return everything(again), len(builds)
        finally:
            again.close()


# Stored facts rows that decode as JSON but are not facts: each used to fail the whole graph, a field of the
# wrong type long after decoding (a number where resolution splits a name into words).
DAMAGED_FACTS = {
    "a definition of two fields": '"definitions": [["f", "function"]], "imports": [], "uses": []',
    "a definition's name a number": '"definitions": [[1, "function", 1, 2, ""]], "imports": [], "uses": []',
    "an import's specifier a number": '"definitions": [], "imports": [["import", 5, 1, [], 0]], "uses": []',
    "an imported name not a pair": '"definitions": [], "imports": [["from", "os", 1, [["path"]], 0]], "uses": []',
    "a use's name null": '"definitions": [], "imports": [], "uses": [[null, 3, "", "", "call"]]',
    "uses not a list": '"definitions": [], "imports": [], "uses": {"f": 1}',
}


@pytest.mark.parametrize("damage", DAMAGED_FACTS.values(), ids=DAMAGED_FACTS.keys())
def test_a_file_whose_stored_facts_are_damaged_is_a_node_without_them_until_indexed_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str) -> None:
    """A damaged index row leaves the file a node without definitions of its own, the log says which, and
    indexing it again heals it; the rest of the graph is built."""
    import sqlite3

    root, cache = tmp_path / "python", tmp_path / "cache"
    shutil.copytree(FIXTURES / "python", root)
    ws = opened(root, cache)
    ws.index()
    graph = load_graph(ws)
    damaged = next(p for i, p in enumerate(graph.paths) if graph.definitions[i])
    defining = sum(map(bool, graph.definitions))
    with sqlite3.connect(ws.store.path) as db:
        db.execute("UPDATE graph_facts SET facts = ? WHERE file_id = (SELECT id FROM files WHERE path = ?)",
                   ('{"language": "python", "package": "", ' + damage + '}', damaged))
    ws.close()
    graph_file(ws).unlink()  # so that a new process reads every file's facts from the index

    ws = opened(root, cache)
    try:
        graph = load_graph(ws)
        assert damaged in graph.paths and graph.definitions[graph.paths.index(damaged)] == []
        assert sum(map(bool, graph.definitions)) == defining - 1
        assert any(damaged in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
        with (root / damaged).open("a") as fh:
            fh.write("\n# edited\n")
        ws.index()
        graph = load_graph(ws)
        assert graph.definitions[graph.paths.index(damaged)] != []
    finally:
        ws.close()
