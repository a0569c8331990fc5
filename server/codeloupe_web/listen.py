"""The listening socket `codeloupe serve` hands to uvicorn, and how uvicorn serves on it."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port` (port 0 picks a free one).

    Made with an explicit IPPROTO_TCP: asyncio turns on TCP_NODELAY for accepted connections only when the
    socket says it is TCP, and `socket.create_server` leaves the protocol 0. Without it every response on a
    kept-alive connection waited ~44 ms on Nagle and the client's delayed ACK (bench/serve_bench.py: HTTP p50
    48 ms -> a few ms).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


# Long enough for a request of the largest body served (1 MB) over a slow link; short enough that holding
# connections open costs a client a new connection every few seconds each.
REQUEST_RECEIVE_TIMEOUT_S = 15.0


class ReceiveDeadlineProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on receiving each request, head and body.

    uvicorn times a connection out only while it idles between requests: one that sends nothing, or half a
    request head, or a body a byte at a time, was held open for good, and enough of them use up the process's
    file descriptors (no new connection is accepted then). A request not received in full within
    `REQUEST_RECEIVE_TIMEOUT_S` of its first byte (of the connection, for the first) has its connection closed.
    Answers are not timed: a streamed `ask` may take as long as the model does.
    """

    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[arg-type]
        self._start_deadline()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._start_deadline()  # the first bytes of a next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state not in _RECEIVING:
            self._stop_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def _start_deadline(self) -> None:
        self._deadline = self.loop.call_later(REQUEST_RECEIVE_TIMEOUT_S, self._expired)

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.conn.their_state in _RECEIVING and not self.transport.is_closing():
            self.transport.close()


_RECEIVING = (h11.IDLE, h11.SEND_BODY)


def server_config(app: FastAPI, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration `codeloupe serve` runs `app` with (and the tests, so they serve it the same)."""
    return uvicorn.Config(app, http=ReceiveDeadlineProtocol, log_level="warning", access_log=False, **options)
