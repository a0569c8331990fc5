"""Keeping edges current in the store, and the in-memory graph built from them (cached per index state)."""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from codeloupe.arrays import distinct, find_sorted
from codeloupe.chunk.chunker import GRAMMAR_FAILED
from codeloupe.discover import IndexStopped
from codeloupe.graph import analysis, semantic
from codeloupe.graph.compact import EDGE_KINDS, Adjacency, EdgeTable, NodeDefinitions, PackedFacts, PathIndex
from codeloupe.graph.facts import EXTRACTOR_VERSION, FileFacts, ImportFact
from codeloupe.graph.langs import RESOLVERS, extract_facts
from codeloupe.graph.resolve import (
    MAX_REEXPORT_DEPTH,
    ResolveContext,
    changed_tokens,
    mentioned_tokens,
    module_tokens,
    provided_tokens,
    read_config,
    reexported_tokens,
    resolve_file,
)
from codeloupe.memory import after_large_build
from codeloupe.parallel import NOT_RUN, STOP_POLL_S, map_in_workers, until
from codeloupe.saved import load_arrays, pack_strings, save_arrays, saved_stamp, unpack_strings
from codeloupe.store import edges as edge_store

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext

_STATE_KEY = "graph_state"
_CONFIGS_KEY = "graph_configs"
_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_resolutions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_similar: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_building: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_counted: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # (content generation, code files): `_code_files`
_locks_guard = threading.Lock()
log = logging.getLogger("codeloupe.graph")

# A query with no graph yet waits for one only in a workspace this small (its first graph takes about a
# second on a 2-core machine); a larger one answers without graph neighbours while the graph builds.
QUERY_BUILD_MAX_FILES = 2000
# How long a build a query starts on its own thread waits first (see `_build_in_background`).
BACKGROUND_START_DELAY_S = 1.0
# How long a workspace's close waits for its graph builds to stop (`stop_builds`: that one, and a query's own): each
# stops within `STOP_POLL_S` while it takes the edges' facts or waits for another build; what it cannot stop (a
# resolution) is not waited out.
BACKGROUND_STOP_WAIT_S = 2.0


def _lock(ws: WorkspaceContext) -> threading.RLock:
    with _locks_guard:
        lock = _locks.get(ws)
        if lock is None:
            lock = _locks[ws] = threading.RLock()
        return lock


@contextmanager
def _held(ws: WorkspaceContext, should_stop: Callable[[], bool]) -> Iterator[None]:
    """`_lock(ws)` held; waited for asking `should_stop` every `STOP_POLL_S`: once true, `IndexStopped` is raised. A
    closing workspace's refresh otherwise waited for another thread's whole build (a search's or a lens's in the
    background, taking the facts for minutes at 40K files), and its close with it."""
    lock = _lock(ws)
    while not lock.acquire(timeout=STOP_POLL_S):
        if should_stop():
            raise IndexStopped("stopped while waiting for another thread's graph build")
    try:
        yield
    finally:
        lock.release()


def _state(ws: WorkspaceContext) -> str:
    return f"{ws.store.generation('content')}:{EXTRACTOR_VERSION}"


def update_edges(ws: WorkspaceContext, rel_paths: list[str] | None = None, *, since: Collection[str] = (),
                 should_stop: Callable[[], bool] | None = None) -> int:
    """(Re)extract facts for `rel_paths` (None: every file whose facts are missing or from an older
    extractor), then re-resolve the edges that can have changed and store the ones that did. `since`: files
    changed since the resolution held was made besides those whose facts are extracted now (a resolution taken
    from a graph saved for an earlier index state: `_load_earlier`).

    The first resolution in a process covers every file. Later ones resolve only the files a change can
    reach: the changed files, the files with an edge to one, and the files that mention a word one of them
    provides (`resolve.provided_tokens`; for a file changed in place, `resolve.changed_tokens`: its names and
    re-exports, and only the definitions the change added or removed) and, when files were only changed in
    place, whose imports can reach one (`_within_reach`); a change of layout (import roots, a configuration
    file) resolves everything again. Returns the number of files whose facts were extracted.

    `should_stop` (a served workspace closing), asked before each file's facts are taken and once they all are:
    once it is true, `IndexStopped` is raised with nothing stored (the extraction's workers killed), before the
    resolution; the next run extracts them again.
    """
    with _lock(ws):
        store = ws.store
        state = _state(ws)
        todo = edge_store.files_needing_facts(store, EXTRACTOR_VERSION, rel_paths)
        # A file its grammar failed on when it was chunked (or was not run on, for failing on others of its language)
        # is not parsed again for its facts: it would cost its worker's crash or timeout a second time.
        failed = {path for path, reason in store.chunking_problems() if reason.startswith(GRAMMAR_FAILED)}
        texts = ((path, language, "" if path in failed else edge_store.file_text(store, file_id), path in failed)
                 for file_id, path, language in todo)
        extracted = map_in_workers(_facts_json, texts, len(todo), what="graph facts", should_stop=should_stop,
                                   size=lambda _, __, text, ___: len(text), crashed=_no_facts,
                                   kind=lambda _, language, *__: language)
        try:
            fresh = list(zip([file_id for file_id, _, _ in todo],
                             extracted if should_stop is None else until(should_stop, extracted)))
        finally:
            extracted.close()  # stopped: no worker goes on extracting for no one
        # Asked before anything is kept, in the store or in memory (the earlier graph taken below is this process's
        # resolution from then on): a stopped run leaves the next one the same work. Facts cut short end the run
        # whatever `should_stop` says now: taken as all of them, the files left without were marked resolved.
        if len(fresh) < len(todo) or (should_stop is not None and should_stop()):
            raise IndexStopped(f"indexing stopped while taking the graph's facts ({len(fresh):,} of {len(todo):,})")
        if ws not in _resolutions and store.get_meta(_STATE_KEY) != state:
            # A process that holds no resolution yet (`codeloupe index` after a `git pull`) starts from the graph
            # saved for an earlier state, as a restarted editor does, rather than resolving every file (33 of
            # 37 s of indexing 60 changed files at 40K files).
            earlier = _load_earlier(ws)
            if earlier is not None:
                since = set(since) | earlier
        # Edges stored for this very state (resolved by another process): a resolution that must start over
        # takes them as stored instead of resolving every file again.
        current = not todo and store.get_meta(_STATE_KEY) == state
        edge_store.put_facts(store, EXTRACTOR_VERSION, fresh)
        previous = _resolutions.get(ws)
        if previous is not None and store.get_meta(_STATE_KEY) != previous.known_state:
            previous.refreshed = None  # edges stored by someone else meanwhile: the next graph reads them all
        if previous is None or previous.extractor != EXTRACTOR_VERSION \
                or not _resolve_changed(ws, previous, {path for _, path, _ in todo} | set(since)):
            _resolutions[ws] = previous = _load_resolution(ws) if current else _resolve_all(ws)
        _save_configs(ws, previous)
        store.set_meta(_STATE_KEY, state)
        previous.known_state = state
        return len(fresh)


