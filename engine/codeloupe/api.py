"""The engine's public boundary: a warm `Workspace` and one-shot functions over it.

Everything the CLI, the language server and the tests use is here, and returns dataclasses from
`codeloupe.types` (or the graph/ask result types, re-exported here). Nothing above this module touches the store
or the lanes, and nothing below it imports it: the layers underneath see a workspace as
`codeloupe.context.WorkspaceContext`.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import logging
import os
import re
import sys
import threading
import time
import uuid
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeloupe import ranking as R
from codeloupe.bundle import merge_bundles, trust_notes
from codeloupe.chunk import available_languages as available_languages
from codeloupe.chunk.strategies import (
    ChunkStrategy,
    Strategy,
    StrategyLoad,
    load_workspace_strategies,
    register_strategy,
    registered_strategies,
)
from codeloupe.constants import MAX_TOUR_ENTRY_POINTS as MAX_TOUR_ENTRY_POINTS
from codeloupe.constants import MAX_TOUR_NAMES as MAX_TOUR_NAMES
from codeloupe.constants import TOUR_ENTRY_POINTS as TOUR_ENTRY_POINTS
from codeloupe.constants import TOUR_NAMES as TOUR_NAMES
from codeloupe.discover import UNREADABLE_FOLDER, DiscoverError, Walk, check_root, file_skip_reason, walk
from codeloupe.embed.background import EmbedReport
from codeloupe.errors import InvalidArgument as InvalidArgument
from codeloupe.errors import RemoteError as RemoteError
from codeloupe.errors import UnreadableFile as UnreadableFile
from codeloupe.errors import WorkspaceError
from codeloupe.graph import MAP_ASSETS as MAP_ASSETS
from codeloupe.graph import GraphError as GraphError
from codeloupe.graph import GraphRequest as GraphRequest
from codeloupe.graph import GraphRequestError as GraphRequestError
from codeloupe.graph import NotInGraph as NotInGraph
from codeloupe.graph import folder_sections as folder_sections
from codeloupe.graph import map_asset as map_asset
from codeloupe.graph import render_html as render_html
from codeloupe.graph import render_html_shell as render_html_shell
from codeloupe.graph import render_text as render_text
from codeloupe.graph.model import FileSummary as FileSummary
from codeloupe.graph.model import GraphFolder as GraphFolder
from codeloupe.graph.model import GraphMap as GraphMap
from codeloupe.graph.model import GraphNode as GraphNode
from codeloupe.graph.model import GraphPath as GraphPath
from codeloupe.graph.model import Neighbour as Neighbour
from codeloupe.index import (
    UNREADABLE_FOLDERS_KEY,
    ProgressFn,
    WrittenFn,
    content_hash,
    index_files,
    index_paths,
    index_workspace,
    strategies_in_force,
    walk_skips,
    walked,
)
from codeloupe.index import IndexStopped as IndexStopped
from codeloupe.memory import map_large_blocks_apart
from codeloupe.parallel import process_running, start_kept_worker
from codeloupe.parallel import process_started as process_started
from codeloupe.parallel import still_running as still_running
from codeloupe.regular_file import READ_MAX_BYTES as READ_MAX_BYTES
from codeloupe.regular_file import read_whole
from codeloupe.remote import REVISION_KEY, SOURCE_KEY, fetch_snapshot, is_remote, member_path, parse_remote
from codeloupe.repository_names import repository_name_problem
from codeloupe.secrets import WITHHELD, looks_secret, refusal, withheld
from codeloupe.settings import WORKSPACE_SETTINGS_FILES as WORKSPACE_SETTINGS_FILES
from codeloupe.settings import Settings, load_settings
from codeloupe.settings import SettingsError as SettingsError
from codeloupe.settings import SettingValueError as SettingValueError
from codeloupe.settings import apply as apply_settings  # noqa: F401 (re-exported: the editors overlay settings)
from codeloupe.settings import did_you_mean as did_you_mean
from codeloupe.settings import workspace_digest as workspace_digest
from codeloupe.settings import workspace_settings_files as workspace_settings_files
from codeloupe.snapshot_file import saved_past
from codeloupe.store import CommitMoved as CommitMoved
from codeloupe.store import FileRow, Store
from codeloupe.store import RepositoryDropped as RepositoryDropped
from codeloupe.store import SourceConflict as SourceConflict
from codeloupe.store import StoreError as StoreError
from codeloupe.store.edges import file_text, indexed_path_kind
from codeloupe.store.flows import flow_rows, mark_stale
from codeloupe.store.opening import open_store
from codeloupe.store.protocol import PinnedRevisions
from codeloupe.types import (
    Bundle,
    ChunkingProblem,
    EntryPoint,
    Expansion,
    FileHit,
    Flow,
    FlowOutcome,
    IndexReport,
    IndexStatus,
    Located,
    Progress,
    Related,
    Revisions,
    SkippedPath,
    Symbol,
    Tour,
    UsedDefinition,
    count_line_breaks,
    elided,
    is_blank,
    shown_name_of,
    split_lines,
)

if TYPE_CHECKING:
    from codeloupe.ask.events import AnswerPart as AnswerPart
    from codeloupe.ask.events import AskEvent as AskEvent
    from codeloupe.ask.events import AskResult as AskResult
    from codeloupe.ask.events import Citation as Citation
    from codeloupe.ask.run import AskRun as AskRun
    from codeloupe.entrypoints import FileFindings
    from codeloupe.forge import Census
    from codeloupe.search import LaneScores
    from codeloupe.shared_index import (
        DroppedRepository,
        GlobalIndexStatus,
        GlobalVectorIndex,
        QueuePruned,
        QueueStatus,
        SharedRepository,
    )

log = logging.getLogger(__name__)
remote_log = logging.getLogger("codeloupe.remote")  # what RemoteWorkspace pins, under the name remote.py logs by

# The ask result types, loaded on first use: `codeloupe.ask` pulls in the model client (most of a second).
_ASK_TYPES = {"AnswerPart": "events", "AskEvent": "events", "AskResult": "events", "Citation": "events",
              "AskRun": "run"}  # name: its module in codeloupe.ask


def __getattr__(name: str) -> Any:
    if name in _ASK_TYPES:
        import importlib

        return getattr(importlib.import_module(f"codeloupe.ask.{_ASK_TYPES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The longest question or bug report a server (language server, MCP, HTTP) takes: a pasted report with its
# traceback fits; a pasted file does not, and every character is read by the query's parsing and lanes.
MAX_QUERY_CHARS = 20_000
# Locations one locate request may ask for (MCP's `locate`, HTTP's /v1/locate).
MAX_LOCATE = 1_000
# Entry points a location-shaped query may add to RELATED.
MAX_ENTRY_CANDIDATES = 5
# Lines whose innermost definition a workspace keeps for naming snippets (`_innermost`): a few MB at most.
ANCHOR_LINES_KEPT = 20000

# Line comments and doc-comment continuations, for the comment block right above a definition.
_COMMENT_MARKS = ("#", "//", "/*", "*", "--", ";")
# A docstring: a string literal first in a definition's body (longest quote first).
_STRING_QUOTES = ('"""', "'''", '"', "'", "`")


def tour_counts(limit: int, entry_points: int) -> tuple[int, int]:
    """How many names and entry points a tour lists, each refused outside 1-`MAX_TOUR_NAMES` and
    1-`MAX_TOUR_ENTRY_POINTS` (a generated tree can hold thousands of entry points), naming the count; a surface
    asks before it waits for a first index, so a refusal never waits for one."""
    for name, count, most in (("entry_points", entry_points, MAX_TOUR_ENTRY_POINTS), ("limit", limit, MAX_TOUR_NAMES)):
        if not 1 <= count <= most:
            raise WorkspaceError(f"{name} must be from 1 to {most}, got {count}")
    return limit, entry_points


def name_closeness(query: str, name: str) -> int:
    """How plainly a definition named `name` is what a symbol query names (0 best: exact, any case, prefix, the
    rest): the order in which the answers of several folders or repositories are put together, each one's own
    order kept within a tier (`Workspace.search_symbols` ranks only its own)."""
    wanted = query.strip().rsplit(".", 1)[-1].rsplit("::", 1)[-1]
    if name == wanted:
        return 0
    if name.lower() == wanted.lower():
        return 1
    return 2 if name.lower().startswith(wanted.lower()) else 3


def check_query(text: str, argument: str = "query") -> None:
    """Refuse a query or question with nothing to search for (`is_blank`: whitespace, NUL and other control or
    format characters only) with `InvalidArgument` naming `argument`, as the command line and the language server
    refuse it: a surface calls it before it waits for a first index, since no index would answer it."""
    if is_blank(text):
        raise InvalidArgument(argument, "must not be blank (whitespace or control characters only)")


def check_scope(scope: str, argument: str = "scope") -> None:
    """Refuse a scope a client sent blank (empty or whitespace only) with `InvalidArgument` naming `argument`: it
    was read as no scope, so a client that meant a folder and passed nothing was answered from the whole workspace
    without a word. A surface calls it only for a scope the client sent: one left out searches all of it, and so
    does "" where a protocol cannot leave it out (the language server's `scope`, the CLI's `--scope`)."""
    if not scope.strip():
        raise InvalidArgument(argument, "is blank: name a folder or file of the workspace, or leave it out to "
                                        "search all of it")


def check_locate_text(text: str) -> None:
    """Refuse a text `Workspace.locate` cannot look for (empty, blank, or of several lines) with `InvalidArgument`
    naming `text`: a surface calls it before it indexes anything, since no index would answer it. A blank one is
    told apart from an empty one: "must not be empty" left a client that sent spaces wondering what it sent."""
    if not text:
        raise InvalidArgument("text", "must not be empty")
    if not text.strip():
        raise InvalidArgument("text", "is blank (whitespace only): send the exact text to find, such as an identifier")
    lines = count_line_breaks(text) + 1
    if lines > 1:
        raise InvalidArgument("text", f"must be one line, got {lines:,} lines")


class Workspace:
    """One indexed workspace folder, kept warm: the store plus the lanes' in-memory matrices.

    Safe to share between threads: writes to the store are serialised by the store, and the searcher
    reloads its matrices when the store's generation counters move.
    """

    # Whether the first queries may be answered before a bulk change is searchable (see `__init__`).
    interim_answers: bool = False
    # Whether its answers go to agents rather than to the user's own eyes: set by the servers that answer agents
    # (MCP and HTTP, whose answers land in a cloud model's context), never by the CLI or the editors. Files that look
    # like secrets (`codeloupe.secrets.looks_secret`: `.env*`, keys, credentials) are then listed as candidates
    # and their content withheld: no chunk of theirs in a bundle, related chunks or the graph, no line of theirs
    # located, and a read of one (`expand`) refused.
    withholds_secrets: bool = False

    def __init__(self, root: Path | str, settings: Settings | None = None,
                 overrides: dict[str, Any] | None = None, *, check_index: bool = True,
                 interim_answers: bool = False, replace_source: bool = False,
                 create_repository: bool = True) -> None:
        """`check_index=False` opens the index without its integrity check (seconds on a large one); the
        caller runs `check_index()` before it indexes (the language server, once its progress shows).

        `interim_answers=True`, for a process that stays open (the language server): when more files changed
        since the last saved search snapshot than a delta view takes in (a branch switch with the editor
        closed), the first queries are answered from that snapshot without the changed files, the lexical
        lane's note saying how many are still to come, while the full one is built in the background (a
        minute at 40K files). A one-shot command (the default) builds it before its first answer.

        On the shared index, a repository that holds another folder's files is refused (`SourceConflict`: its
        answers would not be this folder's code, nor its writes go to this folder's repository), unless
        `replace_source` makes this folder its source (`codeloupe index --replace`: the next `index()` replaces
        the other folder's files with this one's). A repository the shared index does not hold is added, unless
        `create_repository=False` (a command that only answers from it: a mistyped name is refused, naming the
        repositories it holds, rather than added empty)."""
        self.interim_answers = interim_answers
        try:
            self.root = check_root(Path(root))
        except DiscoverError as exc:
            raise WorkspaceError(str(exc)) from None
        if settings is None:  # a caller that loads them shows their notices itself (the CLI, the servers)
            settings = load_settings(self.root, overrides)
            # What every surface tells of them: keys not used, settings ignored, the endpoints trusted files chose.
            for notice in settings.notices:
                log.warning("%s", notice.removeprefix("codeloupe: "))
        self.settings = settings
        # Trusted strategy files are imported here; every other one is named in `strategy_load.warnings`.
        self._open(self.settings.index_path(self.root), load_workspace_strategies(self.root), check_index,
                   create_repository, folder=self.root)
        self._claim_shared_source(replace_source)

    def _open(self, index_path: Path, strategy_load: StrategyLoad, check_index: bool = True,
              create_repository: bool = True, folder: Path | None = None) -> None:
        """Everything but where the files come from (shared with `RemoteWorkspace`); `folder`: the workspace's,
        where it has one (`open_store`)."""
        map_large_blocks_apart()  # a warm workspace's matrices are most of its process: see `codeloupe.memory`
        self.store = open_store(self.settings, self.root, index_path, check=check_index, create=create_repository,
                                folder=folder)
        if isinstance(self.store, Store) and saved_past(self.store.path, self.store.index_id,
                                                          self.store.generation("content")):
            log.warning("the index %s holds an earlier state than the files saved beside it (its last writes were"
                        " lost): what was saved beside it is built again", index_path)
            self.store.renew_index_id()
        self.closed = False
        self.strategy_load = strategy_load
        self._lock = threading.RLock()
        self._searcher = None
        self._provider = None
        self._embedding_stopped = threading.Event()  # `stop_embedding` was called
        self._entry_points: tuple[int, list[EntryPoint], FileFindings] | None = None
        # (index generation, (path, line) -> the innermost definition holding the line, or None)
        self._anchor_names: tuple[int, dict[tuple[str, int], str | None]] = (-1, {})

    # ------------------------------------------------------------------ paths

    @property
    def repository_name(self) -> str:
        """What a search across repositories calls this one."""
        return self.root.name

    def relative(self, path: Path | str) -> str:
        """The POSIX path of `path` relative to the root; refuses anything that escapes the workspace."""
        if "\0" in str(path):
            raise WorkspaceError(f"{elided(str(path))}: not a path (it holds a NUL byte)")
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError):  # a link that leads to itself (Python before 3.13 raises RuntimeError)
            raise WorkspaceError(f"{elided(str(path))}: a symbolic link that leads to itself") from None
        try:
            rel = resolved.relative_to(self.root)
        except ValueError:
            raise WorkspaceError(f"{elided(str(path))}: outside the workspace {self.root}") from None
        return rel.as_posix()

    # ------------------------------------------------------------------ indexing

    def walk(self, should_stop: Callable[[], bool] | None = None) -> Walk:
        """The files the next `index()` looks at (the path rules applied; nothing read, nothing written). At 40K
        files it takes seconds: an editor walks off its writer, indexing saves meanwhile, then passes it on.
        `should_stop`, asked as the folders are listed: once true, `IndexStopped` is raised."""
        return walk(self.root, self.settings, should_stop)

    def index(self, progress: ProgressFn | None = None, *, edges: bool = True,
              found: Walk | None = None, should_stop: Callable[[], bool] | None = None) -> IndexReport:
        """Chunk and store everything that changed, then refresh graph edges (derived data, no vectors).

        Lexical and symbol lanes are ready when this returns; vectors come from `embed`. `edges=False` leaves
        the graph to the caller's `refresh_graph()`: resolving a large workspace's edges takes minutes, and
        an editor should answer from the chunks meanwhile. `found`: a `walk()` taken beforehand (files saved
        since were indexed by `update_files` and are kept as saved). `should_stop` (a served workspace closing),
        asked as the walk lists the folders, before each file is written, before the edges and as their facts
        are taken: once true, `IndexStopped` is raised with the chunking workers killed, each file written so far
        whole in the index; the next run does the rest. A run with `edges=False` whose files are all written has
        finished: it returns its report however late the stop.
        """
        from codeloupe.graph import ensure_edges

        strategies = self._strategies()

        def run(written: WrittenFn | None) -> IndexReport:
            return index_workspace(self.root, self.store, self.settings, progress, strategies, found, should_stop,
                                   written)

        if isinstance(self.store, Store):
            # A first index's kept term counts are joined as it writes them, for the first snapshot's build.
            with self.searcher().joined_as_written(settle=edges, should_stop=should_stop) as written:
                report = run(written)
        else:  # the shared index (its driver is imported only for one): pinned to the commit once written
            from codeloupe.shared_index import pinned_source

            with pinned_source(self.store, self.root) as ended:
                report = run(None)
            if not ended.pinned:  # superseded by a later run, which deletes the files that left the folder
                report.files_deleted = 0
        self._note_strategy_warnings(report)
        if edges:
            _stop_before_edges(should_stop)
            ensure_edges(self, should_stop)  # a no-op when nothing changed since the edges were last resolved
        mark_stale(self.store)  # cached walkthroughs citing a changed or deleted file
        return report

    def _claim_shared_source(self, replace: bool) -> None:
        if isinstance(self.store, Store):
            if replace:
                raise WorkspaceError("--replace makes a folder the source of a repository of the shared index:"
                                     " only with --store (or store_url)")
            return
        from codeloupe.shared_index import check_source, claim_source

        if replace:
            claim_source(self.store, self.root, replace=True)  # pinned by the run that writes its files
        else:
            check_source(self.store, self.root)

    def _check_shared_source(self) -> None:
        """On the shared index, refuse (`SourceConflict`, naming both folders) to answer once another process
        made another folder the repository's source (`index --replace`) since this one opened it: the index now
        ranks that folder's files, while this process would show its own folder's lines from disk under them
        (seen at most `STATE_TTL_S` late, as every change of the repository is)."""
        if not isinstance(self.store, Store):
            self.store.check_source()

    def check_index(self) -> str:
        """Run the integrity check deferred by `check_index=False`; returns why the index was rebuilt ("" when
        it was sound: a damaged one is moved aside and the next `index()` fills a new one)."""
        recoveries = self.store.recoveries
        self.store.check()
        return self.store.rebuilt_reason if self.store.recoveries != recoveries else ""

    def update_files(self, paths: Iterable[Path | str]) -> IndexReport:
        """Re-index files that were saved, created or deleted (the editor's fast path).

        Search sees the change at once (a delta view); graph edges follow at the next fresh graph read or
        `refresh_graph()`, re-resolving only the files the change can reach. On the shared index, refused
        (`SourceConflict`) once another process made another folder the repository's source (`index --replace`)
        since this one opened it: the save would write this folder's files among that folder's.
        """
        rel_paths = [self.relative(p) for p in paths]
        writing: AbstractContextManager[None] = nullcontext()
        if not isinstance(self.store, Store):  # the shared index (its driver is imported only for one)
            from codeloupe.shared_index import check_source, saved_at

            check_source(self.store, self.root)
            writing = saved_at(self.store, self.root, rel_paths)  # each file cited at the revision it was read at
        with writing:
            report = index_paths(self.root, self.store, self.settings, rel_paths, self._strategies())
        self._note_strategy_warnings(report)
        mark_stale(self.store)
        return report

    def _note_strategy_warnings(self, report: IndexReport) -> None:
        """A strategy found failing to load while chunking joins `strategy_load.warnings`, said (logged) the first
        time only: each index that re-chunks its files finds it again."""
        for warning in report.strategy_warnings:
            if warning not in self.strategy_load.warnings:
                self.strategy_load.warnings.append(warning)
                log.warning("%s", warning)

    def strategies(self) -> tuple[Strategy, ...]:
        """The chunk strategies in force: API-registered first, then the workspace's trusted ones."""
        return _in_force(self.strategy_load)

    def _strategies(self) -> tuple[Strategy, ...]:
        """The strategies in force (`index.strategies_in_force`: the files a changed set claims re-chunk)."""
        return strategies_in_force(self.store, self.strategies())

    def embedding_provider(self):
        """The configured embedding provider, created once (loading a model is the slow part). The first load on a
        machine derives the local model (seconds of CPU, in a child process): `stop_embedding` ends it, and this
        raises `EmbeddingStopped` (nothing is kept; a later call derives it again)."""
        from codeloupe.embed import make_provider

        with self._lock:
            if self._provider is None:
                self._provider = make_provider(self.settings, should_stop=self._embedding_stopped.is_set)
            return self._provider

    def embed(self, progress: ProgressFn | None = None, prefer_paths: Iterable[str] = (),
              should_stop: Callable[[], bool] | None = None):
        """Compute missing vectors: skeletons first, then chunks of `prefer_paths`, then the rest. A model whose
        first load `stop_embedding` ended leaves the run stopped with nothing done."""
        from codeloupe.embed import EmbeddingStopped
        from codeloupe.embed.background import EmbedReport, embed_pending

        try:
            provider = self.embedding_provider()
        except EmbeddingStopped:
            return EmbedReport(stopped=True)
        return embed_pending(self.store, provider, self.settings, progress=progress,
                             prefer_paths=list(prefer_paths), should_stop=should_stop)

    def stop_embedding(self) -> None:
        """Make an `embed` running on another thread return now (stopped), for a workspace being closed: the step
        it was computing is dropped (none of its vectors is written; the next run computes them) and its worker
        processes are killed, where `should_stop` would let the step finish; the local model embeds no bulk call
        after, while a search's query still is (its dense lane answers until the workspace is closed); a remote
        provider's request ends within its own timeout. A provider still loading is not waited for (its lock is
        not taken): the local model's first derivation, whichever call started it, is killed within a tenth of a
        second (nothing of it kept: the next start derives it again), and no later call derives it."""
        self._embedding_stopped.set()
        provider = self._provider
        if provider is not None:
            provider.stop_bulk()

    def forge(self, extensions: list[str] | None = None, on_attempt: Callable[..., None] | None = None):
        """Have the chat model write a chunk strategy per uncovered extension, each accepted only by the
        partition check (`codeloupe.forge.ForgeOutcome` each); accepted ones are trusted and in force at once."""
        from codeloupe.forge import forge

        outcomes = forge(self.root, self.settings, extensions=extensions, strategies=self.strategies(),
                         on_attempt=on_attempt)
        if any(outcome.accepted for outcome in outcomes):
            self.strategy_load = load_workspace_strategies(self.root)
        return outcomes

    # ------------------------------------------------------------------ queries

    def searcher(self):
        """What ranks this workspace's answers (refused once another folder replaced this one as its shared
        repository's source: `_check_shared_source`)."""
        from codeloupe.search import Searcher

        self._check_shared_source()
        with self._lock:
            if self._searcher is None:
                self._searcher = Searcher(self)
            return self._searcher

    def search(self, query: str, *, scope: str = "", mode: str = "code", limit: int = 12,
               peers: Sequence[LaneScores] = ()) -> Bundle:
        """The ranked bundle; a location-shaped query ("where does the CLI start") also gets the workspace's
        entry points that retrieval missed, at the end of RELATED (candidates, never a change of order).
        `peers`: see `search_repositories`."""
        from codeloupe.entrypoints import location_shaped

        scope = self._indexed_name(scope)
        bundle = self.searcher().search(query, scope=scope, mode=mode, limit=limit, peers=peers)
        if mode != "docs" and not bundle.issue_mode and location_shaped(query):
            self._add_entry_points(bundle, scope)
        self._name_anchors(bundle)
        revisions = self.revisions()
        bundle.revision = revisions.pinned
        for hit in bundle.files:
            hit.revision = revisions.of(hit.path)
        scope_indexed = bundle.files != [] or self.searcher().holds_folder(scope)
        workspace_indexed = scope_indexed or self.searcher().holds_folder("")
        unfinished = self._unfinished_index()
        bundle.notes = [*([unfinished] if unfinished else []),
                        *trust_notes(bundle, scope_indexed=scope_indexed, workspace_indexed=workspace_indexed)]
        self._withhold_secrets(bundle)  # after the notes, which judge the answer by the chunks that matched
        return bundle

    def _withhold_secrets(self, bundle: Bundle) -> None:
        """Empty each candidate file that is `withheld` of its code, snippets and symbols (all read from it), and
        say so on its map line and in a note: the file stays a candidate in its place (rule 2)."""
        hidden = [hit for hit in bundle.files if withheld(self, hit.path)]
        for hit in hidden:
            hit.chunks, hit.symbols, hit.withheld = [], [], True
            if WITHHELD not in hit.why:  # an entry point's why says so already (`entry_points` withholds its detail)
                hit.why = f"{hit.why}; {WITHHELD}" if hit.why else WITHHELD
        if hidden:
            files = "1 candidate file looks" if len(hidden) == 1 else f"{len(hidden)} candidate files look"
            bundle.notes.append(f"{files} like a secret (keys, credentials, .env files): listed, content withheld")

    def _unfinished_index(self) -> str:
        """Why answers may lack files of the shared index's repository: an index run under way, or cut off
        (`PgStore.index_run`); "" when every run finished, and on a workspace's own index (indexed by whatever opens
        it before it answers)."""
        return "" if isinstance(self.store, Store) else self.store.unfinished_index()

    def _add_entry_points(self, bundle: Bundle, scope: str) -> None:
        scope = scope.strip().strip("/")
        words = {w.lower() for w in re.findall(r"[A-Za-z0-9]+", bundle.query)}
        # Declared entry points first, then those whose path names a word of the query ("cli"), then the rest.
        points = sorted(self.entry_points(), key=lambda p: (
            p.kind != "manifest" and not words & {w.lower() for w in re.findall(r"[A-Za-z0-9]+", p.path)}))
        by_path: dict[str, list[EntryPoint]] = {}
        for point in points:
            if not scope or scope == "." or point.path == scope or point.path.startswith(scope + "/"):
                by_path.setdefault(point.path, []).append(point)
        known = {hit.path: hit for hit in bundle.files}
        rows = self.store.file_rows() if by_path else {}
        for path, points in list(by_path.items())[:MAX_ENTRY_CANDIDATES]:
            why = "entry point: " + "; ".join(f"{p.kind} ({p.detail})" for p in points)
            if path in known:
                known[path].why = f"{known[path].why}; {why}" if known[path].why else why
                continue
            language = rows[path].language if path in rows else ""
            bundle.related.append(FileHit(path=path, language=language, rank=len(bundle.files) + 1, score=0.0,
                                          best_start_line=points[0].line, best_end_line=points[0].line, symbols=[],
                                          why=why, via="entry"))

    def entry_points(self) -> list[EntryPoint]:
        """Where the workspace's programs start: manifests, `__main__` guards, `main` definitions, shebangs."""
        from codeloupe.entrypoints import entry_points

        generation = self.store.generation("content")
        cached = self._entry_points
        if cached is None or cached[0] != generation:
            self._entry_points = (generation, *entry_points(self, cached[2] if cached else None))
        # What says so is a line of the file (its shebang, its `main`'s signature): withheld with its content.
        return [dataclasses.replace(point, detail=WITHHELD) if withheld(self, point.path) else point
                for point in self._entry_points[1]]

    def tour(self, *, limit: int = 20, entry_point_limit: int = TOUR_ENTRY_POINTS) -> Tour:
        """Where to start reading: the strongest `entry_point_limit` entry points (counting the rest), then the
        `limit` names defined here that most files mention."""
        from codeloupe.tour import build_tour

        return build_tour(self, limit, entry_point_limit)

    def _name_anchors(self, bundle: Bundle) -> None:
        """Each snippet names the innermost definition holding its anchor line, so an editor labels a result
        with the symbol the match is in rather than the chunk's first symbol."""
        chunks = [c for hit in bundle.files for c in hit.chunks if c.snippet is not None]
        named = self._innermost({(c.path, c.snippet.anchor_line) for c in chunks})
        for chunk in chunks:
            name = named[chunk.path, chunk.snippet.anchor_line]
            if name is not None:
                chunk.snippet.anchor_symbol = name

    def _innermost(self, lines: set[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        """The innermost definition holding each (path, line), as `Parent.name` (None where none does), kept per
        index generation for the last `ANCHOR_LINES_KEPT` lines or so: the snippets a search shows land on
        the same lines from query to query, and the store is asked only for the definitions holding the
        others (every definition of the files was thousands of rows for a search's dozen files).

        Keys and values of plain strings and numbers, which the garbage collector stops tracking: each full
        pass of the collector walked what a session's searches kept (~25 ms every 25-30 queries)."""
        generation = self.store.generation("content")
        kept_generation, known = self._anchor_names
        missing = lines - known.keys()
        if kept_generation != generation or len(known) + len(missing) > ANCHOR_LINES_KEPT:
            known, missing = {}, lines
            self._anchor_names = (generation, known)
        if missing:
            for pair, holding in self.store.definitions_holding(missing).items():
                known[pair] = None
                if holding:  # the innermost: the latest start, then the earliest end (then by name: one answer)
                    _, _, name, parent = max(holding, key=lambda d: (d[0], -d[1], d[2], d[3]))
                    known[pair] = f"{parent}.{name}" if parent else name
        return {pair: known[pair] for pair in lines}

    def symbols(self, paths: Iterable[str]) -> dict[str, list[Symbol]]:
        """The definitions of each indexed file among `paths` (files not in the index are left out)."""
        rows = self.store.file_rows()
        return {path: [Symbol(s.name, s.kind, s.start_line, s.end_line, s.parent, s.signature)
                       for s in self.store.symbols_of_file(rows[path].id)]
                for path in paths if path in rows}

    def warm(self, *, graph: bool = True) -> None:
        """Bring every reader up to date with the index: the search snapshot (after a few changed files, a view
        of them beside the last one, rebuilt in full in the background), graph edges and graph (`graph=False`:
        the snapshot only; the graph follows with `refresh_graph()`).

        Whoever writes the index calls this afterwards, so no query, hover or lens pays for the rebuild.
        """
        self.searcher().catch_up()
        if graph:
            self.refresh_graph()

    def wait_for_lanes(self) -> None:
        """Return once the lanes a search of the index as it stands uses are built in this process, as a warm
        server holds them: past 2,000 files (`QUERY_BUILD_MAX_FILES`) the graph and the summary lane are built on
        threads of their own, and searches meanwhile answer without them. For whoever measures the ranking
        (the benches); nothing that answers a user waits for them."""
        self.refresh_graph()  # built (or loaded) here, where a search would start it on a thread
        self.searcher().snapshot().summaries_waited_for(self)

    def prepare_search(self) -> bool:
        """Build what a process opening the index builds at its start, and save it beside the index, unless it
        is saved already: the search snapshot, the graph and the summary lane made with it. For whoever writes
        the index and then exits (`codeloupe index` in a terminal): the next process to search it (an editor
        starting, `codeloupe search`) loads them instead of building them, which at 40K files was most of its
        first answer and then tens of seconds of background work beside its next ones. A process that stays
        open keeps its own current with `warm`. Returns whether it built anything (a no-op re-index reads only
        the saved files' stamps)."""
        from codeloupe.graph.build import saved_graph_current

        searcher = self.searcher()
        built = not searcher.prepared()
        if built:
            searcher.refresh()
        if not saved_graph_current(self):
            self.refresh_graph()
            built = True
        return searcher.prepare_summaries() or built

    def refresh_graph(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Re-resolve edges of changed files and rebuild the graph, so hovers, lenses and a map asked for next
        read it fresh. The map itself is listed when asked for (`graph_map`): listed here, after every save,
        and thrown away, it was about half of a save's graph work at 40K files. `should_stop` (a served workspace
        closing), asked as the edges' facts are taken: once true, `IndexStopped` is raised with none of them kept
        (their workers killed); the next refresh takes them again."""
        from codeloupe.graph.build import load_graph

        load_graph(self, should_stop=should_stop)

    def status(self) -> IndexStatus:
        from codeloupe.embed import describe_provider

        counts = self.store.counts()
        provider, model = describe_provider(self.settings)
        done = self.store.vector_counts(model) if model else {"chunks_done": 0, "skeletons_done": 0}
        skipped = Counter(self.store.skipped_counts())  # the files skipped for their content
        skipped.update(walk_skips(self.store).counts)
        unreadable = int(self.store.get_meta(UNREADABLE_FOLDERS_KEY, "0"))
        if unreadable > skipped.get(UNREADABLE_FOLDER, 0):  # the folders past those the index names, counted
            skipped[UNREADABLE_FOLDER] = unreadable
        return IndexStatus(
            root=str(self.root), index_path=self._index_location(), files=counts["files"], chunks=counts["chunks"],
            symbols=counts["symbols"], languages=self.store.language_counts(),
            vectors_done=done["chunks_done"], vectors_total=counts["chunks"],
            skeleton_vectors_done=done["skeletons_done"], provider=provider, model=model,
            schema_version=int(self.store.get_meta("schema_version", "0")),
            skipped=dict(sorted(skipped.items())), indexing=self._unfinished_index(), indexed=walked(self.store),
        )

    def skipped_files(self) -> list[SkippedPath]:
        """The files the index skipped for their content, name (binary file types, lockfiles, ...) or size, or as
        compiled copies, and the folders it could not read (`dir/`), by path (why a file is not found: `codeloupe
        stats --skipped`): of those skipped by name or size or as copies, the first `WALK_SKIPS_NAMED` by path
        (`status().skipped` counts them all). The files ignore rules leave out and the folders not walked are not
        listed."""
        named = {path: s.reason for path, s in self.store.skipped_files().items()}
        named.update(walk_skips(self.store).named)
        return [SkippedPath(path, reason) for path, reason in sorted(named.items())]

    def chunking_problems(self) -> list[ChunkingProblem]:
        """The files a trusted chunk strategy or the chunker failed on, by path, and why (`codeloupe stats
        --skipped`, MCP's `status`): each was chunked as it would be without the strategy, or in line windows."""
        return [ChunkingProblem(path, reason) for path, reason in self.store.chunking_problems()]

    def _index_location(self) -> str:
        """Where the index is: its file, or the shared database (no password) and the repository in it."""
        if isinstance(self.store, Store):
            return str(self.store.path)
        from codeloupe.url_secrets import redact

        return f"{redact(self.store.url)} (repository {self.store.repository})"

    @property
    def revision(self) -> str:
        """The commit every path is read at: "" for a folder on disk (whatever it holds now); in the shared
        index, the commit the repository was indexed at."""
        return "" if isinstance(self.store, Store) else self.store.commit

    def revisions(self) -> Revisions:
        """The revision each file was read at: in the shared index, the commit the repository is pinned to but for
        the files a queued index run not yet ended has written (`PgStore.revisions`); else `revision` for all."""
        return self.store.revisions() if isinstance(self.store, PinnedRevisions) else Revisions(self.revision)

    def path_kind(self, rel: str) -> str:
        """What the workspace folder holds at `rel` now: "file", "folder", or "" (nothing, or a name no file
        system takes)."""
        where = self.root / rel
        try:
            return "file" if where.is_file() else "folder" if where.is_dir() else ""
        except (OSError, ValueError):  # a name too long for the file system
            return ""

    def read_bytes(self, path: str) -> bytes:
        """A workspace file's bytes as they are now (its source: the disk); OSError when it cannot be read, is
        not a regular file (a FIFO would wait for a writer, a device never end) or is over `READ_MAX_BYTES`;
        `WorkspaceError` for a file whose content is `withheld`. Refused once another folder replaced this one as
        its shared repository's source (`_check_shared_source`)."""
        self._check_shared_source()
        rel = self.relative(path)
        # Checked on the path resolved: an indexed file swapped since for a link to a `.env` is read as the `.env`,
        # and every answer reading the disk (a graph node's chunks, a name mapped by `_indexed_name`) checked the
        # name it was asked for.
        if withheld(self, rel):
            raise WorkspaceError(refusal(rel))
        return read_whole(self.root / rel)

    def read_lines(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Lines `start_line..end_line` (1-based, inclusive) of a workspace file, verbatim from its source."""
        rel = self.relative(path)
        return self._lines_of(rel, self._source_bytes(rel), start_line, end_line)

    def _source_bytes(self, rel: str) -> bytes:
        """`read_bytes`, a file that cannot be read refused in words (`WorkspaceError`; `UnreadableFile` where it is
        there)."""
        try:
            return self.read_bytes(rel)
        except FileNotFoundError:
            raise WorkspaceError(f"{elided(rel)}: no such file in the workspace (deleted since it was indexed?)") from None
        except OSError as exc:
            raise UnreadableFile(f"{elided(rel)}: cannot be read ({exc.strerror or exc})") from None

    def _lines_of(self, rel: str, raw: bytes, start_line: int | None, end_line: int | None) -> str:
        # Decoded as the index decoded it, so that the lines are those search and locate numbered: a Windows-1252
        # file read as UTF-8 showed U+FFFD for each accented letter, a UTF-16 one NULs, a byte-order mark a character.
        row = self.store.file_rows([rel]).get(rel)
        encoding = (self.store.file_encoding(row.id) if row is not None else "") or "utf-8"
        lines = split_lines(raw.decode(encoding, errors="replace"))
        if start_line is None and end_line is None:
            return "".join(lines)
        start_line = 1 if start_line is None else start_line  # an end alone: the file's start up to it
        if end_line is not None and end_line < start_line:
            raise WorkspaceError(f"{rel}: lines {start_line}-{end_line} end before they start")
        if start_line < 1 or start_line > max(len(lines), 1):
            shown = f"{start_line}-{end_line}" if end_line is not None else f"from {start_line}"
            raise WorkspaceError(f"{rel}: lines {shown} are outside the file (1-{len(lines)})")
        end_line = len(lines) if end_line is None else end_line
        return "".join(lines[start_line - 1:end_line])

    def expand(self, path: str, start_line: int | None = None, end_line: int | None = None, *,
               symbol: str = "", line: int | None = None) -> Expansion:
        """Lines of an indexed file, verbatim from disk: the whole file, `start_line..end_line` (a range past
        the end is clipped), a definition by (qualified) name, or the innermost definition around an anchor
        `line` (the chunk around it when no definition encloses it).

        Only files in the index are read (the containment check plus the discovery rules: an ignored `.env`
        or a skipped binary is never served). `path` may name a file as the answers show it (`_indexed_name`: MCP's
        text, the CLI's), where an agent copies it from. A definition of a file changed on disk since it was
        indexed is refused: its lines are the index's, and would show other code under its name. A range with a
        symbol or an anchor `line` is refused: each chooses the lines, and the range was dropped without a word
        (the whole definition answered a call that asked for two of its lines).
        """
        if (start_line is not None or end_line is not None) and (symbol or line is not None):
            raise WorkspaceError("a line range is read on its own, not with a symbol or an anchor line (each "
                                 "chooses the lines): ask for one of them")
        rel = self.relative(path)
        row = self.store.file_rows([rel]).get(rel)
        if row is None and (held := self._indexed_name(path)) != path:
            row = self.store.file_rows([held]).get(held)
            rel = held if row is not None else rel  # a folder is no file to read
        if withheld(self, rel):  # whether or not it is indexed: a refusal tells nothing of the file
            raise WorkspaceError(refusal(rel))
        if row is None:
            reason = self.skip_reason(rel)
            raise WorkspaceError(f"{elided(rel)}: not in the index: the index skips it ({reason})" if reason else
                                 f"{elided(rel)}: no such file in the index (not indexed, ignored, or deleted)"
                                 + self._lines_in_path_hint(rel))
        raw = self._source_bytes(rel)
        chosen = ""
        if symbol or line is not None:
            if self._changed_since_indexed(raw, row):
                asked = repr(symbol) if symbol else f"the definition around line {line}"
                raise WorkspaceError(f"{rel}: changed on disk since it was indexed, so where {asked} lies is not "
                                     "known until it is indexed again (ask again in a moment, or ask for lines by "
                                     "number)")
            start_line, end_line, chosen = self._definition_span(rel, row.id, symbol, line)
        text = self._lines_of(rel, raw, start_line, end_line)
        first = 1 if start_line is None else start_line
        return Expansion(rel, first, first + max(len(split_lines(text)), 1) - 1, text, chosen)

    def _lines_in_path_hint(self, rel: str) -> str:
        """Where `rel` is an indexed file's path with lines after it, as every answer shows a span (`app.py:12-30`,
        which an agent copies whole into the path): what to pass instead, where "no such file" alone sent it
        looking for a file that exists."""
        spelled = re.fullmatch(r"(.+):(\d+)(?:-(\d+))?", rel)
        if spelled is None or not self.store.file_rows([spelled[1]]):
            return ""
        lines = f"lines {spelled[2]} to {spelled[3]}" if spelled[3] else f"line {spelled[2]}"
        return (f"; {spelled[1]} is, and `{rel[len(spelled[1]):]}` after it reads as its {lines}: give the path"
                " alone and the lines as the range")

    def _changed_since_indexed(self, raw: bytes, row: FileRow) -> bool:
        """Whether a file's bytes as read now are not those the index holds (its lines and definitions stale)."""
        return content_hash(raw) != row.hash

    def skip_reason(self, rel: str) -> str:
        """Why the index skips the workspace file `rel` by the discovery rules (binary, too large, generated,
        ignored, ...: the reasons `stats --skipped` gives); "" when it is no file here or would be indexed."""
        if not os.path.lexists(self.root / rel):
            return ""
        try:
            return file_skip_reason(self.root, rel, self.settings)
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"

    def _definition_span(self, rel: str, file_id: int, symbol: str, line: int | None) -> tuple[int, int, str]:
        symbols = self.symbols([rel]).get(rel, [])
        if symbol:
            found = [s for s in symbols if s.qualified_name == symbol] or [s for s in symbols if s.name == symbol]
            if not found:
                raise WorkspaceError(f"{rel}: defines no symbol named '{elided(symbol)}'")
            if len(found) > 1 and (span := _one_definition(found, symbols)) is not None:
                return span
            # The line the refusal below asks for picks the one holding it (the innermost, as a line alone does).
            holding = [s for s in found if line is not None and s.start_line <= line <= s.end_line]
            if len(found) > 1 and holding:
                found = [min(holding, key=lambda s: s.end_line - s.start_line)]
            if len(found) > 1:
                names = ", ".join(f"{s.qualified_name} (line {s.start_line})" for s in found[:10])
                hint = f"line {line} is in none of them" if line is not None else \
                    "pass the qualified name" if len({s.qualified_name for s in found}) > 1 else \
                    "pass anchor_line (`line`) inside the one to read"
                raise WorkspaceError(f"{rel}: '{elided(symbol)}' is ambiguous: {names}; {hint}")
            return found[0].start_line, found[0].end_line, found[0].qualified_name
        assert line is not None
        around = [s for s in symbols if s.start_line <= line <= s.end_line]
        if around:
            inner = min(around, key=lambda s: s.end_line - s.start_line)
            return inner.start_line, inner.end_line, inner.qualified_name
        table = self.store.chunk_table([file_id])
        for start, end in zip(table.start_lines.tolist(), table.end_lines.tolist()):
            if start <= line <= end:
                return start, end, ""
        raise WorkspaceError(f"{rel}: line {line} is outside the file")

    def locate(self, text: str, *, identifier: bool = False, limit: int = 100) -> Located:
        """Every line of the indexed chunks holding `text` exactly (case-sensitive), in path and line order.

        Reads the search snapshot's copy of the chunks (no disk walk, so ignored and skipped files never
        match). `identifier` matches whole identifiers only: `get` does not match `getUser`. An empty `text`, or
        one of several lines, is refused (`InvalidArgument`, as `check_locate_text` refuses it). Each location
        names the innermost definition holding its line (`symbol`).
        """
        check_locate_text(text)
        from codeloupe.locate import locate_lines

        # A file that looks like a secret is not looked in at all where answers go to agents: a count of its
        # lines holding a text (or their places) would tell, a call at a time, what it holds.
        found = locate_lines(self.searcher().snapshot(), text, identifier=identifier, limit=limit,
                             skip=looks_secret if self.withholds_secrets else None)
        named = self._innermost({(loc.path, loc.line) for loc in found.locations})
        for loc in found.locations:
            loc.symbol = named[loc.path, loc.line] or ""
        return found

    def find_related(self, path: str, start_line: int | None = None, end_line: int | None = None, *,
                     limit: int = 10) -> Related:
        """The chunks nearest to a span (the whole file without lines) in its language, its own chunks left out
        (by vectors when ready, else by its words)."""
        from codeloupe.related import find_related

        return find_related(self, path, start_line, end_line, limit)

    # ------------------------------------------------------------------ graph and ask (their own packages)

    def graph_map(self) -> GraphMap:
        """Nodes, edges and communities of the workspace graph (`codeloupe.graph.GraphMap`); communities may be
        named by one cached call to the configured chat model (`codeloupe.graph.naming`)."""
        from codeloupe.graph import graph_map

        return graph_map(self, name_with_model=True)

    def graph_node(self, target: str, *, allow_stale: bool = False) -> GraphNode | GraphFolder:
        """One file or concept with its neighbours, carriers and chunks (`codeloupe.graph.GraphNode`); a folder
        of the workspace: its files, their edges across its boundary and their communities (`GraphFolder`).

        `allow_stale` answers from the last graph built instead of rebuilding after a change (for hovers and
        lenses, which must not wait; whoever writes the index refreshes the graph afterwards).
        """
        from codeloupe.graph import graph_node

        return graph_node(self, target, allow_stale=allow_stale)

    def file_summary(self, path: str, *, allow_stale: bool = False) -> FileSummary:
        """Community, import/importer counts, god-node flag, semantic neighbours (`codeloupe.graph.FileSummary`)."""
        from codeloupe.graph import file_summary

        return file_summary(self, path, allow_stale=allow_stale)

    def used_definitions(self, path: str, *, allow_stale: bool = False) -> list[UsedDefinition]:
        """The definitions of `path` that other files use, at their own line, with each use (path, line)."""
        from codeloupe.graph import definition_users

        rel = self.relative(path)
        symbols = self.symbols([rel]).get(rel, [])
        out = []
        for name, users in definition_users(self, rel, allow_stale=allow_stale).items():
            # The graph names top-level definitions; a bare name also matches a top-level symbol.
            found = next((s for s in symbols if s.qualified_name == name), None) or \
                next((s for s in symbols if not s.parent and s.name == name), None)
            if users and found is not None:
                out.append(UsedDefinition(name, found.start_line, users, found.signature,
                                          self._first_doc_line(rel, found)))
        return out

    def _first_doc_line(self, rel: str, symbol: Symbol) -> str:
        """The first line of a definition's docstring (a string first in its body) or of the comment block right
        above it; "" when it has neither."""
        try:
            lines = split_lines(self.read_lines(rel), keepends=False)
        except WorkspaceError:
            return ""
        body = lines[symbol.start_line:min(symbol.end_line, symbol.start_line + 4)]
        first = next((ln.strip() for ln in body if ln.strip()), "").lstrip("rbuRBU")
        quote = next((q for q in _STRING_QUOTES if first.startswith(q)), None)
        if quote:
            return first[len(quote):].split(quote)[0].strip()
        above = []
        for line in reversed(lines[:symbol.start_line - 1]):
            text = line.strip()
            if not text.startswith(_COMMENT_MARKS):
                break
            above.append(text)
        for text in reversed(above):
            words = text.lstrip("/#*-;!").strip()
            if words:
                return words
        return ""

    def search_symbols(self, query: str, *, limit: int = 30) -> list[tuple[str, Symbol]]:
        """(path, definition) of every symbol named by a matching chunk, in rank order: the search behind an
        editor's workspace-symbol picker."""
        bundle = self.search(query, limit=limit)
        by_path = self.symbols([hit.path for hit in bundle.files])
        found: list[tuple[str, Symbol]] = []
        for hit in bundle.files:
            named = {q for chunk in hit.chunks for q in chunk.symbols}
            found.extend((hit.path, s) for s in by_path.get(hit.path, []) if s.qualified_name in named)
        # A file's definitions come in their order in it: the ones the query names go first (`OptionParser`
        # listed the module's `V = TypeVar(...)` ahead of `_OptionParser`), the rest after, in rank order.
        words = {w.lower() for w in re.findall(r"\w+", query)}
        return sorted(found, key=lambda item: _name_match(item[1].name, words))

    def graph_path(self, source: str, target: str) -> GraphPath:
        """A hub-tolled route between two concepts (`codeloupe.graph.GraphPath`)."""
        from codeloupe.graph import graph_path

        return graph_path(self, source, target)

    def graph(self, request: GraphRequest) -> GraphMap | GraphNode | GraphFolder | GraphPath:
        """The answer to one graph request, which every surface builds (`GraphRequest` refuses a request that
        asks for a node and a route, or half a route): the node's or folder's part of the graph, the route
        between `source` and `target`, or the map. `NotInGraph` when a node or an end names no graph file."""
        if request.node:
            return self.graph_node(self._indexed_name(request.node))
        if request.source:
            return self.graph_path(self._indexed_name(request.source), self._indexed_name(request.target))
        return self.graph_map()

    def _indexed_name(self, name: str) -> str:
        """The indexed file or folder `name` names as an answer shows it (`shown_name_of`: MCP's text and the CLI
        show a newline in a name as `\\n`, an escape sequence as `\\x1b`, a bidi override as `\\u202e`), where an
        agent copies it from into `expand`, a search's `scope` or a graph's `node` and route ends; else `name`
        itself (a path as it is, a concept, a name shown so for several)."""
        if "\\" not in name:  # only a name shown otherwise than it is holds a backslash
            return name
        rows = self.store.file_rows()
        folders = {folder for path in rows for folder in _folders_of(path)}
        wanted = name.rstrip("/")  # a folder as the graph shows it, `name/`
        if wanted in rows or wanted in folders:
            return name
        return shown_name_of(wanted, [*rows, *folders]) or name

    def ask(self, question: str, *, mode: str = "code", agents: bool | None = None, best: bool = False) -> AskRun:
        """The `AskEvent`s answering `question`, as an `AskRun`; the last one is `done` and carries the `AskResult`.
        `cancel()` on it, from any thread, cuts the model call in flight off (a server whose client hung up)."""
        from codeloupe.ask import AskRun, run_ask

        run = run_ask(self, question, mode=mode, agents=agents, best=best)
        return AskRun(_stamped(run, self.revisions), run.cancellation) if self.revision else run

    # ------------------------------------------------------------------ the flow cache (codeloupe.ask.flows)

    def flows_kept(self) -> bool:
        """Whether successful walkthroughs are kept (the `flows` setting, unless CODELOUPE_NO_FLOWS is set)."""
        from codeloupe.ask.flows import enabled

        return enabled(self)

    def flows(self) -> list[Flow]:
        """Every cached walkthrough, newest first (stale ones included and marked)."""
        return [Flow(f.id, f.question, f.mode, sorted(f.files), f.created, f.served, f.stale)
                for f in flow_rows(self.store, with_parts=False)]

    def refresh_flows(self) -> list[FlowOutcome]:
        """Re-ask every stale flow (a cited file changed); an answered one replaces it."""
        from codeloupe.ask.flows import refresh

        return refresh(self)

    def warm_flows(self, *, limit: int = 5) -> list[FlowOutcome]:
        """Pre-ask the workspace's main workflows, derived from its most mentioned definitions (the tour)."""
        from codeloupe.ask.flows import reask, warm_questions

        return reask(self, [(question, "code") for question in warm_questions(self, limit)])

    def release_searcher(self) -> None:
        """Let go of the search snapshot (lanes, maps, vectors held in memory); the next search loads it again
        (from the files saved beside the index). A search holding it meanwhile finishes on it."""
        with self._lock:
            searcher, self._searcher = self._searcher, None
        if searcher is not None:
            searcher.close()

    def close(self) -> None:
        self.closed = True  # first: background builds failing from here on are quiet, the graph's stops
        graph_build = sys.modules.get("codeloupe.graph.build")  # not imported: no graph was ever built here
        if graph_build is not None:
            graph_build.stop_builds(self)
        if self._searcher is not None:
            self._searcher.close()  # before the store: its background rebuild must not read a closed index
        self.store.close()


def _folders_of(path: str) -> Iterator[str]:
    """The folders a workspace path lies in, innermost first (none for a file at the root)."""
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        yield path


def _stop_before_edges(should_stop: Callable[[], bool] | None) -> None:
    """`IndexStopped` once `should_stop()` is true: resolving a large index's edges takes a minute, which a closing
    workspace does not wait for (the next index resolves them)."""
    if should_stop is not None and should_stop():
        raise IndexStopped("indexing stopped before resolving the graph's edges")


def _stamped(events, revisions: Callable[[], Revisions]):
    """Ask events with every citation stamped with the revision its span was read at (an index pinned to a
    commit: a remote tarball's, or a repository's in the shared index), as `revisions()` says when it is spliced,
    and each streamed part naming a span (a `delta` with a `path`); so are the result's files that its search did
    not stamp (those a cached answer cited, `append_sources`)."""
    for event in events:
        if event.type == "citation" or (event.type == "delta" and "path" in event.data):
            event.data["revision"] = revisions().of(event.data["path"])
        if event.result is not None:
            result, at = event.result, revisions()
            result.citations = [_read_at(c, at) for c in result.citations]
            result.parts = [p if p.citation is None else dataclasses.replace(p, citation=_read_at(p.citation, at))
                            for p in result.parts]
            for hit in [*result.bundle.files, *result.uncited]:
                hit.revision = hit.revision or at.of(hit.path)
        yield event


def _read_at(cited: Citation, revisions: Revisions) -> Citation:
    return dataclasses.replace(cited, revision=revisions.of(cited.path))


# ---------------------------------------------------------------------- a remote repository's index


class RemoteWorkspace(Workspace):
    """A `Workspace` over a remote tarball's index: the same search, graph and ask, read-only, pinned to a
    revision. `index()` downloads only when there is no index yet or `refresh` was asked for; the repository's
    own strategy files are never loaded (a remote source runs nothing), API-registered strategies apply."""

    # Where the first fetch writes the index until it holds the files; None once it is at its own name (and for
    # the shared index, whose rows are written in one transaction).
    _fetching: Path | None = None

    def __init__(self, source: str, settings: Settings | None = None,
                 overrides: dict[str, Any] | None = None, *, refresh: bool = False) -> None:
        # The user's settings only: a remote source has no workspace files to read settings from.
        self.settings = settings if settings is not None else load_settings(None, overrides)
        self.spec = parse_remote(source, self.settings)
        self.root = Path(self.spec.name)
        self.refresh = refresh
        key = hashlib.sha256(self.spec.tarball_url.encode("utf-8")).hexdigest()[:16]
        slug = re.sub(r"[^A-Za-z0-9_.-]", "_", self.spec.name.rsplit("/", 1)[-1])[:40] or "remote"
        self.index_path = self.settings.cache_root / "indexes" / f"remote-{slug}-{key}.sqlite"
        # No index yet: the first fetch writes one under a name of this workspace's own, put at the index's name
        # once it holds the files (`_put_in_place`) and removed at `close` otherwise. Written in place, a fetch
        # that failed (a mistyped ref, the network down) left an empty index in the cache for every source tried.
        if not self.settings.store_url:
            _remove_stale_fetches(self.index_path, self.settings.remote_deadline_s + FETCH_QUIET_MARGIN_S)
            if not self.index_path.exists():  # named after this process too: `_remove_stale_fetches` keeps it
                self._fetching = self.index_path.with_name(
                    f"{self.index_path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.fetching")
        self._open(self._fetching or self.index_path, StrategyLoad())

    @property
    def revision(self) -> str:
        return self.store.get_meta(REVISION_KEY)

    @property
    def label(self) -> str:
        return f"{self.spec.name}@{self.revision or self.spec.ref or '(not indexed)'}"

    def relative(self, path: Path | str) -> str:
        """`path` as a path of the repository, as given: its root is a name, not a folder, so a path starting with
        that name (django's `django/db`) is a path of that folder, never the root's."""
        text = str(path).replace("\\", "/")
        rel, problem = member_path(text)
        if problem:
            raise WorkspaceError(f"{elided(str(path))}: not a path inside {self.label} ({problem})")
        return rel

    def path_kind(self, rel: str) -> str:
        """What the repository holds at `rel`, from the index's own paths: its root is a name, not a folder, and
        whatever this machine holds at that name (a folder in a server's working directory) is none of it."""
        return indexed_path_kind(self.store, rel)

    def read_bytes(self, path: str) -> bytes:
        """The file as the tarball held it, rebuilt from the index's copy (its chunks are a line partition, so
        they concatenate to the file; the caller checks the result against the digest taken at download)."""
        rel = self.relative(path)
        row = self.store.file_rows([rel]).get(rel)
        if row is None:
            raise FileNotFoundError(f"{elided(rel)}: not in the index of {self.label}")
        return file_text(self.store, row.id).encode(self.store.file_encoding(row.id) or "utf-8")

    def _changed_since_indexed(self, raw: bytes, row: FileRow) -> bool:
        # The bytes are the index's own copy: never stale, even where re-encoding them gives other bytes than the
        # tarball's (a UTF-16 file written big-endian comes back little-endian).
        return False

    def index(self, progress: ProgressFn | None = None, *, edges: bool = True,
              should_stop: Callable[[], bool] | None = None) -> IndexReport:
        """The tarball's files in one transaction (a fetch killed midway leaves the index as it was); `should_stop`
        is asked before the edges and as their facts are taken."""
        from codeloupe.graph import ensure_edges

        if self.revision and not self.refresh:
            counts = self.store.counts()
            return IndexReport(root=self.label, index_path=str(self.store.path), files_seen=counts["files"],
                               files_unchanged=counts["files"], chunks=counts["chunks"], symbols=counts["symbols"],
                               languages=self.store.language_counts())
        if progress:
            progress(Progress("fetch", 0, 1, self.spec.tarball_url))
        snapshot = fetch_snapshot(self.spec, self.settings)
        if progress:
            progress(Progress("fetch", 1, 1, self.spec.tarball_url))
        # One transaction for the files and the revision they are pinned to: a fetch killed midway leaves the
        # index as it was, and two fetches of the same source at once cannot interleave their files.
        with self.store.batch():
            report = index_files(self.store, self.settings, snapshot.files,
                                 label=f"{self.spec.name}@{snapshot.revision}", skipped=snapshot.skipped,
                                 strategies=self._strategies(), progress=progress)
            self.store.set_meta(SOURCE_KEY, self.spec.source)
            self.store.set_meta(REVISION_KEY, snapshot.revision)
        if self._fetching is not None:
            self._put_in_place()
            report.index_path = str(self.store.path)
        remote_log.info("%s pinned to %s by %s", self.spec.source, snapshot.revision, snapshot.revision_from)
        self.refresh = False
        if edges:
            _stop_before_edges(should_stop)
            ensure_edges(self, should_stop)
        return report

    def _put_in_place(self) -> None:
        """The first fetch's index, which now holds the files, at the index's own name, and opened there. Put there
        by a hard link, which never replaces a file: where another fetch of the same source put its index first,
        that one is kept and opened (replacing a file another process has open would mix that process's
        write-ahead log, named after the path, into this index)."""
        fetched = self._fetching
        assert fetched is not None
        self.release_searcher()
        self.store.close()  # last connection: its write-ahead log is checkpointed into the file, which is then whole
        try:
            os.link(fetched, self.index_path)
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links
            if not self.index_path.exists():
                os.replace(fetched, self.index_path)
        _remove_fetching(fetched)
        self._fetching = None
        self.store = open_store(self.settings, self.root, self.index_path)

    def close(self) -> None:
        super().close()
        if self._fetching is not None:  # no fetch filled it: an empty index no later open would find
            _remove_fetching(self._fetching)

    def skip_reason(self, rel: str) -> str:
        """None to give: its root is a name, not a folder, and whatever this machine holds there is none of it."""
        return ""

    def update_files(self, paths: Any) -> IndexReport:
        raise WorkspaceError(f"{self.label} is a remote index: run `codeloupe index {self.spec.source}` to refresh it")


def _remove_fetching(path: Path) -> None:
    """A first fetch's index under its own name and whatever was written beside it (its write-ahead log)."""
    for left in path.parent.glob(glob.escape(path.name) + "*"):
        left.unlink(missing_ok=True)


# Beyond `remote_deadline_s` (a download's whole time), how long a first fetch's files may go unwritten before they
# are taken for a killed fetch's: unpacking and indexing write to them as they go, and this leaves room for the
# requests around the download (the commit's lookup, redirects) and a loaded machine.
FETCH_QUIET_MARGIN_S = 3600.0


def _remove_stale_fetches(index_path: Path, quiet_for_s: float) -> None:
    """The first fetches of `index_path`'s source whose process was killed (SIGKILL, a crash: no close ran) left
    their index under its own name for good, as large as the repository's: removed once none of its files was
    written for `quiet_for_s` and the process named in it is not running here. A fetch under way writes to its
    files as it goes (but not while its machine sleeps: hence the process too), and none is ever opened as an index
    by another process."""
    now = time.time()
    for fetching in index_path.parent.glob(glob.escape(index_path.name) + ".*.fetching"):
        try:
            written = max(left.stat().st_mtime for left in fetching.parent.glob(glob.escape(fetching.name) + "*"))
        except (OSError, ValueError):  # removed meanwhile (its fetch ended, or another open removed it)
            continue
        owner = fetching.name[len(index_path.name) + 1:].split("-", 1)[0]
        if now - written > quiet_for_s and not (owner.isdigit() and process_running(int(owner))):
            remote_log.info("removing %s, left by a fetch that was killed", fetching.name)
            _remove_fetching(fetching)


class SharedWorkspace(RemoteWorkspace):
    """A repository in the shared index, read where no checkout is: files are rebuilt from the index's chunks
    (a line partition of each file) and every answer is pinned to the commit it was indexed at. Indexing is
    the workers' job (or `codeloupe index PATH --store URL` on a checkout): `index()` only reports."""

    def __init__(self, url: str, repository: str, settings: Settings,
                 model_from: SharedWorkspace | None = None) -> None:
        """`model_from`: a repository opened with the same settings, whose embedding provider this one uses."""
        # RemoteWorkspace's own start (a spec to parse, a tarball to fetch) has no part here.
        self.settings = dataclasses.replace(settings, store_url=url, store_repository=repository)
        self.root = Path(repository)
        self.refresh = False
        self._model_from = model_from
        self._open(self.settings.cache_root / "indexes" / "shared", StrategyLoad(), create_repository=False)

    def embedding_provider(self):
        # One model for the repositories opened together: a copy loaded per repository held 200 of them
        # at organisation scale (bench/pg_org.py).
        return self._model_from.embedding_provider() if self._model_from else super().embedding_provider()

    @property
    def revision(self) -> str:
        return self.store.commit

    @property
    def label(self) -> str:
        return f"{self.root}@{self.revision or '(files as indexed)'}"

    @property
    def repository_name(self) -> str:
        return str(self.root)

    def index(self, progress: ProgressFn | None = None, *, edges: bool = True,
              should_stop: Callable[[], bool] | None = None) -> IndexReport:
        """What the index holds (the workers index it: nothing runs here that `should_stop` could stop)."""
        from codeloupe.url_secrets import redact

        counts = self.store.counts()
        return IndexReport(root=self.label, index_path=redact(self.settings.store_url), files_seen=counts["files"],
                           files_unchanged=counts["files"], chunks=counts["chunks"], symbols=counts["symbols"],
                           languages=self.store.language_counts())

    def embed(self, *_: Any, **__: Any) -> EmbedReport:
        return EmbedReport()  # the workers embed; a server only reads

    def update_files(self, paths: Any) -> IndexReport:
        raise WorkspaceError(f"{self.label} is read from the shared index: re-index it with"
                             " `codeloupe index PATH --store URL` where it is checked out")


# ---------------------------------------------------------------------- one-shot functions


def add_chunk_strategy(name: str, extensions: Iterable[str], function: ChunkStrategy) -> Strategy:
    """Chunk files with these extensions with `function` in every workspace of this process, ahead of the
    built-in chunkers and of workspace strategies (see `codeloupe.chunk.strategies.ChunkStrategy`). The index
    re-chunks the files it claims on the next `Workspace.index`. With worker processes started by spawn (a
    program running threads) the function travels by pickling: make it a module-level function."""
    return register_strategy(name, list(extensions), function)


def start_save_parser() -> None:
    """A worker process that parses saved files, started on a thread of its own with the save's modules imported
    (chunking, the graph's facts), where this process holds none idle: the language server's first save after a first
    index whose files a pool parsed waited 0.5-1 s for its start. For a process that ends by `os._exit`
    (`parallel.start_kept_worker`)."""
    start_kept_worker((index_paths.__module__, "codeloupe.graph.build"), "chunking")



def index_repo(root: Path | str, progress: ProgressFn | None = None, *, embed: bool = True,
               overrides: dict[str, Any] | None = None) -> IndexReport:
    return _index_closing(Workspace(root, overrides=overrides), progress, embed)


def _index_closing(ws: Workspace, progress: ProgressFn | None, embed: bool) -> IndexReport:
    try:
        report = ws.index(progress)
        if embed:
            ws.embed(progress)
        return report
    finally:
        ws.close()


def is_remote_source(text: str) -> bool:
    """An http(s) URL (of a .tar.gz) or `owner/repo@ref` that names no local folder."""
    return is_remote(text)


def open_remote(source: str, settings: Settings | None = None, overrides: dict[str, Any] | None = None, *,
                refresh: bool = False) -> Workspace:
    """A remote repository's index as a `Workspace` (`RemoteWorkspace`): search, graph and ask work on it; its
    `index()` downloads the tarball when there is no index yet, or always with `refresh`."""
    return RemoteWorkspace(source, settings, overrides, refresh=refresh)


def open_shared(repositories: Iterable[str] = (), overrides: dict[str, Any] | None = None) -> list[Workspace]:
    """Repositories of the shared index (the user's `store_url`), read where no checkout is: every one when
    `repositories` is empty. Settings are the user's own (and `overrides`): no workspace file is read.
    Each is a `SharedWorkspace`: read-only, every answer pinned to its indexed commit. A name the index does not
    hold is refused, and then none is opened."""
    settings = load_settings(None, overrides)
    held, missing = _held_repositories(repositories, settings)
    if missing:
        raise WorkspaceError(missing)
    return _open_held(held, settings)


def open_shared_held(repositories: Iterable[str] = (),
                     overrides: dict[str, Any] | None = None) -> tuple[list[Workspace], str]:
    """`open_shared` of those of `repositories` the shared index holds, and why the others were not opened ("":
    every one was): an editor whose settings name one the index does not hold (yet) searches the others.
    Refused when it holds none of them."""
    settings = load_settings(None, overrides)
    held, missing = _held_repositories(repositories, settings)
    if not held:
        raise WorkspaceError(missing)
    return _open_held(held, settings), missing


def reopen_shared(opened: Sequence[Workspace], repositories: Iterable[str] = (),
                  overrides: dict[str, Any] | None = None) -> tuple[list[Workspace], list[Workspace]]:
    """For a process that keeps repositories of the shared index open (a server: `opened`, from `open_shared` with
    the same `repositories` and `overrides`, and from this since), what changed in the index: the repositories it
    holds now that none of `opened` reads (indexed since, or dropped and indexed again under their name; those
    `repositories` names only, when it names any), opened; and those of `opened` it no longer holds (dropped, or
    another repository under their name now), for the caller to close once nothing uses them. One query to the
    database when nothing changed. New ones are opened with the settings of `opened` (`overrides` when none is
    left) and embed with their model."""
    from codeloupe.store.postgres import repository_ids

    shared = [ws for ws in opened if isinstance(ws, SharedWorkspace)]
    settings = shared[0].settings if shared else load_settings(None, overrides)
    if not settings.store_url:
        raise WorkspaceError("no shared index to open repositories from: set store_url (postgresql://...)")
    held = repository_ids(settings.store_url)
    named = set(repositories)
    gone = [ws for ws in shared if held.get(ws.repository_name) != ws.store.repo_id]
    reading = {ws.repository_name for ws in shared if ws not in gone}
    new = [name for name in held if name not in reading and (not named or name in named)]
    # The model of the first opened (the others embed with it, `_open_held`): a copy per repository opened later
    # would grow with each one a long-running server opens.
    return _open_held(new, settings, next((ws._model_from or ws for ws in shared), None)), gone


def _held_repositories(repositories: Iterable[str], settings: Settings) -> tuple[list[str], str]:
    """Those of `repositories` the shared index holds (every one it holds when none is named), and why the others
    cannot be opened ("": none such); refused when there is no shared index, or it holds no repository."""
    from codeloupe.store.postgres import not_held, redact, repository_names

    if not settings.store_url:
        raise WorkspaceError("no shared index to open repositories from: set store_url (postgresql://...)")
    url = redact(settings.store_url)
    known = repository_names(settings.store_url)
    names = list(dict.fromkeys(repositories))
    missing = sorted(set(names) - set(known))
    held = [name for name in names if name in known] if names else known
    if missing:
        unnamed = [problem for name in missing if (problem := repository_name_problem(name))]
        return held, "; ".join(unnamed) if unnamed else not_held(missing, settings.store_url, known)
    if not known:
        raise WorkspaceError(f"the shared index {url} holds no repository yet: index one with"
                             " `codeloupe index PATH --store URL`")
    return held, ""


def _open_held(held: list[str], settings: Settings, model: SharedWorkspace | None = None) -> list[Workspace]:
    """Repositories `held` opened, each embedding with `model`'s model (the first one's when None)."""
    opened: list[Workspace] = []
    try:
        for name in held:
            ws = SharedWorkspace(settings.store_url, name, settings, model)
            model = model or ws
            opened.append(ws)
    except BaseException:  # one that cannot be opened: those opened before it are closed, not left to no one
        for ws in opened:
            ws.close()
        raise
    return opened


def unreadable_indexes(workspaces: Iterable[Workspace]) -> str:
    """Why the indexes of `workspaces` cannot be read now ("" when they can): one round trip to each shared
    index's database they are in (a workspace's own index file is read in this process: nothing to ask)."""
    asked: set[str] = set()
    for ws in workspaces:
        url = ws.settings.store_url
        if isinstance(ws.store, Store) or url in asked:
            continue
        asked.add(url)
        try:
            ws.store.query("SELECT 1")
        except Exception as exc:  # whatever fails, the index cannot be read
            return str(exc) or type(exc).__name__
    return ""


def index_remote(source: str, progress: ProgressFn | None = None, *, embed: bool = True,
                 overrides: dict[str, Any] | None = None) -> IndexReport:
    """`codeloupe index URL`: download, read in memory and index a remote tarball (afresh)."""
    return _index_closing(open_remote(source, overrides=overrides, refresh=True), progress, embed)


def _name_match(name: str, words: set[str]) -> int:
    """How a definition's name meets a query's words: 0 it is one of them, 1 it holds one (`_OptionParser` for
    `OptionParser`), 2 neither."""
    name = name.lower()
    if name in words:
        return 0
    return 1 if any(len(word) > 2 and word in name for word in words) else 2


def _one_definition(found: list[Symbol], symbols: list[Symbol]) -> tuple[int, int, str] | None:
    """One name defined several times in a row (typing overloads then their implementation, a property's getter
    and setter): the span of them all, which no qualified name could pick out; None when they are apart (other
    definitions between them) or are different names."""
    if len({s.qualified_name for s in found}) > 1:
        return None
    start, end = min(s.start_line for s in found), max(s.end_line for s in found)
    inside = [s for s in symbols if start <= s.start_line <= end
              and not any(f.start_line <= s.start_line <= f.end_line for f in found)]
    return None if inside else (start, end, found[0].qualified_name)


def search(root: Path | str, query: str, *, scope: str = "", mode: str = "code", limit: int = 12,
           overrides: dict[str, Any] | None = None) -> Bundle:
    """Index what changed (lexical lanes first, then vectors), then search. The one-call API."""
    ws = Workspace(root, overrides=overrides)
    try:
        ws.index()
        ws.embed()
        return ws.search(query, scope=scope, mode=mode, limit=limit)
    finally:
        ws.close()


def search_repositories(workspaces: Sequence[Workspace], query: str, *, scope: str = "", mode: str = "code",
                        limit: int = 12, among: Sequence[Workspace] = ()) -> Bundle:
    """One ranking of several repositories (shared ones, or workspaces on this machine) for `query`: each hit
    names its `repository` (`repository_labels`, told apart from `among` too: a server's every served one, to
    which a caller passes a label back) and the `revision` it is pinned to; `limit` candidate files per
    repository; `scope`, a folder inside each of them.

    The same fusion and bundle code as one repository's search, with every repository's file scores on one
    scale: each lane ranks one list across the repositories by its own score, the BM25 lanes with IDF pooled
    over them, and lanes fuse by those ranks (`search.Fusion`). Ordering repositories' own fused scores
    instead ranks every repository's best file about alike (measured in docs/shared-index.md).

    More than `ranking.REPOSITORIES_SEARCHED_FULLY` repositories of one shared index: only that many are
    searched so, those whose chunks the lexical and dense lanes rank first across all of them, asked in the
    database (`repository_choice`); the bundle's notes name them."""
    named = dict(zip(repository_labels(workspaces, among), workspaces))
    notes = _choose_repositories(named, query, scope, mode) if len(named) > R.REPOSITORIES_SEARCHED_FULLY else []
    if len(named) == 1:  # nothing to rank it among
        bundle = merge_bundles(query.strip(), mode, {name: ws.search(query, scope=scope, mode=mode, limit=limit)
                                                     for name, ws in named.items()})
    else:
        from codeloupe.search import pooled_lane_scores

        # Three passes: each repository's BM25 statistics of the query's terms; its lane scores on the pooled
        # statistics; its bundle with every lane ranked among the others' rows.
        peers = pooled_lane_scores({name: ws.searcher() for name, ws in named.items()}, query, mode, scope)
        bundle = merge_bundles(query.strip(), mode, {
            name: ws.search(query, scope=scope, mode=mode, limit=limit, peers=peers[name])
            for name, ws in named.items()})
    bundle.notes[:0] = notes
    return bundle


def _choose_repositories(named: dict[str, Workspace], query: str, scope: str, mode: str) -> list[str]:
    """Narrow `named` (in place) to the repositories a search across very many of them searches in full, when
    they are repositories of one shared index, judged by the chunks the search's `scope` and `mode` keep; the
    note saying so, or none."""
    from codeloupe.embed import describe_provider
    from codeloupe.repository_choice import choose_repositories
    from codeloupe.store.postgres import FilesSearched, one_database

    workspaces = list(named.values())
    stores = [ws.store for ws in workspaces]
    if not one_database(stores):
        return []
    first = workspaces[0]
    vector, model = None, describe_provider(first.settings)[1]
    if model:
        try:
            vector = first.embedding_provider().embed_query(query.strip())
        except Exception as exc:  # an unusable model costs the dense lane's vote, not the search
            log.warning("query embedding failed, choosing repositories by their words alone: %s", exc)
    choice = choose_repositories(stores, query, vector, model, R.REPOSITORIES_SEARCHED_FULLY,
                                 FilesSearched(scope, mode))
    names = list(named)
    kept = [names[n] for n in choice.chosen]
    for name in names:
        if name not in kept:
            del named[name]
    _hold_snapshots([named[name] for name in kept])
    why = (f"those whose chunks rank first for the query's {' and '.join(choice.lanes)} across all of them"
           if choice.lanes else "the first named: the shared index could not rank their chunks")
    failures = "".join(f"; could not rank by {lane}: {error[:_ERROR_SHOWN]}" for lane, error in choice.failed.items())
    return [f"searched {len(kept)} of {len(names)} repositories in full: {', '.join(kept)} ({why}{failures});"
            " name repositories to search others"]


# How much of the database's error a bundle's note quotes (the log has all of it).
_ERROR_SHOWN = 240


# The workspaces whose snapshots searches across very many repositories loaded, least recently chosen first:
# each query loads those it chooses, so a long-running server's memory would otherwise grow to every
# repository's snapshot (about 160 MB each at 11,818 chunks: 32 GB for 200).
_held: OrderedDict[int, weakref.ref[Workspace]] = OrderedDict()
_held_lock = threading.Lock()


def _hold_snapshots(chosen: list[Workspace]) -> None:
    """Mark `chosen` as the latest searched, and let go of the snapshots of those chosen longest ago beyond
    `ranking.SHARED_SNAPSHOTS_HELD`."""
    with _held_lock:
        for ws in chosen:
            _held.pop(id(ws), None)
            _held[id(ws)] = weakref.ref(ws)
        released = []
        while len(_held) > max(R.SHARED_SNAPSHOTS_HELD, len(chosen)):
            ws = _held.popitem(last=False)[1]()
            if ws is not None:
                released.append(ws)
    for ws in released:
        ws.release_searcher()


def repository_labels(workspaces: Sequence[Workspace], among: Sequence[Workspace] = ()) -> list[str]:
    """What `search_repositories` calls each of `workspaces` (its hits' `repository`), in order: its
    `repository_name`, or its root where another of them or of `among` has that name (two folders both called
    `api`): each of those by its root, where the first one kept the name, which then named either of them to a
    caller that passes a label back (MCP's `expand` `repo`, HTTP's `repos`)."""
    names = Counter(ws.repository_name for ws in {id(ws): ws for ws in [*workspaces, *among]}.values())
    return [ws.repository_name if names[ws.repository_name] == 1 else str(ws.root) for ws in workspaces]


# ---------------------------------------------------------------------- the shared index's administration


def shared_repositories(url: str) -> list[SharedRepository]:
    """Every repository of the shared index at `url`: where and at which commit it was indexed, its files,
    chunks and vectors, when its files were last written, and its batches still queued."""
    from codeloupe.shared_index import shared_repositories as listed

    return listed(url)


def drop_shared_repository(url: str, name: str, *, wait: bool = False) -> DroppedRepository:
    """Remove repository `name` from the shared index: every row and its HNSW indexes, in one transaction.
    Behind a writer holding the repository it fails after the store's lock wait naming who holds it, unless
    `wait`."""
    from codeloupe.shared_index import drop_repository

    return drop_repository(url, name, wait=wait)


def build_global_vector_indexes(url: str) -> list[GlobalVectorIndex]:
    """One HNSW graph per vector dimension over every repository of the shared index, unless it is there: a
    search across very many repositories then takes its nearest chunks from it instead of scanning every
    vector. Minutes at millions of vectors; writes go on meanwhile and add to it from then on."""
    from codeloupe.shared_index import build_global_vector_indexes as build

    return build(url)


def drop_global_vector_indexes(url: str) -> list[str]:
    """Drop the graphs `build_global_vector_indexes` built; their names."""
    from codeloupe.shared_index import drop_global_vector_indexes as drop

    return drop(url)


def global_vector_index_status(url: str) -> GlobalIndexStatus:
    """Each vector dimension's graph over every repository (ready, invalid or absent), and whether workers
    build them past a size or an administrator dropped them."""
    from codeloupe.shared_index import global_index_status

    return global_index_status(url)


def work_queue_status(url: str) -> QueueStatus:
    """The shared index's work queue: batches waiting, claimed, with an expired lease, stuck, done."""
    from codeloupe.shared_index import queue_status

    return queue_status(url)


def prune_work_queue(url: str) -> QueuePruned:
    """Delete the work queue's finished batches and those no worker managed to write."""
    from codeloupe.shared_index import prune_queue

    return prune_queue(url)


def status(root: Path | str, overrides: dict[str, Any] | None = None) -> IndexStatus:
    ws = Workspace(root, overrides=overrides)
    try:
        return ws.status()
    finally:
        ws.close()


def scan(root: Path | str, settings: Settings) -> tuple[Census, StrategyLoad]:
    """The census of the extensions no built-in chunker covers among a folder's files on disk, with the chunk
    strategies in force there (registered, then the workspace's trusted ones: the load returned names each strategy
    file left alone). No index is opened: a folder never indexed is not given an empty one (after which it looked
    indexed to every command's workspace lookup), and the shared index is not reached."""
    from codeloupe.forge import scan as census

    strategy_load = load_workspace_strategies(Path(root))
    return census(Path(root), settings, _in_force(strategy_load)), strategy_load


def _in_force(strategy_load: StrategyLoad) -> tuple[Strategy, ...]:
    """The chunk strategies in force: API-registered first, then the workspace's trusted ones."""
    return (*registered_strategies(), *strategy_load.strategies)


def workspace_trusted(root: Path | str) -> bool:
    """Whether the user's trust store trusts the workspace now (`codeloupe trust`, its settings unchanged since).
    Read afresh on every call, so a long-running editor server sees a later trust or revoke."""
    from codeloupe.trust import TRUSTED, TrustStore

    resolved = Path(root).resolve()
    return TrustStore.default().state(resolved, workspace_digest(resolved)) == TRUSTED


def trust_store_path() -> Path:
    """The user's trust store file: in the user config dir, which nothing in a workspace can move."""
    from codeloupe.trust import TrustStore

    return TrustStore.default().path
