"""The HTTP server's security rules, applied to every request before any route runs.

- Bound to loopback with no token: only Host headers naming a loopback address are answered (a web page on
  another site cannot reach the server through DNS rebinding); CORS stays off unless origins are configured.
- Bound beyond loopback: a bearer token is required (generated when not given) on everything but /healthz,
  the static shells of the search page and the graph map with their static files, and (with CORS on) a
  browser's CORS preflight, which never carries one.
- Request bodies are bounded, and each client's request rate is bounded by a token bucket.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import time
from dataclasses import dataclass, field

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 1_000_000  # a pasted bug report is a few KB; nothing the API takes is larger
RATE_PER_S = 100.0  # per client address; an editor or agent issues a few per second
BURST = 400  # a page of parallel calls, or a load test of 200 concurrent searches, passes at once
# Liveness probes carry no token, and neither can a browser loading a page's shell or its static files (no
# workspace data in them): the page then sends the token from its URL fragment on every API call.
OPEN_PATHS = ("/healthz", "/", "/graph")
OPEN_PREFIX = "/static/"


def is_loopback(host: str) -> bool:
    """True for `localhost` and any loopback address (127.0.0.0/8, ::1), with or without brackets."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass
class GuardConfig:
    host: str = "127.0.0.1"
    token: str | None = None  # required on every request but /healthz when set
    cors_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = MAX_BODY_BYTES
    rate_per_s: float = RATE_PER_S
    burst: int = BURST

    @classmethod
    def for_bind(cls, host: str, token: str | None = None, **rest) -> tuple[GuardConfig, bool]:
        """The configuration for serving on `host`; (config, generated) where `generated` says the token was
        made here (beyond loopback a token is mandatory) and must be shown to the user."""
        generated = token is None and not is_loopback(host)
        if generated:
            token = secrets.token_urlsafe(32)
        return cls(host=host, token=token, **rest), generated


class Guard:
    """ASGI middleware enforcing `GuardConfig` (see the module docstring)."""

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        self.app = app
        self.config = config
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, last refill)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _send_error(send, *refusal)
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.config.max_body_bytes):
            await _send_error(send, 413, f"request body over {self.config.max_body_bytes} bytes")
            return
        limit = self.config.max_body_bytes
        received = 0
        started = refused = False

        async def bounded_receive() -> Message:
            # A body sent without a length is counted as it streams; past the limit the app sees the client
            # go away, and the answer is ours.
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit and not refused:
                    refused = True
                    if not started:
                        await _send_error(send, 413, f"request body over {limit} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the 413 already went out
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, bounded_receive, tracked_send)

    def _refusal(self, scope: Scope, headers: Headers) -> tuple[int, str, dict[str, str]] | None:
        path = scope.get("path", "")
        if self.config.token is None:
            host = headers.get("host", "")
            if not is_loopback(_host_name(host)):
                return 403, "this server answers loopback host names only (start it with --token to serve more)", {}
        elif path not in OPEN_PATHS and not path.startswith(OPEN_PREFIX) and not self._cors_preflight(scope, headers):
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.config.token.encode()):
                return 401, "a bearer token is required (Authorization: Bearer <token>)", {"www-authenticate": "Bearer"}
        client = (scope.get("client") or ("?", 0))[0]
        if not self._take(client):
            return 429, "too many requests", {"retry-after": "1"}
        return None

    def _cors_preflight(self, scope: Scope, headers: Headers) -> bool:
        """A browser's CORS preflight, when CORS is on: it never carries credentials (Fetch standard), so
        requiring the token refused every cross-origin call that sends one. The CORS middleware answers it with
        headers only; no route runs."""
        return (bool(self.config.cors_origins) and scope.get("method") == "OPTIONS"
                and "origin" in headers and "access-control-request-method" in headers)

    def _take(self, client: str) -> bool:
        now = time.monotonic()
        tokens, last = self._buckets.get(client, (float(self.config.burst), now))
        tokens = min(float(self.config.burst), tokens + (now - last) * self.config.rate_per_s)
        if tokens < 1.0:
            self._buckets[client] = (tokens, now)
            return False
        self._buckets[client] = (tokens - 1.0, now)
        return True


def _host_name(host: str) -> str:
    """The name part of a Host header (`[::1]:8080` -> `::1`, `localhost:80` -> `localhost`); "" when the
    header is not a name with an optional numeric port (`localhost:evil`, `[::1]x`), which no check accepts."""
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        port_ok = not rest or (rest.startswith(":") and _is_port(rest[1:]))
        return name if bracket and port_ok else ""
    if host.count(":") != 1:
        return host  # no port, or an IPv6 address without brackets (the whole of it)
    name, _, port = host.partition(":")
    return name if _is_port(port) else ""


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit()


async def _send_error(send: Send, status: int, message: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
