"""`codeloupe/related`: the chunks nearest to a span (or a whole file), in its language (`Workspace.find_related`)."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON, range_to_lines
from codeloupe_lsp.params import Params, read_uri
from codeloupe_lsp.server import CodeloupeServer

METHOD = "codeloupe/related"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_related(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        uri = read_uri(params.raw.get("uri"), f"{METHOD}: `uri`")
        span = params.range("range")
        limit = params.integer("limit", 10)
        folder, rel = ls.folder_for(uri)
        first, last = range_to_lines(*span) if span is not None else (None, None)
        return convert.related(folder.root, await ls.engine(folder.ws.find_related, rel, first, last, limit=limit))
