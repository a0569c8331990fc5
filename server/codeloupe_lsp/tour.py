"""`codeloupe/tour`: where to start reading a folder: entry points, then the names most files mention."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer

METHOD = "codeloupe/tour"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_tour(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        limit = params.integer("limit", 20)
        folder = ls.folders_for(params.text("folderUri"))[0]
        return convert.tour(folder.root, await ls.engine(folder.ws.tour, limit=limit))
