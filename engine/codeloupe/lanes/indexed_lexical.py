"""The lexical lane of a store that keeps BM25 term statistics itself (PostgreSQL): no chunk is tokenised and no
matrix is held in this process; each query's terms are scored by the store in one statement (chunks, files and
the terms' document frequencies together), and the lane puts the best chunks' scores at their rows.

Scores are the in-process `BM25Index`'s (the same documents, k1, b and IDF); the lane returns the store's
`R.INDEXED_LEXICAL_DEPTH` best chunks, which the search masks (mode, scope) and cuts to `R.LANE_DEPTH`.
"""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np

from codeloupe import ranking as R
from codeloupe.arrays import find_sorted
from codeloupe.lanes.lexical import TermStats
from codeloupe.store.protocol import LexicalStatistics, TermScores

# Answers kept per snapshot: one query asks the same terms of the lexical, file and project lanes and of the
# snippet choice, and an editor's search-as-you-type repeats whole queries.
_ANSWERS_KEPT = 64


class IdRows:
    """Chunk (or file) ids -> their rows in a snapshot's table, for ids returned by a store."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids
        self._order = np.argsort(ids, kind="stable")
        self._sorted = ids[self._order]

    def scatter(self, found: list[tuple[int, float]], fill: float) -> np.ndarray:
        """An array over the rows: each found id's score at its row, `fill` elsewhere (ids the table does not
        hold, newer than the snapshot, are left out)."""
        out = np.full(len(self.ids), fill, np.float32)
        if found and len(self.ids):
            ids = np.array([i for i, _ in found], dtype=np.int64)
            pos, known = find_sorted(self._sorted, ids)
            out[self._order[pos[known]]] = np.array([score for _, score in found], np.float32)[known]
        return out


class IndexedBM25:
    """`BM25Index`'s interface (`scores`, `rarest`) over a store's term statistics."""

    def __init__(self, store: LexicalStatistics, ids: np.ndarray) -> None:
        self.store = store
        self.rows = IdRows(ids)
        # One statement answers the chunks (with one IDF) and the files (with another) together: each half is
        # kept under its own terms and IDF, so the file lane finds what the chunk lane's statement scored.
        self._chunks: dict[tuple, TermScores] = {}
        self._files: dict[tuple, TermScores] = {}
        self._lock = threading.Lock()

    def rows_holding(self, terms: set[str]) -> None:
        """No postings in this process (the store keeps them): `locate` reads every chunk."""
        return None

    def over(self, ids: np.ndarray) -> IndexedBM25:
        """The same lane over another table (a delta view's: the snapshot's rows and the changed files')."""
        return IndexedBM25(self.store, ids)

    def chunk_answer(self, terms: list[str], idf: dict[str, float] | None = None) -> TermScores:
        """An answer for `terms` whose chunks are scored with `idf` (None: the repository's own); the terms'
        frequencies and totals are the repository's in any answer."""
        with self._lock:
            found = self._chunks.get((_terms_key(terms), _idf_key(idf)))
        return found if found is not None else self._ask(terms, chunk_idf=idf)

    def file_answer(self, terms: list[str], idf: dict[str, float] | None = None) -> TermScores:
        """An answer for `terms` whose files are scored with `idf` (None: the repository's own)."""
        with self._lock:
            found = self._files.get((_terms_key(terms), _idf_key(idf)))
        return found if found is not None else self._ask(terms, file_idf=idf)

    def _ask(self, terms: list[str], *, chunk_idf: dict[str, float] | None = None,
             file_idf: dict[str, float] | None = None) -> TermScores:
        found = self.store.term_scores(terms, R.INDEXED_LEXICAL_DEPTH, R.BM25_K1, R.BM25_B,
                                       chunk_idf=chunk_idf, file_idf=file_idf)
        self.keep(terms, found, chunk_idf=chunk_idf, file_idf=file_idf)
        return found

    def keep(self, terms: list[str], found: TermScores, *, chunk_idf: dict[str, float] | None = None,
             file_idf: dict[str, float] | None = None) -> None:
        """Keep the store's answer for `terms` (asked with these IDF) for the lanes that ask it next: one
        statement answers every repository of a search across them (`answer_together`)."""
        asked = _terms_key(terms)
        with self._lock:
            if len(self._chunks) >= _ANSWERS_KEPT or len(self._files) >= _ANSWERS_KEPT:
                self._chunks.clear()
                self._files.clear()
            self._chunks[(asked, _idf_key(chunk_idf))] = found
            self._files[(asked, _idf_key(file_idf))] = found

    def term_stats(self, terms: list[str]) -> TermStats:
        """Chunks and how many hold each term (`BM25Index.term_stats`): what a search across repositories pools."""
        found = self.chunk_answer(terms)
        return TermStats(found.total_chunks, {t: found.chunk_frequency.get(t, 0) for t in terms})

    def scores(self, terms: list[str], pooled: TermStats | None = None) -> np.ndarray:
        """`pooled`: score each term with the IDF of these statistics instead of the repository's own."""
        if not terms:
            return np.zeros(len(self.rows.ids), np.float32)
        idf = None if pooled is None else {t: pooled.idf(t) for t in set(terms)}
        return self.rows.scatter(self.chunk_answer(terms, idf).chunks, 0.0)

    def scores_adding(self, scores: np.ndarray, asked: list[str], terms: list[str]) -> np.ndarray:
        """`scores(asked + terms)` (as `BM25Index.scores_adding`): the store scores them all in one answer."""
        return self.scores(asked + terms)

    def rarest(self, terms: list[str], k: int) -> list[str]:
        """The `k` terms of `terms` with the highest IDF among those any chunk holds (as `BM25Index.rarest`)."""
        if not terms:
            return []
        with self._lock:
            asked = self._chunks.get((_terms_key(terms), ()))
        total, frequency = (asked.total_chunks, asked.chunk_frequency) if asked is not None else \
            self.store.chunk_frequencies(terms)
        known = sorted(frequency)
        df = np.array([frequency[t] for t in known], np.float32)
        idf = np.log1p((total - df + 0.5) / (df + 0.5)).astype(np.float32)  # BM25Index._weigh's, in float32
        rank = dict(zip(known, idf.tolist(), strict=True))
        return sorted(known, key=lambda t: (-rank[t], t))[:k]

    snippet_terms = rarest  # the store is searched whole: nothing newer than its rows

    def files(self, file_ids: np.ndarray) -> IndexedFileBM25:
        return IndexedFileBM25(self, IdRows(file_ids))


class IndexedFileBM25:
    """The file lane's index (one document per file) from the same store answers, rows in `file_ids` order."""

    def __init__(self, chunks: IndexedBM25, rows: IdRows) -> None:
        self.chunks = chunks
        self.rows = rows

    def term_stats(self, terms: list[str]) -> TermStats:
        found = self.chunks.file_answer(terms)
        return TermStats(found.total_files, {t: found.file_frequency.get(t, 0) for t in terms})

    def scores(self, terms: list[str], pooled: TermStats | None = None) -> np.ndarray:
        if not terms:
            return np.zeros(len(self.rows.ids), np.float32)
        idf = None if pooled is None else {t: pooled.idf(t) for t in set(terms)}
        return self.rows.scatter(self.chunks.file_answer(terms, idf).files, 0.0)


def answer_together(lanes: list[IndexedBM25], terms: list[str], *, chunk_idf: dict[str, float] | None = None,
                    file_idf: dict[str, float] | None = None) -> None:
    """Ask the stores of `lanes` (repositories searched as one) for `terms` with these IDF in one statement
    per database, instead of one per repository, and keep each answer in its lane."""
    for lane, found in zip(lanes, lanes[0].store.term_scores_of([lane.store for lane in lanes], terms,
                                                                  R.INDEXED_LEXICAL_DEPTH, R.BM25_K1, R.BM25_B,
                                                                  chunk_idf=chunk_idf, file_idf=file_idf),
                           strict=True):
        lane.keep(terms, found, chunk_idf=chunk_idf, file_idf=file_idf)


def _terms_key(terms: list[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(Counter(terms).items()))


def _idf_key(idf: dict[str, float] | None) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((idf or {}).items()))
