"""`codeloupe/related`: the chunks nearest to a span (or a whole file), in its language (`Workspace.find_related`)."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON, range_to_lines
from codeloupe_lsp.params import Params, read_uri
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import document, uris_of

METHOD = "codeloupe/related"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_related(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        uri = read_uri(params.raw.get("uri"), f"{METHOD}: `uri`")
        span = params.range("range")
        limit = params.integer("limit", 10)
        target, rel = await document(ls, uri)
        await target.ready()
        first, last = range_to_lines(*span) if span is not None else (None, None)
        found = await ls.engine(target.ws.find_related, rel, first, last, limit=limit)
        return convert.related(await uris_of(ls, target), found)
