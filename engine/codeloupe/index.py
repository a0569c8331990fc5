"""The indexer: discover -> read -> chunk -> store, incremental by content hash.

An unchanged file (same size and mtime, or same content hash) is never re-read twice or re-chunked; a file
chunked by an older chunker is re-chunked, as is one whose strategy did not run on it (no worker process could
start: `chunk.chunker.STRATEGY_NOT_RUN_VERSION`); a deleted or newly ignored file leaves every table. Each file
is stored in its own transaction, so an interrupted run leaves a consistent index and the next run resumes.
Reading and chunking a large batch runs in worker processes (chunking is pure-Python CPU work); the store
writes stay in this process. Vectors are not computed here: the lexical and symbol lanes answer as soon as this returns, and the
embedder fills vectors in afterwards (`codeloupe.embed.background`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import posixpath
import stat
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from codeloupe.chunk import CHUNKER_VERSION, chunk_file, chunked_version, detect_language, is_doc_language
from codeloupe.chunk.chunker import GRAMMAR_FAILED, STRATEGY_NOT_RUN_VERSION
from codeloupe.chunk.languages import grammar_versions
from codeloupe.chunk.strategies import Strategy
from codeloupe.chunk.strategy_process import retry_worker_start
from codeloupe.discover import (
    COMPILED,
    CONTENT_RULES_VERSION,
    IGNORE_FILE_NAMES,
    SOURCE_MAP_SUFFIX,
    UNREADABLE_FOLDER,
    Candidate,
    CandidateChanged,
    IndexStopped,
    Walk,
    decode_source,
    path_skip_reason,
    read_candidate_bytes,
    walk,
    walk_names,
)
from codeloupe.lanes.lexical import KeptCounts, count_chunk_terms
from codeloupe.lanes.tokens import path_tokens
from codeloupe.parallel import NOT_RUN, map_in_workers, retry_kept_worker_start, until
from codeloupe.settings import Settings
from codeloupe.store import FileRow, SkippedFile, StoreRebuilt
from codeloupe.store.protocol import IndexStore
from codeloupe.types import ChunkedFile, IndexReport, Progress, split_lines

log = logging.getLogger("codeloupe.index")

ProgressFn = Callable[[Progress], None]
# Told after each group of an index run is committed: (file id, chunk count) of each file it wrote with its
# kept term counts, in the order written (`search.JoinedAsWritten` joins them while the run goes on).
WrittenFn = Callable[[list[tuple[int, int]]], None]


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


# Prepared files written to the index in one transaction: a commit a file was a third of writing one; a group
# of 32 is a few tens of milliseconds of the writer's time (a search on another thread waits for it at most).
WRITE_BATCH = 32
# Folders that could not be listed that the index remembers by name (`stats --skipped`), the first by path: a tree
# of thousands of them (a copy of another user's home) would otherwise be as many rows and lines.
UNREADABLE_FOLDERS_NAMED = 100
# The index's meta key for how many folders the last walk could not list, named or not (`IndexStatus.skipped`).
UNREADABLE_FOLDERS_KEY = "unreadable_folders"
# The files the last walk skipped by name or size or as compiled copies (`Walk.skipped_files`), in the index's meta:
# counted by reason, and the first this many by path named (`stats --skipped`). A row each made every no-op
# re-index read, build and compare them all (20K images beside 200 files: 0.24 s against 0.002 s), and the table
# grew with the tree; the walk judges them again each time.
WALK_SKIPS_NAMED = 1000
WALK_SKIPS_KEY = "walk_skips"
# The others, path -> reason, under a key of their own that only a save settling one of them reads: without them a
# save that deleted one could not tell which reason, if any, counted it, and the count stayed one too high until the
# next walk. Both values hold their digest: a no-op re-index neither reads nor writes them, and a save reads them
# only where they are the named ones' (`walk_skips`).
WALK_SKIPS_REST_KEY = "walk_skips_rest"
# Progress is told once a written group takes the count past another multiple of this.
PROGRESS_EVERY = 50


def index_workspace(root: Path, store: IndexStore, settings: Settings,
                    progress: ProgressFn | None = None, strategies: tuple[Strategy, ...] = (),
                    found: Walk | None = None, should_stop: Callable[[], bool] | None = None,
                    written: WrittenFn | None = None) -> IndexReport:
    """Bring the store up to date with the workspace on disk. `found`: the workspace's walk, taken beforehand
    off the writer (seconds at 40K files) while saved files were still being indexed; the index's rows are
    read when this runs, so what those saves wrote is kept. `should_stop`, asked as the walk lists the folders and
    before each file is written: once it is true the run ends (`IndexStopped`) with its chunking workers killed.
    `written`: told of each
    group written (`WrittenFn`)."""
    def run() -> IndexReport:
        return _index_workspace(root, store, settings, progress, strategies, found, should_stop, written)

    # After damage the run starts over on a new file: what `written` was told is of the file moved aside.
    return _starting_over_on_damage(store, run, lambda: _index_workspace(root, store, settings, progress, strategies,
                                                                         should_stop=should_stop))


def _starting_over_on_damage(store: IndexStore, run: Callable[[], IndexReport],
                             rebuild: Callable[[], IndexReport]) -> IndexReport:
    """`run()`, unless it met a damaged index: the store then moved the file aside and started over empty
    (a write raises `StoreRebuilt`, a read answers from the new file), and `rebuild()` fills it, so the
    command that met the damage also repairs it."""
    recoveries = store.recoveries
    try:
        report = run()
    except StoreRebuilt as exc:
        log.warning("%s", exc)
    else:
        if store.recoveries == recoveries:
            return report
    return rebuild()


def _index_workspace(root: Path, store: IndexStore, settings: Settings, progress: ProgressFn | None,
                     strategies: tuple[Strategy, ...] = (), found: Walk | None = None,
                     should_stop: Callable[[], bool] | None = None, written: WrittenFn | None = None) -> IndexReport:
    started = time.perf_counter()
    retry_worker_start()  # a strategy worker that failed to start during the last run may start now
    retry_kept_worker_start()  # as may a worker for the grammars of a few files
    grammars_in_force(store)
    budget_in_force(store, settings)
    root = Path(root)
    found = found or walk(root, settings, should_stop)
    report = IndexReport(root=str(root.resolve()), index_path=str(store.path), files_seen=len(found.candidates))
    skipped = Counter(found.skipped)
    existing = store.file_rows()
    remembered = store.skipped_files()
    rules = content_rules(settings)
    on_disk = {c.rel_path for c in found.candidates}
    gone = [path for path in existing if path not in on_disk and not _appeared_since(root, path, settings)]

    work = []
    for candidate in found.candidates:
        row = existing.get(candidate.rel_path)
        known = remembered.get(candidate.rel_path)
        if _is_current(candidate, row):
            report.files_unchanged += 1
        elif row is None and skipped_unchanged(known, candidate, rules):
            skipped[known.reason] += 1  # skipped for its content last time, and not touched since
        elif fresh := _changed_since(candidate, row):
            work.append((fresh, row))
        else:
            report.files_unchanged += 1
    # Recorded as under way until its files are all written: the shared index says so in every answer meanwhile,
    # and after a run cut off.
    with store.index_run(changes=bool(gone or work)):
        report.files_deleted = store.delete_files(gone)
        total = len(found.candidates)
        done = total - len(work)
        prepared_all = prepare_files([(c, _known_hash(r)) for c, r in work], settings, strategies, should_stop)
        # Each file is asked for only once `should_stop` said go on: a stop is seen within a file's chunking (a group
        # of 32 takes seconds on a loaded machine), and closing `prepared_all` kills the workers' files in flight.
        prepared_files = zip(work, prepared_all if should_stop is None else until(should_stop, prepared_all))
        try:
            while group := list(islice(prepared_files, WRITE_BATCH)):
                kept: list[tuple[int, int]] = []
                # Begun once the group's files are all read: a shared index run checks there that its folder is
                # still at the commit it cites them at (`PgStore.writing_run`).
                with store.batch():
                    judged: list[SkippedFile] = []
                    for (candidate, row), prepared in group:
                        outcome = _apply(prepared, row, store, report, kept)
                        if outcome:
                            skipped[outcome] += 1
                            if prepared.digest:  # read and judged by its content (not a transient failure to read it)
                                judged.append(SkippedFile(candidate.rel_path, candidate.size, candidate.mtime, rules,
                                                          outcome))
                    # Remembered or forgotten with the group's files (judged anew: skipped again, or indexed now): a
                    # run stopped after it leaves no file indexed and still remembered as skipped, which the next
                    # run, finding the file current, would never judge again.
                    store.set_skipped(judged, [c.rel_path for (c, _), _ in group if c.rel_path in remembered])
                if written is not None and kept:
                    written(kept)
                # Told once the group is written, outside its transaction: the count is then of files in the index,
                # and a listener that is slow (an editor not reading its pipe) holds no lock another thread's search
                # needs.
                before, done = done, done + len(group)
                if progress and (done // PROGRESS_EVERY > before // PROGRESS_EVERY or done == total):
                    (last, _), _ = group[-1]
                    progress(Progress("chunk", done, total, last.rel_path))
        finally:
            prepared_all.close()  # stopped or failed (a full disk): no worker goes on chunking for no one
        if done < total:
            raise IndexStopped(f"indexing stopped after {done:,} of {total:,} files")
    if progress and not work:
        progress(Progress("chunk", total, total, ""))
    remember_walk(store, found, remembered, on_disk, rules)

    return _finish_report(report, store, skipped, started)


def remember_walk(store: IndexStore, found: Walk, remembered: dict[str, SkippedFile], on_disk: set[str],
                  rules: str) -> None:
    """Remember what the walk `found` skipped itself (the files it skipped by name or size or as compiled copies,
    counted and the first named: `WalkSkips`; the folders it could not list, and how many) and forget the skipped
    paths no longer on disk (`on_disk`, the walk's candidates), as `index` and `index --queue` both do; written only
    where new or changed: a no-op re-index writes nothing."""
    walked = _unreadable_folders(found, rules)
    store.set_skipped([entry for path, entry in walked.items() if remembered.get(path) != entry],
                      [path for path in remembered if path not in on_disk and path not in walked])
    by_path = sorted(found.skipped_files)
    _keep_walk_skips(store, WalkSkips(dict(Counter(reason for _, reason in by_path)),
                                      dict(by_path[:WALK_SKIPS_NAMED]), dict(by_path[WALK_SKIPS_NAMED:])))
    unreadable = str(len(found.unreadable_dirs))
    if store.get_meta(UNREADABLE_FOLDERS_KEY, "0") != unreadable:
        store.set_meta(UNREADABLE_FOLDERS_KEY, unreadable)


@dataclass
class WalkSkips:
    """The files the last walk skipped by name or size or as compiled copies, as the index remembers them."""

    counts: dict[str, int]  # by reason, every one
    named: dict[str, str]  # path -> reason, the first `WALK_SKIPS_NAMED` by path
    rest: dict[str, str] | None = None  # path -> reason, the others by path; None: not read (`walk_skips`)


def walk_skips(store: IndexStore, *, rest: bool = False) -> WalkSkips:
    """The walk's skips the index remembers: none in an index no walk counted them in yet (its older rows of them
    are `skipped_files`' until then), nor in a damaged value. `rest`: read the ones past the named too (none where
    the index holds no record of them that matches the named ones': one written before they were kept, or
    damaged)."""
    try:
        held = json.loads(store.get_meta(WALK_SKIPS_KEY, "{}"))
        skips = WalkSkips({str(reason): int(n) for reason, n in held["counts"].items()},
                          {str(path): str(reason) for path, reason in held["named"].items()})
        digest = str(held.get("rest", ""))
    except (ValueError, TypeError, KeyError, AttributeError):
        return WalkSkips({}, {}, {} if rest else None)
    if rest:
        try:
            held_rest = json.loads(store.get_meta(WALK_SKIPS_REST_KEY, "{}"))
            skips.rest = dict(held_rest["skips"]) if digest and held_rest["digest"] == digest else {}
        except (ValueError, TypeError, KeyError, AttributeError):
            skips.rest = {}
    return skips


def walked(store: IndexStore) -> bool:
    """Whether an index of the store's files ever walked them to the end (`remember_walk` writes its record of
    the walk's skips on every one, none skipped too): an index holding no file then found none to hold."""
    return bool(store.get_meta(WALK_SKIPS_KEY, ""))


