"""The shared index (`store_url = "postgresql://..."`) above the store: the commit a repository's answers are
pinned to and the indexing workers that fill the database from a queue. (A repository served from the database
with no checkout is `codeloupe.api.SharedWorkspace`; which store a workspace opens: `codeloupe.store.opening`.)

`codeloupe index --store URL --queue` walks a workspace and queues the changed files in batches, an index run;
any number of `codeloupe worker --store URL` processes (on any machine that sees the same path) claim batches
with `SELECT ... FOR UPDATE SKIP LOCKED`, read and chunk the files, embed what the organisation has never
embedded (the database's vector cache is asked first), and write each batch in one transaction that also marks
it done. The transaction writing a run's last open batch also deletes the files that left the folder and pins
the repository to the run's commit (`PgStore.write_batch`). A claim is a lease: a worker killed mid-batch writes
nothing, and its batch is claimed again once the lease runs out.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codeloupe.chunk import CHUNKER_VERSION, chunked_version, is_doc_language
from codeloupe.chunk.strategies import Strategy, load_workspace_strategies
from codeloupe.discover import Candidate, path_skip_reason, walk
from codeloupe.embed import EmbeddingProvider, embedding_text, make_provider
from codeloupe.git_repo import RepositoryRefused, repository_of
from codeloupe.index import (
    Prepared,
    budget_in_force,
    content_rules,
    files_a_save_writes,
    grammars_in_force,
    prepare_files,
    remember_walk,
    skipped_unchanged,
    strategies_in_force,
)
from codeloupe.regular_file import read_whole
from codeloupe.repository_names import shown_repository_name
from codeloupe.settings import Settings, load_settings
from codeloupe.store import CommitMoved, SkippedFile, SourceConflict, StoreError
from codeloupe.store.postgres import (
    INDEX_STARTED,
    INDEXED_AT_KEY,
    MAX_ATTEMPTS,
    BatchFile,
    PgStore,
    RunEnd,
    RunSuperseded,
    WorkItem,
    WorkQueue,
    bound_lock_waits,
    build_index_once,
    connect,
    connection_lost,
    content_key,
    drop_vector_indexes,
    global_vector_index_name,
    global_vector_index_sql,
    index_valid,
    lock_holders,
    migrate,
    queued_batches,
    redact,
    run_under_way,
    said,
    unfinished_index_note,
)
from codeloupe.store.protocol import IndexStore
from codeloupe.types import BLANK_CHARS, DIRTY_SUFFIX
from codeloupe.wording import amount

log = logging.getLogger("codeloupe.shared")

# Files per queued batch: one worker transaction each (small enough that a killed worker loses little).
BATCH_FILES = 50
# How long a claim lasts before another worker may take the batch over.
LEASE_S = 120.0
# From this many vectors of one dimension, a worker whose queue has drained builds the graph over every
# repository (`build_global_vector_indexes`) if there is none: a search across the organisation then takes its
# nearest chunks from it instead of an exact scan of every vector, which takes about a second at 200-350K
# vectors on two cores (607 ms at 207K, 4.4 s at 828K: docs/org-scale-measurements.md) and is what the
# serving process names in its log (`SLOW_SCAN_S`). Built once the writes of a bulk load are done, as an
# index is cheapest to build; each later write adds to it.
GLOBAL_INDEX_MIN_VECTORS = 300_000
# A worker whose database went away tries to reach it again after RECONNECT_FIRST_S, then twice as long each
# time, up to RECONNECT_MAX_S between tries.
RECONNECT_FIRST_S = 0.5
RECONNECT_MAX_S = 30.0


@contextmanager
def pinned_source(store: IndexStore, root: Path) -> Iterator[RunEnd]:
    """Around an index run that writes its files itself: in the shared index, record where the repository is
    indexed from (queued runs not yet written are superseded), each file written as read at the folder's commit,
    and, once the block ends without an error, delete the files the run deleted and pin the repository to that
    commit in one transaction (`PgStore.writing_run`). A workspace's own SQLite index reads the disk as it is.

    A repository the index holds from another folder is refused (`claim_source` with `replace` first:
    `index --replace`). The folder is the store's from then on: each of its writes, and its answers, are refused
    once another folder replaces it (`PgStore.check_source`). Yields how the run ended (`RunEnd`), told once the
    block is left (a SQLite index's: pinned, its deletes made as the run made them)."""
    if not isinstance(store, PgStore):
        yield RunEnd(pinned=True)
        return
    commit = workspace_commit(root)
    head = commit.removesuffix(DIRTY_SUFFIX)

    def still_at_commit() -> None:
        """Before a group of the run's files is written, each read by then: refuse (`CommitMoved`) once the folder
        left the commit the run cites them at (a checkout, a commit, a pull while it ran), as a queued run's
        workers do around each batch. Recorded at the run's commit, a file read after the move was cited at it with
        another commit's text. `HEAD` only (`git rev-parse`, a few milliseconds a group): comparing the work tree too
        (`git status`) would take a tenth of a second and more a group of a large tree."""
        now = _head(root)
        if now != head:
            raise CommitMoved(f"{root} moved from commit {head} to {now or 'no commit'} while it was indexed: the"
                              " files read since were not written and the repository's pin was not moved (each"
                              f" file written before is cited at {commit}); index it again")

    with store.writing_run(str(Path(root).resolve()), commit,
                           before_writing=still_at_commit if head else None) as ended:
        yield ended


def claim_source(store: PgStore, root: Path, *, replace: bool = False) -> None:
    """Record `root` as the folder the repository is indexed from, its commit left as it is (the run that writes
    the folder's files pins it): refused (`SourceConflict`) when the repository is another folder's, unless
    `replace` (`index --replace`, queued or not). Pinned here, a queued `--replace` named the new folder's commit
    for the old folder's files until the workers had written the new ones."""
    store.set_source(str(Path(root).resolve()), replace=replace)


def check_source(store: PgStore, root: Path) -> None:
    """Refuse (`SourceConflict`) a folder whose repository the shared index holds from another folder: its
    chunks are the other folder's files, so an answer would rank them while reading this folder's files from
    disk, and a write would replace them with this folder's. The folder is the store's from then on (see
    `pinned_source`)."""
    store.source_folder = str(Path(root).resolve())
    store.check_source(fresh=True)


# How long `git status` may take to compare a work tree with its commit (a 40K-file tree takes well under it).
STATUS_TIMEOUT_S = 120


def workspace_commit(root: Path, paths: Collection[str] | None = None) -> str:
    """The commit checked out in `root` ("" when it is not a git work tree, or git is missing), with DIRTY_SUFFIX
    when a file the index would read differs from it (`workspace_changes`), or one of `paths` where given.

    `rev-parse` reads refs only: no hook, filter or fsmonitor of the repository's configuration runs."""
    head = _head(root)
    if not head:
        return ""
    return head + (DIRTY_SUFFIX if workspace_changes(root, paths) != [] else "")


def _head(root: Path) -> str:
    """The commit checked out in `root` ("" when it is not a git work tree, or git is missing); refs only (see
    `workspace_commit`)."""
    return (_git(root, "rev-parse", "--verify", "--quiet", "HEAD") or "").strip()


# A save of more files than this is compared with its commit as the whole folder is (a branch switch's saves):
# one path an argument, the command line of a save of every file would outgrow what the system allows.
SAVED_PATHS_COMPARED = 200


@contextmanager
def saved_at(store: IndexStore, root: Path, rel_paths: Collection[str]) -> Iterator[None]:
    """Around a save's writes (`Workspace.update_files`): in the shared index, each file written records the
    revision its text was read at (`PgStore.written_at`): the folder's commit, with DIRTY_SUFFIX when a file the
    save may write (`files_a_save_writes`) differs from it, as `git status` of those files alone says (9 ms a save
    of one file in a 600-file checkout). Recorded at the repository's pin, a file edited and saved, or saved after
    the folder moved to another commit, was cited at a commit whose text differs. `<sha>-dirty` is what a run of a
    folder with changes records already, and every citation shows it as naming no commit; a file saved as its
    commit holds it is cited at that commit. A workspace's own SQLite index records no revision."""
    if not isinstance(store, PgStore):
        yield
        return
    written = files_a_save_writes(rel_paths)
    compared = written if written is not None and len(written) <= SAVED_PATHS_COMPARED else None
    with store.written_at(workspace_commit(root, compared)):
        yield


def workspace_changes(root: Path, paths: Collection[str] | None = None) -> list[str] | None:
    """The paths where `root`'s work tree differs from its commit, as `git status --porcelain` lists them
    (tracked files changed, staged or deleted; untracked files not ignored), of `paths` only where given (taken
    literally, not as patterns); None when git cannot tell.

    The repository's configuration is untrusted (rule 6): its fsmonitor and the clean filters of every filter
    driver the configuration names are switched off for the run, submodules are not entered, and the index
    file is not refreshed. A file a filter would have normalised may then read as changed (never the reverse)."""
    if paths is not None and not paths:
        return []
    names = _git(root, "config", "--includes", "--name-only", "--get-regexp", r"^filter\.")
    if names is None:
        names = ""  # no filter configured: `git config` exits 1
    overrides = ["-c", "core.fsmonitor=false", "-c", "status.submoduleSummary=false"]
    for driver in sorted({line[len("filter."):].rpartition(".")[0] for line in names.splitlines() if "." in line}):
        for key, value in (("clean", ""), ("process", ""), ("required", "false")):
            overrides += ["-c", f"filter.{driver}.{key}={value}"]
    out = _git(root, *overrides, "--literal-pathspecs", "--no-optional-locks", "status", "--porcelain", "-z",
               "--ignore-submodules=all", "--untracked-files=all", "--no-renames",
               *([] if paths is None else ["--", *paths]), timeout=STATUS_TIMEOUT_S)
    if out is None:
        return None
    return [entry[3:] for entry in out.split("\0") if entry]  # "XY path" each


# git never fetches here. A repository whose configuration calls it a partial clone (`extensions.partialClone`)
# has git fetch an object it lacks from its "promisor" remote: `git status` over a commit whose tree is missing
# ran the `remote.<name>.uploadpack` that configuration names (a local remote), its `core.sshCommand` (ssh), or
# sent a request to its host (https). GIT_NO_LAZY_FETCH stops the fetch in the git that knows it; every transport
# refused stops it in any git, and in the `git fetch` it would start (which inherits `-c` through the environment).
_NO_FETCH = ["-c", "protocol.allow=never"]
_NO_FETCH_ENV = {"GIT_NO_LAZY_FETCH": "1"}


# What git takes from the environment over the repository it finds (`git rev-parse --local-env-vars`): a
# `GIT_DIR` exported by a hook or for another checkout made every folder read as that repository. Left out, git
# finds the folder's own; `GIT_WORK_TREE` is set again below.
_REPOSITORY_ENV = ("GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
                   "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
                   "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
                   "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR")


# Each reason git was not run, or did not answer, logged once a process: a save of such a folder meets it again.
_told: set[str] = set()
# The repositories (git directories) where git did not answer in time: a FIFO among the work tree's `.gitignore`
# files stalls every `git status` there, so each save waited the whole timeout again. git is not run there again
# this process; their commits and changes are unknown (cited as no commit).
_stalled: set[Path] = set()


def _git(root: Path, *args: str, timeout: float = 10) -> str | None:
    """git's output run in `root`, fetching nothing (`_NO_FETCH`); None when it failed, timed out or is missing,
    when `root` is in no repository, or in one whose files would stall git (`git_repo.repository_of`, logged).
    The work tree is the folder holding `.git`, whatever the repository's `core.worktree` says. Never with this
    process's input: under the language server that is the editor's channel, and the repository's configuration
    can include `/dev/stdin`, which `git config --includes` read to its end (the editor's messages with it)."""
    try:
        repository = repository_of(root)
    except RepositoryRefused as exc:
        _tell(f"{root} is taken as no git work tree (its files are cited at no commit): {exc}")
        return None
    if repository is None or repository.git_dir in _stalled:
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), *_NO_FETCH, *args], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, errors="surrogateescape", timeout=timeout,
                              check=False, env={**{name: value for name, value in os.environ.items()
                                                   if name not in _REPOSITORY_ENV}, **_NO_FETCH_ENV,
                                                "GIT_WORK_TREE": str(repository.work_tree)})
    except subprocess.TimeoutExpired:
        _stalled.add(repository.git_dir)
        _tell(f"git did not answer in {timeout:g} s in {root}: its commit and changes are taken as unknown, and git "
              "is not run in that repository again until codeloupe restarts")
        return None
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _tell(message: str) -> None:
    if message not in _told:
        _told.add(message)
        log.warning("%s", message)


