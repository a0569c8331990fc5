"""Entry points and the tour over a real index (lexical only: neither needs vectors or a model)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import TOUR_ENTRY_POINTS, Workspace
from codeloupe.cli import main as cli_main
from codeloupe.entrypoints import location_shaped
from codeloupe.types import EntryPoint

FILES = {
    "package.json": json.dumps({"name": "tool", "main": "lib/index", "bin": {"tool": "./bin/tool.js"},
                                "scripts": {"serve": "node server/start.js --port 80", "lint": "eslint ."}}),
    "bin/tool.js": "const { run } = require('../lib/index');\nrun(process.argv);\n",
    "lib/index.js": "function run(argv) { return parseArgs(argv); }\nfunction parseArgs(a) { return a; }\n"
                    "module.exports = { run, parseArgs };\n",
    "server/start.js": "const { run } = require('../lib/index');\nrun([]);\n",
    "pyproject.toml": '[project]\nname = "pkg"\n[project.scripts]\npkg = "pkg.cli:entry"\n',
    "src/pkg/__init__.py": "",
    "src/pkg/cli.py": '''\
        from pkg.core import Engine, load_config


        def entry() -> None:
            Engine(load_config()).start()
        ''',
    "src/pkg/core.py": '''\
        class Engine:
            def __init__(self, config):
                self.config = config

            def start(self):
                return self.config


        def load_config():
            return {}
        ''',
    "src/pkg/worker.py": '''\
        from pkg.core import Engine, load_config


        def work():
            return Engine(load_config())


        if __name__ == "__main__":
            work()
        ''',
    "src/pkg/notes.py": "# The Engine and load_config are described in the README.\nVALUE = 1\n",
    "cmd/main.go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("Engine")\n}\n',
    "scripts/deploy.sh": "#!/bin/sh\necho deploying\n",
    "tests/test_core.py": 'from pkg.core import Engine\n\nif __name__ == "__main__":\n    Engine({})\n',
    "README.md": "# tool\n\nThe Engine reads load_config output.\n",
}


@pytest.fixture
def ws(make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace]) -> Workspace:
    return lexical_workspace(make_tree(FILES))


def test_entry_points_come_from_manifests_guards_mains_and_shebangs(ws: Workspace) -> None:
    found = [(p.path, p.line, p.kind) for p in ws.entry_points()]
    assert found == [
        ("bin/tool.js", 1, "manifest"),
        ("lib/index.js", 1, "manifest"),
        ("server/start.js", 1, "manifest"),
        ("src/pkg/cli.py", 4, "manifest"),  # [project.scripts] names the function: its line
        ("src/pkg/worker.py", 8, "main guard"),
        ("cmd/main.go", 5, "main function"),
        ("scripts/deploy.sh", 1, "shebang"),
    ]  # the test file's guard is not an entry point


def test_a_main_guard_and_a_shebang_after_lone_cr_breaks_are_where_the_editor_shows_them(
        make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace]) -> None:
    # Python reads a lone CR as a line break: the guard was not found after one (`^` matches after "\n" only),
    # and a line counted by "\n" alone was another line than the editor's.
    ws = lexical_workspace(make_tree({
        "tool.py": '#!/usr/bin/env python3\r"""A tool."""\r\rdef run():\r    pass\r\rif __name__ == "__main__":\r    run()\r',
        "mixed.py": 'import sys\r\nx = 1\ry = 2\nif __name__ == "__main__":\n    print(x, y)\n',
    }))
    found = {(p.path, p.kind): (p.line, p.detail) for p in ws.entry_points()}
    assert found[("tool.py", "main guard")][0] == 7
    assert found[("mixed.py", "main guard")][0] == 4
    assert found[("tool.py", "shebang")] == (1, "#!/usr/bin/env python3")


def test_a_location_shaped_query_gets_missing_entry_points_at_the_end(ws: Workspace) -> None:
    assert location_shaped("where does the CLI start") and location_shaped("which file is the entry point")
    assert not location_shaped("how is the config loaded") and not location_shaped("Engine")
    plain = ws.searcher().search("where does the CLI start")
    bundle = ws.search("where does the CLI start")
    searched = [h.path for h in plain.files]
    assert [h.path for h in bundle.files][:len(searched)] == searched  # nothing reordered or displaced
    added = bundle.files[len(searched):]
    assert added and all(h.via == "entry" and h.why.startswith("entry point: ") for h in added)
    assert "src/pkg/cli.py" in {h.path for h in bundle.files}  # the path names a word of the query
    assert [h.rank for h in bundle.files] == list(range(1, len(bundle.files) + 1))
    assert [h.path for h in ws.search("how is the config loaded").files] == \
        [h.path for h in ws.searcher().search("how is the config loaded").files]


def test_the_tour_ranks_names_by_the_files_that_mention_them(ws: Workspace) -> None:
    tour = ws.tour(limit=4)
    stops = [(s.name, s.path, s.mentions) for s in tour.stops]
    # Engine: cli.py, worker.py, tests/test_core.py (not core.py, which defines it; not the README, a doc;
    # not main.go, another language; not notes.py, whose line is a comment). load_config: cli.py, worker.py.
    assert stops[:2] == [("Engine", "src/pkg/core.py", 3), ("load_config", "src/pkg/core.py", 2)]
    assert {s.name for s in ws.tour(limit=50).stops} == {"Engine", "load_config", "run"}  # mentioned at all
    assert "main" not in {s.name for s in ws.tour(limit=50).stops}  # entry points are listed above the names
    assert [p.path for p in tour.entry_points] == [p.path for p in ws.entry_points()]


def test_cli_tour(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(ws.root)
    ws.close()
    assert cli_main(["tour", root, "--embed-provider", "none", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "src/pkg/cli.py:4  manifest" in out and "3 files  Engine" in out
    assert cli_main(["tour", root, "--embed-provider", "none", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stops"][0]["name"] == "Engine" and data["stops"][0]["mentions"] == 3


def guard_scripts(count: int) -> dict[str, str]:
    """`count` scripts with a `__main__` guard each, as a tree with no manifest has (the standard library)."""
    return {f"tools/script_{i:02}.py": f"def run_{i}():\n    return {i}\n\n\nif __name__ == '__main__':\n    run_{i}()\n"
            for i in range(count)}


def test_the_tour_lists_the_strongest_entry_points_and_counts_the_rest(
        make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace]) -> None:
    """MCP's `codeloupe://tour` cut the entry points to 30 by itself; /v1/tour, the CLI and the editors listed
    every one (the standard library's `__main__` guards: 34 KB of JSON before the names). The cut is the
    engine's now, with a default every surface uses."""
    ws = lexical_workspace(make_tree({**FILES, **guard_scripts(TOUR_ENTRY_POINTS)}))
    every = ws.entry_points()
    assert len(every) == TOUR_ENTRY_POINTS + 7  # FILES has 7
    tour = ws.tour()
    assert tour.entry_points == every[:TOUR_ENTRY_POINTS] and tour.entry_points_not_shown == 7
    assert [p.kind for p in tour.entry_points[:4]] == ["manifest"] * 4  # the strongest signal is kept
    more = ws.tour(entry_point_limit=TOUR_ENTRY_POINTS + 2)
    assert more.entry_points == every[:TOUR_ENTRY_POINTS + 2] and more.entry_points_not_shown == 5
    whole = ws.tour(entry_point_limit=len(every))
    assert whole.entry_points == every and whole.entry_points_not_shown == 0


def test_cli_tour_says_how_many_entry_points_it_left_out(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(ws.root)
    ws.close()
    assert cli_main(["tour", root, "--embed-provider", "none", "--entry-points", "2"]) == 0
    out = capsys.readouterr().out
    assert "lib/index.js:1  manifest" in out and "server/start.js" not in out and "  and 5 more (--entry-points" in out
    assert cli_main(["tour", root, "--embed-provider", "none", "--json", "--entry-points", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["entry_points"]) == 3 and data["entry_points_not_shown"] == 4
    assert cli_main(["tour", root, "--embed-provider", "none"]) == 0
    assert "more (--entry-points" not in capsys.readouterr().out  # 7 entry points: all listed


def _saved_entry_points(ws: Workspace) -> tuple[Path, str]:
    from codeloupe.entrypoints import ENTRY_POINTS_FILE_VERSION

    store = ws.store
    return store.path.with_name(store.path.name + ".entrypoints.npz"), f"{ENTRY_POINTS_FILE_VERSION}:{store.index_id}"


def _mark_saved(path: Path, stamp: str, mark: str = "saved: ") -> None:
    """Every saved finding's detail marked: an answer carrying the mark came from the saved file."""
    from codeloupe.entrypoints import _decoded, _encoded
    from codeloupe.saved import load_arrays, save_arrays

    saved = _decoded(load_arrays(path, stamp), "")
    assert saved is not None
    save_arrays(path, stamp, _encoded(dataclasses.replace(
        saved, findings=[f._replace(detail=mark + f.detail) for f in saved.findings])))


def _next_process(root: Path) -> list[EntryPoint]:
    opened = Workspace(root, overrides={"embed_provider": "none"})
    try:
        opened.index()
        return opened.entry_points()
    finally:
        opened.close()


def _every_file_read(ws: Workspace) -> list[EntryPoint]:
    """The entry points found from scratch (every file read), not from what was saved."""
    from codeloupe.entrypoints import file_findings, listed

    snap = ws.searcher().snapshot()
    return listed(file_findings(snap, None, ws.store.iter_symbol_rows()), snap, ws.store)


def _read_every_file(root: Path) -> list[EntryPoint]:
    opened = Workspace(root, overrides={"embed_provider": "none"})
    try:
        opened.index()
        return _every_file_read(opened)
    finally:
        opened.close()


def test_entry_points_are_saved_for_the_next_process(ws: Workspace) -> None:
    from codeloupe.entrypoints import _decoded, _encoded
    from codeloupe.saved import load_arrays, save_arrays

    found = ws.entry_points()
    path, stamp = _saved_entry_points(ws)
    assert path.is_file()
    root = ws.root
    ws.close()
    # What a new process answers is the saved file (not the files' texts read again): marked ones come back.
    _mark_saved(path, stamp)
    assert _next_process(root) == [dataclasses.replace(p, detail=f"saved: {p.detail}") for p in found]
    # Saved findings that do not fit together are found again: a finding of a file the saved ids do not cover,
    # a kind out of range, a line before the first, bytes that are not UTF-8, file ids out of order, a
    # truncated file.
    saved = _decoded(load_arrays(path, stamp), "")
    assert saved is not None
    files = saved.covered
    save_arrays(path, stamp, _encoded(dataclasses.replace(
        saved, covered=files[1:], findings=[f._replace(file_id=int(files[0])) for f in saved.findings])))
    assert _next_process(root) == found
    for column, value in (("kind", 9), ("kind", -1), ("line", 0), ("path", 0xFF), ("files", 10**9)):
        arrays = _encoded(saved)
        arrays[column] = arrays[column].copy()
        arrays[column][0] = value
        save_arrays(path, stamp, arrays)
        assert _next_process(root) == found, (column, value)
    for column in ("kind", "line", "file_id"):  # a column of floats that would pass the range checks
        arrays = _encoded(saved)
        arrays[column] = arrays[column].astype(np.float64)
        save_arrays(path, stamp, arrays)
        assert _next_process(root) == found, column
    save_arrays(path, stamp, _encoded(saved))
    path.write_bytes(path.read_bytes()[:-40])
    assert _next_process(root) == found


def test_after_changes_only_the_changed_files_are_read_and_the_list_is_what_reading_all_finds(
        ws: Workspace) -> None:
    """Saved findings are kept per file version: after saves, deletions, renames and new files only the files
    indexed since are read, and what the manifests name is looked up again (a target that appears later, a
    script's function that moved)."""
    root = ws.root
    assert ws.entry_points() == _read_every_file(root)
    path, stamp = _saved_entry_points(ws)
    ws.close()
    _mark_saved(path, stamp)
    package = json.loads(FILES["package.json"])
    package["bin"]["helper"] = "./bin/helper.js"  # not there yet
    (root / "package.json").write_text(json.dumps(package))
    (root / "src/pkg/core.py").write_text('def load_config():\n    return {}\n\n\nif __name__ == "__main__":\n'
                                          "    load_config()\n")
    (root / "src/pkg/cli.py").write_text("import os\n\n\ndef other():\n    pass\n\n\ndef entry():\n    pass\n")
    (root / "scripts/deploy.sh").rename(root / "scripts/ship.sh")
    (root / "cmd/main.go").write_text('package main\n\nfunc run() {\n}\n')  # its `main` gone
    (root / "tools").mkdir()
    (root / "tools/fmt.py").write_text("#!/usr/bin/env python3\nprint('fmt')\n")
    after = [(p.path, p.line, p.kind, p.detail) for p in _next_process(root)]
    unchanged = ("src/pkg/worker.py", "pyproject.toml")  # what these files say comes marked from the saved file
    assert after == [(p.path, p.line, p.kind, "saved: " + p.detail if p.path == unchanged[0]
                      or p.detail.startswith(unchanged[1]) else p.detail) for p in _read_every_file(root)]
    assert ("src/pkg/core.py", 5, "main guard") in [a[:3] for a in after]  # the saved file, read again
    assert ("src/pkg/cli.py", 8, "manifest") in [a[:3] for a in after]  # the script's function moved
    assert ("scripts/ship.sh", 1, "shebang") in [a[:3] for a in after]  # renamed
    assert not any(a[0] in {"scripts/deploy.sh", "cmd/main.go", "bin/helper.js"} for a in after)
    (root / "bin/helper.js").write_text("console.log('help')\n")  # the manifest, unchanged, now names a file
    assert ("bin/helper.js", 1, "manifest") in [(p.path, p.line, p.kind) for p in _next_process(root)]
    assert [dataclasses.replace(p, detail=p.detail.removeprefix("saved: ")) for p in _next_process(root)] == \
        _read_every_file(root)


def test_a_save_in_the_same_process_reads_only_the_saved_file(ws: Workspace) -> None:
    """The editor's path: a save seen through the search's delta view, in the process that listed the entry
    points before it, which keeps what every file said."""
    import sqlite3

    before = ws.entry_points()
    # The shell script's indexed text changed behind the engine's back (same file id): only a pass that reads
    # every file again would see it.
    with sqlite3.connect(ws.store.path) as db:
        db.execute("UPDATE chunks SET text = 'echo deploying\n' WHERE file_id ="
                   " (SELECT id FROM files WHERE path = 'scripts/deploy.sh')")
    (ws.root / "src/pkg/late.py").write_text('def late():\n    pass\n\n\nif __name__ == "__main__":\n    late()\n')
    (ws.root / "src/pkg/worker.py").unlink()
    ws.update_files(["src/pkg/late.py", "src/pkg/worker.py"])
    assert ws.searcher().snapshot().base is not None  # a delta view over the snapshot before the save
    after = ws.entry_points()
    assert ("scripts/deploy.sh", 1, "shebang") in [(p.path, p.line, p.kind) for p in after]  # not read again
    assert ("scripts/deploy.sh", 1, "shebang") not in [(p.path, p.line, p.kind) for p in _every_file_read(ws)]
    assert [p for p in after if p.path != "scripts/deploy.sh"] == _every_file_read(ws)
    assert {p.path for p in before} ^ {p.path for p in after} == {"src/pkg/late.py", "src/pkg/worker.py"}
