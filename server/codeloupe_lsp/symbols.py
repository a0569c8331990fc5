"""`workspace/symbol`: the engine's symbol search, as `WorkspaceSymbol`s with real ranges."""

from __future__ import annotations

from lsprotocol import types as lsp

from codeloupe.api import MAX_QUERY_CHARS, name_closeness
from codeloupe_lsp.convert import workspace_symbols
from codeloupe_lsp.params import invalid
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import each_answers, targets

# Enough to fill an editor's symbol picker; every folder is asked.
SYMBOL_FILES = 30


def register(server: CodeloupeServer) -> None:
    @server.feature(lsp.WORKSPACE_SYMBOL)
    async def on_workspace_symbol(ls: CodeloupeServer,
                                  params: lsp.WorkspaceSymbolParams) -> list[lsp.WorkspaceSymbol]:
        if not params.query.strip() or not (len(ls.folders) or ls.shared):
            return []
        if len(params.query) > MAX_QUERY_CHARS:  # as codeloupe/search refuses one
            raise invalid(f"{lsp.WORKSPACE_SYMBOL}: `query` must be at most {MAX_QUERY_CHARS:,} characters,"
                          f" got {len(params.query):,}")
        answered = await each_answers(ls, targets(ls, ""),
                                      lambda ws: ws.search_symbols(params.query, limit=SYMBOL_FILES))
        symbols = [symbol for uri_of, found in answered for symbol in workspace_symbols(uri_of, found)]
        # Each folder answers its own best first: an exact match in a second folder came 168th of 329.
        return sorted(symbols, key=lambda symbol: name_closeness(params.query, symbol.name))

