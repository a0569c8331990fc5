"""The git the shared index runs in a workspace (`workspace_commit`: `rev-parse`, `config`, `status`) runs nothing
the repository's own configuration names (rule 6): a cloned or unpacked repository's `.git/config` is as
untrusted as its files. Each test builds the hostile repository whose command would leave a file behind."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codeloupe.shared_index import DIRTY_SUFFIX, workspace_changes, workspace_commit

# git as a user with no configuration of their own: the repository's is the only one in play.
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, env=GIT_ENV, capture_output=True,
                          text=True).stdout.strip()


def _committed_repo(root: Path) -> Path:
    if shutil.which("git") is None:
        pytest.fail("git is not installed: CI has it")
    (root / "pkg").mkdir(parents=True)
    (root / "app.py").write_text("def run():\n    return 1\n")
    (root / "pkg" / "util.py").write_text("def helper():\n    return 2\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "c")
    return root


def _as_a_user_without_git_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"):
        monkeypatch.setenv(name, GIT_ENV[name])


def _payload(tmp_path: Path) -> tuple[Path, Path]:
    """A program that leaves `ran` behind when anything runs it, and that file."""
    ran = tmp_path / "ran"
    program = tmp_path / "payload.sh"
    program.write_text(f"#!/bin/sh\ntouch '{ran}'\nexit 1\n")
    program.chmod(0o755)
    return program, ran


def test_a_partial_clone_s_missing_tree_fetches_nothing_and_runs_no_upload_pack(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repository that calls itself a partial clone has git fetch an object it lacks from its promisor remote,
    and for a local remote git runs the `remote.<name>.uploadpack` the configuration names: `git status`
    comparing the index with a commit whose tree is missing ran the repository's program (or, with an ssh
    remote, its `core.sshCommand`; with an https one, a request to the repository's host)."""
    _as_a_user_without_git_config(monkeypatch)
    root = _committed_repo(tmp_path / "repo")
    program, ran = _payload(tmp_path)
    for key, value in (("core.repositoryformatversion", "1"), ("extensions.partialClone", "origin"),
                       ("remote.origin.url", str(tmp_path)), ("remote.origin.promisor", "true"),
                       ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
                       ("remote.origin.uploadpack", str(program))):
        _git(root, "config", key, value)
    tree = _git(root, "rev-parse", "HEAD:pkg")
    (root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    (root / ".git" / "index").unlink()  # status reads the commit's trees to compare the files with
    head = _git(root, "rev-parse", "HEAD")

    assert workspace_commit(root) == head + DIRTY_SUFFIX  # git cannot tell: never named as clean
    assert not ran.exists()


def test_the_repository_s_fsmonitor_and_clean_filter_do_not_run(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`git status` runs `core.fsmonitor` as a program, and a filter driver's `clean` on a file whose stat
    changed; here the filter comes from a file the configuration includes only for this folder (`includeIf`)."""
    _as_a_user_without_git_config(monkeypatch)
    root = _committed_repo(tmp_path / "repo")
    program, ran = _payload(tmp_path)
    (root / ".gitattributes").write_text("*.py filter=tidy\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "attributes")
    included = tmp_path / "included.cfg"
    included.write_text(f"[filter \"tidy\"]\n\tclean = {program}\n")
    _git(root, "config", f"includeIf.gitdir:{root}/.path", str(included))
    _git(root, "config", "core.fsmonitor", str(program))
    stat = (root / "app.py").stat()
    os.utime(root / "app.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same text, stat changed

    assert workspace_commit(root).startswith(_git(root, "rev-parse", "HEAD"))
    assert not ran.exists()


def test_a_configuration_that_includes_a_fifo_is_refused_at_once_and_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """git reads every file the repository's configuration includes (git has no switch to stop it), and waits on
    a FIFO: each git call there stalled for its timeout (10 s) and the folder was pinned to no commit without a
    word. Here the FIFO is two includes deep, under a condition, by a relative path."""
    _as_a_user_without_git_config(monkeypatch)
    root = _committed_repo(tmp_path / "repo")
    os.mkfifo(tmp_path / "fifo")
    (root / ".git" / "more.cfg").write_text('[includeIf "onbranch:*"]\n\tpath = ../../fifo\n')
    with (root / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = more.cfg\n")

    with caplog.at_level(logging.WARNING, logger="codeloupe.shared"):
        assert workspace_commit(root) == ""
    assert "/fifo is not a regular file" in caplog.text and str(root) in caplog.text


def test_core_worktree_cannot_send_git_status_to_another_tree(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`core.worktree` in the repository's configuration made `git status` walk the tree it names (`/`, capped
    only by the 120 s timeout): the work tree is the folder holding `.git`, as for a workspace below it."""
    _as_a_user_without_git_config(monkeypatch)
    root = _committed_repo(tmp_path / "repo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("not the repository's\n")
    _git(root, "config", "core.worktree", str(elsewhere))
    head = _git(root, "rev-parse", "HEAD")

    assert workspace_changes(root) == []
    assert workspace_commit(root) == head
    assert workspace_changes(root / "pkg") == []  # a workspace that is a folder of the repository
    (root / "pkg" / "util.py").write_text("changed\n")
    assert workspace_commit(root / "pkg") == head + DIRTY_SUFFIX


def test_a_git_dir_in_the_user_s_environment_does_not_send_git_to_another_repository(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git takes `GIT_DIR` (and `GIT_INDEX_FILE`, `GIT_OBJECT_DIRECTORY`, ...) from the environment over the
    repository `-C` finds: run from a git hook, or by a user who exported it for another checkout, every folder
    was cited at that repository's commit and compared with its index (its files all read as changed). The
    repository is the one holding the folder, whatever the environment says."""
    _as_a_user_without_git_config(monkeypatch)
    root = _committed_repo(tmp_path / "repo")
    other = _committed_repo(tmp_path / "other")
    (other / "app.py").write_text("def run():\n    return 2\n")
    _git(other, "commit", "-q", "-am", "another commit")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))

    assert workspace_commit(root) == _git(root, "--git-dir", str(root / ".git"), "rev-parse", "HEAD")
    assert workspace_changes(root) == []


@pytest.mark.parametrize("fifo", [".git/index", ".git/refs/heads/main", ".git/info/exclude", ".git/packed-refs"])
def test_a_fifo_among_the_files_git_reads_first_is_refused_at_once_and_said(
        fifo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Past the configuration, `git rev-parse HEAD` reads the branch `HEAD` names (or `packed-refs`) and `git
    status` the index and `info/exclude`: a FIFO in their place stalled git for its timeout (120 s for status) and
    the folder was pinned to its commit as changed. Checked like the configuration, without running git."""
    _as_a_user_without_git_config(monkeypatch)
    monkeypatch.setattr("codeloupe.shared_index.STATUS_TIMEOUT_S", 3)  # only the code before the fix waits for it
    root = _committed_repo(tmp_path / "repo")
    _git(root, "branch", "-M", "main")
    path = root / fifo
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)

    with caplog.at_level(logging.WARNING, logger="codeloupe.shared"):
        assert workspace_commit(root) == ""
    assert f"{fifo} is not a regular file" in caplog.text, caplog.text


def test_git_that_stalled_on_a_work_tree_s_fifo_is_not_run_there_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A FIFO named `.gitignore` in the work tree (git reads every one of them, and no option stops it) stalls
    `git status` for its timeout: every save of the folder waited that long again. Once git did not answer in a
    repository, it is not run there again in this process, which says so once."""
    _as_a_user_without_git_config(monkeypatch)
    monkeypatch.setattr("codeloupe.shared_index.STATUS_TIMEOUT_S", 1)
    root = _committed_repo(tmp_path / "repo")
    os.mkfifo(root / "pkg" / ".gitignore")

    with caplog.at_level(logging.WARNING, logger="codeloupe.shared"):
        assert workspace_changes(root) is None
        (root / "pkg" / ".gitignore").unlink()  # git would now answer: the tree is clean
        assert workspace_changes(root) is None and workspace_commit(root) == ""
    assert caplog.text.count("git did not answer in 1 s") == 1, caplog.text
    assert "git is not run in that repository again until codeloupe restarts" in caplog.text
