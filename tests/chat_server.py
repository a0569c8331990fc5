"""A scripted OpenAI-compatible chat server on 127.0.0.1, the only stand-in the tests allow.

It speaks `POST /v1/chat/completions` (and `/chat/completions`): plain JSON for `stream: false` (with tool
calls when scripted) and server-sent events for `stream: true`; `POST .../embeddings` gets deterministic
vectors. Every request of any route is kept in `received` with its headers (a test can assert that a host
received nothing, or never a key). Each request is answered by the first
scripted `Reply` whose `when` text occurs in the request's messages (replies without `when` match anything);
a reply is used once unless `times` says otherwise. Unmatched requests get HTTP 500, so a test that does not
script a call sees the engine's failure path, never a silent default. Every request body is recorded.

Usage:
    with ChatServer() as chat:
        chat.add(Reply(text="The parser [[1]] reads ..."))
        settings = {"chat_base_url": chat.base_url, "chat_model": "scripted"}
"""

from __future__ import annotations

import hashlib
import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A test server on 127.0.0.1 that stays quiet when a client hangs up mid-answer: the timeout tests do that
    on purpose, and the handler's broken pipe is not the test's failure (any other error is still printed)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


# `[k] PATH lines a-b (label)`: a path may hold spaces and even ` lines 1-9`; the header's own range ends it.
_EXCERPT_HEADER = re.compile(r"^\[(\d+)\] (.+) lines (\d+)-(\d+)(?: \(.*\))?$", re.M)


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class Reply:
    """One scripted answer.

    text: the assistant's content (or `render(request body)` computes it: citations whose numbers depend on
    what the engine numbered). pieces: the exact deltas to stream it in (default: split every
    `piece_size` characters), so tests can split citation markers across deltas. tool_calls: answered
    instead of text (non-streamed calls only). error_after: stream this many pieces, then an SSE error event.
    drop_after: stream this many pieces, then cut the connection mid-body. hold_after: stream this many pieces,
    then send nothing more until the client hangs up or the server shuts down (`ChatServer.held` counts the
    requests that got there, `hangups` those whose client then closed the connection). hang_s: wait this long
    before answering (the server's shutdown releases it early). status: answer with this HTTP error status (its
    message: `text`, when given).
    raw: stream exactly these bytes as the body's chunks (a `stream: true` request), garbage included: what
    a broken or hostile endpoint sends.
    """

    text: str = ""
    render: Callable[[dict[str, Any]], str] | None = None
    when: str | None = None
    pieces: list[str] | None = None
    piece_size: int = 7
    tool_calls: list[ToolCall] = field(default_factory=list)
    error_after: int | None = None
    drop_after: int | None = None
    hold_after: int | None = None
    hang_s: float = 0.0
    status: int = 200
    raw: list[bytes] | None = None
    times: int = 1

    def content(self, body: dict[str, Any]) -> str:
        return self.render(body) if self.render is not None else self.text

    def stream_pieces(self, body: dict[str, Any]) -> list[str]:
        if self.pieces is not None:
            return list(self.pieces)
        text = self.content(body)
        return [text[i:i + self.piece_size] for i in range(0, len(text), self.piece_size)]


@dataclass(frozen=True)
class Received:
    """One request as it arrived, whatever its route."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: str

    @property
    def authorization(self) -> str:
        return self.headers.get("authorization", "")

    def __str__(self) -> str:
        return f"{self.method} {self.path} {json.dumps(self.headers)} {self.body}"


EMBEDDING_DIM = 8


def embedding_for(text: str) -> list[float]:
    return [float(b) - 127.5 for b in hashlib.sha256(text.encode()).digest()[:EMBEDDING_DIM]]


def request_text(body: dict[str, Any]) -> str:
    """Every message's text content (and tool results) of a request, joined: what `when` matches against."""
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "\n".join(parts)


def excerpt_numbers(body: dict[str, Any]) -> list[tuple[int, str, int, int]]:
    """Every numbered excerpt `[k] path lines a-b` a request showed the model, as (k, path, a, b)."""
    return [(int(k), path, int(a), int(b)) for k, path, a, b in _EXCERPT_HEADER.findall(request_text(body))]


def cite(body: dict[str, Any], path: str, line: int | None = None) -> int:
    """The number of the last excerpt of `path` (containing `line`, when given) that the request showed."""
    found = [k for k, p, a, b in excerpt_numbers(body) if p == path and (line is None or a <= line <= b)]
    if not found:
        raise AssertionError(f"the request showed no excerpt of {path} (line {line})")
    return found[-1]


