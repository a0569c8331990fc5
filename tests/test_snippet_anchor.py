"""A snippet names the innermost definition holding its best line (what an editor labels a result with), from
what the workspace keeps between searches: per index state, and only for the lines searches landed on lately."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import codeloupe.api
from codeloupe.api import Workspace


def ledger(word: str, method: str) -> str:
    return f'''\
        """Ledger module."""


        class Ledger:
            """Keeps entries."""

            def opening(self):
                return 0

            def {method}(self, amount):
                def inner(value):
                    return value * 2
                marker = "{word}"
                return inner(amount), marker
        '''


def anchors(ws: Workspace, word: str) -> dict[str, str | None]:
    bundle = ws.search(word)
    return {hit.path: hit.chunks[0].snippet.anchor_symbol for hit in bundle.files
            if hit.chunks and word in hit.chunks[0].snippet.text}


def test_snippets_name_the_innermost_definition_across_more_files_than_are_kept(
        lexical_workspace: Callable[[Path], Workspace], make_tree: Callable[[dict[str, str]], Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codeloupe.api, "ANCHOR_LINES_KEPT", 2)
    words = {f"books{i}.py": (word, f"settle_{word}") for i, word in enumerate(["walrus", "pelican", "otter", "heron"])}
    root = make_tree({path: ledger(word, method) for path, (word, method) in words.items()})
    ws = lexical_workspace(root)
    for _ in range(2):  # the second round reads what the first kept, or what replaced it
        for path, (word, method) in words.items():
            assert anchors(ws, word) == {path: f"Ledger.{method}"}
    for path, (_, method) in words.items():  # one file at a time: the kept lines stay within the bound
        lines = {(path, 2): None, (path, 8): "Ledger.opening", (path, 10): f"Ledger.{method}",
                 (path, 13): f"Ledger.{method}", (path, 5): "Ledger"}
        for line, name in lines.items():
            assert ws._innermost({line}) == {line: name}
            assert len(ws._anchor_names[1]) <= 2
        inner = ws._innermost({(path, 12)})[path, 12]  # the function defined inside the method
        assert inner is not None and inner.endswith("inner")
    # The index moves on: a definition renamed is named by its new name, however many lines are kept.
    monkeypatch.setattr(codeloupe.api, "ANCHOR_LINES_KEPT", 100)
    assert anchors(ws, "walrus") == {"books0.py": "Ledger.settle_walrus"}
    (root / "books0.py").write_text(textwrap.dedent(ledger("walrus", "reconcile")))
    ws.index()
    assert anchors(ws, "walrus") == {"books0.py": "Ledger.reconcile"}


def test_definitions_holding_many_lines_stay_within_sqlites_variable_limit(
        lexical_workspace: Callable[[Path], Workspace], make_tree: Callable[[dict[str, str]], Path]) -> None:
    """Lines are asked for in statements of bounded size: an SQLite built with the old default of 999 bound
    variables (two per line asked) answers hundreds of lines as it answers one."""
    import sqlite3

    root = make_tree({f"books{i}.py": ledger(f"word{i}", f"settle_{i}") for i in range(4)})
    ws = lexical_workspace(root)
    ws.index()
    ws.store._conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    lines = [(f"books{i}.py", line) for i in range(4) for line in range(1, 151)]
    found = ws.store.definitions_holding(lines)
    assert found == {pair: ws.store.definitions_holding([pair])[pair] for pair in lines}
    assert sorted(found["books2.py", 13]) == [(4, 14, "Ledger", ""), (10, 14, "settle_2", "Ledger")]


def test_a_snippet_of_a_file_saved_since_the_snapshot_centres_on_the_query_s_word(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    """A word only a file saved since the last full build holds is still the snippet's anchor (the base index's
    statistics do not know it: the snippet opened at the chunk's first line)."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "ledger.py").write_text(textwrap.dedent(ledger("plainword", "settle")))
    ws = lexical_workspace(root)
    ws.search("plainword")  # the base snapshot is built
    filler = "".join(f"    step_{n} = {n}\n" for n in range(30))
    (root / "fresh.py").write_text(f"def reconcile():\n{filler}    marker = 'zanzibarquux'\n    return marker\n")
    ws.update_files(["fresh.py"])
    hit = next(h for h in ws.search("zanzibarquux").files if h.path == "fresh.py")
    assert hit.chunks[0].snippet.anchor_line == 32
