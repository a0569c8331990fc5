"""Hybrid retrieval: lanes ranked over one chunk table, fused by rank, rolled up to files, bundled.

No model call anywhere: the dense lane is a matrix product against vectors computed at index time, BM25 is a
sparse column slice, the symbol lane is a dictionary lookup. The in-memory snapshot is rebuilt only when the
store's generation counters move (a re-index, new vectors), so a warm query touches no SQL.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from codeloupe import ranking as R
from codeloupe.bundle import build_bundle
from codeloupe.chunk import is_doc_language
from codeloupe.issue import IssueQuery, Variant, is_issue, parse_issue, resolve_suffix
from codeloupe.lanes.dense import DenseSnapshot, load_dense
from codeloupe.lanes.entity import build_entity_index
from codeloupe.lanes.lexical import BM25Index, StackedBM25
from codeloupe.lanes.summary import build_summary_index
from codeloupe.lanes.symbols import StackedSymbols, SymbolIndex
from codeloupe.lanes.tokens import (
    STOP_WORDS,
    identifiers,
    looks_like_identifier,
    path_tokens,
    stem,
    term_set,
    tokenize,
)
from codeloupe.snapshot_file import load_snapshot_inputs, save_snapshot_inputs, snapshot_file
from codeloupe.store import ChunkTable, FileRow
from codeloupe.types import Bundle, LaneStatus

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext
    from codeloupe.graph.build import Graph

log = logging.getLogger("codeloupe.search")

LANES = ("dense", "lexical", "file", "summary", "symbol", "entity", "feedback")
MODES = ("code", "docs", "both")

_TEST_PATH = re.compile(
    r"(^|/)(tests?|specs?|__tests__|testing|fixtures?|testdata|e2e)(/|$)|(^|/)test_[^/]*$|_test\.[a-z]+$"
    r"|\.(test|spec)\.[a-z]+$|_spec\.rb$|(^|/)conftest\.py$"
)


_EXAMPLE_PATH = re.compile(r"(^|/)(examples?|docs?|docs_src|demos?|samples?|tutorials?)/")
_DECLARATION_PATH = re.compile(r"\.d\.[cm]?ts$|\.pyi$")
_DATA_LANGUAGES = frozenset({"po", "csv", "tsv", "xml", "svg"})
_CONFIG_LANGUAGES = frozenset({"toml", "ini", "yaml", "gomod", "requirements"})
_MANIFESTS = frozenset({"package.json", "setup.py", "setup.cfg", "composer.json", "pom.xml", "build.gradle",
                        "build.gradle.kts", "gemfile", "makefile", "tsconfig.json", "deno.json"})
# What a file is: "" is the implementation itself; tests, examples, declarations and data take the soft
# penalties of ranking.FILE_KIND_PENALTY; "project" files (manifests, configuration) answer questions about
# versions, dependencies, flags and settings beside the docs (the project lane).
FILE_KINDS = ("", "test", "example", "declaration", "data", "project")
# A question about the project rather than its code: what it depends on, supports, or lets a user set.
_PROJECT_QUESTION = re.compile(
    r"\b(versions?|depend\w*|requirements?|install\w*|flags?|settings?|config\w*|features?|support\w*|"
    r"compatib\w*|environment variables?|env vars?|licen[cs]e\w*|plugins?|extras?)\b", re.I)


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path.lower()))


def file_kind(path: str, language: str) -> str:
    """Tests, example and documentation code, type declarations and data catalogs (gettext, CSV, SVG) answer
    a question about them; they describe or exercise an implementation that should outrank them otherwise."""
    if is_doc_language(language):
        return ""  # prose has its own mode; a page under docs/ is what a docs question wants
    lowered = path.lower()
    if is_test_path(lowered):
        return "test"
    if _DECLARATION_PATH.search(lowered):
        return "declaration"
    if language in _DATA_LANGUAGES:
        return "data"
    if _EXAMPLE_PATH.search(lowered):
        return "example"
    if language in _CONFIG_LANGUAGES or lowered.rsplit("/", 1)[-1] in _MANIFESTS or lowered.endswith(".gemspec"):
        return "project"
    return ""


@dataclass
class FileSummaries:
    """The summary lane's index (`lanes.summary`), rows in `Snapshot.file_index` order, as of one graph."""

    graph: weakref.ref | None  # the graph whose neighbour words it holds (None: there was no graph yet)
    index: BM25Index
    ready: bool = True  # False: an empty stand-in while the first one is built off the query path

    def built_from(self, graph: Graph | None) -> bool:
        return (self.graph() if self.graph is not None else None) is graph


