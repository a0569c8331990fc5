"""Over stdio, the server's ranges are the editor's lines in files holding a form feed, U+2028, U+2029, CRLF and
a lone CR before their definitions (the LSP counts \\n, \\r\\n and \\r only)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_helpers import Client, start_server, stop_server, uri
from lsprotocol import types as lsp

from line_break_files import DEFINITIONS, FILES, editor_lines, write_files

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_files(tmp_path_factory.mktemp("line-breaks") / "project")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(project: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    cache = tmp_path_factory.mktemp("line-breaks-cache")
    lsp_client = await start_server([project], {"chunkBudget": 100}, env={"CODELOUPE_CACHE_DIR": str(cache)})
    await lsp_client.wait_ready()
    yield lsp_client
    await stop_server(lsp_client)


async def test_workspace_symbols_start_on_the_editors_line(client: Client, project: Path) -> None:
    for name, (path, line) in DEFINITIONS.items():
        found = await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query=name))
        exact = [s for s in found or [] if s.name == name]
        assert [(s.location.uri, s.location.range.start) for s in exact] == \
            [(uri(project / path), lsp.Position(line=line - 1, character=0))], name


async def test_locate_ranges_and_line_texts_are_the_editors(client: Client, project: Path) -> None:
    for name, (path, line) in DEFINITIONS.items():
        found = await client.request("codeloupe/locate", {"text": f"{name}("})
        assert [(h["uri"], h["range"]["start"]["line"]) for h in found["locations"]] == \
            [(uri(project / path), line - 1)], name
        assert found["locations"][0]["lineText"] == editor_lines(FILES[path])[line - 1].rstrip("\r\n")


async def test_search_locations_and_anchors_are_the_editors_lines(client: Client, project: Path) -> None:
    for name, (path, line) in DEFINITIONS.items():
        found = await client.request("codeloupe/search", {"query": name})
        best = found["core"][0]
        assert best["path"] == path
        chunk = next(c for c in best["chunks"] if name in c["text"])
        start, end = chunk["location"]["range"]["start"]["line"], chunk["location"]["range"]["end"]["line"]
        assert chunk["text"] == "".join(editor_lines(FILES[path])[start:end]), name
        assert chunk["snippet"]["anchorLine"] == line - 1, name
