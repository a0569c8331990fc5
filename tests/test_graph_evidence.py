"""What the graph lends ranking on a real index: the names a file's neighbours know it by, as words of its
summary document (the summary lane); never a score of its own (rule 3)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

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
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(write(tmp_path / "repo", _helper_and_caller()))
    bundle = ws.search("retry backoff delay")
    pacing = next(h for h in bundle.files if h.path == "app/pacing.py")
    assert "summary #" in pacing.why
    assert pacing.score > 0


def test_a_large_workspace_answers_at_once_and_summarises_off_the_query_path(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
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


def test_an_answer_made_while_the_first_graph_builds_says_it_lacks_the_graphs_links(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    """A large workspace answers at once from no graph while its first graph builds: its RELATED then lacks every
    file the graph links to the answer, which the answer said nowhere (two asks of one question differed)."""
    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setattr(build, "BACKGROUND_START_DELAY_S", 0.2)
    ws = lexical_workspace(write(tmp_path / "repo", _helper_and_caller()))
    first = ws.search("retry backoff delay")
    assert [(s.ready, s.note) for s in first.lanes if s.name == "graph"] == [(False, "its first graph is being built")]
    assert "the call graph is being built: RELATED lacks the files it links to these until then" in first.notes
    assert not any(h.via == "graph" for h in first.files)
    deadline = time.monotonic() + 60
    later = first
    while any(s.name == "graph" for s in later.lanes):
        assert time.monotonic() < deadline, "the graph never arrived"
        time.sleep(0.05)
        later = ws.search("retry backoff delay")
    assert not any("call graph" in note for note in later.notes)


def test_waiting_for_the_lanes_gives_a_large_workspaces_first_search_the_lanes_a_warm_server_has(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    """For a measurement (bench/tune_ranking.py): its first queries on a large tree were scored without the graph
    and the summary lane, still building on their own threads."""
    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    ws = lexical_workspace(write(tmp_path / "repo", _helper_and_caller()))
    ws.wait_for_lanes()
    first = ws.search("retry backoff delay")
    assert [(s.ready, s.note) for s in first.lanes if s.name == "summary"] == [(True, "")]
    assert "summary #" in next(h.why for h in first.files if h.path == "app/pacing.py")
    ws.wait_for_lanes()  # ready already: at once


def test_a_workspace_closed_before_its_background_builds_run_logs_no_error(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Closing a folder within a second of its first question is normal: the graph's and the summary lane's
    builders then find a closed index, which is no error to report."""
    import threading

    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setattr(build, "BACKGROUND_START_DELAY_S", 0.2)
    ws = lexical_workspace(write(tmp_path / "repo", _helper_and_caller()))
    ws.search("retry backoff delay")  # starts both builds, each a moment later
    builders = [t for t in threading.enumerate()
                if t.name in ("codeloupe-graph-build", "codeloupe-file-summaries")]
    assert len(builders) == 2
    ws.close()
    for thread in builders:
        thread.join(60)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


