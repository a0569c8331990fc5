"""`Workspace.locate` and `Workspace.expand`: exact text over the indexed chunks, and spans of indexed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeloupe.api import WorkspaceError

SOURCE = '''class Cache:
    def get(self, key):
        return self.items.get(key)

    def get_many(self, keys):
        return [self.get(k) for k in keys]


def getter():
    return Cache().get("x")
'''


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "cache.py").write_text(SOURCE)
    (tmp_path / "ws" / ".gitignore").write_text("notes.txt\n")
    (tmp_path / "ws" / "notes.txt").write_text("get me\n")
    return tmp_path / "ws"


def test_locate_finds_exact_text_or_whole_identifiers_in_path_and_line_order(root: Path, lexical_workspace) -> None:
    ws = lexical_workspace(root)
    every = ws.locate("get")
    assert [(loc.line, loc.column) for loc in every.locations] == [(2, 9), (3, 27), (5, 9), (6, 22), (9, 5), (10, 20)]
    assert every.total == 6 and every.locations[0].text == "    def get(self, key):"
    whole = ws.locate("get", identifier=True)
    assert [loc.line for loc in whole.locations] == [2, 3, 6, 10]  # not get_many, not getter
    assert ws.locate("get", limit=2).total == 6 and len(ws.locate("get", limit=2).locations) == 2
    assert ws.locate("get me").total == 0  # an ignored file is not in the index, so never matches
    with pytest.raises(WorkspaceError):
        ws.locate("a\nb")


def test_an_identifier_with_punctuation_at_its_edge_is_whole_at_its_word_edges_only(root: Path,
                                                                                   lexical_workspace) -> None:
    """`get(` as an identifier (MCP's `identifier: true`, the CLI's `--identifier`) found only `def get(self, key):`
    of the calls: after the `(` it wanted no identifier character either, so `self.get(k)` was not a match. Only an
    edge that is an identifier character is held to a word boundary."""
    ws = lexical_workspace(root)
    assert [loc.line for loc in ws.locate("get(", identifier=True).locations] == [2, 3, 6, 10]
    assert [loc.line for loc in ws.locate(".get", identifier=True).locations] == [3, 6, 10]
    assert [loc.line for loc in ws.locate("(key)", identifier=True).locations] == [3]
    assert [loc.line for loc in ws.locate("get", identifier=True).locations] == [2, 3, 6, 10]  # not get_many


def test_each_location_names_the_innermost_definition_holding_its_line(root: Path, lexical_workspace) -> None:
    """A location carried only its chunk's breadcrumb, which names one definition of a chunk holding several
    (itsdangerous: a line of `Signer.unsign` under `class Signer > def __init__(...)`), and MCP's `locate` gave it
    as the line's enclosing definition."""
    (root / "notes.md").write_text("# Usage\n\nCall get to read a key.\n")
    ws = lexical_workspace(root)
    found = ws.locate("get")
    assert [(loc.line, loc.symbol) for loc in found.locations] == [
        (2, "Cache.get"), (3, "Cache.get"), (5, "Cache.get_many"), (6, "Cache.get_many"), (9, "getter"),
        (10, "getter"), (3, "")]  # notes.md: no definition holds its line
    assert len({loc.breadcrumb for loc in found.locations if loc.path == "cache.py"}) == 1  # one chunk for all


def test_locate_sees_a_saved_file_at_once_and_forgets_its_old_lines(root: Path, lexical_workspace) -> None:
    # Another file indexed after cache.py: a re-indexed file whose old row had the highest id gets the same id
    # back from SQLite, and the search snapshot's delta view then keeps its old chunks (reported, not fixed here).
    (root / "later.py").write_text("VALUE = 1\n")
    ws = lexical_workspace(root)
    assert ws.locate("get_many").total == 1
    (root / "cache.py").write_text(SOURCE.replace("get_many", "fetch_many"))
    ws.update_files(["cache.py"])
    assert ws.locate("get_many").total == 0 and ws.locate("fetch_many").total == 1


def test_expand_reads_a_range_a_symbol_or_the_definition_around_a_line(root: Path, lexical_workspace) -> None:
    ws = lexical_workspace(root)
    whole = ws.expand("cache.py")
    assert (whole.start_line, whole.end_line, whole.text) == (1, 10, SOURCE)
    clipped = ws.expand("cache.py", 9, 500)
    assert (clipped.start_line, clipped.end_line) == (9, 10)
    method = ws.expand("cache.py", symbol="Cache.get_many")
    assert (method.start_line, method.end_line, method.symbol) == (5, 6, "Cache.get_many")
    around = ws.expand("cache.py", line=3)
    assert (around.start_line, around.end_line, around.symbol) == (2, 3, "Cache.get")
    with pytest.raises(WorkspaceError, match="no symbol"):
        ws.expand("cache.py", symbol="nothing")
    with pytest.raises(WorkspaceError, match="lines 5-2 end before they start"):  # not "outside the file"
        ws.expand("cache.py", 5, 2)
    for path in ("notes.txt", "../ws/../notes.txt", "/etc/passwd", "missing.py"):
        with pytest.raises(WorkspaceError):
            ws.expand(path)
