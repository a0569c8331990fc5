"""`codeloupe/tour`: where to start reading a folder: entry points, then the names most files mention."""

from __future__ import annotations

from typing import Any

from codeloupe.api import MAX_TOUR_ENTRY_POINTS, TOUR_ENTRY_POINTS, TOUR_NAMES, WorkspaceError, tour_counts
from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params, invalid
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import one_target, uris_of

METHOD = "codeloupe/tour"


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_tour(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        limit = params.integer("limit", TOUR_NAMES)
        entry_points = params.integer("entryPoints", TOUR_ENTRY_POINTS, maximum=MAX_TOUR_ENTRY_POINTS)
        try:
            tour_counts(limit, entry_points)  # the tour's counts as MCP and HTTP check them, before any wait
        except WorkspaceError as exc:
            raise invalid(f"{METHOD}: {exc}") from exc
        target = await one_target(ls, params.text("folderUri"))
        found = await ls.engine(target.ws.tour, limit=limit, entry_point_limit=entry_points)
        return convert.tour(await uris_of(ls, target), found)
