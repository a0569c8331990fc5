"""The dense lane keeps the store's int8 vectors in memory and scores them with an int8 product: it must rank
as the float32 product of the same (dequantised) vectors does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codeloupe import ranking as R
from codeloupe.lanes.dense import DenseSnapshot, Int8Vectors, load_dense
from codeloupe.store import Store, VectorMatrix, quantize
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton


def _unit_rows(rng: np.random.Generator, n: int, dim: int = 384) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_int8_scores_equal_the_float32_product_of_the_same_vectors_and_rank_identically() -> None:
    rng = np.random.default_rng(7)
    q, scales = quantize(_unit_rows(rng, 5000))
    vectors = Int8Vectors.stacked([(VectorMatrix(np.arange(5000), q, scales), None)])
    dequantised = q.astype(np.float32) * scales[:, None]
    for query in _unit_rows(rng, 25):
        expected, got = dequantised @ query, vectors.dot(query)
        assert np.abs(got - expected).max() < 1e-4
        assert np.argsort(-got, kind="stable")[:10].tolist() == np.argsort(-expected, kind="stable")[:10].tolist()


def test_the_packed_product_takes_the_float32_steps_of_the_exact_integer_products_bit_for_bit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each block is a constant packed into its session and both halves of the query are one product: the
    scores are still (hi . row) hi_scale + (lo . row) lo_scale, times the row's scale, each step in float32 over
    the exact integer products, whatever block a row is in."""
    import codeloupe.lanes.dense as dense_module

    monkeypatch.setattr(dense_module, "BLOCK_ROWS", 700)  # 2,000 rows: two whole blocks and a partial one
    rng = np.random.default_rng(13)
    q, scales = quantize(_unit_rows(rng, 2000))
    vectors = Int8Vectors.stacked([(VectorMatrix(np.arange(2000), q, scales), None)])
    # The blocks were let go of once their sessions were made (onnxruntime copies a constant given as an
    # external initializer): memory of their size, reused and overwritten now, must not reach the scores.
    overwritten = [np.full((384, 700), 99, np.int8) for _ in range(8)]
    for query in _unit_rows(rng, 5):
        hi_scale = np.float32(np.abs(query).max() / 63)
        hi = np.rint(query / hi_scale)
        rest = query - hi * hi_scale
        lo_scale = np.float32(np.abs(rest).max() / 63)
        lo = np.rint(rest / lo_scale)
        exact = [q.astype(np.int64) @ part.astype(np.int64) for part in (hi, lo)]
        expected = (exact[0].astype(np.float32) * hi_scale + exact[1].astype(np.float32) * lo_scale) * scales
        assert np.array_equal(vectors.dot(query), expected)
    assert all((block == 99).all() for block in overwritten)


def test_the_product_is_exact_where_the_kernel_adds_pairs_in_int16() -> None:
    """The largest products the kernel can meet: rows of +-127 against a query whose components are all at
    its peak. x86 kernels without VNNI add pairs of uint8 x int8 products in int16 with saturation; an 8-bit
    query overflowed there (scores off by thousands on an AMD EPYC)."""
    dim = 384
    q = np.where(np.arange(4)[:, None] % 2 == 0, 127, -127) * np.ones((4, dim), np.int8)
    q[3, ::2] = -127
    scales = np.full(4, 1 / (127 * np.sqrt(dim)), np.float32)
    vectors = Int8Vectors.stacked([(VectorMatrix(np.arange(4), q.astype(np.int8), scales), None)])
    for query in (np.ones(dim, np.float32) / np.sqrt(dim), -np.ones(dim, np.float32) / np.sqrt(dim)):
        expected = (q.astype(np.float32) * scales[:, None]) @ query
        assert np.abs(vectors.dot(query) - expected).max() < 1e-5


def test_a_subset_of_rows_and_an_empty_matrix() -> None:
    rng = np.random.default_rng(3)
    q, scales = quantize(_unit_rows(rng, 50))
    rows = np.array([4, 9, 31])
    query = _unit_rows(rng, 1)[0]
    got = Int8Vectors.stacked([(VectorMatrix(np.arange(50), q, scales), rows)]).dot(query)
    assert np.allclose(got, (q[rows].astype(np.float32) * scales[rows, None]) @ query, atol=1e-4)
    empty = Int8Vectors.stacked([(VectorMatrix(np.zeros(0, np.int64), np.zeros((0, 0), np.int8),
                                                 np.zeros(0, np.float32)), None)])
    assert len(empty) == 0 and empty.dot(query).shape == (0,)


