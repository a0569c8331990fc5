"""Fixtures for the MCP and HTTP tests: the small project, and the real app served by uvicorn on loopback."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
    """serve(roots, guard=None, host=..., refresh_interval_s=..., ready=True) -> base URL; everything stops after
    the test. `ready=False` serves at once, without waiting for the first index to end."""
    from codeloupe_serving.warm import WarmWorkspaces
    from codeloupe_web.app import create_app

    stack: list = []

    def start(roots: list[Path], guard=None, host: str = "127.0.0.1", refresh_interval_s: float = 1.0,
              ready: bool = True) -> str:
        pool = WarmWorkspaces(roots, refresh_interval_s=refresh_interval_s)
        stack.append(pool)
        for warm in pool.all if ready else ():
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


@dataclass
class HeldIndex:
    stopped: threading.Event = field(default_factory=threading.Event)  # the first index is held now
    release: threading.Event = field(default_factory=threading.Event)  # set: it goes on


@pytest.fixture
def first_index_held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldIndex]:
    """A first index started during the test stops at its first chunking step until `release` is set (at the
    latest when the test ends), and calls meanwhile answer at once, as they do after `FIRST_INDEX_WAIT_S`."""
    import codeloupe_serving.warm as warm_module

    held = HeldIndex()
    real_progress = warm_module.WarmWorkspace._note_progress

    def held_progress(self, event) -> None:
        real_progress(self, event)
        if event.phase == "chunk":
            held.stopped.set()
            held.release.wait(120)

    monkeypatch.setattr(warm_module.WarmWorkspace, "_note_progress", held_progress)
    monkeypatch.setattr(warm_module, "FIRST_INDEX_WAIT_S", 0.0)
    try:
        yield held
    finally:
        held.release.set()
