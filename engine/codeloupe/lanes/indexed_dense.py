"""The dense lane of a store that searches its vectors itself (PostgreSQL + pgvector's HNSW): nothing but which
rows have a vector is held in memory, and each query asks the store for its LANE_DEPTH best chunks, scored as
the in-process lane scores them (`DenseSnapshot.scores`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codeloupe import ranking as R
from codeloupe.store import ChunkTable
from codeloupe.store.protocol import NearestChunks


@dataclass
class IndexedDense:
    generation: int
    model: str
    store: NearestChunks
    table_ids: np.ndarray  # int64 [n]: the snapshot's chunk ids, sorted
    chunk_rows: np.ndarray  # int64 [m]: rows of the chunk table that have a vector
    coverage: float
    snapshot_generation: int

    def scores(self, qvec: np.ndarray, n_rows: int) -> np.ndarray:
        """The store's best chunks' scores at their rows; -inf everywhere else."""
        scores = np.full(n_rows, -np.inf, np.float32)
        found = self.store.nearest_chunks(self.model, qvec, R.LANE_DEPTH, R.SKELETON_WEIGHT)
        if found and len(self.table_ids):
            ids = np.array([chunk_id for chunk_id, _ in found], dtype=np.int64)
            pos = np.minimum(np.searchsorted(self.table_ids, ids), len(self.table_ids) - 1)
            known = self.table_ids[pos] == ids  # a chunk newer than the snapshot is not one of its rows
            scores[pos[known]] = np.array([score for _, score in found], np.float32)[known]
        return scores


def load_indexed_dense(store: NearestChunks, table: ChunkTable, snapshot_generation: int, model: str,
                       generation: int) -> IndexedDense:
    with_vectors = store.vector_matrix_ids("chunk", model)
    ids = table.ids  # sorted (the store returns chunks by id)
    pos = np.minimum(np.searchsorted(ids, with_vectors), max(len(ids) - 1, 0))
    rows = pos[ids[pos] == with_vectors] if len(ids) else np.zeros(0, np.int64)
    return IndexedDense(generation=generation, model=model, store=store, table_ids=ids,
                        chunk_rows=rows.astype(np.int64), coverage=(len(rows) / len(ids)) if len(ids) else 1.0,
                        snapshot_generation=snapshot_generation)
