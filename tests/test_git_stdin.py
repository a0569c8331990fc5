"""git, which the shared index runs in a workspace to read its commit and changes, never reads this process's
standard input: under the language server that is the editor's protocol channel, and a cloned repository's
`.git/config` can include `/dev/stdin` (`include.path`), which `git config --includes` then read to its end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

READER = """
import sys
from pathlib import Path
from codeloupe.shared_index import workspace_commit
workspace_commit(Path(sys.argv[1]))
sys.stdout.buffer.write(sys.stdin.buffer.read())
"""


def test_the_shared_index_s_git_leaves_this_process_s_input_alone(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.fail("git is not installed: CI has it")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text("def run():\n    return 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c"], ["config", "include.path", "/dev/stdin"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)
    message = b'Content-Length: 52\r\n\r\n{"jsonrpc": "2.0", "method": "initialized", "params": {}}'
    done = subprocess.run([sys.executable, "-c", READER, str(root)], input=message, capture_output=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == message  # every byte still there for the process whose input it is