def _rest_digest(rest: dict[str, str]) -> str:
    """What the main value holds of the skips past the named ones: a path holds no NUL, so joined by NUL they read
    one way only (cheaper than writing them out as JSON on every no-op re-index)."""
    return hashlib.sha256("\0".join(f"{path}\0{reason}" for path, reason in rest.items()).encode()).hexdigest()


def _keep_walk_skips(store: IndexStore, skips: WalkSkips) -> None:
    """Write `skips` where they differ from the index's (`skips.rest` read or walked: not None)."""
    assert skips.rest is not None
    digest = _rest_digest(skips.rest)
    value = json.dumps({"counts": dict(sorted(skips.counts.items())), "named": dict(sorted(skips.named.items())),
                        "rest": digest})
    if store.get_meta(WALK_SKIPS_KEY, "") != value:
        # The others first: a run cut off between the two leaves the main value's digest not matching them, and
        # they are read as none (as before they were kept) until the next walk writes both again.
        store.set_meta(WALK_SKIPS_REST_KEY, json.dumps({"digest": digest, "skips": skips.rest}))
        store.set_meta(WALK_SKIPS_KEY, value)


def _settle_walk_skips(store: IndexStore, settled: list[str], skipped: dict[str, str]) -> None:
    """After a save: forget the walk skips among `settled` (it indexed them, found them gone or skipped them for
    their content) and uncount them, and count `skipped` (path -> reason: files it found skipped by name or size or
    as compiled copies, `walk_names`) as the walk does, the first `WALK_SKIPS_NAMED` by path named: a save that
    created an image counted it nowhere until the next walk. Nothing is read for a save of neither; the ones past
    the named are read only where there are any (more counted than named) or the save's may join them."""
    if not settled and not skipped:
        return
    skips = walk_skips(store)
    if sum(skips.counts.values()) > len(skips.named) or len(skips.named) + len(skipped) > WALK_SKIPS_NAMED:
        skips = walk_skips(store, rest=True)
    named, rest, counts = skips.named, skips.rest or {}, skips.counts
    changed = False
    for path in settled:
        reason = named.pop(path, None) or rest.pop(path, None)
        if reason:
            counts[reason] = counts.get(reason, 1) - 1
            changed = True
    for path, reason in skipped.items():
        known = named.get(path) or rest.get(path)
        if known != reason:
            if known:
                counts[known] = counts.get(known, 1) - 1
            counts[reason] = counts.get(reason, 0) + 1
            named[path] = reason
            rest.pop(path, None)
            changed = True
    if changed:
        every = sorted({**rest, **named}.items())
        _keep_walk_skips(store, WalkSkips({r: n for r, n in counts.items() if n > 0}, dict(every[:WALK_SKIPS_NAMED]),
                                          dict(every[WALK_SKIPS_NAMED:])))


