"""Hybrid retrieval: lanes ranked over one chunk table, fused by rank, rolled up to files, bundled.

No model call anywhere: the dense lane is a matrix product against vectors computed at index time, BM25 is a
sparse column slice, the symbol lane is a dictionary lookup. The in-memory snapshot is rebuilt only when the
store's generation counters move (a re-index, new vectors), so a warm query touches no SQL.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import threading
import time
import weakref
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import chain, zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from codeloupe import parallel
from codeloupe import ranking as R
from codeloupe.arrays import absent_from, distinct, find_sorted
from codeloupe.bundle import build_bundle
from codeloupe.chunk import is_doc_language
from codeloupe.columns import Joined, Overlay
from codeloupe.discover import MANIFEST_NAMES, IndexStopped
from codeloupe.file_roles import is_test_path as is_test_path
from codeloupe.issue import Frame, IssueQuery, Variant, is_issue, parse_issue, resolve_suffix
from codeloupe.lanes.dense import DenseSnapshot, load_dense
from codeloupe.lanes.entity import build_entity_index
from codeloupe.lanes.indexed_lexical import IndexedBM25, IndexedFileBM25, answer_together
from codeloupe.lanes.lexical import (
    BM25Index,
    KeptCounts,
    StackedBM25,
    TermCounts,
    TermStats,
    count_chunk_terms,
)
from codeloupe.lanes.summary import build_summary_index
from codeloupe.lanes.symbols import StackedSymbols, SymbolIndex, SymbolPart
from codeloupe.lanes.tokens import (
    STOP_WORDS,
    document_terms,
    identifiers,
    looks_like_identifier,
    path_tokens,
    stem,
    term_set,
    tokenize,
)
from codeloupe.lanes.top import top_rows
from codeloupe.memory import after_large_build
from codeloupe.parallel import map_in_workers
from codeloupe.snapshot_file import (
    lexical_file,
    load_snapshot_inputs,
    save_snapshot_inputs,
    saved_snapshot_generation,
    snapshot_file,
)
from codeloupe.source_maps import MAPS_KEPT, SourceMaps
from codeloupe.store import (
    ChunkTable,
    ChunkTexts,
    FileIds,
    FileRow,
    JsonLists,
    read_kept_term_counts,
    read_symbol_part,
)
from codeloupe.store.edges import code_file_count
from codeloupe.store.protocol import FileIdChanges, IndexStore, LexicalStatistics
from codeloupe.types import Bundle, LaneStatus

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext
    from codeloupe.graph.build import Graph
    from codeloupe.index import WrittenFn
    from codeloupe.lanes.indexed_dense import IndexedDense

log = logging.getLogger("codeloupe.search")

LANES = ("dense", "lexical", "file", "summary", "symbol", "entity", "feedback")
MODES = ("code", "docs", "both")

# Benchmarks (Rust's `benches/`, `bench/`, `*.bench.js`) exercise the code as tests do: a question about how
# something works wants the implementation they time (held-out set's pino: `benchmarks/*.bench.js` in 12 top-5s).
# Their kind only, not `is_test_path`: a folder of that name may be the implementation itself (frappe/bench's
# `bench/` package), and a test path is never an entry point nor a tour stop, which left such a project neither.
_BENCHMARK_PATH = re.compile(r"(^|/)(bench|benches|benchmarks?)(/|$)|\.bench\.[a-z]+$")


# `_examples/` too: Go's tools skip a folder whose name starts with `_`, the convention for example programs
# beside a library (go-playground/validator, go-chi/chi).
_EXAMPLE_PATH = re.compile(r"(^|/)_?(examples?|docs?|docs_src|demos?|samples?|tutorials?)/")
# Code files that by convention hold only their package's documentation comment: a Go package's `doc.go` is
# its package clause under a long comment, which names everything the package does and defines nothing.
_DOCUMENTATION_FILES = {"go": frozenset({"doc.go"})}
_DECLARATION_PATH = re.compile(r"\.d\.[cm]?ts$|\.pyi$")
_DATA_LANGUAGES = frozenset({"po", "csv", "tsv", "xml", "svg"})
_CONFIG_LANGUAGES = frozenset({"toml", "ini", "yaml", "gomod", "requirements"})
# What a file is: "" is the implementation itself; tests, examples, declarations and data take the soft
# penalties of ranking.FILE_KIND_PENALTY; "project" files (manifests, configuration) answer questions about
# versions, dependencies, flags and settings beside the docs (the project lane). "record" files (release notes,
# licences, author lists, a package's metadata) are prose that names every feature, option and person of the
# project, so they match any question about one; they answer questions about releases, licences and people.
FILE_KINDS = ("", "test", "example", "declaration", "data", "project", "record")
_RECORD_NAME = re.compile(
    r"^(change[_-]?log|changes|history|news|release[_-]?notes|authors|contributors|credits|thanks|licen[cs]e|"
    r"copying|copyright|notice|pkg-info)([._-][^/]*)?$")
# A question that a record file answers: when something changed, under what terms, by whom.
_RECORD_QUESTION = re.compile(
    r"\b(releases?|released|change ?logs?|history|news|versions?|v?\d+\.\d+|deprecat\w*|licen[cs]\w*|copyright|"
    r"authors?|contributors?|credits?|upgrad\w*|migrat\w*|breaking|what changed|new in)\b", re.I)
# A question about the project rather than its code: what it depends on, supports, or lets a user set.
_PROJECT_QUESTION = re.compile(
    r"\b(versions?|depend\w*|requirements?|install\w*|flags?|settings?|config\w*|features?|support\w*|"
    r"compatib\w*|environment variables?|env vars?|licen[cs]e\w*|plugins?|extras?)\b", re.I)


def file_kind(path: str, language: str) -> str:
    """Tests, example and documentation code, type declarations and data catalogs (gettext, CSV, SVG) answer
    a question about them; they describe or exercise an implementation that should outrank them otherwise.
    Likewise release notes and licences among the prose, for the pages that explain what they list."""
    lowered = path.lower()
    if is_doc_language(language):
        # prose has its own mode; a page under docs/ is what a docs question wants
        return "record" if _RECORD_NAME.match(lowered.rsplit("/", 1)[-1]) else ""
    if is_test_path(lowered) or _BENCHMARK_PATH.search(lowered):
        return "test"
    if _DECLARATION_PATH.search(lowered):
        return "declaration"
    if language in _DATA_LANGUAGES:
        return "data"
    if _EXAMPLE_PATH.search(lowered) or lowered.rsplit("/", 1)[-1] in _DOCUMENTATION_FILES.get(language, ()):
        return "example"
    if language in _CONFIG_LANGUAGES or lowered.rsplit("/", 1)[-1] in MANIFEST_NAMES or lowered.endswith(".gemspec"):
        return "project"
    return ""


@dataclass
class FileSummaries:
    """The summary lane's index (`lanes.summary`), rows in `Snapshot.file_index` order, as of one graph."""

    graph: weakref.ref | None  # the graph whose neighbour words it holds (None: there was no graph yet)
    index: BM25Index | StackedBM25  # stacked: a delta view's (its base's, then its new files')
    ready: bool = True  # False: an empty stand-in while the first one is built off the query path

    def built_from(self, graph: Graph | None) -> bool:
        return (self.graph() if self.graph is not None else None) is graph