def test_scores_from_the_store_match_float32_cosines_with_skeletons_and_rows_without_vectors(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.sqlite")
    for f in range(4):
        rel = f"pkg/m{f}.py"
        chunks = [Chunk(i * 2 + 1, i * 2 + 2, "function", f"f{i}", rel, f"def f{i}():\n    return {f}\n")
                  for i in range(5)]
        store.replace_file(ChunkedFile(rel, "python", chunks, [], FileSkeleton(rel, rel)), hash=rel, size=1,
                           mtime=1.0, is_doc=False, encoding="utf-8", chunker_version=1, line_count=10)
    table = store.chunk_table()
    file_ids = sorted({int(f) for f in table.file_ids})
    rng = np.random.default_rng(11)
    embedded = table.ids[::2]  # half the chunks have a vector so far; one file has no skeleton vector
    chunk_vectors, skeleton_vectors = _unit_rows(rng, len(embedded)), _unit_rows(rng, 3)
    store.put_vectors("chunk", "m", embedded.tolist(), chunk_vectors)
    store.put_vectors("skeleton", "m", file_ids[:3], skeleton_vectors)
    dense = load_dense(store, table, 1, "m", 1)
    query = _unit_rows(rng, 1)[0]
    got = dense.scores(query, len(table.ids))

    stored_chunks, stored_skeletons = store.vector_matrix("chunk", "m"), store.vector_matrix("skeleton", "m")
    chunk_cos = dict(zip(stored_chunks.ids.tolist(),
                         (stored_chunks.q.astype(np.float32) * stored_chunks.scales[:, None]) @ query))
    skeleton_cos = dict(zip(stored_skeletons.ids.tolist(),
                            (stored_skeletons.q.astype(np.float32) * stored_skeletons.scales[:, None]) @ query))
    for row, (chunk_id, file_id) in enumerate(zip(table.ids.tolist(), table.file_ids.tolist())):
        if chunk_id not in chunk_cos:
            assert got[row] == -np.inf
        else:
            expected = chunk_cos[chunk_id] + R.SKELETON_WEIGHT * skeleton_cos.get(file_id, 0.0)
            assert abs(got[row] - expected) < 1e-4
    assert dense.coverage == len(embedded) / len(table.ids)


def test_vectors_read_in_pages_equal_one_read(tmp_path: Path, monkeypatch) -> None:
    import codeloupe.store as store_module

    store = Store(tmp_path / "index.sqlite")
    chunks = [Chunk(i + 1, i + 1, "function", f"f{i}", "m.py", f"x{i} = {i}\n") for i in range(10)]
    store.replace_file(ChunkedFile("m.py", "python", chunks, [], FileSkeleton("m.py", "")), hash="m", size=1,
                       mtime=1.0, is_doc=False, encoding="utf-8", chunker_version=1, line_count=10)
    ids = store.chunk_table().ids.tolist()
    store.put_vectors("chunk", "m", ids, _unit_rows(np.random.default_rng(5), 10))
    whole = store.vector_matrix("chunk", "m")
    for page in (1, 3, 10):
        monkeypatch.setattr(store_module, "_VECTOR_PAGE", page)
        paged = store.vector_matrix("chunk", "m")
        assert paged.ids.tolist() == whole.ids.tolist() == ids
        assert np.array_equal(paged.q, whole.q) and np.array_equal(paged.scales, whole.scales)


def test_scores_made_on_their_own_thread_equal_the_inline_ones_and_a_failure_reaches_the_caller(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A search hands the dense product to a thread of its own while it scores the word lanes, then shares the
    blocks left: the scores it gets back are the inline ones, bit for bit, for each query vector, over several
    blocks of rows; the thread's CPU is reported; what the product raised is raised where the search collects
    it."""
    import codeloupe.lanes.dense as dense_module

    monkeypatch.setattr(dense_module, "BLOCK_ROWS", 1024)  # the 3,000 rows below span three blocks, one partial
    rng = np.random.default_rng(5)
    q, scales = quantize(_unit_rows(rng, 3000))
    dense = DenseSnapshot(generation=1, model="m", chunk_rows=np.arange(0, 6000, 2), chunk_skeleton=np.full(3000, -1),
                          vectors=Int8Vectors.stacked([(VectorMatrix(np.arange(3000), q, scales), None)]),
                          coverage=0.5, snapshot_generation=1)
    queries = list(_unit_rows(rng, 3))
    pending = dense.scores_later(lambda: np.stack(queries), 6000)
    got = pending.result()
    assert len(got) == 3 and pending.cpu_ms >= 0.0
    dequantised = q.astype(np.float32) * scales[:, None]
    for query, scores in zip(queries, got):
        assert np.array_equal(scores, dense.scores(query, 6000))
        assert np.abs(scores[dense.chunk_rows] - dequantised @ query).max() < 1e-4
        assert np.isneginf(scores[1::2]).all()  # rows with no vector
    with pytest.raises(Exception, match="(?i)dim|shape|size"):  # a vector of another model's dimension
        dense.scores_later(lambda: [queries[0], np.ones(5, np.float32)], 6000).result()


@pytest.mark.parametrize("every_row", [True, False])
def test_chunk_scores_add_each_files_skeleton_cosine_as_a_gather_would(every_row: bool) -> None:
    """A file's skeleton cosine is added to its chunks a run of rows at a time: the scores are those of adding
    it chunk by chunk, bit for bit, whether the chunks of a file are next to each other or not, with files that
    have no skeleton vector, and with every row embedded (no scatter) or only some."""
    rng = np.random.default_rng(17)
    n_rows, n_files = 3000, 40
    chunk_rows = np.arange(n_rows) if every_row else np.sort(rng.choice(n_rows, 2000, replace=False))
    skeleton = np.repeat(rng.integers(-1, n_files, 300), rng.integers(1, 12, 300))[:len(chunk_rows)]
    skeleton = np.concatenate([skeleton, np.full(len(chunk_rows) - len(skeleton), 7)])
    q, scales = quantize(_unit_rows(rng, len(chunk_rows) + n_files))
    dense = DenseSnapshot(generation=1, model="m", chunk_rows=chunk_rows, chunk_skeleton=skeleton,
                          vectors=Int8Vectors.stacked([(VectorMatrix(np.arange(len(q)), q, scales), None)]),
                          coverage=len(chunk_rows) / n_rows, snapshot_generation=1)
    for query in _unit_rows(rng, 3):
        cosines = dense.vectors.dot(query)
        m = len(chunk_rows)
        expected = np.full(n_rows, -np.inf, np.float32)
        file_sim = np.append(cosines[m:], np.float32(0.0))
        expected[chunk_rows] = cosines[:m] + R.SKELETON_WEIGHT * file_sim[skeleton]
        assert np.array_equal(dense.scores(query, n_rows), expected)