@dataclass
class Snapshot:
    """Everything a query needs, in memory, as of one content generation."""

    generation: int
    table: ChunkTable
    file_paths: dict[int, str]
    file_languages: dict[int, str]
    file_is_doc: dict[int, bool]
    chunk_paths: list[str]
    chunk_is_doc: np.ndarray  # bool [n]
    chunk_kind: np.ndarray  # int8 [n]: index into FILE_KINDS
    file_kind: dict[int, int]  # file id -> index into FILE_KINDS
    by_basename: dict[str, list[str]]
    path_to_file: dict[str, int]
    bm25: BM25Index | StackedBM25
    symbols: SymbolIndex | StackedSymbols
    file_chunk_rows: dict[int, list[int]]
    # A delta view (files changed since the full snapshot was built, searched beside it): the full snapshot it
    # stands on, which rows of it are still current, and how many changed files it could not take in.
    base: Snapshot | None = None
    live: np.ndarray | None = None
    pending_files: int = 0
    index_id: str = ""  # the index file it was built from: ids of a rebuilt index mean other files
    _entity: tuple[np.ndarray, BM25Index] | None = None
    _entity_lock: threading.Lock = field(default_factory=threading.Lock)
    _files: tuple[np.ndarray, BM25Index] | None = None
    _term_sets: dict[int, set[str]] = field(default_factory=dict)
    _summaries: FileSummaries | None = None
    _summaries_pending: FileSummaries | None = None  # an empty one, while the first is built off the query path
    _summaries_building: bool = False

    def entity_index(self, ws: WorkspaceContext) -> tuple[np.ndarray, BM25Index]:
        """The entity lane's index (built on the first issue-mode query)."""
        with self._entity_lock:
            if self._entity is None:
                self._entity = build_entity_index(self.file_paths, ws.store.definition_words())
            return self._entity

    def terms_of(self, rows: list[int]) -> list[set[str]]:
        """Each chunk's distinct terms, kept for the next question: the chunks feedback reads are the best ones,
        and a session's questions keep landing on the same few (tokenising a long chunk is most of a question).
        The texts not kept are read from the store in one query."""
        missing = [row for row in rows if row not in self._term_sets]
        if missing:
            if len(self._term_sets) + len(missing) > R.TERM_SETS_KEPT:
                self._term_sets.clear()
            for row, text in zip(missing, self.table.texts.many(missing)):
                self._term_sets[row] = term_set(text)
        return [self._term_sets[row] for row in rows]

    def file_texts(self) -> Iterator[tuple[int, str]]:
        """(file id, the file's indexed text: its chunks joined) for every file, read from the store in
        batches of files (whole-workspace passes: entry points, the tour)."""
        batch: list[tuple[int, list[int]]] = []
        for item in (*self.file_chunk_rows.items(), None):
            if item is not None:
                batch.append((item[0], list(item[1])))
            if batch and (item is None or sum(len(rows) for _, rows in batch) >= 2000):
                texts = iter(self.table.texts.many(row for _, rows in batch for row in rows))
                for file_id, rows in batch:
                    yield file_id, "".join(next(texts) for _ in rows)
                batch = []

    def file_index(self) -> tuple[np.ndarray, BM25Index]:
        """(file id of each document, BM25 with one document per file: the sum of its chunks' terms).

        Built on the first query that uses the file lane, from the chunk index's counts; a delta view uses its
        base's (a changed file is then found by its chunks until the rebuild).
        """
        if self.base is not None:
            return self.base.file_index()
        with self._entity_lock:
            if self._files is None:
                assert isinstance(self.bm25, BM25Index)
                file_ids, groups = np.unique(self.table.file_ids, return_inverse=True)
                self._files = file_ids, BM25Index.grouped(self.bm25, groups.astype(np.int64), len(file_ids))
            return self._files

    def summaries(self, ws: WorkspaceContext) -> FileSummaries:
        """The summary lane's index, built on the first query that uses it and again once a newer graph is
        built; a delta view uses its base's. Past `QUERY_BUILD_MAX_FILES` files (tokenising every skeleton
        takes seconds at 40K files) it is built on its own thread, and queries meanwhile use the last one
        built, or none."""
        from codeloupe.graph.build import QUERY_BUILD_MAX_FILES, load_graph

        if self.base is not None:
            return self.base.summaries(ws)
        loaded = load_graph(ws, allow_stale=True)
        graph = loaded if loaded.paths else None
        current = self._summaries
        if current is not None and current.built_from(graph):
            return current
        if len(self.file_paths) <= QUERY_BUILD_MAX_FILES:
            return self._build_summaries(ws, graph)
        with self._entity_lock:
            start, self._summaries_building = not self._summaries_building, True
        if start:
            threading.Thread(target=self._build_summaries_quietly, args=(ws, graph), daemon=True,
                             name="codeloupe-file-summaries").start()
        if current is None:
            file_ids, _ = self.file_index()
            current = self._summaries_pending = self._summaries_pending or FileSummaries(
                None, build_summary_index(file_ids, {}, {}), ready=False)
        return current

    def _build_summaries(self, ws: WorkspaceContext, graph: Graph | None) -> FileSummaries:
        from codeloupe.graph.evidence import neighbour_words

        file_ids, _ = self.file_index()
        words = {} if graph is None else {
            self.path_to_file[p]: w for p, w in neighbour_words(graph).items() if p in self.path_to_file}
        summaries = FileSummaries(None if graph is None else weakref.ref(graph),
                                  build_summary_index(file_ids, ws.store.skeletons(), words))
        self._summaries = summaries
        return summaries

    def _build_summaries_quietly(self, ws: WorkspaceContext, graph: Graph | None) -> None:
        try:
            self._build_summaries(ws, graph)
        except Exception:  # a closed store: the next query starts another build
            log.exception("building the file summaries failed")
        finally:
            with self._entity_lock:
                self._summaries_building = False