@dataclass
class Snapshot:
    """Everything a query needs, in memory, as of one content generation."""

    generation: int
    table: ChunkTable
    # Maps and per-chunk sequences: dicts and lists in a full snapshot, views over them in a delta view.
    file_paths: Mapping[int, str]
    file_languages: Mapping[int, str]
    file_is_doc: Mapping[int, bool]
    chunk_paths: Sequence[str]
    chunk_is_doc: np.ndarray  # bool [n]
    chunk_kind: np.ndarray  # int8 [n]: index into FILE_KINDS
    file_kind: Mapping[int, int]  # file id -> index into FILE_KINDS
    by_basename: Mapping[str, list[str]]
    path_to_file: Mapping[str, int]
    bm25: BM25Index | StackedBM25 | IndexedBM25
    symbols: SymbolIndex | StackedSymbols
    file_chunk_rows: Mapping[int, list[int]]
    # A delta view (files changed since the full snapshot was built, searched beside it): the full snapshot it
    # stands on, which rows of it are still current, and how many changed files it could not take in.
    base: Snapshot | None = None
    live: np.ndarray | None = None
    pending_files: int = 0
    added_paths: Mapping[int, str] = field(default_factory=dict)  # the files indexed since the base (id -> path)
    indexed: FileIds | None = None  # every file id the index held as it was built (a store that can tell)
    index_id: str = ""  # the index file it was built from: ids of a rebuilt index mean other files
    files_saved: Path | None = None  # where the file lane's index is kept between processes (full snapshots)
    summaries_saved: Path | None = None  # the same for the summary lane's
    entities_saved: Path | None = None  # the same for the entity lane's
    # Guards the caches below that are built on first use (entity, file and summary indexes, languages, the
    # path order): a query and a background builder may ask for one at once, and it is built once.
    _cache_lock: threading.Lock = field(default_factory=threading.Lock)
    _entity: tuple[np.ndarray, BM25Index | StackedBM25] | None = None
    _files: tuple[np.ndarray, BM25Index | IndexedFileBM25] | None = None
    _file_order: np.ndarray | None = None
    _by_path: tuple[list[str], np.ndarray] | None = None  # see `files_in_folder`
    _files_in_mode: dict[str, np.ndarray] = field(default_factory=dict)  # see `_files_allowed`
    _term_sets: dict[int, tuple[str, ...]] = field(default_factory=dict)
    _languages: tuple[list[str], np.ndarray] | None = None
    _summaries: FileSummaries | None = None
    _summaries_of: FileSummaries | None = None  # a delta view's: the base's summaries its own stand on
    _summaries_pending: FileSummaries | None = None  # an empty one, while the first is built off the query path
    _summaries_building: bool = False
    _summaries_builder: threading.Timer | None = None  # that build's thread (`stop_summaries_build`)
    _summaries_stopped: bool = False  # its searcher closed: no build starts, one under way stops

    def entity_index(self, ws: WorkspaceContext) -> tuple[np.ndarray, BM25Index | StackedBM25]:
        """The entity lane's index, built on the first issue-mode query; a full snapshot's is kept beside the
        store as the file lane's is (tokenising every file's definitions was a third of a shared repository's
        first answer to a bug report). A delta view's is its base's with its new files' after it, weighed with
        the base's statistics (built anew, it took 7-9 s of the first bug report after every save at 40K
        files); its base's rows of files changed since have no chunk under a query's mask."""
        if self.base is not None:
            base_ids, base_index = self.base.entity_index(ws)
            with self._cache_lock:
                if self._entity is None:
                    assert isinstance(base_index, BM25Index)
                    ids, index = build_entity_index(self.added_paths, ws.store, stats_from=base_index)
                    self._entity = np.concatenate([base_ids, ids]), StackedBM25([base_index, index])
                return self._entity
        with self._cache_lock:
            if self._entity is None:
                file_ids = np.array(sorted(self.file_paths), np.int64)
                stamp = f"{self.index_id}:{self.generation}"
                index = None if self.entities_saved is None else BM25Index.load(self.entities_saved, file_ids, stamp)
                if index is None:
                    file_ids, index = build_entity_index(self.file_paths, ws.store)
                    if ws.store.generation("content") == self.generation:  # the definitions read are the stamp's
                        index = _kept_beside(index, self.entities_saved, file_ids, stamp, "the entity lane's index")
                    after_large_build(len(self.file_paths))  # every file's definition words were read and tokenised
                self._entity = file_ids, index
            return self._entity

    def chunk_languages(self) -> tuple[list[str], np.ndarray]:
        """(the workspace's languages, int16 [n]: each chunk's file's language as an index into them, -1 for a
        row of a file no longer indexed), built on first use (`related`): a language mask is then one array
        comparison rather than a lookup per chunk. A delta view's are its base's, the rows of files changed
        since at -1 and its new rows after them (not a lookup per file of the workspace after every save)."""
        if self.base is not None:
            languages, base_rows = self.base.chunk_languages()
            with self._cache_lock:
                if self._languages is None:
                    n = len(self.base.table.ids)
                    known = list(languages)
                    index = {language: i for i, language in enumerate(known)}
                    added = [index.setdefault(self.file_languages.get(f, ""), len(index))
                             for f in self.table.file_ids[n:].tolist()]
                    known.extend(language for language in index if index[language] >= len(languages))
                    live = self.live[:n] if self.live is not None else np.ones(n, bool)
                    self._languages = known, np.concatenate([np.where(live, base_rows, -1).astype(np.int16),
                                                             np.array(added, np.int16)])
                return self._languages
        with self._cache_lock:
            if self._languages is None:
                languages = sorted(set(self.file_languages.values()))
                index = {language: i for i, language in enumerate(languages)}
                file_ids = np.fromiter(self.file_languages, np.int64, len(self.file_languages))
                of_file = np.fromiter((index[lang] for lang in self.file_languages.values()), np.int16,
                                      len(file_ids))
                # -1 after the files' languages: a row of a file not among them (`_file_rows_of`)
                self._languages = languages, np.append(of_file, np.int16(-1))[_file_rows_of(file_ids,
                                                                                             self.table.file_ids)]
            return self._languages

    def terms_of(self, rows: list[int]) -> list[tuple[str, ...]]:
        """Each chunk's distinct terms, kept for the next question: the chunks feedback reads are the best ones,
        and a session's questions keep landing on the same few (tokenising a long chunk is most of a question).
        The texts not kept are read from the store in one query. Kept as tuples of strings, which the garbage
        collector stops tracking (up to `TERM_SETS_KEPT` sets of hundreds of terms each were walked by every
        full pass)."""
        missing = [row for row in rows if row not in self._term_sets]
        if missing:
            if len(self._term_sets) + len(missing) > R.TERM_SETS_KEPT:
                self._term_sets.clear()
            for row, text in zip(missing, self.table.texts.many(missing)):
                self._term_sets[row] = tuple(term_set(text))
        return [self._term_sets[row] for row in rows]

    def file_texts(self, file_ids: Iterable[int] | None = None) -> Iterator[tuple[int, str]]:
        """(file id, the file's indexed text: its chunks joined) for every file (whole-workspace passes: the
        tour) or for `file_ids` (entry points after a save), read from the store in batches of files."""
        rows_of = self.file_chunk_rows
        items = rows_of.items() if file_ids is None else ((f, rows_of[f]) for f in file_ids)
        batch: list[tuple[int, list[int]]] = []
        for item in (*items, None):
            if item is not None:
                batch.append((item[0], list(item[1])))
            if batch and (item is None or sum(len(rows) for _, rows in batch) >= 2000):
                texts = iter(self.table.texts.many(row for _, rows in batch for row in rows))
                for file_id, rows in batch:
                    yield file_id, "".join(next(texts) for _ in rows)
                batch = []

    def file_order(self) -> np.ndarray:
        """The file ids that own chunks, ascending: the row order of every one-document-per-file index (the
        file lane's, the summary lane's). Cheap, so a lane that only needs the order never waits for the file
        lane's BM25 being built on another thread. A delta view's is its base's, then its own new files' (ids
        only grow: still ascending); the base's rows of files changed since are masked by the view's rows."""
        if self._file_order is None:
            if self.base is None:
                self._file_order = distinct(self.table.file_ids)
            else:
                added = distinct(self.table.file_ids[len(self.base.table.ids):])
                self._file_order = np.concatenate([self.base.file_order(), added])
        return self._file_order

    def files_in_folder(self, folder: str) -> np.ndarray:
        """The ids of the files at or under `folder` (a path relative to the root, no slash at either end): a
        range of the paths kept sorted, found by bisection, so a scoped query never loops over the workspace's
        files (40K at monorepo scale). A delta view adds the few files indexed since its base to its base's;
        the base's files gone since are among them, and their rows are not live."""
        if self.base is not None:
            added = [f for f, path in self.added_paths.items() if _in_folder(path, folder)]
            return np.concatenate([self.base.files_in_folder(folder), np.array(added, np.int64)])
        with self._cache_lock:
            if self._by_path is None:
                order = sorted(self.file_paths.items(), key=lambda item: item[1])
                self._by_path = [path for _, path in order], np.fromiter((f for f, _ in order), np.int64, len(order))
        paths, ids = self._by_path
        # Under `folder`: the paths from "folder/" up to "folder0" ("0" sorts right after "/"), and the file
        # named `folder` itself, just before them.
        start, end = bisect_left(paths, folder + "/"), bisect_left(paths, folder + "0")
        at = bisect_left(paths, folder)
        exact = ids[at:at + 1] if at < len(paths) and paths[at] == folder else ids[:0]
        return np.concatenate([exact, ids[start:end]])

    def file_index(self) -> tuple[np.ndarray, BM25Index | IndexedFileBM25]:
        """(file id of each document, BM25 with one document per file: the sum of its chunks' terms).

        Built on the first query that uses the file lane, from the chunk index's counts; a delta view's is its
        base's with its new files' documents after it, weighed with the base's statistics as its chunks are
        (a file saved a moment ago ranks by its whole text as before the save, not by its chunks alone). A store
        that scores its own lexical lanes scores every file it holds: the rows are this snapshot's or view's
        files (a view's new files included: with its base's rows, the store's score of a file written since had
        no row to go to, and the file lost its rank in the lane until the rebuild).
        """
        if isinstance(self.bm25, IndexedBM25):
            with self._cache_lock:
                if self._files is None:
                    file_ids = self.file_order()
                    self._files = file_ids, self.bm25.files(file_ids)
                return self._files
        if self.base is not None:
            base_ids, base_index = self.base.file_index()
            with self._cache_lock:
                if self._files is None:
                    assert isinstance(self.bm25, StackedBM25) and isinstance(base_index, BM25Index)
                    order = self.file_order()
                    groups = np.searchsorted(order[len(base_ids):], self.table.file_ids[len(self.base.table.ids):])
                    added = BM25Index.grouped(self.bm25.parts[-1], groups.astype(np.int64), len(order) - len(base_ids),
                                              stats_from=base_index)
                    self._files = order, StackedBM25([base_index, added])
                return self._files
        with self._cache_lock:
            if self._files is None:
                file_ids = self.file_order()
                assert isinstance(self.bm25, BM25Index)
                stamp = f"{self.index_id}:{self.generation}"
                index = None if self.files_saved is None else BM25Index.load(self.files_saved, file_ids, stamp)
                if index is None:
                    groups = np.searchsorted(file_ids, self.table.file_ids)
                    index = BM25Index.grouped(self.bm25, groups.astype(np.int64), len(file_ids))
                    index = self._save_file_index(index, file_ids, stamp)
                self._files = file_ids, index
            return self._files

    def _save_file_index(self, index: BM25Index, file_ids: np.ndarray, stamp: str) -> BM25Index:
        """Kept beside the store like the chunk lane's matrix: a restarted editor's first question loads it
        instead of summing 200K chunks' counts (seconds at 40K files). Returns the index to use: the saved one,
        read in place, or `index` where it could not be saved."""
        return _kept_beside(index, self.files_saved, file_ids, stamp, "the file lane's index")

    def summaries(self, ws: WorkspaceContext) -> FileSummaries:
        """The summary lane's index, built on the first query that uses it and again once a newer graph is
        built; a delta view uses its base's. Past `QUERY_BUILD_MAX_FILES` files (tokenising every skeleton
        takes seconds at 40K files) it is built on its own thread, and queries meanwhile use the last one
        built, or none."""
        from codeloupe.graph.build import BACKGROUND_START_DELAY_S, QUERY_BUILD_MAX_FILES, load_graph

        if self.base is not None:
            return self._view_summaries(ws)
        loaded = load_graph(ws, allow_stale=True)
        graph = loaded if loaded.paths else None
        current = self._summaries
        if current is not None and current.built_from(graph):
            return current
        if len(self.file_paths) <= QUERY_BUILD_MAX_FILES:
            return self._build_summaries(ws, graph)
        with self._cache_lock:
            if not self._summaries_building and not self._summaries_stopped:
                # A moment later, as the graph's: the query that asked answers first. Started under the lock, so
                # that `stop_summaries_build` finds it started or not at all.
                self._summaries_building = True
                builder = threading.Timer(BACKGROUND_START_DELAY_S, self._build_summaries_quietly, args=(ws, graph))
                builder.name, builder.daemon = "codeloupe-file-summaries", True
                self._summaries_builder = builder
                builder.start()
        if current is None:
            current = self._summaries_pending = self._summaries_pending or FileSummaries(
                None, BM25Index(iter(())), ready=False)
        return current

    def summaries_waited_for(self, ws: WorkspaceContext) -> FileSummaries:
        """`summaries`, waiting for the build it starts on a thread of its own past `QUERY_BUILD_MAX_FILES` files
        rather than answering without it (a delta view: its base's build): for whoever measures the ranking a
        warm process gives (`Workspace.wait_for_lanes`). Not ready only where that build failed or was stopped."""
        summaries = self.summaries(ws)
        if summaries.ready:
            return summaries
        full = self.base or self
        with full._cache_lock:
            builder = full._summaries_builder
        if builder is not None and builder is not threading.current_thread():
            builder.join()
        return self.summaries(ws)

    def build_summaries(self, ws: WorkspaceContext) -> None:
        """Build the summary lane now, with the graph held, whatever the workspace's size (saved beside the index
        for the next process): for a process preparing the index for the next one (`Searcher.prepare_summaries`)."""
        from codeloupe.graph.build import load_graph

        loaded = load_graph(ws, allow_stale=True)
        self._build_summaries(ws, loaded if loaded.paths else None)

    def _view_summaries(self, ws: WorkspaceContext) -> FileSummaries:
        """A delta view's summary lane: its base's as they were built, with its new files' skeletons and
        neighbours' words after it, weighed with the base's statistics.

        A graph built since (an agent's graph call, an editor's lenses after a save) does not rebuild the base's:
        the base's changed files have ids the store no longer holds, read back as empty documents, which moved
        every file's statistics, and a ranking depended on whether a graph call came before the search until the
        full snapshot was rebuilt. The full rebuild takes the newer graph."""
        from codeloupe.graph.build import load_graph
        from codeloupe.graph.evidence import neighbour_words

        assert self.base is not None
        built = self.base._summaries
        base = built if built is not None and built.ready else self.base.summaries(ws)
        if not base.ready:
            return base
        with self._cache_lock:
            if self._summaries is None or self._summaries_of is not base:
                assert isinstance(base.index, BM25Index)
                added = self.file_order()[len(self.base.file_order()):]
                graph = base.graph() if base.graph is not None else None
                if graph is None and base.graph is not None:  # that graph is gone: the newer one's words then
                    loaded = load_graph(ws, allow_stale=True)
                    graph = loaded if loaded.paths else None
                words = {} if graph is None else {
                    self.path_to_file[path]: found
                    for path, found in neighbour_words(graph, [self.file_paths[f] for f in added.tolist()]).items()
                    if path in self.path_to_file}
                index = build_summary_index(added, ws.store, words, stats_from=base.index)
                self._summaries = FileSummaries(base.graph, StackedBM25([base.index, index]))
                self._summaries_of = base
            return self._summaries

    def _build_summaries(self, ws: WorkspaceContext, graph: Graph | None,
                         should_stop: Callable[[], bool] | None = None) -> FileSummaries:
        """Tokenising every file's skeleton and its neighbours' names is most of a shared repository's first
        search (0.4 of 0.9 s at 760 files) and seconds at 40K files: the index is kept beside the store for
        the next process that opens the same index state with the same graph. `should_stop` (the background
        build's) is asked as it reads the skeletons: once true, `IndexStopped` is raised, nothing kept or saved."""
        from codeloupe.graph.build import graph_stamp
        from codeloupe.graph.evidence import neighbour_words

        file_ids = self.file_order()
        built_from = "" if graph is None else graph_stamp(ws, graph)  # None: a graph not held, not saved against
        stamp = None if self.summaries_saved is None or built_from is None else \
            _summaries_stamp(self.index_id, self.generation, built_from)
        index = None if stamp is None else BM25Index.load(self.summaries_saved, file_ids, stamp)
        if index is None:
            words = {} if graph is None else {
                self.path_to_file[p]: w for p, w in neighbour_words(graph).items() if p in self.path_to_file}
            index = build_summary_index(file_ids, ws.store, words, should_stop=should_stop)
            _stop_if_asked(should_stop)
            if stamp is not None and ws.store.generation("content") == self.generation:  # read what it is stamped
                index = _kept_beside(index, self.summaries_saved, file_ids, stamp, "the file summaries")
            after_large_build(len(file_ids))  # every skeleton's words were read and tokenised
        summaries = FileSummaries(None if graph is None else weakref.ref(graph), index)
        self._summaries = summaries
        return summaries

    def stop_summaries_build(self, *, wait: bool) -> None:
        """For its searcher closing (a workspace closed, a snapshot let go): the summary lane's background build
        about to start is cancelled, and one under way stops at its next step (none of it kept or saved beside
        the index); `wait` (the index is about to close): waited for `BACKGROUND_STOP_WAIT_S` at most, so that
        the index is not closed under it. It went on unasked: seconds of tokenising at 40K files, on a closed
        index."""
        from codeloupe.graph.build import BACKGROUND_STOP_WAIT_S

        with self._cache_lock:
            self._summaries_stopped = True
            builder = self._summaries_builder
        if builder is None:
            return
        builder.cancel()
        if wait and builder is not threading.current_thread():
            builder.join(BACKGROUND_STOP_WAIT_S)

    def _build_summaries_quietly(self, ws: WorkspaceContext, graph: Graph | None) -> None:
        from codeloupe.graph.build import settled_graph

        def should_stop() -> bool:
            return ws.closed or self._summaries_stopped

        try:
            # A graph being loaded or built meanwhile is waited for: built before it, the summaries were built
            # twice (without its words, then with them once a query saw it; 7 s each at 40K files), where a
            # restarted editor would have loaded the ones saved with its graph.
            _stop_if_asked(should_stop)
            settled = settled_graph(ws)
            _stop_if_asked(should_stop)
            self._build_summaries(ws, settled if settled is not None and settled.paths else graph, should_stop)
        except IndexStopped:
            log.debug("file summaries not built: the searcher closed")
        except Exception:
            if not ws.closed:
                log.exception("building the file summaries failed")
            else:  # the workspace closed before or while it ran: nothing is waiting for it
                log.debug("file summaries not built: the workspace closed", exc_info=True)
        finally:
            with self._cache_lock:
                self._summaries_building = False


def _stop_if_asked(should_stop: Callable[[], bool] | None) -> None:
    """`IndexStopped` once `should_stop()` is true (a background build's step about to start)."""
    if should_stop is not None and should_stop():
        raise IndexStopped("stopped: the searcher closed")


def _file_lane_file(index_path: Path) -> Path:
    """Where the file lane's BM25 matrix is kept beside the index."""
    return index_path.with_name(index_path.name + ".files.npz")


def _summaries_file(index_path: Path) -> Path:
    """Where the summary lane's BM25 matrix is kept beside the index."""
    return index_path.with_name(index_path.name + ".summaries.npz")


def _summaries_stamp(index_id: str, generation: int, graph: str) -> str:
    """What the summary lane's saved index is stamped with: the index state, and the stamp of the graph whose
    neighbour words it holds ("" for none)."""
    return f"{index_id}:{generation}:{graph}"


def _kept_beside(index: BM25Index, path: Path | None, row_ids: np.ndarray, stamp: str, what: str) -> BM25Index:
    """`index` saved at `path` and read in place from the file written (the pages a query reads are the system's
    to drop), or `index` itself where it could not be saved: a read-only cache dir costs the next start time,
    nothing else."""
    if path is None:
        return index
    try:
        return index.save(path, row_ids, stamp)
    except OSError as exc:
        log.warning("could not save %s to %s: %s", what, path, exc)
        return index


