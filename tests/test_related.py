"""`find_related` (the chunks nearest to a span, in its language) and `search --prune` (flat chunks for scripts)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from chat_server import ChatServer
from codeloupe.api import Workspace, WorkspaceError
from codeloupe.cli import main as cli_main

FILES = {
    "app/users.py": '''\
        def load_user(name):
            """Read a user record from the users table."""
            return database.fetch("users", name)


        def render_banner(text):
            return "*" * len(text)
        ''',
    "app/orders.py": '''\
        def load_order(number):
            """Read an order record from the orders table."""
            return database.fetch("orders", number)
        ''',
    "app/colors.py": '''\
        def mix_colors(a, b):
            return (a + b) / 2
        ''',
    "web/users.js": '''\
        // Read a user record from the users table.
        function loadUser(name) { return database.fetch("users", name); }
        ''',
}


@pytest.fixture
def repo(make_tree: Callable[[dict[str, str]], Path]) -> Path:
    return make_tree(FILES)


def test_nearest_chunks_by_words_when_there_are_no_vectors(
        repo: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(repo)
    found = ws.find_related("app/users.py", 1, 3)
    assert (found.path, found.start_line, found.end_line, found.language, found.lane) == \
        ("app/users.py", 1, 3, "python", "lexical")
    paths = [(c.path, c.start_line) for c in found.chunks]
    assert paths[0] == ("app/orders.py", 1)  # "read ... record from the ... table", database.fetch
    assert ("app/users.py", 1) not in paths  # the anchor itself
    assert all(c.path.endswith(".py") for c in found.chunks)  # the JavaScript twin is another language
    assert [c.lanes for c in found.chunks] == [{"lexical": i} for i in range(1, len(found.chunks) + 1)]
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.find_related("../elsewhere.py")


def test_nearest_chunks_by_vectors_when_they_are_ready(repo: Path) -> None:
    with ChatServer() as server:  # its embeddings: deterministic vectors over loopback
        ws = Workspace(repo, overrides={"embed_provider": "openai", "embed_base_url": server.base_url,
                                        "embed_model": "scripted-embed", "embed_dimensions": 8})
        try:
            ws.index()
            ws.embed()
            found = ws.find_related("app/users.py", 1, 3, limit=2)
            assert found.lane == "dense" and len(found.chunks) == 2
            assert all(c.path.endswith(".py") and (c.path, c.start_line) != ("app/users.py", 1) for c in found.chunks)
            assert found.chunks[0].score >= found.chunks[1].score
        finally:
            ws.close()


def test_cli_related(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["related", str(repo), "app/users.py", "--lines", "1-3", "--embed-provider", "none",
                     "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["lane"] == "lexical" and data["chunks"][0]["path"] == "app/orders.py"
    assert cli_main(["related", str(repo), "app/users.py", "--lines", "x", "--embed-provider", "none"]) == 2


def test_search_prune_prints_the_ranked_chunks_only(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["search", str(repo), "read a user record", "--prune", "--embed-provider", "none"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["query"] == "read a user record" and out["chunks"]
    first = out["chunks"][0]
    assert set(first) == {"rank", "path", "start_line", "end_line", "anchor_line", "breadcrumb", "text",
                          "truncated", "text_start_line", "repository", "revision"}
    assert (first["repository"], first["revision"]) == ("", "")  # named only in a search across repositories
    assert [c["rank"] for c in out["chunks"]] == sorted(c["rank"] for c in out["chunks"])
    lines = (repo / first["path"]).read_text().splitlines(keepends=True)
    assert first["text"] == "".join(lines[first["text_start_line"] - 1:][:first["text"].count("\n")])
