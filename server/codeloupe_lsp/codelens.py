"""Code lenses: a file lens on line 0 and "used in N files" on definitions with cross-file users; in a workspace
folder or a shared repository's document (`codeloupe-index:`).

Listing computes only where lenses go; titles and locations are filled in by `codeLens/resolve`.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from codeloupe.api import Workspace
from codeloupe_lsp.convert import (
    UriOf,
    file_lens_title,
    line_location,
    location,
    show_locations,
    users_lens_title,
)
from codeloupe_lsp.params import invalid, read_uri
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import document, document_or_none, uris_of


def register(server: CodeloupeServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=True))
    async def on_code_lens(ls: CodeloupeServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        uri = params.text_document.uri
        found = await document_or_none(ls, uri)
        if found is None:
            return []
        target, rel = found
        places = await ls.engine(lens_lines, target.ws, rel)
        if places is None:
            return []  # not a code file of the graph (docs, config)
        lenses = [_lens(0, {"kind": "file", "uri": uri})]
        lenses += [_lens(line - 1, {"kind": "definition", "uri": uri, "name": name}) for name, line in places]
        return lenses

    @server.feature(lsp.CODE_LENS_RESOLVE)
    async def on_resolve(ls: CodeloupeServer, lens: lsp.CodeLens) -> lsp.CodeLens:
        data = lens.data if isinstance(lens.data, dict) else {}
        uri = read_uri(data.get("uri"), "codeLens/resolve: `data.uri`")
        kind = data.get("kind")
        target, rel = await document(ls, uri, "data.uri")
        uri_of = await uris_of(ls, target)
        line0 = lens.range.start.line
        if kind == "file":
            title, locations = await ls.engine(file_lens, target.ws, uri_of, rel)
        elif kind == "definition" and isinstance(data.get("name"), str):
            title, locations = await ls.engine(definition_lens, target.ws, uri_of, rel, data["name"])
        else:
            raise invalid(f"codeLens/resolve: `data` is not a codeloupe lens: {data!r}")
        lens.command = show_locations(title, uri, line0, locations)
        return lens


def _lens(line0: int, data: dict[str, Any]) -> lsp.CodeLens:
    return lsp.CodeLens(range=lsp.Range(start=lsp.Position(line=line0, character=0),
                                        end=lsp.Position(line=line0, character=0)), data=data)


def lens_lines(ws: Workspace, rel: str) -> list[tuple[str, int]] | None:
    """(qualified name, 1-based line) of each definition in `rel` used by other files; None off the graph."""
    from codeloupe.api import GraphError

    try:
        return [(d.qualified_name, d.start_line) for d in ws.used_definitions(rel, allow_stale=True)]
    except GraphError:
        return None


def file_lens(ws: Workspace, uri_of: UriOf, rel: str) -> tuple[str, list[dict[str, Any]]]:
    summary = ws.file_summary(rel, allow_stale=True)
    node = ws.graph_node(rel, allow_stale=True)
    return file_lens_title(summary), [location(uri_of, n.use.path, n.use.start_line, n.use.end_line)
                                       for n in node.importers]


def definition_lens(ws: Workspace, uri_of: UriOf, rel: str, name: str) -> tuple[str, list[dict[str, Any]]]:
    users = next((d.users for d in ws.used_definitions(rel, allow_stale=True) if d.qualified_name == name), [])
    return users_lens_title(users), [line_location(uri_of, path, line) for path, line in users]
