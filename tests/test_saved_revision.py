"""The revision a save records in the shared index (`shared_index.saved_at`): the folder's commit, `-dirty` when a
file the save may write differs from it, as `git status` of those files alone says (a save compared the whole
folder would cost a walk of it; recorded at the repository's pin, a saved file was cited at a commit whose text
differs)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codeloupe.index import files_a_save_writes
from codeloupe.shared_index import workspace_commit

ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
       "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, env=ENV, capture_output=True,
                          text=True).stdout.strip()


def test_a_save_is_compared_with_the_commit_on_the_files_it_may_write_taken_literally(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.fail("git is not installed: CI has it")
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("clean.py", "edited.py", "*.py"):
        (root / name).write_text("x = 1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "c")
    head = _git(root, "rev-parse", "HEAD")
    (root / "edited.py").write_text("x = 2\n")
    (root / "new.py").write_text("y = 1\n")
    assert workspace_commit(root) == f"{head}-dirty"
    assert workspace_commit(root, ["clean.py"]) == head
    assert workspace_commit(root, ["*.py"]) == head  # the file of that name, not every .py file
    assert workspace_commit(root, ["clean.py", "edited.py"]) == f"{head}-dirty"
    assert workspace_commit(root, ["new.py"]) == f"{head}-dirty"  # untracked: in no commit
    assert workspace_commit(root, ["gone.py"]) == head  # neither in the commit nor on disk


def test_a_save_may_write_the_file_beside_a_saved_source_map_and_after_an_ignore_file_any_file() -> None:
    assert files_a_save_writes(["b.py", "dist/app.js.map"]) == ["b.py", "dist/app.js", "dist/app.js.map"]
    assert files_a_save_writes(["b.py", "src/.gitignore"]) is None
    assert files_a_save_writes([".git/info/exclude"]) is None
