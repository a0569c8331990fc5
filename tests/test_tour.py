"""Entry points and the tour over a real index (lexical only: neither needs vectors or a model)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe.api import Workspace
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


def _saved_entry_points(ws: Workspace) -> tuple[Path, str]:
    from codeloupe.entrypoints import ENTRY_POINTS_FILE_VERSION

    store = ws.store
    return (store.path.with_name(store.path.name + ".entrypoints.npz"),
            f"{ENTRY_POINTS_FILE_VERSION}:{store.index_id}:{store.generation('content')}")


def test_entry_points_are_saved_for_the_next_process_and_only_for_their_index_state(ws: Workspace) -> None:
    from codeloupe.entrypoints import _encoded
    from codeloupe.saved import save_arrays

    found = ws.entry_points()
    path, stamp = _saved_entry_points(ws)
    assert path.is_file()
    root = ws.root
    ws.close()

    def next_process() -> list[EntryPoint]:
        opened = Workspace(root, overrides={"embed_provider": "none"})
        try:
            opened.index()
            return opened.entry_points()
        finally:
            opened.close()

    # What a new process answers is the saved file (not the files' texts read again): marked ones come back.
    marked = [dataclasses.replace(p, detail=f"saved: {p.detail}") for p in found]
    save_arrays(path, stamp, _encoded(marked))
    assert next_process() == marked
    # Saved ones that do not fit the index are found again: a path it does not hold, a kind out of range,
    # a truncated file.
    save_arrays(path, stamp, _encoded([dataclasses.replace(found[0], path="gone/away.py")]))
    assert next_process() == found
    for column, value in (("kind", 9), ("kind", -1), ("line", 0), ("path", 0xFF)):  # 0xFF: bytes not UTF-8
        arrays = _encoded(found)
        arrays[column] = arrays[column].copy()
        arrays[column][0] = value
        save_arrays(path, stamp, arrays)
        assert next_process() == found, (column, value)
    save_arrays(path, stamp, _encoded(marked))
    path.write_bytes(path.read_bytes()[:-40])
    assert next_process() == found
    # A change moves the index state: the saved file is stale, and the new guard is found.
    save_arrays(path, stamp, _encoded(marked))
    (root / "src/pkg/core.py").write_text('def load_config():\n    return {}\n\n\nif __name__ == "__main__":\n'
                                          "    load_config()\n")
    assert ("src/pkg/core.py", 5, "main guard") in [(p.path, p.line, p.kind) for p in next_process()]
