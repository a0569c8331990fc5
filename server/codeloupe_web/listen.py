"""The listening socket `codeloupe serve` hands to uvicorn."""

from __future__ import annotations

import socket


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