class Fusion:
    """Reciprocal rank fusion at two grains.

    Files are fused from each lane's *file* ranking (a file's rank in a lane is the rank of its best chunk
    there), so a file whose best dense chunk and best BM25 chunk differ still collects both lanes' votes;
    fusing chunks first and rolling up would hand the win to a big file whose one long chunk is second
    everywhere. Chunks are fused too, to choose and order what a file shows.
    """

    def __init__(self, chunk_file_ids: np.ndarray) -> None:
        self._chunk_file_ids = chunk_file_ids
        self.chunk = np.zeros(len(chunk_file_ids), np.float32)
        self.file: dict[int, float] = defaultdict(float)
        self.chunk_ranks: dict[str, dict[int, int]] = defaultdict(dict)  # lane -> chunk row -> rank
        self.file_ranks: dict[str, dict[int, int]] = defaultdict(dict)  # lane -> file id -> rank
        self.pins: dict[int, list[str]] = defaultdict(list)  # file id -> what pinned it (issue mode)
        self.frame_rows: list[int] = []  # chunks a traceback frame's line falls in (issue mode)
        self._norm = 0.0

    def add_lane(self, name: str, rows: list[int], weight: float, *, record: bool) -> None:
        if not rows or weight <= 0:
            return
        files: list[int] = []
        seen: set[int] = set()
        for rank, row in enumerate(rows, 1):
            self.chunk[row] += weight / (R.RRF_K + rank)
            if record:
                self.chunk_ranks[name].setdefault(row, rank)
            file_id = int(self._chunk_file_ids[row])
            if file_id not in seen:
                seen.add(file_id)
                files.append(file_id)
        self.add_file_lane(name, files, weight, record=record)

    def add_file_lane(self, name: str, file_ids: list[int], weight: float, *, record: bool = True) -> None:
        if not file_ids or weight <= 0:
            return
        for rank, file_id in enumerate(file_ids, 1):
            self.file[file_id] += weight / (R.RRF_K + rank)
            if record:
                self.file_ranks[name].setdefault(file_id, rank)
        self._norm += weight / (R.RRF_K + 1)

    def add_candidates(self, name: str, file_ids: list[int]) -> None:
        """Files a lane proposes without a vote: they join the bundle (see bundle.py) but score nothing."""
        for rank, file_id in enumerate(file_ids, 1):
            self.file_ranks[name].setdefault(file_id, rank)

    def normalise(self) -> None:
        """Scale so a file ranked first by every lane scores 1.0 (bonuses are set on that scale)."""
        if self._norm > 0:
            self.chunk /= self._norm
            for file_id in self.file:
                self.file[file_id] /= self._norm


