"""The search snapshot's inputs (chunk table, file rows, symbol table) saved beside the index: a restarted
process loads them and gets the snapshot a rebuild from the store would give; a stale or damaged file is
rebuilt, never trusted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.lanes.symbols import Postings
from codeloupe.saved import load_arrays, save_arrays, unpack_strings
from codeloupe.search import FILE_KINDS
from codeloupe.snapshot_file import SNAPSHOT_FILE_VERSION, load_snapshot_inputs, snapshot_file

FILES = {
    "pkg/models.py": '''\
        """Accounts and their sessions."""


        class Account:
            """A user account."""

            def check_password(self, password: str) -> bool:
                return password == "secret"

            def open_session(self) -> "Session":
                return Session(self)


        class Session:
            def __init__(self, account: Account) -> None:
                self.account = account
        ''',
    "pkg/cli.py": '''\
        import argparse


        def parse_arguments(argv):
            """Parse the command line arguments."""
            parser = argparse.ArgumentParser()
            parser.add_argument("--verbose", action="store_true")
            return parser.parse_args(argv)
        ''',
    "web/routes.js": '''\
        function registerRoutes(app) {
          app.get('/health', (req, res) => res.send('ok'));
        }
        module.exports = { registerRoutes };
        ''',
    "tests/test_models.py": '''\
        from pkg.models import Account


        def test_check_password():
            assert Account().check_password("secret")
        ''',
    "docs/guide.md": '''\
        # Guide

        Sessions are opened after the password check.
        ''',
}
QUERIES = ("Account.check_password", "parse the command line arguments", "registerRoutes", "session")


def _open(root: Path) -> Workspace:
    return Workspace(root, overrides={"embed_provider": "none"})


def _facts(ws: Workspace) -> dict:
    """Everything a query reads from the snapshot, as plain values."""
    snap = ws.searcher().snapshot()
    table, symbols = snap.table, snap.symbols
    return {
        "table": [getattr(table, name).tolist() if isinstance(getattr(table, name), np.ndarray)
                  else list(getattr(table, name)) for name in ("ids", "file_ids", "start_lines", "end_lines",
                                                               "kinds", "names", "breadcrumbs", "symbols", "texts")],
        "maps": [snap.file_paths, snap.file_languages, snap.file_is_doc, snap.chunk_paths, snap.chunk_is_doc.tolist(),
                 snap.chunk_kind.tolist(), snap.file_kind, snap.by_basename, snap.path_to_file,
                 snap.file_chunk_rows],
        "symbols": [_postings(symbols.by_name), _postings(symbols.by_lower), _postings(symbols.by_qualified),
                    symbols._start_keys.tolist(), symbols._start_rows.tolist(), symbols.n_chunks],
        "answers": [[(f.path, [c.start_line for c in f.chunks]) for f in ws.search(q).files] for q in QUERIES],
        "file_lane": [snap.file_index()[0].tolist(),
                      snap.file_index()[1].scores(["password", "session", "routes", "arguments"]).round(5).tolist()],
    }


def _postings(postings: Postings) -> dict[str, list[int]]:
    arrays = postings.arrays("map")
    return {key: postings.get(key) for key in unpack_strings(arrays["map_keys"], arrays["map_key_ends"])}


@pytest.fixture
def indexed(make_tree) -> Path:
    root = make_tree(FILES)
    ws = _open(root)
    ws.index()
    ws.search("warm up")  # builds the snapshot and saves what it was built from
    ws.close()
    return root


def _saved(root: Path) -> Path:
    ws = _open(root)
    path = snapshot_file(ws.store.path)
    ws.close()
    assert path.is_file()
    return path


def _rebuilt_facts(root: Path, saved: Path) -> dict:
    """The facts of a snapshot built from the store alone (the saved file moved away meanwhile)."""
    aside = saved.with_name(saved.name + ".aside")
    saved.replace(aside)
    ws = _open(root)
    facts = _facts(ws)
    ws.close()
    aside.replace(saved)
    return facts


def test_a_restart_loads_the_saved_snapshot_and_it_equals_a_rebuild(indexed: Path) -> None:
    saved = _saved(indexed)
    stamp = saved.stat().st_mtime_ns
    ws = _open(indexed)
    loaded = _facts(ws)
    ws.close()
    assert saved.stat().st_mtime_ns == stamp  # loaded, not rebuilt
    assert loaded == _rebuilt_facts(indexed, saved)
    assert loaded["answers"][0][0][0] == "pkg/models.py"
    assert loaded["symbols"][2]["account.check_password"]


def test_the_saved_snapshot_holds_no_chunk_text(indexed: Path) -> None:
    """The texts are in the index already: a loaded table reads them from the store (saving them too doubled
    the disk and the peak memory of a save at 40K files)."""
    saved = _saved(indexed)
    assert not [name for name in np.load(saved).files if "text" in name]
    assert b'return password == "secret"' not in saved.read_bytes()
    ws = _open(indexed)
    snap = ws.searcher().snapshot()
    assert any('return password == "secret"' in text for text in snap.table.texts)  # read from the store
    ws.close()


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _rewritten(path: Path, name: str, change) -> None:
    """A well-formed file for the right index state, with one array changed so it no longer fits."""
    stamp = str(np.load(path)["__stamp__"])
    arrays = load_arrays(path, stamp)
    assert arrays is not None
    arrays[name] = change(arrays[name])
    save_arrays(path, stamp, arrays)


def _rows_out_of_range(path: Path) -> None:
    _rewritten(path, "symbols_by_name_rows", lambda rows: rows + 10_000)


def _kinds_out_of_range(path: Path) -> None:
    _rewritten(path, "file_kind", lambda kinds: kinds + 100)


def _names_cut_short(path: Path) -> None:
    _rewritten(path, "table_names", lambda data: data[:-5])


def _not_a_zip(path: Path) -> None:
    path.write_bytes(b"not an archive")


@pytest.mark.parametrize("damage", [_truncate, _flip_a_byte, _rows_out_of_range, _kinds_out_of_range,
                                    _names_cut_short, _not_a_zip])
def test_a_damaged_saved_snapshot_is_rebuilt_never_trusted(indexed: Path, damage) -> None:
    saved = _saved(indexed)
    expected = _rebuilt_facts(indexed, saved)
    damage(saved)
    ws = _open(indexed)
    assert _facts(ws) == expected
    stamp = f"{ws.store.index_id}:{ws.store.generation('content')}"
    ws.close()
    assert load_snapshot_inputs(saved, stamp, len(FILE_KINDS), ws.store) is not None  # rewritten whole


def test_a_saved_snapshot_of_an_earlier_state_is_only_a_base_for_the_files_changed_since(
        indexed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file edited while no process had the index open: the next process starts from the snapshot saved for
    the state before the edit (re-tokenising every chunk took a minute and more at 40K files), never from the
    old file's rows. The language server searches it with the edited file beside it at once; a one-shot
    command makes the full snapshot from it first, tokenising only the edited file, and that snapshot is the
    one a rebuild from the store gives, saved for the new state."""
    from codeloupe.lanes import lexical

    saved = _saved(indexed)
    (indexed / "pkg/cli.py").write_text("def tokenize_input(text):\n    return text.split()\n")
    ws = _open(indexed)
    ws.index()  # no search: the saved files stay those of the state before the edit
    ws.close()
    server = Workspace(indexed, overrides={"embed_provider": "none"}, interim_answers=True)
    view = server.searcher().snapshot()
    assert view.base is not None and view.base.generation < view.generation
    assert server.search("tokenize_input").files[0].path == "pkg/cli.py"
    live_texts = [text for row, text in enumerate(view.table.texts) if view.live[row]]
    assert not any("parse_arguments" in text for text in live_texts)
    assert not view.symbols.definitions("parse_arguments") and view.symbols.definitions("tokenize_input")
    server.close()  # before its background rebuild: the saved files are still the earlier state's
    tokenised: list[int] = []
    real = lexical.count_terms
    monkeypatch.setattr(lexical, "count_terms", lambda docs: (tokenised.append(len(d := list(docs))), real(d))[1])
    ws = _open(indexed)
    facts = _facts(ws)
    assert ws.searcher().snapshot().base is None
    assert tokenised[0] == 1  # the edited file's one chunk; the rest came from the earlier snapshot
    stamp = f"{ws.store.index_id}:{ws.store.generation('content')}"
    ws.close()
    monkeypatch.setattr(lexical, "count_terms", real)
    assert facts == _rebuilt_facts(indexed, saved)
    assert load_snapshot_inputs(saved, stamp, len(FILE_KINDS), ws.store) is not None
    assert str(np.load(saved)["__stamp__"]).startswith(f"{SNAPSHOT_FILE_VERSION}:")


