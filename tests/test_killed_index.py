"""`codeloupe index` killed (SIGKILL) or stopped (SIGTERM) while its chunking workers run and while it saves the search
snapshot's side files: nothing of its process group outlives it, and the next search answers as from a clean index."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from processes import children_of, in_group, many_small_files

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="no chunking worker pool on one core")
QUERY = "step_7_3 value total"


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "CODELOUPE_CACHE_DIR": str(cache), "CODELOUPE_EMBED_PROVIDER": "none"}


def _answer(root: Path, cache: Path) -> dict:
    """`codeloupe search --json` over `root` with the index in `cache`, its timings left out."""
    out = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(root), QUERY, "--json"],
                         env=_env(cache), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    answer.pop("timing_ms")
    return answer


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A tree whose first index chunks in worker processes, and the answer a clean index of it gives."""
    root = many_small_files(tmp_path_factory.mktemp("killed") / "repo")
    clean = root.parent / "clean-cache"
    answer = _answer(root, clean)
    shutil.rmtree(clean)
    return root, answer


def _chunking(index: subprocess.Popen, cache: Path) -> bool:
    return len(children_of(index.pid)) >= 2


def _saving_side_files(index: subprocess.Popen, cache: Path) -> bool:
    """The first side file written: the snapshot's others and the graph's are being written."""
    return any(cache.glob("indexes/*.bm25.npz"))


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("moment", [_chunking, _saving_side_files], ids=["chunking", "saving"])
def test_an_index_killed_midway_leaves_no_process_and_the_next_search_answers_as_a_clean_one(
        tree: tuple[Path, dict], tmp_path: Path, stop: signal.Signals,
        moment: Callable[[subprocess.Popen, Path], bool]) -> None:
    """SIGTERM stops the command where it is, as Ctrl-C does: its default action killed it mid-write, the index
    unclosed (its write-ahead log left beside it) and, once the embedding model had made the workers spawned ones,
    the resource tracker's leaked semaphores printed under the command's output. It now stops the index, closes it,
    says so in one line and exits with 128 + 15."""
    root, clean = tree
    cache = tmp_path / "cache"
    errlog = tmp_path / "stderr.txt"
    with errlog.open("w") as err:
        index = subprocess.Popen([sys.executable, "-m", "codeloupe", "index", str(root)], env=_env(cache),
                                 stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not moment(index, cache):
            assert index.poll() is None, "the index ended before the moment to kill it"
            assert time.monotonic() < deadline, "the moment to kill the index never came"
            time.sleep(0.01)
        index.send_signal(stop)
        assert index.wait(timeout=30) == (-stop if stop == signal.SIGKILL else 128 + stop)
        deadline = time.monotonic() + 30
        while left := in_group(index.pid):
            assert time.monotonic() < deadline, f"processes of the killed index left: {left}"
            time.sleep(0.05)
    finally:
        if index.poll() is None:
            index.kill()
        for pid in in_group(index.pid):
            os.kill(pid, signal.SIGKILL)
    if stop == signal.SIGTERM:
        assert errlog.read_text() == "codeloupe: stopped by SIGTERM\n"
        assert [wal.name for wal in cache.glob("indexes/*-wal")] == []  # closed, its log folded in
    assert _answer(root, cache) == clean