@dataclass
class LaneScores:
    """The scores one search gave the rows each lane ranked (best first), per lane and per call of it: what
    a search of the same query over other repositories needs to rank its own rows among these."""

    chunks: dict[str, list[np.ndarray]] = field(default_factory=dict)
    files: dict[str, list[np.ndarray]] = field(default_factory=dict)
    terms: dict[str, TermStats] = field(default_factory=dict)  # BM25 lane -> the query terms' statistics
    # lane -> the weight of each call of it that ran, rows found or not: what scales a search across repositories
    ran: dict[str, list[float]] = field(default_factory=dict)


class Fusion:
    """Reciprocal rank fusion at two grains.

    Files are fused from each lane's *file* ranking (a file's rank in a lane is the rank of its best chunk
    there), so a file whose best dense chunk and best BM25 chunk differ still collects both lanes' votes;
    fusing chunks first and rolling up would hand the win to a big file whose one long chunk is second
    everywhere. Chunks are fused too, to choose and order what a file shows.

    Searching several repositories as one (`peers`: the other repositories' `LaneScores` for the query), each
    lane ranks one list across all of them by the lane's own score, and lanes fuse by those ranks: a lane's
    scores are on one scale in every repository (one model's cosines, BM25 of the same terms), a fused score
    of separately ranked lanes is not.
    """

    def __init__(self, chunk_file_ids: np.ndarray, peers: Sequence[LaneScores] = ()) -> None:
        self._chunk_file_ids = chunk_file_ids
        self.scores = LaneScores()  # what each lane scored here, for a search of other repositories
        self._peers = peers
        self.chunk = np.zeros(len(chunk_file_ids), np.float32)
        self.file: dict[int, float] = defaultdict(float)
        self.chunk_ranks: dict[str, dict[int, int]] = defaultdict(dict)  # lane -> chunk row -> rank
        self.file_ranks: dict[str, dict[int, int]] = defaultdict(dict)  # lane -> file id -> rank
        # lane -> (its files best first, their scores in the lane), as the lane first recorded them: the reordering
        # of the fused top reads each file's score against the lane's first (`rerank_features`)
        self.file_scores: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.pins: dict[int, list[str]] = defaultdict(list)  # file id -> what pinned it (issue mode)
        self.frame_rows: list[int] = []  # chunks a traceback frame's line falls in (issue mode)
        self._norm = 0.0
        # The rows each lane or bonus added to: `chunk` is zero everywhere else, so what reads or scales the
        # scored rows visits these few thousand, not every chunk (200K at monorepo scale; see `added_rows`).
        self._added: list[np.ndarray] = []

    def add_lane(self, name: str, rows: list[int], weight: float, *, record: bool,
                 scores: np.ndarray | None = None) -> None:
        """`rows` best first; `scores` (the lane's score of every row) place them among the peers' rows."""
        if weight <= 0:
            return
        self.scores.ran.setdefault(name, []).append(weight)
        if not rows:
            if scores is not None:  # still a call of the lane: the peers' calls are matched to ours by their order
                self._ranks("chunks", name, scores[:0], 0)
                self._ranks("files", name, scores[:0], 0)
            return
        row_scores = None if scores is None else scores[rows]
        ranks = self._ranks("chunks", name, row_scores, len(rows))
        # A lane ranks each row once: one vector update (in float32, as adding row by row did).
        self.chunk[rows] += (weight / (R.RRF_K + ranks)).astype(np.float32)
        self._added.append(np.asarray(rows, np.int64))
        if record:
            recorded = self.chunk_ranks[name]
            for row, rank in zip(rows, ranks.tolist()):
                recorded.setdefault(row, rank)
        # A file's rank in the lane is its best chunk's: the first row of each file, in order.
        file_of = self._chunk_file_ids[rows]
        first = np.sort(np.unique(file_of, return_index=True)[1])
        self._add_files(name, file_of[first].tolist(), weight, record=record,
                        scores=None if row_scores is None else row_scores[first])

    def add_file_lane(self, name: str, file_ids: list[int], weight: float, *, record: bool = True,
                      scores: np.ndarray | None = None) -> None:
        """`file_ids` best first; `scores` (each file's score in the lane) place them among the peers'."""
        if weight <= 0:
            return
        self.scores.ran.setdefault(name, []).append(weight)
        if file_ids:
            self._add_files(name, file_ids, weight, record=record, scores=scores)
        elif scores is not None:  # as in `add_lane`
            self._ranks("files", name, scores[:0], 0)

    def _add_files(self, name: str, file_ids: list[int], weight: float, *, record: bool,
                   scores: np.ndarray | None) -> None:
        ranks = self._ranks("files", name, scores, len(file_ids)).tolist()
        if record and scores is not None and name not in self.file_scores:
            self.file_scores[name] = (np.asarray(file_ids, np.int64), np.asarray(scores, np.float64))
        for rank, file_id in zip(ranks, file_ids):
            self.file[file_id] += weight / (R.RRF_K + rank)
            if record:
                self.file_ranks[name].setdefault(file_id, rank)
        self._norm += weight / (R.RRF_K + 1)

    def pooled(self, name: str, index: BM25Index | StackedBM25 | IndexedBM25 | IndexedFileBM25,
               terms: list[str]) -> TermStats | None:
        """The statistics the BM25 lane `name` scores `terms` with when peers search the same query: its own
        and theirs pooled, so a term weighs the same in every repository (None alone: its own IDF)."""
        mine = index.term_stats(terms)
        self.scores.terms[name] = self.scores.terms.get(name, TermStats()) + mine
        if not self._peers:
            return None
        return sum((TermStats(p.terms[name].n_docs, {t: p.terms[name].df.get(t, 0) for t in terms})
                    for p in self._peers if name in p.terms), mine)

    def _ranks(self, grain: str, name: str, scores: np.ndarray | None, count: int) -> np.ndarray:
        """The ranks (1-based) of a lane's `count` rows, best first: their own order, pushed down by the rows
        of the same lane (and the same call of it: an issue's variants call a lane once each) that peer
        repositories scored higher, so the lane ranks one list across every repository. Records our scores
        for the peers' turn."""
        ranks = np.arange(1, count + 1)
        if scores is None:
            return ranks
        mine = getattr(self.scores, grain).setdefault(name, [])
        call = len(mine)
        mine.append(scores)
        for peer in self._peers:
            theirs = getattr(peer, grain).get(name, [])
            if call < len(theirs):
                # Strictly higher only: a tie keeps our own order and does not push our rows down.
                ranks += np.searchsorted(-theirs[call], -scores, side="left")
        return ranks

    def add_to_chunk(self, row: int, bonus: float) -> None:
        """A bonus for one chunk (a report's frame or named definition), beside the lanes' votes."""
        self.chunk[row] += bonus
        self._added.append(np.array([row], np.int64))

    def added_rows(self) -> np.ndarray:
        """Every row a lane or bonus added to, ascending: the only rows `chunk` can be above zero at."""
        if len(self._added) != 1:
            self._added = [distinct(np.concatenate(self._added)) if self._added else np.zeros(0, np.int64)]
        return self._added[0]

    def scored_rows(self, mask: np.ndarray) -> np.ndarray:
        """The rows under `mask` whose fused score is above zero, ascending (a mask over every row would give
        the same rows, from a pass over all of them)."""
        rows = self.added_rows()
        return rows[mask[rows] & (self.chunk[rows] > 0)]

    def scale_chunks(self, factor: np.ndarray, kind: np.ndarray) -> None:
        """Each chunk's score times the factor of its kind (`factor[kind[row]]`)."""
        rows = self.added_rows()
        self.chunk[rows] *= factor[kind[rows]]

    def add_candidates(self, name: str, file_ids: list[int]) -> None:
        """Files a lane proposes without a vote: they join the bundle (see bundle.py) but score nothing."""
        for rank, file_id in enumerate(file_ids, 1):
            self.file_ranks[name].setdefault(file_id, rank)

    def normalise(self) -> None:
        """Scale so a file ranked first by every lane that found rows scores 1.0 (bonuses are set on that scale).

        Beside peers, by one total for every repository: the weight of every lane call that ran in any of them,
        rows found or not. Each repository's own total of the lanes that found rows in it would scale up the
        one where fewer did: four click files that only the dense and feedback lanes found (no word of `router`
        in click) outranked express's router, ranked first or second by every lane. The feedback lane runs after
        the peers recorded what ran (it scores nothing they rank among), and in every one of them, so its weight
        here is its weight there."""
        norm = self._norm if not self._peers else sum(
            max(calls) / (R.RRF_K + 1)
            for lane in sorted({name for scores in (self.scores, *self._peers) for name in scores.ran})
            for calls in zip_longest(*(s.ran.get(lane, []) for s in (self.scores, *self._peers)), fillvalue=0.0))
        if norm > 0:
            rows = self.added_rows()
            self.chunk[rows] /= norm
            for file_id in self.file:
                self.file[file_id] /= norm


@dataclass
class _Fused:
    """A query's lanes fused in one snapshot, before the bundle is built from them."""

    snap: Snapshot
    fusion: Fusion
    mask: np.ndarray
    statuses: list[LaneStatus]
    issue: bool


