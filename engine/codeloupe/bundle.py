"""The bundle: every candidate file, CORE in full and RELATED as a map. Completeness by construction.

Files rank by their fused score (see `codeloupe.search.Fusion`). The leaders
within `CORE_GAP` of the top score are CORE and carry their matching chunks verbatim; every other candidate
is RELATED and keeps its membership, its best span and a one-line why, losing only the code body.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from itertools import accumulate, chain
from typing import TYPE_CHECKING

import numpy as np

from codeloupe import ranking as R
from codeloupe.lanes.tokens import tokenize
from codeloupe.types import (
    Bundle,
    ChunkHit,
    FileHit,
    LaneStatus,
    Snippet,
    count_line_breaks,
    elided,
    split_lines,
)

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext
    from codeloupe.graph.build import Graph
    from codeloupe.search import Fusion, Snapshot


def build_bundle(ws: WorkspaceContext, snap: Snapshot, *, query: str, fusion: Fusion, mask: np.ndarray, limit: int,
                 mode: str, scope: str, issue_mode: bool, lanes: list[LaneStatus]) -> Bundle:
    file_scores = {f: score for f, score in fusion.file.items() if score > 0}
    order = sorted(file_scores, key=lambda f: (-file_scores[f], snap.file_paths[f]))
    ranked = order[: max(limit, 1)]
    # Completeness by construction (rule 2): every file any lane ranked is a candidate, however far down. Past
    # the limit they are RELATED map entries (no snippet: nothing of their text is read): first the files some
    # lane ranks near its top and the graph's links from CORE, then every other candidate.
    best_rank: dict[int, int] = {}
    for ranks in fusion.file_ranks.values():
        for f, r in ranks.items():
            best_rank[f] = min(r, best_rank.get(f, r))
    # A report's other variants (title, trace, ...) vote without recording ranks: the files only they scored
    # are candidates too, past every recorded rank.
    for f in file_scores:
        best_rank.setdefault(f, R.LANE_DEPTH + 1)
    kept = set(ranked)
    tail = sorted((f for f in best_rank if f not in kept),
                  key=lambda f: (-file_scores.get(f, 0.0), best_rank[f], snap.file_paths[f]))
    near = [f for f in tail if best_rank[f] <= R.BUNDLE_LANE_TOP_K]
    far = [f for f in tail if best_rank[f] > R.BUNDLE_LANE_TOP_K]
    chunk_scores = fusion.chunk
    core_count = _core_count([file_scores.get(f, 0.0) for f in ranked])
    query_terms = snap.bm25.snippet_terms(tokenize(query), R.SNIPPET_TERMS)
    file_rows = []
    for file_id in ranked:
        rows = np.asarray(snap.file_chunk_rows.get(file_id, []), np.int64)
        rows = rows[mask[rows]]
        file_rows.append(rows[np.lexsort((rows, -chunk_scores[rows]))].tolist())
    shown = [_shown_rows(snap, rows, fusion, full=rank <= core_count) for rank, rows in enumerate(file_rows, 1)]
    # Every shown chunk's text in one read of the store (one query per chunk was most of a warm bundle).
    shown_flat = [r for rows in shown for r in rows]
    texts = dict(zip(shown_flat, snap.table.texts.many(shown_flat)))
    whys = _whys(fusion)
    hits = [_file_hit(snap, file_id, rank, file_scores.get(file_id, 0.0), rows, shown_rows, texts, fusion,
                      query_terms, whys.get(file_id, "matched"), full=rank <= core_count)
            for rank, (file_id, rows, shown_rows) in enumerate(zip(ranked, file_rows, shown), 1)]
    best_rows = _best_rows(snap, fusion, mask, near + far)
    hits.extend(_map_entries(snap, [(f, len(hits) + 1 + i, file_scores.get(f, 0.0), best_rows[f],
                                     whys.get(f, "matched"))
                                    for i, f in enumerate(f for f in near if f in best_rows)]))
    core, related = hits[:core_count], hits[core_count:]
    linked, graph_pending = _graph_neighbours(ws, snap, hits, core, fusion, limit=R.GRAPH_NEIGHBOURS,
                                              start_rank=len(hits) + 1, mode_mask=mask)
    related.extend(linked)
    if graph_pending:  # a large workspace's first graph builds on its own thread: say what the answer lacks
        lanes = [*lanes, LaneStatus("graph", False, 0.0, "its first graph is being built")]
    present = {h.path for h in related}
    rest = [f for f in far if f in best_rows and snap.file_paths[f] not in present]
    start = len(core) + len(related) + 1
    related.extend(_map_entries(snap, [(f, start + i, file_scores.get(f, 0.0), best_rows[f], whys.get(f, "matched"))
                                       for i, f in enumerate(rest)], tail=True))
    return Bundle(query=query, root=str(ws.root), mode=mode, issue_mode=issue_mode, core=core,
                  related=related, lanes=lanes, timing_ms={}, scope=scope)


def merge_bundles(query: str, mode: str, bundles: dict[str, Bundle]) -> Bundle:
    """One ranking of several repositories' bundles for the same query, each searched with the others as
    peers (their file scores are then on one scale: see `Fusion`). Every file of every bundle stays (rule 2),
    stamped with its repository (its revision is its own, as in its bundle); CORE is the merged ranking's prefix
    by the usual gap rule, which only ever takes files their own bundle had in CORE (a file within the gap of the
    overall leader is within it of its own), so CORE files keep their code."""
    hits = [dataclasses.replace(hit, repository=name) for name, bundle in bundles.items() for hit in bundle.files]
    # Scored candidates by score, then graph links, then the tail; a stable sort keeps each bundle's own order.
    hits.sort(key=lambda h: (h.tail, h.via != "search", -h.score))
    core_count = _core_count([h.score for h in hits if h.via == "search" and not h.tail])
    for rank, hit in enumerate(hits, 1):
        hit.rank = rank
    lanes: dict[str, LaneStatus] = {}
    for bundle in bundles.values():
        for status in bundle.lanes:  # a lane is as ready as its least ready repository
            seen = lanes.get(status.name)
            if seen is None or (seen.ready, seen.coverage) > (status.ready, status.coverage):
                lanes[status.name] = status
    total = sum(b.timing_ms.get("total", 0.0) for b in bundles.values())
    return Bundle(query=query, root="", mode=mode, issue_mode=any(b.issue_mode for b in bundles.values()),
                  core=hits[:core_count], related=hits[core_count:], lanes=list(lanes.values()),
                  timing_ms={"total": round(total, 3)},
                  notes=list(dict.fromkeys(f"{name}: {note}" for name, b in bundles.items() for note in b.notes)))


def _best_rows(snap: Snapshot, fusion: Fusion, mask: np.ndarray, file_ids: list[int]) -> dict[int, list[int]]:
    """Each file's chunks under the mask that some lane scored, best first (its first chunk when only the
    file-level lanes saw it): what a map entry points at, from the few scored rows rather than every chunk."""
    wanted = set(file_ids)
    out: dict[int, list[int]] = defaultdict(list)
    scored = fusion.scored_rows(mask)
    scored = scored[np.argsort(-fusion.chunk[scored], kind="stable")]
    for row, file_id in zip(scored.tolist(), snap.table.file_ids[scored].tolist()):
        if file_id in wanted:
            out[file_id].append(row)
    for file_id in wanted - out.keys():
        first = next((r for r in snap.file_chunk_rows.get(file_id, []) if mask[r]), None)
        if first is not None:
            out[file_id].append(first)
    return out


def _map_entries(snap: Snapshot, entries: list[tuple[int, int, float, list[int], str]], *, via: str = "search",
                 tail: bool = False) -> list[FileHit]:
    """RELATED files as map lines, each (file id, rank, score, rows, why): where its first chunk of `rows` is
    and why it is here, no code. A complete bundle has hundreds: their lines and symbols are read for all of
    them at once."""
    table = snap.table
    best = [rows[0] for _, _, _, rows, _ in entries]
    starts, ends = table.start_lines[best].tolist(), table.end_lines[best].tolist()
    named = [rows[:5] for _, _, _, rows, _ in entries]
    symbols = table.symbols.many(chain.from_iterable(named))
    bounds = list(accumulate(map(len, named), initial=0))
    return [FileHit(path=snap.file_paths[file_id], language=snap.file_languages.get(file_id, ""), rank=rank,
                    score=round(score, 6), best_start_line=start, best_end_line=end,
                    symbols=_first_distinct(symbols[a:b], 12), why=why, via=via,
                    tail=tail)
            for (file_id, rank, score, _, why), a, b, start, end in zip(entries, bounds, bounds[1:], starts, ends)]


def _core_count(scores: list[float]) -> int:
    """CORE is a prefix of the ranking: the leader, then each next file while it is within the gap."""
    if not scores:
        return 0
    count = 1
    while count < min(R.CORE_MAX, len(scores)) and scores[count] >= scores[0] * (1.0 - R.CORE_GAP):
        count += 1
    return count


def _shown_rows(snap: Snapshot, chunk_rows: list[int], fusion: Fusion, *, full: bool) -> list[int]:
    """The chunks a hit shows, in line order: a CORE file's chunks scoring near its best, else its best one
    (`chunk_rows`: the file's chunks under the mask, best first)."""
    best_score = float(fusion.chunk[chunk_rows[0]])
    if not full:
        return chunk_rows[:1]
    return sorted((r for r in chunk_rows if fusion.chunk[r] >= R.CORE_CHUNK_RATIO * best_score),
                  key=lambda r: int(snap.table.start_lines[r]))


def _file_hit(snap: Snapshot, file_id: int, rank: int, score: float, chunk_rows: list[int], shown: list[int],
              texts: dict[int, str], fusion: Fusion, query_terms: list[str], why: str, *, full: bool) -> FileHit:
    """`chunk_rows`: the file's chunks under the mask, best first; `shown`: those it shows (`_shown_rows`),
    `texts` holding their texts."""
    best_row = chunk_rows[0]
    chunks = [_chunk_hit(snap, r, texts[r], fusion, query_terms, with_text=full) for r in shown]
    table = snap.table
    symbols = list(dict.fromkeys(s for r in chunk_rows[:5] for s in table.symbols[r]))
    return FileHit(
        path=snap.file_paths[file_id], language=snap.file_languages.get(file_id, ""), rank=rank,
        score=round(score, 6), best_start_line=int(table.start_lines[best_row]),
        best_end_line=int(table.end_lines[best_row]), symbols=symbols[:12],
        why=why, chunks=chunks,
    )


def _chunk_hit(snap: Snapshot, row: int, text: str, fusion: Fusion, query_terms: list[str], *,
               with_text: bool) -> ChunkHit:
    table = snap.table
    start = int(table.start_lines[row])
    return ChunkHit(
        chunk_id=int(table.ids[row]), path=snap.chunk_paths[row], start_line=start,
        end_line=int(table.end_lines[row]), kind=table.kinds[row], name=table.names[row],
        breadcrumb=table.breadcrumbs[row], symbols=list(table.symbols[row]),
        score=round(float(fusion.chunk[row]), 6),
        lanes={name: ranks[row] for name, ranks in fusion.chunk_ranks.items() if row in ranks},
        text=text if with_text else "", snippet=make_snippet(text, start, query_terms),
    )


def make_snippet(text: str, start_line: int, query_terms: list[str], radius: int = R.SNIPPET_RADIUS) -> Snippet:
    """The chunk's best-matching line (most of the query's rarest terms) with `radius` lines either side."""
    lines = split_lines(text)
    if not lines:
        return Snippet(start_line, start_line, start_line, "", False)
    best = _best_line(text.lower(), query_terms)
    lo, hi = max(0, best - radius), min(len(lines), best + radius + 1)
    return Snippet(start_line + lo, start_line + hi - 1, start_line + best, "".join(lines[lo:hi]),
                   truncated=lo > 0 or hi < len(lines))


def _best_line(lowered: str, terms: list[str]) -> int:
    """0-based line holding the most distinct query terms: str.find per term, one count of line breaks per hit."""
    hits: list[tuple[int, str]] = []
    for term in terms:
        pos = lowered.find(term)
        while pos >= 0 and len(hits) < 500:
            hits.append((pos, term))
            pos = lowered.find(term, pos + len(term))
    if not hits:
        return 0
    hits.sort()
    per_line: dict[int, set[str]] = defaultdict(set)
    line, last = 0, 0
    for pos, term in hits:
        line += count_line_breaks(lowered, last, pos)
        last = pos
        per_line[line].add(term)
    return min(per_line, key=lambda n: (-len(per_line[n]), n))


_LANE_LABELS = {"dense": "dense", "lexical": "bm25", "file": "bm25 file", "symbol": "symbol", "entity": "entity",
                "project": "docs & manifests", "feedback": "feedback"}


def _whys(fusion: Fusion) -> dict[int, str]:
    """Each ranked or pinned file's one line of why ("bm25 #3, dense #7, frame of the trace"), built in one pass
    over the lanes' ranks for the hundreds of files a complete bundle lists; a file none ranked is "matched"."""
    parts: dict[int, list[str]] = defaultdict(list)
    for name, ranks in fusion.file_ranks.items():
        label = _LANE_LABELS.get(name, name)
        for file_id, rank in ranks.items():
            parts[file_id].append(f"{label} #{rank}")
    for file_id, pins in fusion.pins.items():
        parts[file_id].extend(dict.fromkeys(pins))
    return {file_id: ", ".join(found) or "matched" for file_id, found in parts.items()}


def _first_distinct(lists: list[list[str]], limit: int) -> list[str]:
    """The first `limit` distinct names of `lists` in order (a chunk can list hundreds of symbols)."""
    seen: dict[str, None] = {}
    for names in lists:
        for name in names:
            seen.setdefault(name)
            if len(seen) == limit:
                return list(seen)
    return list(seen)


def _graph_neighbours(ws: WorkspaceContext, snap: Snapshot, hits: list[FileHit], core: list[FileHit], fusion: Fusion, *,
                      limit: int, start_rank: int, mode_mask: np.ndarray) -> tuple[list[FileHit], bool]:
    """Graph neighbours added to RELATED (annotation and membership only, never score): every file linked to a
    CORE file or a traceback frame through the code the query matched (what its shown chunks and the frames'
    functions call, who calls what the chunks define), then up to `limit` other neighbours of the top files; and
    whether the graph was still being built (none of them then)."""
    from codeloupe.graph import neighbours
    from codeloupe.graph.build import load_graph

    present = {h.path for h in hits}
    graph = load_graph(ws, allow_stale=True)
    frames: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for row in fusion.frame_rows:
        frames[snap.chunk_paths[row]].append((int(snap.table.start_lines[row]), int(snap.table.end_lines[row])))
    linked = [*_symbol_links(graph, core, frames), *neighbours(ws, [h.path for h in hits[: R.CORE_MAX]], limit=limit)]
    entries: list[tuple[int, int, float, list[int], str]] = []
    for path, reason in linked:
        file_id = snap.path_to_file.get(path)
        if file_id is None or path in present:
            continue
        rows = [r for r in snap.file_chunk_rows.get(file_id, []) if mode_mask[r]]
        if not rows:
            continue
        present.add(path)
        entries.append((file_id, start_rank + len(entries), 0.0, rows, reason))
    return _map_entries(snap, entries, via="graph"), graph.pending


def _symbol_links(graph: Graph, core: list[FileHit], frames: dict[str, list[tuple[int, int]]]) -> list[tuple[str, str]]:
    """(path, why) of the callees of CORE's shown chunks and of a report's frames (`frames`: path -> the line
    spans of the chunks its traceback frames fall in), and the callers of what CORE's shown chunks define.

    A bug report names the API a user called; the fix is often in the helper it delegates to, one hop away.
    Hubs are left to the general neighbours: a logger called from every chunk is no lead.
    """
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    defined: dict[str, set[str]] = defaultdict(set)
    for hit in core:
        spans[hit.path].extend((c.start_line, c.end_line) for c in hit.chunks)
        defined[hit.path].update(s.rsplit(".", 1)[-1] for c in hit.chunks for s in c.symbols)
    for path, frame_spans in frames.items():
        spans[path].extend(frame_spans)
    out: list[tuple[str, str]] = []
    for path, path_spans in spans.items():
        i = graph.index_of(path)
        if i is None:
            continue
        for j, edges in sorted(graph.out_edges[i].items()):
            used = [s for e in edges if any(a <= e.line <= b for a, b in path_spans) for s in e.symbols]
            if used and j not in graph.gods:
                out.append((graph.paths[j], f"{', '.join(dict.fromkeys(used))} called from {path}"))
        for j, edges in sorted(graph.in_edges[i].items()):
            used = [s for e in edges for s in e.symbols if s.rsplit(".", 1)[-1] in defined[path]]
            if used:
                out.append((graph.paths[j], f"calls {', '.join(dict.fromkeys(used))} of {path}"))
    return out[: R.GRAPH_SYMBOL_LINKS_MAX]


# Lanes that match the query's own words (a name, a term, a path); dense matches by meaning only.
WORD_LANES = frozenset({"lexical", "symbol", "entity"})


def trust_notes(bundle: Bundle, *, scope_indexed: bool = True, workspace_indexed: bool = True) -> list[str]:
    """Sentences for the user on how far to trust this answer (`Bundle.notes`, docs/protocol.md `notes`).
    `scope_indexed`: whether any indexed file lies under the search's scope (a mistyped folder is not a query
    that matched nothing); `workspace_indexed`: whether the workspace has any indexed file at all (an empty
    folder is not one whose files lack the query's words)."""
    notes = []
    for status in bundle.lanes:
        # Files changed in bulk (a branch switch) are searched once the snapshot is rebuilt: until then the
        # answer lacks them, new words and old alike (a "nothing matches" would otherwise read as the truth).
        if status.name == "lexical" and status.coverage < 1.0 and status.note:
            notes.append(f"{status.note}; this answer lacks them until then")
        if status.name == "graph" and not status.ready:
            notes.append("the call graph is being built: RELATED lacks the files it links to these until then")
        # A dense lane the user turned off (no provider) says nothing; a pending or partial one changes answers.
        if status.name != "dense" or status.off:
            continue
        if status.ready and status.coverage < 1.0:
            notes.append(f"dense lane partial: {status.coverage:.0%} of chunks embedded; results may change as "
                         "vectors arrive")
        elif not status.ready:
            notes.append(f"dense lane not ready ({status.note or 'no vectors yet'}): these results match words "
                         "only and may change as vectors arrive")
    hits = bundle.files
    if not hits and not workspace_indexed:
        notes.append("no file is indexed in the workspace: it holds no file codeloupe reads")
    elif not hits and not scope_indexed:
        notes.append(f"no indexed file lies under '{elided(bundle.scope)}': the scope names no folder or file of the "
                     "index")
    elif not hits:
        notes.append("nothing in the workspace matches the query")
    elif not any(WORD_LANES & chunk.lanes.keys() for hit in hits for chunk in hit.chunks):
        notes.append("no file contains the query's words; these are the closest candidates by meaning only")
    return notes