class Searcher:
    def __init__(self, ws: WorkspaceContext) -> None:
        self.ws = ws
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._dense: DenseSnapshot | None = None
        self._dense_error = ""
        self._dense_loading = False
        self._view: Snapshot | None = None  # what queries search: the full snapshot or a delta view over it
        self._rebuilding = False

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> Snapshot:
        """What a query searches: the full snapshot, or a delta view over it while a rebuild is pending.

        A full rebuild re-tokenises every chunk (seconds on a large tree), so after a change the changed files
        are searched beside the last full snapshot at once, and the full snapshot is rebuilt in the background
        once the index has been quiet for a moment.
        """
        generation = self.ws.store.generation("content")
        view = self._view
        if view is not None and view.generation == generation:
            return view
        with self._lock:
            view = self._view
            if view is not None and view.generation == generation:
                return view
            base = self._snapshot
            # A delta view matches rows by file id, and a rebuilt (damaged, moved aside) index numbers its files
            # anew: a snapshot of another index file is replaced, never patched.
            if base is None or base.index_id != self.ws.store.index_id:
                self._snapshot = self._view = self._build_snapshot(generation)
                self._dense = None
                return self._view
            self._view = self._delta_view(base, generation)
            view = self._view
        self._rebuild_in_background()
        return view

    def refresh(self) -> None:
        """Rebuild the full snapshot now (whoever writes the index calls this so no query has to)."""
        generation = self.ws.store.generation("content")
        with self._lock:
            current = self._snapshot
            if current is None:
                # No snapshot yet, so no query has anything to search meanwhile: build under the lock, and a
                # query arriving now (the editor's first search at start-up) waits for this build instead of
                # starting a second one beside it on the same cores.
                self._snapshot = self._view = self._build_snapshot(generation)
                self._dense = None
                return
        if current.generation == generation and current.index_id == self.ws.store.index_id:
            return
        fresh = self._build_snapshot(generation)
        dense = None
        if self._dense is not None:  # vectors were in use: load them for the new rows before swapping
            dense = load_dense(self.ws.store, fresh.table, fresh.generation, self._dense.model,
                               self.ws.store.generation("vector"))
        with self._lock:
            if self._snapshot is None or self._snapshot.generation < generation:
                self._snapshot = fresh
                self._dense = dense
                if self._view is None or self._view.generation <= generation:
                    self._view = fresh

    def _rebuild_in_background(self) -> None:
        with self._lock:
            if self._rebuilding:
                return
            self._rebuilding = True

        def rebuild() -> None:
            try:
                while True:
                    seen = self.ws.store.generation("content")
                    view = self._view
                    # A few changed files are cheap to search beside the snapshot, so an editing session
                    # (saves every few seconds) is not taxed by rebuilds; files left out of the view are not.
                    quiet = R.REBUILD_QUIET_S if view is None or not view.pending_files else R.PENDING_QUIET_S
                    time.sleep(quiet)
                    if self.ws.store.generation("content") != seen:
                        continue  # still changing: wait for a quiet moment
                    self.refresh()
                    if self.ws.store.generation("content") == seen:
                        return
            except Exception:  # a closed store, a failed read: the next change schedules another try
                log.exception("rebuilding the search snapshot failed")
            finally:
                with self._lock:
                    self._rebuilding = False

        threading.Thread(target=rebuild, name="codeloupe-snapshot-rebuild", daemon=True).start()

    def _build_snapshot(self, generation: int) -> Snapshot:
        """The full snapshot; what it is built from (the chunk table, the file rows, the symbol table) and its
        BM25 matrix (tokenising every chunk) are saved beside the store and reused by the next process that
        opens the same index state (a restarted editor)."""
        store = self.ws.store
        stamp = f"{store.index_id}:{generation}"
        inputs = snapshot_file(store.path)
        loaded = load_snapshot_inputs(inputs, stamp, len(FILE_KINDS), store)
        if loaded is None:
            table = store.chunk_table()
            rows = list(store.file_rows().values())
            symbols, kinds = SymbolIndex(table, store.iter_symbol_rows()), None
        else:
            table, rows, symbols, kinds = loaded
        saved = store.path.with_name(store.path.name + ".bm25.npz")
        bm25 = BM25Index.load(saved, table.ids, stamp)
        if bm25 is None:
            bm25 = BM25Index(_documents(table, rows))
            try:
                bm25.save(saved, table.ids, stamp)
            except OSError as exc:  # a read-only cache dir costs the next start time, nothing else
                log.warning("could not save the lexical index to %s: %s", saved, exc)
        snapshot = _assemble(generation, table, rows, bm25=bm25, symbols=symbols, kinds=kinds)
        snapshot.index_id = store.index_id
        if loaded is None and store.generation("content") == generation:  # nothing was written while we read
            try:
                save_snapshot_inputs(inputs, stamp, table, rows, symbols, snapshot.file_kind)
            except OSError as exc:
                log.warning("could not save the search snapshot to %s: %s", inputs, exc)
        return snapshot

    def _delta_view(self, base: Snapshot, generation: int) -> Snapshot:
        """`base` with the rows of changed files masked out and their new chunks appended."""
        store = self.ws.store
        rows = list(store.file_rows().values())
        current = {r.id for r in rows}
        live = np.ones(len(base.table.ids), dtype=bool)
        for file_id, chunk_rows in base.file_chunk_rows.items():
            if file_id not in current:
                live[chunk_rows] = False
        added = [r for r in rows if r.id not in base.file_paths]
        pending = 0
        if len(added) > R.DELTA_MAX_FILES:  # a bulk change: wait for the rebuild rather than re-tokenise here
            pending, added = len(added), []
        added_ids = {r.id for r in added}
        kept = [r for r in rows if r.id in base.file_paths or r.id in added_ids]
        extra = store.chunk_table([r.id for r in added])
        table = _concat_tables(base.table, extra)
        extra_bm25 = BM25Index(_documents(extra, added), stats_from=base.bm25, keep_counts=False)
        symbols = StackedSymbols(base.symbols, SymbolIndex(extra, store.symbol_rows([r.id for r in added])), live)
        full_live = np.concatenate([live, np.ones(len(extra.ids), dtype=bool)])
        return _assemble(generation, table, kept, bm25=StackedBM25([base.bm25, extra_bm25]), symbols=symbols,
                         base=base, live=full_live, pending_files=pending)

    def dense(self, snap: Snapshot) -> DenseSnapshot | None:
        """The vectors as of now; None (with `_dense_error` set) when no provider or no vectors."""
        from codeloupe.embed import describe_provider

        _, model = describe_provider(self.ws.settings)
        if not model:
            self._dense_error = "no embedding provider configured"
            return None
        base = snap.base or snap  # a delta view searches the base's vectors (its new rows have none yet)
        generation = self.ws.store.generation("vector")
        cached = self._dense
        if cached is not None and cached.model == model and cached.snapshot_generation == base.generation:
            if cached.generation != generation:
                self._reload_dense_in_background(base, model, generation)
            return cached
        with self._lock:
            if base is not self._snapshot:  # a view over a snapshot just replaced: its rows are not ours
                self._dense_error = "vectors are being reloaded"
                return None
            self._dense = load_dense(self.ws.store, base.table, base.generation, model, generation)
            return self._dense

    def _reload_dense_in_background(self, snap: Snapshot, model: str, generation: int) -> None:
        """New vectors arrived (background embedding): load them off the query path, then swap.

        Queries keep using the vectors they have meanwhile, so a search during embedding never pays for
        reading the whole matrix again.
        """
        with self._lock:
            if self._dense_loading:
                return
            self._dense_loading = True

        def load() -> None:
            try:
                fresh = load_dense(self.ws.store, snap.table, snap.generation, model, generation)
                with self._lock:
                    if self._snapshot is snap:
                        self._dense = fresh
            except Exception:  # the next query retries; a failed reload must not kill the searcher
                log.exception("reloading vectors failed")
            finally:
                with self._lock:
                    self._dense_loading = False

        threading.Thread(target=load, name="codeloupe-dense-reload", daemon=True).start()

    # ------------------------------------------------------------------ query

    def search(self, query: str, *, scope: str = "", mode: str = "code", limit: int = R.CANDIDATE_FILES,
               lanes: tuple[str, ...] | None = None) -> Bundle:
        started = time.perf_counter()
        timing: dict[str, float] = {}
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        query = query.strip()
        snap = self.snapshot()
        timing["snapshot"] = _ms(started)
        mask = self._mask(snap, scope, mode)
        issue = parse_issue(query, R.FULL_TEXT_VARIANT_WEIGHT) if is_issue(query) else None
        weights = dict(R.LANE_WEIGHTS_ISSUE if issue else _weights_for(query))
        if lanes is not None:
            weights = {name: (w if name in lanes else 0.0) for name, w in weights.items()}
            if not any(weights.values()):
                weights = {name: (1.0 if name in lanes else 0.0) for name in weights}

        statuses: list[LaneStatus] = []
        dense = self._dense_lane(snap, statuses) if weights.get("dense") else None
        variants = issue.variants if issue else [Variant("query", query)]
        # The model is the costly part of a report: only the variants that earn their time are embedded, in
        # one batch; every variant still goes through the lexical lanes.
        # A report on one line is its own title (parse_issue keeps no title variant then): its text is embedded,
        # or a long one-line question read as a report would get no dense lane at all.
        embedded = [v for v in variants if v.name in R.DENSE_VARIANTS] or variants[:1]
        vectors = self._embed_queries([v.text for v in embedded]) if dense is not None and embedded else None
        query_vectors = {} if vectors is None else {v.name: vectors[i] for i, v in enumerate(embedded)}
        timing["embed"] = _ms(started) - sum(timing.values())

        summaries = snap.summaries(self.ws) if weights.get("summary") else None

        fusion = Fusion(snap.table.file_ids)
        for vi, variant in enumerate(variants):
            terms = tokenize(variant.text)
            per_lane = self._lane_scores(snap, variant.text, terms, dense, query_vectors.get(variant.name), weights)
            for name, scores in per_lane.items():
                ranks = _rank(scores, mask, R.LANE_DEPTH, positive_only=name != "dense")
                fusion.add_lane(name, ranks, weights.get(name, 0.0) * variant.weight, record=vi == 0)
            if weights.get("file"):
                fusion.add_file_lane("file", _file_ranking(snap, snap.file_index()[1], terms, mask),
                                     weights["file"] * variant.weight, record=vi == 0)
            if summaries is not None:
                fusion.add_file_lane("summary", _file_ranking(snap, summaries.index, terms, mask),
                                     weights["summary"] * variant.weight, record=vi == 0)
        if weights.get("entity") and issue:
            self._entity_lane(snap, query, weights["entity"], mask, fusion)
        if weights.get("feedback"):
            self._feedback_lane(snap, tokenize(query), weights["feedback"], mask, fusion)
        if issue is None and lanes is None and mode == "code" and _PROJECT_QUESTION.search(query):
            mask = self._project_lane(snap, query, scope, mask, fusion)
        fusion.normalise()
        timing["lanes"] = _ms(started) - sum(timing.values())

        if issue:
            self._ground_issue(snap, issue, fusion, mask)
        self._adjust(snap, query, fusion, issue is not None)

        statuses.extend(self._static_statuses(snap, weights, issue is not None, summaries))
        bundle = build_bundle(self.ws, snap, query=query, fusion=fusion, mask=mask, limit=limit, mode=mode,
                              scope=scope, issue_mode=issue is not None, lanes=statuses)
        timing["bundle"] = _ms(started) - sum(timing.values())
        timing["total"] = _ms(started)
        bundle.timing_ms = {k: round(v, 3) for k, v in timing.items()}
        return bundle

    def _mask(self, snap: Snapshot, scope: str, mode: str) -> np.ndarray:
        if mode == "code":
            mask = ~snap.chunk_is_doc
        elif mode == "docs":
            mask = snap.chunk_is_doc.copy()
        else:
            mask = np.ones(len(snap.table.ids), dtype=bool)
        if snap.live is not None:
            mask &= snap.live
        scope = scope.strip().strip("/")
        if scope and scope != ".":
            prefix = scope + "/"
            mask &= np.array([p == scope or p.startswith(prefix) for p in snap.chunk_paths], dtype=bool)
        return mask

    def _dense_lane(self, snap: Snapshot, statuses: list[LaneStatus]) -> DenseSnapshot | None:
        from codeloupe.embed import describe_provider

        try:
            dense = self.dense(snap)
        except Exception as exc:  # a provider that cannot load must not take search down with it
            log.warning("dense lane unavailable: %s", exc)
            self._dense_error = str(exc)
            dense = None
        if dense is None or len(dense.chunk_rows) == 0:
            note = self._dense_error if dense is None else "vectors are still being computed"
            off = dense is None and not describe_provider(self.ws.settings)[1]
            statuses.append(LaneStatus("dense", False, 0.0 if dense is None else dense.coverage, note, off=off))
            return None
        note = "" if dense.coverage >= 1.0 else f"{dense.coverage:.0%} of chunks embedded so far"
        statuses.append(LaneStatus("dense", True, dense.coverage, note))
        return dense

    def _embed_queries(self, texts: list[str]) -> np.ndarray | None:
        try:
            provider = self.ws.embedding_provider()
            if len(texts) == 1:
                return provider.embed_query(texts[0])[None, :]
            # An issue's variants go through the model as one batch: one call, windows packed by length.
            return provider.embed(texts)
        except Exception as exc:  # unreachable endpoint, missing model: lexical lanes still answer
            log.warning("query embedding failed, searching without the dense lane: %s", exc)
            self._dense_error = str(exc)
            return None

    def _lane_scores(self, snap: Snapshot, text: str, terms: list[str], dense: DenseSnapshot | None,
                     qvec: np.ndarray | None, weights: dict[str, float]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        n = len(snap.table.ids)
        if weights.get("lexical"):
            out["lexical"] = snap.bm25.scores(terms)
        if weights.get("symbol"):
            out["symbol"] = snap.symbols.scores(text)
        if weights.get("dense") and dense is not None and qvec is not None:
            out["dense"] = dense.scores(qvec, n)
        return out

    def _project_lane(self, snap: Snapshot, query: str, scope: str, mask: np.ndarray,
                      fusion: Fusion) -> np.ndarray:
        """Docs, manifests and configuration ranked by BM25 among themselves, for a question about versions,
        dependencies, flags or settings: code mode leaves docs out and code outnumbers manifests, so neither
        ever reached the bundle. They join it as candidates without a vote (a vote of 0.1 cost dev R@1 .004);
        returns the mask widened to them, so the bundle can show them.
        """
        project = (snap.chunk_is_doc | (snap.chunk_kind == FILE_KINDS.index("project"))) & \
            self._mask(snap, scope, "both")
        files = list(dict.fromkeys(int(snap.table.file_ids[r]) for r in
                                   _rank(snap.bm25.scores(tokenize(query)), project, R.LANE_DEPTH)))
        fusion.add_candidates("project", files[: R.PROJECT_FILES])
        return mask | (project & np.isin(snap.table.file_ids, files[: R.PROJECT_FILES]))

    def _feedback_lane(self, snap: Snapshot, terms: list[str], weight: float, mask: np.ndarray,
                       fusion: Fusion) -> None:
        """Pseudo-relevance feedback: BM25 again with the question's terms plus the rarest identifier and doc
        words of the chunks every lane agreed on so far, for a question whose words are not the code's."""
        top = _rank(fusion.chunk, mask, R.FEEDBACK_CHUNKS)
        if not top:
            return
        asked = set(terms)
        counts = Counter(chain.from_iterable(snap.terms_of(top)))
        shared = [t for t, n in counts.items() if n >= min(2, len(top)) and t not in asked]
        expansion = snap.bm25.rarest(shared, R.FEEDBACK_TERMS)
        fusion.add_lane("feedback", _rank(snap.bm25.scores(terms + expansion), mask, R.LANE_DEPTH), weight,
                        record=True)

    def _entity_lane(self, snap: Snapshot, query: str, weight: float, mask: np.ndarray, fusion: Fusion) -> None:
        file_ids, index = snap.entity_index(self.ws)
        allowed = np.isin(file_ids, snap.table.file_ids[mask])
        fusion.add_file_lane("entity", file_ids[_rank(index.scores(tokenize(query)), allowed, R.LANE_DEPTH)].tolist(),
                             weight)

    def _ground_issue(self, snap: Snapshot, issue: IssueQuery, fusion: Fusion, mask: np.ndarray) -> None:
        """Frames > explicit paths > backticked identifiers pin files; the frame's function gets its own bonus."""
        pinned: dict[int, float] = {}
        depth = 0  # workspace files in the order the frames reach them, innermost first
        for frame in issue.frames:
            path = resolve_suffix(frame.path, snap.by_basename)
            if path is None:
                continue
            file_id = snap.path_to_file[path]
            if file_id not in pinned:
                pinned[file_id] = R.FRAME_BONUS * R.FRAME_DEPTH_DECAY ** depth
                depth += 1
            fusion.pins[file_id].append(f"traceback frame {frame.path}:{frame.line}")
            row = snap.symbols.chunk_at(file_id, frame.line) if frame.line else None
            if row is not None and mask[row]:
                fusion.chunk[row] += R.FRAME_FUNCTION_BONUS
                fusion.frame_rows.append(row)
        for mention in issue.paths:
            path = resolve_suffix(mention, snap.by_basename)
            if path is not None:
                file_id = snap.path_to_file[path]
                pinned[file_id] = max(pinned.get(file_id, 0.0), R.PATH_MENTION_BONUS)
                fusion.pins[file_id].append(f"path {mention} in the text")
        for name in issue.backticked:
            rows = snap.symbols.definitions(name)
            if len({int(snap.table.file_ids[r]) for r in rows}) != 1:
                continue  # defined in several files (or none): the name pins no file in particular
            for row in rows:
                file_id = int(snap.table.file_ids[row])
                pinned[file_id] = max(pinned.get(file_id, 0.0), R.BACKTICK_BONUS)
                fusion.pins[file_id].append(f"`{name}` defined here")
                if mask[row]:
                    fusion.chunk[row] += R.BACKTICK_BONUS
        for file_id, bonus in pinned.items():
            if mask[snap.file_chunk_rows.get(file_id, [])].any():
                fusion.file[file_id] += bonus

    def _adjust(self, snap: Snapshot, query: str, fusion: Fusion, issue: bool) -> None:
        """Soft penalties and capped boosts: tests, examples, declarations and data demoted, a file named by a
        short question's word lifted."""
        penalties = R.FILE_KIND_PENALTY_ISSUE if issue else R.FILE_KIND_PENALTY
        factor = np.array([penalties.get(kind, 1.0) for kind in FILE_KINDS], np.float32)
        fusion.chunk *= factor[snap.chunk_kind]
        for file_id in list(fusion.file):
            fusion.file[file_id] *= float(factor[snap.file_kind.get(file_id, 0)])
        words = [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query) if w.lower() not in STOP_WORDS]
        if issue or not words or len(words) > R.SHORT_QUERY_WORDS:
            return
        wanted = {stem(t) for w in words for t in tokenize(w)}
        for file_id in list(fusion.file):
            path = snap.file_paths.get(file_id, "")
            stems = _name_stems(path.rsplit("/", 1)[-1]) if path else frozenset()
            if stems and stems <= wanted:
                fusion.file[file_id] *= 1.0 + R.FILENAME_BOOST

    def _static_statuses(self, snap: Snapshot, weights: dict[str, float], issue: bool,
                         summaries: FileSummaries | None) -> list[LaneStatus]:
        note = f"{snap.pending_files} changed files join the index shortly" if snap.pending_files else ""
        seen = 1.0 - snap.pending_files / max(len(snap.file_paths) + snap.pending_files, 1)
        out = [LaneStatus("lexical", True, seen, note), LaneStatus("file", True, seen, note),
               LaneStatus("symbol", True, seen, note)]
        if summaries is not None:
            out.append(LaneStatus("summary", summaries.ready, seen if summaries.ready else 0.0,
                                  note if summaries.ready else "file summaries are being built"))
        if issue:
            out.append(LaneStatus("entity", True, 1.0))
        return [s for s in out if weights.get(s.name, 0.0) > 0]


