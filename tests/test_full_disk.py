"""A full disk: searching still works (reads never write), and indexing fails with one clear error that
leaves the index as it was.

The disk is a real one (`full_disk`): a 3 MB tmpfs mounted over the cache dir and filled to the last byte, or a
read-only cache dir where the tests may not mount."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from codeloupe.api import Workspace
from codeloupe.store import StoreError
from codeloupe.store.health import integrity_problem
from full_disk import disk_full


def write_repo(root: Path, first: int, last: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(first, last):
        (root / f"m{i}.py").write_text("".join(f"def fn_{i}_{j}(x):\n    return x * {j}\n\n" for j in range(30)))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codeloupe", *args, "--embed-provider", "none"],
                          capture_output=True, text=True, timeout=120)


def test_search_works_and_indexing_is_one_clear_error_on_a_full_disk(tmp_path: Path, cache_disk: Path) -> None:
    root = tmp_path / "repo"
    write_repo(root, 0, 30)
    assert cli("index", str(root), "--no-prepare").returncode == 0
    with disk_full(cache_disk):  # an index with nothing to write: what it prepares for the next search is lost
        index = cli("index", str(root))
        assert index.returncode == 0 and "Traceback" not in index.stderr, index.stderr
    write_repo(root, 30, 32)  # two files the full disk will not take
    with disk_full(cache_disk):
        search = cli("search", str(root), "fn_3_4", "--json")
        assert search.returncode == 0, search.stderr
        assert '"m3.py"' in search.stdout
        assert "Traceback" not in search.stderr

        index = cli("index", str(root))
        assert index.returncode == 2
        assert "Traceback" not in index.stderr
        (line,) = index.stderr.strip().splitlines()
        assert line.startswith("codeloupe: cannot write the index") and "searching still works" in line

        again = cli("search", str(root), "fn_3_4", "--json")  # the failed index left it usable
        assert again.returncode == 0 and '"m3.py"' in again.stdout
    done = cli("search", str(root), "fn_31_2", "--json")  # space again: the two files are indexed
    assert done.returncode == 0, done.stderr
    assert '"m31.py"' in done.stdout


def test_a_disk_that_fills_during_indexing_leaves_the_index_usable(tmp_path: Path, cache_disk: Path) -> None:
    if not os.path.ismount(cache_disk):
        pytest.skip("needs a disk of its own to fill while the index is open (root, mount)")
    root = tmp_path / "repo"
    write_repo(root, 0, 20)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        ws.index()
        write_repo(root, 20, 400)  # more than the disk can take
        with disk_full(cache_disk):
            with pytest.raises(StoreError, match="the disk is full"):
                ws.index()
            assert [f.path for f in ws.search("fn_3_4").files][0] == "m3.py"
            assert integrity_problem(sqlite3.connect(ws.store.path)) == ""
    finally:
        ws.close()
