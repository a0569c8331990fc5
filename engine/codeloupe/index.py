"""The indexer: discover -> read -> chunk -> store, incremental by content hash.

An unchanged file (same size and mtime, or same content hash) is never re-read twice or re-chunked; a file
chunked by an older chunker is re-chunked; a deleted or newly ignored file leaves every table. Each file is
stored in its own transaction, so an interrupted run leaves a consistent index and the next run resumes.
Vectors are not computed here: the lexical and symbol lanes answer as soon as this returns, and the
embedder fills vectors in afterwards (`codeloupe.embed.background`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from codeloupe.chunk import CHUNKER_VERSION, chunk_file, detect_language, is_doc_language
from codeloupe.discover import Candidate, decode_source, walk
from codeloupe.settings import Settings
from codeloupe.store import FileRow, Store
from codeloupe.types import IndexReport, Progress

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

    total = len(found.candidates)
    for done, candidate in enumerate(found.candidates, 1):
        outcome = _index_candidate(candidate, existing.get(candidate.rel_path), store, settings, report)
        if outcome:
            skipped[outcome] += 1
        if progress and (done % 50 == 0 or done == total):
            progress(Progress("chunk", done, total, candidate.rel_path))

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
    allowed = None  # the ignore rules are evaluated by a walk only when a path is new to the index
    skipped: Counter[str] = Counter()
    for rel in sorted(set(rel_paths)):
        path = root / rel
        if not path.is_file():
            report.files_deleted += store.delete_files([rel] if rel in existing else [])
            continue
        if rel not in existing:
            if allowed is None:
                allowed = {c.rel_path: c for c in walk(root, settings).candidates}
            if rel not in allowed:
                skipped["ignored"] += 1
                continue
        st = path.stat()
        report.files_seen += 1
        outcome = _index_candidate(Candidate(rel, path, st.st_size, st.st_mtime), existing.get(rel), store,
                                   settings, report)
        if outcome:
            skipped[outcome] += 1
    report.skipped = dict(skipped)
    report.elapsed_s = time.perf_counter() - started
    return report


def _index_candidate(candidate: Candidate, row: FileRow | None, store: Store, settings: Settings,
                     report: IndexReport) -> str:
    """Index one file; returns a skip reason, or "" when the file is (still) in the index."""
    current = row is not None and row.chunker_version == CHUNKER_VERSION
    if current and row.size == candidate.size and row.mtime == candidate.mtime:
        report.files_unchanged += 1
        return ""
    try:
        raw = candidate.abs_path.read_bytes()
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    digest = content_hash(raw)
    if current and row.hash == digest:
        store.touch_file(candidate.rel_path, candidate.size, candidate.mtime)
        report.files_unchanged += 1
        return ""
    decoded = decode_source(raw, settings)
    if decoded.text is None:
        if row is not None:  # it was indexed before and is now binary, too large, ...: forget it
            store.delete_files([candidate.rel_path])
        return decoded.skip_reason
    if decoded.encoding not in ("utf-8", "utf-8-sig"):
        report.decoded_fallback += 1
    text = decoded.text
    language = detect_language(candidate.rel_path, text[:200])
    chunked = chunk_file(candidate.rel_path, text, language, settings.chunk_budget)
    if chunked.fallback_reason.startswith("partition"):
        report.partition_violations += 1
        log.error("partition violation in %s: %s", candidate.rel_path, chunked.fallback_reason)
    store.replace_file(
        chunked, hash=digest, size=candidate.size, mtime=candidate.mtime, is_doc=is_doc_language(language),
        encoding=decoded.encoding, chunker_version=CHUNKER_VERSION, line_count=len(text.splitlines()),
    )
    report.files_indexed += 1
    return ""
