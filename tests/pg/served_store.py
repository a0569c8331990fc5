"""`codeloupe serve --store URL` as a user starts it, in a process of its own, for the tests that call its API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def served_store(pg_url: str, *arguments: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """The server's base URL once /readyz says ready (embedding off); stopped, and its exit checked, after.
    `arguments`: serve's, in place of `--store pg_url`; `env`: more environment variables."""
    env = {**os.environ, "CODELOUPE_EMBED_PROVIDER": "none",
           "PYTHONPATH": os.pathsep.join([str(REPO / "engine"), str(REPO / "server")]), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "codeloupe", "serve", *(arguments or ("--store", pg_url)),
                             "--port", "0"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        base = re.search(r"at (http://127\.0\.0\.1:\d+)/ ", proc.stderr.readline()).group(1)
        for _ in range(600):  # not a speed check
            if httpx.get(f"{base}/readyz").status_code == 200:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"serve --store never became ready: {httpx.get(f'{base}/readyz').text}")
        yield base
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