def _file_ranking(snap: Snapshot, index: BM25Index, terms: list[str], mask: np.ndarray) -> list[int]:
    """Files by BM25 over one document per file (`index`, rows in `file_index` order): all of a file's text
    (the file lane: a long report's words spread over a big file's chunks, where no single chunk holds enough
    of them to rank) or its summary (the summary lane)."""
    file_ids, _ = snap.file_index()
    allowed = np.isin(file_ids, snap.table.file_ids[mask])
    return file_ids[_rank(index.scores(terms), allowed, R.LANE_DEPTH)].tolist()


def _weights_for(query: str) -> dict[str, float]:
    words = query.split()
    ids = [w for w in identifiers(query) if looks_like_identifier(w)]
    if ids and (len(words) <= 3 or len(ids) * 3 >= len(words)):
        return R.LANE_WEIGHTS_IDENTIFIER
    return R.LANE_WEIGHTS_NATURAL


def _documents(table: ChunkTable, files: list[FileRow]) -> Iterator[list[str]]:
    """BM25 terms of each chunk: its file's path terms, breadcrumb and text."""
    path_docs = {r.id: path_tokens(r.path) for r in files}
    for f, crumb, text in zip(table.file_ids.tolist(), table.breadcrumbs, table.texts):
        yield path_docs.get(f, []) + tokenize(crumb) + tokenize(text)


