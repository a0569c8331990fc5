"""The graph's questions: the map, one node, a route between two concepts, and the small per-file views
retrieval and the editor use. None of these changes a ranking score: they add candidates and annotations."""

from __future__ import annotations

import math
import posixpath
import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

import numpy as np

from codeloupe.file_roles import is_test_path
from codeloupe.graph.build import Graph, load_graph
from codeloupe.graph.model import (
    Community,
    FileSummary,
    GodNode,
    GraphError,
    GraphFolder,
    GraphMap,
    GraphNode,
    GraphPath,
    Hop,
    MapEdge,
    MapNode,
    Neighbour,
    NotInGraph,
    Span,
    Surprise,
)
from codeloupe.graph.naming import community_name, community_names
from codeloupe.graph.resolve import Edge
from codeloupe.graph.splice import splice_hops
from codeloupe.lanes.symbols import SymbolIndex
from codeloupe.secrets import withheld
from codeloupe.store import edges as edge_store
from codeloupe.types import elided

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext

STRUCTURAL_HOP_COST = 1.0
# Entering a test file on a route between two non-test files: dearer than any detour through code, so a
# test is on the route only when no other exists (a test imports everything it tests: a shortcut in
# the graph, not a way the code connects).
TEST_DETOUR_TOLL = 1000.0
TEST_PENALTY = 0.85  # a concept resolves to a test file only when nothing else is about as close
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
# A target that can only be a file's stem or a definition's name (`dev`, `ConsoleRenderer`, `Cart.total`,
# `Foo::bar`): one word, no path.
_NAME = re.compile(r"[A-Za-z_$][\w$-]*")
_QUALIFIED_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*")
# Question words carry nothing when a concept is matched against path and definition names.
_STOP_WORDS = frozenset({
    "a", "all", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "how", "in", "is",
    "it", "no", "not", "of", "on", "or", "that", "the", "this", "to", "what", "where", "which", "why", "with",
    "work", "works",
})


SUGGESTIONS = 5
SUGGESTION_CUTOFF = 0.4  # difflib ratio; below it a name shares too little to be worth offering


# ------------------------------------------------------------------------------------------------ map


def graph_map(ws: WorkspaceContext, *, name_with_model: bool = False) -> GraphMap:
    """`name_with_model`: a user asked for the map, so communities without a cached model name may get one
    (one chat call, when a chat model is configured; `graph.naming`)."""
    graph = load_graph(ws)
    nodes = [_map_node(graph, i) for i in range(len(graph.paths))]
    edges = [MapEdge(s, t, k, float(count)) for s, t, k, count in graph.edges.counted()]
    edges += [MapEdge(graph.paths[i], graph.paths[j], "semantic", round(c, 4)) for i, j, c in graph.semantic]
    names = community_names(ws, graph, ask_model=name_with_model)
    communities = [Community(c, names[c], [graph.paths[m] for m in graph.members(c)]) for c in range(len(names))]
    gods = [GodNode(graph.paths[i], graph.degree[i], graph.in_edges.count(i), graph.out_edges.count(i),
                    graph.community[i]) for i in sorted(graph.gods, key=lambda i: (-graph.degree[i], i))]
    surprises = [Surprise(graph.paths[i], graph.paths[j], round(c, 4))
                 for i, j, c in sorted(graph.surprises, key=lambda s: (-s[2], s[0], s[1]))]
    return GraphMap(nodes, edges, communities, gods, surprises)


def _map_node(graph: Graph, i: int) -> MapNode:
    return MapNode(graph.paths[i], graph.languages[i], graph.community[i], graph.degree[i], graph.in_edges.count(i),
                   graph.out_edges.count(i), i in graph.gods)


# ------------------------------------------------------------------------------------------------ node


