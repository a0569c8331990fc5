"""The git repository a folder is in, found and checked without running git, before the shared index runs git
there (`shared_index._git`).

A repository's own files steer git before any option can: its `.git/config` can include a FIFO
(`include.path`, `includeIf.<condition>.path`; git has no switch to turn includes off), which stalls every git
command there until its timeout, and its `core.worktree` can point git at another tree (`/`), which `git status`
then walks. So git runs only in a repository whose configuration files, their includes (to git's depth) and
`HEAD` are regular files or absent, and always with the work tree pinned to the folder holding `.git`
(`GIT_WORK_TREE` overrides `core.worktree`; git still finds the repository itself, ownership check included).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from codeloupe.git_config import CONFIG_MAX_BYTES, include_paths
from codeloupe.regular_file import read_head

_GIT_FILE_MAX_BYTES = 4096  # `.git` and `commondir` files hold one path
_INCLUDE_DEPTH = 10  # git's MAX_INCLUDE_DEPTH: deeper, git fails at once


@dataclass(frozen=True)
class GitRepository:
    """Where git is to run for a folder: the work tree (the folder holding `.git`, the folder or one above it)
    and the repository's git directory."""

    work_tree: Path
    git_dir: Path


class RepositoryRefused(Exception):
    """git must not run in this repository: the message says why."""


def repository_of(root: Path) -> GitRepository | None:
    """The repository `root` is in, nearest `.git` first as git looks for it (a directory, or a file saying
    `gitdir: PATH`); None when there is none. Raises `RepositoryRefused` when git would stall on one of its
    files (`_check`)."""
    folder = Path(os.path.abspath(root))
    for candidate in (folder, *folder.parents):
        git_dir = git_dir_of(candidate / ".git")
        if git_dir is not None:
            repository = GitRepository(candidate, git_dir)
            _check(repository)
            return repository
    return None


def git_dir_of(dot_git: Path) -> Path | None:
    """The git directory a work tree's `.git` names: itself when a directory, PATH when a file saying
    `gitdir: PATH` (a linked work tree, a submodule); None when there is none."""
    try:
        st = os.stat(dot_git, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return dot_git
    return _path_file(dot_git, "gitdir:") if stat.S_ISREG(st.st_mode) else None


def _path_file(path: Path, prefix: str = "") -> Path | None:
    """The path a one-line file (`.git`'s `gitdir: PATH`, `commondir`'s `PATH`) names, relative to its folder."""
    first = _first_line(path)
    if not first or not first.startswith(prefix):
        return None
    return path.parent / first[len(prefix):].strip()


def _first_line(path: Path) -> str:
    """A one-line git file's line ("" when it is empty, unreadable or not UTF-8); no link followed."""
    try:
        lines = read_head(path, _GIT_FILE_MAX_BYTES, follow_links=False).decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    return lines[0] if lines else ""


def _check(repository: GitRepository) -> None:
    """Raise `RepositoryRefused` when a file git reads to answer `rev-parse HEAD` or `status` (`HEAD` and the ref
    it names, `packed-refs`, `commondir`, the index, `info/exclude` and `info/attributes`, the repository's
    config files and what they include) is there but not a regular file: git would wait on a FIFO until its
    timeout. A file absent or unreadable git passes over. (A FIFO among the work tree's own `.gitignore` files
    is met by the timeout, once: `shared_index` then runs no git in that repository again.)"""
    git_dir = repository.git_dir
    common = git_dir
    if _regular(git_dir / "commondir"):
        common = _path_file(git_dir / "commondir") or git_dir
    if _regular(git_dir / "HEAD"):
        ref = _first_line(git_dir / "HEAD")
        if ref.startswith("ref: refs/") and ".." not in ref:  # a branch, in the common git directory
            _regular(common / ref[len("ref: "):].strip())
    for path in (common / "packed-refs", git_dir / "index", common / "info" / "exclude",
                 common / "info" / "attributes"):
        _regular(path)
    for config in (common / "config", git_dir / "config.worktree"):
        _includes(config, 0)


def _regular(path: Path) -> bool:
    """Whether `path` is there (a regular file); raises `RepositoryRefused` when it is there as anything else."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise RepositoryRefused(f"{path} is not a regular file: git would wait on it")
    return True


def _includes(config: Path, depth: int) -> None:
    """Check `config` and, to git's depth, every file it includes (whatever the condition: a file included only
    on some branch is as able to stall git)."""
    if depth > _INCLUDE_DEPTH or not _regular(config):
        return
    try:
        data = read_head(config, CONFIG_MAX_BYTES)
    except OSError:
        return
    if len(data) > CONFIG_MAX_BYTES:
        raise RepositoryRefused(f"{config} is longer than {CONFIG_MAX_BYTES >> 20} MiB: its includes are not known")
    for value in include_paths(data.decode("utf-8", errors="replace")):
        if value.startswith("%(prefix)/"):
            raise RepositoryRefused(f"{config} includes {value}, relative to git's installation")
        if value == "~" or value.startswith("~/"):
            home = os.environ.get("HOME", "")
            if not home:
                continue  # git includes nothing then
            value = home + value[1:]
        _includes(config.parent / value, depth + 1)