@dataclass(frozen=True)
class QueuedRun:
    """What `enqueue_workspace` queued: how many batches, at which revision of the folder."""

    batches: int
    commit: str


def enqueue_workspace(store: PgStore, root: Path, settings: Settings, *,
                      batch_files: int = BATCH_FILES) -> QueuedRun:
    """Queue the changed files (by size and mtime, or chunker version) for the workers as an index run at the
    folder's current commit, with the files that left the folder; what was queued.

    Nothing is deleted or pinned here: the transaction writing the run's last open batch deletes the files that
    left and pins the repository to the run's commit (`PgStore.write_batch`), so until then the repository
    answers with the files it holds, under the commit they were read at. Deleted here, the repository answered
    without them until the workers had written the rest (a folder replacing another as the source, `index
    --queue --replace`, answered nothing at all); pinned here, every answer named the new commit for the old
    text. A run with nothing to write pins the repository at once."""
    root = Path(root).resolve()
    claim_source(store, root)
    commit = workspace_commit(root)
    strategies_in_force(store, _trusted_strategies(root))  # files a changed strategy set claims are queued again
    grammars_in_force(store)  # and those whose grammar failed, where this process has other grammars
    budget_in_force(store, settings)  # and every file, where the chunk budget changed
    found = walk(root, settings)
    existing = store.file_rows()
    remembered = store.skipped_files()
    rules = content_rules(settings)
    on_disk = {c.rel_path for c in found.candidates}
    remember_walk(store, found, remembered, on_disk, rules)  # the walk's skips and count, as `index` keeps them
    changed = [c.rel_path for c in found.candidates
               if not skipped_unchanged(remembered.get(c.rel_path), c, rules) and
               (not (row := existing.get(c.rel_path)) or row.chunker_version != CHUNKER_VERSION
                or row.size != c.size or row.mtime != c.mtime)]
    gone = [path for path in existing if path not in on_disk]
    # A run that only deletes has a batch to end it.
    batches = [changed[i:i + batch_files] for i in range(0, len(changed), batch_files)] or ([[]] if gone else [])
    return QueuedRun(store.enqueue(str(root), commit, batches, gone), commit)


