"""A repository's partial HNSW index is built once it holds more vectors than it is searched exactly, with
CREATE INDEX CONCURRENTLY: other repositories keep writing vectors while it builds, and an invalid index left by
a build killed midway is built again."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import psycopg
import pytest

from codeloupe.api import Workspace
from codeloupe.store import postgres
from codeloupe.store.postgres import PgStore

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
DIM = 8


def _repository(root: Path, name: str, pg_url: str) -> PgStore:
    """A repository of the fixture tree's chunks, indexed without vectors."""
    shutil.copytree(FIXTURES / "go", root)
    ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url, "store_repository": name})
    ws.index()
    assert isinstance(ws.store, PgStore)
    return ws.store


def _chunk_ids(store: PgStore) -> list[int]:
    return [r[0] for r in store.query("SELECT id FROM chunks ORDER BY id")]


def _vectors(n: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _index_state(pg_url: str, store: PgStore) -> list[tuple[bool, str]]:
    with psycopg.connect(pg_url) as conn:
        return conn.execute("SELECT i.indisvalid, a.amname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
                            " JOIN pg_am a ON a.oid = c.relam WHERE c.relname = %s",
                            (f"chunk_vectors_hnsw_r{store.repo_id}_{DIM}",)).fetchall()


@pytest.fixture
def every_repository_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "EXACT_SEARCH_MAX_VECTORS", 0)  # the fixture's few chunks get an index


def test_a_repository_gets_its_index_once_it_is_too_large_to_search_exactly(tmp_path: Path, pg_url: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = _repository(tmp_path / "repo", "repo", pg_url)
    ids = _chunk_ids(store)
    vectors = _vectors(len(ids), 4)
    monkeypatch.setattr(postgres, "EXACT_SEARCH_MAX_VECTORS", len(ids) - 1)
    larger = _repository(tmp_path / "larger", "larger", pg_url)  # its vectors are not the repository's own
    larger.put_vectors("chunk", "m", _chunk_ids(larger), _vectors(len(ids), 5))
    assert _index_state(pg_url, larger) == [(True, "hnsw")]
    store.put_vectors("chunk", "m", ids[:-1], vectors[:-1])
    assert _index_state(pg_url, store) == []  # searched exactly: an index would never be read
    assert store.nearest_chunks("m", vectors[0], 1, 0.0)[0][0] == ids[0]
    store.put_vectors("chunk", "m", ids[-1:], vectors[-1:])  # one more vector than it searches exactly
    assert _index_state(pg_url, store) == [(True, "hnsw")]
    assert store.nearest_chunks("m", vectors[-1], 1, 0.0)[0][0] == ids[-1]


@pytest.mark.usefixtures("every_repository_large")
def test_another_repository_writes_vectors_while_a_new_repository_s_index_builds(tmp_path: Path,
                                                                                  pg_url: str) -> None:
    busy, new = _repository(tmp_path / "busy", "busy", pg_url), _repository(tmp_path / "new", "new", pg_url)
    busy_ids, new_ids = _chunk_ids(busy), _chunk_ids(new)
    busy.put_vectors("chunk", "m", busy_ids[:1], _vectors(1, 0))
    # A transaction of the busy repository stays open (a worker mid-batch): any index build waits for it.
    with psycopg.connect(pg_url) as open_batch:
        open_batch.execute("UPDATE chunk_vectors SET dim = dim WHERE repo_id = %s", (busy.repo_id,))
        building = threading.Thread(target=new.put_vectors, args=("chunk", "m", new_ids, _vectors(len(new_ids), 1)))
        building.start()
        try:
            # While the new repository's build waits, the busy repository still writes vectors: a plain CREATE
            # INDEX would hold the table's SHARE lock in the queue, and this write would wait behind it.
            with psycopg.connect(pg_url, autocommit=True) as writer:
                writer.execute("SET lock_timeout = '3s'")
                writer.execute("SELECT pg_sleep(0.5)")  # the build is under way by now
                writer.execute("INSERT INTO chunk_vectors (chunk_id, repo_id, model, dim, vec) VALUES (%s, %s, 'm',"
                               " %s, %s::vector)", (busy_ids[1], busy.repo_id, DIM, str(_vectors(1, 2)[0].tolist())))
        finally:
            open_batch.commit()
            building.join(timeout=60)
    assert not building.is_alive()
    assert _index_state(pg_url, new) == [(True, "hnsw")]
    assert len(new.vector_matrix_ids("chunk", "m")) == len(new_ids)


@pytest.mark.usefixtures("every_repository_large")
def test_an_invalid_index_left_by_a_killed_build_is_built_again(tmp_path: Path, pg_url: str) -> None:
    store = _repository(tmp_path / "repo", "repo", pg_url)
    ids = _chunk_ids(store)
    name = f"chunk_vectors_hnsw_r{store.repo_id}_{DIM}"
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a failed concurrent build leaves its index INVALID
        conn.execute("INSERT INTO chunk_vectors (chunk_id, repo_id, model, dim, vec) SELECT id, repo_id, 'x', %s,"
                     " array_fill(0.5, ARRAY[%s])::vector FROM chunks WHERE repo_id = %s LIMIT 2",
                     (DIM, DIM, store.repo_id))
        try:
            conn.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {name} ON chunk_vectors (dim) WHERE repo_id = %s"
                         % store.repo_id)
        except psycopg.errors.UniqueViolation:
            pass
        conn.execute("DELETE FROM chunk_vectors WHERE model = 'x'")
    assert _index_state(pg_url, store) == [(False, "btree")]
    store.put_vectors("chunk", "m", ids, _vectors(len(ids), 3))
    assert _index_state(pg_url, store) == [(True, "hnsw")]


@pytest.mark.usefixtures("every_repository_large")
def test_a_build_that_waits_past_the_lock_wait_is_left_for_the_next_write_and_built_there(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The build after a committed vector write waits for transactions older than it (a long report, a stalled
    worker); past the lock wait it gives up saying so, not failing the write that committed, and the next write
    of the repository (here `codeloupe index` with nothing changed) builds it."""
    from codeloupe.cli import main

    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_MS", 200)
    store = _repository(tmp_path / "repo", "repo", pg_url)
    ids = _chunk_ids(store)
    with psycopg.connect(pg_url) as report:  # a long read holding its snapshot (pg_dump, a report)
        report.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        report.execute("SELECT count(*) FROM files")
        with caplog.at_level("WARNING", logger="codeloupe.store.postgres"):
            store.put_vectors("chunk", "m", ids, _vectors(len(ids), 6))
        report.rollback()
    assert len(store.vector_matrix_ids("chunk", "m")) == len(ids)  # the write stands
    assert f"the HNSW index of 'repo' for {DIM}-dimension vectors was not built" in caplog.text
    assert "the next write of the repository builds it" in caplog.text
    assert _index_state(pg_url, store)[0][0] is False
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    assert main(["index", str(tmp_path / "repo"), "--store", pg_url, "--repo", "repo"]) == 0
    assert _index_state(pg_url, store) == [(True, "hnsw")]
