"""`codeloupe/locate`: every line of the indexed chunks holding a text exactly, or a whole identifier
(`Workspace.locate`; no disk walk)."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import each_answers, targets

METHOD = "codeloupe/locate"
DEFAULT_LIMIT = 100


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_locate(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        text = params.text("text", required=True, non_empty=True, one_line=True)
        identifier = bool(params.flag("identifier", False))
        limit = params.integer("limit", DEFAULT_LIMIT)
        answered = await each_answers(ls, targets(ls, params.text("folderUri")),
                                      lambda ws: ws.locate(text, identifier=identifier, limit=limit))
        return convert.merge_located([convert.located(uri_of, found) for uri_of, found in answered], limit)