def graph_node(ws: WorkspaceContext, target: str, *, allow_stale: bool = False) -> GraphNode | GraphFolder:
    """One file or concept (`resolve_target`) with its neighbours; or, when `target` is a folder of the
    workspace, that folder's part of the graph."""
    graph = load_graph(ws, allow_stale=allow_stale)
    folder = _named_folder(ws, target)
    if folder == ".":
        raise NotInGraph(target, "the workspace root: its part of the graph is the whole map, asked for without a "
                                 "node", [])
    if folder:
        return _folder_view(ws, graph, folder)
    i, how = resolve_target(ws, graph, target)
    path = graph.paths[i]
    imports = [_neighbour(graph, j, graph.out_edges[i][j], user=i) for j in sorted(graph.out_edges[i])]
    importers = [_neighbour(graph, j, graph.in_edges[i][j], user=j) for j in sorted(graph.in_edges[i])]
    external = graph.edges.external(i)
    symbols = [d.qualified_name for d in graph.definitions[i]]
    chunks = []
    for start, end, _, _ in ([] if withheld(ws, path) else edge_store.chunk_spans(ws.store, graph.file_ids[i])):
        try:
            chunks.append((Span(path, start, end), ws.read_lines(path, start, end)))
        except ValueError:
            break  # the file changed on disk since it was indexed: show what still matches
    return GraphNode(path, how, graph.community[i], community_name(ws, graph, graph.community[i]), i in graph.gods,
                     imports, importers, external, _similar(graph, i), symbols, chunks)


def _named_folder(ws: WorkspaceContext, target: str) -> str:
    """The workspace folder `target` is the path of ("." for the root, whose answer is the map; "" for anything
    else)."""
    try:
        rel = ws.relative(target.strip().rstrip("/\\") or ".")
    except ValueError:  # outside the workspace, or no path at all
        return ""
    return rel if rel and ws.path_kind(rel) == "folder" else ""


def _folder_view(ws: WorkspaceContext, graph: Graph, folder: str) -> GraphFolder:
    inside = [i for i, path in enumerate(graph.paths) if path.startswith(folder + "/")]
    if not inside:
        raise NotInGraph(folder, "a folder holding no code file of the graph", closest_by_name(graph.paths, folder))
    members = set(inside)
    uses = [(graph.paths[i], _neighbour(graph, j, graph.out_edges[i][j], user=i))
            for i in inside for j in sorted(graph.out_edges[i]) if j not in members]
    used_by = [(graph.paths[i], _neighbour(graph, j, graph.in_edges[i][j], user=j))
               for i in inside for j in sorted(graph.in_edges[i]) if j not in members]
    counts = Counter(graph.community[i] for i in inside)
    communities = [Community(c, community_name(ws, graph, c), [graph.paths[i] for i in inside
                                                                if graph.community[i] == c])
                   for c in sorted(counts, key=lambda c: (-counts[c], c))]
    return GraphFolder(folder, [_map_node(graph, i) for i in inside], uses, used_by, communities)


def _neighbour(graph: Graph, j: int, edges: list[Edge], user: int) -> Neighbour:
    """File `j` as a neighbour joined by `edges`, whose lines are in file `user` (the one that uses the other)."""
    kind = "import" if any(e.kind == "import" for e in edges) else "call"
    line = min(e.line for e in edges)
    return Neighbour(graph.paths[j], kind, _carriers(edges), Span(graph.paths[user], line, line))


def _carriers(edges: list[Edge]) -> list[str]:
    """Carrier symbols, AST call sites first, then imported names."""
    ordered = sorted(edges, key=lambda e: (e.kind != "call", e.line))
    return list(dict.fromkeys(s for e in ordered for s in e.symbols))


def _similar(graph: Graph, i: int) -> list[tuple[str, float]]:
    return [(graph.paths[j], round(c, 4)) for j, c in sorted(graph.similar[i].items(), key=lambda kv: (-kv[1], kv[0]))]