def skipped_unchanged(known: SkippedFile | None, candidate: Candidate, rules: str) -> bool:
    """Whether the walk's candidate was skipped for its content (by `index` or a worker) and is untouched since,
    under the same content rules: reading it again would only skip it again. Not a file remembered as a compiled
    copy: whether it is one depends on other files (its map, their sources), and as a candidate it is none now."""
    return known is not None and known.reason != COMPILED and \
        (known.size, known.mtime, known.rules) == (candidate.size, candidate.mtime, rules)


def _unreadable_folders(found: Walk, rules: str) -> dict[str, SkippedFile]:
    """The first `UNREADABLE_FOLDERS_NAMED` folders the walk could not list, as the index remembers them (named
    `dir/`; their count is the walk's)."""
    return {f"{folder}/": SkippedFile(f"{folder}/", 0, 0.0, rules, UNREADABLE_FOLDER)
            for folder in found.unreadable_dirs[:UNREADABLE_FOLDERS_NAMED]}


def index_files(store: IndexStore, settings: Settings, files: list[tuple[Candidate, bytes]], *, label: str,
                skipped: Mapping[str, int], strategies: tuple[Strategy, ...] = (),
                progress: ProgressFn | None = None) -> IndexReport:
    """Bring the store up to date with a tree held in memory (a remote tarball's files, already past the path
    rules): the same content rules, chunking and writes as `index_workspace`; paths not in `files` leave it."""
    started = time.perf_counter()
    report = IndexReport(root=label, index_path=str(store.path), files_seen=len(files))
    counted = Counter(skipped)
    existing = store.file_rows()
    present = {candidate.rel_path for candidate, _ in files}
    report.files_deleted = store.delete_files([path for path in existing if path not in present])
    # In worker processes, as `index_workspace` chunks: a grammar's crash or loop on a file costs that file only.
    prepared_all = map_in_workers(prepare_bytes, ((c, raw, _known_hash(existing.get(c.rel_path)), settings, strategies)
                                                  for c, raw in files), len(files), what="chunking",
                                  size=lambda _, raw, *__: len(raw), crashed=prepare_bytes_crashed,
                                  kind=language_by_path)
    try:
        for done, ((candidate, _), prepared) in enumerate(zip(files, prepared_all), 1):
            row = existing.get(candidate.rel_path)
            outcome = _apply(prepared, row, store, report)
            if outcome:
                counted[outcome] += 1
            if progress and (done % PROGRESS_EVERY == 0 or done == len(files)):
                progress(Progress("chunk", done, len(files), candidate.rel_path))
    finally:
        prepared_all.close()  # failed (a full disk): no worker goes on chunking for no one
    return _finish_report(report, store, counted, started)