@dataclass
class WorkerReport:
    batches: int = 0
    files: int = 0
    embedded: int = 0  # texts the provider embedded (the rest came from the shared cache)
    lost_claims: int = 0  # batches whose lease ran out before the write (another worker redid them)
    replaced: int = 0  # batches of a folder another replaced as its repository's source since: done, unwritten
    moved: int = 0  # batches whose folder left the commit they were queued at (CommitMoved): done, unwritten
    superseded: int = 0  # batches of a run a later index superseded, or given up (RunSuperseded): done, unwritten
    failed: int = 0  # batches that raised (left to be claimed again)
    stuck: int = 0  # batches left alone after MAX_ATTEMPTS claims (as the worker stopped)
    graphs: int = 0  # repositories whose graph edges this worker resolved once their last batch was written
    global_indexes: list[GlobalVectorIndex] = field(default_factory=list)  # graphs over every repository built


class WorkerStopped(KeyboardInterrupt):
    """`run_worker` stopped by Ctrl-C (or another signal raised as one: the CLI's SIGTERM), raised from it once the
    batches it held claimed, if any, were given back to the queue (`given_back`: (batch id, repository) of each;
    none where it held none, or the database could not be reached to give them back: then they wait for the lease),
    with what it did until then (`report`)."""

    def __init__(self, given_back: list[tuple[int, str]], report: WorkerReport) -> None:
        super().__init__()
        self.given_back = given_back
        self.report = report  # what it did before it stopped


def run_worker(url: str, overrides: dict[str, Any], *, lease_s: float = LEASE_S, idle_exit_s: float | None = None,
               poll_s: float = 1.0, on_batch: Callable[[WorkItem], None] | None = None,
               global_index_min_vectors: int | None = GLOBAL_INDEX_MIN_VECTORS) -> WorkerReport:
    """Claim and process batches until the queue has been empty for `idle_exit_s` (forever when None): empty
    means no batch left to claim and none under another claim's live lease (a worker killed mid-batch leaves
    one, taken here once its lease runs out). A batch the database cut off has its claim given up at once (`release`,
    once the database answers again), so it is tried again without waiting for the lease; so has the batch held when
    Ctrl-C stops the worker (`WorkerStopped`), that claim not counted among the batch's attempts.

    The embedding model is the worker's (the user's settings and `overrides`); each batch is read and chunked
    on the settings `codeloupe index` would use in its folder (its own files' safe settings, its trust). Each
    time the queue drains, a dimension with `global_index_min_vectors` vectors or more and no graph over every
    repository gets one (None: never), built by one worker while the others go on claiming."""
    settings = load_settings(None, {**overrides, "store_url": url})
    provider = make_provider(settings)
    worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    queue, claims = WorkQueue(url, worker), EmbeddingClaims(url)
    stores: dict[str, PgStore] = {}
    warned: set[str] = set()  # the folders' settings warnings logged so far
    report = WorkerReport()
    idle_since = time.monotonic()
    drained = False  # the queue was found empty since the last check for a graph over every repository
    # The repository whose batch was just written, for the graph step: taken at the top of the loop, under the
    # reconnect that covers the claims, so a database lost meanwhile is waited for and the step taken again.
    graph_due: tuple[PgStore, Path] | None = None
    # The batch that just failed, its claim given up under the same reconnect.
    unwritten: WorkItem | None = None
    waiting = False  # the queue is empty but for leased batches, and the wait for them was logged
    try:
        while True:
            try:
                if unwritten is not None:
                    queue.release(unwritten)
                    unwritten = None
                if graph_due is not None:
                    report.graphs += _graph_when_done(*graph_due, claims)
                    graph_due = None
                item = queue.claim(lease_s)
                if item is None:
                    if not drained and global_index_min_vectors is not None:
                        report.global_indexes += _global_indexes_due(url, claims, global_index_min_vectors)
                        idle_since = time.monotonic()
                    drained = True
                    if idle_exit_s is not None and time.monotonic() - idle_since >= idle_exit_s:
                        leased, runs_out_s = queue.leased()
                        if not leased:
                            report.stuck = queue.stuck()
                            return report
                        if not waiting:
                            log.warning("the queue is empty but for %s under a claim's lease (a worker"
                                        " writing it, or one that died): waiting for it, up to %.0f s, before"
                                        " exiting (--exit-when-idle %g)",
                                        amount(leased, "batch", "batches"), runs_out_s, idle_exit_s)
                            waiting = True
            except Exception as exc:
                if not (queue.lost() or claims.lost()):
                    raise
                queue, claims = _reconnected(url, worker, (queue, claims), exc, idle_exit_s)
                continue
            if item is None:
                time.sleep(poll_s)
                continue
            waiting = False
            if on_batch is not None:
                on_batch(item)
            try:
                store = stores.get(item.repository)
                if store is None or store.repo_id != item.repo_id:  # new, or dropped and indexed again since
                    if store is not None:
                        store.close()
                    # `index --queue` added it; one dropped since is not added back empty.
                    store = stores[item.repository] = PgStore(url, item.repository, create=False,
                                                              local_dir=settings.cache_root / "indexes")
                embedded = _process(store, item, _folder_settings(item.root, overrides, warned), provider, claims)
            except SourceConflict as exc:
                log.warning("batch %d of %s is left unwritten: it was queued from %s, and %s is the repository's"
                            " source now (`index --replace`)", item.id, item.repository, exc.folder,
                            exc.indexed_from)
                report.replaced += 1
                continue
            except (CommitMoved, RunSuperseded) as exc:
                log.warning("batch %d of %s is left unwritten: %s", item.id, item.repository, exc)
                if isinstance(exc, CommitMoved):
                    report.moved += 1
                else:
                    report.superseded += 1
                continue
            except FolderUnreadable as exc:  # as below, said in a line: nothing is wrong with the worker
                log.warning("batch %d of %s failed (claim %d of %d): %s", item.id, item.repository, item.attempts,
                            MAX_ATTEMPTS, exc)
                report.failed += 1
                continue
            except Exception as exc:  # the database, the model or a file failed: the batch is tried again
                report.failed += 1
                if queue.lost() or claims.lost():  # the database went away: said once, by `_reconnected`
                    # Its claim is given up once the database is back, so the batch is taken again at once; any other
                    # failure (the model down, a file unreadable here) waits for the lease, spreading its attempts.
                    unwritten = item
                    queue, claims = _reconnected(url, worker, (queue, claims), exc, idle_exit_s)
                    continue
                log.exception("batch %d of %s failed (claim %d of %d)", item.id, item.repository, item.attempts,
                              MAX_ATTEMPTS)
                continue
            if embedded is None:
                report.lost_claims += 1
            else:
                drained = False
                report.batches += 1
                report.files += len(item.paths)
                report.embedded += embedded
                graph_due = store, Path(item.root)
            idle_since = time.monotonic()
    except KeyboardInterrupt as stop:
        raise WorkerStopped(_given_back(url, queue), report) from stop
    finally:
        queue.close()
        claims.close()
        for store in stores.values():
            store.close()