def test_a_rebuilt_index_never_takes_the_old_index_s_saved_snapshot(indexed: Path) -> None:
    saved = _saved(indexed)
    old = saved.read_bytes()
    ws = _open(indexed)
    index_path = ws.store.path
    ws.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(index_path) + suffix).unlink(missing_ok=True)
    ws = _open(indexed)  # a new, empty index file at the same place
    ws.index()
    ws.close()
    saved.write_bytes(old)
    ws = _open(indexed)
    facts = _facts(ws)
    ws.close()
    assert facts == _rebuilt_facts(indexed, saved)


@pytest.mark.parametrize("damage", [_truncate, _flip_a_byte])
def test_a_damaged_saved_lexical_index_is_rebuilt_never_trusted(indexed: Path, damage) -> None:
    saved = _saved(indexed)
    lexical = saved.with_name(saved.name.replace(".snapshot.npz", ".bm25.npz"))
    expected = _rebuilt_facts(indexed, saved)
    damage(lexical)
    ws = _open(indexed)
    assert _facts(ws) == expected
    ws.close()
    assert np.load(lexical)["n_docs"][0] == len(expected["table"][0])  # rewritten whole


def test_packed_strings_read_back_every_string_of_any_script() -> None:
    from codeloupe.saved import pack_strings, unpack_strings

    strings = ["def f():\n    return 1\n", "", "naïve café ☕", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "plain"]
    assert unpack_strings(*pack_strings(strings)) == strings
    assert unpack_strings(*pack_strings(["ascii", "only"])) == ["ascii", "only"]
    data, ends = pack_strings(strings)
    with pytest.raises(ValueError):
        unpack_strings(data[:-1], ends)