class Searcher:
    def __init__(self, ws: WorkspaceContext) -> None:
        self.ws = ws
        self._lock = threading.Lock()
        self._building = threading.Lock()  # held through a full build (`refresh`)
        self._snapshot: Snapshot | None = None
        self._dense: DenseSnapshot | None = None
        self._dense_error = ""
        self._dense_loading = False
        self._view: Snapshot | None = None  # what queries search: the full snapshot or a delta view over it
        self._rebuilding = False
        self._closed = threading.Event()  # the workspace closed: a pending background rebuild gives up
        # Counts first snapshots being built (`_first_view`), for background builds that wait them out.
        self._first_builds = threading.Condition()
        self._first_building = 0
        self._joined: JoinedAsWritten | None = None  # a first index's counts joined as written, for `_first_view`
        self._source_maps = SourceMaps(ws.root)  # read when a bug report's frame names a compiled file

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            joined, self._joined = self._joined, None
            held = {id(s): s for s in (self._snapshot, self._view, self._view and self._view.base) if s is not None}
        for snapshot in held.values():  # a delta view's summaries are its base's, built by it
            # Waited for only as the workspace closes: a snapshot let go for another (a search over several
            # repositories holding the latest few) is on that search's path.
            snapshot.stop_summaries_build(wait=self.ws.closed)
        if joined is not None:
            joined.close()
        with self._first_builds:
            self._first_builds.notify_all()

    @contextlib.contextmanager
    def joined_as_written(self, *, settle: bool = False,
                          should_stop: Callable[[], bool] | None = None) -> Iterator[WrittenFn | None]:
        """What an index run about to write this index tells of each group it writes (`index_workspace`'s
        `written`): where the run is the index's first (no file in it, no snapshot yet), its files' kept counts
        are joined while it runs (`JoinedAsWritten`), and the first snapshot's build takes the parts; else
        None. `settle`: the caller goes on to work of its own in worker processes (the graph's edges), so the
        parts are waited for once the run ends and their worker let go: its pool's thread would make those
        workers spawn rather than fork (`parallel.pool_context`); `should_stop` (the run's) ends that wait with
        the worker killed."""
        store = self.ws.store
        first = not isinstance(store, LexicalStatistics) and self._snapshot is None and not store.has_files()
        rows_path = store.kept_rows_path() if first else None
        if rows_path is None:
            yield None
            return
        joined = JoinedAsWritten(store, rows_path)
        try:
            yield joined.written
        except BaseException:
            joined.close()
            raise
        joined.finish()
        if settle:
            joined.settle(should_stop)
        with self._lock:
            previous, self._joined = self._joined, joined
            # Else built meanwhile (a query during the run: rebuilt without them), or this searcher was closed
            # meanwhile (the workspace, or its snapshot let go): no build would ever let their worker go.
            kept = self._snapshot is None and not self._closed.is_set()
            if not kept:
                self._joined = None
        if previous is not None:
            previous.close()
        if not kept:
            joined.close()

    def wait_for_first_snapshot(self) -> None:
        """Return once no first snapshot is being built in this process (at once when none is), or the workspace
        has closed. The graph's background build calls this before starting: an editor that opens a file at
        start-up asks for its lenses, which start that build, while the first snapshot of a never-searched index
        is built (~13-15 s at 40K files). Both are interpreter-bound, so side by side they shared the interpreter
        and the first answer came at about their sum (38-42 s through Neovim against 19 s alone)."""
        with self._first_builds:
            self._first_builds.wait_for(lambda: not self._first_building or self._closed.is_set())

    # ------------------------------------------------------------------ snapshots

    def snapshot_at_hand(self) -> bool:
        """Whether `snapshot()` answers without building one: this process holds one (a server's, kept current
        as it writes), or one is saved beside the index for the state it is in (loaded, not built). A shared
        index's is built in each process. Elsewhere a one-shot command builds it: every chunk tokenised, or the
        changed files' where an earlier state's is saved (`_first_view`), and saved."""
        with self._lock:
            if self._snapshot is not None and self._snapshot.index_id == self.ws.store.index_id:
                return True
        return not isinstance(self.ws.store, LexicalStatistics) and self.prepared()

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
                with self._building_first():
                    view = self._first_view(generation)
                if view.base is None:
                    return view
            else:
                self._view = self._delta_view(base, generation, self._view)
                view = self._view
        self._rebuild_in_background()
        return view

    def prepared(self) -> bool:
        """Whether a process opening this index finds its search snapshot saved beside it for the index as it
        stands (the snapshot's inputs, the chunk lane's and the file lane's indexes), so that it loads rather
        than builds them; also true of a store that scores its own lexical lanes (nothing is saved for it).
        Only the files' stamps are read."""
        store = self.ws.store
        if isinstance(store, LexicalStatistics):
            return True
        generation, index_id = store.generation("content"), store.index_id
        return saved_snapshot_generation(snapshot_file(store.path), index_id) == generation and all(
            BM25Index.saved_generation(path, index_id) == generation
            for path in (lexical_file(store.path), _file_lane_file(store.path)))

    def prepare_summaries(self) -> bool:
        """Build and save the summary lane of the index as it stands, with its current graph, unless the one
        saved beside it is current (only its stamp is read: no snapshot is loaded for a no-op re-index). For a
        process preparing the index for the next one (`Workspace.prepare_search`). Returns whether it built."""
        from codeloupe.graph.build import current_graph_stamp

        store = self.ws.store
        if isinstance(store, LexicalStatistics):
            return False
        # A workspace with no code file has an empty graph, and its summaries none to be made with.
        graph = current_graph_stamp(self.ws) if code_file_count(store) else ""
        stamp = _summaries_stamp(store.index_id, store.generation("content"), graph)
        if BM25Index.saved_for(_summaries_file(store.path), stamp):
            return False
        snapshot = self.snapshot()
        if snapshot.base is not None:  # a view over an earlier state: the next process builds its own
            return False
        snapshot.build_summaries(self.ws)
        return True

    def refresh(self) -> None:
        """Rebuild the full snapshot now (whoever writes the index calls this so no query has to). The first
        call in a process may instead take the snapshot the last process saved, with the files changed since
        beside it, and leave the full build to the background (`_first_view`)."""
        # One full build at a time: after a bulk change the writer's catch-up and the background rebuild both
        # asked for one, and two builds side by side took 97 s at 40K files where one takes 38.
        with self._building:
            self._refresh()

    def _refresh(self) -> None:
        generation = self.ws.store.generation("content")
        with self._lock:
            current = self._snapshot
            if current is None:
                # No snapshot yet, so no query has anything to search meanwhile: build (or load) under the lock,
                # and a query arriving now (the editor's first search at start-up) waits for this instead of
                # starting a second build beside it on the same cores.
                with self._building_first():
                    view = self._first_view(generation)
                    self._snapshot.file_index()
                if view.base is None:
                    return
        if current is None:  # a view over an earlier state's snapshot: the full one follows off the writer
            self._rebuild_in_background()
            return
        if current.generation == generation and current.index_id == self.ws.store.index_id:
            return
        view = self._view
        fresh = None if view is None or view.base is not current or view.generation != generation else \
            self._compacted(view)
        fresh = fresh or self._build_snapshot(generation)
        fresh.file_index()  # questions use the file lane: built (or loaded) here, off their path
        dense = None
        if self._dense is not None:  # vectors were in use: load them for the new rows before swapping
            dense = load_dense(self.ws.store, fresh.table, fresh.generation, self._dense.model,
                               self.ws.store.generation("vector"))
        with self._lock:
            replaced = None
            if self._snapshot is None or self._snapshot.generation < generation:
                replaced, self._snapshot = self._snapshot, fresh
                self._dense = dense
                if self._view is None or self._view.generation <= generation:
                    self._view = fresh
            if replaced is not None and replaced is not fresh and (self._view is None or self._view.base is not replaced):
                # No view stands on it any more: its summary lane's build, under way or about to start, is seconds
                # of work at 40K files that nothing will search (a query already holding it gets the lane not ready).
                replaced.stop_summaries_build(wait=False)

    def catch_up(self) -> None:
        """Bring what queries search up to the index, for whoever just wrote it: a first snapshot (or one of
        another index file) is loaded or built now (`_first_view`: an earlier state's, saved by the last
        process, with the changed files beside it), as is a bulk change's in a session; after a change of up to
        `DELTA_MAX_FILES` files the changed files are searched beside the last snapshot at once and the full one
        is rebuilt in the background, as after a save. At 40K files a rebuild re-tokenises every chunk (a minute
        and more): an editor's start-up refresh that found a few files changed while it was closed must not hold
        the next saves behind it."""
        with self._lock:
            base = self._snapshot
        if base is None or base.index_id != self.ws.store.index_id or self.snapshot().pending_files:
            self.refresh()

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
                    if self._closed.wait(quiet):
                        return
                    if self.ws.store.generation("content") != seen:
                        continue  # still changing: wait for a quiet moment
                    self.refresh()
                    if self.ws.store.generation("content") == seen:
                        return
            except Exception:  # a failed read: the next change schedules another try
                if not self._closed.is_set():  # closed meanwhile: nothing to rebuild for
                    log.exception("rebuilding the search snapshot failed")
            finally:
                with self._lock:
                    self._rebuilding = False

        threading.Thread(target=rebuild, name="codeloupe-snapshot-rebuild", daemon=True).start()

    @contextlib.contextmanager
    def _building_first(self) -> Iterator[None]:
        """Counts a first snapshot's build while it runs (`wait_for_first_snapshot`)."""
        with self._first_builds:
            self._first_building += 1
        try:
            yield
        finally:
            with self._first_builds:
                self._first_building -= 1
                self._first_builds.notify_all()

    def _first_view(self, generation: int) -> Snapshot:
        """What queries search first in this process (called under the lock): the full snapshot of `generation`
        where it is saved beside the index or nothing earlier is; else the snapshot the last process saved, of an
        earlier state of the same index, with the files changed since searched beside it (a delta view), as
        after a save. A change made while the editor was closed then costs the next start what it changed, not
        re-tokenising every chunk (a minute and more at 40K files); the caller schedules the full rebuild.

        A process that stays open (`interim_answers`) answers from that view at once; after a bulk change (more
        than `DELTA_MAX_FILES` files) the view leaves the changed files out and says so, as in a session. A
        one-shot command's only answer must be what a full snapshot gives (a view weighs the changed files with
        the base's statistics): it makes that snapshot here, from the view where it can (`_compacted`: only the
        changed files tokenised), else from the store."""
        joined, self._joined = self._joined, None  # made for this build only: let go whatever comes of it
        try:
            base = self._saved_base(generation)
            if base is not None:
                view = self._delta_view(base, generation, None)
                if not self.ws.interim_answers:
                    base = self._compacted(view)
                    view = base or view
            if base is None:
                base = view = self._build_snapshot(generation, joined)
        finally:
            if joined is not None:
                joined.close()
        self._snapshot, self._view, self._dense = base, view, None
        return view

    def _saved_base(self, generation: int) -> Snapshot | None:
        """The full snapshot of the latest earlier state of this index that was saved beside it whole (the
        snapshot's inputs and its lexical index, both for that one state), or None. Its rows are matched to the
        index's files by id, which the index never hands out twice: a file changed since is a gone id and a
        new one, as in a delta view after a save."""
        store = self.ws.store
        if isinstance(store, LexicalStatistics):  # scored from the store's statistics: nothing to tokenise
            return None
        inputs, saved = snapshot_file(store.path), lexical_file(store.path)
        earlier = saved_snapshot_generation(inputs, store.index_id)
        if earlier is None or earlier >= generation or BM25Index.saved_generation(saved, store.index_id) != earlier:
            return None
        stamp = f"{store.index_id}:{earlier}"
        loaded = load_snapshot_inputs(inputs, stamp, len(FILE_KINDS), store)
        bm25 = None if loaded is None else BM25Index.load(saved, loaded[0].ids, stamp)
        if loaded is None or bm25 is None:
            return None
        table, rows, symbols, kinds = loaded
        after_large_build(len(rows))
        return self._assembled(earlier, table, rows, bm25, symbols, kinds)

    def _build_snapshot(self, generation: int, joined: JoinedAsWritten | None = None) -> Snapshot:
        """The full snapshot; what it is built from (the chunk table, the file rows, the symbol table) and its
        BM25 matrix (tokenising every chunk) are saved beside the store and reused by the next process that
        opens the same index state (a restarted editor), or a later one (`_saved_base`). `joined`: the parts
        of the kept counts a first index joined as it wrote them."""
        store = self.ws.store
        stamp = f"{store.index_id}:{generation}"
        indexed = self._indexed(None)  # read first: a file written meanwhile is then in the next view, not lost
        inputs = snapshot_file(store.path)
        loaded = load_snapshot_inputs(inputs, stamp, len(FILE_KINDS), store)
        symbols: list[SymbolIndex] = []  # the symbol table, once built

        def build_symbols() -> None:
            gathered = None if joined is None else joined.symbol_index(store, table)
            symbols.append(SymbolIndex.of_names(table, store.iter_symbol_names()) if gathered is None else gathered)

        if loaded is None:
            table = store.chunk_table()
            rows = list(store.file_rows().values())
            kinds = None
        else:
            table, rows, symbol_index, kinds = loaded
            symbols.append(symbol_index)
        saved = lexical_file(store.path)
        # A store keeping the term statistics scores the lane itself: no chunk is read or tokenised here.
        bm25 = IndexedBM25(store, table.ids) if isinstance(store, LexicalStatistics) else \
            BM25Index.load(saved, table.ids, stamp)
        if bm25 is None:
            # Built while the lexical index's workers run (~3 s at 40K files, which this process spent waiting).
            # Saved, and read in place from the file written, as a restarted process reads it.
            lexical = _lexical_index(store, table, rows, meanwhile=None if symbols else build_symbols, joined=joined)
            bm25 = _kept_beside(lexical, saved, table.ids, stamp, "the lexical index")
        if not symbols:
            build_symbols()
        snapshot = self._assembled(generation, table, rows, bm25, symbols[0], kinds)
        snapshot.indexed = indexed
        if loaded is None:
            self._keep_inputs(snapshot, rows, symbols[0])
        after_large_build(len(rows))  # the rows and arrays it was built or loaded through
        return snapshot

    def _compacted(self, view: Snapshot) -> Snapshot | None:
        """The full snapshot of `view`'s state made from the view rather than from the store: the base's rows
        still live, then the new files' rows, are already in chunk id order (ids only grow), and the base's
        kept term counts, those rows selected and the new rows' counted and appended, weigh to the matrix a
        full build makes (`BM25Index.compacted`). No chunk but the new ones is tokenised again: a full build
        re-tokenised every chunk (40 s of the two cores at 40K files) after every quiet moment of an editing
        session and after a start that followed changes. None where it cannot be (the caller builds from the
        store): a view that leaves files out, a base without its counts, ids out of order, or the index
        moving meanwhile."""
        base, store = view.base, self.ws.store
        if base is None or view.pending_files or not isinstance(base.bm25, BM25Index):
            return None
        generation, n = view.generation, len(base.table.ids)
        order = np.concatenate([np.flatnonzero(view.live[:n]), np.arange(n, len(view.table.ids))])
        ids = view.table.ids[order]
        if len(ids) > 1 and not bool(np.all(np.diff(ids) > 0)):
            return None
        rows = list(store.file_rows().values())
        extra = store.chunk_table(sorted(view.added_paths))
        if store.generation("content") != generation or not np.array_equal(extra.ids, view.table.ids[n:]):
            return None
        added = [r for r in rows if r.id in view.added_paths]
        bm25 = base.bm25.compacted(order[order < n], _documents(extra, added))
        if bm25 is None:
            return None
        t, at = view.table, order.tolist()
        symbols_json = t.symbols.encoded
        table = ChunkTable(ids=ids, file_ids=t.file_ids[order], start_lines=t.start_lines[order],
                           end_lines=t.end_lines[order], kinds=[t.kinds[i] for i in at],
                           names=[t.names[i] for i in at], breadcrumbs=[t.breadcrumbs[i] for i in at],
                           symbols=JsonLists([symbols_json[i] for i in at]), texts=ChunkTexts(store, ids))
        stamp = f"{store.index_id}:{generation}"
        bm25 = _kept_beside(bm25, lexical_file(store.path), table.ids, stamp, "the lexical index")
        symbols = SymbolIndex.compacted(view.symbols, table) if isinstance(view.symbols, StackedSymbols) else \
            SymbolIndex.of_names(table, store.iter_symbol_names())
        kinds = {r.id: view.file_kind.get(r.id, -1) for r in rows}
        for r in rows:
            if kinds[r.id] < 0:  # a file with no chunk in the view: its kind, as a full build works it out
                kinds[r.id] = FILE_KINDS.index(file_kind(r.path, r.language))
        snapshot = self._assembled(generation, table, rows, bm25, symbols, kinds)
        snapshot.indexed = view.indexed
        self._keep_inputs(snapshot, rows, symbols)
        after_large_build(len(rows))
        return snapshot

    def _keep_inputs(self, snapshot: Snapshot, rows: list[FileRow], symbols: SymbolIndex) -> None:
        """Save what `snapshot` was made from beside the index for the next process (`load_snapshot_inputs`),
        unless the index moved while it was read: the file would be stamped with a state it does not hold. A
        read-only or full cache dir costs the next start time, nothing else."""
        store = self.ws.store
        if store.generation("content") != snapshot.generation:
            return
        inputs = snapshot_file(store.path)
        try:
            save_snapshot_inputs(inputs, f"{store.index_id}:{snapshot.generation}", snapshot.table, rows, symbols,
                                 snapshot.file_kind)
        except OSError as exc:
            log.warning("could not save the search snapshot to %s: %s", inputs, exc)

    def _assembled(self, generation: int, table: ChunkTable, rows: list[FileRow], bm25: BM25Index | IndexedBM25,
                   symbols: SymbolIndex, kinds: dict[int, int] | None) -> Snapshot:
        """A full snapshot of this index, with where its lanes' own indexes are kept between processes."""
        path = self.ws.store.path
        snapshot = _assemble(generation, table, rows, bm25=bm25, symbols=symbols, kinds=kinds)
        snapshot.index_id = self.ws.store.index_id
        snapshot.files_saved = _file_lane_file(path)
        snapshot.summaries_saved = _summaries_file(path)
        snapshot.entities_saved = path.with_name(path.name + ".entities.npz")
        return snapshot

    def _delta_view(self, base: Snapshot, generation: int, previous: Snapshot | None) -> Snapshot:
        """`base` with the rows of changed files masked out and their new chunks appended. A save's cost is what
        it changed: the ids of the files indexed now against the base's (ids are never reused, so a changed file
        is a gone id and a new one), then only the new files' rows, chunks and symbols are read. `previous`: the
        view queries searched until now (the base, or a view over it), whose ids are the starting point."""
        store = self.ws.store
        known = np.fromiter(base.file_paths, np.int64, len(base.file_paths))
        indexed = self._indexed((previous if previous is not None and previous.base is base else base).indexed)
        current = store.file_ids() if indexed is None else indexed.ids
        present = np.zeros(int(max(current.max(initial=-1), known.max(initial=-1),
                                   base.table.file_ids.max(initial=-1))) + 1, bool)
        present[current] = True
        live = present[base.table.file_ids]
        gone = set(known[~present[known]].tolist())
        added_ids = absent_from(current, known)
        pending = 0
        if len(added_ids) > R.DELTA_MAX_FILES:  # a bulk change: wait for the rebuild rather than re-tokenise here
            pending, added_ids = len(added_ids), added_ids[:0]
        added = sorted(store.file_rows(ids=added_ids.tolist()).values(), key=lambda r: r.id) if len(added_ids) else []
        extra = store.chunk_table([r.id for r in added])
        table = _concat_tables(base.table, extra)
        bm25 = base.bm25.over(table.ids) if isinstance(base.bm25, IndexedBM25) else StackedBM25(
            [base.bm25, BM25Index(_documents(extra, added), stats_from=base.bm25)])  # counts: the file lane's
        symbols = StackedSymbols(base.symbols, SymbolIndex(extra, store.symbol_rows([r.id for r in added])), live)
        full_live = np.concatenate([live, np.ones(len(extra.ids), dtype=bool)])
        view = _assemble_delta(base, generation, table, added, gone, bm25=bm25, symbols=symbols, live=full_live,
                               pending_files=pending)
        view.indexed = indexed
        return view

    def _indexed(self, seen: FileIds | None) -> FileIds | None:
        """Every file id the index holds now, from `seen` (the ids of the snapshot or view searched until now)
        and what changed since, where the store can tell (`FileIdChanges`); None where it cannot."""
        store = self.ws.store
        return store.file_ids_now(seen) if isinstance(store, FileIdChanges) else None

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
               lanes: tuple[str, ...] | None = None, peers: Sequence[LaneScores] = ()) -> Bundle:
        """`peers`: the same query's `lane_scores` in the other repositories searched as one with this."""
        started = time.perf_counter()
        timing: dict[str, float] = {}
        query = query.strip()
        fused = self._fuse(query, scope, mode, lanes, peers, timing, started)
        bundle = build_bundle(self.ws, fused.snap, query=query, fusion=fused.fusion, mask=fused.mask, limit=limit,
                              mode=mode, scope=scope, issue_mode=fused.issue, lanes=fused.statuses)
        timing["bundle"] = _ms(started) - _stages(timing)
        timing["total"] = _ms(started)
        bundle.timing_ms = {k: round(v, 3) for k, v in timing.items()}
        return bundle

    def holds_folder(self, scope: str) -> bool:
        """Whether any indexed file lies at or under `scope` (a search's scope; the whole workspace for "")."""
        folder = _scope_prefix(scope)
        if not folder:
            return self.ws.store.has_files()
        return len(self.snapshot().files_in_folder(folder)) > 0

    def lane_scores(self, query: str, *, scope: str = "", mode: str = "code",
                    peers: Sequence[LaneScores] = ()) -> LaneScores:
        """What each lane scored for `query` here (with the BM25 statistics of `peers` pooled): the first
        passes of a search across repositories."""
        return self._fuse(query.strip(), scope, mode, None, peers, {}, time.perf_counter(),
                          scores_only=True).fusion.scores

    def lexical_asks(self, query: str, mode: str, peers: Sequence[LaneScores] = ()) -> list[LexicalAsk]:
        """What the lexical and file lanes of a search for `query` beside `peers` will ask a store that scores
        them itself (`IndexedBM25`): each variant's terms with the chunk and file IDF pooled over the peers
        (None: the repository's own). A search across repositories asks every store for these at once."""
        snap = self.snapshot()
        if not isinstance(snap.bm25, IndexedBM25):
            return []
        _, weights, variants = _plan(query.strip(), None, mode)
        fusion = Fusion(snap.table.file_ids, peers)
        asks = []
        for variant in variants:
            terms = tokenize(variant.text)
            if not terms:
                continue
            if not peers:  # no statistics to pool: each lane asks with the repository's own IDF
                asks.append(LexicalAsk(terms))
                continue
            chunks = fusion.pooled("lexical", snap.bm25, terms) if weights.get("lexical") else None
            files = fusion.pooled("file", snap.file_index()[1], terms) if weights.get("file") else None
            asks.append(LexicalAsk(terms, *(None if pooled is None else {t: pooled.idf(t) for t in set(terms)}
                                            for pooled in (chunks, files))))
        return asks

    def _fuse(self, query: str, scope: str, mode: str, lanes: tuple[str, ...] | None, peers: Sequence[LaneScores],
              timing: dict[str, float], started: float, *, scores_only: bool = False) -> _Fused:
        """`scores_only`: what `lane_scores` needs (the lanes that record scores), nothing after them."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        snap = self.snapshot()
        timing["snapshot"] = _ms(started)
        mask = self._mask(snap, scope, mode)
        issue, weights, variants = _plan(query, lanes, mode)

        statuses: list[LaneStatus] = []
        dense = self._dense_lane(snap, statuses) if weights.get("dense") else None
        # The model is the costly part of a report: only the variants that earn their time are embedded, in
        # one batch; every variant still goes through the lexical lanes.
        # A report on one line is its own title (parse_issue keeps no title variant then): its text is embedded,
        # or a long one-line question read as a report would get no dense lane at all.
        embedded = [v for v in variants if v.name in R.DENSE_VARIANTS] or variants[:1]
        texts = [v.text for v in embedded] if dense is not None else []
        # The query's embedding and then the dense product (both in onnxruntime, which lets go of the GIL) run
        # on a thread of their own while this one scores the word lanes, and this one takes the blocks of rows
        # left once it needs the scores (at 200K chunks the model and the two int8 passes take ~9 ms of CPU,
        # the word lanes about as long). A store that searches its own vectors is asked here, on the
        # connection the word lanes use, with the query embedded first.
        pending = dense.scores_later(functools.partial(self._embed_queries, texts), len(snap.table.ids)) \
            if texts and isinstance(dense, DenseSnapshot) else None
        vectors = self._embed_queries(texts) if texts and pending is None else None
        if pending is None:
            timing["embed"] = _ms(started) - _stages(timing)
        dense_scores = [dense.scores(vector, len(snap.table.ids)) for vector in vectors] \
            if vectors is not None and dense is not None else []

        summaries = snap.summaries(self.ws) if weights.get("summary") else None

        fusion = Fusion(snap.table.file_ids, peers)
        # The files with a chunk under the mask, once for every variant's file-level lanes (a scatter of every row).
        file_allowed = _files_allowed(snap, mask, scope, mode) \
            if weights.get("file") or (summaries is not None and summaries.ready) else None
        # Every variant's word lanes scored first, then every lane added in the order it always was (fusion sums
        # in float32, and a search across repositories matches each lane's calls by their order).
        scored = []
        for variant in variants:
            terms = tokenize(variant.text)
            files = _file_ranking(snap, snap.file_index()[1], terms, file_allowed, fusion, "file") \
                if weights.get("file") else None
            summary = _file_ranking(snap, summaries.index, terms, file_allowed, fusion, "summary") \
                if summaries is not None and summaries.ready else None
            # Ranked here, while the dense thread still embeds and multiplies: a ranking only reads its scores.
            ranked = {name: (scores, _rank(scores, mask, R.LANE_DEPTH)) for name, scores in
                      self._word_lane_scores(snap, variant.text, terms, weights, fusion).items()}
            scored.append((ranked, files, summary))
        if pending is not None:
            dense_scores = pending.result()
            # The dense thread's figures, beside this one's stages: its wall time embedding the query, its CPU.
            timing["dense_embed"], timing["dense_cpu"] = pending.embed_ms, pending.cpu_ms
        if texts and not dense_scores:  # the model failed on the query (logged): the lane answered nothing
            statuses = [LaneStatus("dense", False, s.coverage, f"the query could not be embedded: {self._dense_error}")
                        if s.name == "dense" else s for s in statuses]
        by_variant = {v.name: scores for v, scores in zip(embedded, dense_scores)}
        for vi, (variant, (per_lane, files, summary)) in enumerate(zip(variants, scored)):
            if variant.name in by_variant:
                cosines = by_variant[variant.name]
                per_lane["dense"] = (cosines, _rank(cosines, mask, R.LANE_DEPTH, positive_only=False))
            for name, (scores, ranks) in per_lane.items():
                fusion.add_lane(name, ranks, weights.get(name, 0.0) * variant.weight, record=vi == 0,
                                scores=scores)
            if files is not None:
                fusion.add_file_lane("file", files[0], weights["file"] * variant.weight, record=vi == 0,
                                     scores=files[1])
            if summary is not None:
                fusion.add_file_lane("summary", summary[0], weights["summary"] * variant.weight, record=vi == 0,
                                     scores=summary[1])
        if weights.get("entity") and issue:
            self._entity_lane(snap, query, weights["entity"], mask, fusion)
        if scores_only:  # the lanes below score nothing a search of other repositories ranks its rows among
            return _Fused(snap, fusion, mask, statuses, issue is not None)
        # The lexical lane's scores of the question's own words with this index's own statistics (no peers
        # pooled into them): the lanes below score those words again, so they start from these.
        query_scores = scored[0][0].get("lexical", (None,))[0] if issue is None and not peers else None
        if weights.get("feedback"):
            self._feedback_lane(snap, tokenize(query), query_scores, weights["feedback"], mask, fusion)
        if issue is None and lanes is None and mode == "code" and _PROJECT_QUESTION.search(query):
            mask = self._project_lane(snap, query, query_scores, scope, mask, fusion)
        fusion.normalise()
        timing["lanes"] = _ms(started) - _stages(timing)

        if issue:
            self._ground_issue(snap, issue, fusion, mask)
        self._adjust(snap, query, fusion, issue is not None)
        if issue is None and lanes is None and mode == "code":
            reorder_top(snap, query, fusion)

        statuses.extend(self._static_statuses(snap, weights, issue is not None, summaries))
        return _Fused(snap, fusion, mask, statuses, issue is not None)

    def _mask(self, snap: Snapshot, scope: str, mode: str) -> np.ndarray:
        if mode == "code":
            mask = ~snap.chunk_is_doc
        elif mode == "docs":
            mask = snap.chunk_is_doc.copy()
        else:
            mask = np.ones(len(snap.table.ids), dtype=bool)
        if snap.live is not None:
            mask &= snap.live
        scope = _scope_prefix(scope)
        if scope:  # by file, then spread to the files' rows: no loop over chunks or files
            files = snap.table.file_ids
            inside = np.zeros(int(files.max(initial=-1)) + 1, bool)
            under = snap.files_in_folder(scope)
            inside[under[under < len(inside)]] = True
            mask &= inside[files]
        return mask

    def _dense_lane(self, snap: Snapshot, statuses: list[LaneStatus]) -> DenseSnapshot | IndexedDense | None:
        from codeloupe.embed import describe_provider

        try:
            dense = self.dense(snap)
        except Exception as exc:  # a provider that cannot load must not take search down with it
            log.warning("dense lane unavailable: %s", exc)
            self._dense_error = str(exc)
            dense = None
        if dense is not None and len(snap.table.ids) == 0:  # an empty index: there is nothing to compute
            statuses.append(LaneStatus("dense", True, 1.0, "nothing indexed to embed"))
            return None
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

    def _word_lane_scores(self, snap: Snapshot, text: str, terms: list[str], weights: dict[str, float],
                          fusion: Fusion) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if weights.get("lexical"):
            out["lexical"] = snap.bm25.scores(terms, fusion.pooled("lexical", snap.bm25, terms))
        if weights.get("symbol"):
            out["symbol"] = snap.symbols.scores(text)
        return out

    def _project_lane(self, snap: Snapshot, query: str, query_scores: np.ndarray | None, scope: str, mask: np.ndarray,
                      fusion: Fusion) -> np.ndarray:
        """Docs, manifests and configuration ranked by BM25 among themselves, for a question about versions,
        dependencies, flags or settings: code mode leaves docs out and code outnumbers manifests, so neither
        ever reached the bundle. They join it as candidates without a vote (a vote of 0.1 cost dev R@1 .004);
        returns the mask widened to them, so the bundle can show them. `query_scores`: BM25 of the query's
        words, if the lexical lane scored them.
        """
        project = (snap.chunk_is_doc | (snap.chunk_kind == FILE_KINDS.index("project"))) & \
            self._mask(snap, scope, "both")
        scores = query_scores if query_scores is not None else snap.bm25.scores(tokenize(query))
        files = list(dict.fromkeys(int(snap.table.file_ids[r]) for r in _rank(scores, project, R.LANE_DEPTH)))
        fusion.add_candidates("project", files[: R.PROJECT_FILES])
        return mask | (project & np.isin(snap.table.file_ids, files[: R.PROJECT_FILES]))

    def _feedback_lane(self, snap: Snapshot, terms: list[str], terms_scores: np.ndarray | None, weight: float,
                       mask: np.ndarray, fusion: Fusion) -> None:
        """Pseudo-relevance feedback: BM25 again with the question's terms plus the rarest identifier and doc
        words of the chunks every lane agreed on so far, for a question whose words are not the code's.
        `terms_scores`: BM25 of `terms` alone, if the lexical lane scored them (only the expansion is scored
        then)."""
        top = top_rows(fusion.chunk, fusion.scored_rows(mask), R.FEEDBACK_CHUNKS)
        if not top:  # nothing to expand the query with; the lane still ran (see `Fusion.normalise`)
            fusion.add_lane("feedback", [], weight, record=True)
            return
        asked = set(terms)
        counts = Counter(chain.from_iterable(snap.terms_of(top)))
        shared = [t for t, n in counts.items() if n >= min(2, len(top)) and t not in asked]
        expansion = snap.bm25.rarest(shared, R.FEEDBACK_TERMS)
        scores = snap.bm25.scores(terms + expansion) if terms_scores is None else \
            snap.bm25.scores_adding(terms_scores, terms, expansion)
        fusion.add_lane("feedback", _rank(scores, mask, R.LANE_DEPTH), weight, record=True)

    def _entity_lane(self, snap: Snapshot, query: str, weight: float, mask: np.ndarray, fusion: Fusion) -> None:
        file_ids, index = snap.entity_index(self.ws)
        allowed = _files_under(snap, mask, file_ids)
        scores = index.scores(tokenize(query))
        rows = _rank(scores, allowed, R.LANE_DEPTH)
        fusion.add_file_lane("entity", file_ids[rows].tolist(), weight, scores=scores[rows])

    def _ground_issue(self, snap: Snapshot, issue: IssueQuery, fusion: Fusion, mask: np.ndarray) -> None:
        """Frames > explicit paths > backticked identifiers pin files; the frame's function gets its own bonus."""
        pinned: dict[int, float] = {}
        depth = 0  # workspace files in the order the frames reach them, innermost first
        mapped: set[str] = set()  # the compiled files whose maps this query read
        lines: set[tuple[int, int]] = set()  # (file, line) pinned: frames on one line differing in column pin it once
        for frame in issue.frames:
            path, line, why = resolve_suffix(frame.path, snap.by_basename), frame.line, ""
            if path is None:  # a compiled file the index leaves out: the frame pins the line it was compiled from
                path, line = self._through_source_map(snap, frame, mapped)
                why = f" (its source map: {path}:{line})"
            if path is None or (snap.path_to_file[path], line) in lines:
                continue
            file_id = snap.path_to_file[path]
            lines.add((file_id, line))
            if file_id not in pinned:
                pinned[file_id] = R.FRAME_BONUS * R.FRAME_DEPTH_DECAY ** depth
                depth += 1
            fusion.pins[file_id].append(f"traceback frame {frame.path}:{frame.line}{why}")
            row = snap.symbols.chunk_at(file_id, line) if line else None
            if row is not None and mask[row]:
                fusion.add_to_chunk(row, R.FRAME_FUNCTION_BONUS)
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
                    fusion.add_to_chunk(row, R.BACKTICK_BONUS)
        for file_id, bonus in pinned.items():
            if mask[snap.file_chunk_rows.get(file_id, [])].any():
                fusion.file[file_id] += bonus

    def _through_source_map(self, snap: Snapshot, frame: Frame, mapped: set[str]) -> tuple[str | None, int]:
        """(the indexed file and line that `frame`'s compiled line came from, by the map beside the compiled file
        in the workspace; (None, 0) when there is no such map or it names no indexed file). `mapped`: the compiled
        files whose maps the query read so far, at most `MAPS_KEPT` (a report of 1,000 frames, each in another
        file with a map, read and decoded 1,000 maps a search, each query again), so the next search of the
        report finds them all decoded."""
        maps = self._source_maps
        compiled = maps.compiled_file(frame.path)
        if compiled is None or compiled not in mapped and len(mapped) >= MAPS_KEPT:
            return None, 0
        mapped.add(compiled)
        found = maps.original(compiled, frame.line, frame.column)
        if found is None:
            return None, 0
        source, line = found
        # A bundler may name its sources as URLs (`webpack://pkg/./src/x.ts`): their longest indexed suffix. A relative
        # source names its file exactly: one the index lacks (a dependency's own `src/` under `node_modules/`) pins
        # nothing, where its suffix would pin the workspace's file of the same name.
        path = source if source in snap.path_to_file else \
            resolve_suffix(source, snap.by_basename) if ":" in source else None
        return (path, line) if path is not None else (None, 0)

    def _adjust(self, snap: Snapshot, query: str, fusion: Fusion, issue: bool) -> None:
        """Soft penalties and capped boosts: tests, examples, declarations and data demoted (release notes and
        licences too, unless the question is about releases or licences), a file named by a short question's
        word lifted."""
        penalties = R.FILE_KIND_PENALTY_ISSUE if issue else R.FILE_KIND_PENALTY
        if "record" in penalties and _RECORD_QUESTION.search(query):
            penalties = {**penalties, "record": 1.0}
        factor = np.array([penalties.get(kind, 1.0) for kind in FILE_KINDS], np.float32)
        fusion.scale_chunks(factor, snap.chunk_kind)
        file_factor = factor.tolist()
        for file_id in list(fusion.file):
            fusion.file[file_id] *= file_factor[snap.file_kind.get(file_id, 0)]
        words = _content_words(query)
        if issue or not words or len(words) > R.SHORT_QUERY_WORDS:
            return
        wanted = _stems_of(words)
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


