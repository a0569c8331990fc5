"""`codeloupe admin global-index`: one HNSW graph over every repository's vectors, from which a search across
very many repositories takes its nearest chunks instead of scanning every vector; a search naming few of them
still scans exactly, a write after the build is found through the graph, and once dropped every search scans
exactly again. On a real PostgreSQL, the graph's reads counted by the database's own statistics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import psycopg
import pytest

from codeloupe.api import Workspace
from codeloupe.cli import main
from codeloupe.shared_index import (
    GLOBAL_INDEX_MIN_VECTORS,
    EmbeddingClaims,
    build_global_vector_indexes,
    run_worker,
)
from codeloupe.store import postgres
from codeloupe.store.postgres import PgStore, nearest_across

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
DIM = 8
GRAPH = f"chunk_vectors_hnsw_all_{DIM}"


def _repository(root: Path, name: str, pg_url: str, seed: int) -> PgStore:
    """A repository of the fixture tree's chunks, each with a random vector of `DIM` dimensions."""
    shutil.copytree(FIXTURES / "go", root)
    ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url, "store_repository": name})
    ws.index()
    assert isinstance(ws.store, PgStore)
    ids = [r[0] for r in ws.store.query("SELECT id FROM chunks ORDER BY id")]
    ws.store.put_vectors("chunk", "m", ids, _vectors(len(ids), seed))
    return ws.store