def _given_back(url: str, queue: WorkQueue) -> list[tuple[int, str]]:
    """The claims of the worker `queue` serves given up as it stops (`WorkQueue.give_back`), so another worker takes
    their batches now rather than when the lease runs out; none where the database cannot be reached (said in a
    line: then the lease runs out as for a killed worker)."""
    try:
        return queue.give_back()
    except Exception as exc:
        log.warning("could not give this worker's claims back to the queue (%s): their batches are claimed again"
                    " once the lease runs out", said(exc, url))
        return []


def _reconnected(url: str, worker: str, lost: tuple[WorkQueue, EmbeddingClaims], exc: Exception,
                 idle_exit_s: float | None) -> tuple[WorkQueue, EmbeddingClaims]:
    """The worker's sessions (queue, embedding claims) opened again once the database answers, after it ended
    them (a restart) or went away: tried again with a back-off doubling up to RECONNECT_MAX_S, in one logged
    line for the outage, for as long as it lasts (a worker is a service), or `idle_exit_s` (then StoreError)."""
    for session in lost:
        session.close()
    log.warning("lost the shared index %s (%s); reconnecting", redact(url), str(exc).strip().splitlines()[0])
    started, delay = time.monotonic(), RECONNECT_FIRST_S
    while True:
        try:
            queue = WorkQueue(url, worker)
        except StoreError as error:
            reason = str(error)
        else:
            try:
                claims = EmbeddingClaims(url)
            except StoreError as error:
                queue.close()
                reason = str(error)
            else:
                log.info("reconnected to the shared index after %.0f s", time.monotonic() - started)
                return queue, claims
        if idle_exit_s is not None and time.monotonic() - started >= idle_exit_s:
            raise StoreError(f"the shared index has been unreachable for {time.monotonic() - started:.0f} s"
                             f" (--exit-when-idle {idle_exit_s:g}): {reason}")
        time.sleep(delay)
        delay = min(2 * delay, RECONNECT_MAX_S)


def _process(store: PgStore, item: WorkItem, settings: Settings, provider: EmbeddingProvider | None,
             claims: EmbeddingClaims) -> int | None:
    """Read, chunk and embed one batch, then write it in one transaction; None when the claim was lost. Its
    folder must be the repository's source (`SourceConflict`), its run the repository's newest (`RunSuperseded`)
    and its folder at the commit the batch was queued at, before and after its files are read (`CommitMoved`):
    else the batch is done with nothing written."""
    try:
        # As the claim saw the repository, before anything is read (the write checks both again).
        if item.source and item.source != item.root:
            raise SourceConflict(item.repository, item.source, item.root)
        if item.superseded:
            raise RunSuperseded(item.latest_run)
        return _read_and_write(store, item, settings, provider, claims)
    except (SourceConflict, CommitMoved, RunSuperseded):
        store.leave_unwritten(item)  # done already where the write refused it
        raise


def _read_and_write(store: PgStore, item: WorkItem, settings: Settings, provider: EmbeddingProvider | None,
                    claims: EmbeddingClaims) -> int | None:
    """`_process`'s reading, chunking, embedding and write (a batch it refuses, `_process` marks done)."""
    root = Path(item.root)
    _check_commit(root, item)
    existing = store.file_rows()
    strategies = _trusted_strategies(root)
    files: list[BatchFile] = []
    gone: list[str] = []
    touched: list[Candidate] = []  # the same content under a new size or mtime: recorded, not queued again
    skipped: list[SkippedFile] = []  # read and judged by their content: remembered, as `index` does
    warnings: set[str] = set()  # strategies found failing to load while chunking: logged once a batch
    missing = 0  # paths found not there (the rest of `gone` is there, but not indexed now)
    for rel in item.paths:
        path = root / rel
        st = _lstat(path)
        if st is None:
            missing += 1
        # The walk's rules again (the file may be a link or ignored by now, and a queued path is input too).
        if st is None or not stat.S_ISREG(st.st_mode) or not _inside(root, rel) or path_skip_reason(root, rel, settings):
            gone.append(rel)
            continue
        row = existing.get(rel)
        known = row.hash if row is not None and row.chunker_version == CHUNKER_VERSION else ""
        [prepared] = prepare_files([(Candidate.from_stat(rel, path, st), known)], settings, strategies)
        if prepared.chunked is not None and prepared.chunked.strategy_warning:
            warnings.add(prepared.chunked.strategy_warning)
        batch_file = _batch_file(prepared)
        if batch_file is not None:
            files.append(batch_file)
        elif prepared.same_content:
            touched.append(prepared.candidate)
        else:
            gone.append(rel)  # binary, too large, unreadable now: not indexed
            if prepared.digest:  # judged by its content, not a failure to read it
                candidate = prepared.candidate
                skipped.append(SkippedFile(rel, candidate.size, candidate.mtime, content_rules(settings),
                                           prepared.skip_reason))
    if missing:
        _check_folder(root, item.paths, missing, existing)
    _check_commit(root, item)
    for warning in sorted(warnings):  # as `_trusted_strategies` logs those that did not load at all
        log.warning("%s", warning.removeprefix("codeloupe: "))
    vectors, embedded = _vectors(store, files, provider, claims)
    model = provider.model_id if provider is not None else ""
    touched_stamps = [(c.rel_path, c.size, c.mtime) for c in touched]
    if not store.write_batch(files, gone, model, vectors, item, touched=touched_stamps, skipped=skipped,
                             before_deleting=lambda left: _check_left(root, left, store)):
        return None
    return embedded