class ChatServer:
    def __init__(self, embedder: Callable[[str], list[float]] = embedding_for) -> None:
        """`embedder`: the vector `POST .../embeddings` answers for each input (a test that needs chosen
        similarities between its texts passes its own)."""
        self.embedder = embedder
        self._replies: list[Reply] = []
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.received: list[Received] = []  # every request, any route (`requests`: the chat bodies)
        self.errors: list[str] = []  # a scripted `render` that raised (the request got HTTP 500)
        self.released = threading.Event()  # set at shutdown: hung replies stop waiting
        self._counted = threading.Condition(self._lock)
        self.held = 0  # requests a `hold_after` reply is holding, or held
        self.hangups = 0  # of those, the ones whose client closed the connection
        self._httpd = LoopbackHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="chat-server", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def take(self, body: dict[str, Any]) -> Reply | None:
        text = request_text(body)
        with self._lock:
            self.requests.append(body)
            for reply in self._replies:
                if reply.times > 0 and (reply.when is None or reply.when in text):
                    reply.times -= 1
                    return reply
        return None

    def receive(self, seen: Received) -> None:
        with self._lock:
            self.received.append(seen)

    def received_paths(self) -> list[str]:
        with self._lock:
            return [seen.path for seen in self.received]

    def everything(self) -> str:
        """Every request line, header and body received, as one text (to search for a leaked secret)."""
        with self._lock:
            return "\n".join(str(seen) for seen in self.received)

    def count(self, what: str) -> None:
        with self._counted:
            setattr(self, what, getattr(self, what) + 1)
            self._counted.notify_all()

    def wait_for(self, what: str, n: int, timeout_s: float = 60.0) -> int:
        """Wait (at most `timeout_s`) until the counter `what` (`held`, `hangups`) reaches `n`; its value."""
        with self._counted:
            self._counted.wait_for(lambda: getattr(self, what) >= n, timeout_s)
            return getattr(self, what)

    def pending(self) -> list[Reply]:
        """Scripted replies no request has used up (a test can assert its script was consumed)."""
        with self._lock:
            return [r for r in self._replies if r.times > 0]

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _chunk_json(model: str, delta: dict[str, Any], finish: str | None) -> bytes:
    payload = {
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(payload)}\n\n".encode()


def _make_handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            server.receive(Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                    raw.decode("utf-8", "replace")))
            if self.path.rstrip("/").endswith("/embeddings"):
                data = [{"object": "embedding", "index": i, "embedding": server.embedder(text)}
                        for i, text in enumerate(json.loads(raw)["input"])]
                self._json(200, {"object": "list", "data": data, "model": "scripted",
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            body = json.loads(raw or b"{}")
            reply = server.take(body)
            if reply is None:
                self._json(500, {"error": {"message": "no scripted reply for this request", "type": "script"}})
                return
            if reply.hang_s and server.released.wait(reply.hang_s):
                return  # the test is over: give up the connection without answering
            if reply.status != 200:
                self._json(reply.status, {"error": {"message": reply.text or f"scripted status {reply.status}",
                                                    "type": "server_error"}})
                return
            model = body.get("model", "scripted")
            try:
                reply.content(body)
            except Exception as exc:  # a broken script must fail the test loudly, not look like a model error
                server.errors.append(repr(exc))
                self._json(500, {"error": {"message": f"script error: {exc!r}", "type": "script"}})
                return
            if body.get("stream"):
                self._stream(reply, body, model)
            else:
                self._complete(reply, body, model)

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _complete(self, reply: Reply, body: dict[str, Any], model: str) -> None:
            message: dict[str, Any] = {"role": "assistant", "content": reply.content(body) or None}
            if reply.tool_calls:
                message["tool_calls"] = [
                    {"id": f"call_{i}", "type": "function",
                     "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
                    for i, call in enumerate(reply.tool_calls)
                ]
            self._json(200, {
                "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })

        def _send_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _hold(self) -> None:
            """Send nothing until the client closes the connection (counted) or the test ends."""
            server.count("held")
            self.close_connection = True
            while not server.released.is_set():
                readable, _, _ = select.select([self.connection], [], [], 0.1)
                try:
                    if readable and not self.connection.recv(4096, socket.MSG_PEEK):
                        server.count("hangups")
                        return
                    if readable:
                        self.connection.recv(4096)  # whatever else the client sends: read and ignored
                except ConnectionResetError:  # a client closing with unread data resets: a hang-up too
                    server.count("hangups")
                    return

        def _stream(self, reply: Reply, body: dict[str, Any], model: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if reply.raw is not None:
                for data in reply.raw:
                    self._send_chunk(data)
                self._send_chunk(b"")
                return
            self._send_chunk(_chunk_json(model, {"role": "assistant", "content": ""}, None))
            for sent, piece in enumerate(reply.stream_pieces(body)):
                if reply.error_after is not None and sent == reply.error_after:
                    error = {"error": {"message": "scripted failure mid-stream", "type": "server_error"}}
                    self._send_chunk(f"data: {json.dumps(error)}\n\n".encode())
                    self._send_chunk(b"")
                    return
                if reply.hold_after is not None and sent == reply.hold_after:
                    self._hold()
                    return
                if reply.drop_after is not None and sent == reply.drop_after:
                    self.wfile.write(b"400\r\ndata: {\"trunc")  # a chunk cut short, then the socket closes
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self._send_chunk(_chunk_json(model, {"content": piece}, None))
            self._send_chunk(_chunk_json(model, {}, "stop"))
            self._send_chunk(b"data: [DONE]\n\n")
            self._send_chunk(b"")

    return Handler
