"""Discovery follows git: a `.gitignore` pattern passes over files the repository tracks (read from a real index
that real git wrote, in each of its formats), never over `.codeloupeignore` or the `ignore` setting; a damaged
index leaves the ignore rules as they were."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codeloupe.discover import path_skip_reason, walk
from codeloupe.git_index import IndexFormatError, parse_index, tracked_paths
from codeloupe.settings import Settings

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="these tests need git to write real index files")


def git(root: Path, *args: str) -> str:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root), "PATH": "/usr/bin:/bin"}
    return subprocess.run([GIT, "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def write(root: Path, rel: str, text: str = "x = 1\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def paths(root: Path, settings: Settings | None = None) -> list[str]:
    return [c.rel_path for c in walk(root, settings or Settings()).candidates]


def repository(root: Path, committed: dict[str, str], forced: dict[str, str], later: dict[str, str]) -> Path:
    """A git repository at `root`: `committed` added plainly, `forced` with `git add -f` (past its .gitignore),
    then `later` written and never added."""
    for files in (committed, forced):
        for rel, text in files.items():
            write(root, rel, text)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "add", "-f", *forced)
    for rel, text in later.items():
        write(root, rel, text)
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A Go-style repository: `.gitignore` names the built binary `cobra`, which also matches the `cobra/`
    source directory; its sources were added with `git add -f`, a later scratch file there was not."""
    return repository(
        tmp_path / "repo",
        {".gitignore": "cobra\n*.log\n", "command.go": "package cobra\n"},
        {"cobra/cmd/project.go": "package cmd\n", "cobra/main.go": "package main\n", "notes.log": "tracked log\n"},
        {"cobra/cmd/scratch.go": "package cmd\n", "debug.log": "untracked log\n"})  # untracked: still ignored


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_tracked_files_are_indexed_though_a_gitignore_pattern_matches_them(repo: Path, version: str) -> None:
    git(repo, "update-index", "--index-version", version)
    expected = ["cobra/cmd/project.go", "cobra/main.go", "command.go", "notes.log"]
    assert paths(repo) == expected
    assert tracked_paths(repo) == set(git(repo, "ls-files").split())
    for rel in expected:
        assert path_skip_reason(repo, rel, Settings()) == "", rel
    assert path_skip_reason(repo, "cobra/cmd/scratch.go", Settings()) == "ignored"
    assert path_skip_reason(repo, "debug.log", Settings()) == "ignored"


def test_the_users_own_ignore_rules_hold_for_tracked_files(repo: Path) -> None:
    write(repo, ".codeloupeignore", "cobra/main.go\n")
    assert "cobra/main.go" not in paths(repo)
    assert "cobra/cmd/project.go" not in paths(repo, Settings(ignore=["cobra/cmd/"]))
    assert path_skip_reason(repo, "cobra/main.go", Settings()) == "ignored"


def test_a_nested_repository_answers_for_its_own_files(tmp_path: Path, repo: Path) -> None:
    outer = tmp_path
    write(outer, ".gitignore", "generated/\n")
    write(outer, "generated/keep.py")
    # `repo` sits inside `outer`, which is not a git repository: only repo's index speaks for repo's files.
    assert paths(outer) == ["repo/cobra/cmd/project.go", "repo/cobra/main.go",
                            "repo/command.go", "repo/notes.log"]


def test_a_damaged_or_foreign_index_leaves_the_ignore_rules_as_they_were(repo: Path) -> None:
    index = repo / ".git" / "index"
    data = index.read_bytes()
    for damaged in (data[:40], b"DIRC\x00\x00\x00\x09" + data[8:], data[:12] + b"\xff" * 200,
                    data[:8] + b"\x7f\xff\xff\xff" + data[12:], b"\x00" * 4096):
        index.write_bytes(damaged)
        assert paths(repo) == ["command.go"]
        with pytest.raises(IndexFormatError):
            parse_index(damaged)
    index.unlink()
    os.mkfifo(index)  # opening it to read would wait for a writer
    assert paths(repo) == ["command.go"]
    index.unlink()
    index.mkdir()  # not a regular file
    assert paths(repo) == ["command.go"]


def test_a_linked_work_tree_reads_the_index_its_git_file_names(repo: Path, tmp_path: Path) -> None:
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    assert (linked / ".git").is_file()  # "gitdir: ...", itself never indexed
    assert paths(linked) == ["cobra/cmd/project.go", "cobra/main.go", "command.go", "notes.log"]


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    return repository(
        tmp_path / "mono",
        {".gitignore": "lib/\n*.log\n/vendored/\n", "packages/.gitignore": "generated_*.js\n",
         "packages/web/index.js": "export const a = 1;\n"},
        {"packages/web/lib/kept.js": "export const b = 2;\n"},
        {"packages/web/lib/out.js": "compiled\n",  # build output: the top .gitignore's lib/
         "packages/web/debug.log": "log\n",
         "packages/web/generated_api.js": "generated\n",  # the ignore file between top and root
         "vendored/dep/main.py": "x = 1\n",
         "vendored/dep/notes.log": "kept: the whole folder is ignored, and was opened anyway\n"})


