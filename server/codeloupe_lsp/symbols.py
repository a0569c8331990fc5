"""`workspace/symbol`: the engine's symbol search, as `WorkspaceSymbol`s with real ranges."""

from __future__ import annotations

from functools import partial

from lsprotocol import types as lsp

from codeloupe_lsp.convert import file_uri, workspace_symbols
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import uris_of

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
            await folder.searchable()
            found = await ls.engine(folder.ws.search_symbols, params.query, limit=SYMBOL_FILES)
            symbols.extend(workspace_symbols(partial(file_uri, folder.root), found))
        for name, ws in ls.shared.items():
            found = await ls.engine(ws.search_symbols, params.query, limit=SYMBOL_FILES)
            symbols.extend(workspace_symbols(await uris_of(ls, name, ws), found))
        return symbols
