"""Chunking worker processes end with their parent, even when the parent is killed with SIGKILL."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from processes import assert_workers_die_with_their_parent, children_of

# Starts a real index over enough files for the worker pool, with workers that block in their first task,
# so they are certainly alive (and idle parents of nothing) when the parent is killed.
SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path

    import codeloupe.index as index
    from codeloupe.settings import Settings
    from codeloupe.store import Store

    def stuck_prepare(candidate, known_hash, settings, strategies=()):
        time.sleep(600)

    os.cpu_count = lambda: 2
    index.prepare = stuck_prepare
    root = Path(sys.argv[1])
    print("indexing", flush=True)
    index.index_workspace(root, Store(root.parent / "index.sqlite"), Settings(embed_provider="none"))
""")


def test_workers_exit_when_the_parent_is_killed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(220):  # over POOL_MIN_ITEMS
        (root / f"m{i}.py").write_text(f"x = {i}\n")
    parent = subprocess.Popen([sys.executable, "-c", SCRIPT, str(root)], stdout=subprocess.PIPE, text=True)

    def started_workers() -> list[int]:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "indexing"
        deadline = time.monotonic() + 60
        while len(workers := children_of(parent.pid)) < 2:
            assert time.monotonic() < deadline, "the worker pool never started"
            time.sleep(0.05)
        time.sleep(0.5)  # let the workers finish their initialiser
        return workers

    assert_workers_die_with_their_parent(parent, started_workers)
