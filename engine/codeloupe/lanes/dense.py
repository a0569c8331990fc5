"""The dense lane: chunk and file-skeleton vectors in memory as the store keeps them (int8 with a per-row
scale), scored by cosine against the query's vector with an int8 matrix product."""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from codeloupe import ranking as R
from codeloupe.arrays import find_sorted
from codeloupe.lanes.indexed_dense import IndexedDense, load_indexed_dense
from codeloupe.memory import release_freed_memory
from codeloupe.saved import load_arrays, save_arrays
from codeloupe.store import ChunkTable, VectorMatrix
from codeloupe.store.protocol import IndexStore, NearestChunks

log = logging.getLogger("codeloupe.dense")

# Rows a block of the transposed matrix holds: one product call reads one block (12 MB at 384 dimensions), so
# two threads can share a query's product (`PendingScores`) and a block stays a contiguous [d, BLOCK_ROWS] array.
BLOCK_ROWS = 32768


@dataclass
class Int8Vectors:
    """Rows of int8 vectors with a float32 scale each, held block by block inside onnxruntime sessions (see
    `_BlockProduct`) for the product below.

    A quarter of the memory of float32 rows, and a quarter of the bytes a query reads: at 200K chunks the
    float32 product was bound by memory bandwidth."""

    blocks: list[_BlockProduct]  # BLOCK_ROWS rows each, the last one as many as are left
    scales: np.ndarray  # float32 [n]
    offsets: np.ndarray  # int32 [n]: _QUERY_OFFSET x each vector's sum of components (see `dot_runs`)

    @classmethod
    def stacked(cls, parts: list[tuple[VectorMatrix, np.ndarray | None]]) -> Int8Vectors:
        """The vectors of several matrices (each at its `rows`, when given) one after another in one matrix,
        written in place block by block, each block then handed to its session: a query then reads them all in
        one product per block."""
        sizes = [len(matrix.ids) if rows is None else len(rows) for matrix, rows in parts]
        total, dim = sum(sizes), max((m.dim for m, _ in parts), default=0)
        blocks = [np.zeros((dim, min(BLOCK_ROWS, total - start)), np.int8) for start in range(0, total, BLOCK_ROWS)]
        scales, offsets = np.zeros(total, np.float32), np.zeros(total, np.int32)
        at = 0
        for (matrix, rows), size in zip(parts, sizes):
            q = matrix.q if rows is None else matrix.q[rows]
            scales[at:at + size] = matrix.scales if rows is None else matrix.scales[rows]
            offsets[at:at + size] = _QUERY_OFFSET * q.sum(axis=1, dtype=np.int32)
            done = 0
            while done < size:  # the part's rows block by block
                block, column = divmod(at + done, BLOCK_ROWS)
                take = min(size - done, BLOCK_ROWS - column)
                blocks[block][:, column:column + take] = q[done:done + take].T
                done += take
            at += size
        products = []
        while blocks:  # each block let go once its session holds it: a block more at a time, not a matrix more
            products.append(_BlockProduct.over(blocks.pop(0)))
        return cls(products, scales, offsets)

    def __len__(self) -> int:
        return len(self.scales)

    def dot(self, qvec: np.ndarray) -> np.ndarray:
        """float32 [n]: each row's dot product with `qvec` (float32 [d])."""
        return _joined([run() for run in self.dot_runs(qvec)])

    def dot_runs(self, qvec: np.ndarray) -> list[Callable[[], np.ndarray]]:
        """`dot` as one call per block, each needing no Python while it runs (onnxruntime lets go of the GIL),
        so that other threads can make them while this one goes on: their results, joined, are `dot`'s.

        The query is split into two 7-bit vectors, `hi` and the rounding it leaves, `lo` (about 12 bits of the
        query's precision together; `hi` alone moved one top-10 hit in three queries on random vectors), the
        two rows of one product in onnxruntime's int8 kernel, with the scaling that follows in the same graph.
        The kernel's fast path takes unsigned activations, so the query is offset by `_QUERY_OFFSET` and that
        times each row's component sum is taken back off (exact in int32).

        Seven bits, not eight: on x86 processors without VNNI (AVX2, AVX-512 before Cascade Lake, AMD before
        Zen 4) the kernel adds each pair of uint8 x int8 products in int16 with saturation, which an 8-bit
        query overflows (255 x 127 x 2 > 32767: scores off by up to ~90,000 in the int32 result, seen on an
        AMD EPYC). 127 x 128 x 2 fits, so the product is exact on every processor."""
        parts, part_scales = [], []
        rest = np.asarray(qvec, np.float32)
        for _ in ("hi", "lo"):
            scale = _query_scale(rest)
            part = np.rint(rest / scale)
            parts.append(part + _QUERY_OFFSET)
            part_scales.append(scale)
            rest = rest - part * scale
        query = {"query": np.stack(parts).astype(np.uint8), "part_scales": np.array(part_scales, np.float32)[:, None]}

        def run(block: int) -> np.ndarray:
            columns = slice(block * BLOCK_ROWS, block * BLOCK_ROWS + self.blocks[block].width)
            return self.blocks[block].session.run(None, {**query, "offsets": self.offsets[columns],
                                                         "row_scales": self.scales[columns]})[0][0]

        return [functools.partial(run, block) for block in range(len(self.blocks))]


