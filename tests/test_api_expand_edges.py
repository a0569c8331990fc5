"""`Workspace.expand` as an agent calls it through MCP: an end line alone, a start past the end, and a name defined
several times in a row (overloads), which no qualified name could pick out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeloupe.api import GraphError, GraphRequest, WorkspaceError

SOURCE = '''from typing import overload


class Loader:
    @overload
    def load(self, key: int) -> int: ...

    @overload
    def load(self, key: str) -> str: ...

    def load(self, key):
        """The implementation."""
        return key


def load(key):
    return Loader().load(key)


def helper():
    return 1


def load(key):  # redefined further down: apart from the first
    return key
'''


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "loader.py").write_text(SOURCE)
    return tmp_path / "ws"


def test_an_end_line_alone_reads_from_the_start_of_the_file(root: Path, lexical_workspace) -> None:
    """`end_line` without `start_line` was ignored: the whole file came back."""
    ws = lexical_workspace(root)
    head = ws.expand("loader.py", end_line=3)
    assert (head.start_line, head.end_line, head.text) == (1, 3, "".join(SOURCE.splitlines(keepends=True)[:3]))


def test_a_start_past_the_end_says_the_file_is_shorter(root: Path, lexical_workspace) -> None:
    """A start line past the end read "lines 500-25 end before they start", a range the caller never asked."""
    ws = lexical_workspace(root)
    with pytest.raises(WorkspaceError, match=r"lines from 500 are outside the file \(1-25\)"):
        ws.expand("loader.py", 500)
    with pytest.raises(WorkspaceError, match="lines 5-2 end before they start"):
        ws.expand("loader.py", 5, 2)


def test_overloads_are_read_together_and_names_apart_are_told_how_to_choose(root: Path, lexical_workspace) -> None:
    """`Loader.load` (two typing overloads and the implementation) was refused as ambiguous with "pass the
    qualified name", which it already was: no call could read it by name."""
    ws = lexical_workspace(root)
    method = ws.expand("loader.py", symbol="Loader.load")
    assert (method.start_line, method.end_line, method.symbol) == (5, 13, "Loader.load")
    assert "def load(self, key):" in method.text and "def load(self, key: str) -> str: ..." in method.text
    # The two functions named `load` are apart (`helper` between them): the caller is told to pick one by line.
    with pytest.raises(WorkspaceError, match=r"load \(line 16\), load \(line 24\); pass anchor_line"):
        ws.expand("loader.py", symbol="load")
    assert ws.expand("loader.py", line=24).text == "def load(key):  # redefined further down: apart from the first\n    return key\n"


def test_an_ambiguous_name_is_read_with_the_anchor_line_the_refusal_asks_for(root: Path, lexical_workspace) -> None:
    """Told "pass anchor_line inside the one to read", a caller that kept the name and added the line (MCP's
    `symbol` and `anchor_line`, HTTP's `symbol` and `line`) was refused again in the same words: with a name, the
    line was never read."""
    ws = lexical_workspace(root)
    later = ws.expand("loader.py", symbol="load", line=25)
    assert (later.start_line, later.end_line, later.symbol) == (24, 25, "load")
    assert ws.expand("loader.py", symbol="load", line=16).start_line == 16
    with pytest.raises(WorkspaceError, match=r"'load' is ambiguous: .*; line 20 is in none of them"):
        ws.expand("loader.py", symbol="load", line=20)