def _facts_json(path: str, language: str, text: str, grammar_failed: bool) -> str:
    """One file's facts as stored (runs in worker processes for a large extraction; `path`, for `_no_facts`): none
    where its grammar failed on it when it was chunked (`grammar_failed`)."""
    if grammar_failed:
        return FileFacts(language).to_json()
    return (extract_facts(language, text) or FileFacts(language)).to_json()


def _no_facts(cause: str, path: str, language: str, text: str, grammar_failed: bool) -> str:
    """The facts stored for a file the worker extracting them died on or ran past its time on (`cause`, as
    `map_in_workers` words it: its grammar's crash on it, or a loop, as far as seen): none, so that the file is in
    the graph without edges of its own, and never parsed in this process, which its grammar would crash or hang."""
    log.log(logging.INFO if cause.startswith(NOT_RUN) else logging.WARNING,  # (those said once by the map)
            "taking the graph's facts of %s %s (its grammar's doing, as far as known): it has no edges of its own", path,
            cause)
    return FileFacts(language).to_json()


@dataclass
class _Resolution:
    """What the last resolution of a workspace saw, kept so that a save re-resolves only what it can reach.
    The edges themselves are read back from the store when a graph is built."""

    extractor: int
    facts: PackedFacts = field(default_factory=PackedFacts)
    paths: set[str] = field(default_factory=set)
    mentions: PathIndex = field(default_factory=PathIndex)  # word -> the files that mention it
    # file -> the files whose imports bind it (`ResolveContext.import_targets`), for the languages whose
    # resolution reads other files through imports alone. Only ever added to until the next full resolution:
    # a binding a file no longer has widens a save's search (`_within_reach`), never narrows it.
    binders: PathIndex = field(default_factory=PathIndex)
    # `LanguageResolver.path_tables`, valid while no file comes or goes
    path_tables: dict[str, object] = field(default_factory=dict)
    layouts: dict[str, object] = field(default_factory=dict)  # language -> `LanguageResolver.layout`
    configs: dict[str, str] = field(default_factory=dict)  # configuration files consulted -> digest read
    # The files whose edges were resolved again since the last graph was built (None: not known, the next graph
    # reads every edge), valid while the edges stored are the ones this process resolved at `known_state`.
    refreshed: set[str] | None = None
    known_state: str | None = None

    def forget(self, path: str) -> None:
        facts = self.facts.pop_facts(path)
        if facts is not None:
            self.mentions.remove(path, mentioned_tokens(path, facts))

    def learn(self, path: str, raw: str, ctx: ResolveContext | None = None) -> None:
        """Take in `path`'s facts as stored (`raw`: their JSON); with `ctx`, whom its imports bind too. Facts
        that do not decode (a damaged index) leave the file in the graph without edges of its own, said in the
        log, instead of failing the whole graph. The index keeps the file's hash, so only a change to the file
        (or an index built afresh) writes its facts anew."""
        try:
            facts = FileFacts.from_json(raw)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("the graph facts stored for %s are damaged (%s): it has no edges of its own until the file"
                        " changes, or until the index file (`codeloupe stats` shows where) is removed and the"
                        " workspace indexed again", path, exc)
            return
        self.facts.put(path, raw, facts)
        self.mentions.add(path, mentioned_tokens(path, facts))
        if ctx is not None:
            self.bind(ctx, path, facts.imports)

    def bind(self, ctx: ResolveContext, path: str, imports: list[ImportFact] | None = None) -> None:
        """Note whom `path`'s imports bind, where its language's saves are narrowed by it (`imports`: its
        imports where they are at hand decoded)."""
        if _reads_through_imports(self.facts.language(path)):
            targets = ctx.import_targets(path) if imports is None else ctx.bound_files(path, imports)
            self.binders.add(path, [target for target in targets if not self.binders.has(target, path)])

    def learn_stored(self, ws: WorkspaceContext, ctx: ResolveContext | None = None) -> dict[str, int]:
        """Take in every stored file's facts, a page at a time (with `ctx`, whom each file's imports bind
        too); path -> file id of each."""
        file_ids: dict[str, int] = {}
        for path, file_id, raw in edge_store.iter_facts(ws.store):
            file_ids[path] = file_id
            self.learn(path, raw, ctx)
        return file_ids

    def remember(self, ctx: ResolveContext) -> None:
        self.paths = set(ctx.paths)
        self.path_tables = {key: ctx.cache[key] for resolver in RESOLVERS.values() for key in resolver.path_tables
                            if key in ctx.cache}
        self.configs.update({rel: _digest(raw) for rel, raw in ctx.configs_read.items()})


def _reads_through_imports(language: str) -> bool:
    resolver = RESOLVERS.get(language)
    return resolver is not None and resolver.reads_through_imports


def _digest(raw: str | None) -> str:
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:16] if raw is not None else ""


def _save_configs(ws: WorkspaceContext, resolution: _Resolution) -> None:
    """Persist the configuration files the resolution consulted, for `_load_resolution` in a later process."""
    saved = json.dumps(resolution.configs, sort_keys=True)
    if ws.store.get_meta(_CONFIGS_KEY) != saved:
        ws.store.set_meta(_CONFIGS_KEY, saved)


def _load_resolution(ws: WorkspaceContext, loaded: _Resolution | None = None) -> _Resolution:
    """The resolution of stored edges that are current (a process opening an index it resolved before):
    facts and edges as stored, nothing resolved again. `loaded`: its facts and mentions as the saved graph
    holds them (`_load_saved`), instead of every file's facts read and decoded from the store."""
    resolution = loaded if loaded is not None else _Resolution(EXTRACTOR_VERSION)
    nodes = edge_store.node_files(ws.store)
    ctx = ResolveContext(ws.root, resolution.facts, {path for _, path, _ in nodes}, RESOLVERS, ws.read_bytes)
    if loaded is None:  # whom each file's imports bind from its facts as they are read (the saved graph has it)
        resolution.learn_stored(ws, ctx)
    resolution.layouts = _layouts(ctx, resolution.facts)
    resolution.remember(ctx)
    try:
        saved = json.loads(ws.store.get_meta(_CONFIGS_KEY))
    except ValueError:
        saved = None
    if not isinstance(saved, dict) or not all(isinstance(v, str) for v in saved.values()) \
            or any(_digest(read_config(ws.read_bytes, rel)) != digest for rel, digest in saved.items()):
        # Missing, damaged, or a configuration file changed while no one watched: resolve everything.
        resolution = _resolve_all(ws)
        _save_configs(ws, resolution)
        return resolution
    resolution.configs = saved
    return resolution


def _layouts(ctx: ResolveContext, facts: PackedFacts) -> dict[str, object]:
    return {language: RESOLVERS[language].layout(ctx) for language in sorted(facts.languages())
            if language in RESOLVERS}


