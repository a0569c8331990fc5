"""Warm workspaces, served alike over MCP and HTTP: opened with the settings the CLI loads, brought up to date
before each call (changed files only, by size and mtime), and failing open with whatever lanes are ready."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from codeloupe.api import (
    TOUR_ENTRY_POINTS,
    TOUR_NAMES,
    IndexStopped,
    InvalidArgument,
    RepositoryDropped,
    StoreError,
    Workspace,
    WorkspaceError,
    load_settings,
    search_repositories,
    tour_counts,
    unreadable_indexes,
)
from codeloupe.types import Bundle, Progress, elided

if TYPE_CHECKING:  # at run time it would import the model client when a server starts
    from codeloupe.api import AskEvent, AskRun

# What a pool of the shared index's repositories lists them again with (`WarmWorkspaces.relist`): the workspaces
# it serves; returns those to open and those it no longer holds (`codeloupe.api.reopen_shared`).
Relist = Callable[[list[Workspace]], tuple[list[Workspace], list[Workspace]]]

log = logging.getLogger("codeloupe.warm")
T = TypeVar("T")

# A burst of calls walks the tree once; a saved file is seen within this many seconds.
REFRESH_INTERVAL_S = 1.0
# How often readiness asks whether the indexes can be read (a round trip to a shared index's database).
READABLE_CHECK_INTERVAL_S = 1.0
# How often a server of the shared index's repositories lists them again, as calls come (one query, on a worker
# thread): a repository indexed since is served within this many seconds, one dropped stops being searched.
RELIST_INTERVAL_S = 5.0
# The first call waits this long for the first index (lexical lanes) before answering with what there is.
FIRST_INDEX_WAIT_S = 120.0
# True inside `answer_waited`: the call waited for the first index already (`WarmWorkspace.first_index`).
_WAITED: ContextVar[bool] = ContextVar("first_index_waited", default=False)


class WarmWorkspace:
    """One root's `Workspace`, indexed in the background at open and refreshed before each call."""

    def __init__(self, root: Path | str | Workspace, *, refresh_interval_s: float = REFRESH_INTERVAL_S) -> None:
        if isinstance(root, Workspace):  # opened by the caller (a repository of the shared index)
            self.ws = root
        else:
            path = Path(root)
            if not path.is_dir():
                raise WorkspaceError(f"{root}: not a directory")
            # The same settings the CLI reads for this root (files, environment, user config; never a request).
            settings = load_settings(path.resolve(), {})
            self.ws = Workspace(path, settings)
            # And the same notices it prints, once, as the server starts: the workspace settings ignored, the
            # endpoints a trusted workspace's files chose, the strategy files not loaded (on stderr through the
            # log; over stdio, stdout is the protocol's).
            for notice in [*settings.notices, *self.ws.strategy_load.warnings]:
                log.warning("%s", notice)
        # Served answers go to agents (MCP, HTTP: a cloud model's context), not only to the user's eyes: files that
        # look like secrets are listed, never shown.
        self.ws.withholds_secrets = True
        self.refresh_interval_s = refresh_interval_s
        self.last_error = ""
        self._refreshing = threading.Lock()
        self._last_refresh = 0.0
        self._first_index = threading.Event()
        self._first_index_progress: Progress | None = None
        self._loop_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._loop_waiters_lock = threading.Lock()
        self._closing = threading.Event()
        self._users = 0  # calls holding the workspace now (`held`)
        self._retired = False  # `retire`: closed once no call holds it
        self._users_lock = threading.Lock()
        self.closer: threading.Thread | None = None  # closing it, once retired and no call holds it (`retire`)
        self._embedder: threading.Thread | None = None
        self._indexer = threading.Thread(target=self._index_first, name="codeloupe-first-index", daemon=True)
        self._indexer.start()

    @property
    def root(self) -> Path:
        return self.ws.root

    @property
    def ready(self) -> bool:
        """True once the first index finished (the lexical and symbol lanes answer)."""
        return self._first_index.is_set()

    def first_index_counts(self) -> tuple[int, int] | None:
        """(files indexed, files to index) of the first index while it chunks; None before it has listed them or
        once it ended."""
        progress = self._first_index_progress
        return None if self.ready or progress is None else (progress.done, progress.total)

    def building_note(self) -> str:
        """What an answer given before the first index finished lacks ("" once it has): the files not yet
        indexed (after `FIRST_INDEX_WAIT_S` a call answers from the index as it is, rather than not at all)."""
        if self.ready:
            return ""
        progress = self._first_index_progress
        counted = f"{progress.done:,} of {progress.total:,} files indexed" if progress else "listing the files"
        return (f"the index of {self.root.name} is still being built ({counted}): files not yet indexed are "
                "missing from this answer; `status` says when it is ready")

    def search(self, query: str, *, scope: str = "", mode: str = "code", limit: int = 12) -> Bundle:
        """The bundle for `query` from the refreshed index, noting what it lacks while the first index runs."""
        bundle, notes = self.noted(lambda ws: ws.search(query, scope=ws.relative(scope) if scope else "",
                                                        mode=mode, limit=limit))
        return _noted(bundle, notes)

    def start_ask(self, question: str, *, mode: str = "code", agents: bool | None = None,
                  best: bool = False) -> tuple[AskRun, list[str]]:
        """The ask of `question` from the refreshed index (`Workspace.ask`), and the notes its `done` bundle gets
        (`noted`: a first index still running): what MCP's `ask` and HTTP's asks start alike, each then reading
        the run in its own protocol. The run's events hold the workspace (`held`) from the first to the last."""
        from codeloupe.api import AskRun

        run, notes = self.noted(lambda ws: ws.ask(question, mode=mode, agents=agents, best=best))
        return AskRun(self._held_events(run), run.cancellation), notes

    def _held_events(self, run: AskRun) -> Iterator[AskEvent]:
        # Held from the first event on (a run never started holds nothing), let go at its end, its close, or when
        # the collector closes one left unfinished.
        with self.held():
            yield from run

    def noted(self, call: Callable[[Workspace], T]) -> tuple[T, list[str]]:
        """`call`'s answer from the refreshed workspace (`held` meanwhile), and the notes on what it lacks
        (`building_note`, while the first index runs); a refusal meanwhile (a file not indexed yet) says so in its
        message too."""
        with self.held():
            ws = self.fresh()
            building = self.building_note()  # taken first: an index finishing meanwhile makes the note too careful
            try:
                return call(ws), [building] if building else []
            except InvalidArgument:  # what the call was given: no index would answer it otherwise
                raise
            except WorkspaceError as exc:
                if building:
                    raise WorkspaceError(f"{exc}; {building}") from exc
                raise

    def noted_json(self, call: Callable[[Workspace], dict[str, Any]]) -> dict[str, Any]:
        """`call`'s JSON answer with its `notes` beside its own fields (`noted`), as HTTP's reads and MCP's tour
        answer."""
        found, notes = self.noted(call)
        return {**found, "notes": notes}

    def tour(self, *, limit: int = TOUR_NAMES, entry_points: int = TOUR_ENTRY_POINTS) -> dict[str, Any]:
        """The tour's JSON with its notes, as `/v1/tour` and MCP's `codeloupe://tour` answer alike: the strongest
        `entry_points` entry points (the rest counted), then the `limit` names most files mention (either count
        refused as `tour_counts` says)."""
        limit, entry_points = tour_counts(limit, entry_points)
        return self.noted_json(lambda ws: dataclasses.asdict(ws.tour(limit=limit, entry_point_limit=entry_points)))

    async def first_index(self) -> None:
        """Wait for the first index as `fresh` does (up to `FIRST_INDEX_WAIT_S`), but on the event loop, holding
        no worker thread: a caller that gives up (an HTTP client hanging up) cancels this and holds nothing, where
        a thread waiting in `fresh` stayed taken for the whole wait. The call then runs in `answer_waited`."""
        ended = asyncio.Event()
        waiter = (asyncio.get_running_loop(), ended)
        with self._loop_waiters_lock:  # against the first index ending between the check and the registration
            waiting = not self.ready
            if waiting:
                self._loop_waiters.add(waiter)
        try:
            if waiting:
                await asyncio.wait_for(ended.wait(), FIRST_INDEX_WAIT_S)
        except TimeoutError:
            pass  # answered from the index as it is, as after `fresh`'s wait
        finally:
            with self._loop_waiters_lock:
                self._loop_waiters.discard(waiter)

    def fresh(self) -> Workspace:
        """The workspace after indexing what changed on disk. A failed refresh, or one already running in
        another thread, answers from the index as it is: a call is never refused for being stale."""
        if not _WAITED.get():
            self._first_index.wait(FIRST_INDEX_WAIT_S)
        if self.ready and time.monotonic() - self._last_refresh >= self.refresh_interval_s:
            self._refresh()
        return self.ws

    def _index_first(self) -> None:
        try:
            self._refresh(force=True, progress=self._note_progress)
        finally:
            with self._loop_waiters_lock:
                self._first_index.set()
                waiters = list(self._loop_waiters)
            for loop, ended in waiters:
                with contextlib.suppress(RuntimeError):  # its loop closed: the server stopped meanwhile
                    loop.call_soon_threadsafe(ended.set)

    def _note_progress(self, event: Progress) -> None:
        if event.phase == "chunk":
            self._first_index_progress = event

    def _refresh(self, *, force: bool = False, progress: Callable[[Progress], None] | None = None) -> None:
        if not self._refreshing.acquire(blocking=False):
            return
        try:
            if self._closing.is_set() or (not force and time.monotonic() - self._last_refresh < self.refresh_interval_s):
                return
            report = self.ws.index(progress, should_stop=self._closing.is_set)
            self.last_error = ""
            if force or report.files_indexed or report.files_deleted:
                # The search snapshot brought up to date before the call is answered: after a bulk change (a
                # branch switch) the changed files were otherwise left out of every answer until a background
                # rebuild, as the language server's interim answers are; an agent is owed the complete one.
                self.ws.warm(graph=False)
                self._embed_in_background()
        except IndexStopped:  # `close`: the files written are whole in the index, the next start indexes the rest
            log.info("%s: indexing stopped, the workspace is closing", self.root)
        except Exception as exc:  # fail open: the last index still answers, the status says why it is stale
            self.last_error = f"refreshing the index failed: {exc}"
            log.warning("%s: %s", self.root, self.last_error)
        finally:
            self._last_refresh = time.monotonic()
            self._refreshing.release()

    def _embed_in_background(self) -> None:
        if self.ws.settings.embed_provider == "none" or self._closing.is_set():
            return
        if self._embedder is not None and self._embedder.is_alive():
            return  # the running pass picks up what is missing when it asks the store for pending chunks

        def embed() -> None:
            try:
                self.ws.embed(should_stop=self._closing.is_set)
            except Exception as exc:  # the dense lane stays not ready; the others answer
                self.last_error = f"computing vectors failed: {exc}"
                log.warning("%s: %s", self.root, self.last_error)

        self._embedder = threading.Thread(target=embed, name="codeloupe-embed", daemon=True)
        self._embedder.start()

    @contextlib.contextmanager
    def held(self) -> Iterator[Workspace]:
        """The workspace, kept open while the block runs: one retired meanwhile (`retire`) is closed by the last
        block to leave it. Refused once it is retired: its repository is no longer in the shared index (or another
        one is, under its name: served in its place)."""
        with self._users_lock:
            if self._retired:
                raise WorkspaceError(f"{self.root}: no longer served here: dropped from the shared index (or indexed"
                                     " again under its name, then served anew) since the server opened it")
            self._users += 1
        try:
            yield self.ws
        finally:
            with self._users_lock:
                self._users -= 1
                last = self._retired and not self._users
            if last:
                self._close_retired()

    def retire(self) -> None:
        """Serve this workspace no more (its repository left the shared index): closed now when no call holds it
        (`held`), else when the last one lets go."""
        with self._users_lock:
            self._retired = True
            unused = not self._users
        if unused:
            self._close_retired()

    def _close_retired(self) -> None:
        # On a thread of its own: the last call to let go may be on the event loop (an ask's events the collector
        # closed), and closing waits for the workspace's background work. Its embedding model is not stopped:
        # the repositories opened with it may embed with it (`reopen_shared`); its snapshot is let go, as the
        # workspace itself may stay referenced for that model. Once only: the pool's close starts it for one a call
        # still holds at shutdown (`WarmWorkspaces.close`), and that call's end would start it again.
        def close() -> None:
            self.close(keep_model=True)
            self.ws.release_searcher()

        with self._users_lock:
            if self.closer is not None:
                return
            self.closer = threading.Thread(target=close, name=f"codeloupe-close-{self.root.name}", daemon=True)
        self.closer.start()

    def close(self, *, keep_model: bool = False) -> None:
        """Stop the background work and close the workspace, so that a server whose client went exits at once (an
        MCP client sends SIGTERM 2 s after closing stdin): an index under way stops before its next file (its
        chunking workers killed; each file written is whole in the index, the next start indexes the rest), be it
        the first index or a refresh before a call, and an embedding pass is cut short (its step dropped, its
        worker processes killed). `keep_model`: the embedding model is left running, for the workspaces that
        embed with it (a shared index's repositories opened together, which run no embedding pass)."""
        self._closing.set()
        if not keep_model:
            self.ws.stop_embedding()
        self._indexer.join(timeout=30)
        # A refresh before a call (`fresh`, on a request thread) holds `_refreshing` as the first index does: taken
        # here once it stopped, so that nothing of it comes after the close. Let go at once: one taking it from here
        # on finds `_closing` set and returns, and a second close (kept, it waited 30 s) finds nothing to wait for.
        if self._refreshing.acquire(timeout=30):
            self._refreshing.release()
        if self._embedder is not None:  # read after the indexer ended: a refresh may have started one (it stops
            self._embedder.join(timeout=30)  # before its first step: `_closing` is its should_stop)
        self.ws.close()