def resolve_target(ws: WorkspaceContext, graph: Graph, target: str) -> tuple[int, str]:
    """The node a request names: an exact path, then a file name (or path suffix), a file's stem, a definition's
    name, then the closest file by skeleton embedding, then by words of paths and definitions. Tests lose ties to
    non-tests."""
    text = target.strip()
    if not text:
        raise GraphError("empty graph target")
    try:
        rel: str | None = ws.relative(text)
    except ValueError:  # outside the workspace, or no path at all: nothing there is looked at
        rel = None
    for candidate in (rel, text):
        if candidate is not None and graph.index_of(candidate) is not None:
            return graph.index_of(candidate), "path"
    by_name = [i for i, p in enumerate(graph.paths) if p.endswith("/" + text) or posixpath.basename(p) == text]
    if not by_name:
        by_name = [i for i, p in enumerate(graph.paths) if posixpath.basename(p).lower() == text.lower()]
    if by_name:
        return _preferred(graph, by_name), "filename"
    if rel is None or not ws.path_kind(rel):
        # A bare name is a file's stem ("dev" for dev.py) or a definition's name ("ConsoleRenderer", "Cart.total")
        # before it is a concept: the closest skeleton by meaning is some other file as often as not.
        found = _by_stem(graph, text)
        if found is not None:
            return found, "filename"
        found = _by_definition(ws, graph, text)
        if found is not None:
            return found, "definition"
    if _names_a_file(ws, rel, text):
        # Whether a path outside the workspace exists is not said (an answer must not tell what is on the disk).
        reason = "outside the workspace" if rel is None else {
            "file": "not a code file of the graph", "folder": "a folder, not a file"}.get(
            ws.path_kind(rel), "no such file in the workspace")
        raise NotInGraph(text, reason, closest_by_name(graph.paths, rel or text))
    found = _by_embedding(ws, graph, text)
    if found is not None:
        return found, "embedding"
    found = _by_words(graph, text)
    if found is not None:
        return found, "lexical"
    raise GraphError(f"nothing in the workspace matches '{elided(target)}' (not a path, a file name or a concept "
                     "found in file names and definitions)")


def _preferred(graph: Graph, candidates: list[int]) -> int:
    """Of the files a name fits (at least one), the one it most likely means: code before tests, then the
    shortest path."""
    return min(candidates, key=lambda i: (is_test_path(graph.paths[i]), len(graph.paths[i]), graph.paths[i]))


def _by_stem(graph: Graph, text: str) -> int | None:
    """The file whose name without its extension is `text` (exactly, else in any case)."""
    if not _NAME.fullmatch(text):
        return None
    stems = [posixpath.splitext(posixpath.basename(p))[0] for p in graph.paths]
    for folded in (False, True):
        fits = [i for i, stem in enumerate(stems) if (stem.lower() == text.lower() if folded else stem == text)]
        if fits:
            return _preferred(graph, fits)
    return None


def _by_definition(ws: WorkspaceContext, graph: Graph, text: str) -> int | None:
    """The file defining `text` (a name, or a qualified name such as `Cart.total`; exactly, else in any case, as
    the search's symbol table looks names up): code before tests, a top-level definition before a nested one,
    then the shortest path. Only the files the symbol table names have their definitions read."""
    if not _QUALIFIED_NAME.fullmatch(text):
        return None
    files = _defining(ws, graph, text)
    wanted = text.replace("::", ".").lower()
    found = [(is_test_path(graph.paths[i]), not any(d.qualified_name.lower() == wanted or
                                                    (d.name.lower() == wanted and not d.parent)
                                                    for d in graph.definitions[i]),
              len(graph.paths[i]), graph.paths[i], i) for i in files]
    return min(found)[-1] if found else None


def _defining(ws: WorkspaceContext, graph: Graph, text: str) -> set[int]:
    """The graph's files the symbol table says define `text`: the search snapshot's where it is at hand (a server's,
    or one saved for the index as it stands), else a table of the index's symbols alone, a file a row: a one-shot
    command after a change built and saved the snapshot for it, which the graph needs none of (the answer took
    twice as long at 3,400 files: 0.85 s against 0.39 s)."""
    searcher = ws.searcher()
    if searcher.snapshot_at_hand():
        snap = searcher.snapshot()
        return {i for row in snap.symbols.definitions(text) if (i := graph.index_of(snap.chunk_paths[row])) is not None}
    file_ids = np.array(sorted(row.id for row in ws.store.file_rows().values()), np.int64)
    node_of = {file_id: i for i, file_id in enumerate(graph.file_ids)}
    found = SymbolIndex.of_files(file_ids, ws.store.iter_symbol_names()).definitions(text)
    return {node_of[file_id] for file_id in file_ids[found].tolist() if file_id in node_of}


