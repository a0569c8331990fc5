"""`textDocument/hover`: graph neighbours of a file (first line), of an import, or of a definition."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from codeloupe.api import Workspace
from codeloupe_lsp.convert import file_hover, import_hover, uri_to_path, users_hover
from codeloupe_lsp.server import CodeloupeServer


def register(server: CodeloupeServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: CodeloupeServer, params: lsp.HoverParams) -> lsp.Hover | None:
        path = uri_to_path(params.text_document.uri)
        folder = ls.folders.containing(path) if path is not None else None
        if folder is None or path is None:
            return None  # editors ask about every open file; outside the workspace there is nothing to say
        line = params.position.line + 1
        markdown = await ls.engine(hover_markdown, folder.ws, folder.root, folder.ws.relative(path), line)
        if markdown is None:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=markdown),
                         range=lsp.Range(start=lsp.Position(line=line - 1, character=0),
                                         end=lsp.Position(line=line, character=0)))


def hover_markdown(ws: Workspace, root: Path, rel: str, line: int) -> str | None:
    """Runs on a worker thread: the markdown for 1-based `line` of `rel`, or None when it is not special."""
    from codeloupe.api import GraphError

    try:
        node = ws.graph_node(rel, allow_stale=True)
    except GraphError:
        return None
    if node.path != rel:  # graph_node also resolves fuzzy names; a file outside the graph is not its match
        return None
    if line == 1:
        return file_hover(root, node)
    imported = [n for n in node.imports if n.line == line]
    if imported:
        return "\n\n---\n\n".join(import_hover(root, n, ws.file_summary(n.path, allow_stale=True)) for n in imported)
    for definition in ws.used_definitions(rel, allow_stale=True):
        if definition.start_line == line:
            return users_hover(root, definition)
    return None
