"""`codeloupe/status`: every folder's index state, counts, trust and embedding progress, and every shared
repository's commit and counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codeloupe_lsp.convert import JSON, repository_status, status_result
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer, RequestFailed
from codeloupe_lsp.shared import repository_target

if TYPE_CHECKING:
    from codeloupe_lsp.folders import Folder

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
        folders = [entry for folder in ls.folders if (entry := await _folder_status(ls, folder))]
        return status_result(folders, repositories, ls.shared_problem)


async def _folder_status(ls: CodeloupeServer, folder: Folder) -> JSON | None:
    """A folder's entry; a folder reopened while it was asked (its settings or the user's trust changed, so its
    index was closed under the request) is answered by the folder open now, or left out if none is yet."""
    try:
        return await ls.engine(folder.status)
    except RequestFailed:
        current = ls.folders.get(folder.uri)
        if current is folder:
            raise
        return None if current is None else await ls.engine(current.status)