def _names_a_file(ws: WorkspaceContext, rel: str | None, text: str) -> bool:
    """A target with a directory or an extension, or a file that exists in the workspace, names a file, not a
    concept: it is never answered with some other file that happens to be close to it."""
    return "/" in text or "\\" in text or bool(re.search(r"\.[A-Za-z0-9]{1,8}$", text)) or \
        (rel is not None and bool(ws.path_kind(rel)))


def closest_by_name(paths: list[str], wanted: str, limit: int = SUGGESTIONS) -> list[str]:
    """Graph files whose name (then whole path) is most like `wanted`, best first."""
    from difflib import SequenceMatcher

    stem = posixpath.splitext(posixpath.basename(wanted))[0].lower()
    scored = []
    for path in paths:
        name = posixpath.splitext(posixpath.basename(path))[0].lower()
        score = max(SequenceMatcher(None, stem, name).ratio(),
                    SequenceMatcher(None, wanted.lower(), path.lower()).ratio())
        if score >= SUGGESTION_CUTOFF:
            scored.append((-score, is_test_path(path), path))
    return [path for _, _, path in sorted(scored)[:limit]]


def _by_embedding(ws: WorkspaceContext, graph: Graph, text: str) -> int | None:
    file_ids, vectors = edge_store.skeleton_matrix(ws.store)
    if not file_ids:
        return None
    try:
        query = np.asarray(ws.embedding_provider().embed_query(text), dtype=np.float32).reshape(-1)
    except Exception:  # noqa: BLE001 - any provider failure (no model, no network) falls back to words
        return None
    if query.shape[0] != vectors.shape[1] or not np.linalg.norm(query):
        return None
    scores = vectors @ (query / np.linalg.norm(query))
    said = vectors.any(axis=1)  # a zero row: a file with nothing to embed (empty), close to no concept
    node_of = {file_id: i for i, file_id in enumerate(graph.file_ids)}
    best: tuple[float, int] | None = None
    for k, file_id in enumerate(file_ids):
        i = node_of.get(file_id)
        if i is None or not said[k]:
            continue
        score = round(float(scores[k]), 6) * (TEST_PENALTY if is_test_path(graph.paths[i]) else 1.0)
        if best is None or score > best[0] or (score == best[0] and i < best[1]):
            best = (score, i)
    return best[1] if best is not None else None


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 1} - _STOP_WORDS


def _by_words(graph: Graph, text: str) -> int | None:
    """The file whose path and definition names share the rarest words with the concept."""
    wanted = _words(text)
    if not wanted:
        return None
    documents = [_words(p.replace("/", " ")) | {w for d in graph.definitions[i] for w in _words(d.name)}
                 for i, p in enumerate(graph.paths)]
    frequency = Counter(w for doc in documents for w in doc & wanted)
    n = len(documents)
    best: tuple[float, int] | None = None
    for i, doc in enumerate(documents):
        score = sum(math.log(1 + n / frequency[w]) for w in doc & wanted)
        score *= TEST_PENALTY if is_test_path(graph.paths[i]) else 1.0
        if score > 0 and (best is None or score > best[0] + 1e-12):
            best = (score, i)
    return best[1] if best is not None else None


# ------------------------------------------------------------------------------------------------ path


