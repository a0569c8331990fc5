"""Which workspace a folder on the command line belongs to.

`codeloupe search REPO/src/pkg "..."` means "search REPO, within src/pkg": indexing the sub-folder on its own
would build a second, separate index (with no vectors yet) beside the repository's. The root is the nearest
folder, from the given one upwards, that holds a project marker or already has an index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT_MARKERS = (".git", ".hg", ".svn", ".codeloupe.toml", "pyproject.toml", "setup.py", "package.json", "go.mod",
                "Cargo.toml", "composer.json", "Gemfile", "pom.xml", "build.gradle")


@dataclass(frozen=True)
class WorkspaceRoot:
    root: Path
    subpath: str  # the given folder relative to `root` (POSIX); "" when it is the root
    reason: str  # what marked the root, for the note a user sees


def find_workspace_root(folder: Path, has_index: Callable[[Path], bool]) -> WorkspaceRoot:
    """The workspace `folder` is part of; `folder` itself when neither it nor any parent is marked.

    A folder with a marker of its own (a package inside a monorepo, a folder indexed before) is its own root.
    """
    start = folder.resolve()
    for candidate in (start, *start.parents):
        reason = _marker(candidate, has_index)
        if reason:
            subpath = "" if candidate == start else start.relative_to(candidate).as_posix()
            return WorkspaceRoot(candidate, subpath, reason)
    return WorkspaceRoot(start, "", "")


def _marker(folder: Path, has_index: Callable[[Path], bool]) -> str:
    for name in ROOT_MARKERS:
        if (folder / name).exists():
            return name
    return "an existing index" if has_index(folder) else ""
