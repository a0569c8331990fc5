"""The dense lane: chunk and file-skeleton vectors in memory as the store keeps them (int8 with a per-row
scale), scored by cosine against the query's vector with an int8 matrix product."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from codeloupe import ranking as R
from codeloupe.lanes.indexed_dense import IndexedDense, load_indexed_dense
from codeloupe.memory import release_freed_memory
from codeloupe.store import ChunkTable, VectorMatrix
from codeloupe.store.protocol import IndexStore, NearestChunks


@dataclass
class Int8Vectors:
    """Rows of int8 vectors with a float32 scale each, stored transposed ([d, n]) for the product below.

    A quarter of the memory of float32 rows, and a quarter of the bytes a query reads: at 200K chunks the
    float32 product was bound by memory bandwidth."""

    transposed: np.ndarray  # int8 [d, n]
    scales: np.ndarray  # float32 [n]
    offsets: np.ndarray  # int32 [n]: _QUERY_OFFSET x each vector's sum of components (see `dot`)

    @classmethod
    def stacked(cls, parts: list[tuple[VectorMatrix, np.ndarray | None]]) -> Int8Vectors:
        """The vectors of several matrices (each at its `rows`, when given) one after another in one matrix,
        written in place: a query then reads them all in one product per half of the query."""
        sizes = [len(matrix.ids) if rows is None else len(rows) for matrix, rows in parts]
        transposed = np.zeros((max((m.dim for m, _ in parts), default=0), sum(sizes)), np.int8)
        scales, offsets = [np.zeros(0, np.float32)], [np.zeros(0, np.int32)]
        at = 0
        for (matrix, rows), size in zip(parts, sizes):
            q = matrix.q if rows is None else matrix.q[rows]
            if size:
                transposed[:, at:at + size] = q.T
            scales.append((matrix.scales if rows is None else matrix.scales[rows]).astype(np.float32))
            offsets.append(_QUERY_OFFSET * q.sum(axis=1, dtype=np.int32))
            at += size
        return cls(transposed, np.concatenate(scales), np.concatenate(offsets))

    def __len__(self) -> int:
        return len(self.scales)

    def dot(self, qvec: np.ndarray) -> np.ndarray:
        """float32 [n]: each row's dot product with `qvec` (float32 [d]).

        The query is split into two 7-bit vectors, `hi` and the rounding it leaves, `lo` (about 12 bits of the
        query's precision together; `hi` alone moved one top-10 hit in three queries on random vectors), each
        a matrix-vector product in onnxruntime's int8 kernel (a two-row product takes a path 5x slower than
        two one-row ones). The kernel's fast path takes unsigned activations, so the query is offset by
        `_QUERY_OFFSET` and that times each row's component sum is taken back off (exact in int32).

        Seven bits, not eight: on x86 processors without VNNI (AVX2, AVX-512 before Cascade Lake, AMD before
        Zen 4) the kernel adds each pair of uint8 x int8 products in int16 with saturation, which an 8-bit
        query overflows (255 x 127 x 2 > 32767: scores off by up to ~90,000 in the int32 result, seen on an
        AMD EPYC). 127 x 128 x 2 fits, so the product is exact on every processor."""
        if len(self.scales) == 0:
            return np.zeros(0, np.float32)
        out = np.zeros(len(self.scales), np.float32)
        rest = np.asarray(qvec, np.float32)
        for _ in range(2):
            scale = _query_scale(rest)
            part = np.rint(rest / scale)
            raw = _int8_gemv().run(None, {"query": (part + _QUERY_OFFSET).astype(np.uint8)[None, :],
                                          "rows": self.transposed})[0][0]
            raw -= self.offsets
            out += raw.astype(np.float32) * np.float32(scale)
            rest = rest - part * scale
        out *= self.scales
        return out


# A query part's components lie in [-_QUERY_PEAK, _QUERY_PEAK], offset into [1, 127] (see `Int8Vectors.dot`).
_QUERY_PEAK = 63
_QUERY_OFFSET = 64


def _query_scale(vector: np.ndarray) -> float:
    peak = float(np.abs(vector).max()) if vector.size else 0.0
    return peak / _QUERY_PEAK if peak > 0 else 1.0


@functools.cache
def _int8_gemv():
    """One onnxruntime session computing uint8 [1, d] x int8 [d, n] -> int32 [1, n] (MatMulInteger).

    onnxruntime is already how the embedding model runs; its int8 kernels are what numpy lacks (numpy's
    integer matmul is a plain loop, 10x slower than the float32 product it would replace). One thread: a
    query's other lanes and the background indexer share the cores."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["query", "rows"], ["scores"])], "int8_dot",
        [helper.make_tensor_value_info("query", TensorProto.UINT8, [1, None]),
         helper.make_tensor_value_info("rows", TensorProto.INT8, [None, None])],
        [helper.make_tensor_value_info("scores", TensorProto.INT32, [1, None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@dataclass
class DenseSnapshot:
    generation: int
    model: str
    chunk_rows: np.ndarray  # int64 [m]: rows of the chunk table that have a vector
    vectors: Int8Vectors  # [m + f]: the chunks' vectors, then the file skeletons'
    chunk_skeleton: np.ndarray  # int64 [m]: for each chunk vector, its file's skeleton among the f, or -1
    coverage: float
    snapshot_generation: int  # the full snapshot whose rows `chunk_rows` index

    def scores(self, qvec: np.ndarray, n_rows: int) -> np.ndarray:
        """Cosine of each chunk plus SKELETON_WEIGHT x its file skeleton's cosine; -inf for rows with no vector.

        Chunks and skeletons are one matrix, read by one int8 product per half of the query (two kernel calls,
        not four); nothing here loops over chunks in Python."""
        scores = np.full(n_rows, -np.inf, np.float32)
        m = len(self.chunk_rows)
        cosines = self.vectors.dot(qvec)
        chunk_scores = cosines[:m]
        if len(cosines) > m:
            file_sim = np.append(cosines[m:], np.float32(0.0))  # row -1: no skeleton
            chunk_scores += R.SKELETON_WEIGHT * file_sim[self.chunk_skeleton]
        scores[self.chunk_rows] = chunk_scores
        return scores


def load_dense(store: IndexStore, table: ChunkTable, snapshot_generation: int, model: str,
               generation: int) -> DenseSnapshot | IndexedDense:
    """The store's int8 vectors of `model` for the rows of `table`, kept int8."""
    if isinstance(store, NearestChunks):  # the database searches its own vector index
        return load_indexed_dense(store, table, snapshot_generation, model, generation)
    chunks = store.vector_matrix("chunk", model)
    skeletons = store.vector_matrix("skeleton", model)
    ids = table.ids  # sorted (the store returns chunks by id)
    pos = np.minimum(np.searchsorted(ids, chunks.ids), max(len(ids) - 1, 0))
    live = (ids[pos] == chunks.ids) if len(ids) else np.zeros(len(chunks.ids), bool)
    src, rows = np.flatnonzero(live), pos[live]
    dense = DenseSnapshot(
        generation=generation, model=model, chunk_rows=rows.astype(np.int64),
        vectors=Int8Vectors.stacked([(chunks, None if len(src) == len(chunks.ids) else src), (skeletons, None)]),
        chunk_skeleton=_skeleton_rows(table.file_ids[rows], skeletons.ids),
        coverage=(len(rows) / len(ids)) if len(ids) else 1.0, snapshot_generation=snapshot_generation,
    )
    release_freed_memory()  # the store's pages of vectors, read before being stacked
    return dense


def _skeleton_rows(chunk_file_ids: np.ndarray, skeleton_file_ids: np.ndarray) -> np.ndarray:
    """For each chunk's file id, the row of that file's skeleton vector (ids are sorted), or -1."""
    if len(skeleton_file_ids) == 0:
        return np.full(len(chunk_file_ids), -1, np.int64)
    pos = np.searchsorted(skeleton_file_ids, chunk_file_ids)
    pos = np.minimum(pos, len(skeleton_file_ids) - 1)
    return np.where(skeleton_file_ids[pos] == chunk_file_ids, pos, -1)
