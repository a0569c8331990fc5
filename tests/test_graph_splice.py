"""A route's hops carry the code of the use site and of the definition, read from disk like ask's citations."""

from __future__ import annotations

from pathlib import Path

from codeloupe.graph import graph_path, render_text
from test_graph_engine import open_fixture


def disk(root: Path, path: str, a: int, b: int) -> str:
    return "".join((root / path).read_text().splitlines(keepends=True)[a - 1:b])


def test_hops_splice_the_use_and_the_definition_from_disk(tmp_path: Path) -> None:
    ws = open_fixture("hub", tmp_path)
    try:
        first = graph_path(ws, "app/a.py", "app/b.py").hops[0]
        use, definition = first.use_code, first.definition_code
        assert use is not None and definition is not None
        # The use (line 7, `return step_one()`) shown inside the definition that holds it: `start`.
        assert (use.path, use.start_line, use.end_line, use.symbol) == ("app/a.py", 5, 7, "start")
        assert use.text == disk(ws.root, "app/a.py", 5, 7) and "step_one()" in use.text
        assert (definition.path, definition.start_line, definition.end_line) == ("app/m1.py", 4, 5)
        assert definition.text == disk(ws.root, "app/m1.py", 4, 5)
        hop = first.to_dict()
        assert hop["useCode"]["text"] == use.text and hop["definitionCode"]["startLine"] == 4
        assert disk(ws.root, "app/m1.py", 4, 4).strip() in render_text(graph_path(ws, "app/a.py", "app/b.py"))

        # Edited since indexing: its lines no longer match the graph's, so its side shows no code.
        m1 = ws.root / "app/m1.py"
        m1.write_text("# moved down\n" + m1.read_text())
        edited = graph_path(ws, "app/a.py", "app/b.py").hops[0]
        assert edited.definition is not None and edited.definition_code is None
        assert edited.use_code is not None
    finally:
        ws.close()
