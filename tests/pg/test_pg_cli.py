"""The command line over the shared index (run in this process): `index --store --queue`, `worker --store`,
`search --store --repo`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codeloupe.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"


def test_queued_by_index_filled_by_a_worker_searched_by_search(tmp_path: Path, pg_url: str,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc", "--queue"]) == 0
    assert capsys.readouterr().out.startswith("queued 1 batches of svc")
    assert main(["worker", "--store", pg_url, "--exit-when-idle", "0"]) == 0
    files = sum(1 for p in root.rglob("*") if p.is_file())
    assert f"1 batches, {files} files, 0 texts embedded, graph edges of 1 repositories resolved" in \
        capsys.readouterr().err
    assert main(["search", str(root), "charge the card total price", "--store", pg_url, "--repo", "svc",
                 "--json", "--no-embed"]) == 0
    assert json.loads(capsys.readouterr().out)["core"]
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc", "--no-embed"]) == 0
    assert "repository svc at the files on disk" in capsys.readouterr().out
    assert main(["index", str(root), "--queue"]) == 2
    assert "--store" in capsys.readouterr().err