def _joined(products: list[np.ndarray]) -> np.ndarray:
    """The blocks' products as one row of scores."""
    return np.concatenate(products) if products else np.zeros(0, np.float32)


# A query part's components lie in [-_QUERY_PEAK, _QUERY_PEAK], offset into [1, 127] (see `Int8Vectors.dot_runs`).
_QUERY_PEAK = 63
_QUERY_OFFSET = 64


def _query_scale(vector: np.ndarray) -> float:
    peak = float(np.abs(vector).max()) if vector.size else 0.0
    return peak / _QUERY_PEAK if peak > 0 else 1.0


@dataclass
class _BlockProduct:
    """One block of rows (int8 [d, width]) as the constant of an onnxruntime session of its own computing
    ((hi x rows - offsets) hi_scale + (lo x rows - offsets) lo_scale) row_scales: uint8 [2, d] x int8 [d, n]
    (MatMulInteger) -> float32 [1, n], in the order of float32 steps the same product in numpy took.

    A constant matrix is packed once, when the session is made, into the kernel's own layout (onnxruntime's
    pre-packing); given as an input it was packed again by every product, and read once per query part: at
    200K chunks the two passes took 9.6 ms a query, the packed product of both parts 5.3 ms (same machine).
    onnxruntime copies a constant given this way into the session (`add_external_initializers`: the caller's
    buffer may be freed once the session is made), so the block is let go of, the memory staying about that
    of one matrix. onnxruntime is already how the embedding model runs; its int8 kernels are what numpy lacks
    (numpy's integer matmul is a plain loop, 10x slower than the float32 product it would replace). One
    thread: a query's other lanes and the background indexer share the cores."""

    session: object  # onnxruntime.InferenceSession
    width: int

    @classmethod
    def over(cls, block: np.ndarray) -> _BlockProduct:
        return cls(_block_session(block), block.shape[1])


