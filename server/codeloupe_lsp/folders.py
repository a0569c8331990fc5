"""One warm `Workspace` per workspace folder, refreshed in the background.

Writes to a folder's index (full index, saved files, vectors) run one at a time on that folder's own writer
thread, so a `Workspace` never indexes concurrently with itself; reads (search, hover, status) run on the
server's shared thread pool and see each write as soon as it commits. The event loop only schedules.

Order of work in a folder, re-decided after every job: a requested full index, then saved/changed files,
then vectors. Embedding stops early (`should_stop`) as soon as either of the others is requested, so a save
is searchable again after at most one embedding batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types as lsp

from codeloupe.api import (
    CommitMoved,
    IndexStopped,
    Settings,
    SourceConflict,
    Workspace,
    start_save_parser,
    workspace_settings_files,
    workspace_trusted,
)
from codeloupe.types import IndexReport, Progress, one_line
from codeloupe_lsp.convert import folder_status, uri_to_path

if TYPE_CHECKING:
    from codeloupe_lsp.server import CodeloupeServer

log = logging.getLogger("codeloupe_lsp.folders")
T = TypeVar("T")

# Progress notifications are rate-limited so a fast index does not flood the client.
REPORT_INTERVAL_S = 0.1
# Saves come in bursts; the graph (edges re-resolved for the files a save can reach, communities recomputed)
# is refreshed once they pause this long. Hovers and lenses read the last graph meanwhile.
GRAPH_QUIET_S = 2.0
# A full index into the shared index stops when its folder moves to another commit while it runs (a branch
# switched, a pull): the folder is indexed again at the new commit, up to this many times in a row, then the
# failure is shown (a folder whose HEAD never rests would index forever).
COMMIT_MOVE_RETRIES = 3


class RefreshProgress:
    """The work-done progress of one background refresh: index (0-50 %) then vectors (50-100 %)."""

    def __init__(self, server: CodeloupeServer, title: str) -> None:
        self.server = server
        self.title = title
        self.token: str | None = None
        self._last = 0.0

    async def begin(self) -> None:
        if not self.server.supports_progress():
            return
        token = f"codeloupe-index-{uuid.uuid4().hex[:12]}"
        try:
            await self.server.work_done_progress.create_async(token)
        except Exception as exc:  # the client refused the token: index without a progress bar
            log.warning("window/workDoneProgress/create refused: %s", exc)
            return
        self.token = token
        self.server.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(
            title=self.title, message="scanning", percentage=0, cancellable=False))

    def report(self, event: Progress) -> None:
        """Called on the loop thread for each engine progress event."""
        if self.token is None:
            return
        now = time.monotonic()
        final = event.total and event.done >= event.total
        if not final and now - self._last < REPORT_INTERVAL_S:
            return
        self._last = now
        share = event.done / event.total if event.total else 1.0
        if event.phase == "embed":
            # Chunks' and whole files' vectors: more than the status's chunk count, so it says which.
            message, percentage = f"vectors {event.done}/{event.total} (chunks and files)", 50 + 50 * share
        elif event.phase in ("scan", "chunk"):
            message, percentage = f"files {event.done}/{event.total}", 50 * share
        else:
            message, percentage = f"{event.phase} {event.done}/{event.total}", None
        self.server.work_done_progress.report(self.token, lsp.WorkDoneProgressReport(
            message=message, percentage=None if percentage is None else int(percentage)))

    def note(self, message: str, percentage: int) -> None:
        if self.token is not None:
            self.server.work_done_progress.report(
                self.token, lsp.WorkDoneProgressReport(message=message, percentage=percentage))

    def end(self, message: str) -> None:
        if self.token is not None:
            self.server.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
            self.token = None


class Folder:
    """A workspace folder: its `Workspace`, its writer thread, and what is still to be done."""

    def __init__(self, server: CodeloupeServer, uri: str, root: Path, settings: Settings) -> None:
        self.server = server
        self.uri = uri
        self.root = root
        # The index's integrity check reads every page (seconds at 40K files): it runs as the first job on the
        # writer, once the progress shows, and queries wait for it.
        self.ws = Workspace(root, settings=settings, check_index=False, interim_answers=True)
        self._checked = False
        self.state = "indexing"
        self.message = ""
        self.embed_error = ""
        # The status says another folder replaced this one as its shared repository's source (`source_refused`).
        self._source_refused = False
        self.last_report: IndexReport | None = None
        # Files and chunks in the index after the last full index (the counts of docs/protocol.md; a report's
        # files_seen also counts files found but then skipped).
        self.files = 0
        self.chunks = 0
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"codeloupe-writer-{root.name}")
        self._full_wanted = False
        self._full_waiters: list[asyncio.Future[IndexReport]] = []
        self._commit_moves = 0  # full indexes in a row stopped by the folder moving to another commit
        self._changed: set[str] = set()
        self._saved = asyncio.Event()  # set when files are queued in `_changed`
        self._embed_wanted = False
        self._graph_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"codeloupe-graph-{root.name}")
        self._graph_job: asyncio.Future[None] | None = None
        self._graph_again = False
        self._graph_timer: asyncio.TimerHandle | None = None
        self._prefer: list[str] = []
        self._closing = False
        self._pump: asyncio.Task[None] | None = None
        self._progress: RefreshProgress | None = None
        # A never-indexed folder answers no query before its first index: an empty index would answer with an
        # empty bundle whose lanes all say "ready". A folder with an index on disk answers from it as soon as
        # the index's integrity check has passed.
        self._searchable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Set once the first refresh's progress is on its way to the client (or there is none to show).
        self.progress_shown = asyncio.Event()
        self._has_index = bool(self.ws.store.counts()["files"])
        # Load the saved search snapshot while the check runs; the start-up refresh waits for it, so the first
        # answer does not share the interpreter with a walk of the whole tree.
        self._loading: asyncio.Future[None] | None = asyncio.get_running_loop().run_in_executor(
            server.thread_pool, self._warm_readers) if self._has_index else None
        if self.ws.store.rebuilt_reason:
            self.server.warn(f"codeloupe: the index of {root} was rebuilt: {self.ws.store.rebuilt_reason}")

    # ---------------------------------------------------------------- requests (loop thread)

    def request_full(self) -> asyncio.Future[IndexReport]:
        """Re-scan the whole folder; the future resolves with the index report."""
        waiter: asyncio.Future[IndexReport] = asyncio.get_running_loop().create_future()
        self._full_waiters.append(waiter)
        self._full_wanted = True
        self._kick()
        return waiter

    def request_paths(self, rel_paths: Iterable[str]) -> None:
        """Re-index these files (saved, created, changed or deleted), then embed them first."""
        self._changed.update(rel_paths)
        self._saved.set()
        self._kick()

    async def searchable(self) -> None:
        """Return once the folder has an index to answer from (at once, unless its first index is running)."""
        await asyncio.shield(self._searchable)

    def source_refused(self, message: str) -> bool:
        """Another folder replaced this one as its shared repository's source: the status says so (`message`)
        until a write of this folder goes through again (`_source_accepted`). True when this is a new replacement
        (the folder was its source until now), which the editor is to be told of: once per replacement, where its
        every refused save and search would repeat it."""
        told = self._source_refused
        self.state, self.message, self._source_refused = "error", message, True
        return not told

    def _source_accepted(self) -> None:
        """A save or a full index of this folder was written: the repository's source is this folder again
        (`index --replace` run on it), so the status no longer says it was replaced, with no restart, and a later
        replacement is told anew."""
        if self._source_refused:
            self._source_refused = False
            self.message = ""
            if self.state == "error":
                self.state = "ready"

    def _mark_searchable(self) -> None:
        if not self._searchable.done():
            self._searchable.set_result(None)

    @property
    def busy(self) -> bool:
        return self._pump is not None and not self._pump.done()

    def _kick(self) -> None:
        if self._closing or self.busy:
            return
        self._pump = asyncio.get_running_loop().create_task(self._run_pending())

    def _should_stop_embedding(self) -> bool:
        # Read from the writer thread; plain attribute reads are atomic under the GIL.
        return self._closing or self._full_wanted or bool(self._changed)

    def _is_closing(self) -> bool:
        """An index's `should_stop` (read from the writer and the walk's thread, as `_should_stop_embedding`)."""
        return self._closing

    async def _on_writer(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    # ---------------------------------------------------------------- the pump

    async def _run_pending(self) -> None:
        while not self._closing:
            if self._full_wanted:
                await self._index_all()
            elif self._changed:
                await self._index_changed()
            elif self._embed_wanted and not self.embed_error:
                await self._embed()
            else:
                break
        if self._progress is not None:
            self._progress.end(self._summary())
            self._progress = None
        if self.state == "indexing":
            self.state = "ready"

    async def _index_all(self) -> None:
        self._full_wanted = False
        waiters, self._full_waiters = self._full_waiters, []
        self.state = "indexing"  # a replaced folder stays replaced until a write of it goes through
        if self._progress is None:
            self._progress = RefreshProgress(self.server, f"codeloupe: indexing {one_line(self.root.name)}")
            await self._progress.begin()
        self.progress_shown.set()
        callback = self._progress_callback(self._progress)
        if not self._checked:
            self._checked = True
            self._progress.note("checking the index", 0)
            try:
                rebuilt = await self._on_writer(self.ws.check_index)
            except Exception as exc:  # not damage (that is repaired): the index below reports it again
                log.exception("checking the index of %s failed", self.root)
                rebuilt = ""
                self.message = f"checking the index failed: {exc}"
            if rebuilt:
                self.server.warn(f"codeloupe: the index of {self.root} was rebuilt: {rebuilt}")
            elif self._has_index:
                self._mark_searchable()  # answers come from the index on disk while it is refreshed
            if self._loading is not None:
                await self._indexing_saves_until(self._loading)
        try:
            # The walk reads the whole tree (seconds at 40K files): off the writer, so files saved meanwhile are
            # searchable at once rather than after the whole refresh; the index reads its rows after them.
            loop = asyncio.get_running_loop()
            found = await self._indexing_saves_until(loop.run_in_executor(self.server.thread_pool, self.ws.walk,
                                                                          self._is_closing))
            # Edges are left to the graph thread (below): on a large workspace they take minutes, and lexical
            # answers need only the stored chunks. The folder closing (removed, reopened, the server shut down)
            # stops the walk and the index at their next file, their chunking workers killed: its close, queued
            # on the writer behind this run, waited out the whole index (minutes at 40K files).
            report = await self._on_writer(lambda: self.ws.index(callback, edges=False, found=found,
                                                                 should_stop=self._is_closing))
        except Exception as exc:
            if self._closing:  # closed under the run (its settings changed, the folder went): nothing failed
                log.info("indexing %s stopped: the folder closed (%s)", self.root, exc)
                for waiter in waiters:
                    waiter.cancel()
                return
            if isinstance(exc, CommitMoved) and self._commit_moves < COMMIT_MOVE_RETRIES:
                # A branch switched while the editor indexed: the run wrote nothing read since and left the pin;
                # the editor's index follows the folder to its new commit, as it follows a save.
                self._commit_moves += 1
                log.info("indexing %s again: %s", self.root, exc)
                self._progress.note("the folder moved to another commit: indexing it again", 0)
                self._full_waiters[:0] = waiters
                self._full_wanted = True
                return
            self._commit_moves = 0
            if isinstance(exc, SourceConflict):  # says what happened and what to do (the status too)
                self.server.source_replaced(exc)
            else:
                log.exception("indexing %s failed", self.root)
                self.state, self.message, self._source_refused = "error", f"indexing failed: {exc}", False
                self.server.show_error(f"codeloupe: indexing {self.root} failed: {exc}")
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(exc)
            self._mark_searchable()  # queries then answer from what was stored (the status says "error")
            return
        if self._closing:  # closed once the run was done: its writer and index are gone
            for waiter in waiters:
                waiter.cancel()
            return
        self._commit_moves = 0
        self.last_report = report
        self._source_accepted()
        self.message = ""
        self._warn_strategies(report)
        # Searchable as soon as chunking is done: a query arriving while the snapshot warms waits for that
        # build rather than starting a second one.
        self._mark_searchable()
        # An index no process has searched yet has its lexical index and symbol table built here (~13-15 s at
        # 40K files): the progress says so rather than resting on the last file counted.
        self._progress.note("preparing search", 50)
        await self._on_writer(self._warm_readers)
        counted = await self._on_writer(self.ws.status)
        self.files, self.chunks = counted.files, counted.chunks
        self._progress.note(f"indexed {self.files} files, {self.chunks} chunks", 50)
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(report)
        start_save_parser()  # before the graph's refresh takes the idle one a small folder's index left
        self._start_graph_refresh()
        self._embed_wanted = True

    def _warn_strategies(self, report: IndexReport) -> None:
        """A strategy found failing to load while chunking: shown as the strategy files that did not load are
        when the folder opens, once."""
        for warning in report.strategy_warnings:
            self.server.warn(warning, once=True)

    async def _indexing_saves_until(self, job: asyncio.Future[T]) -> T:
        """`job`'s result (work off the writer), indexing the files saved meanwhile on the writer as they come."""
        while True:
            if self._changed and not self._closing:
                await self._index_changed()
            elif job.done():
                return job.result()
            else:
                self._saved.clear()
                saved = asyncio.ensure_future(self._saved.wait())
                await asyncio.wait([job, saved], return_when=asyncio.FIRST_COMPLETED)
                saved.cancel()

    async def _index_changed(self) -> None:
        paths = sorted(self._changed)
        self._changed.clear()
        try:
            report = await self._on_writer(self.ws.update_files, paths)
        except SourceConflict as exc:  # a save is refused: the editor is told (a failed save is silent otherwise)
            self.server.source_replaced(exc)
            return
        except Exception:
            log.exception("re-indexing %s in %s failed", paths, self.root)
            return
        self._source_accepted()
        self._warn_strategies(report)
        # Search sees the change already (the engine's delta view, with a full rebuild of its own once the
        # index is quiet); the graph is refreshed after the burst of saves, before embedding resumes.
        self._schedule_graph_refresh()
        missing = [p for p in paths if not (self.root / p).exists()]
        if report.files_deleted < len(missing):
            # A deleted path that was not an indexed file is a directory (or was never indexed): only a
            # full scan knows which indexed files lived under it.
            self._full_wanted = True
        self._prefer.extend(p for p in paths if p not in missing)
        self._embed_wanted = True

    async def _embed(self) -> None:
        self._embed_wanted = False
        prefer, self._prefer = self._prefer, []
        callback = self._progress_callback(self._progress)
        try:
            report = await self._on_writer(lambda: self.ws.embed(callback, prefer_paths=prefer,
                                                                 should_stop=self._should_stop_embedding))
        except Exception as exc:
            if self._closing:  # closed under the run: nothing failed
                log.info("embedding %s stopped: the folder closed (%s)", self.root, exc)
                return
            # No key, an unreachable endpoint, a broken model file: search keeps the lexical lanes. Retrying
            # on every save would turn one warning into a loop, so wait for a settings change or a reindex.
            log.warning("embedding %s failed: %s", self.root, exc)
            self.embed_error = str(exc)
            self.server.warn(f"codeloupe: embeddings unavailable ({exc}); searching with the lexical and "
                             "symbol lanes only", once=True)
            return
        if report.stopped:
            self._embed_wanted = True  # resumes after the index work that interrupted it
            self._prefer = prefer + self._prefer

    def _schedule_graph_refresh(self) -> None:
        """Refresh the graph once saves pause (a refresh re-resolves the workspace's edges), on its own thread
        so the next save never queues behind it; coalesced."""
        if self._graph_timer is not None:
            self._graph_timer.cancel()
        self._graph_timer = asyncio.get_running_loop().call_later(GRAPH_QUIET_S, self._start_graph_refresh)

    def _start_graph_refresh(self) -> None:
        self._graph_timer = None
        if self._closing:
            return
        if self._graph_job is not None and not self._graph_job.done():
            self._graph_again = True
            return
        self._graph_again = False
        self._graph_job = asyncio.get_running_loop().run_in_executor(self._graph_worker, self._refresh_graph)
        self._graph_job.add_done_callback(lambda _: self._graph_again and not self._closing
                                          and self._start_graph_refresh())

    def _refresh_graph(self) -> None:
        try:
            # The folder closing stops this refresh while it takes the edges' facts (none kept, their workers killed)
            # or waits for another thread's build of the graph: its close (`_close_index`) waits for it.
            self.ws.refresh_graph(self._is_closing)
        except IndexStopped:
            log.info("refreshing the graph of %s stopped: the folder closed", self.root)
        except Exception:  # an optimisation: the request that needs the graph reports the fault itself
            log.exception("refreshing the graph of %s failed", self.root)

    def _warm_readers(self) -> None:
        """Build (or load) the search snapshot of the current index state, which the next search would
        otherwise build on a request thread (the graph is refreshed on its own thread)."""
        try:
            self.ws.warm(graph=False)
        except Exception:  # a warm-up is an optimisation; the request that needs it will report the fault
            log.exception("warming %s failed", self.root)

    def _progress_callback(self, progress: RefreshProgress | None) -> Callable[[Progress], None] | None:
        if progress is None:
            return None
        loop = asyncio.get_running_loop()
        return lambda event: loop.call_soon_threadsafe(progress.report, event)

    def _summary(self) -> str:
        """The progress bar's last word: the failure the status gives (an index that failed, a folder replaced
        elsewhere), else what the index holds."""
        if self.state == "error" and self.message:
            return self.message
        text = f"{self.files} files, {self.chunks} chunks" if self.last_report else "up to date"
        return text + (f"; embeddings unavailable: {self.embed_error}" if self.embed_error else "")

    # ---------------------------------------------------------------- reads (shared pool)

    def status(self) -> dict[str, Any]:
        """The folder's `codeloupe/status` entry (runs on a worker thread). `trusted`: the client's trust at
        `initialize` (while the settings files are those it trusted), or the user's trust store now (`codeloupe
        trust`). `settingsFiles`: the folder's own files that hold codeloupe settings, as the engine reads them (a
        client's own reading of them differed: a comment-only `.codeloupe.toml`, `[tool."codeloupe"]`)."""
        trusted = self.server.client_trusts(self.root) or workspace_trusted(self.root)
        return folder_status(self.uri, self.ws.status(), self.state, self.message or self.embed_error, trusted,
                             workspace_settings_files(self.root))

    # ---------------------------------------------------------------- lifecycle

    def stop(self) -> None:
        """Take no new work; the job in flight finishes (embedding stops at its next batch; the local model's first
        derivation, seconds of CPU, is killed: `Workspace.stop_embedding`)."""
        self._closing = True
        self.ws.stop_embedding()
        self._mark_searchable()
        self.progress_shown.set()
        if self._graph_timer is not None:
            self._graph_timer.cancel()
        for waiter in self._full_waiters:
            if not waiter.done():
                waiter.cancel()
        if self._progress is not None:
            self._progress.end("stopped")
            self._progress = None

    def close_at_exit(self) -> Future[None] | None:
        """At the process's exit, its event loop gone: take no new work and close the index on the writer once the
        job in flight is done (an index stops at its next file); that close, for the caller to wait for as long as
        it can (None when the folder was closed already)."""
        self._closing = True
        self.ws.stop_embedding()
        try:
            return self._writer.submit(self._close_index)
        except RuntimeError:  # its writer was shut down: closed already
            return None

    async def close(self) -> None:
        """Stop, then close the index on the writer once the jobs in flight are done."""
        self.stop()
        await self._on_writer(self._close_index)
        self._writer.shutdown(wait=False)

    def _close_index(self) -> None:
        """On the writer, once its job in flight is done: close the index once the graph refresh in flight is done
        too (its edges' facts stop at their next file, their workers killed; a resolution under way is waited for).
        Closed under that refresh, the index failed it ("refreshing the graph ... failed" in the log) and at exit
        the process left with its facts workers' pool never let go (leaked semaphores reported on stderr)."""
        self._graph_worker.shutdown(wait=True, cancel_futures=True)
        self.ws.close()


