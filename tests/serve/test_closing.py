"""Closing what a server serves: every workspace stops at once, so the process's exit waits for the slowest one's
close, not for each close in turn."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from chat_server import LoopbackHTTPServer
from codeloupe.api import Workspace
from codeloupe_serving.warm import WarmWorkspaces


class Embeddings:
    """An OpenAI-compatible `/v1/embeddings` on loopback; with `held`, each request is answered only once `release`
    is set (120 s at most), `arrived` set as one comes in."""

    def __init__(self, *, held: bool) -> None:
        self.held = held
        self.arrived = threading.Event()
        self.release = threading.Event()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.arrived.set()
                if endpoint.held:
                    endpoint.release.wait(120)
                data = [{"object": "embedding", "index": i, "embedding": [1.0, float(len(text) % 7), 0.5, 0.25]}
                        for i, text in enumerate(payload["input"])]
                body = json.dumps({"object": "list", "data": data, "model": payload["model"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


@contextmanager
def embeddings(endpoint: Embeddings) -> Iterator[str]:
    httpd = LoopbackHTTPServer(("127.0.0.1", 0), endpoint.handler())
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        endpoint.release.set()
        httpd.shutdown()
        httpd.server_close()


def _workspace(root: Path, base_url: str) -> Workspace:
    root.mkdir()
    for i in range(3):
        (root / f"{root.name}{i}.py").write_text(f"def {root.name}_{i}(value):\n    return value + {i}\n")
    return Workspace(root, overrides={"embed_provider": "openai", "embed_base_url": base_url,
                                      "embed_model": "tiny-embed", "embed_timeout_s": 120.0})


def test_served_workspaces_close_side_by_side(tmp_path: Path) -> None:
    """`codeloupe serve a b` closing (SIGTERM, or its client gone) closed a, then b: each close waits for what it
    cannot stop (here a's embedding request in flight, up to 30 s; a resolution or a model's first load elsewhere),
    so the process's exit waited for the sum of every workspace's waits. Each workspace now closes on its own
    thread: b is closed while a's close still waits for its request."""
    slow, quick = Embeddings(held=True), Embeddings(held=False)
    with embeddings(slow) as slow_url, embeddings(quick) as quick_url:
        pool = WarmWorkspaces([_workspace(tmp_path / "a", slow_url), _workspace(tmp_path / "b", quick_url)])
        a, b = (warm.ws for warm in pool.all)
        closing = threading.Thread(target=pool.close)
        try:
            assert slow.arrived.wait(60), "a's embedding never asked its endpoint"
            closing.start()
            deadline = time.monotonic() + 90  # past a's 30 s for its request: the old order then closed b
            while not b.closed:
                assert time.monotonic() < deadline, "b was never closed"
                time.sleep(0.05)
            assert not a.closed and not slow.release.is_set()  # a's close still waits for its request
        finally:
            slow.release.set()
            if closing.ident is None:
                pool.close()
            else:
                closing.join(60)
        assert a.closed and not closing.is_alive()