def _finish_report(report: IndexReport, store: IndexStore, skipped: Counter[str], started: float) -> IndexReport:
    counts = store.counts()
    report.chunks, report.symbols = counts["chunks"], counts["symbols"]
    report.languages = store.language_counts()
    report.skipped = dict(sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    report.elapsed_s = time.perf_counter() - started
    return report


def _appeared_since(root: Path, rel: str, settings: Settings) -> bool:
    """Whether an indexed file the walk did not find is on disk now: created after the walk and indexed by its
    save meanwhile (a later change reaches the index through its own save or the next walk)."""
    try:
        st = os.lstat(root / rel)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and not path_skip_reason(root, rel, settings)


def _changed_since(candidate: Candidate, row: FileRow | None) -> Candidate | None:
    """The file as it is now, when it still differs from its row; None when a save indexed it since the walk
    (read with the walk's stale identity it would count as replaced and be dropped from the index). A file gone
    since keeps the walk's candidate: reading it then reports it."""
    try:
        st = os.lstat(candidate.abs_path)
    except OSError:
        return candidate
    fresh = Candidate.from_stat(candidate.rel_path, candidate.abs_path, st)
    return None if stat.S_ISREG(st.st_mode) and _is_current(fresh, row) else fresh


def index_paths(root: Path, store: IndexStore, settings: Settings, rel_paths: Iterable[str],
                strategies: tuple[Strategy, ...] = ()) -> IndexReport:
    """Re-index just these files (saved, created or deleted): the editor's fast path. Damage met on the way
    re-indexes the whole workspace into the new, empty index. So does a changed ignore file (`.gitignore`,
    `.codeloupeignore`, a clone's `.git/info/exclude`): which files belong in the index is the walk's to say
    again, the files it now ignores leaving and those it no longer ignores joining."""
    rel_paths = list(rel_paths)

    def whole() -> IndexReport:
        return _index_workspace(root, store, settings, None, strategies)

    if any(_holds_ignore_rules(rel) for rel in rel_paths):
        return _starting_over_on_damage(store, whole, whole)
    return _starting_over_on_damage(store, lambda: _index_paths(root, store, settings, rel_paths, strategies),
                                    whole)


def _holds_ignore_rules(rel_path: str) -> bool:
    return posixpath.basename(rel_path) in IGNORE_FILE_NAMES or rel_path.endswith(".git/info/exclude")


def _beside_maps(rel_paths: Iterable[str]) -> set[str]:
    """The files beside the source maps among `rel_paths`: a source map saved, created or deleted can make the file
    beside it a compiled copy or a file of its own again, so a save of the map judges that file again too."""
    return {rel.removesuffix(SOURCE_MAP_SUFFIX) for rel in rel_paths if rel.endswith(SOURCE_MAP_SUFFIX)}


def files_a_save_writes(rel_paths: Iterable[str]) -> list[str] | None:
    """The files `index_paths` may write or delete for a save of `rel_paths`: those and the file beside each
    saved source map; None where it may write any file of the folder (a saved ignore file: the walk judges them
    all again)."""
    saved = set(rel_paths)
    return None if any(_holds_ignore_rules(rel) for rel in saved) else sorted(saved | _beside_maps(saved))


def _index_paths(root: Path, store: IndexStore, settings: Settings, rel_paths: Iterable[str],
                 strategies: tuple[Strategy, ...]) -> IndexReport:
    started = time.perf_counter()
    root = Path(root).resolve()
    report = IndexReport(root=str(root), index_path=str(store.path))
    # The file beside a saved source map is judged by the walk's rules again, whether it is in the index or not.
    saved = set(rel_paths)
    beside_maps = _beside_maps(saved)
    rel_paths = sorted(saved | beside_maps)
    existing = store.file_rows(rel_paths)  # the saved files' rows only: a save never reads the whole index
    skipped: Counter[str] = Counter()
    # The files remembered as skipped that this save indexed or found gone: forgotten, or `stats --skipped` listed
    # them for good (a walk judges again only the files it finds changed, and these are current or gone).
    settled: list[str] = []
    walked: dict[str, str] = {}  # the files it found skipped as the walk names them: counted by the walk's skips
    judged: list[SkippedFile] = []  # the files it read and skipped for their content: remembered, as a run does
    # The files it found skipped by their path: a record of their content's skip is forgotten, as the walk forgets
    # it (else a file once binary, now too large, was counted under both until the next walk).
    by_path: list[str] = []
    for rel in rel_paths:
        path = root / rel
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):  # gone, or now a link or a directory: not indexed
            report.files_deleted += store.delete_files([rel] if rel in existing else [])
            settled.append(rel)
            continue
        if rel not in existing or rel in beside_maps:  # the walk's rules decide whether it belongs in the index
            reason = path_skip_reason(root, rel, settings)
            if reason:
                skipped[reason] += 1
                if walk_names(rel, st.st_size, reason, settings):
                    walked[rel] = reason
                by_path.append(rel)
                report.files_deleted += store.delete_files([rel] if rel in existing else [])
                continue
        report.files_seen += 1
        candidate = Candidate.from_stat(rel, path, st)
        row = existing.get(rel)
        if _is_current(candidate, row):
            report.files_unchanged += 1
            continue
        # In a kept worker process: a grammar that crashes or never finishes on the file costs that file, not the
        # language server.
        [prepared] = prepare_files([(candidate, _known_hash(row))], settings, strategies)
        outcome = _apply(prepared, row, store, report)
        if outcome:
            skipped[outcome] += 1
            if prepared.digest:  # judged by its content: remembered as a walk's run remembers it
                judged.append(SkippedFile(rel, candidate.size, candidate.mtime, content_rules(settings), outcome))
        elif row is None:
            settled.append(rel)
    store.set_skipped(judged, settled + by_path)
    _settle_walk_skips(store, settled + [s.path for s in judged], walked)  # judged by content: no walk's skip
    report.skipped = dict(skipped)
    report.elapsed_s = time.perf_counter() - started
    return report


