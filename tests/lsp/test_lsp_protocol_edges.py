"""The protocol's edges over real stdio: framing errors (raw bytes), requests outside the lifecycle,
mistyped standard params, and a file name that is not UTF-8 in a served folder."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from lsp_helpers import RawServer, expect_error, start_server, stop_server, uri, write_project
from lsprotocol import types as lsp

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, SERVER_NOT_INITIALIZED = -32700, -32600, -32602, -32002


def test_a_framing_error_is_answered_and_the_server_keeps_listening() -> None:
    server = RawServer()
    try:
        server.initialize()
        # A Content-Length that is not a number: its body must not swallow the headers after it.
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "codeloupe/status", "params": {}}).encode()
        server.send_bytes(b"Content-Length: twelve\r\n\r\n" + body)
        server.send_bytes(server.request(3, "codeloupe/status", {}))
        error = server.next_reply()
        assert error["id"] is None and error["error"]["code"] == PARSE_ERROR
        assert server.next_reply() == {"jsonrpc": "2.0", "id": 3, "result": {"folders": [], "repositories": [], "repositoriesMessage": ""}}

        # A Content-Length too short, then one too long: each costs its own message, not the next one.
        server.send_bytes(server.frame({"jsonrpc": "2.0", "id": 4, "method": "codeloupe/status",
                                        "params": {}}, length_delta=-10))
        server.send_bytes(server.request(5, "codeloupe/status", {}))
        assert server.next_reply()["error"]["code"] == PARSE_ERROR
        assert server.next_reply()["id"] == 5
        server.send_bytes(server.frame({"jsonrpc": "2.0", "id": 6, "method": "codeloupe/status",
                                        "params": {}}, length_delta=25))
        server.send_bytes(server.request(7, "codeloupe/status", {}))
        assert server.next_reply()["error"]["code"] == PARSE_ERROR
        assert server.next_reply()["id"] == 7

        # Then the lifecycle ends normally.
        server.send_bytes(server.request(8, "shutdown"))
        assert server.next_reply() == {"jsonrpc": "2.0", "id": 8, "result": None}
        server.send_bytes(server.frame({"jsonrpc": "2.0", "method": "exit"}))
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.close()


def test_messages_that_are_no_json_rpc_requests_are_answered_invalid_request() -> None:
    """pygls dropped these (the client waited for good) or answered them with its traceback."""
    server = RawServer()
    status = {"jsonrpc": "2.0", "id": 2, "method": "codeloupe/status", "params": {}}
    try:
        server.initialize()
        for message, msg_id in ([[status], None], [{**status, "jsonrpc": "1.0"}, 2], [{**status, "jsonrpc": None}, 2],
                                [{k: v for k, v in status.items() if k != "jsonrpc"}, 2],
                                [{**status, "id": {"a": 1}}, None], [{**status, "id": 2.5}, None],
                                [{**status, "method": 7}, 2], ["just a string", None], [{"jsonrpc": "2.0"}, None]):
            server.send_bytes(server.frame(message))
            reply = server.next_reply()
            assert reply["id"] == msg_id and reply["error"]["code"] == INVALID_REQUEST, (message, reply)
            assert "Traceback" not in json.dumps(reply)
        nested = b"[" * 100_000 + b"]" * 100_000
        server.send_bytes(f"Content-Length: {len(nested)}\r\n\r\n".encode() + nested)
        assert server.next_reply()["error"]["code"] == PARSE_ERROR
        server.send_bytes(server.frame(status))
        assert server.next_reply() == {"jsonrpc": "2.0", "id": 2, "result": {"folders": [], "repositories": [], "repositoriesMessage": ""}}
    finally:
        server.close()


def test_no_editor_sends_its_buffers_and_one_that_does_is_ignored() -> None:
    """pygls' own open/close handlers made the capability say openClose: an editor sent every file it opened
    whole (Neovim stalled 1-1.5 s encoding a 52 MB file) and the server kept a copy of each, reading none."""
    server = RawServer()
    try:
        server.send_bytes(server.request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {
            "textDocument": {"synchronization": {"didSave": True}}}}))
        sync = server.next_reply()["result"]["capabilities"]["textDocumentSync"]
        assert sync["openClose"] is False and sync["change"] == 0 and sync["save"]
        document = {"uri": "file:///nowhere/a.py", "languageId": "python", "version": 1, "text": "x = 1\n" * 1000}
        server.send_bytes(server.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        server.send_bytes(server.frame({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                                        "params": {"textDocument": document}}))
        server.send_bytes(server.request(2, "codeloupe/status", {}))
        assert server.next_reply() == {"jsonrpc": "2.0", "id": 2, "result": {"folders": [], "repositories": [], "repositoriesMessage": ""}}
    finally:
        server.close()


def test_a_request_before_initialize_is_server_not_initialized() -> None:
    server = RawServer()
    try:
        server.send_bytes(server.request(1, "codeloupe/search", {"query": "x"}))
        reply = server.next_reply()
        assert reply["id"] == 1 and reply["error"]["code"] == SERVER_NOT_INITIALIZED
        server.send_bytes(server.request(2, lsp.WORKSPACE_SYMBOL, {"query": "x"}))
        assert server.next_reply()["error"]["code"] == SERVER_NOT_INITIALIZED
        server.initialize()  # initialize still works afterwards
    finally:
        server.close()


def test_exit_without_shutdown_exits_with_status_1() -> None:
    """LSP: `exit` exits 0 once `shutdown` came before, 1 otherwise (the second case, a client that skipped the
    shutdown, exited 0: the status of the process was always 0, whatever pygls' `exit` said)."""
    server = RawServer()
    try:
        server.initialize()
        server.send_bytes(server.frame({"jsonrpc": "2.0", "method": "exit"}))
        assert server.proc.wait(timeout=30) == 1
    finally:
        server.close()


async def test_requests_after_shutdown_are_invalid_requests(tmp_path: Path) -> None:
    client = await start_server([write_project(tmp_path / "project")])
    await client.wait_ready()
    await client.shutdown_async(None)
    # Before the fix these were dropped: a client waited forever (here: 30 s, then the test fails).
    await expect_error(asyncio.wait_for(client.request("codeloupe/status", {}), 30), INVALID_REQUEST)
    await expect_error(asyncio.wait_for(client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="login")),
                                        30), INVALID_REQUEST)
    client.exit(None)
    await client.stop()


