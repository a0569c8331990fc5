"""The dense lane: chunk and file-skeleton vectors in memory, scored by cosine against the query's vector."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codeloupe import ranking as R
from codeloupe.lanes.indexed_dense import IndexedDense, load_indexed_dense
from codeloupe.store import ChunkTable
from codeloupe.store.protocol import IndexStore, NearestChunks


@dataclass
class DenseSnapshot:
    generation: int
    model: str
    chunk_rows: np.ndarray  # int64 [m]: rows of the chunk table that have a vector
    chunk_vectors: np.ndarray  # float32 [m, d]
    skeleton_vectors: np.ndarray  # float32 [f, d]
    chunk_skeleton: np.ndarray  # int64 [m]: for each vector row, its file's row in skeleton_vectors, or -1
    coverage: float
    snapshot_generation: int  # the full snapshot whose rows `chunk_rows` index

    def scores(self, qvec: np.ndarray, n_rows: int) -> np.ndarray:
        """Cosine of each chunk plus SKELETON_WEIGHT x its file skeleton's cosine; -inf for rows with no vector.

        One float32 matrix-vector product per matrix: nothing here loops over chunks in Python."""
        scores = np.full(n_rows, -np.inf, np.float32)
        chunk_scores = self.chunk_vectors @ qvec
        if len(self.skeleton_vectors):
            file_sim = np.append(self.skeleton_vectors @ qvec, np.float32(0.0))  # row -1: no skeleton
            chunk_scores += R.SKELETON_WEIGHT * file_sim[self.chunk_skeleton]
        scores[self.chunk_rows] = chunk_scores
        return scores


def load_dense(store: IndexStore, table: ChunkTable, snapshot_generation: int, model: str,
               generation: int) -> DenseSnapshot | IndexedDense:
    """The store's int8 vectors of `model` for the rows of `table`, dequantised once into float32 matrices."""
    if isinstance(store, NearestChunks):  # the database searches its own vector index
        return load_indexed_dense(store, table, snapshot_generation, model, generation)
    chunks = store.vector_matrix("chunk", model)
    skeletons = store.vector_matrix("skeleton", model)
    ids = table.ids  # sorted (the store returns chunks by id)
    pos = np.minimum(np.searchsorted(ids, chunks.ids), max(len(ids) - 1, 0))
    live = (ids[pos] == chunks.ids) if len(ids) else np.zeros(len(chunks.ids), bool)
    src, rows = np.flatnonzero(live), pos[live]
    dim = max(chunks.dim, skeletons.dim, 1)
    vectors = chunks.q[src].astype(np.float32) * chunks.scales[src, None] if len(src) else np.zeros((0, dim), np.float32)
    skel = skeletons.q.astype(np.float32) * skeletons.scales[:, None] if len(skeletons.ids) else \
        np.zeros((0, dim), np.float32)
    return DenseSnapshot(
        generation=generation, model=model, chunk_rows=rows.astype(np.int64),
        chunk_vectors=np.ascontiguousarray(vectors), skeleton_vectors=np.ascontiguousarray(skel),
        chunk_skeleton=_skeleton_rows(table.file_ids[rows], skeletons.ids),
        coverage=(len(rows) / len(ids)) if len(ids) else 1.0, snapshot_generation=snapshot_generation,
    )


def _skeleton_rows(chunk_file_ids: np.ndarray, skeleton_file_ids: np.ndarray) -> np.ndarray:
    """For each chunk's file id, the row of that file's skeleton vector (ids are sorted), or -1."""
    if len(skeleton_file_ids) == 0:
        return np.full(len(chunk_file_ids), -1, np.int64)
    pos = np.searchsorted(skeleton_file_ids, chunk_file_ids)
    pos = np.minimum(pos, len(skeleton_file_ids) - 1)
    return np.where(skeleton_file_ids[pos] == chunk_file_ids, pos, -1)
