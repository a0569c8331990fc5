"""`codeloupe/locate`: every line of the indexed chunks holding a text exactly, or a whole identifier
(`Workspace.locate`; no disk walk)."""

from __future__ import annotations

from functools import partial
from typing import Any

from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import targets, uris_of

METHOD = "codeloupe/locate"
DEFAULT_LIMIT = 100


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_locate(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        text = params.text("text", required=True, non_empty=True)
        identifier = bool(params.flag("identifier", False))
        limit = params.integer("limit", DEFAULT_LIMIT)
        results = []
        folders, shared = targets(ls, params.text("folderUri"))
        for folder in folders:
            await folder.searchable()
            found = await ls.engine(folder.ws.locate, text, identifier=identifier, limit=limit)
            results.append(convert.located(partial(convert.file_uri, folder.root), found))
        for name, ws in shared:
            found = await ls.engine(ws.locate, text, identifier=identifier, limit=limit)
            results.append(convert.located(await uris_of(ls, name, ws), found))
        return convert.merge_located(results, limit)