def _resolve_all(ws: WorkspaceContext) -> _Resolution:
    resolution = _Resolution(EXTRACTOR_VERSION)
    file_ids = resolution.learn_stored(ws)
    ctx = ResolveContext(ws.root, resolution.facts, {path for _, path, _ in edge_store.node_files(ws.store)},
                         RESOLVERS, ws.read_bytes)
    _store_edges(ws, ctx, resolution, file_ids)
    resolution.layouts = _layouts(ctx, resolution.facts)
    resolution.remember(ctx)
    return resolution


def _resolve_changed(ws: WorkspaceContext, resolution: _Resolution, changed: set[str]) -> bool:
    """Re-resolve what the `changed` files (and files added or removed since) can reach; False when the
    change reaches the layout and everything must be resolved again."""
    nodes = {path: file_id for file_id, path, _ in edge_store.node_files(ws.store)}
    removed = resolution.paths - nodes.keys()
    added = nodes.keys() - resolution.paths
    changed = changed | added
    if any(_digest(read_config(ws.read_bytes, rel)) != digest for rel, digest in resolution.configs.items()):
        return False
    if any(posixpath.basename(p) in resolver.layout_names for p in added | removed for resolver in RESOLVERS.values()):
        return False
    before = {path: resolution.facts[path] for path in changed | removed if path in resolution.facts}
    for path in changed | removed:
        resolution.forget(path)
    for path, raw in edge_store.facts_of(ws.store, changed).items():
        resolution.learn(path, raw)
    provided: set[str] = set()
    providing: set[str] = set()  # the files that provide something other than before
    for path in changed | removed:
        old, new = before.get(path), resolution.facts.get(path)
        if old is not None and new is not None and old.language == new.language:
            tokens = changed_tokens(path, old, new, RESOLVERS.get(new.language))
        else:
            tokens = set()
            for facts in (old, new):
                if facts is not None:
                    tokens |= provided_tokens(path, facts, RESOLVERS.get(facts.language))
        provided |= tokens
        if tokens:
            providing.add(path)
    ctx = ResolveContext(ws.root, resolution.facts, set(nodes), RESOLVERS, ws.read_bytes)
    if added or removed:
        for resolver in {id(r): r for r in RESOLVERS.values()}.values():
            ctx.cache.update(resolver.tables_after({key: resolution.path_tables[key] for key in resolver.path_tables
                                                    if key in resolution.path_tables}, ctx, added | removed))
        if _layouts(ctx, resolution.facts) != resolution.layouts:
            return False
    else:
        ctx.cache.update(resolution.path_tables)
    rebinding = _rebinding(ws, resolution, ctx, added, {path: before[path] for path in removed if path in before})
    for path in rebinding:
        facts = resolution.facts.get(path)
        if facts is not None:
            provided |= reexported_tokens(facts)
    mentioning = _within_reach(resolution, providing | rebinding, resolution.mentions.users_of(provided))
    affected = (changed & nodes.keys()) | edge_store.sources_of_edges_to(ws.store, changed | removed) | mentioning
    affected = {path for path in affected if path in resolution.facts}
    if resolution.refreshed is not None:
        resolution.refreshed |= affected
    _store_edges(ws, ctx, resolution, {path: nodes[path] for path in sorted(affected)})
    resolution.remember(ctx)
    return True


def _rebinding(ws: WorkspaceContext, resolution: _Resolution, ctx: ResolveContext, added: set[str],
               removed: dict[str, FileFacts]) -> set[str]:
    """The files whose imports may bind other files now that the `added` files came and the `removed` ones (with
    their facts) went: of the files naming one of them, those whose bindings differ from what the last layout
    gave (a language whose bindings read more than paths: every file naming one). What such a file re-exports
    may now come from another file."""
    named: set[str] = set()
    for path in added | removed.keys():
        facts = removed[path] if path in removed else resolution.facts.get(path)
        if facts is not None:
            named |= module_tokens(path, facts, RESOLVERS.get(facts.language))
    naming = resolution.mentions.users_of(named)
    if not naming:
        return set()
    then = ResolveContext(ws.root, resolution.facts, resolution.paths, RESOLVERS, ws.read_bytes)
    then.cache.update(resolution.path_tables)  # the tables of the paths as they were
    rebinding: set[str] = set()
    for path in naming:
        if not _reads_through_imports(resolution.facts.language(path)):
            rebinding.add(path)
            continue
        imports = resolution.facts[path].imports
        if then.bound_files(path, imports) != ctx.bound_files(path, imports):
            rebinding.add(path)
    return rebinding


# How many files the search of `_within_reach` may visit per candidate before it keeps them all: a visit costs
# microseconds, resolving a candidate about a millisecond.
REACH_VISITS_PER_CANDIDATE = 100


def _within_reach(resolution: _Resolution, changed: set[str], candidates: set[str]) -> set[str]:
    """The `candidates` whose edges a change of the `changed` files can change: files that provide something
    other than before (changed in place, added or removed), and the files whose imports name one that came or
    went (their bindings may target other files now; every other binding of a language that
    `reads_through_imports` still targets the same files).

    Such a file reads a changed file's facts only if the file is among its import targets or is reached from
    one through the targets' imports, re-export by re-export (`find_definition`: MAX_REEXPORT_DEPTH + 1 hops at
    most); the search walks those hops back from the changed files (`_Resolution.binders`). Candidates of other
    languages are all kept, and so is every candidate when the search would visit many more files than there
    are candidates (a module everything imports)."""
    kept = {path for path in candidates if not _reads_through_imports(resolution.facts.language(path))}
    if len(kept) == len(candidates):
        return candidates
    budget = REACH_VISITS_PER_CANDIDATE * len(candidates)
    hop, reached = set(changed), set(changed)
    for _ in range(MAX_REEXPORT_DEPTH + 1):
        hop = {binder for path in hop for binder in resolution.binders.users(path)} - reached
        reached |= hop
        if len(reached) > budget:
            return candidates
        if not hop:
            break
    return kept | (candidates & reached)


EDGE_PAGE = 2000  # files whose stored edges are read and compared at a time


def _store_edges(ws: WorkspaceContext, ctx: ResolveContext, resolution: _Resolution, sources: dict[str, int]) -> None:
    """Resolve `sources` (path -> file id), write the edges that differ from the stored ones, a page of files at a
    time, and note whom each file's imports bind (`_Resolution.bind`)."""
    paths = list(sources)
    for start in range(0, len(paths), EDGE_PAGE):
        page = paths[start:start + EDGE_PAGE]
        existing = edge_store.edges_of(ws.store, page)
        changed: dict[int, list[edge_store.EdgeTuple]] = {}
        for path in page:
            rows = [(e.kind, e.target, e.raw, e.symbols, e.line) for e in resolve_file(ctx, path)]
            resolution.bind(ctx, path)
            if rows != existing.get(sources[path], []):
                changed[sources[path]] = rows
        edge_store.replace_edges(ws.store, changed)


