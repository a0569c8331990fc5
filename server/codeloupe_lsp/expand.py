"""`codeloupe/expand`: lines of a workspace file, verbatim from disk."""

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
        if span is None:
            text = await ls.engine(folder.ws.read_lines, rel)
            line_count = len(text.splitlines())
            return {"uri": uri, "range": lines_to_range(1, line_count), "text": text}
        first, last = range_to_lines(*span)
        text = await ls.engine(folder.ws.read_lines, rel, first, last)
        last = first + max(len(text.splitlines()), 1) - 1  # a range past the end is clipped to the file
        return {"uri": uri, "range": lines_to_range(first, last), "text": text}
