"""Reading LSP messages off a byte stream, surviving framing errors (see docs/protocol.md, "Framing").

pygls' own loop loses sync for good after one bad header: a `Content-Length` it cannot parse is skipped,
the body (which ends without a newline) is then read as the start of the next header line, and every later
header is glued to the body before it, so the server stays alive and never answers again. Here a bad
header block or an unparsable body is answered with a JSON-RPC parse error (-32700, id null) and reading
resumes at the next `Content-Length:` header, wherever in the stream it starts.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any, Protocol

log = logging.getLogger("codeloupe_lsp.framing")

HEADER = b"Content-Length:"
_LENGTH = re.compile(rb"Content-Length:[ \t]*(\d{1,10})[ \t]*\r?\n")
# A larger body is a framing error, not a message: waiting for that many bytes would swallow every
# message after it.
MAX_BODY_BYTES = 64 << 20
PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class AsyncByteReader(Protocol):
    async def readline(self) -> bytes: ...

    async def readexactly(self, n: int) -> bytes: ...


class MessageSink(Protocol):
    def structure_message(self, data: dict[str, Any]) -> Any: ...

    def handle_message(self, message: Any) -> None: ...

    def _send_data(self, data: Any) -> None: ...


class ResyncingReader:
    """A reader that can take bytes back: what follows a broken message is read again as a new one."""

    def __init__(self, reader: AsyncByteReader) -> None:
        self._reader = reader
        self._pending = b""

    def unread(self, data: bytes) -> None:
        self._pending = data + self._pending

    async def readline(self) -> bytes:
        newline = self._pending.find(b"\n")
        if newline >= 0:
            line, self._pending = self._pending[:newline + 1], self._pending[newline + 1:]
            return line
        line, self._pending = self._pending + await self._reader.readline(), b""
        return line

    async def readexactly(self, n: int) -> bytes:
        data, self._pending = self._pending[:n], self._pending[n:]
        while len(data) < n:
            more = await self._reader.readexactly(n - len(data))
            if not more:
                break
            data += more
        return data


async def serve_stream(stop: threading.Event, raw: AsyncByteReader, protocol: MessageSink) -> None:
    """Read and dispatch messages until end of input or `stop`."""
    reader = ResyncingReader(raw)
    length: int | None = None
    problem = ""
    while not stop.is_set():
        line = await reader.readline()
        if not line:
            return
        start = line.find(HEADER)
        if start > 0:  # a header glued to the end of a body that ended without a newline
            reader.unread(line[start:])
            problem = problem or "bytes before a header"
            continue
        if line.strip():
            if start == 0:
                match = _LENGTH.fullmatch(line)
                if match and int(match.group(1)) <= MAX_BODY_BYTES:
                    length = int(match.group(1))
                else:
                    problem = f"bad header {line.strip()[:80]!r}"
            continue  # other headers (Content-Type) carry nothing we use
        # A blank line ends the header block.
        if length is None:
            _report(protocol, problem or "a header block without Content-Length")
        else:
            body = await reader.readexactly(length)
            if len(body) < length:
                return  # end of input inside a body
            _dispatch(reader, protocol, body)
        length, problem = None, ""


def _dispatch(reader: ResyncingReader, protocol: MessageSink, body: bytes) -> None:
    try:
        data = json.loads(body)
    except ValueError as exc:
        # The length was wrong: if the next message's header is inside this body, read it again from there.
        resume = body.find(HEADER)
        if resume >= 0:
            reader.unread(body[resume:])
        _report(protocol, f"unparsable body ({exc})")
        return
    except RecursionError:
        _report(protocol, "unparsable body (nested too deeply)")
        return
    problem = _envelope_problem(data)
    if problem:  # pygls would drop it, or answer an internal error with its traceback: the client waits or reads it
        msg_id = data.get("id") if isinstance(data, dict) and _is_id(data.get("id")) else None
        log.error("invalid request: %s", problem)
        protocol._send_data({"jsonrpc": "2.0", "id": msg_id,
                             "error": {"code": INVALID_REQUEST, "message": f"invalid request: {problem}"}})
        return
    try:
        message = protocol.structure_message(data)
    except Exception:  # pygls' own loop logs and goes on; a bad message must not end the server
        log.exception("cannot structure a message")
        return
    try:
        protocol.handle_message(message)
    except Exception:
        log.exception("handling a message failed")


def _envelope_problem(data: Any) -> str:
    """What makes `data` no JSON-RPC 2.0 message LSP speaks ("" when it is one): a request, a notification, or a
    response to one of the server's requests."""
    if isinstance(data, list):
        return "a batch (a JSON array); LSP sends one message at a time"
    if not isinstance(data, dict):
        return f"a message is a JSON object, not {type(data).__name__}"
    if data.get("jsonrpc") != "2.0":
        return f"`jsonrpc` must be \"2.0\", got {str(data.get('jsonrpc'))[:40]!r}"
    if "id" in data and not _is_id(data["id"]) and not (data["id"] is None and "error" in data):
        return f"`id` must be an integer or a string, got {type(data['id']).__name__}"
    if "method" in data:
        return "" if isinstance(data["method"], str) else \
            f"`method` must be a string, got {type(data['method']).__name__}"
    return "" if "id" in data and ("result" in data or "error" in data) else "no `method`, and not a response"


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _report(protocol: MessageSink, problem: str) -> None:
    log.error("framing error: %s; resuming at the next Content-Length header", problem)
    protocol._send_data({"jsonrpc": "2.0", "id": None,
                         "error": {"code": PARSE_ERROR, "message": f"framing error: {problem}"}})