def ensure_edges(ws: WorkspaceContext, should_stop: Callable[[], bool] | None = None) -> bool:
    """Bring the edges up to date when the index moved since they were resolved (or never were); whether it
    had moved. `should_stop`: as `update_edges` asks it."""
    if ws.store.get_meta(_STATE_KEY) == _state(ws):
        return False
    update_edges(ws, should_stop=should_stop)
    return True


@dataclass
class Graph:
    """The combined graph of one index state: nodes are the workspace's code files (by index in `paths`).

    Edges and definitions are held compactly (`graph.compact`); `out_edges[i]` / `in_edges[i]` give node `i`'s
    neighbours -> edges, and `definitions[i]` its definitions, decoded for the node asked about.
    """

    paths: list[str]
    languages: list[str]
    file_ids: list[int]
    definitions: NodeDefinitions
    edges: EdgeTable  # structural, including external ones (target "")
    semantic: list[tuple[int, int, float]]  # i < j
    surprises: list[tuple[int, int, float]]
    community: list[int]
    community_names: list[str]
    similar: list[dict[int, float]] = field(default_factory=list)
    degree: list[int] = field(default_factory=list)
    gods: set[int] = field(default_factory=set)
    pair_kinds: np.ndarray | None = field(default=None, repr=False)  # `weighed_pairs`
    # Each community's (directory, central node, dominant symbol) its name was made of (`_name_parts`); None for
    # a graph saved by an older version.
    name_parts: list[tuple[str, int, str]] | None = field(default=None, repr=False)
    # The label propagation the communities come from, replayed after a save (`analysis.propagate`); None for a
    # graph saved by an older version.
    propagation: analysis.Propagation | None = field(default=None, repr=False)
    # The stand-in a query gets while a large workspace's first graph builds on its own thread (`load_graph`):
    # the answer then lacks the graph's links and says so (`bundle.trust_notes`).
    pending: bool = field(default=False, repr=False)

    def index_of(self, path: str) -> int | None:
        return self._index.get(path)

    def __post_init__(self) -> None:
        self._index = {p: i for i, p in enumerate(self.paths)}
        self._members: list[list[int]] | None = None
        self.out_edges = Adjacency(self.edges, incoming=False)
        self.in_edges = Adjacency(self.edges, incoming=True)

    def neighbours(self, i: int) -> set[int]:
        return set(self.out_edges[i]) | set(self.in_edges[i])

    def weighed_pairs(self) -> np.ndarray:
        """The structural part of what the communities were computed from (`_pair_kinds`)."""
        if self.pair_kinds is None:  # a graph read back from disk: derived from its edges once
            self.pair_kinds = _pair_kinds(self.edges, len(self.paths))
        return self.pair_kinds

    def members(self, community: int) -> list[int]:
        if self._members is None:  # grouped once: a per-call scan is quadratic over a map of every community
            self._members = [[] for _ in range(max(self.community, default=-1) + 1)]
            for i, c in enumerate(self.community):
                self._members[c].append(i)
        return self._members[community]


def empty_graph(*, pending: bool = False) -> Graph:
    return Graph([], [], [], NodeDefinitions(PackedFacts(), []), EdgeTable([], ()), [], [], [], [], pending=pending)


def load_graph(ws: WorkspaceContext, *, allow_stale: bool = False,
               should_stop: Callable[[], bool] | None = None) -> Graph:
    """The graph of the current index state, built once per state and shared by every caller.

    `allow_stale` is for the query path: any graph built before is good enough to suggest RELATED neighbours
    (paths that no longer exist are dropped by the caller), so a search never waits for edges to be
    re-resolved or communities recomputed while vectors stream in. A workspace with no graph yet builds one
    first only when it is small; a large one answers from an empty graph while the graph builds on its own
    thread.

    A new process loads the graph saved for the current index state; failing that, it builds the graph from one
    saved for an earlier state (`_load_earlier`), and only without either from every stored fact and edge.

    `should_stop` (the workspace closing) is asked while another thread builds the graph and as the edges' facts
    are taken, as `update_edges` asks it; so is whether `ws` is closed, whoever builds it: a query's own build (a
    small workspace's first search, on a request thread) went on taking the facts in its workers after its
    workspace closed, and a language server leaving then left their pool to the resource tracker (leaked
    semaphores on the editor's output). Stopped, it raises `IndexStopped`; `ws.close()` waits for it
    (`stop_builds`).
    """
    should_stop = _or_closed(ws, should_stop)
    if allow_stale:
        cached = _graphs.get(ws)
        if cached is not None:
            return cached[1]
        if _code_files(ws) > QUERY_BUILD_MAX_FILES:
            _build_in_background(ws)
            return empty_graph(pending=True)
    with _held(ws, should_stop):
        if should_stop():  # closed while it waited, or before it came: no pool of facts workers starts for no one
            raise IndexStopped("the workspace closed before its graph was built")
        if ws not in _resolutions:  # the graph is built from the resolution kept in memory
            current = ws.store.get_meta(_STATE_KEY) == _state(ws)
            if not (current and _load_saved(ws)):
                since = _load_earlier(ws)
                if since is not None:  # the earlier graph, brought up to date as after a save
                    update_edges(ws, since=since, should_stop=should_stop)
                elif current:
                    _resolutions[ws] = _load_resolution(ws)
                else:
                    update_edges(ws, should_stop=should_stop)
            after_large_build(len(_resolutions[ws].paths) if ws in _resolutions else 0)  # facts decoded on the way
        ensure_edges(ws, should_stop)
        key = _graph_key(ws)
        cached = _graphs.get(ws)
        if cached is not None and cached[0] == key:
            return cached[1]
        graph = _build(ws)
        _graphs[ws] = (key, graph)
        if _graph_key(ws) == key:  # nothing was written while it was built
            _save(ws, key, graph)
        after_large_build(len(graph.paths))
        return graph


def _or_closed(ws: WorkspaceContext, should_stop: Callable[[], bool] | None) -> Callable[[], bool]:
    """`should_stop`, or `ws` closed."""
    return lambda: ws.closed or (should_stop is not None and should_stop())


def _code_files(ws: WorkspaceContext) -> int:
    """How many code files the index holds, counted once per content generation: until a large workspace's
    graph is held, every search asks (twice: the summary lane and the bundle's graph links), and counting scans
    the files table (~7 ms at 40K files)."""
    generation = ws.store.generation("content")
    known = _counted.get(ws)
    if known is None or known[0] != generation:
        known = _counted[ws] = (generation, edge_store.code_file_count(ws.store))
    return known[1]


def _graph_key(ws: WorkspaceContext) -> tuple[int, int, str | None]:
    """The index state a graph is built from: content, vectors, and the state its edges were resolved at."""
    return ws.store.generation("content"), ws.store.generation("vector"), ws.store.get_meta(_STATE_KEY)


def graph_stamp(ws: WorkspaceContext, graph: Graph) -> str | None:
    """What identifies `graph` among things saved beside the index (the index state it was built from), when it
    is the graph held for `ws`; None for any other (an empty stand-in, one replaced since)."""
    cached = _graphs.get(ws)
    return _stamp(ws, cached[0]) if cached is not None and cached[1] is graph else None