def _lstat(path: Path) -> os.stat_result | None:
    """The path's own status; None when it is not there. Refused (`FolderUnreadable`) where it cannot be told:
    the file may be there, and deleting it would be a guess."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise FolderUnreadable(f"cannot read {path}: {exc.strerror or exc}; nothing of the batch was written"
                               ) from exc


def _check_left(root: Path, left: list[str], store: PgStore) -> None:
    """Before the end of a run deletes the files that had left its folder when it was queued (`left`), inside the
    transaction writing its last batch: refuse (`FolderUnreadable`, the batch rolled back) a folder that cannot
    be listed or no longer holds the repository (`_check_folder`), where their being missing says nothing. The
    index's files include the batch's, written just before."""
    missing = sum(_lstat(root / rel) is None for rel in left)
    if missing:
        _check_folder(root, left, missing, store.file_rows())


class FolderUnreadable(Exception):
    """A batch's folder cannot be read as the repository (gone, not a directory, unreadable, or holding none of
    its files): the batch fails, deleting nothing, and is claimed again once its lease runs out."""


def _check_commit(root: Path, item: WorkItem) -> None:
    """Refuse (`CommitMoved`) a batch whose folder's revision is no longer the one it was queued at."""
    now = workspace_commit(root)
    if now != item.commit:
        raise CommitMoved(f"it was queued at {item.commit or 'no commit'} and {root} is at {now or 'no commit'} now;"
                          " nothing of the batch was written: run `codeloupe index --queue` in it again")


def _check_folder(root: Path, paths: list[str], missing: int, existing: Collection[str]) -> None:
    """Refuse (`FolderUnreadable`) to take missing files for deleted (a batch's, or those that had left its run's
    folder) unless the folder can be listed and holds the repository: when none of `paths` is there and the
    index holds some of them, at least one other file the index holds must be (an unmounted or emptied folder
    holds none of them)."""
    try:
        with os.scandir(root) as entries:
            next(entries, None)
    except OSError as exc:
        raise FolderUnreadable(f"cannot read the folder {root} the batch was queued from ({exc.strerror or exc}):"
                               " nothing of the batch was written, no file deleted") from None
    if missing < len(paths) or not any(path in existing for path in paths):
        return
    batch = set(paths)
    if not any(os.path.lexists(root / path) for path in existing if path not in batch):
        raise FolderUnreadable(f"none of the {len(paths)} files the batch would delete, and none of the other files"
                               f" the index holds, is in {root}: not taken for deleted (a folder not mounted, or"
                               " emptied?); nothing of the batch was written")


def _folder_settings(root: str, overrides: dict[str, Any], warned: set[str]) -> Settings:
    """The settings `codeloupe index` would use in the folder a batch was queued from; what its settings files
    hold that cannot be used is logged once per worker, not once per batch."""
    settings = load_settings(Path(root), overrides)
    for warning in settings.warnings:
        if warning not in warned:
            warned.add(warning)
            log.warning("%s", warning.removeprefix("codeloupe: "))
    return settings


def _trusted_strategies(root: Path) -> tuple[Strategy, ...]:
    """The repository's strategy files that this user trusts (byte for byte, `codeloupe trust --strategy`):
    the worker runs no code of the repository that its own user did not accept (rule 6)."""
    load = load_workspace_strategies(root)
    for warning in load.warnings:
        log.warning("%s", warning.removeprefix("codeloupe: "))
    return tuple(load.strategies)


@dataclass(eq=False)
class _Checkout:
    """What resolving a repository's graph edges needs: its index, and its folder (configuration files such
    as go.mod or tsconfig.json are read from there)."""

    root: Path
    store: PgStore

    def read_bytes(self, path: str) -> bytes:
        """The checkout's file whole, read as a workspace's is (`Workspace.read_bytes`): a configuration file the
        graph reads (go.mod, tsconfig.json) that was a link out of the folder was read there (a key, /dev/zero
        until memory ran out), and a FIFO held the worker for ever."""
        full = self.root / path
        try:
            inside = _inside(self.root, path) and full.resolve().is_relative_to(self.root.resolve())
        except (OSError, RuntimeError):  # a link that leads to itself (Python before 3.13 raises RuntimeError)
            inside = False
        if not inside:
            raise OSError(f"{path}: not a path inside {self.root}")
        return read_whole(full)


def _graph_when_done(store: PgStore, root: Path, claims: EmbeddingClaims) -> int:
    """Once no batch of the repository is left open, resolve its graph edges (so no reader has to) if its files
    changed since they were; one worker at a time per repository (another finishing at the same moment leaves
    it). 1 when it resolved them."""
    from codeloupe.graph import ensure_edges

    if store.query("SELECT count(*) FROM work_queue WHERE repo_id = ? AND done_at IS NULL", (store.repo_id,))[0][0]:
        return 0
    with claims.holding(f"graph {store.repo_id}".encode()) as held:
        return int(held and ensure_edges(_Checkout(root, store)))


def _global_indexes_due(url: str, claims: EmbeddingClaims, min_vectors: int) -> list[GlobalVectorIndex]:
    """The graphs over every repository built here because a dimension reached `min_vectors` vectors with none
    (a build a concurrent one left invalid included); nothing while another worker builds them. The table's
    row estimate is read first, so a small organisation costs one catalogue read when its queue drains."""
    with _admin(url) as conn:
        estimate = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'public.chunk_vectors'::regclass"
                                ).fetchone()[0]
        if 0 <= estimate < min_vectors or _global_index_setting(conn) == "off":  # estimate -1: never analysed
            return []
        due = [dim for dim, vectors in _vectors_by_dimension(conn)
               if vectors >= min_vectors and not index_valid(conn, global_vector_index_name(dim))]
    if not due:
        return []
    with claims.holding(b"graph over every repository") as held:
        if not held:
            return []
        log.info("building the vector graph over every repository (%s-dimensional vectors: %d or more)",
                 ", ".join(map(str, due)), min_vectors)
        return [index for index in build_global_vector_indexes(url, dims=due, by_hand=False) if index.built]