def test_the_per_chunk_maps_agree_with_the_chunk_table(indexed: Path) -> None:
    """The per-chunk columns are gathered from per-file arrays; each must say what its chunk's file row says."""
    ws = _open(indexed)
    snap = ws.searcher().snapshot()
    file_ids = snap.table.file_ids.tolist()
    assert snap.chunk_paths == [snap.file_paths[f] for f in file_ids]
    assert snap.chunk_is_doc.tolist() == [snap.file_is_doc[f] for f in file_ids]
    assert snap.chunk_kind.tolist() == [snap.file_kind[f] for f in file_ids]
    assert snap.file_chunk_rows == {f: [i for i, g in enumerate(file_ids) if g == f] for f in set(file_ids)}
    assert snap.file_kind[snap.path_to_file["tests/test_models.py"]] == FILE_KINDS.index("test")
    assert snap.chunk_is_doc[snap.file_chunk_rows[snap.path_to_file["docs/guide.md"]]].all()
    ws.close()


def _file_lane_saved(root: Path) -> Path:
    return _saved(root).with_name(_saved(root).name.replace(".snapshot.npz", ".files.npz"))


def test_a_restart_loads_the_saved_file_lane_index(indexed: Path) -> None:
    """A question's file lane sums every chunk's counts per file (seconds at 40K files): a restarted editor's
    first question loads the sum saved beside the index instead."""
    saved = _file_lane_saved(indexed)
    assert saved.is_file()  # the fixture's question used the file lane
    written = saved.stat().st_mtime_ns
    ws = _open(indexed)
    loaded = _facts(ws)["file_lane"]
    ws.close()
    assert saved.stat().st_mtime_ns == written  # loaded, not rebuilt
    saved.unlink()
    ws = _open(indexed)
    assert _facts(ws)["file_lane"] == loaded
    ws.close()