# ---------------------------------------------------------------------------- the graph saved beside the index

# Bump when what is saved, or how, changes: a file of another version is rebuilt.
GRAPH_FILE_VERSION = 3


def graph_file(ws: WorkspaceContext) -> Path:
    return ws.store.path.with_name(ws.store.path.name + ".graph.npz")


def _stamp(ws: WorkspaceContext, key: tuple[int, int, str | None]) -> str:
    return f"{_stamp_prefix(ws)}{key}"


def _stamp_prefix(ws: WorkspaceContext) -> str:
    """What the stamps of every graph saved for this index by this version share (the index state follows)."""
    return f"{GRAPH_FILE_VERSION}:{EXTRACTOR_VERSION}:{ws.store.index_id}:"


def _key_of(stamped: str) -> tuple[int, int, str | None] | None:
    """The index state a stamp's tail names (`_graph_key` as `_stamp` wrote it); None for anything else."""
    found = _SAVED_KEY.fullmatch(stamped)
    if found is None:
        return None
    content, vector, state = found.groups()
    return int(content), int(vector), None if state == "None" else state[1:-1]


_SAVED_KEY = re.compile(r"\((\d{1,18}), (\d{1,18}), (None|'[0-9:]{1,40}')\)")


def _save(ws: WorkspaceContext, key: tuple[int, int, str | None], graph: Graph) -> None:
    """Save what a new process opening this index state would otherwise compute again (every file's facts
    decoded and indexed by name, whom each file's imports bind, the edge table, the semantic lane, communities
    and their names), so that an editor's restart loads it (`codeloupe.saved`'s rules: the graph of exactly
    this state), or, once the index has moved on, starts from it (`_load_earlier`)."""
    resolution = _resolutions[ws]
    arrays = {"node_ids": np.array(graph.file_ids, np.int64), "community": np.array(graph.community, np.int64),
              "degree": np.array(graph.degree, np.int64),
              # what the resolution read of configuration files, for a later state to see what changed since
              "configs": np.array(json.dumps(resolution.configs, sort_keys=True))}
    arrays["node_paths"], arrays["node_paths_ends"] = pack_strings(graph.paths)
    arrays["node_languages"], arrays["node_languages_ends"] = pack_strings(graph.languages)
    arrays["names"], arrays["names_ends"] = pack_strings(graph.community_names)
    if graph.name_parts is not None:
        directories, centrals, tops = zip(*graph.name_parts) if graph.name_parts else ((), (), ())
        arrays["name_directories"], arrays["name_directories_ends"] = pack_strings(list(directories))
        arrays["name_tops"], arrays["name_tops_ends"] = pack_strings(list(tops))
        arrays["name_centrals"] = np.array(centrals, np.int64)
    if graph.propagation is not None:
        arrays.update(graph.propagation.arrays("propagation_"))
    similar = _similar.get(ws)
    lanes = {"semantic": graph.semantic, "surprises": graph.surprises}
    if similar is not None and similar[0] == key[1]:
        lanes.update(candidates=similar[1][0], close=similar[1][1])
        if similar[2] is not None:
            arrays.update(similar[2].arrays("lane_"))
    for name, triples in lanes.items():
        arrays[f"{name}_pairs"] = np.array([(a, b) for a, b, _ in triples], np.int64).reshape(-1, 2)
        arrays[f"{name}_cosines"] = np.array([c for _, _, c in triples], np.float64)
    try:  # the large parts made one at a time, as they are written (40 MB of facts at 40K files)
        save_arrays(graph_file(ws), _stamp(ws, key), arrays, lambda: resolution.facts.arrays("facts_"),
                    lambda: resolution.mentions.arrays("mentions_"), lambda: resolution.binders.arrays("binders_"),
                    lambda: graph.edges.arrays("edges_"))
    except OSError as exc:  # a read-only cache dir costs the next start time, nothing else
        log.warning("could not save the graph to %s: %s", graph_file(ws), exc)


def _load_saved(ws: WorkspaceContext) -> bool:
    """Take the resolution and graph saved for the current index state (`_save`); False when there is none,
    or it is stale or damaged (then nothing of it is used)."""
    key = _graph_key(ws)
    arrays = load_arrays(graph_file(ws), _stamp(ws, key))
    if arrays is None:
        return False
    try:
        if _saved_nodes(arrays) != edge_store.node_files(ws.store):
            raise ValueError("saved for other files")
        loaded, graph, similar = _decode_saved(arrays)
    except (KeyError, ValueError, IndexError, TypeError) as exc:  # arrays that do not fit together: rebuild
        log.info("ignoring the saved graph %s (%s); rebuilding it", graph_file(ws), exc)
        return False
    resolution = _load_resolution(ws, loaded)
    _resolutions[ws] = resolution
    if resolution is not loaded:  # a configuration file changed while no one watched: resolved again
        return True
    resolution.refreshed, resolution.known_state = set(), key[2]
    _graphs[ws] = (key, graph)
    if similar is not None:
        _similar[ws] = (key[1], similar[:2], similar[2])
    return True


def _load_earlier(ws: WorkspaceContext) -> set[str] | None:
    """Take the graph saved for an earlier state of this index, and what it was resolved from, as the last graph
    and resolution: the files changed since (None when there is no such graph fit to start from) then go
    through the resolution of a save (`update_edges`, `_resolve_changed`) and the graph is built from the earlier
    one (`_build`), instead of every file's facts decoded, every edge read and the semantic lane's product made
    again (a restart after a `git pull`, `codeloupe index` in a terminal, or a save the editor closed on).

    File ids are never reused, so the files changed since are the paths whose file id differs. The edges stored
    must be those of the earlier state (nothing resolved since) or of the current one (resolved by another
    process): a file outside a change's reach has the same edges in both. Edges resolved for a state in between
    could hold a file's edges to one that came and went since, which no change now names: not used."""
    path, prefix = graph_file(ws), _stamp_prefix(ws)
    stamp = saved_stamp(path)
    key = _key_of(stamp[len(prefix):]) if stamp is not None and stamp.startswith(prefix) else None
    edges_state = ws.store.get_meta(_STATE_KEY)
    if key is None or edges_state not in (key[2], _state(ws)):
        return None
    arrays = load_arrays(path, stamp)
    if arrays is None:
        return None
    try:
        loaded, graph, similar = _decode_saved(arrays)
        configs = json.loads(str(arrays["configs"]))
        if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
            raise ValueError("saved configuration digests that are not strings")
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        log.info("ignoring the saved graph %s (%s); building the graph afresh", path, exc)
        return None
    nodes = {node_path: file_id for file_id, node_path, _ in edge_store.node_files(ws.store)}
    then = dict(zip(graph.paths, graph.file_ids, strict=True))
    changed = {node_path for node_path, file_id in nodes.items() if then.get(node_path) != file_id}
    ctx = ResolveContext(ws.root, loaded.facts, set(graph.paths), RESOLVERS, ws.read_bytes)
    loaded.layouts = _layouts(ctx, loaded.facts)
    loaded.remember(ctx)
    # As read when the earlier state was resolved, not as the files are now: a change since is then seen and
    # everything resolved again (`_resolve_changed`).
    loaded.configs = configs
    # Besides the files a change reaches, the graph reads back the stored edges of those whose earlier edges
    # named a changed or removed file: where another process resolved the change, the stored edges no longer
    # tell them.
    gone = [i for i in map(graph.index_of, changed | (then.keys() - nodes.keys())) if i is not None]
    loaded.refreshed = {graph.paths[source] for i in gone for source in graph.edges.neighbour_rows(i, incoming=True)}
    loaded.known_state = edges_state
    _resolutions[ws] = loaded
    _graphs[ws] = (key, graph)
    if similar is not None:
        _similar[ws] = (key[1], similar[:2], similar[2])
    return changed