def _inside(root: Path, rel: str) -> bool:
    """`rel` names a path below `root` as the walk writes it (relative, POSIX, no `..` or `.` part)."""
    return not rel.startswith("/") and all(part not in ("", ".", "..") for part in rel.split("/"))


def _batch_file(prepared: Prepared) -> BatchFile | None:
    if prepared.chunked is None:
        return None
    candidate = prepared.candidate
    return BatchFile(prepared.chunked, hash=prepared.digest, size=candidate.size, mtime=candidate.mtime,
                     is_doc=is_doc_language(prepared.chunked.language), encoding=prepared.encoding,
                     chunker_version=chunked_version(prepared.chunked), line_count=prepared.line_count,
                     terms=prepared.terms)


def _vectors(store: PgStore, files: list[BatchFile], provider: EmbeddingProvider | None,
             claims: EmbeddingClaims) -> tuple[dict[bytes, np.ndarray], int]:
    """The vector of every chunk and skeleton of `files` by content key: the shared cache's where it has one,
    the provider's for the rest (each distinct content once); and how many the provider embedded.

    Content no worker has embedded is claimed first: what another worker is embedding at this moment is
    waited for and read from the cache, never embedded twice. A claim held by a worker that died is gone
    with its connection; the content is then claimed again here."""
    if provider is None:
        return {}, 0
    model = provider.model_id
    texts: dict[bytes, str] = {}
    blank: list[bytes] = []  # rows with nothing to embed: the zero vector, as `embed_pending` gives them
    for batch_file in files:
        chunked = batch_file.chunked
        filled = False
        for chunk in chunked.chunks:
            key = content_key(chunk.breadcrumb, chunk.text)
            if chunk.text.strip(BLANK_CHARS):
                texts[key] = embedding_text(chunk.breadcrumb, chunk.text)
                filled = True
            else:
                blank.append(key)
        # The skeleton of a file with no other chunk (an empty file, one of blank lines) is its path alone: not
        # looked up in the cache either, where a file with code at that path in another repository may have put it.
        skeleton = content_key(chunked.skeleton.text)
        if filled:
            texts[skeleton] = chunked.skeleton.text
        else:
            blank.append(skeleton)
    vectors = store.cached_vectors(model, list(texts))
    todo = [key for key in texts if key not in vectors]
    embedded = 0
    while todo:
        mine, theirs = claims.claim(model, todo)
        try:
            vectors.update(store.cached_vectors(model, mine))  # finished by another worker since the first look
            fresh_keys = [key for key in mine if key not in vectors]
            if fresh_keys:
                fresh = dict(zip(fresh_keys, np.asarray(provider.embed([texts[k] for k in fresh_keys]), np.float32)))
                store.cache_vectors(model, fresh)  # in the cache before the claim goes
                vectors.update(fresh)
                embedded += len(fresh)
        finally:
            claims.release(model, mine)
        claims.wait(model, theirs)
        vectors.update(store.cached_vectors(model, theirs))
        todo = [key for key in theirs if key not in vectors]  # its claimant failed: claim it again
    if blank:  # never cached (`PgStore._insert_vectors` keeps zero rows out of the shared cache)
        # The size of a vector at hand: a remote model of unknown size is asked it with a request of its own.
        dim = len(next(iter(vectors.values()))) if vectors else provider.dim
        vectors.update(dict.fromkeys(blank, np.zeros(dim, np.float32)))
    return vectors, embedded


class EmbeddingClaims:
    """Who is embedding which content right now: a session advisory lock per (model, content key) on this
    worker's own connection. Taken with `pg_try_advisory_lock` (never waiting while holding one, so two
    workers cannot deadlock), and released by the database when a worker's connection ends, dead or not."""

    def __init__(self, url: str) -> None:
        self._conn = connect(url)

    def claim(self, model: str, keys: list[bytes]) -> tuple[list[bytes], list[bytes]]:
        """(the keys claimed here, the keys another worker holds)"""
        held = [row[0] for row in self._conn.execute(
            "SELECT pg_try_advisory_lock(k) FROM unnest(%s::bigint[]) WITH ORDINALITY AS t(k, i) ORDER BY i",
            (_lock_ids(model, keys),))]
        return [k for k, ok in zip(keys, held) if ok], [k for k, ok in zip(keys, held) if not ok]

    def lost(self) -> bool:
        """Whether the database ended this session (its claims went with it) or it is otherwise gone."""
        return connection_lost(self._conn)

    def release(self, model: str, keys: list[bytes]) -> None:
        if keys:
            self._conn.execute("SELECT pg_advisory_unlock(k) FROM unnest(%s::bigint[]) AS t(k)",
                               (_lock_ids(model, keys),))

    @contextmanager
    def holding(self, key: bytes) -> Iterator[bool]:
        """A claim on `key` for the block, if no one else holds it (False: someone does, nothing is held)."""
        mine, _ = self.claim("", [key])
        try:
            yield bool(mine)
        finally:
            self.release("", mine)

    def wait(self, model: str, keys: list[bytes]) -> None:
        """Until no worker holds a claim on any of `keys` (one at a time: nothing is held while waiting)."""
        for lock_id in _lock_ids(model, keys):
            self._conn.execute("SELECT pg_advisory_lock(%s), pg_advisory_unlock(%s)", (lock_id, lock_id))

    def close(self) -> None:
        self._conn.close()


def _lock_ids(model: str, keys: list[bytes]) -> list[int]:
    """A signed 64-bit advisory lock id per content key (a collision only makes a worker wait needlessly)."""
    return [int.from_bytes(hashlib.sha256(model.encode() + b"\0" + key).digest()[:8], "big", signed=True)
            for key in keys]


# ---------------------------------------------------------------------- administration (`codeloupe admin`)


@dataclass
class SharedRepository:
    """One repository of the shared index, as `codeloupe admin repos` lists it."""

    name: str
    root: str  # the folder it was last indexed from
    commit: str  # the commit its answers are pinned to ("" when not a git checkout)
    files: int
    chunks: int
    vectors: int
    indexed_at: str  # when its files were last written (ISO 8601, the database's clock; "" never)
    open_batches: int  # queued batches not yet written
    indexing: str = ""  # an index run under way or cut off: what answers may lack ("" when every run finished)


@dataclass
class DroppedRepository:
    name: str
    files: int
    chunks: int
    vector_indexes: list[str]  # the HNSW indexes dropped with it


@dataclass
class GlobalVectorIndex:
    """One HNSW graph over every repository's vectors of one dimension: what a search across all of them asks
    for its nearest chunks (`codeloupe admin global-index`)."""

    name: str
    dim: int
    vectors: int  # the vectors of that dimension, every repository's
    built: bool  # built by this call (False: it was there already)
    seconds: float  # this call's time on it
    size_bytes: int