@dataclass(frozen=True)
class LexicalAsk:
    """Terms a store-scored lexical lane asks for, with the chunk and file IDF to score them (None: own)."""

    terms: list[str]
    chunk_idf: dict[str, float] | None = None
    file_idf: dict[str, float] | None = None

    def key(self) -> tuple:
        return tuple(self.terms), *(tuple(sorted((idf or {}).items())) for idf in (self.chunk_idf, self.file_idf))


def pooled_lane_scores(searchers: dict[str, Searcher], query: str, mode: str,
                       scope: str = "") -> dict[str, list[LaneScores]]:
    """The first two passes of a search of several repositories as one: each repository's BM25 statistics of
    the query's terms, then its lane scores on the pooled statistics. Returns each repository's peers (the
    others' lane scores) for its bundle's pass (`Searcher.search(peers=...)`). Before each pass, what every
    repository's store-scored lexical lanes will ask is asked of the stores together: one statement per
    database and distinct IDF, not one per repository and lane."""
    def others(scores: dict[str, LaneScores], name: str) -> list[LaneScores]:
        return [s for other, s in scores.items() if other != name]

    _ask_together(searchers, query, mode, dict.fromkeys(searchers, []))
    alone = {name: s.lane_scores(query, scope=scope, mode=mode) for name, s in searchers.items()}
    peers = {name: others(alone, name) for name in searchers}
    _ask_together(searchers, query, mode, peers)
    pooled = {name: s.lane_scores(query, scope=scope, mode=mode, peers=peers[name]) for name, s in searchers.items()}
    return {name: others(pooled, name) for name in searchers}


