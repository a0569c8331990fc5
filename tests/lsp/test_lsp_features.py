"""The features over the real server: workspace/symbol, lenses, hover, graph, scoped search, ask."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsp_helpers import Client, location_paths, start_server, stop_server, uri
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from chat_server import ChatServer, Reply


def disk_lines(path: Path, start0: int, end0: int) -> str:
    return "".join(path.read_text().splitlines(keepends=True)[start0:end0])


async def test_workspace_symbol_has_real_ranges(client: Client, project: Path) -> None:
    symbols = await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="SessionManager login"))
    by_name = {(s.name, s.location.uri): s for s in symbols}
    auth = uri(project / "app/auth.py")
    manager = by_name[("SessionManager", auth)]
    assert manager.kind == lsp.SymbolKind.Class
    text = disk_lines(project / "app/auth.py", manager.location.range.start.line, manager.location.range.end.line)
    assert text.startswith("class SessionManager")
    login = by_name[("login", auth)]
    first = disk_lines(project / "app/auth.py", login.location.range.start.line, login.location.range.start.line + 1)
    assert "def login(" in first
    assert login.container_name == "SessionManager"
    assert await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="  ")) == []


async def test_code_lenses_resolve_lazily_to_show_locations(client: Client, project: Path) -> None:
    store = uri(project / "app/store.py")
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(
        text_document=lsp.TextDocumentIdentifier(uri=store)))
    assert all(lens.command is None for lens in lenses)  # titles come from codeLens/resolve
    file_lens, definition = lenses
    assert file_lens.range.start.line == 0
    assert disk_lines(project / "app/store.py", definition.range.start.line,
                      definition.range.start.line + 1).startswith("def load_user")

    resolved = await client.code_lens_resolve_async(file_lens)
    assert resolved.command.title == "app · 0 imports · 2 importers"
    assert resolved.command.command == "codeloupe.showLocations"
    target, position, locations = resolved.command.arguments
    assert target == store and position == {"line": 0, "character": 0}
    assert {loc["uri"] for loc in locations} == {uri(project / "app/auth.py"), uri(project / "app/web.py")}

    resolved = await client.code_lens_resolve_async(definition)
    assert resolved.command.title == "used in 2 files"
    _, position, locations = resolved.command.arguments
    assert position["line"] == definition.range.start.line
    for loc in locations:  # each location is the line that uses load_user
        path = Path(loc["uri"].removeprefix("file://"))
        assert "load_user" in disk_lines(path, loc["range"]["start"]["line"], loc["range"]["end"]["line"])

    docs = await client.text_document_code_lens_async(lsp.CodeLensParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri(project / "docs/guide.md"))))
    assert not docs


async def hover(client: Client, path: Path, line0: int) -> str | None:
    result = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri(path)), position=lsp.Position(line=line0, character=3)))
    return None if result is None else result.contents.value


async def test_hover_on_first_line_import_and_definition(client: Client, project: Path) -> None:
    auth = project / "app/auth.py"
    first = await hover(client, auth, 0)
    assert "community _app_" in first
    assert f"[app/store.py]({uri(project / 'app/store.py')}#L1)" in first
    assert f"[app/web.py]({uri(project / 'app/web.py')}#L1)" in first  # the importer, at its import line

    import_line = auth.read_text().splitlines().index("from app.store import load_user")
    on_import = await hover(client, auth, import_line)
    assert "app/store.py" in on_import and "load_user" in on_import

    class_line = auth.read_text().splitlines().index("class SessionManager:")
    on_definition = await hover(client, auth, class_line)
    assert "**SessionManager** is used in 1 file" in on_definition
    assert "app/web.py" in on_definition

    assert await hover(client, auth, class_line + 1) is None
    assert await hover(client, project.parent / "elsewhere.py", 0) is None


async def test_graph_map_node_and_path(client: Client, project: Path) -> None:
    graph = await client.request("codeloupe/graph", {"mode": "map", "html": True})
    nodes = {n["path"]: n for n in graph["nodes"]}
    assert nodes["app/auth.py"]["uri"] == uri(project / "app/auth.py")
    assert {"source": "app/web.py", "target": "app/auth.py"}.items() <= next(
        e for e in graph["edges"] if e["source"] == "app/web.py" and e["target"] == "app/auth.py").items()
    assert graph["communities"] and graph["html"].lstrip().lower().startswith("<!doctype html")

    node = await client.request("codeloupe/graph", {"mode": "node", "node": uri(project / "app/auth.py")})
    assert node["path"] == "app/auth.py"
    assert [n["uri"] for n in node["importers"]] == [uri(project / "app/web.py")]
    for chunk in node["chunks"]:
        rng = chunk["location"]["range"]
        assert disk_lines(project / "app/auth.py", rng["start"]["line"], rng["end"]["line"]) == chunk["text"]

    route = await client.request("codeloupe/graph", {"mode": "path", "from": "app/web.py", "to": "app/store.py"})
    assert route["found"] is True
    for hop in route["hops"]:
        for key in ("use", "definition"):
            if key in hop:
                assert hop[key]["uri"].startswith(uri(project))

    with pytest.raises(JsonRpcException) as caught:
        await client.request("codeloupe/graph", {"mode": "path", "from": "app/web.py"})
    assert caught.value.code == -32602 and "`to`" in caught.value.message


async def test_search_scope_limits_the_files(client: Client, project: Path) -> None:
    scoped = await client.request("codeloupe/search", {"query": "login password session", "scope": "docs",
                                                       "docs": "both"})
    assert location_paths(scoped) and all(p.startswith("docs/") for p in location_paths(scoped))
    by_uri = await client.request("codeloupe/search", {"query": "login password session",
                                                       "scope": uri(project / "docs"), "docs": "both"})
    assert location_paths(by_uri) == location_paths(scoped)


async def test_ask_without_a_chat_model_answers_the_bundle(client: Client, project: Path) -> None:
    result = await client.request("codeloupe/ask", {"query": "how does login check the password",
                                                    "workDoneToken": "ask-1"})
    assert result["fallback"] and result["citations"] == []
    assert result["bundle"]["core"][0]["path"] == "app/auth.py"
    assert "hash_password" in result["answer"]
    assert [f["path"] for f in result["uncited"]] == location_paths(result["bundle"])
    reports = client.progress_reports["ask-1"]
    assert reports[0].kind == "begin" and reports[-1].kind == "end"
    events = [json.loads(r.message) for r in reports if r.kind == "report"]
    assert events[0]["type"] == "retrieval" and events[-1]["type"] == "done"


async def test_ask_streams_events_and_returns_verbatim_citations(project: Path) -> None:
    with ChatServer() as chat:
        chat.add(Reply(text="Login loads the user and compares salted hashes [[1]].", times=5))
        client = await start_server([project], options={"chatBaseUrl": chat.base_url, "chatModel": "scripted"})
        try:
            await client.wait_ready()
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
    types = [json.loads(r.message)["type"] for r in client.progress_reports[7] if r.kind == "report"]
    assert "delta" in types and types[-1] == "done"


async def test_cancelling_an_ask_answers_request_cancelled(project: Path) -> None:
    with ChatServer() as chat:
        chat.add(Reply(text="never sent [[1]]", hang_s=60, times=5))
        client = await start_server([project], options={"chatBaseUrl": chat.base_url, "chatModel": "scripted"})
        try:
            await client.wait_ready()
            pending = asyncio.ensure_future(client.protocol.send_request_async(
                "codeloupe/ask", {"query": "how does login work"}, msg_id="ask-to-cancel"))
            await client.wait_until(lambda: chat.requests, "the ask to reach the chat model")
            client.protocol.notify("$/cancelRequest", lsp.CancelParams(id="ask-to-cancel"))
            with pytest.raises(JsonRpcException) as caught:
                await asyncio.wait_for(pending, timeout=30)
            assert caught.value.code == -32800
            assert (await client.status())[0]["state"] == "ready"  # still serving
        finally:
            await stop_server(client)
