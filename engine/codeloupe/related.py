"""`find_related`: the chunks nearest to an anchor span, in the anchor's language.

Nearest by the dense lane (the span's own embedding against the chunk vectors) when vectors are ready, else by
BM25 over the span's words; the lane used is reported. The anchor's own chunks are left out. No model beyond the
embedding of the span, and nothing is ranked by the graph.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from codeloupe.lanes.tokens import tokenize
from codeloupe.lanes.top import top_rows
from codeloupe.secrets import withheld
from codeloupe.types import ChunkHit, Related

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext

log = logging.getLogger("codeloupe.related")


def find_related(ws: WorkspaceContext, path: str, start_line: int | None, end_line: int | None, limit: int) -> Related:
    anchor = ws.expand(path, start_line, end_line)  # containment and index checks, the text from disk
    searcher = ws.searcher()
    snap = searcher.snapshot()
    table = snap.table
    file_id = snap.path_to_file[anchor.path]
    language = snap.file_languages[file_id]
    languages, chunk_languages = snap.chunk_languages()
    mask = chunk_languages == languages.index(language)
    if snap.live is not None:
        mask &= snap.live
    for row in snap.file_chunk_rows.get(file_id, []):
        if table.start_lines[row] <= anchor.end_line and table.end_lines[row] >= anchor.start_line:
            mask[row] = False  # the anchor itself
    scores, lane = _dense_scores(ws, snap, anchor.text), "dense"
    if scores is None:
        scores, lane = snap.bm25.scores(tokenize(anchor.text)), "lexical"
    keep = mask & np.isfinite(scores) & ((scores > 0) if lane == "lexical" else True)
    rows = top_rows(scores, keep, limit)
    # A chunk of a file whose content is withheld gives its place to the next one: asked of the few rows taken,
    # not of every chunk's path.
    while hidden := [r for r in rows if withheld(ws, snap.chunk_paths[r])]:
        keep[hidden] = False
        rows = top_rows(scores, keep, limit)
    texts = table.texts.many(rows)
    chunks = [ChunkHit(int(table.ids[r]), snap.chunk_paths[r], int(table.start_lines[r]), int(table.end_lines[r]),
                       table.kinds[r], table.names[r], table.breadcrumbs[r], list(table.symbols[r]),
                       round(float(scores[r]), 4), {lane: rank}, text)
              for rank, (r, text) in enumerate(zip(rows, texts), 1)]
    return Related(anchor.path, anchor.start_line, anchor.end_line, language, lane, chunks)


def _dense_scores(ws: WorkspaceContext, snap, text: str) -> np.ndarray | None:
    searcher = ws.searcher()
    try:
        dense = searcher.dense(snap)
        provider = ws.embedding_provider()
        if dense is None or not len(dense.chunk_rows) or provider is None:
            return None
        return dense.scores(provider.embed([text])[0], len(snap.table.ids))
    except Exception as exc:  # an embedding endpoint down: the lexical lane still answers
        log.warning("find_related without vectors: %s", exc)
        return None