def _ask_together(searchers: dict[str, Searcher], query: str, mode: str, peers: dict[str, list[LaneScores]]) -> None:
    asked: dict[tuple, tuple[LexicalAsk, list[IndexedBM25]]] = {}
    for name, searcher in searchers.items():
        for ask in searcher.lexical_asks(query, mode, peers[name]):
            bm25 = searcher.snapshot().bm25
            assert isinstance(bm25, IndexedBM25)
            asked.setdefault(ask.key(), (ask, []))[1].append(bm25)
    for ask, lanes in asked.values():
        if len(lanes) > 1:
            answer_together(lanes, ask.terms, chunk_idf=ask.chunk_idf, file_idf=ask.file_idf)


def _stages(timing: dict[str, float]) -> float:
    """The searching thread's stages so far (the dense thread's figures, `dense_*`, are not among them)."""
    return sum(ms for stage, ms in timing.items() if not stage.startswith("dense_"))


def _plan(query: str, lanes: tuple[str, ...] | None, mode: str
          ) -> tuple[IssueQuery | None, dict[str, float], list[Variant]]:
    """(the issue the query reads as, or None; each lane's weight; the variants every lane is asked for).

    A search of the docs never reads its query as a bug report: a long question is still a question there,
    and what a report's machinery adds (frames, paths and definitions pinned, an entity lane over signatures)
    points at code, which docs mode leaves out. Docs dev, the 129 docs questions (47 of them long enough to
    read as reports; lexical): R@1 .566 -> .589, MRR .700 -> .715; docs test .562 -> .603, bundle recall .986
    -> 1.000; an embedded sample of 86 (both sets) R@1 .593 -> .640, MRR .733 -> .764, Acc@5 .930 -> .919."""
    issue = parse_issue(query, R.FULL_TEXT_VARIANT_WEIGHT) if mode != "docs" and is_issue(query) else None
    weights = dict(R.LANE_WEIGHTS_ISSUE if issue else _weights_for(query))
    if lanes is not None:
        weights = {name: (w if name in lanes else 0.0) for name, w in weights.items()}
        if not any(weights.values()):
            weights = {name: (1.0 if name in lanes else 0.0) for name in weights}
    return issue, weights, issue.variants if issue else [Variant("query", query)]


def _file_ranking(snap: Snapshot, index: BM25Index | IndexedFileBM25, terms: list[str], allowed: np.ndarray,
                  fusion: Fusion, lane: str) -> tuple[list[int], np.ndarray]:
    """Files by BM25 over one document per file (`index`, rows in `file_index` order): all of a file's text
    (the file lane: a long report's words spread over a big file's chunks, where no single chunk holds enough
    of them to rank) or its summary (the summary lane); with their scores. `allowed`: whether each file (in
    that order) has a chunk under the query's mask."""
    file_ids = snap.file_order()
    scores = index.scores(terms, fusion.pooled(lane, index, terms))
    rows = _rank(scores, allowed, R.LANE_DEPTH)
    return file_ids[rows].tolist(), scores[rows]


def _scope_prefix(scope: str) -> str:
    """A search's scope as the folder path it keeps (`""`: the whole workspace)."""
    scope = scope.strip().strip("/")
    return "" if scope == "." else scope