def graph_path(ws: WorkspaceContext, source: str, target: str) -> GraphPath:
    from codeloupe.graph.analysis import hub_tolls, shortest_path

    graph = load_graph(ws)
    a, a_by = resolve_target(ws, graph, source)
    b, b_by = resolve_target(ws, graph, target)
    pa, pb = graph.paths[a], graph.paths[b]
    # An end taken as a concept says which file stood in for it, as a node's `resolvedBy` does: a mistyped name
    # otherwise got a route to some other file, drawn as confidently as one to the file meant.
    stand_ins = "".join(f"{asked!r} names no file or definition: {path} is the file closest to it by "
                        f"{'meaning' if by == 'embedding' else 'the words of file names and definitions'}; "
                        for asked, path, by in ((source, pa, a_by), (target, pb, b_by))
                        if by in ("embedding", "lexical"))
    if a == b:
        return GraphPath(pa, pb, True, False, [], f"{stand_ins}{source!r} and {target!r} are the same file")
    adjacency: list[dict[int, float]] = [{} for _ in graph.paths]
    for i in range(len(graph.paths)):
        for j in graph.neighbours(i):
            adjacency[i][j] = STRUCTURAL_HOP_COST
        for j, cosine in graph.similar[i].items():
            # A similarity hop costs a bit more than a real edge, less the closer the two files are.
            adjacency[i].setdefault(j, 2.0 - cosine)
    tolls = hub_tolls(graph.degree)
    if not (is_test_path(pa) or is_test_path(pb)):  # a route between code does not detour through tests
        tolls = [t + TEST_DETOUR_TOLL if is_test_path(p) else t for t, p in zip(tolls, graph.paths)]
    route = shortest_path(adjacency, tolls, a, b)
    if route is None:
        return GraphPath(pa, pb, False, False, [], f"{stand_ins}no route between {pa} and {pb} in the graph")
    hops = splice_hops(ws, [_hop(ws, graph, u, v) for u, v in zip(route, route[1:])])
    meets, note = _describe(graph, route, hops)
    return GraphPath(pa, pb, True, meets, hops, stand_ins + note)


def _hop(ws: WorkspaceContext, graph: Graph, u: int, v: int) -> Hop:
    forward, backward = graph.out_edges[u].get(v, []), graph.out_edges[v].get(u, [])
    if not forward and not backward:
        cosine = graph.similar[u].get(v, 0.0)
        return Hop(graph.paths[u], graph.paths[v], "semantic", "similar", [], cosine=round(cosine, 4))
    user, definer, edges, direction = (u, v, forward, "uses") if forward else (v, u, backward, "used-by")
    kind = "call" if any(e.kind == "call" for e in edges) else "import"
    carriers = _carriers(edges) or _name_matches(ws, graph, user, definer)
    use = definition = None
    if carriers:
        first = carriers[0]
        lines = [e.line for e in sorted(edges, key=lambda e: (e.kind != "call", e.line)) if first in e.symbols]
        use = Span(graph.paths[user], lines[0], lines[0]) if lines else None
        spot = next((d for d in graph.definitions[definer] if d.name == first and not d.parent), None) \
            or next((d for d in graph.definitions[definer] if d.name == first), None)
        if spot is not None:
            definition = Span(graph.paths[definer], spot.start_line, spot.end_line)
    if use is None:
        first_edge = min(edges, key=lambda e: e.line)
        use = Span(graph.paths[user], first_edge.line, first_edge.line)
    return Hop(graph.paths[u], graph.paths[v], kind, direction, carriers, use, definition)


def _name_matches(ws: WorkspaceContext, graph: Graph, user: int, definer: int) -> list[str]:
    """Top-level names of the definer that appear as words in the user's text (when no AST site carries)."""
    try:
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", ws.read_lines(graph.paths[user])))
    except ValueError:
        return []
    return [d.name for d in graph.definitions[definer] if not d.parent and d.name in words]


def _describe(graph: Graph, route: list[int], hops: list[Hop]) -> tuple[bool, str]:
    """Whether the two ends meet in one file, and a note that is true of the whole route.

    They meet in file m only when every hop up to m points the same way and every hop after it the other way
    (a uses ... m and b uses ... m, or the reverse); any other mix is described as a mixed route."""
    directions = [h.direction for h in hops]
    first, last = graph.paths[route[0]], graph.paths[route[-1]]
    ends = f"{first} and {last}"
    if "similar" in directions:
        linked = "files that read alike (skeleton similarity)" if set(directions) == {"similar"} else \
            "imports and calls and, where no edge exists, files that read alike (skeleton similarity)"
        return False, f"{ends} are linked through {linked}"
    if all(d == "uses" for d in directions):
        return False, f"{first} reaches {last} through what it uses"
    if all(d == "used-by" for d in directions):
        return False, f"{last} reaches {first} through what it uses"
    for k in range(1, len(route) - 1):
        before, after = set(directions[:k]), set(directions[k:])
        middle = graph.paths[route[k]]
        if before == {"uses"} and after == {"used-by"}:
            return True, f"{ends} never call each other; they meet in {middle}, which both sides use"
        if before == {"used-by"} and after == {"uses"}:
            return True, f"{ends} never call each other; they meet in {middle}, which uses both sides"
    return False, (f"{ends} are linked by a mixed route (dependencies point both ways along it); "
                   "each hop says which side uses which")


