"""Requests that need no ranking: expand, openLocation, bad input, faults, a corrupt index."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import Client, start_server, stop_server, uri
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

INVALID_PARAMS = -32602
REQUEST_FAILED = -32803


async def expect_error(pending, code: int) -> str:
    with pytest.raises(JsonRpcException) as caught:
        await pending
    assert caught.value.code == code, caught.value.message
    return caught.value.message


async def test_expand_reads_lines_verbatim_from_disk(client: Client, project: Path) -> None:
    path = project / "app/store.py"
    lines = path.read_text().splitlines(keepends=True)
    whole = await client.request("codeloupe/expand", {"uri": uri(path)})
    assert whole["text"] == "".join(lines)
    assert whole["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}

    span = {"start": {"line": 5, "character": 0}, "end": {"line": 7, "character": 0}}
    part = await client.request("codeloupe/expand", {"uri": uri(path), "range": span})
    assert part["text"] == "".join(lines[5:7])
    assert part["range"] == span


async def test_expand_refuses_paths_outside_the_workspace_and_bad_ranges(client: Client, project: Path,
                                                                         tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("password\n")
    message = await expect_error(client.request("codeloupe/expand", {"uri": uri(outside)}), INVALID_PARAMS)
    assert "outside every workspace folder" in message
    escape = uri(project) + "/../secret.txt"
    await expect_error(client.request("codeloupe/expand", {"uri": escape}), INVALID_PARAMS)

    beyond = {"start": {"line": 500, "character": 0}, "end": {"line": 501, "character": 0}}
    message = await expect_error(client.request("codeloupe/expand", {"uri": uri(project / "app/store.py"),
                                                                     "range": beyond}), INVALID_PARAMS)
    assert "outside the file" in message
    message = await expect_error(client.request("codeloupe/expand", {"uri": uri(project / "app/store.py"),
                                                                     "range": {"start": {"line": 1}}}),
                                 INVALID_PARAMS)
    assert "`range`.start.character" in message


async def test_a_file_deleted_since_indexing_answers_a_clear_error(client: Client, project: Path) -> None:
    path = project / "app/web.py"
    path.unlink()
    message = await expect_error(client.request("codeloupe/expand", {"uri": uri(path)}), INVALID_PARAMS)
    assert "no such file" in message
    span = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    message = await expect_error(client.command("codeloupe.openLocation", uri(path), span), REQUEST_FAILED)
    assert "no such file" in message


async def test_open_location_sends_show_document_with_the_selection(client: Client, project: Path) -> None:
    span = {"start": {"line": 6, "character": 0}, "end": {"line": 9, "character": 0}}
    target = uri(project / "app/auth.py")
    assert await client.command("codeloupe.openLocation", target, span) is True
    (shown,) = client.shown_documents
    assert shown.uri == target
    assert shown.take_focus is True
    assert shown.selection == lsp.Range(start=lsp.Position(line=6, character=0),
                                        end=lsp.Position(line=9, character=0))


async def test_malformed_params_answer_invalid_params_naming_the_field(client: Client, project: Path) -> None:
    message = await expect_error(client.request("codeloupe/search", {"limit": 3}), INVALID_PARAMS)
    assert "`query` is required" in message
    message = await expect_error(client.request("codeloupe/search", {"query": "x", "limit": "ten"}),
                                 INVALID_PARAMS)
    assert "`limit`" in message
    message = await expect_error(client.request("codeloupe/search", {"query": "x", "docs": "pdf"}),
                                 INVALID_PARAMS)
    assert "`docs`" in message
    message = await expect_error(client.request("codeloupe/search", ["not", "an", "object"]), INVALID_PARAMS)
    assert "params must be an object" in message
    message = await expect_error(client.request("codeloupe/graph", {"mode": "orbit"}), INVALID_PARAMS)
    assert "`mode`" in message
    # A standard request whose params do not match its type: pygls alone would never answer it.
    message = await expect_error(client.raw_request(lsp.TEXT_DOCUMENT_HOVER, {
        "textDocument": {"uri": uri(project / "app/auth.py")}}), INVALID_PARAMS)
    assert "position" in message
    message = await expect_error(client.command("codeloupe.openLocation", uri(project / "app/auth.py")),
                                 INVALID_PARAMS)
    assert "[uri, range]" in message
    message = await expect_error(client.command("codeloupe.reindex", uri(project.parent / "elsewhere")),
                                 INVALID_PARAMS)
    assert "folderUri" in message
    # ... and the server is still answering.
    assert (await client.status())[0]["state"] == "ready"


async def test_a_corrupt_index_is_rebuilt_with_a_warning(project: Path) -> None:
    first = await start_server([project])
    (folder,) = await first.wait_ready()
    await stop_server(first)
    index = Path(folder["indexPath"])
    for suffix in ("-wal", "-shm"):
        Path(str(index) + suffix).unlink(missing_ok=True)
    index.write_bytes(b"this is not a sqlite database" * 100)

    second = await start_server([project])
    try:
        (rebuilt,) = await second.wait_ready()
        assert rebuilt["files"] == folder["files"]
        warnings = [m.message for m in second.messages if m.type == lsp.MessageType.Warning]
        assert any("rebuilt" in w and "corrupt" in w for w in warnings), warnings
    finally:
        await stop_server(second)


async def test_an_unreachable_embedding_endpoint_degrades_with_one_warning(project: Path) -> None:
    client = await start_server([project], options={
        "embedProvider": "openai", "embedBaseUrl": "http://127.0.0.1:9/v1", "embedApiKey": "k",
        "embedModel": "m", "embedTimeoutS": 1})
    try:
        (folder,) = await client.wait_ready()
        assert folder["state"] == "ready"
        assert folder["message"]
        path = project / "app/store.py"
        for _ in range(3):  # saves re-index but do not retry the dead endpoint (no warning loop)
            client.text_document_did_save(lsp.DidSaveTextDocumentParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri(path))))
        await client.wait_ready()
        warnings = [m.message for m in client.messages if m.type == lsp.MessageType.Warning]
        assert len([w for w in warnings if "embeddings unavailable" in w]) == 1, warnings
    finally:
        await stop_server(client)