def test_closing_a_workspace_cancels_its_summaries_build_not_started_yet(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    """A large workspace's summary lane is built a moment after the search that asks for it: closed meanwhile,
    that build still ran afterwards (seconds at 40K files, on a closed index). Closing cancels it."""
    import threading

    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setattr(build, "BACKGROUND_START_DELAY_S", 3600.0)  # still waiting to start at the close
    ws = lexical_workspace(write(tmp_path / "repo", _helper_and_caller()))
    ws.search("retry backoff delay")
    builders = [t for t in threading.enumerate() if t.name == "codeloupe-file-summaries"]
    assert len(builders) == 1 and builders[0].is_alive()
    ws.close()
    assert not builders[0].is_alive()


def test_a_snapshot_replaced_by_a_rebuild_stops_its_summaries_build(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuild's snapshot replaces the one a search scheduled the summary lane for: that build went on for a
    snapshot nothing searches any more (seconds at 40K files), beside the new snapshot's own."""
    import threading

    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setattr(build, "BACKGROUND_START_DELAY_S", 3600.0)  # still waiting when the rebuild lands
    root = write(tmp_path / "repo", _helper_and_caller())
    ws = lexical_workspace(root)
    ws.search("retry backoff delay")
    [first] = [t for t in threading.enumerate() if t.name == "codeloupe-file-summaries"]
    (root / "extra.py").write_text("def backoff_again():\n    return 2\n")
    ws.index()  # a full index writes the change; the searcher's snapshot is rebuilt and swapped
    ws.searcher().refresh()
    ws.search("retry backoff delay")
    first.join(5)
    assert not first.is_alive()
    assert any(t.name == "codeloupe-file-summaries" and t.is_alive() for t in threading.enumerate())  # the new one's


def test_letting_a_searcher_go_stops_its_summaries_build_under_way(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A summary lane build already started when its searcher closes (the workspace closed, or its snapshot let
    go) stops at its next step: nothing of it is saved beside the index, and no error is logged."""
    import threading

    from codeloupe.search import _summaries_file

    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setattr(build, "BACKGROUND_START_DELAY_S", 0.0)
    ws = lexical_workspace(write(tmp_path / "repo", _helper_and_caller()))
    saved = _summaries_file(ws.store.path)
    assert not saved.exists()
    before = set(threading.enumerate())
    with build._lock(ws):  # the graph's build, which the summaries build waits for, held here
        ws.search("retry backoff delay")
        builders = [t for t in threading.enumerate()
                    if t.name in ("codeloupe-graph-build", "codeloupe-file-summaries") and t not in before]
        assert len(builders) == 2
        ws.release_searcher()
    for thread in builders:
        thread.join(60)
    assert not saved.exists()
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


def test_the_graphs_background_build_waits_for_the_first_snapshot(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    """An editor opening a file at start-up asks for its lenses while the first search snapshot is built; the
    graph's build they start waits for that snapshot rather than sharing the interpreter with it."""
    import threading

    from codeloupe.search import Searcher

    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setattr(build, "BACKGROUND_START_DELAY_S", 0.0)
    root = write(tmp_path / "repo", _helper_and_caller())
    lexical_workspace(root).close()
    building, finish = threading.Event(), threading.Event()
    real_build = Searcher._build_snapshot

    def held_build(self: Searcher, generation: int, *rest: object):  # the first snapshot's build, held until `finish`
        building.set()
        finish.wait(60)
        return real_build(self, generation, *rest)

    monkeypatch.setattr(Searcher, "_build_snapshot", held_build)
    ws = Workspace(root, overrides={"embed_provider": "none"})  # a new process on the index: nothing warm
    try:
        searching = threading.Thread(target=ws.search, args=("retry backoff delay",))
        searching.start()
        assert building.wait(60)
        assert build.load_graph(ws, allow_stale=True).paths == []  # starts the graph's build
        time.sleep(1.0)  # the tiny graph is built in milliseconds, were its build not waiting
        assert build.load_graph(ws, allow_stale=True).paths == []
        finish.set()
        searching.join(60)
        assert not searching.is_alive()  # the held search answered once its build went on
        deadline = time.monotonic() + 60
        while not build.load_graph(ws, allow_stale=True).paths:
            assert time.monotonic() < deadline, "the graph was never built"
            time.sleep(0.05)
    finally:
        finish.set()
        ws.close()


@pytest.mark.parametrize("fixture", ["python", "hub", "js", "go"])
def test_neighbour_words_read_from_columns_are_the_words_of_the_edges(
        fixture: str, tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    """The summary lane's words come from the edge table's columns and each caller's definitions read once;
    they are the words the materialised edges and decoded definitions give, in the same order."""
    import shutil

    from codeloupe.graph.evidence import neighbour_words

    root = tmp_path / fixture
    shutil.copytree(Path(__file__).parent / "fixtures" / "graph" / fixture, root)
    graph = build.load_graph(lexical_workspace(root))

    def around(definitions: list, line: int) -> str:
        holding = [d for d in sorted(definitions, key=lambda d: (d.start_line, -d.end_line))
                   if d.start_line <= line <= d.end_line]
        return holding[-1].name if holding else ""

    expected: dict[str, list[str]] = {}
    for i, path in enumerate(graph.paths):
        words: dict[str, None] = {}
        for edges in graph.out_edges[i].values():
            words.update((symbol, None) for edge in edges for symbol in edge.symbols)
        if i not in graph.gods:
            for j, edges in graph.in_edges[i].items():
                words[graph.paths[j].rsplit("/", 1)[-1].rsplit(".", 1)[0]] = None
                words.update((name, None) for e in edges if (name := around(graph.definitions[j], e.line)))
        if words:
            expected[path] = list(words)
    assert expected and neighbour_words(graph) == expected
    # A few files' words alone (what a delta view's summaries take in) are theirs among every file's.
    some = graph.paths[::3] + ["not/in/the/graph.py"]
    assert neighbour_words(graph, some) == {path: words for path, words in expected.items() if path in some}


def test_a_newer_graph_leaves_a_delta_views_summaries_as_built(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    """After a save, a graph rebuilt before the next search (an agent's `graph` call, an editor's lenses) made
    the view's base rebuild its summaries over file ids the store no longer holds (the saved file's old one read
    as an empty document), so every file's summary score moved, and a ranking differed from a fresh index's
    until the full snapshot was rebuilt seconds later: the answer depended on the order of the calls."""
    root = write(tmp_path / "repo", _helper_and_caller())
    ws = lexical_workspace(root)
    query = "retry backoff delay pacing"
    ws.search(query)  # the full snapshot, its summaries built with the graph
    (root / "app/other.py").write_text("def unrelated(x):\n    # edited, no import changed\n    return x\n")
    ws.update_files([root / "app/other.py"])
    assert ws.searcher().snapshot().base is not None  # a delta view over the snapshot
    before = ws.searcher().lane_scores(query).files["summary"]
    build.load_graph(ws)  # what a graph call after the save does: the graph of the saved state
    ws.refresh_graph()
    after = ws.searcher().lane_scores(query).files["summary"]
    assert len(before) == len(after) and all((a == b).all() for a, b in zip(before, after, strict=True))
