"""The test server itself: pgvector loads and an HNSW cosine index answers (the 0.1.4 wheel's extension runs
on this machine; newer builds died with an illegal instruction here)."""

from __future__ import annotations

import math

import psycopg


def test_vector_extension_and_hnsw_index_answer(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
        conn.execute("CREATE TABLE v (id int PRIMARY KEY, e vector(3))")
        conn.execute("INSERT INTO v SELECT i, ARRAY[cos(i), sin(i), 1]::vector FROM generate_series(1, 500) i")
        conn.execute("CREATE INDEX ON v USING hnsw (e vector_cosine_ops)")
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT id FROM v ORDER BY e <=> '[1,0,1]' LIMIT 5"))
        assert "v_e_idx" in plan  # the HNSW index, not a sort over a scan
        nearest = [r[0] for r in conn.execute("SELECT id FROM v ORDER BY e <=> '[1,0,1]' LIMIT 5")]
        exact = sorted(range(1, 501), key=lambda i: -math.cos(i))[:5]  # cosine to (1,0,1) is (cos i + 1) / 2
        assert set(nearest) == set(exact)
