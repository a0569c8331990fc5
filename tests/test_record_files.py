"""Release notes and licences name every feature of a project: a docs question gets the page that explains the
feature first, and the changelog still in the bundle; a question about releases gets the changelog first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe import ranking
from codeloupe.api import Workspace
from codeloupe.search import file_kind

TREE = {
    "docs/guide.md": """\
        # Guide

        A login session expires after its idle timeout; each request renews it.
        """,
    "CHANGES.md": """\
        # Changes

        - 2.1.0: a login session expires after its idle timeout; each request renews the login session.
        """,
    "docs/install.md": """\
        # Installing

        Install the package with pip and run the server.
        """,
    "app/sessions.py": """\
        def renew(session):
            session.touch()
        """,
}


@pytest.mark.parametrize(("path", "language", "kind"), [
    ("CHANGES.md", "markdown", "record"), ("docs/changelog.rst", "rst", "record"), ("History.md", "markdown", "record"),
    ("LICENSE", "text", "record"), ("LICENSE-MIT.txt", "text", "record"), ("PKG-INFO", "text", "record"),
    ("NEWS", "text", "record"), ("AUTHORS.rst", "rst", "record"),
    ("docs/guide.md", "markdown", ""), ("docs/release-2.0.md", "markdown", ""), ("CONTRIBUTING.md", "markdown", ""),
    ("changes.py", "python", ""), ("history/model.py", "python", ""),
])
def test_what_counts_as_a_record(path: str, language: str, kind: str) -> None:
    assert file_kind(path, language) == kind


def test_a_docs_question_puts_the_page_before_the_changelog(
        make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = lexical_workspace(make_tree(TREE))
    question = "when does a login session expire and what renews it"
    paths = [h.path for h in ws.search(question, mode="docs").files]
    assert paths[:2] == ["docs/guide.md", "CHANGES.md"]  # demoted, never dropped (rule 2)
    # Without the demotion the changelog, which repeats the page's words, comes first: the scene is tight.
    monkeypatch.setitem(ranking.FILE_KIND_PENALTY, "record", 1.0)
    assert [h.path for h in ws.search(question, mode="docs").files][0] == "CHANGES.md"


def test_a_question_about_releases_gets_the_changelog(
        make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(make_tree(TREE))
    for question in ("in which release did login sessions start to expire",
                     "when did the session timeout change, version 2.1?"):
        assert [h.path for h in ws.search(question, mode="docs").files][0] == "CHANGES.md", question