@pytest.mark.parametrize("damage", [_truncate, _flip_a_byte, _not_a_zip])
def test_a_damaged_saved_file_lane_index_is_rebuilt_never_trusted(indexed: Path, damage) -> None:
    saved = _file_lane_saved(indexed)
    expected = _rebuilt_facts(indexed, _saved(indexed))
    damage(saved)
    ws = _open(indexed)
    assert _facts(ws) == expected
    ws.close()
    assert np.load(saved)["n_docs"][0] == len(expected["file_lane"][0])  # rewritten whole


def _index_in_a_terminal(root: Path, *flags: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "codeloupe", "index", str(root), "--embed-provider", "none",
                           "--json", *flags], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _prepared_files(ws: Workspace) -> list[Path]:
    """What `codeloupe index` saves for the next process: the snapshot's inputs, the chunk and file lanes'
    indexes, the graph and the summary lane's index."""
    index = ws.store.path
    return [snapshot_file(index), *(index.with_name(index.name + suffix)
                                    for suffix in (".bm25.npz", ".files.npz", ".graph.npz", ".summaries.npz"))]


def test_a_terminal_index_saves_what_the_next_search_would_build(make_tree) -> None:
    """`codeloupe index` builds and saves the search snapshot and the graph before it exits: the editor that
    opens the index next loads them instead of building them (at 40K files, most of its first answer and then
    tens of seconds beside its next ones). A re-index that changed nothing builds nothing; one that changed a
    file saves those of the new state."""
    root = make_tree(FILES)
    assert _index_in_a_terminal(root, "--no-prepare")["prepared_s"] is None
    ws = _open(root)
    assert not ws.searcher().prepared()
    saved = _prepared_files(ws)
    assert not any(path.exists() for path in saved)
    ws.close()
    assert _index_in_a_terminal(root)["prepared_s"] is not None
    stamps = [path.stat().st_mtime_ns for path in saved]
    ws = _open(root)
    assert ws.searcher().prepared()
    bundle = ws.search("parse the command line arguments")
    assert bundle.files[0].path == "pkg/cli.py"
    assert [s.ready for s in bundle.lanes if s.name == "summary"] == [True]
    ws.close()
    assert [path.stat().st_mtime_ns for path in saved] == stamps  # loaded, nothing built again

    assert _index_in_a_terminal(root)["prepared_s"] is None  # nothing changed: nothing built
    assert [path.stat().st_mtime_ns for path in saved] == stamps
    (root / "pkg" / "cli.py").write_text("def parse_options(argv):\n    return argv\n")
    report = _index_in_a_terminal(root)
    assert report["files_indexed"] == 1 and report["prepared_s"] is not None
    stamps = [path.stat().st_mtime_ns for path in saved]
    ws = _open(root)
    assert ws.searcher().prepared()
    assert ws.search("parse_options").files[0].path == "pkg/cli.py"
    ws.close()
    assert [path.stat().st_mtime_ns for path in saved] == stamps


@pytest.mark.parametrize("files", [{}, {"docs/guide.md": "# Guide\n\nSessions.\n"}], ids=["empty", "no code"])
def test_a_terminal_index_of_a_workspace_without_code_prepares_once(make_tree, files: dict[str, str]) -> None:
    """No code file: an empty graph, summaries made with none; a re-index that changed nothing builds nothing."""
    root = make_tree(files)
    assert _index_in_a_terminal(root)["prepared_s"] is not None
    assert _index_in_a_terminal(root)["prepared_s"] is None