@dataclass
class Prepared:
    """One file read, hashed, decoded and chunked: everything but the store write (picklable)."""

    candidate: Candidate
    digest: str = ""
    same_content: bool = False
    skip_reason: str = ""
    encoding: str = "utf-8"
    chunked: ChunkedFile | None = None
    line_count: int = 0
    terms: KeptCounts | None = None  # its chunks' lexical term counts, counted and packed here (in a worker)


# Index meta: the chunk strategies the index was built with.
_STRATEGIES_KEY = "chunk_strategies"


def strategies_in_force(store: IndexStore, strategies: tuple[Strategy, ...]) -> tuple[Strategy, ...]:
    """`strategies`, recorded in the index; when they differ from those it was built with, the files either set
    claims are marked as chunked by no strategy in force (`STRATEGY_NOT_RUN_VERSION`), so the next index (or queue)
    run chunks them again, their chunks answering meanwhile. Deleted instead, they were missing from every answer
    from then until the run had written them again (on the shared index, the whole of a run's or a queue's time,
    where a run's other deletes wait for its end), and for good after a run cut off before them."""
    current = [[s.name, list(s.extensions), s.sha256 or _function_name(s)] for s in strategies]
    known = json.loads(store.get_meta(_STRATEGIES_KEY, "[]"))
    if current != known:
        claimed = {ext for _, extensions, _ in (*known, *current) for ext in extensions}
        store.set_chunker_version([path for path in store.file_rows() if Path(path.lower()).suffix in claimed],
                                  STRATEGY_NOT_RUN_VERSION)
        store.set_meta(_STRATEGIES_KEY, json.dumps(current))
    return strategies