def test_lines_are_read_in_the_encoding_the_index_read_the_file_in(tmp_path: Path, lexical_workspace) -> None:
    """A Windows-1252 file (indexed as such: search and locate showed `café`) was read back as UTF-8 for expand,
    `codeloupe get` and MCP's file resource, each accented letter a U+FFFD; a UTF-16 file came back as NULs and
    a UTF-8 file's byte-order mark as a character before its first line's code (locate's column counted without
    it)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "latin.py").write_bytes("# café, £5\ndef latin():\n    return 'naïve'\n".encode("cp1252"))
    (root / "wide.py").write_bytes("def wide():\n    return 'ü'\n".encode("utf-16"))
    (root / "bom.py").write_bytes(b"\xef\xbb\xbfdef bom():\n    return 1\n")
    ws = lexical_workspace(root)
    assert ws.expand("latin.py").text == "# café, £5\ndef latin():\n    return 'naïve'\n"
    assert ws.expand("latin.py", symbol="latin").text == "def latin():\n    return 'naïve'\n"
    assert ws.expand("wide.py", 2, 2).text == "    return 'ü'\n"
    assert ws.expand("bom.py", 1, 1).text == "def bom():\n"
    assert [(loc.line, loc.column) for loc in ws.locate("def bom").locations] == [(1, 1)]


def test_a_definition_of_a_file_changed_since_it_was_indexed_is_refused_not_read_at_its_old_lines(
        root: Path, lexical_workspace) -> None:
    """The definition's lines come from the index and its text from disk: a file edited since it was indexed (an
    agent's edit, then `expand` within the second MCP and HTTP wait before they index again) answered with other
    lines under the definition's name (3 lines inserted above `helper`: the end of another function)."""
    ws = lexical_workspace(root)
    assert ws.expand("loader.py", symbol="helper").text == "def helper():\n    return 1\n"
    (root / "loader.py").write_text("# one\n# two\n# three\n" + SOURCE)
    for asked in ({"symbol": "helper"}, {"line": 21}):
        with pytest.raises(WorkspaceError, match="loader.py: changed on disk since it was indexed"):
            ws.expand("loader.py", **asked)
    assert ws.expand("loader.py", 23, 24).text == "def helper():\n    return 1\n"  # lines asked by number are read
    ws.update_files(["loader.py"])
    assert ws.expand("loader.py", symbol="helper").text == "def helper():\n    return 1\n"


def test_a_file_swapped_for_a_link_to_a_secret_is_not_read_where_answers_go_to_agents(
        tmp_path: Path, lexical_workspace) -> None:
    """An indexed file replaced on disk by a link to a `.env` since it was indexed (a branch checked out) is read
    as the `.env`: every answer of a workspace that withholds secrets refuses it, whichever name led there (the
    graph's node read its chunks' lines under the indexed name)."""
    key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
    (tmp_path / ".env").write_text(f"STRIPE_API_KEY={key}\n")
    (tmp_path / "store.py").write_text("class SessionStore:\n    pass\n")
    (tmp_path / "payments.py").write_text("from store import SessionStore\n\n\ndef pay():\n    return SessionStore()\n")
    ws = lexical_workspace(tmp_path)
    ws.withholds_secrets = True
    (tmp_path / "payments.py").unlink()
    (tmp_path / "payments.py").symlink_to(".env")
    node = ws.graph(GraphRequest("payments.py", "", "")).to_dict()
    assert key not in json.dumps(node) and node["chunks"] == [], node
    with pytest.raises(WorkspaceError, match=r"^\.env: withheld: the file looks like a secret"):
        ws.read_lines("payments.py")


def test_a_link_loop_named_to_any_answer_is_a_clear_refusal(tmp_path: Path, lexical_workspace) -> None:
    """Two links naming each other (`a -> b -> a`), named by the user or an agent: expand, a search's scope, the
    graph and related ended the command with a traceback ("Symlink loop"), an MCP call with no answer."""
    (tmp_path / "app.py").write_text("def hello():\n    return 1\n")
    (tmp_path / "loop_a").symlink_to("loop_b")
    (tmp_path / "loop_b").symlink_to("loop_a")
    ws = lexical_workspace(tmp_path)
    refused = r"loop_a: a symbolic link that leads to itself$"
    with pytest.raises(WorkspaceError, match=refused):
        ws.expand("loop_a")
    with pytest.raises(WorkspaceError, match=refused):
        ws.relative(tmp_path / "loop_a")  # what the CLI's `search --scope`, `related` and `graph --path` call
    with pytest.raises(GraphError, match="nothing in the workspace matches 'loop_a'"):  # nor a concept
        ws.graph(GraphRequest("loop_a", "", ""))
