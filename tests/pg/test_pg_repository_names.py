"""What a repository of the shared index may be called (`codeloupe.repository_names`): every command refuses a
name that breaks the rule, with the rule, before anything is written; a folder whose name breaks it is named
with --repo; and repositories an older version made under such names stay listed, served and droppable."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest

from codeloupe.api import Workspace, WorkspaceError, open_shared
from codeloupe.cli import main
from codeloupe.repository_names import RULE
from codeloupe.store.postgres import repository_names

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
BAD_NAMES = [" ", "a,b", "../escape", "x" * 300, "bell\x07", "two\nlines", ".hidden", "-flag", "a/b"]


def _root(tmp_path: Path, name: str = "service") -> Path:
    root = tmp_path / name
    shutil.copytree(FIXTURES / "python", root)
    return root


@pytest.mark.parametrize("name", BAD_NAMES)
def test_every_command_refuses_a_name_that_breaks_the_rule(tmp_path: Path, pg_url: str, name: str,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = _root(tmp_path)
    for command in (["index", str(root)], ["index", str(root), "--queue"], ["stats", str(root)],
                    ["search", str(root), "charge the card"]):
        assert main([*command, "--store", pg_url, f"--repo={name}"]) == 2, command
        assert RULE in capsys.readouterr().err, command
    assert repository_names(pg_url) == []  # nothing was made
    with pytest.raises(WorkspaceError, match="is not a repository name"):
        open_shared([name], {"store_url": pg_url})  # serve --repo, search --repo


def test_only_index_adds_a_repository_a_command_that_answers_refuses_a_name_the_index_does_not_hold(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A mistyped `--repo` on a command that answers (`search PATH "q" --store URL --repo typo`, stats, graph,
    flows, ...) added a repository under it: an empty one, or one the command's own index filled with the
    folder. Each now refuses it, naming the repositories the index holds, and adds nothing; `index` (queued or
    not) still adds one."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = _root(tmp_path)
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0
    capsys.readouterr()
    for command in (["search", str(root), "charge the card"], ["stats", str(root)], ["graph", str(root)],
                    ["flows", str(root)], ["ask", str(root), "how is a card charged"], ["locate", str(root), "charge"],
                    ["tour", str(root)], ["get", str(root), "src/shop/cart.py"],
                    ["related", str(root), "src/shop/cart.py"]):
        assert main([*command, "--store", pg_url, "--repo", "svcc"]) == 2, command
        err = capsys.readouterr().err
        assert "svcc: not in the shared index" in err and "(it holds svc)" in err and "codeloupe index" in err, err
        assert repository_names(pg_url) == ["svc"], command
    assert main(["stats", str(root), "--store", pg_url, "--repo", "svc"]) == 0  # a name it holds is read
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc2"]) == 0
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc3", "--queue"]) == 0
    assert repository_names(pg_url) == ["svc", "svc2", "svc3"]


def test_a_folder_whose_name_breaks_the_rule_is_named_with_repo(tmp_path: Path, pg_url: str,
                                                                capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = _root(tmp_path, "my service")
    assert main(["index", str(root), "--store", pg_url]) == 2
    err = capsys.readouterr().err
    assert "'my service' is not a repository name" in err and "--repo NAME" in err
    assert main(["index", str(root), "--store", pg_url, "--repo", "my-service"]) == 0
    assert repository_names(pg_url) == ["my-service"]


def test_repositories_made_under_names_the_rule_now_refuses_are_listed_served_and_dropped(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    ws = Workspace(_root(tmp_path), overrides={"embed_provider": "none", "store_url": pg_url})
    try:
        ws.index()
    finally:
        ws.close()
    with psycopg.connect(pg_url) as conn:  # what an older version let `index --repo` make
        conn.execute("UPDATE repositories SET name = ' '")
        conn.execute("INSERT INTO repositories (name, index_id) VALUES ('two\nlines', 'x'), ('a,b', 'y')")
    assert main(["admin", "--store", pg_url, "repos"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3  # one line a repository
    assert [line.split("  ")[0] for line in lines] == ["' '", "'a,b'", "'two\\nlines'"]
    served = open_shared([], {"store_url": pg_url, "embed_provider": "none"})
    try:
        assert [ws.store.counts()["files"] > 0 for ws in served] == [True, False, False]
        assert [ws.store.has_files() for ws in served] == [True, False, False]  # each repository's own files
    finally:
        for ws in served:
            ws.close()
    for name in (" ", "two\nlines", "a,b"):
        assert main(["admin", "--store", pg_url, "drop", name]) == 0
    assert repository_names(pg_url) == []
