"""The indexer: discover -> read -> chunk -> store, incremental by content hash.

An unchanged file (same size and mtime, or same content hash) is never re-read twice or re-chunked; a file
chunked by an older chunker is re-chunked; a deleted or newly ignored file leaves every table. Each file is
stored in its own transaction, so an interrupted run leaves a consistent index and the next run resumes.
Reading and chunking a large batch runs in worker processes (chunking is pure-Python CPU work); the store
writes stay in this process. Vectors are not computed here: the lexical and symbol lanes answer as soon as this returns, and the
embedder fills vectors in afterwards (`codeloupe.embed.background`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from codeloupe.chunk import CHUNKER_VERSION, chunk_file, detect_language, is_doc_language
from codeloupe.discover import Candidate, decode_source, path_skip_reason, walk
from codeloupe.parallel import map_in_workers
from codeloupe.settings import Settings
from codeloupe.store import FileRow, Store
from codeloupe.types import ChunkedFile, IndexReport, Progress

log = logging.getLogger("codeloupe.index")

ProgressFn = Callable[[Progress], None]


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def index_workspace(root: Path, store: Store, settings: Settings,
                    progress: ProgressFn | None = None) -> IndexReport:
    """Bring the store up to date with the workspace on disk."""
    started = time.perf_counter()
    root = Path(root)
    found = walk(root, settings)
    report = IndexReport(root=str(root.resolve()), index_path=str(store.path), files_seen=len(found.candidates))
    skipped = Counter(found.skipped)
    existing = store.file_rows()
    on_disk = {c.rel_path for c in found.candidates}
    gone = [path for path in existing if path not in on_disk]
    report.files_deleted = store.delete_files(gone)

    work = []
    for candidate in found.candidates:
        row = existing.get(candidate.rel_path)
        if _is_current(candidate, row):
            report.files_unchanged += 1
        else:
            work.append((candidate, row))
    total = len(found.candidates)
    done = report.files_unchanged
    for (candidate, row), prepared in zip(work, _prepare_all([(c, _known_hash(r)) for c, r in work], settings)):
        outcome = _apply(prepared, row, store, report)
        if outcome:
            skipped[outcome] += 1
        done += 1
        if progress and (done % 50 == 0 or done == total):
            progress(Progress("chunk", done, total, candidate.rel_path))
    if progress and not work:
        progress(Progress("chunk", total, total, ""))

    counts = store.counts()
    report.chunks, report.symbols = counts["chunks"], counts["symbols"]
    report.languages = store.language_counts()
    report.skipped = dict(sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    report.elapsed_s = time.perf_counter() - started
    return report


def index_paths(root: Path, store: Store, settings: Settings, rel_paths: Iterable[str]) -> IndexReport:
    """Re-index just these files (saved, created or deleted): the editor's fast path."""
    started = time.perf_counter()
    root = Path(root).resolve()
    report = IndexReport(root=str(root), index_path=str(store.path))
    existing = store.file_rows()
    skipped: Counter[str] = Counter()
    for rel in sorted(set(rel_paths)):
        path = root / rel
        if not path.is_file():
            report.files_deleted += store.delete_files([rel] if rel in existing else [])
            continue
        if rel not in existing:  # new to the index: the walk's rules decide whether it belongs in it
            reason = path_skip_reason(root, rel, settings)
            if reason:
                skipped[reason] += 1
                continue
        st = path.stat()
        report.files_seen += 1
        candidate = Candidate(rel, path, st.st_size, st.st_mtime)
        row = existing.get(rel)
        if _is_current(candidate, row):
            report.files_unchanged += 1
            continue
        outcome = _apply(prepare(candidate, _known_hash(row), settings), row, store, report)
        if outcome:
            skipped[outcome] += 1
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


def prepare(candidate: Candidate, known_hash: str, settings: Settings) -> Prepared:
    """The CPU-bound half of indexing one file; runs in worker processes for a large (re)index."""
    try:
        raw = candidate.abs_path.read_bytes()
    except OSError as exc:
        return Prepared(candidate, skip_reason=f"unreadable ({exc.strerror or exc})")
    digest = content_hash(raw)
    if digest == known_hash:
        return Prepared(candidate, digest, same_content=True)
    decoded = decode_source(raw, settings)
    if decoded.text is None:
        return Prepared(candidate, digest, skip_reason=decoded.skip_reason)
    text = decoded.text
    language = detect_language(candidate.rel_path, text[:200])
    chunked = chunk_file(candidate.rel_path, text, language, settings.chunk_budget)
    return Prepared(candidate, digest, encoding=decoded.encoding, chunked=chunked,
                    line_count=len(text.splitlines()))


def _prepare_all(jobs: list[tuple[Candidate, str]], settings: Settings) -> Iterator[Prepared]:
    """Prepare files in order; in worker processes when there are enough to pay for starting them."""
    return map_in_workers(prepare, ((c, k, settings) for c, k in jobs), len(jobs), what="chunking")


def _known_hash(row: FileRow | None) -> str:
    """The hash that lets a file skip re-chunking: only one chunked by this chunker version qualifies."""
    return row.hash if row is not None and row.chunker_version == CHUNKER_VERSION else ""


def _is_current(candidate: Candidate, row: FileRow | None) -> bool:
    return (row is not None and row.chunker_version == CHUNKER_VERSION and row.size == candidate.size
            and row.mtime == candidate.mtime)


def _apply(prepared: Prepared, row: FileRow | None, store: Store, report: IndexReport) -> str:
    """Write one prepared file; returns a skip reason, or "" when the file is (still) in the index."""
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
    store.replace_file(
        chunked, hash=prepared.digest, size=candidate.size, mtime=candidate.mtime,
        is_doc=is_doc_language(chunked.language), encoding=prepared.encoding, chunker_version=CHUNKER_VERSION,
        line_count=prepared.line_count,
    )
    report.files_indexed += 1
    return ""
