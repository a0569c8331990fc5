"""`textDocument/hover`: graph neighbours of a file (first line), of an import, or of a definition; in a workspace
folder or a shared repository's document (`codeloupe-index:`)."""

from __future__ import annotations

from lsprotocol import types as lsp

from codeloupe.api import Workspace
from codeloupe_lsp.convert import UriOf, file_hover, import_hover, users_hover
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import document_or_none, uris_of


def register(server: CodeloupeServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: CodeloupeServer, params: lsp.HoverParams) -> lsp.Hover | None:
        found = await document_or_none(ls, params.text_document.uri)
        if found is None:
            return None  # editors ask about every open file; outside the workspace there is nothing to say
        target, rel = found
        line = params.position.line + 1
        markdown = await ls.engine(hover_markdown, target.ws, await uris_of(ls, target), rel, line)
        if markdown is None:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=markdown),
                         range=lsp.Range(start=lsp.Position(line=line - 1, character=0),
                                         end=lsp.Position(line=line, character=0)))


def hover_markdown(ws: Workspace, uri_of: UriOf, rel: str, line: int) -> str | None:
    """Runs on a worker thread: the markdown for 1-based `line` of `rel`, or None when it is not special."""
    from codeloupe.api import GraphError

    try:
        node = ws.graph_node(rel, allow_stale=True)
    except GraphError:
        return None
    if node.path != rel:  # graph_node also resolves fuzzy names; a file outside the graph is not its match
        return None
    if line == 1:
        return file_hover(uri_of, node)
    imported = [n for n in node.imports if n.line == line]
    if imported:
        return "\n\n---\n\n".join(import_hover(uri_of, n, ws.file_summary(n.path, allow_stale=True)) for n in imported)
    for definition in ws.used_definitions(rel, allow_stale=True):
        if definition.start_line == line:
            return users_hover(uri_of, definition)
    return None
