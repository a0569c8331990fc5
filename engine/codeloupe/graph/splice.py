"""The code of a route's hops, read from disk like ask's citations: the use site and the definition.

A side is spliced only when its file still hashes as indexed (the graph's line numbers describe the indexed
bytes; shown under stale numbers, code would mislead). A long side is cut to a window around its anchor line,
so one hop through a large class does not bury the route. A file whose content is withheld from an agent
(`codeloupe.secrets.withheld`) is never spliced.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from codeloupe.graph.model import Hop, Span
from codeloupe.index import content_hash
from codeloupe.secrets import withheld
from codeloupe.types import Expansion, split_lines

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext

MAX_SPLICED_LINES = 40  # per side; the use line stays inside the window


def splice_hops(ws: WorkspaceContext, hops: list[Hop]) -> list[Hop]:
    """`hops` with the code of each side whose file is unchanged since indexing and not `withheld`."""
    indexed = {path: row.hash for path, row in ws.store.file_rows().items()}
    verified: dict[str, bool] = {}

    def shown(path: str) -> bool:
        if path not in verified:
            try:
                verified[path] = not withheld(ws, path) and content_hash(ws.read_bytes(path)) == indexed.get(path)
            except (OSError, ValueError):  # gone, or a path outside the workspace (WorkspaceError)
                verified[path] = False
        return verified[path]

    spliced = []
    for hop in hops:
        use_code = definition_code = None
        if hop.use is not None and shown(hop.use.path):
            use_code = _window(ws.expand(hop.use.path, line=hop.use.start_line), hop.use.start_line)
        if hop.definition is not None and shown(hop.definition.path):
            definition_code = _window(_read(ws, hop.definition), hop.definition.start_line)
        spliced.append(dataclasses.replace(hop, use_code=use_code, definition_code=definition_code))
    return spliced


def _read(ws: WorkspaceContext, span: Span) -> Expansion:
    return ws.expand(span.path, span.start_line, span.end_line)


def _window(found: Expansion, anchor: int) -> Expansion:
    """`found`, or MAX_SPLICED_LINES of it starting a few lines above `anchor` when it is longer."""
    lines = split_lines(found.text)
    if len(lines) <= MAX_SPLICED_LINES:
        return found
    first = max(found.start_line, min(anchor - 5, found.end_line - MAX_SPLICED_LINES + 1))
    kept = lines[first - found.start_line:first - found.start_line + MAX_SPLICED_LINES]
    return Expansion(found.path, first, first + len(kept) - 1, "".join(kept), found.symbol)
