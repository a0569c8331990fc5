"""Faults and long requests, each on its own server: a corrupt index, a dead embedding endpoint, ask."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest
from lsp_helpers import disk_lines, location_paths, start_server, stop_server, uri, write_project
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcContentModified, JsonRpcException

from chat_server import ChatServer, Reply, cite
from codeloupe.api import Workspace, open_shared_held
from codeloupe_lsp.server import FOLDER_CLOSED, build_server
from full_disk import disk_full
from processes import FAILING_GRAMMAR


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


async def test_damage_only_the_integrity_check_finds_is_found_after_the_progress_shows(tmp_path: Path) -> None:
    """The check reads every page (seconds on a large index), so it runs under the start-up progress, not
    before it; what it finds is still moved aside and rebuilt before any query answers."""
    from test_damaged_state import settle, zero_cell_pointers

    files = {f"pkg/mod{i:02}.py": "\n\n".join(
        f"def handler_{i}_{j}(request):\n    return request.get('field_{j}') or {i * j}\n" for j in range(30))
        for i in range(60)}
    root = write_project(tmp_path / "repo", files)
    first = await start_server([root])
    (folder,) = await first.wait_ready()
    await stop_server(first)
    index = Path(folder["indexPath"])
    settle(index)
    zero_cell_pointers(index)

    second = await start_server([root])
    try:
        found = await second.request("codeloupe/search", {"query": "handler_42_7"})
        assert found["core"][0]["path"] == "pkg/mod42.py"
        warnings = [m.message for m in second.messages if m.type == lsp.MessageType.Warning]
        assert any("rebuilt" in w and "corrupt" in w for w in warnings), warnings
        (token, reports), = second.progress_reports.items()
        assert reports[0].kind == "begin" and reports[1].message == "checking the index"
        (rebuilt,) = await second.wait_ready()
        assert rebuilt["files"] == folder["files"] == 60
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


@pytest.mark.parametrize("failure", ["crash", "hang"])
async def test_a_saved_file_whose_grammar_crashes_or_never_finishes_costs_that_file_not_the_server(
        project: Path, failure: str) -> None:
    """A saved file was chunked, and its graph facts taken, in the server's own process: a grammar's crash on it
    killed the server, and its loop froze it for good (py-tree-sitter holds the interpreter lock while it parses,
    so no other request was answered). Both now happen in a kept worker process; the file gets line windows."""
    script = project.parent / "server.py"
    script.write_text(FAILING_GRAMMAR + textwrap.dedent("""
        if __name__ == "__main__":
            with_short_timeouts()
            from codeloupe_lsp.__main__ import main
            main([])
    """))
    client = await start_server([project], command=(str(script), failure))
    try:
        await client.wait_ready()
        saved = project / "app/billing.py"
        saved.write_text("def refund(invoice):\n    return 'zanzibar fails its grammar'\n")
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(
            uri=uri(saved))))
        found = await client.search_until("zanzibar", lambda r: "app/billing.py" in location_paths(r),
                                          "the saved file")
        assert found["core"][0]["path"] == "app/billing.py"
        assert await client.request("codeloupe/search", {"query": "load_user"})  # still answering after the save
        await client.wait_ready()
    finally:
        await stop_server(client)


async def test_a_request_reading_a_folder_closed_under_it_is_answered_content_modified(tmp_path: Path) -> None:
    """A request in flight as its folder is removed (a hover, a search past the graph build) reads a closed store:
    it was answered as an engine fault, -32803 "codeloupe engine error: ProgrammingError: Cannot operate on a closed
    database." with a traceback logged as an error. It is the folder's closing, answered -32801 as a search stopped
    by the close is (`IndexStopped`), through the server's one conversion of engine calls."""
    (tmp_path / "auth.py").write_text("def login(user):\n    return user\n")
    ws = Workspace(tmp_path)
    ws.index()
    ws.close()
    server = build_server()
    for call, arguments in ((ws.search, ("login",)), (ws.expand, ("auth.py", 1, 2))):
        with pytest.raises(JsonRpcContentModified) as refused:
            await server.engine(call, *arguments)
        assert refused.value.message == FOLDER_CLOSED


async def test_a_shared_index_out_of_reach_is_said_in_its_own_words_not_as_an_engine_fault() -> None:
    """`codeloupe.store.url` naming a database that does not answer was shown as "codeloupe engine error:
    StoreError: cannot connect to the shared index ..." with a traceback logged as an error: the store's sentence
    says what is wrong and is the whole answer."""
    server = build_server()
    with pytest.raises(JsonRpcException) as refused:
        await server.engine(open_shared_held, ["billing"], {"store_url": "postgresql://codeloupe@127.0.0.1:1/none"})
    assert refused.value.message.startswith("cannot connect to the shared index"), refused.value.message