# ------------------------------------------------------------------------------------------------ retrieval & editor


def neighbours(ws: WorkspaceContext, paths: list[str], limit: int = 7) -> list[tuple[str, str]]:
    """Graph neighbours of retrieval's top files, for its RELATED section: (path, one-line reason).

    Files linked to more of the top files come first, then to higher-ranked ones; hubs (god nodes) and
    similarity-only neighbours come after real edges. Deterministic for a given graph; may answer from the
    last graph built rather than wait for a rebuild (see `load_graph`).
    """
    graph = load_graph(ws, allow_stale=True)
    given = [graph.index_of(p) for p in paths if graph.index_of(p) is not None]
    chosen = set(given)
    found: dict[int, list] = {}
    for rank, i in enumerate(given):
        path = graph.paths[i]
        links: list[tuple[int, str, bool]] = []
        for j, imported in sorted(graph.edges.linked(i, incoming=False).items()):
            links.append((j, f"{'imported by' if imported else 'called from'} {path}", False))
        for j, imports in sorted(graph.edges.linked(i, incoming=True).items()):
            links.append((j, f"{'imports' if imports else 'calls into'} {path}", False))
        for j, cosine in sorted(graph.similar[i].items()):
            links.append((j, f"reads like {path} (cosine {cosine:.2f})", True))
        for j, reason, similar_only in links:
            if j in chosen:
                continue
            entry = found.setdefault(j, [0, rank, reason, True])
            entry[0] += 0 if similar_only else 1
            entry[3] = entry[3] and similar_only
    order = sorted(found, key=lambda j: (found[j][3], j in graph.gods, -found[j][0], found[j][1], graph.paths[j]))
    return [(graph.paths[j], found[j][2]) for j in order[:limit]]


def file_summary(ws: WorkspaceContext, path: str, *, allow_stale: bool = False) -> FileSummary:
    graph = load_graph(ws, allow_stale=allow_stale)
    i = _require(ws, graph, path)
    return FileSummary(graph.paths[i], graph.community[i], community_name(ws, graph, graph.community[i]),
                       graph.out_edges.count(i), graph.in_edges.count(i), i in graph.gods, _similar(graph, i))


def definition_users(ws: WorkspaceContext, path: str, *, allow_stale: bool = False) -> dict[str, list[tuple[str, int]]]:
    """Qualified name of each definition in `path` -> the other files that use it, with the line of the use
    (the first call site, else the import)."""
    graph = load_graph(ws, allow_stale=allow_stale)
    i = _require(ws, graph, path)
    names = {d.name: d.qualified_name for d in graph.definitions[i] if not d.parent}
    users: dict[str, dict[str, int]] = defaultdict(dict)
    for j, edges in sorted(graph.in_edges[i].items()):
        for edge in sorted(edges, key=lambda e: (e.kind != "call", e.line)):
            for symbol in edge.symbols:
                if symbol in names:
                    users[names[symbol]].setdefault(graph.paths[j], edge.line)
    return {name: sorted(found.items()) for name, found in sorted(users.items())}


def _require(ws: WorkspaceContext, graph: Graph, path: str) -> int:
    try:
        rel = ws.relative(path)
    except ValueError as exc:
        raise GraphError(str(exc)) from None
    i = graph.index_of(rel)
    if i is None:
        raise GraphError(f"{elided(rel)}: not a code file of the index")
    return i
