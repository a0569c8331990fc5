"""`workspace/executeCommand`: `codeloupe.reindex` and `codeloupe.openLocation`."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types as lsp

from codeloupe_lsp.convert import JSON, uri_to_path
from codeloupe_lsp.params import invalid, read_range, read_uri
from codeloupe_lsp.server import CodeloupeServer, RequestFailed

REINDEX = "codeloupe.reindex"
OPEN_LOCATION = "codeloupe.openLocation"


def register(server: CodeloupeServer) -> None:
    # pygls ignores defaults on typed command parameters; `*args` lets the optional folder be absent.
    @server.command(REINDEX)
    async def reindex(ls: CodeloupeServer, *args: Any) -> JSON:
        folder_uri = read_uri(args[0], f"{REINDEX}: argument 1 (folderUri)") if args and args[0] else ""
        folders = ls.folders_for(folder_uri)
        for folder in folders:
            folder.embed_error = ""  # an explicit reindex is also the retry for a failed embedding provider
        await asyncio.gather(*(folder.request_full() for folder in folders))
        return {"files": sum(f.files for f in folders), "chunks": sum(f.chunks for f in folders)}

    @server.command(OPEN_LOCATION)
    async def open_location(ls: CodeloupeServer, *args: Any) -> bool:
        if len(args) != 2:
            raise invalid(f"{OPEN_LOCATION}: expected arguments [uri, range], got {len(args)} argument(s)")
        uri = read_uri(args[0], f"{OPEN_LOCATION}: argument 1 (uri)")
        (start, end) = read_range(args[1], f"{OPEN_LOCATION}: argument 2 (range)")
        ls.folder_for(uri)
        path = uri_to_path(uri)
        if path is None or not path.is_file():
            raise RequestFailed(message=f"{uri}: no such file (deleted since it was indexed?)")
        selection = lsp.Range(start=lsp.Position(line=start[0], character=start[1]),
                              end=lsp.Position(line=end[0], character=end[1]))
        result = await ls.window_show_document_async(
            lsp.ShowDocumentParams(uri=uri, take_focus=True, selection=selection))
        return bool(result and result.success)