# Index meta: the grammars' versions (`grammar_versions`) the index was last chunked under.
_GRAMMARS_KEY = "grammar_versions"


def grammars_in_force(store: IndexStore) -> None:
    """Where the grammars differ from those the index was last chunked under (the grammar pack or tree-sitter
    upgraded), the files chunked in line windows because their grammar crashed or never finished on them are marked
    as chunked by no chunker (`STRATEGY_NOT_RUN_VERSION`), so that this run parses them again: stored as current,
    they stayed in line windows until they changed, even once a new grammar parsed them. (A new chunker's version
    chunks every file again.) A grammar that still fails on one costs its worker again, once per upgrade."""
    current = grammar_versions()
    if store.get_meta(_GRAMMARS_KEY) != current:
        failed = [path for path, reason in store.chunking_problems() if reason.startswith(GRAMMAR_FAILED)]
        store.set_chunker_version(failed, STRATEGY_NOT_RUN_VERSION)
        store.set_meta(_GRAMMARS_KEY, current)


_BUDGET_KEY = "chunk_budget"


def budget_in_force(store: IndexStore, settings: Settings) -> None:
    """Where the chunk budget differs from the one the index was chunked under (`chunk_budget` changed in the
    settings or an editor's), every file is marked as chunked by no chunker (`STRATEGY_NOT_RUN_VERSION`), so that
    this run chunks it again: unchanged files kept their old chunks, however the budget was set. An index that names
    no budget (made before it was kept) keeps its chunks and records today's."""
    budget = str(settings.chunk_budget)
    kept = store.get_meta(_BUDGET_KEY)
    if kept != budget:
        if kept:
            store.set_chunker_version(store.file_rows(), STRATEGY_NOT_RUN_VERSION)
        store.set_meta(_BUDGET_KEY, budget)


