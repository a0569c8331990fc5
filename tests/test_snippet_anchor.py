"""A snippet names the innermost definition holding its best line (what an editor labels a result with), from
definitions the workspace keeps between searches: per index state, and only for the files searches landed on
lately."""

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
    monkeypatch.setattr(codeloupe.api, "ANCHOR_FILES_KEPT", 2)
    words = {f"books{i}.py": (word, f"settle_{word}") for i, word in enumerate(["walrus", "pelican", "otter", "heron"])}
    root = make_tree({path: ledger(word, method) for path, (word, method) in words.items()})
    ws = lexical_workspace(root)
    for _ in range(2):  # the second round reads what the first kept, or what replaced it
        for path, (word, method) in words.items():
            assert anchors(ws, word) == {path: f"Ledger.{method}"}
    for path, (_, method) in words.items():  # one file at a time: the kept files stay within the bound
        assert ws._definitions_of({path})[path][2] == (10, 14, method, "Ledger")
        assert len(ws._anchor_symbols[1]) <= 2
    # The index moves on: a definition renamed is named by its new name, however many files are kept.
    monkeypatch.setattr(codeloupe.api, "ANCHOR_FILES_KEPT", 100)
    assert anchors(ws, "walrus") == {"books0.py": "Ledger.settle_walrus"}
    (root / "books0.py").write_text(textwrap.dedent(ledger("walrus", "reconcile")))
    ws.index()
    assert anchors(ws, "walrus") == {"books0.py": "Ledger.reconcile"}
