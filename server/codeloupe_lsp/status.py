"""`codeloupe/status`: every folder's index state, counts, trust and embedding progress, and every shared
repository's commit and counts."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp.convert import JSON, repository_status
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import repository_target

METHOD = "codeloupe/status"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_status(ls: CodeloupeServer, raw: Any) -> JSON:
        Params(raw, METHOD)
        repositories = []
        for name in ls.shared:
            target = repository_target(ls, name)
            status, commit = await ls.engine(lambda ws=target.ws: (ws.status(), ws.revision))
            repositories.append(repository_status(target.uri, name, commit, status))
        return {"folders": [await ls.engine(folder.status) for folder in ls.folders], "repositories": repositories}