def _saved_nodes(arrays: dict[str, np.ndarray]) -> list[tuple[int, str, str]]:
    """(file id, path, language) of each node of a saved graph, as `edge_store.node_files` gives them."""
    ids = arrays["node_ids"].tolist()
    paths = unpack_strings(arrays["node_paths"], arrays["node_paths_ends"])
    languages = unpack_strings(arrays["node_languages"], arrays["node_languages_ends"])
    if not len(ids) == len(paths) == len(languages):
        raise ValueError("saved nodes that do not fit together")
    return list(zip(ids, paths, languages))


def _decode_saved(arrays: dict[str, np.ndarray]
                  ) -> tuple[_Resolution, Graph, tuple[list, list, semantic.LanePairs | None] | None]:
    """(resolution, graph, the semantic lane's (candidates, close, LanePairs or None) or None) as `_save` wrote
    them; a ValueError (KeyError, IndexError) when anything does not fit."""
    nodes = _saved_nodes(arrays)
    n = len(nodes)
    resolution = _Resolution(EXTRACTOR_VERSION, facts=PackedFacts.from_arrays(arrays, "facts_"))
    canonical = {path: path for path in resolution.facts}
    resolution.mentions = PathIndex.from_arrays(arrays, "mentions_", canonical)
    resolution.binders = PathIndex.from_arrays(arrays, "binders_", canonical)
    paths = [path for _, path, _ in nodes]
    community, degree = arrays["community"].tolist(), arrays["degree"].tolist()
    names = unpack_strings(arrays["names"], arrays["names_ends"])
    if len(community) != n or len(degree) != n or (n and (min(community) < 0 or max(community) >= len(names))) \
            or len(names) != len(set(community)):
        raise ValueError("saved communities that do not fit the nodes")
    name_parts = None
    if "name_centrals" in arrays:
        centrals = arrays["name_centrals"].tolist()
        name_parts = list(zip(unpack_strings(arrays["name_directories"], arrays["name_directories_ends"]), centrals,
                              unpack_strings(arrays["name_tops"], arrays["name_tops_ends"])))
        if len(name_parts) != len(names) or len(centrals) != len(names) or not all(0 <= c < n for c in centrals):
            raise ValueError("saved community name parts that do not fit the communities")

    propagation = None
    if "propagation_labels" in arrays:
        propagation = analysis.Propagation.from_arrays(arrays, "propagation_", n)
        if analysis.renumber_by_size(propagation.labels) != community:
            raise ValueError("a saved label propagation that does not give the saved communities")

    def triples(name: str, bound: int) -> list[tuple[int, int, float]]:
        pairs, cosines = arrays[f"{name}_pairs"], arrays[f"{name}_cosines"]
        if pairs.shape != (len(cosines), 2) or (len(pairs) and (int(pairs.min()) < 0 or int(pairs.max()) >= bound)):
            raise ValueError(f"saved {name} pairs out of range")
        return [(a, b, c) for (a, b), c in zip(pairs.tolist(), cosines.tolist())]

    semantic_edges = triples("semantic", n)
    similar: list[dict[int, float]] = [{} for _ in range(n)]
    for i, j, cosine in semantic_edges:
        similar[i][j] = similar[j][i] = cosine
    graph = Graph(paths=paths, languages=[lang for _, _, lang in nodes], file_ids=[f for f, _, _ in nodes],
                  definitions=NodeDefinitions(resolution.facts.frozen(), paths),
                  edges=EdgeTable.from_arrays(paths, arrays, "edges_"), semantic=semantic_edges,
                  surprises=triples("surprises", n), community=community, community_names=names, similar=similar,
                  degree=degree, gods=set(analysis.god_nodes(degree)), name_parts=name_parts, propagation=propagation)
    lane = None
    if "candidates_pairs" in arrays:
        pairs = semantic.LanePairs.from_arrays(arrays, "lane_") if "lane_ids" in arrays else None
        lane = (triples("candidates", 2**62), triples("close", 2**62), pairs)
    return resolution, graph, lane


def settled_graph(ws: WorkspaceContext) -> Graph | None:
    """The graph held for `ws` once no build or load of it is under way in this process (waiting for one that
    is), or None where there is none. For a build that uses the graph off the query path (the summary lane's):
    started before the graph is loaded, it would otherwise build without it, where a restarted editor's saved
    graph, and what was saved with it, was seconds away."""
    with _locks_guard:
        running = _building.get(ws)
    if running is not None and running is not threading.current_thread():
        running.join()
    with _lock(ws):  # a build on another path (an editor's refresh) holds it until its graph is held
        cached = _graphs.get(ws)
    return cached[1] if cached is not None else None


def saved_graph_current(ws: WorkspaceContext) -> bool:
    """Whether the graph saved beside the index is the one of its current state (only the file's stamp is
    read): a process opening the index then loads it rather than building it."""
    return ws.store.get_meta(_STATE_KEY) == _state(ws) and saved_stamp(graph_file(ws)) == current_graph_stamp(ws)


def current_graph_stamp(ws: WorkspaceContext) -> str:
    """The stamp the graph of the index's current state is saved under (`graph_stamp` of that graph)."""
    return _stamp(ws, _graph_key(ws))


def _build_in_background(ws: WorkspaceContext) -> None:
    """Start building the graph on its own thread (once at a time per workspace)."""
    with _locks_guard:
        running = _building.get(ws)
        if running is not None and running.is_alive():
            return
        # Started a moment later, not at once: the query that asked answers first instead of sharing the
        # interpreter with a build of tens of seconds (a restarted editor's first answer at 40K files).
        thread = threading.Timer(BACKGROUND_START_DELAY_S, _build_quietly, args=(ws,))
        thread.name, thread.daemon = "codeloupe-graph-build", True
        _building[ws] = thread
    thread.start()


