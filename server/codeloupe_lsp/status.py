"""`codeloupe/status`: every folder's index state, counts and embedding progress."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer

METHOD = "codeloupe/status"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_status(ls: CodeloupeServer, raw: Any) -> JSON:
        Params(raw, METHOD)
        return {"folders": [await ls.engine(folder.status) for folder in ls.folders]}