def _concat_tables(a: ChunkTable, b: ChunkTable) -> ChunkTable:
    return ChunkTable(
        ids=np.concatenate([a.ids, b.ids]), file_ids=np.concatenate([a.file_ids, b.file_ids]),
        start_lines=np.concatenate([a.start_lines, b.start_lines]),
        end_lines=np.concatenate([a.end_lines, b.end_lines]), kinds=a.kinds + b.kinds, names=a.names + b.names,
        breadcrumbs=a.breadcrumbs + b.breadcrumbs, symbols=a.symbols + b.symbols, texts=a.texts + b.texts,
    )


def _assemble(generation: int, table: ChunkTable, files: list[FileRow], *, bm25: BM25Index | StackedBM25,
              symbols: SymbolIndex | StackedSymbols, base: Snapshot | None = None,
              live: np.ndarray | None = None, pending_files: int = 0, kinds: dict[int, int] | None = None
              ) -> Snapshot:
    """The per-file maps a query needs, over `files` (the files whose rows are live in `table`); `kinds`: the
    files' kinds when known (saved beside the index; computing them runs regexes over every path)."""
    file_paths = {r.id: r.path for r in files}
    by_id = {r.id: r for r in files}
    chunk_file_ids = table.file_ids.tolist()
    chunk_paths = [file_paths.get(f, "") for f in chunk_file_ids]
    file_chunk_rows: dict[int, list[int]] = defaultdict(list)
    for i, f in enumerate(chunk_file_ids):
        if f in by_id:
            file_chunk_rows[f].append(i)
    by_basename: dict[str, list[str]] = defaultdict(list)
    for path in file_paths.values():
        by_basename[path.rsplit("/", 1)[-1]].append(path)
    if kinds is None:
        kinds = {f: FILE_KINDS.index(file_kind(r.path, r.language)) for f, r in by_id.items()}
    if base is not None:  # reuse the per-chunk flags of the rows the base already had
        n = len(base.table.ids)
        is_doc = np.concatenate([base.chunk_is_doc, [by_id[f].is_doc for f in chunk_file_ids[n:]]]).astype(bool)
        chunk_kind = np.concatenate([base.chunk_kind, [kinds[f] for f in chunk_file_ids[n:]]]).astype(np.int8)
    else:
        is_doc = np.array([by_id[f].is_doc if f in by_id else False for f in chunk_file_ids], dtype=bool)
        chunk_kind = np.array([kinds.get(f, 0) for f in chunk_file_ids], dtype=np.int8)
    return Snapshot(
        generation=generation, table=table, file_paths=file_paths,
        file_languages={r.id: r.language for r in files}, file_is_doc={r.id: r.is_doc for r in files},
        chunk_paths=chunk_paths, chunk_is_doc=is_doc, chunk_kind=chunk_kind,
        file_kind=kinds,
        by_basename=dict(by_basename), path_to_file={p: f for f, p in file_paths.items()},
        bm25=bm25, symbols=symbols, file_chunk_rows=dict(file_chunk_rows),
        base=base, live=live, pending_files=pending_files,
    )


@functools.lru_cache(maxsize=65536)
def _name_stems(file_name: str) -> frozenset[str]:
    """Stems of a file name without its extension: a short query naming them lifts the file. Computed for
    the few files a query ranks, not for every file of every snapshot (a second at 40K files)."""
    return frozenset(stem(t) for t in tokenize(file_name.rsplit(".", 1)[0]))


def _rank(scores: np.ndarray, mask: np.ndarray, depth: int, positive_only: bool = True) -> list[int]:
    """Rows under `mask`, best first, at most `depth` (argpartition, no full sort).

    Lexical and symbol scores of zero mean "no match" and never rank; a cosine may be any finite value.
    """
    keep = mask & np.isfinite(scores)
    if positive_only:
        keep &= scores > 0
    valid = np.flatnonzero(keep)
    if len(valid) == 0:
        return []
    vals = scores[valid]
    if len(valid) > depth:
        part = np.argpartition(-vals, depth - 1)[:depth]
        valid, vals = valid[part], vals[part]
    order = np.lexsort((valid, -vals))
    return valid[order].tolist()


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
