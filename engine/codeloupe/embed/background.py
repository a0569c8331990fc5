"""Fill in missing vectors after indexing: skeletons, then chunks of preferred files, then the rest.

Skeletons come first because there is one per file and they are the cheapest strong signal of what a file
is about. Each step embeds a pool of texts (sorted by length inside the provider) and writes them to the
store in one transaction, so a process killed mid-run loses at most one pool and the next run resumes.
Every text goes through the shared content-addressed cache first: a vector is computed once per model. A row
with nothing to embed (a chunk of blank lines; the skeleton of a file with no other chunk: an empty file, a bare
`__init__.py`) gets the zero vector without the model or the cache: every embedded text starts with its path,
so 100,000 empty files were 100,000 distinct texts (159 s of a 211-s index), whose vectors no lane used.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from codeloupe.embed import EmbeddingError, EmbeddingProvider, EmbeddingStopped, embedding_text
from codeloupe.embed.cache import EmbeddingCache, text_key
from codeloupe.settings import Settings
from codeloupe.store import Store
from codeloupe.types import BLANK_CHARS, Progress

log = logging.getLogger("codeloupe.embed")

# Texts per step: large enough that length-sorting packs batches tightly and the worker processes get a
# dozen batches each (64 chunks are about 110 windows), small enough that a pause request (should_stop: a save
# waiting to be indexed) is honoured within about a second on 2 cores (~0.8 s a step).
POOL_TEXTS = 64


@dataclass
class EmbedReport:
    skeletons_done: int = 0  # vectors written in this run
    chunks_done: int = 0
    cache_hits: int = 0  # texts answered by the shared cache
    computed: int = 0  # texts the provider embedded
    blank: int = 0  # rows with nothing to embed, given the zero vector
    elapsed_s: float = 0.0
    stopped: bool = False  # should_stop() asked to stop before everything was embedded


class _Run:
    def __init__(self, store: Store, provider: EmbeddingProvider, cache: EmbeddingCache,
                 progress: Callable[[Progress], None] | None, should_stop: Callable[[], bool] | None,
                 total: int) -> None:
        self.store, self.provider, self.cache = store, provider, cache
        self.progress, self.should_stop = progress, should_stop
        self.total = total
        self.report = EmbedReport()

    def vectors(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts`: from the cache where it has them, the provider for the rest."""
        model = self.provider.model_id
        keys = [text_key(t) for t in texts]
        known = self.cache.get(model, list(set(keys)))
        todo: dict[bytes, str] = {}  # identical texts (licence headers, empty files) are embedded once
        for key, text in zip(keys, texts):
            if key not in known:
                todo.setdefault(key, text)
        if todo:
            fresh = self.provider.embed(list(todo.values()))
            if fresh.shape != (len(todo), self.provider.dim):
                raise EmbeddingError(f"{model} returned vectors of shape {fresh.shape}, expected "
                                 f"({len(todo)}, {self.provider.dim})")
            known.update(zip(todo, fresh))
            try:
                self.cache.put(model, list(todo), fresh)
            except sqlite3.Error as exc:  # the cache is an optimisation; the store still gets the vectors
                log.warning("cannot write the embedding cache %s: %s", self.cache.path, exc)
        self.report.cache_hits += len(texts) - len(todo)
        self.report.computed += len(todo)
        return np.stack([known[k] for k in keys]).astype(np.float32)

    def step(self, table: str, rows: list[tuple[int, str]], blank: set[int]) -> None:
        """Write the vectors of `rows` (id, text); those of `blank` ids are zero, and the provider never sees them.
        A zero vector scores 0 against any query, and the caches never hold one (it is no model's output)."""
        ids = [r[0] for r in rows]
        vectors = np.zeros((len(rows), self.provider.dim), np.float32)
        texts = [k for k, (i, _) in enumerate(rows) if i not in blank]
        if texts:
            vectors[texts] = self.vectors([rows[k][1] for k in texts])
        self.report.blank += len(rows) - len(texts)
        self.store.put_vectors(table, self.provider.model_id, ids, vectors)
        if table == "skeleton":
            self.report.skeletons_done += len(ids)
        else:
            self.report.chunks_done += len(ids)
        if self.progress:
            done = self.report.skeletons_done + self.report.chunks_done
            self.progress(Progress("embed", done, self.total, f"{done}/{self.total} vectors ({table}s)"))

    def stop_requested(self) -> bool:
        if self.should_stop is not None and self.should_stop():
            self.report.stopped = True
        return self.report.stopped


def embed_pending(store: Store, provider: EmbeddingProvider | None, settings: Settings, *,
                  progress: Callable[[Progress], None] | None = None, prefer_paths: Iterable[str] = (),
                  should_stop: Callable[[], bool] | None = None) -> EmbedReport:
    """Compute every missing skeleton and chunk vector for `provider.model_id`.

    With no provider (``embed_provider = "none"``) there is nothing to do. Vectors of any other model are
    dropped first: the dense lanes never compare vectors of two models."""
    started = time.perf_counter()
    if provider is None:
        return EmbedReport()
    model = provider.model_id
    store.drop_vectors_not_of(model)
    counts, done = store.counts(), store.vector_counts(model)
    total = (counts["files"] - done["skeletons_done"]) + (counts["chunks"] - done["chunks_done"])
    cache = EmbeddingCache(settings.embed_cache_path)
    run = _Run(store, provider, cache, progress, should_stop, max(total, 0))
    prefer = list(prefer_paths)
    try:
        while not run.stop_requested():
            skeletons = store.skeletons_missing_vectors(model, POOL_TEXTS)
            if not skeletons:
                break
            ids = {file_id for file_id, _ in skeletons}
            run.step("skeleton", skeletons, ids - store.files_with_text(ids))
        while not run.stop_requested():
            chunks = store.chunks_missing_vectors(model, POOL_TEXTS, prefer)
            if not chunks:
                break
            run.step("chunk", [(cid, embedding_text(crumb, text)) for cid, crumb, text in chunks],
                     {cid for cid, _, text in chunks if not text.strip(BLANK_CHARS)})
    except EmbeddingStopped:  # the provider's `stop_bulk`: the step under way wrote nothing, the next run redoes it
        run.report.stopped = True
    finally:
        cache.close()
        provider.release_workers()  # idle workers would hold a model's memory each until the next run
    run.report.elapsed_s = time.perf_counter() - started
    return run.report
