"""`codeloupe/expand`: lines of an indexed document verbatim from its source (`Workspace.expand`): a workspace
file from disk, a shared repository's document (`codeloupe-index:`) from the index, pinned to its commit."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp.convert import JSON, lines_to_range, range_to_lines
from codeloupe_lsp.params import Params, read_uri
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import document

METHOD = "codeloupe/expand"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_expand(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        uri = read_uri(params.raw.get("uri"), f"{METHOD}: `uri`")
        span = params.range("range")
        target, rel = await document(ls, uri)
        first, last = range_to_lines(*span) if span is not None else (None, None)
        found = await ls.engine(target.ws.expand, rel, first, last)
        return {"uri": uri, "range": lines_to_range(found.start_line, found.end_line), "text": found.text}