def _in_folder(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def _files_allowed(snap: Snapshot, mask: np.ndarray, scope: str, mode: str) -> np.ndarray:
    """`_files_under(snap, mask, snap.file_order())` for the query's mask (`Searcher._mask` of `scope` and
    `mode`). A mode's mask over the whole workspace is the same at every query of a snapshot, so its answer (a
    scatter of every row: ~1 ms at 200K chunks) is kept on the snapshot, read-only."""
    if _scope_prefix(scope):
        return _files_under(snap, mask, snap.file_order())
    allowed = snap._files_in_mode.get(mode)
    if allowed is None:
        allowed = _files_under(snap, mask, snap.file_order())
        allowed.setflags(write=False)
        snap._files_in_mode[mode] = allowed
    return allowed


def _files_under(snap: Snapshot, mask: np.ndarray, file_ids: np.ndarray) -> np.ndarray:
    """Whether each of `file_ids` has a chunk under `mask` (one scatter, not `np.isin`'s sort of every row)."""
    present = np.zeros(int(max(file_ids.max(initial=-1), snap.table.file_ids.max(initial=-1))) + 1, bool)
    present[snap.table.file_ids[mask]] = True
    return present[file_ids]


def _weights_for(query: str) -> dict[str, float]:
    words = query.split()
    ids = [w for w in identifiers(query) if looks_like_identifier(w)]
    if ids and (len(words) <= 3 or len(ids) * 3 >= len(words)):
        return R.LANE_WEIGHTS_IDENTIFIER
    return R.LANE_WEIGHTS_NATURAL


def _documents(table: ChunkTable, files: list[FileRow]) -> Iterator[list[str]]:
    """BM25 terms of each chunk: its file's path terms, breadcrumb and text."""
    return (document_terms(*chunk) for part in _ChunksInParts(table, files) for chunk in part)


def _lexical_index(store: IndexStore, table: ChunkTable, files: list[FileRow], *,
                   meanwhile: Callable[[], object] | None = None, joined: JoinedAsWritten | None = None) -> BM25Index:
    """The BM25 index of `table`'s chunks, from the term counts each file's indexing kept (`_KeptCounts`)
    where nearly every file has them; else every chunk tokenised. Either way in worker processes when there is
    enough to do, with `meanwhile()` run here while they work (`parallel.map_in_workers`). `joined`: the kept
    counts a first index joined as it wrote them, whose parts are taken where their files lie in the table."""
    kept = _KeptCounts.of(store, table, files, joined)
    if kept is not None:
        return BM25Index.from_counts(kept.parts(meanwhile))
    parts = _ChunksInParts(table, files)
    return BM25Index.from_counts(map_in_workers(count_chunk_terms, ((part,) for part in parts), len(parts),
                                                what="tokenising", meanwhile=meanwhile))


# A file's counts in a task of `_joined_kept`: (its id, its chunks) for the task to read its kept row itself,
# its kept row read here, or its chunks to tokenise (`count_chunk_terms`' input).
_FileCounts = tuple[int, int] | KeptCounts | list[tuple[list[str], str, str]]

# From this many chunks the kept counts are joined in worker processes (~35 us a chunk: read back, then joined;
# ~1.4 s in one process here), in this many tasks of about equal size, so that two to four workers each take
# a few. Few large tasks: this process then joins what the tasks give, each term of a task's own vocabulary
# looked up once, and tasks of 500 chunks held 15K distinct terms each (6M at 40K files: 3.3 s of lookups, as
# much as joining each file here).
_KEPT_POOL_MIN_CHUNKS = 40_000
_KEPT_TASKS = 8
# A first index joins its kept counts while it runs a part of this many chunks at a time (`JoinedAsWritten`):
# about what a task of `_KEPT_TASKS` holds at 40K files (200K chunks), few enough parts to join here.
_JOINED_AS_WRITTEN_CHUNKS = 25_000
# How often waiting for those parts once the run ends asks whether the run was told to stop.
_SETTLE_POLL_S = 0.1


class _KeptCounts:
    """`table`'s chunks' term counts as tasks of `_joined_kept` (runs of whole files in table order, their kept
    rows read a task at a time): the lexical index is then built without tokenising (at 40K files, tokenising
    every chunk was 22-30 s of a first answer on two cores). The tasks' results join to the index
    tokenising every chunk makes, to the bit (`BM25Index.from_counts`); they are made in worker processes
    from `_KEPT_POOL_MIN_CHUNKS` chunks on (reading back and joining 40K files' counts took 7 s in one).

    Each task reads its files' kept rows itself where the store lets another process read them (this process
    then neither reads them nor holds them for the workers: 110 MB at 40K files). A file without counts is
    tokenised instead (its chunks go to the task in place of its counts); a task that cannot read its rows,
    or meets one that is damaged or does not fit, gives None and is done again here, from rows read here."""

    def __init__(self, store: IndexStore, table: ChunkTable, files: list[FileRow], starts: np.ndarray,
                 counted: np.ndarray, joined: JoinedAsWritten | None) -> None:
        self._store, self._table = store, table
        self._counted = set(counted.tolist())  # the files whose counts are kept
        self._rows_path = store.kept_rows_path()
        self._paths = {r.id: r.path for r in files}
        self._starts, self._ends = starts.tolist(), np.r_[starts[1:], len(table.ids)].astype(np.int64).tolist()
        self._files = table.file_ids[starts].tolist()
        # Each task a run of whole files, from the file holding its first chunk to the next task's.
        chunks = len(table.ids)
        tasks = _KEPT_TASKS if chunks >= _KEPT_POOL_MIN_CHUNKS else 1
        firsts = np.searchsorted(starts, np.arange(1, tasks) * chunks / tasks)
        cuts = np.unique(np.r_[0, firsts, len(starts)]).astype(np.int64).tolist()
        self._tasks = _with_parts(cuts, table.file_ids[starts], np.diff(np.r_[starts, chunks]),
                                  [] if joined is None else joined.parts_for(store))

    @classmethod
    def of(cls, store: IndexStore, table: ChunkTable, files: list[FileRow],
           joined: JoinedAsWritten | None = None) -> _KeptCounts | None:
        """None unless each file's chunks lie together in the table (as one transaction writes them) and the
        files without counts hold fewer chunks than would keep the workers busy."""
        file_ids = table.file_ids
        starts = np.flatnonzero(np.r_[True, file_ids[1:] != file_ids[:-1]]) if len(file_ids) else np.zeros(0, np.int64)
        run_files = file_ids[starts]
        if len(np.unique(run_files)) != len(run_files):
            return None
        sizes = np.diff(np.r_[starts, len(file_ids)])
        counted = store.files_with_term_counts()
        missing = int(sizes[np.isin(run_files, counted, invert=True)].sum())
        if missing >= _CHUNKS_PER_PART * parallel.POOL_MIN_ITEMS:
            return None
        return cls(store, table, files, starts, counted, joined)

    def parts(self, meanwhile: Callable[[], object] | None = None) -> Iterator[TermCounts]:
        """Each task's counts joined, in table order (`meanwhile()` run here while workers join them, or while
        the parts joined as written are finished, where they are all there is)."""
        tasks, self._tasks = deque(self._tasks), []  # each part joined as written let go once taken
        todo = [(first, stop) for first, stop, done in tasks if done is None]
        joined = map_in_workers(_joined_kept, self._arguments(todo), len(todo), what="joining kept term counts",
                                min_items=2, meanwhile=meanwhile)
        if not todo and meanwhile is not None:
            meanwhile()
        while tasks:
            first, stop, done = tasks.popleft()
            part = next(joined) if done is None else _given(done, "kept term counts joined")
            del done
            if part is None:  # done again from rows read here; a damaged row's task tokenised whole
                part = _joined_kept(None, self._read_here(first, stop))
            yield part.term_counts() if part is not None else count_chunk_terms(self._chunks(first, stop))

    def _arguments(self, tasks: list[tuple[int, int]]) -> Iterator[tuple[Path | None, list[_FileCounts]]]:
        """Each task's arguments: where to read its files' kept rows, and each file's (id, chunks) or chunks."""
        for first, stop in tasks:
            if self._rows_path is None:
                yield None, self._read_here(first, stop)
                continue
            yield self._rows_path, [(self._files[at], self._ends[at] - self._starts[at])
                                    if self._files[at] in self._counted else self._chunks(at, at + 1)
                                    for at in range(first, stop)]

    def _read_here(self, first: int, stop: int) -> list[_FileCounts]:
        """Files `first` to `stop`'s kept rows, read by this process, or their chunks where a row does not fit."""
        kept = self._store.kept_term_counts(self._files[first:stop])
        task: list[_FileCounts] = []
        for at in range(first, stop):
            counted = kept.get(self._files[at])
            fits = counted is not None and counted.chunks == self._ends[at] - self._starts[at]
            task.append(counted if fits else self._chunks(at, at + 1))
        return task

    def _chunks(self, first: int, stop: int) -> list[tuple[list[str], str, str]]:
        """The chunks of files `first` to `stop` (in table order) as `count_chunk_terms` takes them."""
        table, start, end = self._table, self._starts[first], self._ends[stop - 1]
        path_terms = {f: path_tokens(self._paths[f]) for f in self._files[first:stop] if f in self._paths}
        return [(path_terms.get(f, []), crumb, text) for f, crumb, text in
                zip(table.file_ids[start:end].tolist(), table.breadcrumbs[start:end], table.texts[start:end])]


def _joined_kept(rows_path: Path | None, files: list[_FileCounts]) -> _JoinedTask | None:
    """One task of `_KeptCounts`: its files' counts, read back (from `rows_path` where the task names a file by
    id) or counted from the chunks given, joined in order; None when the rows cannot be read, or one is
    damaged or does not fit its file's chunks."""
    named = [file[0] for file in files if isinstance(file, tuple)]
    kept = read_kept_term_counts(rows_path, named) if named and rows_path is not None else {}
    if kept is None:
        return None
    try:
        joined = TermCounts.joined(_file_counts(file, kept) for file in files)
    except _DamagedRow:
        return None
    return _JoinedTask("\n".join(joined.terms), joined.columns, joined.counts, joined.ends)


T = TypeVar("T")

# A part joined as a first index wrote it (`JoinedAsWritten`): its files' ids and chunk counts in the order
# written, and the worker's `_joined_kept` of them.
_JoinedPart = tuple[np.ndarray, np.ndarray, "Future[_JoinedTask | None]"]


def _with_parts(cuts: list[int], run_files: np.ndarray, sizes: np.ndarray,
                joined: Sequence[_JoinedPart]) -> list[tuple[int, int, Future[_JoinedTask | None] | None]]:
    """The tasks of a table whose runs of chunks are the files `run_files` (`sizes` chunks each), cut at `cuts`
    (ascending, from 0 to the number of runs): (first run, stop, None) each, except where a part of `joined`
    lies in the table as its files were written, each in a run of its own of the same size: there the task
    is that part (first, stop, its future), and the cuts around it move to its ends. A file id is never given
    twice and its kept row is written with it, so such a part is the join its task would make now. A file
    written again or deleted since (its id gone, or another file's run between) leaves its part out."""
    placed: dict[int, tuple[int, Future[_JoinedTask | None]]] = {}
    for ids, chunks, future in joined:
        at = np.flatnonzero(run_files == ids[0]) if len(ids) else ()
        if len(at) and np.array_equal(run_files[at[0]:at[0] + len(ids)], ids) and \
                np.array_equal(sizes[at[0]:at[0] + len(ids)], chunks):
            placed[int(at[0])] = (int(at[0]) + len(ids), future)
    tasks: list[tuple[int, int, Future[_JoinedTask | None] | None]] = []
    first, end = 0, cuts[-1]
    while first < end:
        if first in placed:
            stop, future = placed[first]
            tasks.append((first, stop, future))
        else:
            stop = min([cut for cut in cuts if cut > first] + [start for start in placed if start > first])
            tasks.append((first, stop, None))
        first = stop
    return tasks


def _given(future: Future[T], what: str) -> T | None:
    """What the worker gave for a part (`what` it is), or None where it failed or never gave it (done here)."""
    try:
        return future.result(parallel.WORKER_TIMEOUT_S)
    except Exception as exc:  # a worker that died, timed out or was cancelled: the task is done here instead
        log.warning("the %s as written were not there (%r); done here instead", what, exc)
        return None


class JoinedAsWritten:
    """A first index's kept term counts joined while its run goes on: whenever the files written since the last
    part hold `_JOINED_AS_WRITTEN_CHUNKS` chunks, a worker process joins them (`_joined_kept`, reading their rows
    itself from what is committed), and the run's last files once it ends. The first snapshot's build takes
    each part whose files lie in its table as written (`_with_parts`) and joins only the rest: at 40K files
    joining every file's counts after the chunking took ~8 s of the two cores before the first answer, and the
    run's last part (~1/8 of them) is now joined while the symbol table is built. A run too small for one part
    joins nothing here (its build does as before).

    Each part's symbols are gathered too, in the same worker (`_symbols_of_part`: the part's name maps over its
    own chunks), but for the run's last files, gathered by the build while the worker joins their counts: the
    build's symbol table is then those parts put end to end (`symbol_index`), not every symbol of the
    workspace read and looked up after the chunking (~1.9 s of CPU at 13.5K files, 0.8-1.0 s so)."""

    def __init__(self, store: IndexStore, rows_path: Path) -> None:
        self._of = (store.index_id, store.recoveries, rows_path)  # a part is of this index file only
        self._rows_path = rows_path
        self._files: list[tuple[int, int]] = []
        self._chunks = 0
        self._parts: list[_JoinedPart] = []
        # Each part's files' ids and chunk counts and its symbols gathered, or None: to be gathered by the build.
        self._symbols: list[tuple[np.ndarray, np.ndarray, Future[_SymbolsOfPart | None] | None]] = []
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def written(self, files: list[tuple[int, int]]) -> None:
        """(file id, chunk count) of each file a group of the run wrote with its kept counts, in order."""
        self._files += [file for file in files if file[1]]  # a file without chunks has no run in the table
        self._chunks += sum(chunks for _, chunks in files)
        if self._chunks >= _JOINED_AS_WRITTEN_CHUNKS:
            self._submit()

    def finish(self) -> None:
        """The run has ended: its files of no part yet are joined too, unless it made no part."""
        if self._parts and self._files:
            self._submit(last=True)
        self._files, self._chunks = [], 0

    def parts_for(self, store: IndexStore) -> list[_JoinedPart]:
        """The parts, handed over (not kept here: each is let go once joined), if `store` is the index file they
        were read from (not one that replaced a damaged one)."""
        parts, self._parts = self._parts, []
        return parts if (store.index_id, store.recoveries, store.kept_rows_path()) == self._of else []

    def symbol_index(self, store: IndexStore, table: ChunkTable) -> SymbolIndex | None:
        """The symbol table of `table` from the parts' symbols, the last part's gathered here (meanwhile the
        worker joins its counts), if `store` is the index file they were read from and the parts are `table`'s
        chunks end to end, each as its files were written, their symbols in id order (the order `of_names`
        reads them); else None (a file written again or deleted since, a file written without its counts, a
        part its worker did not give): the caller builds it from the store."""
        parts, self._symbols = self._symbols, []
        if not parts or (store.index_id, store.recoveries, store.kept_rows_path()) != self._of:
            return None
        placed = self._end_to_end(parts, table)
        if placed is None:
            log.info("the symbols gathered as the first index wrote its files do not fit its chunk table: read again")
            return None
        return SymbolIndex.concatenated(table, placed)

    def _end_to_end(self, parts: list[tuple[np.ndarray, np.ndarray, Future[_SymbolsOfPart | None] | None]],
                    table: ChunkTable) -> list[tuple[SymbolPart, int]] | None:
        """Each part's symbols and the row of `table` its chunks start at, where they are its chunks end to end
        (and their symbols in id order); else None. Those not yet gathered are gathered here first, while the
        worker may still be at the others, unless the files written are no longer the table's chunk for chunk
        (a file written again or deleted since, one written outside the run): that part's reading (0.5-2.8 s)
        would be thrown away with the rest, before the table is read from the store whole."""
        written = np.repeat(np.concatenate([ids for ids, _, _ in parts]),
                            np.concatenate([chunks for _, chunks, _ in parts]))
        if not np.array_equal(written, table.file_ids):
            return None
        here = {at: _symbols_of_part(self._rows_path, ids.tolist()) for at, (ids, _, future) in enumerate(parts)
                if future is None}
        placed: list[tuple[SymbolPart, int]] = []
        first, last_id = 0, -1
        for at, (_, chunks, future) in enumerate(parts):
            gathered = here[at] if future is None else _given(future, "symbols gathered")
            stop = first + int(chunks.sum())
            if gathered is None or not np.array_equal(gathered.chunk_file_ids, table.file_ids[first:stop]) or \
                    not np.array_equal(gathered.chunk_start_lines, table.start_lines[first:stop]) or \
                    0 <= gathered.first_id <= last_id:
                return None
            last_id = max(last_id, gathered.last_id)
            placed.append((gathered.part, first))
            first = stop
        return placed

    def settle(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Wait for every part, then let the worker go (the parts are kept); once `should_stop()` is true, let
        it go at once as `close` does (a served workspace closing as the run's last file was written waits for
        no part: the worker may be seconds behind the chunking at 40K files)."""
        pending = [future for _, _, future in self._parts] + \
            [future for _, _, future in self._symbols if future is not None]
        while should_stop is not None and pending:
            if should_stop():
                self.close()
                return
            pending = list(wait(pending, timeout=_SETTLE_POLL_S).not_done)
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)  # every part submitted is joined first

    def close(self) -> None:
        """Let the worker go: a part still being joined is abandoned, its worker killed rather than waited for (a
        served workspace closing mid-index exits within the 2 s its MCP client allows)."""
        self._closed = True
        pool, self._pool, self._parts, self._symbols = self._pool, None, [], []
        if pool is not None:
            parallel.kill_workers(pool)

    def _submit(self, *, last: bool = False) -> None:
        """A part of the files written since the last: its counts joined in the worker, and its symbols gathered
        there too unless it is the `last` (the build gathers those while the worker joins)."""
        files, self._files, self._chunks = self._files, [], 0
        pool = self._started()
        if pool is None or not files:
            return
        ids, chunks = (np.array(column, np.int64) for column in zip(*files))
        try:
            future = parallel.submit(pool, _joined_kept, self._rows_path, files)
            symbols = None if last else parallel.submit(pool, _symbols_of_part, self._rows_path, ids.tolist())
        except RuntimeError as exc:  # the worker broke, or the workspace closed: the build joins the rest itself
            log.info("joining kept term counts as written stopped (%r)", exc)
            self._closed = True
            return
        self._parts.append((ids, chunks, future))
        self._symbols.append((ids, chunks, symbols))

    def _started(self) -> ProcessPoolExecutor | None:
        """The worker, started on the first part (by then the chunking's workers run: this takes nothing from
        them but a core's share), unless it may not start here (`parallel.may_start`); None then, and no part
        is made."""
        if self._pool is None and not self._closed:
            context = parallel.pool_context()
            if not parallel.may_start(context, "joining kept term counts as written"):
                self._closed = True
                return None
            self._pool = ProcessPoolExecutor(1, mp_context=context, initializer=parallel.exit_with_parent,
                                             initargs=(os.getpid(),))
        return self._pool


@dataclass
class _SymbolsOfPart:
    """A part's symbols as they travel back (`_symbols_of_part`): its chunks' file ids and start lines (which the
    build checks against its table), its lowest and highest symbol id (-1 for none), and its name maps."""

    chunk_file_ids: np.ndarray
    chunk_start_lines: np.ndarray
    first_id: int
    last_id: int
    part: SymbolPart


def _symbols_of_part(path: Path, file_ids: list[int]) -> _SymbolsOfPart | None:
    """The name maps of the symbols of `file_ids` over their own chunks, read from the index at `path` (in a
    worker process, or here); None when it cannot be read."""
    rows = read_symbol_part(path, file_ids)
    if rows is None:
        return None
    part = SymbolIndex.part_of(rows.chunk_file_ids, rows.chunk_start_lines, rows.names)
    return _SymbolsOfPart(rows.chunk_file_ids, rows.chunk_start_lines, rows.first_id, rows.last_id, part)


@dataclass
class _JoinedTask:
    """A task's joined counts as they travel back: the terms one string (a term never holds a newline), which
    the caller splits as it joins them. A list of strings took ~14 MB a task at 40K files and was slower to
    pass, and the tasks' results wait while the symbol table is built."""

    terms: str
    columns: array
    counts: array
    ends: array

    def term_counts(self) -> TermCounts:
        return TermCounts(self.terms.split("\n") if self.terms else [], self.columns, self.counts, self.ends)


class _DamagedRow(Exception):
    pass


def _file_counts(file: _FileCounts, kept: dict[int, KeptCounts]) -> TermCounts:
    # Read back as each file's turn comes: its terms are then still in the cache when they are looked up in the
    # join (reading a task's files back first made the lookups half as fast again).
    if isinstance(file, tuple):
        file_id, chunks = file
        row = kept.get(file_id)
        counted = row.unpacked() if row is not None and row.chunks == chunks else None
    else:
        counted = file.unpacked() if isinstance(file, KeptCounts) else count_chunk_terms(file)
    if counted is None:
        raise _DamagedRow
    return counted


# Chunks tokenised in one task of the workers building a lexical index: ~25 ms of work each, so that a pool is
# started from ~20K chunks on (`parallel.POOL_MIN_ITEMS` tasks) and every worker stays busy.
_CHUNKS_PER_PART = 100


class _ChunksInParts:
    """A table's chunks as `count_chunk_terms`' input, `_CHUNKS_PER_PART` at a time, each read from the store
    only when its turn comes (the texts of a whole workspace are never held at once)."""

    def __init__(self, table: ChunkTable, files: list[FileRow]) -> None:
        self._table = table
        self._path_terms = {r.id: path_tokens(r.path) for r in files}

    def __len__(self) -> int:
        return -(-len(self._table.ids) // _CHUNKS_PER_PART)

    def __iter__(self) -> Iterator[list[tuple[list[str], str, str]]]:
        part: list[tuple[list[str], str, str]] = []
        for f, crumb, text in zip(self._table.file_ids.tolist(), self._table.breadcrumbs, self._table.texts):
            part.append((self._path_terms.get(f, []), crumb, text))
            if len(part) == _CHUNKS_PER_PART:
                yield part
                part = []
        if part:
            yield part


def _concat_tables(a: ChunkTable, b: ChunkTable) -> ChunkTable:
    return ChunkTable(
        ids=np.concatenate([a.ids, b.ids]), file_ids=np.concatenate([a.file_ids, b.file_ids]),
        start_lines=np.concatenate([a.start_lines, b.start_lines]),
        end_lines=np.concatenate([a.end_lines, b.end_lines]), kinds=Joined(a.kinds, b.kinds),
        names=Joined(a.names, b.names), breadcrumbs=Joined(a.breadcrumbs, b.breadcrumbs),
        symbols=a.symbols + b.symbols, texts=a.texts + b.texts,
    )


def _assemble(generation: int, table: ChunkTable, files: list[FileRow], *,
              bm25: BM25Index | StackedBM25 | IndexedBM25,
              symbols: SymbolIndex | StackedSymbols, kinds: dict[int, int] | None = None) -> Snapshot:
    """The per-file maps a query needs, over `files` (the files whose rows are live in `table`); `kinds`: the
    files' kinds when known (saved beside the index; computing them runs regexes over every path)."""
    file_paths = {r.id: r.path for r in files}
    by_id = {r.id: r for r in files}
    by_basename: dict[str, list[str]] = defaultdict(list)
    for path in file_paths.values():
        by_basename[path.rsplit("/", 1)[-1]].append(path)
    if kinds is None:
        kinds = {f: FILE_KINDS.index(file_kind(r.path, r.language)) for f, r in by_id.items()}
    # Per-chunk columns from per-file lookup arrays, a chunk's file found among the files by its id: a restarted
    # editor builds these for 200K chunks before its first answer, so no Python loop over chunks. Arrays indexed
    # by the id itself would be as long as the largest id, which a shared index hands out across every
    # repository and never again: an object array of ~100M entries (4 s) for a repository of 2,500 files.
    chunk_files = table.file_ids
    of_chunk = _file_rows_of(np.fromiter(by_id, np.int64, len(by_id)), chunk_files)  # len(files): none
    path_of = np.array([*(r.path for r in files), ""], dtype=object)
    doc_of = np.array([*(r.is_doc for r in files), False], bool)
    kind_of = np.array([*(kinds.get(f, 0) for f in by_id), 0], np.int8)
    known = of_chunk < len(files)
    chunk_paths = path_of[of_chunk].tolist()
    order = np.argsort(chunk_files, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(chunk_files[order]) != 0]) if len(order) else order
    rows, bounds = order.tolist(), [*starts.tolist(), len(order)]
    file_chunk_rows = {f: rows[a:b] for f, a, b, k in zip(chunk_files[order[starts]].tolist(), bounds, bounds[1:],
                                                          known[order[starts]].tolist()) if k}
    return Snapshot(
        generation=generation, table=table, file_paths=file_paths,
        file_languages={r.id: r.language for r in files}, file_is_doc={r.id: r.is_doc for r in files},
        chunk_paths=chunk_paths, chunk_is_doc=doc_of[of_chunk], chunk_kind=kind_of[of_chunk],
        file_kind=kinds,
        by_basename=dict(by_basename), path_to_file={p: f for f, p in file_paths.items()},
        bm25=bm25, symbols=symbols, file_chunk_rows=file_chunk_rows,
    )


def _file_rows_of(file_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each of `ids`' position in `file_ids` (distinct file ids, in any order), len(file_ids) where it is not
    among them."""
    order = np.argsort(file_ids, kind="stable")
    positions, found = find_sorted(file_ids[order], ids)
    return np.where(found, np.append(order, len(file_ids))[positions], len(file_ids))


def _assemble_delta(base: Snapshot, generation: int, table: ChunkTable, added: list[FileRow], gone: set[int], *,
                    bm25: StackedBM25 | IndexedBM25, symbols: StackedSymbols, live: np.ndarray,
                    pending_files: int) -> Snapshot:
    """`_assemble`'s maps for a delta view, standing on the base's: the files of `gone` taken out, those of
    `added` (whose chunks are `table`'s rows past the base's) put in. At 40K files assembling them anew took 1.7 s
    of the first query after every save (a regex per path for the file kinds, a list per file); copying the
    base's maps and per-chunk lists, then tens of ms of the collector walking the copies."""
    gone_paths = {base.file_paths[f] for f in gone if f in base.file_paths}
    by_name: dict[str, list[str]] = {}  # the basenames the save touched, their paths now
    for path in gone_paths:
        name = path.rsplit("/", 1)[-1]
        by_name.setdefault(name, [p for p in base.by_basename.get(name, []) if p not in gone_paths])
    for r in added:
        name = r.path.rsplit("/", 1)[-1]
        by_name.setdefault(name, list(base.by_basename.get(name, []))).append(r.path)
    n = len(base.table.ids)
    extra_files = table.file_ids[n:].tolist()
    rows_of: dict[int, list[int]] = {}
    for offset, file_id in enumerate(extra_files):
        rows_of.setdefault(file_id, []).append(n + offset)
    file_paths = Overlay(base.file_paths, {r.id: r.path for r in added}, gone)
    is_doc = Overlay(base.file_is_doc, {r.id: r.is_doc for r in added}, gone)
    kinds = Overlay(base.file_kind, {r.id: FILE_KINDS.index(file_kind(r.path, r.language)) for r in added}, gone)
    # The rows of gone files read "", as a full assembly leaves the rows of files it does not know.
    blanked = {row: "" for f in gone for row in base.file_chunk_rows.get(f, [])}
    extra_is_doc = np.array([is_doc.get(f, False) for f in extra_files], bool)
    extra_kind = np.array([kinds.get(f, 0) for f in extra_files], np.int8)
    return Snapshot(
        generation=generation, table=table, file_paths=file_paths,
        file_languages=Overlay(base.file_languages, {r.id: r.language for r in added}, gone), file_is_doc=is_doc,
        chunk_paths=Joined(base.chunk_paths, [file_paths.get(f, "") for f in extra_files], blanked),
        chunk_is_doc=np.concatenate([base.chunk_is_doc, extra_is_doc]),
        chunk_kind=np.concatenate([base.chunk_kind, extra_kind]), file_kind=kinds,
        by_basename=Overlay(base.by_basename, {k: v for k, v in by_name.items() if v}, by_name),
        path_to_file=Overlay(base.path_to_file, {r.path: r.id for r in added}, gone_paths), bm25=bm25,
        symbols=symbols, file_chunk_rows=Overlay(base.file_chunk_rows, rows_of, gone),
        base=base, live=live, pending_files=pending_files, added_paths={r.id: r.path for r in added},
    )


def top_files(snap: Snapshot, fusion: Fusion, count: int) -> np.ndarray:
    """The first `count` files of the fused list (score above zero), in the bundle's order: by score, then path."""
    ids = np.fromiter(fusion.file.keys(), np.int64, len(fusion.file))
    scores = np.fromiter(fusion.file.values(), np.float64, len(fusion.file))
    ids, scores = ids[scores > 0], scores[scores > 0]
    if 0 < count < len(ids):  # the `count` best and every file tied with the last of them (the path breaks ties)
        keep = scores >= np.partition(scores, len(scores) - count)[len(scores) - count]
        ids, scores = ids[keep], scores[keep]
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], snap.file_paths[int(ids[i])]))[:count]
    return ids[order]


def rerank_features(snap: Snapshot, query: str, fusion: Fusion, files: np.ndarray) -> np.ndarray:
    """One row per file of `files` (the fused top, best first), one column per `ranking.RERANK_WEIGHTS` entry."""
    def against_first(lane: str, unranked: float, difference: bool = False) -> np.ndarray:
        """Each file's score in `lane` against the lane's first file's (`unranked` where the lane did not rank it)."""
        out = np.full(len(files), unranked)
        if lane not in fusion.file_scores:
            return out
        ranked, scores = fusion.file_scores[lane]
        same = files[:, None] == ranked[None, :]  # a lane ranks a file once: at most one match a row
        got = same.any(axis=1)
        value, first = scores[same.argmax(axis=1)[got]], float(scores[0])
        out[got] = value - first if difference else value / first if first > 0 else 0.0
        return out

    wanted = _stems_of(_content_words(query))
    paths = [snap.file_paths[int(f)] for f in files]
    fused = np.array([fusion.file[int(f)] for f in files])
    columns = {
        "fused": fused / fused[0],
        "dense": against_first("dense", R.RERANK_DENSE_UNRANKED, difference=True),
        "lexical": against_first("lexical", 0.0),
        "summary": against_first("summary", 0.0),
        "file": against_first("file", 0.0),
        "stem": np.array([1.0 if _name_stems(p.rsplit("/", 1)[-1]) & wanted else 0.0 for p in paths]),
        "depth": np.array([float(p.count("/")) for p in paths]),
    }
    return np.column_stack([columns[name] for name in R.RERANK_WEIGHTS])


def reorder_top(snap: Snapshot, query: str, fusion: Fusion) -> None:
    """The fused top `RERANK_TOP` files put in the order of the learned score (`ranking.RERANK_WEIGHTS`), each
    taking the fused score of its new place: the same scores in another order, so every file stays and the bundle's
    CORE gap rule sees what it saw."""
    files = top_files(snap, fusion, R.RERANK_TOP)
    if len(files) < 2:
        return
    learned = rerank_features(snap, query, fusion, files) @ np.array(list(R.RERANK_WEIGHTS.values()))
    places = [fusion.file[int(f)] for f in files]
    for file_id, score in zip(files[np.argsort(-learned, kind="stable")].tolist(), places):
        fusion.file[file_id] = score


def _content_words(query: str) -> list[str]:
    """The query's words that are not stop words, as written: what a file's name is matched against."""
    return [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query) if w.lower() not in STOP_WORDS]


