"""`codeloupe/read`: the text of a shared-index document (`codeloupe-index:` URI), pinned to its commit."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import parse_index_uri, read_document, repository

METHOD = "codeloupe/read"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_read(ls: CodeloupeServer, raw: Any) -> JSON:
        uri = Params(raw, METHOD).text("uri", required=True, non_empty=True)
        document = parse_index_uri(uri)
        ws = repository(ls, document.repository)
        text, revision = await ls.engine(read_document, ws, document)
        return {"uri": uri, "repository": document.repository, "path": document.path, "revision": revision,
                "text": text}
