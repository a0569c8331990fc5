"""`codeloupe/flows`: the cached walkthroughs of each folder (what an editor's ask prompt offers as suggestions)."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import targets, uris_of

METHOD = "codeloupe/flows"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_flows(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        out = []
        for target in targets(ls, params.text("folderUri")):
            cached = await ls.engine(target.ws.flows)
            uri_of = await uris_of(ls, target)
            out.extend({**convert.flow(uri_of, f), "folderUri": target.uri} for f in cached)
        return {"flows": out}