def stop_builds(ws: WorkspaceContext) -> None:
    """For `ws` closing, its `closed` set (every build's `should_stop`, `load_graph`): a background build about to
    start is cancelled, and the builds under way, that one and a query's own on its request thread, waited for
    until they stopped (their facts workers killed, none of the facts kept), for `BACKGROUND_STOP_WAIT_S` at most
    in all, so that the index is not closed under them and no pool of theirs outlives the close (a process leaving
    after it, as a language server does by `os._exit`, left that pool's semaphores to the resource tracker)."""
    deadline = time.monotonic() + BACKGROUND_STOP_WAIT_S
    with _locks_guard:
        running = _building.get(ws)
    if running is not None and running is not threading.current_thread():
        running.cancel()
        running.join(max(0.0, deadline - time.monotonic()))
    # Every build holds the graph's lock while it runs (an RLock: a close from inside a build does not wait for it).
    lock = _lock(ws)
    if lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
        lock.release()


def _build_quietly(ws: WorkspaceContext) -> None:
    try:
        ws.searcher().wait_for_first_snapshot()  # the first answer goes first (`Searcher.wait_for_first_snapshot`)
        if not ws.closed:
            # The workspace closing stops it as it stops a refresh (`load_graph`): no facts kept, their workers
            # killed. It went on unasked (minutes of facts at 40K files), its workers on a closed index.
            load_graph(ws)
    except Exception:
        if not ws.closed:
            log.exception("building the graph in the background failed")
        else:  # the workspace closed before or while it ran: nothing is waiting for it
            log.debug("graph not built: the workspace closed", exc_info=True)


