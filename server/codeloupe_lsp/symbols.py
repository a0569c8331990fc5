"""`workspace/symbol`, and the definitions of a file with their real line spans (lenses and hover use them)."""

from __future__ import annotations

from lsprotocol import types as lsp

from codeloupe.api import Workspace
from codeloupe.types import Bundle, Symbol
from codeloupe_lsp.convert import workspace_symbols
from codeloupe_lsp.server import CodeloupeServer

# Enough to fill an editor's symbol picker; every folder is asked.
SYMBOL_FILES = 30


def register(server: CodeloupeServer) -> None:
    @server.feature(lsp.WORKSPACE_SYMBOL)
    async def on_workspace_symbol(ls: CodeloupeServer,
                                  params: lsp.WorkspaceSymbolParams) -> list[lsp.WorkspaceSymbol]:
        if not params.query.strip():
            return []
        symbols: list[lsp.WorkspaceSymbol] = []
        for folder in ls.folders:
            bundle = await ls.engine(folder.ws.search, params.query, limit=SYMBOL_FILES)
            symbols.extend(workspace_symbols(folder.root, await ls.engine(matched_definitions, folder.ws, bundle)))
        return symbols


def file_symbols(ws: Workspace, rel: str) -> list[Symbol]:
    """The definitions the chunker recorded for `rel`, in line order ([] when it is not indexed)."""
    return ws.symbols([rel]).get(rel, [])


def definition_of(symbols: list[Symbol], qualified_name: str) -> Symbol | None:
    """The definition the graph names `qualified_name`: by qualified name, else a top-level bare name."""
    exact = next((s for s in symbols if s.qualified_name == qualified_name), None)
    return exact or next((s for s in symbols if not s.parent and s.name == qualified_name), None)


def matched_definitions(ws: Workspace, bundle: Bundle) -> list[tuple[str, Symbol]]:
    """(path, definition) for every symbol named by a matching chunk, in rank order."""
    by_path = ws.symbols([hit.path for hit in bundle.files])
    found: list[tuple[str, Symbol]] = []
    for hit in bundle.files:
        named = {q for chunk in hit.chunks for q in chunk.symbols}
        found.extend((hit.path, s) for s in by_path.get(hit.path, []) if s.qualified_name in named)
    return found
