"""The user's own git excludes file (`core.excludesFile`, else `~/.config/git/ignore`) applies in every repository,
below the repository's own rules, as in git: checked against what real git lists for the same tree and config."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codeloupe.discover import path_skip_reason, walk
from codeloupe.git_config import excludes_file_setting, user_excludes_file
from codeloupe.settings import Settings

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="compared with real git")


def write(root: Path, rel: str, text: str = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def git(root: Path, *args: str) -> str:
    """git with the same user environment discovery reads (HOME, XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL)."""
    env = {key: os.environ[key] for key in ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL") if key in os.environ}
    env.update(GIT_CONFIG_NOSYSTEM="1", PATH="/usr/bin:/bin")
    return subprocess.run([GIT, "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def paths(root: Path) -> list[str]:
    return [c.rel_path for c in walk(root, Settings()).candidates]


CONFIGS = [
    "[core]\n\texcludesFile = ~/.gitignore_global\n",
    "[Core]\nEXCLUDESFILE=/etc/ignore # a comment\n",
    '[core]\n  excludesfile = "/path/with spaces/ignore" ; comment\n',
    '[core] excludesFile = "/a\\"quoted\\"/x"\n',
    "[core]\n\texcludesFile = /first\n[user]\n\tname = x\n[core]\n\texcludesFile = /second\n",
    '[remote "core"]\n\texcludesFile = /not/core\n',
    "[core]\n\texcludesFile = /split/\\\nacross\n",
    "[core]\n\tbare = false\n",
]


@needs_git
@pytest.mark.parametrize("text", CONFIGS)
def test_the_setting_reads_as_git_reads_it(tmp_path: Path, text: str) -> None:
    config = write(tmp_path, "config", text)
    found = subprocess.run([GIT, "config", "--file", str(config), "--get", "core.excludesFile"],
                           capture_output=True, text=True)
    expected = found.stdout.rstrip("\n") if found.returncode == 0 else None
    assert excludes_file_setting(text) == expected


def test_where_the_file_is_found(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert user_excludes_file({"HOME": str(home)}) == home / ".config" / "git" / "ignore"
    assert user_excludes_file({"HOME": str(home), "XDG_CONFIG_HOME": "/xdg"}) == Path("/xdg/git/ignore")
    assert user_excludes_file({}) is None
    write(home, ".gitconfig", "[core]\n\texcludesFile = ~/.gitignore_global\n")
    assert user_excludes_file({"HOME": str(home)}) == home / ".gitignore_global"
    # ~/.gitconfig is read after the XDG config: the later one wins, as in git
    write(home, ".config/git/config", "[core]\n\texcludesFile = /from/xdg\n")
    assert user_excludes_file({"HOME": str(home)}) == home / ".gitignore_global"
    # GIT_CONFIG_GLOBAL replaces both; a relative value (git resolves it against its working directory) is none
    other = write(tmp_path, "other", "[core]\n\texcludesFile = relative/ignore\n")
    assert user_excludes_file({"HOME": str(home), "GIT_CONFIG_GLOBAL": str(other), "GIT_CONFIG_NOSYSTEM": "1"}) is None
    system = write(tmp_path, "system", "[core]\n\texcludesFile = /from/system\n")
    assert user_excludes_file({"GIT_CONFIG_SYSTEM": str(system), "GIT_CONFIG_GLOBAL": ""}) == Path("/from/system")


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose global excludes file (linked, as dotfile managers leave it) ignores editor files, a
    scratch folder and every `.env.local`."""
    home = tmp_path / "home"
    dotfiles = write(home, "dotfiles/gitignore", "*.swp\n.idea/\nscratch/\n.env.local\nnotes.md\n")
    write(home, ".gitconfig", "[core]\n\texcludesFile = ~/.gitignore_global\n")
    (home / ".gitignore_global").symlink_to(dotfiles)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home


@needs_git
def test_a_repository_lists_what_git_lists(tmp_path: Path, user_home: Path) -> None:
    root = tmp_path / "repo"
    for rel in ("app.py", "notes.md", "docs/notes.md", ".idea/workspace.xml", "src/app.py.swp", "scratch/try.py",
                ".env.local", "keep.swp", "tracked/scratch/kept.py"):
        write(root, rel)
    write(root, ".gitignore", "!keep.swp\n")  # the repository's own rules outrank the user's
    git(root, "init", "-q")
    git(root, "add", "-f", "tracked/scratch/kept.py")  # tracked: no ignore file hides it
    listed = git(root, "ls-files", "--cached", "--others", "--exclude-standard").split()
    expected = sorted(rel for rel in listed if rel != ".gitignore")  # ignore files are rules, not content
    assert paths(root) == expected
    assert {"keep.swp", "tracked/scratch/kept.py", "app.py"} <= set(expected)
    assert not {"notes.md", ".idea/workspace.xml", "scratch/try.py", ".env.local"} & set(expected)
    assert path_skip_reason(root, "scratch/try.py", Settings()) == "ignored directory"  # a save: the same rules
    # a package of the repository opened on its own
    write(root, "pkg/pyproject.toml", "[project]\nname = 'pkg'\n")
    write(root, "pkg/mod.py")
    write(root, "pkg/mod.py.swp")
    assert paths(root / "pkg") == ["mod.py", "pyproject.toml"]


def test_a_folder_outside_any_repository_keeps_every_file(tmp_path: Path, user_home: Path) -> None:
    root = tmp_path / "plain"
    for rel in ("app.py", "notes.md", "scratch/try.py"):
        write(root, rel)
    assert paths(root) == ["app.py", "notes.md", "scratch/try.py"]  # git applies it only inside a repository


def test_an_excludes_file_that_is_a_fifo_does_not_stall_the_walk(tmp_path: Path, user_home: Path) -> None:
    target = user_home / "dotfiles" / "gitignore"
    target.unlink()
    os.mkfifo(target)
    root = tmp_path / "repo"
    write(root, "app.py")
    (root / ".git").mkdir()
    assert paths(root) == ["app.py"]
