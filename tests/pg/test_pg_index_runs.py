"""An index run of the shared index cut off midway (killed, stopped) left a repository that looked complete:
`admin repos`, `stats` and every answer gave no sign that part of its files were missing. The repository now
records a run until its files are all written, and each of them says whether one is under way or did not finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from served_store import served_store

from codeloupe.api import open_shared, shared_repositories
from codeloupe.cli import main

REPO = Path(__file__).resolve().parents[2]
FILES = 40
QUERY = "helper number seven"
# A child indexing the folder into repository svc that stops, for good, once some of its files are written: it
# says so on stdout and waits for stdin, which the test never writes (it kills it).
_CUT_OFF = """
import sys
from codeloupe.api import Workspace

ws = Workspace(sys.argv[1], overrides={"store_url": sys.argv[2], "store_repository": "svc", "embed_provider": "none"})

def should_stop():
    if ws.store.counts()["files"] >= 10:
        print("written", flush=True)
        sys.stdin.read()
    return False

ws.index(should_stop=should_stop)
"""


def _notes(pg_url: str) -> list[str]:
    [ws] = open_shared(["svc"], {"store_url": pg_url, "embed_provider": "none"})
    try:
        return ws.search(QUERY).notes
    finally:
        ws.close()


def test_an_index_run_cut_off_is_said_by_admin_repos_stats_and_every_answer_until_a_run_finishes(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "svc"
    root.mkdir()
    for n in range(FILES):
        (root / f"mod_{n:02}.py").write_text(f'def helper_{n}(x):\n    """helper number {n}"""\n    return x + {n}\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "engine"), str(REPO / "server")])}
    child = subprocess.Popen([sys.executable, "-c", _CUT_OFF, str(root), pg_url], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "written\n"
        [listed] = shared_repositories(pg_url)
        assert 10 <= listed.files < FILES
        assert listed.indexing.startswith("indexing of svc (started ") and "is under way" in listed.indexing
        assert "is under way: answers may miss files" in _notes(pg_url)[0]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        child.stdin.close()
        child.stdout.close()
    for _ in range(600):  # the server ends the killed process's session once it sees its socket closed
        if "did not finish" in shared_repositories(pg_url)[0].indexing:
            break
        time.sleep(0.05)
    cut_off = "did not finish: answers may miss files; run `codeloupe index` on it again"
    assert cut_off in shared_repositories(pg_url)[0].indexing
    assert cut_off in _notes(pg_url)[0]
    capsys.readouterr()
    assert main(["admin", "--store", pg_url, "repos"]) == 0
    out = capsys.readouterr().out
    assert "WARNING indexing of svc (started " in out and cut_off in out
    assert main(["stats", str(root), "--store", pg_url, "--repo", "svc"]) == 0
    assert cut_off in capsys.readouterr().out
    assert main(["search", "--store", pg_url, "--repo", "svc", QUERY, "--json"]) == 0
    assert cut_off in json.loads(capsys.readouterr().out)["notes"][0]
    with served_store(pg_url) as base:
        assert cut_off in httpx.get(f"{base}/v1/search", params={"q": QUERY, "root": "svc"}).json()["notes"][0]
        [status] = httpx.get(f"{base}/v1/status").json()["workspaces"]
        assert cut_off in status["indexing"]

    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0  # a run that finishes
    [listed] = shared_repositories(pg_url)
    assert listed.files == FILES and listed.indexing == ""
    assert not any("indexing of" in note for note in _notes(pg_url))
    capsys.readouterr()
    assert main(["stats", str(root), "--store", pg_url, "--repo", "svc"]) == 0
    assert "indexing of" not in capsys.readouterr().out