def test_a_package_opened_on_its_own_keeps_its_repositorys_ignore_rules(monorepo: Path) -> None:
    """A monorepo's package opened as the workspace (the CLI's root is the nearest package.json): the
    .gitignore files above it still hold, as in git, and so does the exemption of tracked files."""
    web = monorepo / "packages" / "web"
    assert paths(web) == ["index.js", "lib/kept.js"]
    for rel, reason in (("index.js", ""), ("lib/kept.js", ""), ("lib/out.js", "ignored"),
                        ("debug.log", "ignored"), ("generated_api.js", "ignored")):
        assert path_skip_reason(web, rel, Settings()) == reason, rel


def test_a_folder_the_repository_ignores_opened_on_purpose_is_indexed_whole(monorepo: Path) -> None:
    dep = monorepo / "vendored" / "dep"
    assert paths(dep) == ["main.py", "notes.log"]
    assert path_skip_reason(dep, "notes.log", Settings()) == ""


def test_the_clones_own_exclude_file_holds_below_the_gitignore(repo: Path, monorepo: Path) -> None:
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("scratch/\ncommand.go\n*.tmp\n")
    write(repo, "scratch/try.go", "package try\n")
    write(repo, "a.tmp", "x\n")
    write(repo, ".gitignore", "cobra\n*.log\n!a.tmp\n")  # a .gitignore rule outranks the exclude file
    # command.go is tracked: the exclude file, like .gitignore, passes over it.
    assert paths(repo) == ["a.tmp", "cobra/cmd/project.go", "cobra/main.go", "command.go", "notes.log"]
    assert path_skip_reason(repo, "scratch/try.go", Settings()) == "ignored directory"
    (monorepo / ".git" / "info").mkdir(exist_ok=True)
    (monorepo / ".git" / "info" / "exclude").write_text("scratch.js\nindex.js\n")
    write(monorepo, "packages/web/scratch.js", "untracked\n")
    # Above a package opened on its own too; index.js is tracked.
    assert paths(monorepo / "packages" / "web") == ["index.js", "lib/kept.js"]


@pytest.mark.parametrize("version", ["2", "4"])
def test_any_damage_to_an_index_is_a_format_error_or_a_reading(repo: Path, version: str) -> None:
    """Bytes flipped, cut or repeated anywhere: the reader answers with paths or `IndexFormatError`, nothing
    else, and never reads past the end (a fixed seed, so a failure replays)."""
    import random

    git(repo, "update-index", "--index-version", version)
    data = (repo / ".git" / "index").read_bytes()
    rng = random.Random(13)
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(damaged))
            action = rng.random()
            if action < 0.6:
                damaged[at] = rng.randrange(256)
            elif action < 0.8:
                del damaged[at:]
            else:
                damaged[at:at] = damaged[at:at + rng.randint(1, 40)]
        try:
            result = parse_index(bytes(damaged))
        except IndexFormatError:
            continue
        assert isinstance(result, frozenset) and all(isinstance(p, str) and p for p in result)


def test_a_version_4_index_whose_names_grow_on_each_other_is_refused_not_expanded() -> None:
    """Each version 4 name is the one before it plus a suffix: 60,000 entries adding one byte each (a 4 MB
    file) made names of up to 60,000 bytes, 2 GB in all; the reader stops at a name longer than any path."""
    import struct

    count = 60_000
    entry = b"\0" * 40 + b"\x11" * 20 + b"\0\0" + b"\0a\0"  # stat, hash, flags; strip nothing, add "a"
    data = b"DIRC" + struct.pack(">II", 4, count) + entry * count
    with pytest.raises(IndexFormatError, match="longer than any path"):
        parse_index(data)


def test_a_build_directory_that_git_tracks_is_the_projects_own(tmp_path: Path) -> None:
    """A JavaScript project's tracked `build/` scripts are indexed even where the folder looks like Python's build
    output (its `lib/` of helpers); a tracked `vendor/` is third-party code all the same, and a `build/` git
    tracks nothing in is judged by its listing."""
    root = repository(
        tmp_path / "repo",
        {"build/webpack.base.conf.js": "module.exports = {}\n", "build/lib/paths.js": "module.exports = 'src'\n",
         "vendor/left-pad/index.js": "module.exports = 1\n", "src/index.js": "export default 1\n"},
        {}, {"native/build/CMakeCache.txt": "CMAKE_BUILD_TYPE:STRING=Release\n",
             "native/build/main.cpp": "int main() {}\n", "doc/build/index.rst": "Index\n=====\n"})
    result = walk(root, Settings())
    assert [c.rel_path for c in result.candidates] == [
        "build/lib/paths.js", "build/webpack.base.conf.js", "doc/build/index.rst", "src/index.js"]
    assert result.skipped["skipped directory"] == 3  # .git, vendor, native/build
    assert path_skip_reason(root, "build/lib/paths.js", Settings()) == ""
    assert path_skip_reason(root, "vendor/left-pad/index.js", Settings()) == "skipped directory"
