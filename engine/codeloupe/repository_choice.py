"""Which repositories a search across very many of them searches in full.

A search across repositories (`api.search_repositories`) runs every lane in every repository it searches, three
passes each, with each repository's snapshot in memory: fine for tens of repositories, not for an
organisation's hundreds (docs/org-scale-measurements.md: 200 repositories did not finish opening in 19
minutes). Beyond `R.REPOSITORIES_SEARCHED_FULLY` repositories of one shared index, two lanes are first asked
of all of them in the database, each for its `R.LANE_DEPTH` best chunks across all of them: the lexical lane by
BM25 with IDF pooled over them, over the query's `R.REPOSITORY_CHOICE_TERMS` rarest terms, read with top-k
pruning; the dense lane by each chunk's cosine; both among the chunks the search's scope and mode keep. The repositories holding those chunks are ranked by reciprocal
rank fusion of their best chunk's rank in each list, and the first `R.REPOSITORIES_SEARCHED_FULLY` are
searched in full, as one ranking. Nothing here loads a repository's snapshot. A lane the database cannot answer
(a statement timeout, a lock it waited too long for, a vector it refuses) leaves the choice to the other; with
neither, the first repositories in order are searched: the choice narrows a search, it never fails one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from codeloupe import ranking as R
from codeloupe.lanes.tokens import tokenize
from codeloupe.store import StoreError
from codeloupe.store.postgres import (
    EVERY_FILE,
    BestChunks,
    FilesSearched,
    PgStore,
    best_chunks_across,
    nearest_across,
)

log = logging.getLogger("codeloupe.repository_choice")
_LANES = ("words", "meaning")  # the order the choice's lanes are asked and reported in
T = TypeVar("T")


@dataclass(frozen=True)
class RepositoryChoice:
    """The repositories to search in full (indexes into the stores asked, best first) and what chose them."""

    chosen: list[int]
    lexical_hits: int  # chunks the lexical lane ranked across every repository
    dense_hits: int  # the same for the dense lane (0: no query vector)
    postings_read: int  # postings the database handed over for the lexical lane
    postings_held: int  # postings of the query's terms in every repository
    lanes: tuple[str, ...]  # the lanes that ranked chunks: "words", "meaning"
    failed: dict[str, str]  # the lanes the database could not answer: the first line of its error
    seconds: dict[str, float]  # each lane's statements, wall


def choose_repositories(stores: Sequence[PgStore], query: str, vector: np.ndarray | None, model: str,
                        limit: int, files: FilesSearched = EVERY_FILE) -> RepositoryChoice:
    """The `limit` repositories of `stores` whose chunks the lexical and dense lanes rank first across all of
    them (`vector`: the query's, of `model`; None: the lexical lane alone), among the chunks of `files` (the
    search's scope and mode). A repository neither lane ranks is not chosen; with no ranked chunk anywhere, the
    first `limit` in order. A lane the database fails to answer ranks nothing (`failed` says why)."""
    stores = list(stores)
    failed: dict[str, str] = {}
    seconds: dict[str, float] = {}

    def asked(lane: str, ask: Callable[[], T], nothing: T) -> T:
        start = time.perf_counter()
        try:
            return ask()
        except StoreError as exc:
            log.warning("choosing repositories without the %s lane: %s", lane, exc)
            # The database's own first line: what a bundle's reader needs, without the index's address or the
            # statement (the log has both).
            failed[lane] = (str(exc.__cause__ or exc).strip().splitlines() or ["unknown error"])[0]
            return nothing
        finally:
            seconds[lane] = time.perf_counter() - start

    lexical = asked("words", lambda: best_chunks_across(
        stores, tokenize(query), R.LANE_DEPTH, R.BM25_K1, R.BM25_B, rarest=R.REPOSITORY_CHOICE_TERMS, files=files),
        BestChunks([], 0, 0))
    dense = asked("meaning", lambda: nearest_across(stores, model, vector, R.LANE_DEPTH, files), []) \
        if vector is not None else []
    position = {store.repo_id: n for n, store in enumerate(stores)}
    fused: dict[int, float] = {}
    for hits in (lexical.chunks, dense):
        seen: set[int] = set()
        for rank, (repo_id, _, _) in enumerate(hits, 1):
            if repo_id not in seen:  # a repository's best chunk in the list stands for it
                seen.add(repo_id)
                fused[repo_id] = fused.get(repo_id, 0.0) + 1.0 / (R.RRF_K + rank)
    ranked = sorted(fused, key=lambda repo_id: (-fused[repo_id], position[repo_id]))
    chosen = [position[repo_id] for repo_id in ranked[:limit]] or list(range(min(limit, len(stores))))
    return RepositoryChoice(chosen, len(lexical.chunks), len(dense), lexical.postings_read, lexical.postings_held,
                            tuple(lane for lane in _LANES if lane in seconds and lane not in failed),
                            {lane: failed[lane] for lane in _LANES if lane in failed}, seconds)