class Folders:
    """The open folders, looked up by URI or by any path inside them (the deepest root wins)."""

    def __init__(self) -> None:
        self._by_uri: dict[str, Folder] = {}

    def __iter__(self):
        return iter(list(self._by_uri.values()))

    def __len__(self) -> int:
        return len(self._by_uri)

    def add(self, folder: Folder) -> None:
        self._by_uri[folder.uri] = folder

    def pop(self, uri: str) -> Folder | None:
        return self._by_uri.pop(uri, None) or next(
            (self._by_uri.pop(f.uri) for f in list(self._by_uri.values()) if same_folder(f.uri, uri)), None)

    def get(self, uri: str) -> Folder | None:
        return self._by_uri.get(uri) or next((f for f in self if same_folder(f.uri, uri)), None)

    def containing(self, path: Path) -> Folder | None:
        try:
            path = path.resolve()
        except (OSError, RuntimeError):  # a link that leads to itself (Python before 3.13 raises RuntimeError)
            try:
                path = path.parent.resolve() / path.name  # held by the folder its name is in
            except (OSError, RuntimeError):
                return None
        best: Folder | None = None
        for folder in self:
            if path == folder.root or folder.root in path.parents:
                if best is None or len(folder.root.parts) > len(best.root.parts):
                    best = folder
        return best


def same_folder(a: str, b: str) -> bool:
    pa, pb = uri_to_path(a), uri_to_path(b)
    return pa is not None and pb is not None and pa.resolve() == pb.resolve()
