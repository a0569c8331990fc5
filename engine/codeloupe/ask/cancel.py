"""Cancelling an ask from another thread: the model calls in flight are cut off at their sockets.

A thread reading a model's answer is blocked in a socket read until bytes arrive or the call times out, and
closing the HTTP response from another thread does not wake it. `Cancellation` learns every connection its
chat client opens (through the HTTP client's `trace` extension, which reports each new connection) and, once
cancelled, shuts them all down: a blocked read ends at once with a connection error (`ChatModel` turns it
into a `ChatError` saying the ask was cancelled), and a connection made afterwards is shut as it opens.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

CANCELLED = "the ask was cancelled"
# The trace events that carry a new connection (plain TCP, then the TLS stream over it for https).
_CONNECTED = (".connect_tcp.complete", ".start_tls.complete")


class Cancellation:
    """Set once, from any thread; then every connection of the calls it watches is shut down."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._sockets: list[socket.socket] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)

    def watch(self, request: Any) -> None:
        """A request hook of the HTTP client: the connections `request` opens are reported to this object
        (`request.extensions["trace"]`, a documented extension of httpx)."""
        request.extensions["trace"] = self._traced

    def _traced(self, event: str, info: dict[str, Any]) -> None:
        if not event.endswith(_CONNECTED):
            return
        sock = info["return_value"].get_extra_info("socket")
        with self._lock:
            if not self._cancelled:
                self._sockets.append(sock)
                return
        _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Shut both directions: unlike closing, this wakes a thread blocked reading the socket."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by its call, or the peer is gone: nothing is waiting on it
        pass