def _stems_of(words: list[str]) -> set[str]:
    """The stems of `words`' tokens, compared with a file name's (`_name_stems`)."""
    return {stem(t) for w in words for t in tokenize(w)}


@functools.lru_cache(maxsize=65536)
def _name_stems(file_name: str) -> frozenset[str]:
    """Stems of a file name without its extension: a short query naming them lifts the file. Computed for
    the few files a query ranks, not for every file of every snapshot (a second at 40K files)."""
    return frozenset(stem(t) for t in tokenize(file_name.rsplit(".", 1)[0]))


def _rank(scores: np.ndarray, mask: np.ndarray, depth: int, positive_only: bool = True) -> list[int]:
    """Rows under `mask`, best first (ties by row), at most `depth` (`lanes.top.top_rows`).

    Lexical and symbol scores of zero mean "no match" and never rank; a cosine may be any finite value.
    """
    if not positive_only:
        return top_rows(scores, mask & np.isfinite(scores), depth)
    # One mask, whatever the number of matches: a common word matches most rows (85K of 200K chunks), and as a
    # mask `top_rows` narrows them to a few hundred before it sorts (1.2 -> 0.2 ms; a list of the matching rows
    # was partitioned whole). Above zero and below infinity: finite and positive.
    return top_rows(scores, mask & (scores > 0) & (scores < np.inf), depth)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