async def test_mistyped_workspace_symbol_params_are_invalid_params(tmp_path: Path) -> None:
    client = await start_server([write_project(tmp_path / "project")])
    try:
        await client.wait_ready()
        message = await expect_error(client.raw_request(lsp.WORKSPACE_SYMBOL, {"query": 42}), INVALID_PARAMS)
        assert "query" in message
        await expect_error(client.raw_request(lsp.WORKSPACE_SYMBOL, {"query": ["a"]}), INVALID_PARAMS)
        await expect_error(client.raw_request(lsp.WORKSPACE_SYMBOL, {}), INVALID_PARAMS)
        message = await expect_error(client.raw_request(lsp.WORKSPACE_SYMBOL, {"query": "a" * 20_001}),
                                     INVALID_PARAMS)
        assert "at most 20,000 characters" in message
        symbols = await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="SessionManager"))
        assert symbols  # well-typed requests still work
    finally:
        await stop_server(client)


async def test_a_file_name_that_is_not_utf8_leaves_the_folder_ready(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    with open(os.path.join(os.fsencode(project), b"app", b"caf\xe9.py"), "wb") as fh:
        fh.write(b"def latin_named():\n    return 1\n")
    client = await start_server([project])
    try:
        (folder,) = await client.wait_ready()
        assert folder["state"] == "ready", folder
        assert folder["files"] == 5  # every file of the project but the one with the Latin-1 name
        result = await client.request("codeloupe/search", {"query": "SessionManager login"})
        assert result["core"][0]["path"] == "app/auth.py"
        assert await client.command("codeloupe.reindex", uri(project)) == {"files": 5, "chunks": 4}
    finally:
        await stop_server(client)
