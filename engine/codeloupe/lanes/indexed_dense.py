"""The dense lane of a store that searches its vectors itself (PostgreSQL + pgvector's HNSW): nothing but which
rows have a vector is held in memory, and each query asks the store for its LANE_DEPTH best chunks, scored as
the in-process lane scores them (`DenseSnapshot.scores`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from codeloupe import ranking as R
from codeloupe.arrays import find_sorted
from codeloupe.lanes.indexed_lexical import IdRows
from codeloupe.store import ChunkTable
from codeloupe.store.protocol import NearestChunks

_ANSWERS_KEPT = 8


@dataclass
class IndexedDense:
    generation: int
    model: str
    store: NearestChunks
    table_rows: IdRows  # the snapshot's chunk ids -> rows
    chunk_rows: np.ndarray  # int64 [m]: rows of the chunk table that have a vector
    coverage: float
    snapshot_generation: int
    # The last few query vectors' answers (these vectors only: a newer generation is a new IndexedDense): a
    # search across repositories asks each repository the same vector once per pass.
    _answers: dict[bytes, np.ndarray] = field(default_factory=dict, repr=False)

    def scores(self, qvec: np.ndarray, n_rows: int) -> np.ndarray:
        """The store's best chunks' scores at their rows; -inf everywhere else."""
        key = np.asarray(qvec, np.float32).tobytes()
        found = self._answers.get(key)
        if found is None:
            found = self.table_rows.scatter(
                self.store.nearest_chunks(self.model, qvec, R.LANE_DEPTH, R.SKELETON_WEIGHT), -np.inf)
            if len(self._answers) >= _ANSWERS_KEPT:
                self._answers.clear()
            self._answers[key] = found
        scores = np.full(n_rows, -np.inf, np.float32)  # a delta view's rows past the snapshot's have no vector
        scores[:len(found)] = found
        return scores


def load_indexed_dense(store: NearestChunks, table: ChunkTable, snapshot_generation: int, model: str,
                       generation: int) -> IndexedDense:
    with_vectors = store.vector_matrix_ids("chunk", model)
    ids = table.ids  # sorted (the store returns chunks by id)
    pos, found = find_sorted(ids, with_vectors)
    rows = pos[found]
    return IndexedDense(generation=generation, model=model, store=store, table_rows=IdRows(ids),
                        chunk_rows=rows.astype(np.int64), coverage=(len(rows) / len(ids)) if len(ids) else 1.0,
                        snapshot_generation=snapshot_generation)