@dataclass(frozen=True)
class GlobalGraphState:
    """The graph over every repository for one vector dimension, as the database has it now."""

    dim: int
    vectors: int  # the vectors of that dimension, every repository's
    name: str
    state: str  # "ready"; "invalid": a concurrent build running now or killed midway; "absent"
    size_bytes: int


@dataclass(frozen=True)
class GlobalIndexStatus:
    """The graphs over every repository and who builds them."""

    dropped_by_hand: bool  # `global-index drop` was the last choice: workers leave the graphs absent
    workers_build_from: int  # the vectors of a dimension from which a worker whose queue drains builds one
    graphs: list[GlobalGraphState]


@dataclass
class QueueStatus:
    """The work queue now: open batches by state, finished ones, and who holds the live claims."""

    waiting: int  # never claimed
    claimed: int  # under a live lease
    expired: int  # lease ran out: the next worker to ask takes it
    stuck: int  # claimed MAX_ATTEMPTS times without being written: no worker takes it again
    done: int
    workers: list[str] = field(default_factory=list)  # holders of live claims
    open_by_repository: dict[str, int] = field(default_factory=dict)


@dataclass
class QueuePruned:
    done: int  # finished batches deleted
    stuck: int  # batches given up on (MAX_ATTEMPTS claims, lease over) deleted


@contextmanager
def _admin(url: str, *, wait: bool = False) -> Iterator[Any]:
    """A connection to the database at `url`, migrated first (`migrate`: `wait` as long as its locks take)."""
    conn = connect(url)
    try:
        migrate(conn, wait=wait)
        yield conn
    finally:
        conn.close()


def shared_repositories(url: str) -> list[SharedRepository]:
    with _admin(url) as conn:
        rows = conn.execute(
            "SELECT r.name, r.root, r.commit_sha,"
            " (SELECT count(*) FROM public.files f WHERE f.repo_id = r.id),"
            " (SELECT count(*) FROM public.chunks c WHERE c.repo_id = r.id),"
            " (SELECT count(*) FROM public.chunk_vectors v WHERE v.repo_id = r.id),"
            " coalesce((SELECT value FROM repo_meta m WHERE m.repo_id = r.id AND m.key = %s), ''),"
            " (SELECT count(*) FROM work_queue q WHERE q.repo_id = r.id AND q.done_at IS NULL),"
            f" r.index_run <> '', {INDEX_STARTED}, {run_under_way('r.id')},"
            f" {queued_batches('r', stuck=False)}, {queued_batches('r', stuck=True)}"
            " FROM repositories r ORDER BY r.name", (INDEXED_AT_KEY,)).fetchall()
    return [SharedRepository(r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5]), _iso(r[6]), int(r[7]),
                             unfinished_index_note(r[0], r[8], r[9], r[10], int(r[11]), int(r[12]))) for r in rows]


def drop_repository(url: str, name: str, *, wait: bool = False) -> DroppedRepository:
    """Every row of repository `name` (files, chunks, symbols, vectors, graph, flows, queued batches) and its
    HNSW indexes, in one transaction; the shared embedding cache keeps its vectors (other repositories may
    hold the same content). Serving processes that had it open answer from nothing afterwards.

    A writer of the repository holds its rows until its transaction ends (a stalled worker: until it is stopped):
    the drop waits for it `LOCK_TIMEOUT_MS` (or the store URL's `lock_timeout`), then fails naming the sessions
    holding it; `wait` waits as long as it takes, as does the migration opening the database may need first (behind
    another process migrating it, or another drop)."""
    import psycopg  # installed: `_admin` connected with it (without it, `connect` says so)

    with _admin(url, wait=wait) as conn:
        repo_id: int | None = None  # known once its row is read
        try:
            with conn.transaction():
                if not wait:
                    bound_lock_waits(conn, transaction=True)
                row = conn.execute("SELECT id FROM repositories WHERE name = %s", (name,)).fetchone()
                if row is None:
                    known = [r[0] for r in conn.execute("SELECT name FROM repositories ORDER BY name")]
                    raise StoreError(f"{shown_repository_name(name)}: not in the shared index"
                                     f" (it holds {', '.join(map(shown_repository_name, known)) or 'no repository'})")
                repo_id = int(row[0])
                conn.execute("SELECT id FROM repositories WHERE id = %s FOR UPDATE", (repo_id,))
                files, chunks = conn.execute("SELECT (SELECT count(*) FROM public.files WHERE repo_id = %s),"
                                             " (SELECT count(*) FROM public.chunks WHERE repo_id = %s)",
                                             (repo_id, repo_id)).fetchone()
                # The indexes first: deleting the rows would otherwise update indexes about to go.
                indexes = drop_vector_indexes(conn, repo_id)
                # Every table cascades from the repository's row but the term frequencies (no foreign key: writers
                # upsert them per term on the hot path).
                conn.execute("DELETE FROM lex_terms WHERE repo_id = %s", (repo_id,))
                conn.execute("DELETE FROM repositories WHERE id = %s", (repo_id,))
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected) as exc:
            raise _not_dropped(conn, name, repo_id, exc) from exc
    return DroppedRepository(name, int(files), int(chunks), indexes)


def _not_dropped(conn: Any, name: str, repo_id: int | None, exc: Exception) -> StoreError:
    """Why a drop rolled back on a lock (its wait's timeout, or a deadlock PostgreSQL ended it for), naming the
    sessions holding what it needs, and what to do."""
    import psycopg

    # It deletes the repository's row, drops HNSW indexes under the schema's lock, and its DROP INDEX locks the
    # vector table exclusively.
    holders = lock_holders(conn, repo_id=repo_id, deletes_row=True, schema=True, exclusive=["chunk_vectors"])
    shown = shown_repository_name(name)
    if isinstance(exc, psycopg.errors.DeadlockDetected):
        return StoreError(
            f"{shown!r} was not dropped: it and another session each waited for a lock the other held (a deadlock),"
            " and PostgreSQL ended the drop, which dropped nothing"
            f"{f' (holding the repository now: {holders})' if holders else ''}. Try again: the other session goes"
            " on, and lets go once its transaction ends")
    return StoreError(
        f"{shown!r} was not dropped: another session holds the repository and did not"
        f" let go ({str(exc).splitlines()[0]}): {holders or 'it has let go since; try again'}. An indexer or a"
        " worker writing it holds it until its transaction ends, a stalled one (stopped mid-batch, a"
        " suspended machine) until it is stopped or its session is ended (SELECT pg_terminate_backend(PID)):"
        " `codeloupe admin --store URL queue` names the workers holding batches; `drop --wait` waits for"
        " it instead")