def test_a_large_workspace_s_summaries_wait_for_its_graph_and_load_with_it(make_tree, monkeypatch) -> None:
    """Past `QUERY_BUILD_MAX_FILES` files the graph and the summary lane are made off the query path, each on its
    own thread. The summaries wait for the graph being loaded, so a restarted editor loads the ones saved with
    it, rather than building them without its words and again with them (7 s each at 40K files)."""
    import threading

    from codeloupe.graph import build

    root = make_tree(FILES)
    assert _index_in_a_terminal(root)["prepared_s"] is not None
    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    monkeypatch.setattr(build, "BACKGROUND_START_DELAY_S", 0.0)
    ws = _open(root)
    try:
        saved = _prepared_files(ws)
        stamps = [path.stat().st_mtime_ns for path in saved]
        ws.search("session")  # starts the graph's load and the summaries, each on its own thread
        for thread in [t for t in threading.enumerate()
                       if t.name in ("codeloupe-graph-build", "codeloupe-file-summaries")]:
            thread.join(60)
        assert [path.stat().st_mtime_ns for path in saved] == stamps  # every one loaded, none built
        assert [s.ready for s in ws.search("session").lanes if s.name == "summary"] == [True]
    finally:
        ws.close()


def _summaries_saved(root: Path) -> Path:
    return _saved(root).with_name(_saved(root).name.replace(".snapshot.npz", ".summaries.npz"))


def test_a_restart_loads_the_saved_file_summaries(indexed: Path) -> None:
    """The summary lane tokenises every file's skeleton and its graph neighbours' names (seconds at 40K files,
    most of a shared repository's first search): a restarted process loads the index saved for the same index
    state and graph instead."""
    saved = _summaries_saved(indexed)
    assert saved.is_file()  # the fixture's question used the summary lane
    written = saved.stat()
    ws = _open(indexed)
    answers = _facts(ws)["answers"]
    ws.close()
    assert (saved.stat().st_ino, saved.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)  # not rebuilt
    saved.unlink()
    ws = _open(indexed)
    assert _facts(ws)["answers"] == answers
    ws.close()
    assert saved.is_file()


@pytest.mark.parametrize("damage", [_truncate, _flip_a_byte, _not_a_zip])
def test_damaged_saved_file_summaries_are_rebuilt_never_trusted(indexed: Path, damage) -> None:
    saved = _summaries_saved(indexed)
    ws = _open(indexed)
    expected = _facts(ws)["answers"]
    ws.close()
    damage(saved)
    ws = _open(indexed)
    assert _facts(ws)["answers"] == expected
    ws.close()
    assert np.load(saved)["n_docs"][0] > 0  # rewritten whole


def _entities_saved(root: Path) -> Path:
    return _saved(root).with_name(_saved(root).name.replace(".snapshot.npz", ".entities.npz"))


def _entity_lane(ws: Workspace) -> list:
    """The entity lane's documents and its scores for a bug report's names (what issue mode ranks files by)."""
    file_ids, index = ws.searcher().snapshot().entity_index(ws)
    return [file_ids.tolist(), index.scores(["account", "check", "password", "register", "routes"]).round(6).tolist()]


def test_a_restart_loads_the_saved_entity_lane_index(indexed: Path) -> None:
    """Issue mode's entity lane tokenises every file's definitions (a third of a shared repository's first
    answer to a bug report): a restarted process loads the index saved for the same index state instead."""
    ws = _open(indexed)
    built = _entity_lane(ws)
    ws.close()
    saved = _entities_saved(indexed)
    written = saved.stat()
    ws = _open(indexed)
    assert _entity_lane(ws) == built
    ws.close()
    assert (saved.stat().st_ino, saved.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)  # not rebuilt
    assert max(built[1]) > 0


@pytest.mark.parametrize("damage", [_truncate, _flip_a_byte, _not_a_zip])
def test_a_damaged_saved_entity_lane_index_is_rebuilt_never_trusted(indexed: Path, damage) -> None:
    ws = _open(indexed)
    expected = _entity_lane(ws)
    ws.close()
    saved = _entities_saved(indexed)
    damage(saved)
    ws = _open(indexed)
    assert _entity_lane(ws) == expected
    ws.close()
    assert np.load(saved)["n_docs"][0] == len(expected[0])  # rewritten whole