async def test_ask_streams_events_and_returns_verbatim_citations(project: Path) -> None:
    with ChatServer() as chat:
        chat.add(Reply(text="Login loads the user and compares salted hashes [[1]].", times=5))
        client = await start_server([project], options={"chatBaseUrl": chat.base_url, "chatModel": "scripted"})
        try:
            await client.wait_ready()
            client.progress_reports[7] = []
            result = await client.request("codeloupe/ask", {"query": "how does login check the password",
                                                            "workDoneToken": 7})
        finally:
            await stop_server(client)
    assert result["fallback"] is None
    (cited,) = result["citations"]
    path = project / cited["path"]
    rng = cited["location"]["range"]
    assert cited["location"]["uri"] == uri(path)
    assert cited["text"] == disk_lines(path, rng["start"]["line"], rng["end"]["line"])
    assert (rng["start"]["line"] + 1, rng["end"]["line"]) == (cited["startLine"], cited["endLine"])
    assert cited["text"].strip() in result["answer"]
    events = [json.loads(r.message) for r in client.progress_reports[7] if r.kind == "report"]
    assert "delta" in [e["type"] for e in events] and events[-1]["type"] == "done"
    # Each delta is a part of the answer: its plain text as the result's parts carry it (what an editor's draft
    # shows: the markdown, `text`, reads a model's `\*` as `\\*` shown as text), its markdown the answer's piece.
    deltas = [e for e in events if e["type"] == "delta"]
    streamed = result["parts"][:len(deltas)]
    assert [(d["kind"], d["plain"]) for d in deltas] == [(p["kind"], p["text"]) for p in streamed]
    assert result["answer"].startswith("".join(d["text"] for d in deltas))
    assert [(d["path"], d["start_line"], d["end_line"]) for d in deltas if d["kind"] == "code"] == [
        (cited["path"], cited["startLine"], cited["endLine"])]
    # A ref's or code's span names its document, as the result's part does: a draft kept without its code (a reloaded
    # window's) reads it from there again; without it, the draft's code came back as captions only.
    assert [d.get("location") for d in deltas] == [p.get("location") for p in streamed]
    assert [d["location"] for d in deltas if d["kind"] == "code"] == [cited["location"]]


async def test_a_code_part_says_its_file_changed_on_disk_since_indexing(project: Path) -> None:
    """A span cited from a file changed on disk since it was indexed is found again by its content; the answer's
    markdown said so in its caption, but its code part, which the editors' views render, did not."""
    auth = project / "app/auth.py"

    def answer(body: dict) -> str:
        return f"Login compares salted hashes [[{cite(body, 'app/auth.py', 9)}]]."

    with ChatServer() as chat:
        chat.add(Reply(render=answer, times=2))
        client = await start_server([project], options={"chatBaseUrl": chat.base_url, "chatModel": "scripted",
                                                         "flows": False})
        try:
            await client.wait_ready()
            before = await client.request("codeloupe/ask", {"query": "how is a password hashed"})
            auth.write_text("# a line the index has not seen\n" + auth.read_text())  # no editor tells the server
            after = await client.request("codeloupe/ask", {"query": "how is a password hashed"})
        finally:
            await stop_server(client)
    [unchanged] = [p for p in before["parts"] if p["kind"] == "code"]
    [moved] = [p for p in after["parts"] if p["kind"] == "code"]
    assert unchanged["changed"] is False and moved["changed"] is True
    assert (moved["path"], moved["startLine"], moved["text"]) == ("app/auth.py", unchanged["startLine"] + 1,
                                                                  unchanged["text"])
    assert all("changed" not in p for p in after["parts"] if p["kind"] != "code")


async def test_cancelling_an_ask_answers_request_cancelled_and_cuts_its_model_call_off(project: Path) -> None:
    """The request is answered as cancelled, and the model call in flight is closed at once: the worker thread
    waiting on the model had kept waiting up to the chat timeout (a minute), a thread of the pool each time."""
    with ChatServer() as chat:
        chat.add(Reply(text="never sent whole [[1]]", hold_after=1, times=5))
        client = await start_server([project], options={"chatBaseUrl": chat.base_url, "chatModel": "scripted",
                                                         "chatTimeoutS": 600})
        try:
            await client.wait_ready()
            pending = asyncio.ensure_future(client.protocol.send_request_async(
                "codeloupe/ask", {"query": "how does login work"}, msg_id="ask-to-cancel"))
            assert await asyncio.to_thread(chat.wait_for, "held", 1) == 1, "the ask never reached the model"
            client.protocol.notify("$/cancelRequest", lsp.CancelParams(id="ask-to-cancel"))
            with pytest.raises(JsonRpcException) as caught:
                await asyncio.wait_for(pending, timeout=30)
            assert caught.value.code == -32800
            assert await asyncio.to_thread(chat.wait_for, "hangups", 1, 30) == 1, "the model call was left open"
            assert (await client.status())[0]["state"] == "ready"  # still serving
        finally:
            await stop_server(client)


@pytest.mark.parametrize("cache_disk", ["32m"], indirect=True)  # room for a language server's whole index
async def test_an_index_that_failed_ends_its_progress_saying_so(tmp_path: Path, cache_disk: Path) -> None:
    """A refresh the full disk refuses: the progress bar's last word is the failure the status gives, not "up to
    date" (which the editor would show over a folder whose new files are not searchable)."""
    project = write_project(tmp_path / "p")
    first = await start_server([project])
    await first.wait_ready()
    await stop_server(first)
    (project / "app" / "billing.py").write_text("".join(f"def charge_{i}(amount):\n    return amount * {i}\n\n"
                                                        for i in range(400)))
    with disk_full(cache_disk):
        client = await start_server([project])
        try:
            def ended() -> list[str]:
                return [r.message or "" for reports in client.progress_reports.values() for r in reports
                        if r.kind == "end"]

            await client.wait_until(ended, "the index's progress to end")
            (folder,) = await client.status()
        finally:
            await stop_server(client)
    assert folder["state"] == "error" and folder["message"].startswith("indexing failed")
    assert ended() == [folder["message"]]