def build_global_vector_indexes(url: str, dims: Collection[int] | None = None, *,
                                by_hand: bool = True) -> list[GlobalVectorIndex]:
    """One HNSW graph per vector dimension over every repository's vectors, built concurrently with writes
    (each write adds to it from then on) unless it is there; the graphs, one per dimension held.

    A search across very many repositories then takes its nearest chunks from the graph instead of scanning
    every vector (`store.postgres.nearest_across`). The build reads every vector of the dimension: minutes at
    millions of them (438 s for 2M on two cores), faster with `maintenance_work_mem` large enough for the
    graph (a store URL's `options=-c maintenance_work_mem=2GB`). `dims`: only those dimensions'.

    By hand (`codeloupe admin global-index`), the graphs become the workers' to keep again after a drop; a
    worker's own build (`by_hand=False`) builds nothing once a drop is recorded, even one made meanwhile."""
    indexes = []
    with _admin(url) as conn:
        if by_hand:
            _set_global_index_setting(conn, "on")
        for dim, vectors in _vectors_by_dimension(conn):
            if (dims is not None and dim not in dims) or (not by_hand and _global_index_setting(conn) == "off"):
                continue
            name, started = global_vector_index_name(dim), time.perf_counter()
            built = build_index_once(conn, name, global_vector_index_sql(dim))
            indexes.append(GlobalVectorIndex(name, dim, vectors, built, round(time.perf_counter() - started, 3),
                                             _relation_size(conn, name)))
    return indexes


def drop_global_vector_indexes(url: str) -> list[str]:
    """Drop the graphs `build_global_vector_indexes` built (searches across repositories scan exactly again)
    and keep workers from building them on their own again (until `build_global_vector_indexes` is called);
    their names."""
    with _admin(url) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'chunk_vectors' AND starts_with(indexname, %s)"
            " ORDER BY indexname", (global_vector_index_name(0)[:-1],))]
        _set_global_index_setting(conn, "off")  # first: a worker must not build it again meanwhile
        for name in names:
            conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS public."{name}"')
    return names


def global_index_status(url: str) -> GlobalIndexStatus:
    """Each vector dimension's graph over every repository (ready, invalid or absent) and whether workers build
    them (`GLOBAL_INDEX_MIN_VECTORS`) or an administrator dropped them."""
    with _admin(url) as conn:
        graphs = []
        for dim, vectors in _vectors_by_dimension(conn):
            name = global_vector_index_name(dim)
            valid = index_valid(conn, name)
            graphs.append(GlobalGraphState(dim, vectors, name, {True: "ready", False: "invalid", None: "absent"}[valid],
                                           _relation_size(conn, name) if valid is not None else 0))
        return GlobalIndexStatus(_global_index_setting(conn) == "off", GLOBAL_INDEX_MIN_VECTORS, graphs)


def _vectors_by_dimension(conn: Any) -> list[tuple[int, int]]:
    """(dimension, vectors of it in every repository), by dimension: a scan of the vector table."""
    return [(int(dim), int(n)) for dim, n in
            conn.execute("SELECT dim, count(*) FROM chunk_vectors GROUP BY dim ORDER BY dim").fetchall()]


def _relation_size(conn: Any, name: str) -> int:
    return int(conn.execute("SELECT pg_relation_size(%s::regclass)", (f"public.{name}",)).fetchone()[0])


def _global_index_setting(conn: Any) -> str:
    row = conn.execute("SELECT value FROM index_settings WHERE key = 'global_index'").fetchone()
    return row[0] if row else ""


def _set_global_index_setting(conn: Any, value: str) -> None:
    conn.execute("INSERT INTO index_settings (key, value) VALUES ('global_index', %s)"
                 " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (value,))


def queue_status(url: str) -> QueueStatus:
    with _admin(url) as conn:
        counts = conn.execute(
            "SELECT count(*) FILTER (WHERE done_at IS NULL AND attempts < %(max)s AND lease_until IS NULL),"
            " count(*) FILTER (WHERE done_at IS NULL AND attempts < %(max)s AND lease_until >= now()),"
            " count(*) FILTER (WHERE done_at IS NULL AND attempts < %(max)s AND lease_until < now()),"
            " count(*) FILTER (WHERE done_at IS NULL AND attempts >= %(max)s),"
            " count(*) FILTER (WHERE done_at IS NOT NULL) FROM work_queue", {"max": MAX_ATTEMPTS}).fetchone()
        workers = [r[0] for r in conn.execute(
            "SELECT DISTINCT claimed_by FROM work_queue WHERE done_at IS NULL AND lease_until >= now()"
            " ORDER BY 1")]
        by_repository = dict(conn.execute(
            "SELECT r.name, count(*) FROM work_queue q JOIN repositories r ON r.id = q.repo_id"
            " WHERE q.done_at IS NULL GROUP BY r.name ORDER BY r.name").fetchall())
    # A claim is `worker:claim-id`: the worker is what a person can look for.
    return QueueStatus(*map(int, counts), workers=sorted({w.rsplit(":", 1)[0] for w in workers}),
                       open_by_repository={k: int(v) for k, v in by_repository.items()})


def prune_queue(url: str) -> QueuePruned:
    """Delete finished batches and those given up on (claimed MAX_ATTEMPTS times, the last lease over): what
    is waiting, claimed or still retryable stays. The index run of a batch given up on is given up too: its other
    batches are left unwritten (`RunSuperseded`), as without the batch it can never be written whole."""
    with _admin(url) as conn, conn.transaction():
        stuck = conn.execute("SELECT id, repo_id, run FROM work_queue WHERE done_at IS NULL AND attempts >= %s"
                             " AND (lease_until IS NULL OR lease_until < now())", (MAX_ATTEMPTS,)).fetchall()
        # The repositories' rows before any batch, in the order writers and drops take them.
        conn.execute("UPDATE repositories r SET latest_run = '', latest_gone = '[]'"
                     " FROM unnest(%s::int[], %s::text[]) AS s(repo_id, run)"
                     " WHERE r.id = s.repo_id AND r.latest_run = s.run AND s.run <> ''",
                     ([row[1] for row in stuck], [row[2] for row in stuck]))
        conn.execute("DELETE FROM work_queue WHERE id = ANY(%s)", ([row[0] for row in stuck],))
        done = conn.execute("DELETE FROM work_queue WHERE done_at IS NOT NULL").rowcount
    return QueuePruned(int(done), len(stuck))


def _iso(text: str) -> str:
    """PostgreSQL's `now()::text` ("2026-12-01 04:30:00.123+00") as ISO 8601 to the second."""
    return text[:19].replace(" ", "T") + "Z" if text.endswith("+00") else text
