"""A loopback HTTP server that records every request it receives: the stand-in for a host someone chose.

The trust tests start two: one a hostile repository names in its settings (it must receive nothing until the
user trusts the repository, and never the user's keys) and one the user configured. It answers
`POST .../embeddings` with deterministic vectors (so indexing completes) and everything else with HTTP 500 (so
`ask` falls back to the bundle, having still sent its request). 127.0.0.1 only.

Usage:
    with RecordingServer() as host:
        settings = {"embed_base_url": host.base_url}
        ...
        assert host.requests == []
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIM = 8


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: str

    @property
    def authorization(self) -> str:
        return self.headers.get("authorization", "")

    def __str__(self) -> str:
        return f"{self.method} {self.path} {json.dumps(self.headers)} {self.body}"


class RecordingServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[Seen] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="recording-server", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def paths(self) -> list[str]:
        return [seen.path for seen in self.requests]

    def everything(self) -> str:
        """Every request line, header and body received, as one text (to search for leaked secrets)."""
        return "\n".join(str(seen) for seen in self.requests)

    def record(self, seen: Seen) -> None:
        with self._lock:
            self._seen.append(seen)

    def __enter__(self) -> RecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _vector(text: str) -> list[float]:
    return [float(b) - 127.5 for b in hashlib.sha256(text.encode()).digest()[:DIM]]


def _handler(server: RecordingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
            server.record(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.command == "POST" and self.path.rstrip("/").endswith("/embeddings"):
                inputs = json.loads(body)["input"]
                data = [{"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(inputs)]
                self._json(200, {"object": "list", "data": data, "model": "recorded",
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})
            else:
                self._json(500, {"error": {"message": "this host only records", "type": "server_error"}})

        do_GET = do_POST = do_PUT = _answer  # noqa: N815 - the http.server hook names

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
