"""Requests answered by one shared server on the fixture project (tests here never change its files)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_helpers import (
    PROJECT,
    Client,
    disk_lines,
    expect_error,
    location_paths,
    start_server,
    stop_server,
    uri,
    write_project,
)
from lsprotocol import types as lsp

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("shared") / "project")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(project: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    # Module fixtures start before the per-test cache fixture: give this server its own cache explicitly.
    cache = tmp_path_factory.mktemp("shared-cache")
    lsp_client = await start_server([project], env={"CODELOUPE_CACHE_DIR": str(cache)})
    await lsp_client.wait_ready()
    yield lsp_client
    await stop_server(lsp_client)

INVALID_PARAMS = -32602
REQUEST_FAILED = -32803


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


async def test_hover_on_first_line_import_and_definition(client: Client, project: Path) -> None:
    auth = project / "app/auth.py"
    first = await hover(client, auth, 0)
    assert "community `app`" in first
    assert f"[`app/store.py`]({uri(project / 'app/store.py')}#L1)" in first
    assert f"[`app/web.py`]({uri(project / 'app/web.py')}#L1)" in first  # the importer, at its import line

    import_line = auth.read_text().splitlines().index("from app.store import load_user")
    on_import = await hover(client, auth, import_line)
    assert "app/store.py" in on_import and "load_user" in on_import

    class_line = auth.read_text().splitlines().index("class SessionManager:")
    on_definition = await hover(client, auth, class_line)
    # What it is (signature, first docstring line) comes before where it is used.
    assert on_definition.startswith("`class SessionManager`\n\n`Issues and validates login sessions.`\n\n"
                                    "`SessionManager` is used in 1 file")
    assert "app/web.py" in on_definition

    assert await hover(client, auth, class_line + 1) is None
    assert await hover(client, project.parent / "elsewhere.py", 0) is None


async def hover(client: Client, path: Path, line0: int) -> str | None:
    result = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri(path)), position=lsp.Position(line=line0, character=3)))
    return None if result is None else result.contents.value


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
    # `use`: the line where the using file (app/auth.py for `imports`, the importer for `importers`) uses the other.
    for edge, user in [(e, "app/auth.py") for e in node["imports"]] + [(e, e["path"]) for e in node["importers"]]:
        line0 = edge["use"]["range"]["start"]["line"]
        assert edge["use"]["uri"] == uri(project / user) and line0 == edge["line"] - 1
        assert "import" in disk_lines(project / user, line0, line0 + 1)
    for chunk in node["chunks"]:
        rng = chunk["location"]["range"]
        assert disk_lines(project / "app/auth.py", rng["start"]["line"], rng["end"]["line"]) == chunk["text"]

    route = await client.request("codeloupe/graph", {"mode": "path", "from": "app/web.py", "to": "app/store.py"})
    assert route["found"] is True
    for hop in route["hops"]:
        for key in ("use", "definition"):
            if key in hop:
                assert hop[key]["uri"].startswith(uri(project))

    message = await expect_error(client.request("codeloupe/graph", {"mode": "path", "from": "app/web.py"}),
                                 INVALID_PARAMS)
    assert "`to`" in message


async def test_graph_node_of_a_folder_answers_its_part_of_the_graph(tmp_path: Path) -> None:
    """A folder for `node` (a path or the folder's URI, as the editors send it) answers the shape of
    docs/protocol.md: its files with their URIs and community names, each edge across its boundary with `use`,
    the place in the using file (for `uses` that is the inside file, not the one `uri` names), and its
    communities."""
    project = write_project(tmp_path / "p", {**PROJECT, "cli/__init__.py": "", "cli/main.py": '''
        """Log in from the command line."""

        from app.web import handle_login


        def main(name: str, password: str) -> str:
            return handle_login({"name": name, "password": password})
        '''})
    client = await start_server([project])
    try:
        await client.wait_ready()
        cli = await client.request("codeloupe/graph", {"mode": "node", "node": uri(project / "cli")})
        app = await client.request("codeloupe/graph", {"mode": "node", "node": "app/"})
        empty = await client.request("codeloupe/graph", {"mode": "node", "node": "docs"})
    finally:
        await stop_server(client)
    import_line0 = 2  # `from app.web import handle_login`, 0-based
    assert cli["found"] is True and cli["folder"] == "cli" and cli["uri"] == uri(project / "cli")
    assert set(cli) == {"found", "folder", "uri", "files", "uses", "usedBy", "communities"}
    files = {f["path"]: f for f in cli["files"]}
    assert set(files) == {"cli/__init__.py", "cli/main.py"}
    main = files["cli/main.py"]
    assert main["uri"] == uri(project / "cli/main.py") and main["language"] == "python"
    assert {"community", "communityName", "degree", "inDegree", "outDegree", "god"} <= set(main)
    names = {c["id"]: c["name"] for c in cli["communities"]}
    assert main["communityName"] == names[main["community"]] != ""
    assert all(set(c) == {"id", "name", "size", "members"} and c["size"] == len(c["members"])
               and set(c["members"]) <= set(files) for c in cli["communities"])
    (uses,) = cli["uses"]
    assert (uses["from"], uses["path"], uses["uri"], uses["kind"]) == (
        "cli/main.py", "app/web.py", uri(project / "app/web.py"), "import")
    assert uses["line"] == import_line0 + 1 and "handle_login" in uses["symbols"]
    assert uses["use"]["uri"] == uri(project / "cli/main.py")  # the line is in the file that uses app/web.py
    assert uses["use"]["range"]["start"]["line"] == import_line0
    assert cli["usedBy"] == []

    assert app["folder"] == "app" and "app/auth.py" in {f["path"] for f in app["files"]}
    (used_by,) = app["usedBy"]
    assert (used_by["to"], used_by["path"], used_by["uri"]) == ("app/web.py", "cli/main.py",
                                                               uri(project / "cli/main.py"))
    assert used_by["use"]["uri"] == uri(project / "cli/main.py")
    assert used_by["use"]["range"]["start"]["line"] == import_line0
    assert app["uses"] == []  # app/web.py -> app/auth.py stays inside the folder

    assert empty["found"] is False and "a folder holding no code file of the graph" in empty["message"]


async def test_search_scope_limits_the_files(client: Client, project: Path) -> None:
    scoped = await client.request("codeloupe/search", {"query": "login password session", "scope": "docs",
                                                       "docs": "both"})
    assert location_paths(scoped) and all(p.startswith("docs/") for p in location_paths(scoped))
    by_uri = await client.request("codeloupe/search", {"query": "login password session",
                                                       "scope": uri(project / "docs"), "docs": "both"})
    assert location_paths(by_uri) == location_paths(scoped)


async def test_a_file_scope_searches_that_file_alone(client: Client, project: Path) -> None:
    # As the CLI's `--scope app/auth.py` does: a file is a scope (an editor scoping a search to the open file).
    by_path = await client.request("codeloupe/search", {"query": "login password session", "scope": "app/auth.py"})
    assert set(location_paths(by_path)) == {"app/auth.py"}
    by_uri = await client.request("codeloupe/search", {"query": "login password session",
                                                       "scope": uri(project / "app/auth.py")})
    assert location_paths(by_uri) == location_paths(by_path)
    pruned = await client.request("codeloupe/search", {"query": "login password session", "prune": True,
                                                       "scope": uri(project / "app/auth.py")})
    assert pruned["chunks"] and {chunk["path"] for chunk in pruned["chunks"]} == {"app/auth.py"}


async def test_a_scope_that_leaves_the_workspace_is_refused(client: Client, project: Path) -> None:
    (project / "docs" / "out.md").symlink_to(project.parent / "elsewhere.md")
    for scope in ("../", "/etc", "../../tmp", "docs/../..", "docs/out.md", "docs\x00"):
        message = await expect_error(client.request("codeloupe/search", {"query": "login", "scope": scope}),
                                     INVALID_PARAMS)
        assert "`scope`" in message
    assert (await client.status())[0]["state"] == "ready"


async def test_a_scope_uri_of_another_scheme_is_refused_not_read_as_a_path(client: Client, project: Path) -> None:
    # It was read as a relative path and quietly matched nothing; a shared repository's URI is a scope only of a
    # repository the server opened (tests/pg/test_pg_lsp.py).
    for scope, why in {"untitled:Untitled-1": "another scheme (untitled:)",
                       "https://example.com/docs": "another scheme (https:)",
                       "codeloupe-index:///billing/docs": "which this server did not open",
                       "codeloupe-index://billing/docs": "is not a codeloupe-index:///<repository>/<path> URI"}.items():
        message = await expect_error(client.request("codeloupe/search", {"query": "login", "scope": scope}),
                                     INVALID_PARAMS)
        assert "`scope`" in message and why in message, (scope, message)
    (project / "docs:old").mkdir()
    (project / "docs:old" / "notes.md").write_text("# Notes\n\nThe login page moved.\n", encoding="utf-8")
    await client.command("codeloupe.reindex")
    colon = await client.request("codeloupe/search", {"query": "login page moved", "scope": "./docs:old",
                                                      "docs": "both"})
    assert location_paths(colon) == ["docs:old/notes.md"]


async def test_over_long_queries_and_nul_uris_are_invalid_params_not_faults(client: Client, project: Path) -> None:
    for method in ("codeloupe/search", "codeloupe/ask"):
        message = await expect_error(client.request(method, {"query": "x" * 20_001}), INVALID_PARAMS)
        assert "at most 20,000 characters" in message
    nul = uri(project / "app") + "/a%00b.py"
    await expect_error(client.request("codeloupe/expand", {"uri": nul, "line": 1}), INVALID_PARAMS)
    await expect_error(client.request("codeloupe/search", {"query": "login", "scope": nul}), INVALID_PARAMS)
    assert (await client.status())[0]["state"] == "ready"


async def test_ask_without_a_chat_model_answers_the_bundle(client: Client, project: Path) -> None:
    client.progress_reports["ask-1"] = []  # a client-created token, as an editor makes for its own request
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
    assert "outside every workspace folder" in message and "``" not in message
    escape = uri(project) + "/../secret.txt"
    await expect_error(client.request("codeloupe/expand", {"uri": escape}), INVALID_PARAMS)

    beyond = {"start": {"line": 500, "character": 0}, "end": {"line": 501, "character": 0}}
    message = await expect_error(client.request("codeloupe/expand", {"uri": uri(project / "app/store.py"),
                                                                     "range": beyond}), INVALID_PARAMS)
    assert "outside the file" in message
    backwards = {"start": {"line": 4, "character": 0}, "end": {"line": 1, "character": 0}}
    message = await expect_error(client.request("codeloupe/expand", {"uri": uri(project / "app/store.py"),
                                                                     "range": backwards}), INVALID_PARAMS)
    assert "is before start" in message
    message = await expect_error(client.request("codeloupe/expand", {"uri": uri(project / "app/store.py"),
                                                                     "range": {"start": {"line": 1}}}),
                                 INVALID_PARAMS)
    assert "`range`.start.character" in message


async def test_a_file_that_is_gone_answers_a_clear_error(client: Client, project: Path) -> None:
    path = project / "app/vanished.py"  # as if deleted between a search and opening it
    message = await expect_error(client.request("codeloupe/expand", {"uri": uri(path)}), INVALID_PARAMS)
    assert "no such file" in message
    span = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    message = await expect_error(client.command("codeloupe.openLocation", uri(path), span), REQUEST_FAILED)
    assert "no such file" in message


async def test_open_location_sends_show_document_with_the_selection(client: Client, project: Path) -> None:
    span = {"start": {"line": 6, "character": 0}, "end": {"line": 9, "character": 0}}
    target = uri(project / "app/auth.py")
    assert await client.command("codeloupe.openLocation", target, span) is True
    shown = client.shown_documents[-1]
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