def _build(ws: WorkspaceContext) -> Graph:
    nodes = edge_store.node_files(ws.store)
    paths = [p for _, p, _ in nodes]
    index = {p: i for i, p in enumerate(paths)}
    id_to_index = {file_id: i for i, (file_id, _, _) in enumerate(nodes)}
    resolution = _resolutions[ws]  # facts as resolved, in memory (`ensure_edges` ran before)
    state = ws.store.get_meta(_STATE_KEY)
    previous = _graphs.get(ws)
    refreshed: list[int] | None = None  # the nodes whose edges were read again, the others' being the last graph's
    if previous is not None and resolution.refreshed is not None and state == resolution.known_state:
        # After a save: the last graph's edges, with those of the files resolved again since read back.
        refreshed = sorted(index[path] for path in resolution.refreshed if path in index)
        stored = edge_store.edges_of(ws.store, sorted(resolution.refreshed & index.keys()))
        edges = previous[1].edges.replaced(paths, resolution.refreshed, (
            (id_to_index[source], kind, index.get(target, -1), raw, symbols, line)
            for source, rows in stored.items() if source in id_to_index
            for kind, target, raw, symbols, line in rows if kind == "external" or target in index))
    else:
        edges = EdgeTable(paths, (
            (id_to_index[source], kind, index.get(target, -1), raw, symbols, line)
            for source, kind, target, raw, symbols, line in edge_store.iter_edges(ws.store)
            if source in id_to_index and (kind == "external" or target in index)))
    resolution.refreshed, resolution.known_state = set(), state
    n = len(paths)
    sources, targets, kinds = edges.pairs()
    ends = np.concatenate([sources, targets]).astype(np.int64)
    others = np.concatenate([targets, sources]).astype(np.int64)
    neighbour_pairs = distinct(ends * (n + 1) + others)
    degree = np.bincount(neighbour_pairs // (n + 1), minlength=n).tolist() if n else []

    candidates, close = _similar_files(ws, nodes)

    def remap(pairs: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
        """File ids -> node indices, smaller index first; pairs with a file re-indexed since are dropped."""
        return sorted((min(id_to_index[a], id_to_index[b]), max(id_to_index[a], id_to_index[b]), c)
                      for a, b, c in pairs if a in id_to_index and b in id_to_index)

    similar_edges = semantic.capped_edges(remap(candidates), degree)
    similar: list[dict[int, float]] = [{} for _ in range(n)]
    for i, j, cosine in similar_edges:
        similar[i][j] = similar[j][i] = cosine

    kinded = _pair_kinds(edges, n)
    last = previous[1] if previous is not None else None
    if last is not None and len(last.paths) == n and last.semantic == similar_edges \
            and np.array_equal(last.weighed_pairs(), kinded):
        # Communities are a function of the node count and these weights alone: a save that left every pair's
        # kinds of edge as they were (an edited body, a comment) keeps them without touching the whole graph.
        community, propagation = last.community, last.propagation
    else:
        weights = _weights(n, kinded, similar_edges)
        replay = None if last is None or last.propagation is None else \
            _replay(last, index, kinded, similar_edges, weights)
        propagation = analysis.propagate(n, weights, replay)
        community = analysis.renumber_by_size(propagation.labels)

    graph = Graph(paths=paths, languages=[lang for _, _, lang in nodes], file_ids=[f for f, _, _ in nodes],
                  definitions=NodeDefinitions(resolution.facts.frozen(), paths), edges=edges,
                  semantic=similar_edges, surprises=[], community=community, community_names=[],
                  similar=similar, degree=degree, gods=set(analysis.god_nodes(degree)), pair_kinds=kinded,
                  propagation=propagation)
    graph.name_parts = _name_parts(graph, last if refreshed is not None else None, refreshed or [])
    graph.community_names = _names(graph.name_parts, [len(graph.members(c)) for c in range(len(graph.name_parts))],
                                   graph.paths)
    graph.surprises = [(i, j, c) for i, j, c in remap(close)
                       if j not in graph.neighbours(i) and community[i] != community[j]]
    return graph


def _pair_kinds(edges: EdgeTable, n: int) -> np.ndarray:
    """Each distinct (source, target, kind) of the structural edges as one ascending integer key."""
    sources, targets, kinds = edges.pairs()
    return distinct((sources.astype(np.int64) * (n + 1) + targets) * len(EDGE_KINDS) + kinds)


def _replay(last: Graph, index: dict[str, int], pair_kinds: np.ndarray, semantic_edges: list[tuple[int, int, float]],
            weights: analysis.Weights) -> analysis.Replay | None:
    """What label propagation over `weights` (this graph's: its nodes' `index`, `pair_kinds` and
    `semantic_edges`) may replay of the last graph's: None when the nodes that stayed changed order.

    A node's votes moved when a pair of files it is in gained or lost a kind of edge or a similarity edge, or
    one of its neighbours did (that neighbour's count of neighbours, which divides its vote, may have moved);
    found by comparing the weighed pairs as keys, not every node's weights."""
    n, last_n, kinds = len(index), len(last.paths), len(EDGE_KINDS)
    renumber = np.fromiter((index.get(path, -1) for path in last.paths), np.int64, last_n)
    kept = renumber[renumber >= 0]
    if np.any(kept[1:] <= kept[:-1]):
        return None
    pairs, kind = np.divmod(last.weighed_pairs(), kinds)
    sources, targets = (renumber[end] for end in np.divmod(pairs, last_n + 1))
    whole = (sources >= 0) & (targets >= 0)
    ends = [sources[~whole], targets[~whole]]  # the pairs with a file gone: their other file
    # both ascending (the nodes kept their order) and distinct: compared by search, not sorted again
    last_kinds = (sources[whole] * (n + 1) + targets[whole]) * kinds + kind[whole]
    changed = np.concatenate([last_kinds[~find_sorted(pair_kinds, last_kinds)[1]],
                              pair_kinds[~find_sorted(last_kinds, pair_kinds)[1]]]) // kinds
    ends += [changed // (n + 1), changed % (n + 1)]
    last_semantic = {(int(renumber[i]), int(renumber[j]), cosine) for i, j, cosine in last.semantic}
    ends.append(np.array([end for i, j, _ in last_semantic.symmetric_difference(semantic_edges) for end in (i, j)],
                         np.int64))
    touched = set(np.concatenate(ends).tolist()) - {-1}
    new = np.ones(n, bool)
    new[kept] = False
    moved = touched | set(np.flatnonzero(new).tolist())
    for node in touched:
        moved.update(weights.around(node))
    return analysis.Replay(last.propagation, renumber, moved)


def _weights(n: int, pair_kinds: np.ndarray, semantic_edges: list[tuple[int, int, float]]) -> analysis.Weights:
    """What label propagation weighs: a pair of files weighs one per kind of edge between them, each way, plus
    half the cosine of a similarity edge."""
    first, second = np.divmod(pair_kinds // len(EDGE_KINDS), n + 1)
    similar = np.array(semantic_edges, np.float64).reshape(-1, 3)
    return analysis.Weights.of_pairs(n, np.concatenate([first, similar[:, 0].astype(np.int64)]),
                                     np.concatenate([second, similar[:, 1].astype(np.int64)]),
                                     np.concatenate([np.ones(len(first)), 0.5 * similar[:, 2]]))


def _similar_files(ws: WorkspaceContext, nodes: list[tuple[int, str, str]]
                   ) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float]]]:
    """The semantic lane's (candidate, close) pairs as file ids, computed once per vector generation.

    A save changes no vector (the saved file's skeleton vector goes with its old row and comes back when it is
    embedded again, which moves the generation), so the product is paid after embedding, in the background,
    never on a save; and once this process has the lane's pairs, only the rows of new or changed vectors are
    multiplied (`semantic.lane_pairs`), not the quadratic product again.
    """
    generation = ws.store.generation("vector")
    cached = _similar.get(ws)
    if cached is not None and cached[0] == generation:
        return cached[1]
    definitions_per_file = ws.store.definition_counts()
    lane = {file_id for file_id, _, language in nodes
            if semantic.joins_semantic_lane(language, definitions_per_file.get(file_id, 0))}
    model = edge_store.skeleton_model(ws.store) or ""
    file_ids, vectors = edge_store.skeleton_matrix(ws.store, lane.__contains__)
    # the last generation's pairs (a graph saved by an older version has none: the whole product)
    pairs = semantic.lane_pairs(model, np.array(file_ids, np.int64), vectors,
                                cached[2] if cached is not None else None)
    _similar[ws] = (generation, pairs.chosen(), pairs)
    return _similar[ws][1]


def _name_parts(graph: Graph, last: Graph | None = None, refreshed: list[int] | None = None
                ) -> list[tuple[str, int, str]]:
    """What each community's name is made of: the deepest directory holding its code (tests are left out when
    there is code), its most connected file, and the definition of that file other communities use most.

    With `last`, the graph before a save whose edges differ only in those from the `refreshed` nodes (indices
    of `graph`), a community keeps its last parts when the same files made one community then, none of them
    new, none with another degree and none reached by an edge from a refreshed node then or now: what else a
    name reads (paths, membership, the other edges) is as it was. Files are matched by path: a file created
    or deleted moves every index after it, and the communities, worked out again, mostly hold the same files.
    """
    from codeloupe.file_roles import is_test_path

    count = max(graph.community, default=-1) + 1
    parts = [None] * count if last is None or last.name_parts is None else \
        _kept_parts(graph, last, last.name_parts, refreshed or [])
    table = graph.edges  # read as columns: no `Edge` is made
    carriers, symbols = table.carriers, table.symbols.tolist()
    for c in range(count):
        if parts[c] is not None:
            continue
        members = graph.members(c)
        code = [m for m in members if not is_test_path(graph.paths[m])] or members
        central = min(code, key=lambda m: (-graph.degree[m], graph.paths[m]))
        # The dominant symbol: the definition of the central file that other communities use most.
        usage: Counter[str] = Counter()
        for source, rows in table.neighbour_rows(central, incoming=True).items():
            if graph.community[source] != c:
                usage.update(symbol for row in rows for symbol in carriers[symbols[row]])
        top = min(usage, key=lambda s: (-usage[s], s)) if usage else ""
        parts[c] = (analysis.common_directory([graph.paths[m] for m in code]), central, top)
    return [part for part in parts if part is not None]


def _kept_parts(graph: Graph, last: Graph, last_parts: list[tuple[str, int, str]], refreshed: list[int]
                ) -> list[tuple[str, int, str] | None]:
    """Each community's name parts from `last_parts` (`last`'s) where a save left what they read as it was (see
    `_name_parts`), its central file's index now `graph`'s; None for the others."""
    if last.paths == graph.paths:  # an edit: no file came or went
        before: list[int | None] = list(range(len(graph.paths)))
        touched = set(np.flatnonzero(np.array(last.degree) != np.array(graph.degree)).tolist())
    else:  # each node's index in `last`, None for a new file
        before = [last.index_of(path) for path in graph.paths]
        touched = {i for i, (b, degree) in enumerate(zip(before, graph.degree))
                   if b is None or last.degree[b] != degree}
    for node in refreshed:
        touched.update(graph.edges.neighbour_rows(node, incoming=False))
        then = before[node]
        if then is not None:
            reached = (graph.index_of(last.paths[k]) for k in last.edges.neighbour_rows(then, incoming=False))
            touched.update(j for j in reached if j is not None)
    parts: list[tuple[str, int, str] | None] = []
    for c in range(max(graph.community, default=-1) + 1):
        members = graph.members(c)
        was = {last.community[b] for m in members if (b := before[m]) is not None}
        old = was.pop() if len(was) == 1 else None
        if old is None or touched.intersection(members) or len(last.members(old)) != len(members):
            parts.append(None)  # not the same files as one community then, or a save reached one of them
            continue
        directory, central, top = last_parts[old]
        parts.append((directory, graph.index_of(last.paths[central]), top))
    return parts


def _names(parts: list[tuple[str, int, str]], sizes: list[int], paths: list[str]) -> list[str]:
    """A readable, unique name per community from its parts (`_name_parts`) and its number of members: its own
    directory when no other community shares it, else its central file and dominant symbol."""
    shared = Counter(directory for directory, _, _ in parts)
    names: list[str] = []
    used: Counter[str] = Counter()
    for (directory, central, top), size in zip(parts, sizes, strict=True):
        name = analysis.community_name(directory if shared[directory] == 1 else "", paths[central], top) \
            if size > 1 else paths[central]
        used[name] += 1
        names.append(name if used[name] == 1 else f"{name} ({used[name]})")
    return names
