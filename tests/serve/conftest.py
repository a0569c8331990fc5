"""Fixtures for the MCP and HTTP tests: the small project, and the real app served by uvicorn on loopback."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # serve_project.py, beside this file

from serve_project import write_project  # noqa: E402


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")  # the user's environment: lexical lanes only
    return write_project(tmp_path / "project")


@contextmanager
def serving(app, host: str = "127.0.0.1") -> Iterator[str]:
    """Run `app` under uvicorn in a thread on a free port of `host` (a loopback address); yield its URL."""
    import uvicorn

    from codeloupe_web.listen import bind, server_config

    sock = bind(host, 0)
    server = uvicorn.Server(server_config(app))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """serve(roots, guard=None, host=..., refresh_interval_s=...) -> base URL; everything stops after the test."""
    from codeloupe_mcp.warm import WarmWorkspaces
    from codeloupe_web.app import create_app

    stack: list = []

    def start(roots: list[Path], guard=None, host: str = "127.0.0.1", refresh_interval_s: float = 1.0) -> str:
        pool = WarmWorkspaces(roots, refresh_interval_s=refresh_interval_s)
        stack.append(pool)
        for warm in pool.all:
            warm.fresh()  # the first index, so a test's first request is not the one that waits
        ctx = serving(create_app(pool, guard), host)
        stack.append(ctx)
        return ctx.__enter__()

    yield start
    for item in reversed(stack):
        if hasattr(item, "__exit__"):
            item.__exit__(None, None, None)
        else:
            item.close()
