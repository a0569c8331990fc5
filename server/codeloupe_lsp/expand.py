"""`codeloupe/expand`: lines of an indexed workspace file, verbatim from disk (`Workspace.expand`)."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp.convert import JSON, lines_to_range, range_to_lines
from codeloupe_lsp.params import Params, read_uri
from codeloupe_lsp.server import CodeloupeServer

METHOD = "codeloupe/expand"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_expand(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        uri = read_uri(params.raw.get("uri"), f"{METHOD}: `uri`")
        span = params.range("range")
        folder, rel = ls.folder_for(uri)
        first, last = range_to_lines(*span) if span is not None else (None, None)
        found = await ls.engine(folder.ws.expand, rel, first, last)
        return {"uri": uri, "range": lines_to_range(found.start_line, found.end_line), "text": found.text}