def _block_session(block: np.ndarray) -> object:
    """The session computing `_BlockProduct`'s scores over `block`, which it holds a copy of."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    rows = TensorProto(name="rows", data_type=TensorProto.INT8, dims=block.shape,
                       data_location=TensorProto.EXTERNAL)
    # The constant's bytes come from `block` (add_external_initializers), not from the model: no second copy
    # of them is serialised and parsed.
    for key, value in (("location", "rows"), ("offset", "0"), ("length", str(block.size))):
        rows.external_data.add(key=key, value=value)
    nodes = [helper.make_node("MatMulInteger", ["query", "rows"], ["raw"]),
             helper.make_node("Sub", ["raw", "offsets"], ["exact"]),
             helper.make_node("Cast", ["exact"], ["exact_float"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["exact_float", "part_scales"], ["parts"]),
             helper.make_node("Split", ["parts"], ["hi_dot", "lo_dot"], axis=0),
             helper.make_node("Add", ["hi_dot", "lo_dot"], ["dot"]),
             helper.make_node("Mul", ["dot", "row_scales"], ["scores"])]
    graph = helper.make_graph(
        nodes, "int8_dot",
        [helper.make_tensor_value_info("query", TensorProto.UINT8, [2, block.shape[0]]),
         helper.make_tensor_value_info("part_scales", TensorProto.FLOAT, [2, 1]),
         helper.make_tensor_value_info("offsets", TensorProto.INT32, [block.shape[1]]),
         helper.make_tensor_value_info("row_scales", TensorProto.FLOAT, [block.shape[1]])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, block.shape[1]])], initializer=[rows])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False  # its arena kept the constant's copy, freed once packed, for reuse (8 MB)
    options.add_external_initializers(["rows"], [ort.OrtValue.ortvalue_from_numpy(block)])
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
    # `chunk_skeleton` as runs of one value (a file's chunks are rows next to each other): its values and lengths
    _skeleton_runs: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)
    _every_row: bool = field(init=False, repr=False)  # `chunk_rows` is every row in order: scores need no scatter

    def __post_init__(self) -> None:
        m = len(self.chunk_skeleton)
        starts = np.flatnonzero(np.diff(self.chunk_skeleton)) + 1 if m else np.zeros(0, np.int64)
        starts = np.concatenate([np.zeros(min(m, 1), np.int64), starts])
        self._skeleton_runs = (self.chunk_skeleton[starts], np.diff(np.append(starts, m)))
        self._every_row = bool(np.array_equal(self.chunk_rows, np.arange(len(self.chunk_rows))))

    def scores(self, qvec: np.ndarray, n_rows: int) -> np.ndarray:
        """Cosine of each chunk plus SKELETON_WEIGHT x its file skeleton's cosine; -inf for rows with no vector.

        Chunks and skeletons are one matrix, read by one graph run per block of rows (both halves of the query
        in it); nothing here loops over chunks in Python."""
        return self._chunk_scores(self.vectors.dot(qvec), n_rows)

    def scores_later(self, embed: Callable[[], np.ndarray | None], n_rows: int) -> PendingScores:
        """`scores` of each vector `embed` returns (None: no query vector, no scores), on a thread of its own
        started now, which first calls `embed` (the query's model runs there too)."""
        return PendingScores(self, embed, n_rows)

    def _chunk_scores(self, cosines: np.ndarray, n_rows: int) -> np.ndarray:
        # Each file's weighted skeleton cosine repeated over its run of chunks, not gathered chunk by chunk, and
        # no scatter where every row has a vector: at 200K chunks 1.8 -> 0.5 ms of the searching thread's wait.
        m = len(self.chunk_rows)
        chunk_scores = cosines[:m]
        if len(cosines) > m:
            file_sim = np.append(cosines[m:], np.float32(0.0))  # row -1: no skeleton
            values, lengths = self._skeleton_runs
            chunk_scores += np.repeat((R.SKELETON_WEIGHT * file_sim)[values], lengths)
        if self._every_row and m == n_rows:
            return chunk_scores
        scores = np.full(n_rows, -np.inf, np.float32)
        scores[self.chunk_rows] = chunk_scores
        return scores


class PendingScores:
    """A `DenseSnapshot`'s scores of a query, made by a thread of its own from now: it embeds the query (in
    onnxruntime, which lets go of the GIL), then makes the products (one call per block of rows); once the
    caller asks for the scores it makes what is left of the products too. A search scores its word lanes
    meanwhile: at 200K chunks embedding and product outlast them, so neither the model nor the product is
    waited for whole on the search's own thread."""

    def __init__(self, dense: DenseSnapshot, embed: Callable[[], np.ndarray | None], n_rows: int) -> None:
        self._dense, self._embed, self._n_rows = dense, embed, n_rows
        self._per_query: list[int] = []
        self._runs: list[Callable[[], np.ndarray]] = []
        self._products: list[np.ndarray | None] = []
        self._next = itertools.count()  # the next run to make, whichever thread asks (atomic under the GIL)
        self._embedded = threading.Event()  # the runs are known (or embedding failed: none)
        self._failed: list[BaseException] = []
        self.cpu_ms = 0.0  # the thread's CPU time (embedding and products), for whoever counts a search's CPU
        self.embed_ms = 0.0  # the thread's wall time embedding the query
        self._thread = threading.Thread(target=self._work, name="dense-lane", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        started, wall = time.thread_time(), time.perf_counter()
        try:
            vectors = self._embed()
            self.embed_ms = (time.perf_counter() - wall) * 1000
            runs = [] if vectors is None else [self._dense.vectors.dot_runs(q) for q in vectors]
            self._per_query = [len(r) for r in runs]
            self._runs = [run for query_runs in runs for run in query_runs]
            self._products = [None] * len(self._runs)
        except BaseException as exc:  # handed to the caller of `result`, which raises it
            self._failed.append(exc)
        finally:
            self._embedded.set()
        self._make_runs()
        self.cpu_ms = (time.thread_time() - started) * 1000

    def _make_runs(self) -> None:
        try:
            while (i := next(self._next)) < len(self._runs):
                self._products[i] = self._runs[i]()
        except BaseException as exc:  # handed to the caller of `result`, which raises it
            self._failed.append(exc)

    def result(self) -> list[np.ndarray]:
        """Each query vector's scores ([] when `embed` gave none): waits for the embedding, makes the runs
        nobody has started, waits for the rest; raises what any of them raised."""
        self._embedded.wait()
        self._make_runs()
        self._thread.join()
        if self._failed:
            raise self._failed[0]
        out, at = [], 0
        for count in self._per_query:
            products = self._products[at:at + count]
            at += count
            out.append(self._dense._chunk_scores(_joined(products), self._n_rows))
        return out


def load_dense(store: IndexStore, table: ChunkTable, snapshot_generation: int, model: str,
               generation: int) -> DenseSnapshot | IndexedDense:
    """The store's int8 vectors of `model` for the rows of `table`, kept int8."""
    if isinstance(store, NearestChunks):
        kept = _vectors_kept_beside(store, model, generation)
        if kept is None:  # the database searches its own vector index
            return load_indexed_dense(store, table, snapshot_generation, model, generation)
        chunks, skeletons = kept
    else:
        chunks, skeletons = store.vector_matrix("chunk", model), store.vector_matrix("skeleton", model)
    ids = table.ids  # sorted (the store returns chunks by id)
    pos, live = find_sorted(ids, chunks.ids)
    src, rows = np.flatnonzero(live), pos[live]
    dense = DenseSnapshot(
        generation=generation, model=model, chunk_rows=rows.astype(np.int64),
        vectors=Int8Vectors.stacked([(chunks, None if len(src) == len(chunks.ids) else src), (skeletons, None)]),
        chunk_skeleton=_skeleton_rows(table.file_ids[rows], skeletons.ids),
        coverage=(len(rows) / len(ids)) if len(ids) else 1.0, snapshot_generation=snapshot_generation,
    )
    release_freed_memory()  # the store's pages of vectors, read before being stacked
    return dense


def _vectors_kept_beside(store: NearestChunks, model: str, generation: int
                         ) -> tuple[VectorMatrix, VectorMatrix] | None:
    """A database's repository's chunk and skeleton vectors of `model` as of vector `generation`, or None when it
    holds too many for a process (`searches_vectors_itself`): the copy saved beside its index for that state (or
    kept in the database by another process: `codeloupe.saved`), else read from its tables and saved, so that a
    process's first search of it, or another replica's, reads one file rather than every vector row."""
    assert isinstance(store, IndexStore)
    path = store.path.with_name(store.path.name + ".vectors.npz")
    stamp = f"{store.index_id}:{generation}:{model}"
    arrays = load_arrays(path, stamp)
    if arrays is not None:
        try:
            return _checked_matrix(arrays, "chunk"), _checked_matrix(arrays, "skeleton")
        except ValueError as exc:
            log.info("ignoring the saved vectors %s (%s); reading them again", path, exc)
    if store.searches_vectors_itself(model):
        return None
    chunks, skeletons = store.vector_matrix("chunk", model), store.vector_matrix("skeleton", model)
    if store.generation("vector") == generation:  # nothing was written while they were read
        try:
            save_arrays(path, stamp, {f"{table}_{name}": getattr(matrix, name) for table, matrix in
                                      (("chunk", chunks), ("skeleton", skeletons)) for name in ("ids", "q", "scales")})
        except OSError as exc:
            log.warning("could not save the vectors to %s: %s", path, exc)
    return chunks, skeletons


def _checked_matrix(arrays: dict[str, np.ndarray], table: str) -> VectorMatrix:
    ids, q, scales = (arrays[f"{table}_{name}"] for name in ("ids", "q", "scales"))
    if ids.dtype != np.int64 or q.dtype != np.int8 or scales.dtype != np.float32 or q.ndim != 2 or \
            ids.shape != (len(q),) or scales.shape != (len(q),) or (len(ids) > 1 and not (np.diff(ids) > 0).all()):
        raise ValueError(f"saved {table} vectors that do not fit together")
    return VectorMatrix(ids, q, scales)


def _skeleton_rows(chunk_file_ids: np.ndarray, skeleton_file_ids: np.ndarray) -> np.ndarray:
    """For each chunk's file id, the row of that file's skeleton vector (ids are sorted), or -1."""
    if len(skeleton_file_ids) == 0:
        return np.full(len(chunk_file_ids), -1, np.int64)
    pos = np.searchsorted(skeleton_file_ids, chunk_file_ids)
    pos = np.minimum(pos, len(skeleton_file_ids) - 1)
    return np.where(skeleton_file_ids[pos] == chunk_file_ids, pos, -1)
