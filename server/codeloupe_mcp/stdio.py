"""MCP over stdin/stdout, answering every line that is not a message.

The SDK's stdio transport hands a line it cannot read to the session as an exception, and the session only
logs it: the client that sent it waits for an answer that never comes. JSON-RPC 2.0 answers such a line with
an error whose id is null: -32700 for text that is not JSON, -32600 for JSON that is not a message. Those
answers are written through the transport's own writer, so they never interleave with another frame.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError


def serve_stdio(server: MCPServer) -> None:
    """Serve `server` over the process's stdin and stdout until stdin ends."""
    anyio.run(_serve, server)


async def _serve(server: MCPServer) -> None:
    # The SDK keeps the protocol server behind the high-level one without a public accessor; the SDK's
    # version is pinned in constraints.txt and tests/serve/test_mcp.py speaks to this path over a pipe.
    protocol = server._lowlevel_server
    async with stdio_server() as (lines, replies):
        messages_in, messages = create_context_streams[SessionMessage | Exception](0)

        async def sift() -> None:
            async with messages_in:
                async for item in lines:
                    if isinstance(item, Exception):
                        await replies.send(SessionMessage(unreadable_line_error(item)))
                    else:
                        await messages_in.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sift)
            await protocol.run(messages, replies, protocol.create_initialization_options())
            tasks.cancel_scope.cancel()


def unreadable_line_error(problem: Exception) -> JSONRPCError:
    """The JSON-RPC answer to a line the transport could not read as a message."""
    not_json = isinstance(problem, ValidationError) and any(
        error["type"] == "json_invalid" for error in problem.errors())
    if not_json or not isinstance(problem, ValidationError):
        error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON")
    else:
        error = ErrorData(code=INVALID_REQUEST, message="Invalid request: the line is not a JSON-RPC message")
    return JSONRPCError(jsonrpc="2.0", id=None, error=error)