def _function_name(strategy: Strategy) -> str:
    function = strategy.function
    return f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}"


def prepare(candidate: Candidate, known_hash: str, settings: Settings,
            strategies: tuple[Strategy, ...] = (), *, grammar_crashed: str = "") -> Prepared:
    """The CPU-bound half of indexing one file; runs in worker processes for a large (re)index.
    `grammar_crashed`: see `chunk_file`."""
    try:
        raw = read_candidate_bytes(candidate)
    except CandidateChanged:
        return Prepared(candidate, skip_reason="replaced since discovery")
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link where discovery saw a file
            return Prepared(candidate, skip_reason="replaced since discovery")
        return Prepared(candidate, skip_reason=f"unreadable ({exc.strerror or exc})")
    return prepare_bytes(candidate, raw, known_hash, settings, strategies, grammar_crashed=grammar_crashed)


def prepare_crashed(cause: str, candidate: Candidate, known_hash: str, settings: Settings,
                    strategies: tuple[Strategy, ...] = ()) -> Prepared:
    """`prepare` for a file the worker preparing it died on or ran past its time on (`cause`, as
    `map_in_workers` words it: a grammar's crash on the file, a SIGSEGV in tree-sitter; a grammar that loops on
    it, as far as seen): the file is chunked in this process as with no grammar, never parsed here, where its
    grammar would crash or hang the language server or `serve` in turn; the log names it, and its fallback reason
    ("grammar crashed: ...", "grammar did not finish: ...") lists it among the chunking problems."""
    return prepare(candidate, known_hash, settings, strategies, grammar_crashed=_grammar_failed(candidate, cause))


def prepare_bytes_crashed(cause: str, candidate: Candidate, raw: bytes, known_hash: str, settings: Settings,
                          strategies: tuple[Strategy, ...] = ()) -> Prepared:
    """`prepare_crashed` for bytes already in hand (`prepare_bytes`)."""
    return prepare_bytes(candidate, raw, known_hash, settings, strategies,
                         grammar_crashed=_grammar_failed(candidate, cause))


def _grammar_failed(candidate: Candidate, cause: str) -> str:
    """The fallback reason of a file whose grammar failed in its worker (`cause`), said in the log; or that was not
    run for its failures on other files (said once, for all of them, by `map_in_workers`)."""
    log.log(logging.INFO if cause.startswith(NOT_RUN) else logging.WARNING,
            "chunking %s %s (its grammar's doing, as far as known): it is chunked in line windows, without its grammar",
            candidate.rel_path, cause)
    return f"grammar {cause}"