class WarmWorkspaces:
    """The roots one process serves, chosen per request by path (never opened on request); repositories of the
    shared index are listed again as calls come when `relist` is given (`relist()`)."""

    def __init__(self, roots: list[Path | str | Workspace], *, refresh_interval_s: float = REFRESH_INTERVAL_S,
                 relist: Relist | None = None, relist_interval_s: float = RELIST_INTERVAL_S) -> None:
        if not roots:
            raise WorkspaceError("no workspace to serve")
        self._unreadable = ""  # `unreadable()`'s last answer
        self._readable_at = float("-inf")
        self._checking = False
        self._readable_lock = threading.Lock()
        self._refresh_interval_s = refresh_interval_s
        self._relist = relist
        self._relist_interval_s = relist_interval_s
        self._relisted_at = time.monotonic()
        self._relisting = threading.Lock()
        self._retired: list[WarmWorkspace] = []
        # Taken to change `all` and `_retired`, and by `close`: a listing ending after the close closes what it
        # opened itself, where it added workspaces that nobody closed.
        self._serving = threading.Lock()
        self._closed = False
        # Replaced whole, never changed in place: a call goes on with the list it read.
        self.all: list[WarmWorkspace] = []
        try:
            for root in _distinct(roots):
                self.all.append(WarmWorkspace(root, refresh_interval_s=refresh_interval_s))
        except BaseException:  # a later root that cannot be opened (no folder, its index): the opened stop too
            self.close()
            raise

    def get(self, root: str | None = None) -> WarmWorkspace:
        """The served workspace named by `root` (its path as served, its resolved path, or its folder's name
        where no other served root has that name); the first when None. A root that is not served is refused:
        requests cannot open new workspaces. So is a name several roots share (`serve ~/work/app ~/forks/app`),
        naming them: answering from the first of them answered from a repository the caller may not have meant."""
        served = self.all
        if not served:
            raise WorkspaceError("no repository served: the shared index holds none of them now")
        if not root:
            return served[0]
        for warm in served:
            if root == str(warm.root) or _same_path(root, warm.root):
                return warm
        named = [warm for warm in served if warm.root.name == root]
        if len(named) == 1:
            return named[0]
        if named:
            raise WorkspaceError(f"{elided(root)}: names {len(named)} served workspaces, {', '.join(str(w.root) for w in named)}:"
                                 " give the one meant by its path")
        raise WorkspaceError(f"{elided(root)}: not a served workspace (serving {', '.join(str(w.root) for w in served)})")

    def serving(self, warm: WarmWorkspace) -> WarmWorkspace:
        """The workspace served in `warm`'s place: `warm` while it is served; once its repository was indexed again
        under its name (dropped, then indexed: `relist`), the one serving that name now; `warm` when none does
        (a call then refuses as no longer served). What a server bound to one repository answers from (MCP's)."""
        served = self.all
        if any(other is warm for other in served):
            return warm
        return next((other for other in served if other.root == warm.root), warm)

    def search_across(self, roots: list[str], query: str, *, mode: str = "code", limit: int = 12) -> Bundle:
        """One ranking across the workspaces `roots` names (`select`; `search_repositories`), noting those whose
        first index still runs. A search meeting a repository dropped from the shared index since the last
        `relist` has them listed again at once, and searches those served then."""
        served = self.all
        try:
            return self._search_held(self.select(roots), query, mode, limit)
        except RepositoryDropped:
            # The served ones changed since this search chose: by its own listing, or by another call's that met
            # the same drop first (its listing then finds nothing more to change). Neither: the error stands.
            self.relist(force=True)
            if self.all is served:
                raise
            return self._search_held(self.select(roots), query, mode, limit)

    def _search_held(self, warms: list[WarmWorkspace], query: str, mode: str, limit: int) -> Bundle:
        with self.held(warms) as held:
            if not held:
                raise WorkspaceError("no repository to search: the shared index holds none of them now")
            workspaces = [warm.fresh() for warm in held]
            building = [warm.building_note() for warm in held]
            # Labelled apart from every served one: a label is passed back (`expand`'s `repo`) to `get`.
            return _noted(search_repositories(workspaces, query, mode=mode, limit=limit,
                                              among=[warm.ws for warm in self.all]), building)

    @staticmethod
    @contextlib.contextmanager
    def held(warms: list[WarmWorkspace]) -> Iterator[list[WarmWorkspace]]:
        """Those of `warms` still served, each held (`WarmWorkspace.held`) while the block runs."""
        with contextlib.ExitStack() as stack:
            kept = []
            for warm in warms:
                with contextlib.suppress(WorkspaceError):  # retired since it was chosen: it is left out
                    stack.enter_context(warm.held())
                    kept.append(warm)
            yield kept

    async def relisted(self) -> None:
        """`relist()` when it is due, on a worker thread: it asks the database, which the event loop never waits
        on. Called before a call chooses its workspaces."""
        if self._relist is not None and time.monotonic() - self._relisted_at >= self._relist_interval_s:
            await anyio.to_thread.run_sync(self.relist, abandon_on_cancel=True)

    def relist(self, *, force: bool = False) -> bool:
        """Serve the repositories the shared index holds now: those indexed since (or dropped and indexed again
        under their name) opened, and served once their first index ended; those dropped no longer served, and
        closed once no call holds them (`WarmWorkspace.retire`). At most every `relist_interval_s` unless `force`,
        and not waiting for one under way on another thread unless `force`. Whether the served ones changed;
        never for a pool of folders. A database that cannot be asked leaves them as they are (logged)."""
        if self._relist is None or not self._relisting.acquire(blocking=force):
            return False
        # Not due: let go without counting as a listing (`_relisted_at`), or a caller asking more often than the
        # interval (a monitor polling /v1/status) put the next one off for good.
        if not force and time.monotonic() - self._relisted_at < self._relist_interval_s:
            self._relisting.release()
            return False
        try:
            served = self.all
            try:
                opened, gone = self._relist([warm.ws for warm in served])
            except (StoreError, WorkspaceError) as exc:
                log.warning("could not list the shared index's repositories again: %s", exc)
                return False
            added = [WarmWorkspace(ws, refresh_interval_s=self._refresh_interval_s) for ws in opened]
            for warm in added:  # served ready: readiness stays as it was, and their first call does not wait
                warm._first_index.wait(FIRST_INDEX_WAIT_S)
            retired = [warm for warm in served if any(warm.ws is ws for ws in gone)]
            with self._serving:
                closed = self._closed
                if not closed:
                    self.all = [warm for warm in served if warm not in retired] + added
                    # Kept until closed, for `close` to wait for: those closed are let go, or a server re-listing
                    # for months would hold every repository it ever stopped serving.
                    self._retired = [warm for warm in self._retired
                                     if warm.closer is None or warm.closer.is_alive()] + retired
            if closed:  # the pool closed meanwhile, those it served with it
                for warm in added:
                    warm.close()
                return False
            for warm in retired:
                log.info("%s: no longer in the shared index (dropped, or indexed again), no longer served", warm.root)
                warm.retire()
            for warm in added:
                log.info("%s: in the shared index since, served", warm.root)
            return bool(added or retired)
        finally:
            self._relisted_at = time.monotonic()
            self._relisting.release()

    def select(self, roots: list[str]) -> list[WarmWorkspace]:
        """The served workspaces named by `roots` (as `get` names them, spaces around a name ignored); every one
        when `roots` names none or holds `*` (MCP's `repos` and HTTP's `repos` read alike). A blank name names
        nothing: to `get` it is the first workspace, which a search across repositories never meant."""
        names = [name.strip() for name in roots if name.strip()]
        if not names or "*" in names:
            return list(self.all)
        return list({id(w): w for w in map(self.get, names)}.values())

    @property
    def ready(self) -> bool:
        return all(w.ready for w in self.all)

    def unreadable(self) -> str:
        """Why the served indexes cannot be read ("" when they can), as last found: asked again in the
        background at most every READABLE_CHECK_INTERVAL_S, so the caller never waits on the database (one that
        does not answer holds the check up to its connect timeout)."""
        with self._readable_lock:
            due = not self._checking and time.monotonic() - self._readable_at >= READABLE_CHECK_INTERVAL_S
            self._checking = self._checking or due
        if due:
            threading.Thread(target=self._check_readable, name="codeloupe-readable", daemon=True).start()
        return self._unreadable

    @property
    def checking_readable(self) -> bool:
        """Whether a check that `unreadable()` started is under way (its answer not in yet)."""
        return self._checking

    @property
    def last_unreadable(self) -> str:
        """The answer of the last check that finished (`unreadable()` without starting one)."""
        return self._unreadable

    def _check_readable(self) -> None:
        try:
            self._unreadable = unreadable_indexes(w.ws for w in self.all)
        finally:
            with self._readable_lock:
                self._checking, self._readable_at = False, time.monotonic()

    def close(self) -> None:
        """Close every workspace, each on its own thread: a close waits for what it cannot stop (a resolution, a
        model's first load, a remote embedding request in flight; `WarmWorkspace.close`), and one after the other
        those waits added up per workspace before the process could exit; side by side it waits for the slowest
        one's alone. Those no longer served are closed too: a call still holding one at shutdown (its close
        otherwise left to that call's end, which the process did not wait for) no more keeps it open than it keeps
        a served one."""
        with self._serving:
            self._closed = True
            served, retired = self.all, self._retired
        for warm in retired:  # closing since the last call holding them let go, or from now
            warm._close_retired()
        closing = [threading.Thread(target=warm.close, name=f"codeloupe-close-{warm.root.name}", daemon=True)
                   for warm in served]
        for thread in closing:
            thread.start()
        for thread in closing:
            thread.join()
        for warm in retired:
            if warm.closer is not None:
                warm.closer.join()