def _vectors(n: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _graph_reads(pg_url: str, asker: PgStore) -> int:
    """How many times the graph was read: the asking connection's counts flushed first (the connection a
    store's next statement takes is the one its last statement used)."""
    asker.query("SELECT pg_stat_force_next_flush()")
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s", (GRAPH,)).fetchone()
    return -1 if row is None else int(row[0])


def test_a_search_across_every_repository_takes_its_nearest_chunks_from_the_global_graph(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    stores = [_repository(tmp_path / f"r{k}", f"r{k}", pg_url, k) for k in range(4)]
    total = sum(len(s.query("SELECT chunk_id FROM chunk_vectors")) for s in stores)
    query = _vectors(1, 99)[0]
    exact, exact_one = nearest_across(stores, "m", query, 10), nearest_across(stores[:1], "m", query, 10)
    assert len(exact) == 10 and {r for r, _, _ in exact} != {stores[0].repo_id}
    assert _graph_reads(pg_url, stores[0]) == -1  # no graph yet

    assert main(["admin", "--store", pg_url, "global-index"]) == 0
    assert f"{GRAPH}: {total} vectors of {DIM} dimensions" in capsys.readouterr().out
    reads = _graph_reads(pg_url, stores[0])
    # A graph this small holds every vector within the reach of one search of it: the exact answer.
    assert nearest_across(stores, "m", query, 10) == exact
    assert _graph_reads(pg_url, stores[0]) == reads + 1

    # One repository of the four named, the graph asked for only its 12 nearest: most are the others', fewer
    # than 10 are kept, and that repository's vectors are scanned exactly instead.
    monkeypatch.setattr(postgres, "HNSW_EF_SEARCH_MAX", 12)
    assert nearest_across(stores[:1], "m", query, 10) == exact_one
    assert _graph_reads(pg_url, stores[0]) == reads + 2
    monkeypatch.undo()

    # A vector written after the build is in the graph: the query's own, on one chunk of the last repository.
    chunk = int(stores[3].query("SELECT id FROM chunks ORDER BY id LIMIT 1")[0][0])
    stores[3].put_vectors("chunk", "m", [chunk], query[None, :])
    assert nearest_across(stores, "m", query, 10)[0][:2] == (stores[3].repo_id, chunk)
    assert _graph_reads(pg_url, stores[0]) == reads + 3

    assert main(["admin", "--store", pg_url, "--json", "global-index"]) == 0
    [graph] = json.loads(capsys.readouterr().out)
    assert (graph["name"], graph["vectors"], graph["built"]) == (GRAPH, total, False) and graph["size_bytes"] > 0
    assert main(["admin", "--store", pg_url, "global-index", "drop"]) == 0
    assert capsys.readouterr().out.strip() == f"dropped {GRAPH}"
    assert _graph_reads(pg_url, stores[0]) == -1
    again = nearest_across(stores, "m", query, 10)
    assert again[0][:2] == (stores[3].repo_id, chunk) and again[1:] == [n for n in exact if n[1] != chunk][:9]
    assert main(["admin", "--store", pg_url, "global-index", "drop"]) == 0
    assert capsys.readouterr().out.strip() == "no global index"


def test_an_index_left_invalid_by_a_build_killed_midway_is_built_again(tmp_path: Path, pg_url: str) -> None:
    stores = [_repository(tmp_path / f"r{k}", f"r{k}", pg_url, k) for k in range(2)]
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a failed concurrent build leaves its index INVALID
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {GRAPH} ON chunk_vectors (dim)")
    query = _vectors(1, 5)[0]
    exact = nearest_across(stores, "m", query, 5)
    assert _graph_reads(pg_url, stores[0]) == 0
    assert main(["admin", "--store", pg_url, "global-index"]) == 0
    assert nearest_across(stores, "m", query, 5) == exact
    assert _graph_reads(pg_url, stores[0]) == 1


def test_a_slow_exact_scan_across_repositories_suggests_the_graph_once(tmp_path: Path, pg_url: str,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    stores = [_repository(tmp_path / f"r{k}", f"r{k}", pg_url, k) for k in range(2)]
    monkeypatch.setattr(postgres, "SLOW_SCAN_S", 0.0)  # every scan is slow
    query = _vectors(1, 5)[0]
    with caplog.at_level("WARNING", logger="codeloupe.store.postgres"):
        nearest_across(stores, "m", query, 5)
        nearest_across(stores, "m", query, 5)
    [suggestion] = [r.getMessage() for r in caplog.records if "global-index" in r.getMessage()]
    assert "ranking chunks of 2 repositories by meaning scanned every vector" in suggestion


def test_a_worker_whose_queue_drains_builds_the_graph_once_the_organisation_is_large_enough(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The policy (`run_worker`'s `global_index_min_vectors`): below the size nothing is built; at it, the
    worker that finds the queue drained builds the graph while another worker building it is left alone, a
    graph already there is not built again, and one an administrator dropped stays dropped until built by hand
    again. The test's organisation is small, so the size is lowered."""
    stores = [_repository(tmp_path / f"r{k}", f"r{k}", pg_url, k) for k in range(2)]
    total = sum(len(s.query("SELECT chunk_id FROM chunk_vectors")) for s in stores)

    def drained(min_vectors: int | None) -> list[str]:
        stores[0].enqueue(str(tmp_path / "r0"), "", [["main.go"]])  # one batch, so the queue drains after it
        report = run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.05,
                            global_index_min_vectors=min_vectors)
        assert report.batches == 1
        return [index.name for index in report.global_indexes]

    assert drained(total + 1) == [] and drained(None) == []
    with psycopg.connect(pg_url) as conn:
        assert postgres.index_valid(conn, GRAPH) is None
    building = EmbeddingClaims(pg_url)  # another worker, building it right now
    try:
        with building.holding(b"graph over every repository") as held:
            assert held and drained(total) == []
    finally:
        building.close()
    assert drained(total) == [GRAPH]
    with psycopg.connect(pg_url) as conn:
        assert postgres.index_valid(conn, GRAPH) is True
    query = _vectors(1, 3)[0]
    reads = _graph_reads(pg_url, stores[0])
    nearest_across(stores, "m", query, 5)
    assert _graph_reads(pg_url, stores[0]) == reads + 1
    assert drained(total) == []  # there already

    assert main(["admin", "--store", pg_url, "global-index", "drop"]) == 0
    assert drained(total) == []  # dropped by hand: left dropped
    # ... even by a worker that found it due just before the drop and builds now
    assert build_global_vector_indexes(pg_url, by_hand=False) == []
    capsys.readouterr()
    assert main(["admin", "--store", pg_url, "global-index", "status"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{GRAPH}: absent, {total} vectors of {DIM} dimensions",
        "dropped by hand: workers leave it absent until `global-index` builds it"]
    assert main(["admin", "--store", pg_url, "global-index"]) == 0  # built by hand: the workers' to keep again
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {GRAPH}")
    assert drained(total) == [GRAPH]
    capsys.readouterr()
    assert main(["admin", "--store", pg_url, "global-index", "status"]) == 0
    # As the README writes the number (it said 300000 here)
    assert capsys.readouterr().out.splitlines()[1] == (
        "a worker whose queue drains builds one for a dimension with 300,000 vectors or more (unless started with"
        " --no-global-index)")
    assert main(["admin", "--store", pg_url, "--json", "global-index", "status"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert not status["dropped_by_hand"] and status["workers_build_from"] == GLOBAL_INDEX_MIN_VECTORS
    assert [(g["name"], g["state"], g["vectors"]) for g in status["graphs"]] == [(GRAPH, "ready", total)]
