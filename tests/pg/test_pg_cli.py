"""The command line over the shared index: `index --store --queue`, `worker --store`, `search --store`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
REPO = Path(__file__).resolve().parents[2]


def _codeloupe(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CODELOUPE_EMBED_PROVIDER": "none",
           "PYTHONPATH": os.pathsep.join([str(REPO / "engine"), str(REPO / "server")])}
    return subprocess.run([sys.executable, "-m", "codeloupe", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_queued_by_index_filled_by_a_worker_searched_by_search(tmp_path: Path, pg_url: str) -> None:
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    queued = _codeloupe("index", str(root), "--store", pg_url, "--repo", "svc", "--queue")
    assert queued.returncode == 0, queued.stderr
    assert queued.stdout.startswith("queued 1 batches of svc")
    worked = _codeloupe("worker", "--store", pg_url, "--exit-when-idle", "0")
    assert worked.returncode == 0, worked.stderr
    files = sum(1 for p in root.rglob("*") if p.is_file())
    assert f"1 batches, {files} files" in worked.stderr
    found = _codeloupe("search", str(root), "charge the card total price", "--store", pg_url, "--repo", "svc", "--json")
    assert found.returncode == 0, found.stderr
    bundle = json.loads(found.stdout)
    assert bundle["core"]
    refused = _codeloupe("index", str(root), "--queue")
    assert refused.returncode == 2 and "--store" in refused.stderr