def answer_waited(call: Callable[[], T]) -> T:
    """`call()` (on a worker thread) after `WarmWorkspace.first_index` waited for its workspaces: its `fresh`
    does not wait a second `FIRST_INDEX_WAIT_S` when the first one passed with the index still running."""
    waited = _WAITED.set(True)
    try:
        return call()
    finally:
        _WAITED.reset(waited)


def _distinct(roots: list[Path | str | Workspace]) -> list[Path | str | Workspace]:
    """`roots` less those naming a folder named before (`serve a a`, `serve a ./a`), said once each: they are
    dropped before anything opens them, where a duplicate's workspace ran a second first index of the folder."""
    kept: list[Path | str | Workspace] = []
    seen: set[Path] = set()
    repeated: set[Path] = set()
    for root in roots:
        # A path that cannot be resolved is kept as given: opening it says why it cannot be served.
        folder = root.root if isinstance(root, Workspace) else _resolved(root) or Path(root)
        if folder not in seen:
            seen.add(folder)
            kept.append(root)
            continue
        if folder not in repeated:
            repeated.add(folder)
            log.warning("%s: given more than once, served once", folder)
        if isinstance(root, Workspace) and not any(root is other for other in kept):
            root.close()  # opened by the caller for this pool, which closes what it serves
    return kept


def _resolved(path: Path | str) -> Path | None:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def _same_path(candidate: str, root: Path) -> bool:
    return _resolved(candidate) == root


def noted_event(event: AskEvent, notes: list[str]) -> AskEvent:
    """An ask's event with `notes` added to its `done` bundle's (the other events carry no bundle)."""
    if event.result is None or not notes:
        return event
    return dataclasses.replace(event, result=dataclasses.replace(event.result, bundle=_noted(event.result.bundle,
                                                                                             notes)))


def _noted(bundle: Bundle, notes: list[str]) -> Bundle:
    notes = [note for note in notes if note]
    return dataclasses.replace(bundle, notes=[*notes, *bundle.notes]) if notes else bundle