def prepare_bytes(candidate: Candidate, raw: bytes, known_hash: str, settings: Settings,
                  strategies: tuple[Strategy, ...] = (), *, grammar_crashed: str = "") -> Prepared:
    """`prepare` for bytes already in hand (read from disk, or from a tarball in memory)."""
    digest = content_hash(raw)
    if digest == known_hash:
        return Prepared(candidate, digest, same_content=True)
    decoded = decode_source(raw, settings, candidate.rel_path)
    if decoded.text is None:
        return Prepared(candidate, digest, skip_reason=decoded.skip_reason)
    text = decoded.text
    language = detect_language(candidate.rel_path, text[:200])
    chunked = chunk_file(candidate.rel_path, text, language, settings.chunk_budget, strategies,
                         grammar_crashed=grammar_crashed)
    path_terms = path_tokens(chunked.path)
    terms = count_chunk_terms([(path_terms, c.breadcrumb, c.text) for c in chunked.chunks]).kept()
    return Prepared(candidate, digest, encoding=decoded.encoding, chunked=chunked,
                    line_count=len(split_lines(text)), terms=terms)


def prepare_files(jobs: list[tuple[Candidate, str]], settings: Settings, strategies: tuple[Strategy, ...],
                  should_stop: Callable[[], bool] | None = None) -> Generator[Prepared, None, None]:
    """Prepare files in order; in worker processes when there are enough to pay for starting them, else each in a
    kept worker process (`map_in_workers`' `crashed`): never in this process, which a grammar's crash on a file would
    end, or its loop hang for good (where no worker can start at all, here, as said in the log). `should_stop` is
    asked while a result is awaited too: between results alone (`until`), a stop as the workers started waited for
    their start and first task (seconds on a loaded machine), past the 1.5 s a language server's exit allows, which
    then left with the pool never let go (the resource tracker's leaked semaphores on the editor's output)."""
    return map_in_workers(prepare, ((c, k, settings, strategies) for c, k in jobs), len(jobs), what="chunking",
                          size=lambda candidate, *_: candidate.size, should_stop=should_stop, crashed=prepare_crashed,
                          kind=language_by_path)


def language_by_path(candidate: Candidate, *_: object) -> str | None:
    """A file's language where its path tells it (`map_in_workers`' `kind`, whose breaker stops parsing a language
    after its grammar failed on a few files of the run); None where its text would have to."""
    language = detect_language(candidate.rel_path)
    return None if language == "text" else language


def _known_hash(row: FileRow | None) -> str:
    """The hash that lets a file skip re-chunking: only one chunked by this chunker version qualifies."""
    return row.hash if row is not None and row.chunker_version == CHUNKER_VERSION else ""


def content_rules(settings: Settings) -> str:
    """What decides whether a file's content is skipped: a file judged under other rules is read again."""
    return f"{CHUNKER_VERSION}:{CONTENT_RULES_VERSION}:{settings.max_file_bytes}:{settings.max_line_chars}"


def _is_current(candidate: Candidate, row: FileRow | None) -> bool:
    return (row is not None and row.chunker_version == CHUNKER_VERSION and row.size == candidate.size
            and row.mtime == candidate.mtime)


def _apply(prepared: Prepared, row: FileRow | None, store: IndexStore, report: IndexReport,
           kept: list[tuple[int, int]] | None = None) -> str:
    """Write one prepared file; returns a skip reason, or "" when the file is (still) in the index. `kept`: given
    (file id, chunk count) where the file was written with its term counts."""
    candidate = prepared.candidate
    if prepared.same_content:
        store.touch_file(candidate.rel_path, candidate.size, candidate.mtime)
        report.files_unchanged += 1
        return ""
    if prepared.chunked is None:
        if row is not None:  # it was indexed before and is now binary, too large, ...: forget it
            store.delete_files([candidate.rel_path])
        return prepared.skip_reason
    if prepared.encoding not in ("utf-8", "utf-8-sig"):
        report.decoded_fallback += 1
    chunked = prepared.chunked
    if chunked.fallback_reason.startswith("partition"):
        report.partition_violations += 1
        log.error("partition violation in %s: %s", candidate.rel_path, chunked.fallback_reason)
    if chunked.strategy_warning and chunked.strategy_warning not in report.strategy_warnings:
        report.strategy_warnings.append(chunked.strategy_warning)
    file_id = store.replace_file(
        chunked, hash=prepared.digest, size=candidate.size, mtime=candidate.mtime,
        is_doc=is_doc_language(chunked.language), encoding=prepared.encoding,
        chunker_version=chunked_version(chunked),
        line_count=prepared.line_count, terms=prepared.terms,
    )
    if kept is not None and prepared.terms is not None and prepared.terms.chunks == len(chunked.chunks):
        kept.append((file_id, len(chunked.chunks)))
    report.files_indexed += 1
    return ""
