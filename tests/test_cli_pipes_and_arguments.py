"""What a user meets at the shell: output piped into a reader that stops early (`| head`, a pager quit) ends the
command quietly, and a mistyped number in a server's arguments is one line of usage error, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_reader_that_stops_early_ends_the_command_without_a_traceback(tmp_path: Path) -> None:
    many = tmp_path / "many.py"
    many.write_text("".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(20000)), encoding="utf-8")
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "codeloupe", "chunks", str(many), "--budget", "100"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()  # `| head -1`: one line read, then the pipe is closed
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        status = proc.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert status == 141
