"""pgvector HNSW on a simulated organisation: build time, size, warm latency and recall@10 against exact search.

    flock /work/notes/heavy.lock timeout 1500 .venv/bin/python bench/pg_hnsw.py --chunks 200000 \
        --vectors-from ~/.cache/codeloupe/embeddings.sqlite --out /tmp/pg_hnsw-200k.json

One table `chunks(id, repo_id, embedding vector(384))` holds `--chunks` rows spread evenly over `--repos`
repository ids, loaded with binary COPY in repository order (the order indexing workers write). Vectors are
synthetic but shaped like real ones: each is a real MiniLM chunk vector from `--vectors-from` (the embedding
cache that embedding fills, e.g. after the golden gate or `codeloupe eval public.json --corpora DIR`:
`vectors` table, int8 + scale) plus a random fraction of a second real vector
and Gaussian noise, renormalised; without `--vectors-from`, clustered Gaussian vectors. Queries are fresh
draws of the same process (held out from the table). Recall@10 is against exact cosine search in numpy over
the same float32 vectors, for all repositories and for one repository (a random one per query).

For every `--hnsw M,EF_CONSTRUCTION` the index is built (timed, sized), queried at every `--ef-search`, then
dropped. Three shapes of a one-repository query are measured, because pgvector below 0.8 has no iterative
index scan: the HNSW scan filtered afterwards (`repo_id + 0` keeps the btree out), the exact scan of that
repository's rows through the btree on `repo_id` (`(embedding <=> q) + 0` keeps HNSW out), and whatever
the planner picks with both indexes present. `--questions public.json --k 200`: the golden set's questions,
embedded by the local model, are the queries instead (natural language against code vectors, as the repository
choice of a search across every repository asks for its 200 nearest), and recall@k over all repositories is
measured alone. halfvec needs pgvector 0.7; when the server lacks it, the cost
of half precision is measured offline (exact search over float16-rounded vectors), and so is int8.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 384


def real_pool(path: Path | None, rng: np.random.Generator, centres: int = 4096) -> np.ndarray:
    """Unit vectors to build the organisation from: real ones from an embedding cache, else cluster centres."""
    if path is None:
        return normalise(rng.standard_normal((centres, DIM), dtype=np.float32))
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT scale, vec FROM vectors").fetchall()
    pool = np.stack([np.frombuffer(vec, np.int8).astype(np.float32) * scale for scale, vec in rows])
    if pool.shape[1] != DIM:
        raise SystemExit(f"{path}: vectors of {pool.shape[1]} dimensions, expected {DIM}")
    return normalise(pool)


def normalise(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def synthesise(pool: np.ndarray, n: int, rng: np.random.Generator, noise: float) -> np.ndarray:
    """`n` vectors near the pool's manifold: a pool vector, up to half of another one, and isotropic noise
    (in blocks, so a million vectors cost their own 1.5 GB and little more)."""
    out = np.empty((n, DIM), np.float32)
    for start in range(0, n, 50_000):
        size = min(50_000, n - start)
        block = pool[rng.integers(0, len(pool), size)]
        block += pool[rng.integers(0, len(pool), size)] * rng.uniform(0, 0.5, (size, 1)).astype(np.float32)
        block += rng.standard_normal((size, DIM), dtype=np.float32) * np.float32(noise / np.sqrt(DIM))
        out[start: start + size] = normalise(block)
    return out


def questions(golden: Path) -> np.ndarray:
    """The golden set's questions embedded by the local model, as a search embeds its query."""
    from codeloupe.embed import make_provider
    from codeloupe.eval.golden import load_golden
    from codeloupe.settings import load_settings

    provider = make_provider(load_settings(None, {"embed_provider": "local"}))
    texts = [q.query for corpus in load_golden(golden).corpora for q in corpus.queries]
    return normalise(np.stack([provider.embed_query(text) for text in texts]).astype(np.float32))


def nearest_cosine(vectors: np.ndarray, sample: int, rng: np.random.Generator) -> float:
    """Median cosine of a vector to its nearest other vector (how crowded the space is), on a sample."""
    picks = rng.choice(len(vectors), min(sample, len(vectors)), replace=False)
    best = []
    for start in range(0, len(picks), 25):  # 25 rows of similarities at a time: 100 MB at a million vectors
        block = picks[start: start + 25]
        sims = vectors[block] @ vectors.T
        sims[np.arange(len(block)), block] = -1.0
        best.extend(sims.max(axis=1).tolist())
    return float(np.median(best))


def copy_binary(conn, ids: np.ndarray, repos: np.ndarray, vectors: np.ndarray) -> None:  # noqa: ANN001
    """Binary COPY: a pgvector value on the wire is int16 dim, int16 unused, then big-endian float4s."""
    row = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("repo_len", ">i4"), ("repo", ">i4"),
                    ("vec_len", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("vec", ">f4", (DIM,))])
    with conn.cursor() as cur, cur.copy("COPY chunks (id, repo_id, embedding) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        for start in range(0, len(ids), 20_000):
            end = min(start + 20_000, len(ids))
            batch = np.zeros(end - start, row)
            batch["fields"], batch["id_len"], batch["repo_len"] = 3, 8, 4
            batch["vec_len"], batch["dim"] = 4 + 4 * DIM, DIM
            batch["id"], batch["repo"], batch["vec"] = ids[start:end], repos[start:end], vectors[start:end]
            copy.write(batch.tobytes())
        copy.write(struct.pack(">h", -1))


def literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def recall(found: list[int], exact: np.ndarray) -> float:
    return len(set(found) & set(exact.tolist())) / len(exact)


def timed_queries(conn, sql: str, params: list[tuple]) -> tuple[list[list[int]], list[float]]:  # noqa: ANN001
    """Every query once to warm the caches, then again timed (client round trip over the unix socket)."""
    for p in params:
        conn.execute(sql, p, prepare=True).fetchall()
    results, millis = [], []
    for p in params:
        start = time.perf_counter()
        rows = conn.execute(sql, p, prepare=True).fetchall()
        millis.append((time.perf_counter() - start) * 1000)
        results.append([r[0] for r in rows])
    return results, millis


def plan_of(conn, sql: str, params: tuple) -> str:  # noqa: ANN001
    """The plan's node types, outermost first (to show which index a query shape actually used)."""
    plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()[0][0]["Plan"]
    nodes = []
    while plan:
        nodes.append(plan["Node Type"] + (f" {plan['Index Name']}" if "Index Name" in plan else ""))
        plan = (plan.get("Plans") or [None])[0]
    return " > ".join(nodes)


def summary(results: list[list[int]], millis: list[float], exact: list[np.ndarray]) -> dict:
    return {f"recall_at_{len(exact[0])}": round(statistics.mean(recall(r, e) for r, e in zip(results, exact, strict=True)), 4),
            "mean_rows": round(statistics.mean(len(r) for r in results), 2),
            "p50_ms": round(statistics.median(millis), 2),
            "p95_ms": round(float(np.percentile(millis, 95)), 2)}


SQL_ALL = "SELECT id FROM chunks ORDER BY embedding <=> %s::vector LIMIT {k}"
SQL_REPO_HNSW = "SELECT id FROM chunks WHERE repo_id + 0 = %s ORDER BY embedding <=> %s::vector LIMIT 10"
SQL_REPO_EXACT = "SELECT id FROM chunks WHERE repo_id = %s ORDER BY (embedding <=> %s::vector) + 0 LIMIT 10"
SQL_REPO_PLANNER = "SELECT id FROM chunks WHERE repo_id = %s ORDER BY embedding <=> %s::vector LIMIT 10"


def exact_top(vectors: np.ndarray, queries: np.ndarray, rows: np.ndarray | None = None,
              k: int = 10) -> list[np.ndarray]:
    """Ids (row numbers) of the exact top `k` by cosine, over all rows or the given rows."""
    scope = vectors if rows is None else vectors[rows]
    out = []
    for start in range(0, len(queries), 32):  # a matrix product per 32 queries: 128 MB at a million vectors
        sims = queries[start: start + 32] @ scope.T
        for row in sims:
            top = np.argpartition(-row, k - 1)[:k]
            top = top[np.argsort(-row[top])]
            out.append(top if rows is None else rows[top])
    return out


def quantised_recall(vectors: np.ndarray, queries: np.ndarray, exact: list[np.ndarray]) -> dict:
    """Recall@10 of exact search over half-precision and int8 (per-row scale) copies of the vectors."""
    peak = np.abs(vectors).max(axis=1, keepdims=True) / 127.0
    copies = {"halfvec_exact": lambda: (vectors.astype(np.float16).astype(np.float32),
                                        queries.astype(np.float16).astype(np.float32)),
              "int8_exact": lambda: (np.rint(vectors / peak).astype(np.int8).astype(np.float32) * peak, queries)}
    out = {}
    for name, make in copies.items():  # one copy in memory at a time
        found = exact_top(*make())
        out[name] = round(statistics.mean(recall(f.tolist(), e) for f, e in zip(found, exact, strict=True)), 4)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--repos", type=int, default=200)
    parser.add_argument("--vectors-from", type=Path, help="embedding cache (embeddings.sqlite) with real vectors")
    parser.add_argument("--noise", type=float, default=0.5, help="norm of the Gaussian noise added per vector")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--hnsw", nargs="+", default=["16,64"], help="M,EF_CONSTRUCTION pairs to build")
    parser.add_argument("--ef-search", nargs="+", type=int, default=[40, 100, 200])
    parser.add_argument("--pg-parent", type=Path, default=Path(tempfile.gettempdir()) / "pgbench",
                        help="the throwaway server's data directory is created (and removed) under this")
    parser.add_argument("--shared-buffers", default="2GB")
    parser.add_argument("--maintenance-work-mem", default="2GB")
    parser.add_argument("--build-workers", type=int, default=1, help="max_parallel_maintenance_workers")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--questions", type=Path,
                        help="a golden query set (public.json): its questions embedded by the local model are the"
                             " queries instead of fresh draws (natural language against code vectors, as a search"
                             " across every repository asks); recall over all repositories only")
    parser.add_argument("--k", type=int, default=10, help="recall@k over all repositories (LIMIT k)")
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    args = parser.parse_args()

    import psycopg

    sys.path.insert(0, str(Path(__file__).parent))
    import pg_server

    rng = np.random.default_rng(args.seed)
    pool = real_pool(args.vectors_from, rng)
    started = time.perf_counter()
    vectors = synthesise(pool, args.chunks, rng, args.noise)
    repos = np.repeat(np.arange(args.repos, dtype=np.int32), -(-args.chunks // args.repos))[: args.chunks]
    queries = synthesise(pool, args.queries, rng, args.noise) if args.questions is None else questions(args.questions)
    args.queries = len(queries)
    query_repos = rng.integers(0, args.repos, args.queries).astype(np.int32)
    report: dict = {
        "chunks": args.chunks, "repos": args.repos, "queries": args.queries, "noise": args.noise,
        "vectors": f"real MiniLM pool of {len(pool)} from {args.vectors_from}" if args.vectors_from
        else f"{len(pool)} Gaussian centres",
        "median_nearest_cosine": {"pool": nearest_cosine(pool, 200, rng),
                                  "synthetic": nearest_cosine(vectors, 200, rng)},
        "generate_s": round(time.perf_counter() - started, 1)}
    exact_all = exact_top(vectors, queries, k=args.k)
    exact_repo = [exact_top(vectors, queries[i: i + 1], np.flatnonzero(repos == query_repos[i]))[0]
                  for i in range(args.queries)]
    # The cost of precision is a property of the vectors, not of the table size: measured on a sample.
    sample = min(args.chunks, 200_000)
    report["quantised"] = {"sample": sample, **quantised_recall(vectors[:sample], queries,
                                                                 exact_top(vectors[:sample], queries))}
    print(json.dumps(report), flush=True)

    settings = {"shared_buffers": args.shared_buffers, "maintenance_work_mem": args.maintenance_work_mem,
                "max_parallel_maintenance_workers": str(args.build_workers), "max_parallel_workers_per_gather": "0",
                "jit": "off"}
    with pg_server.running(args.pg_parent, settings) as uri, psycopg.connect(uri, autocommit=True) as conn:
        report["pgvector"] = pg_server.pgvector_version(conn)
        report["halfvec"] = conn.execute("SELECT to_regtype('halfvec') IS NOT NULL").fetchone()[0]
        report["iterative_scan"] = conn.execute(
            "SELECT count(*) > 0 FROM pg_settings WHERE name = 'hnsw.iterative_scan'").fetchone()[0]
        conn.execute(f"CREATE TABLE chunks (id bigint PRIMARY KEY, repo_id int NOT NULL, embedding vector({DIM}))")
        started = time.perf_counter()
        copy_binary(conn, np.arange(args.chunks, dtype=np.int64), repos, vectors)
        conn.execute("CREATE INDEX chunks_repo ON chunks (repo_id)")
        conn.execute("VACUUM ANALYZE chunks")
        report["load_s"] = round(time.perf_counter() - started, 1)
        report["table_mb"] = round(conn.execute("SELECT pg_table_size('chunks')").fetchone()[0] / 2**20, 1)
        literals = [literal(q) for q in queries]
        repo_params = [(int(r), q) for r, q in zip(query_repos, literals, strict=True)]
        report["repo_exact"] = summary(*timed_queries(conn, SQL_REPO_EXACT, repo_params), exact_repo)
        report["repo_exact"]["plan"] = plan_of(conn, SQL_REPO_EXACT, repo_params[0])
        report["builds"] = []
        for pair in args.hnsw:
            m, ef_construction = (int(x) for x in pair.split(","))
            started = time.perf_counter()
            conn.execute(f"CREATE INDEX chunks_hnsw ON chunks USING hnsw (embedding vector_cosine_ops) "
                         f"WITH (m = {m}, ef_construction = {ef_construction})")
            build = {"m": m, "ef_construction": ef_construction,
                     "build_s": round(time.perf_counter() - started, 1),
                     "index_mb": round(conn.execute("SELECT pg_relation_size('chunks_hnsw')").fetchone()[0]
                                       / 2**20, 1), "ef_search": {}}
            print(json.dumps(build), flush=True)
            for ef in args.ef_search:
                conn.execute(f"SET hnsw.ef_search = {ef}")
                conn.execute("SET enable_seqscan = off")
                every = SQL_ALL.format(k=args.k)
                row = {"all": summary(*timed_queries(conn, every, [(q,) for q in literals]), exact_all)}
                row["all"]["plan"] = plan_of(conn, every, (literals[0],))
                if args.questions is not None:  # a question belongs to no repository
                    conn.execute("RESET enable_seqscan")
                    build["ef_search"][ef] = row
                    print(json.dumps({"m": m, "ef_construction": ef_construction, "ef_search": ef, **row}), flush=True)
                    continue
                row["repo_hnsw_postfilter"] = summary(*timed_queries(conn, SQL_REPO_HNSW, repo_params), exact_repo)
                row["repo_hnsw_postfilter"]["plan"] = plan_of(conn, SQL_REPO_HNSW, repo_params[0])
                conn.execute("RESET enable_seqscan")
                row["repo_planner"] = summary(*timed_queries(conn, SQL_REPO_PLANNER, repo_params), exact_repo)
                row["repo_planner"]["plan"] = plan_of(conn, SQL_REPO_PLANNER, repo_params[0])
                build["ef_search"][ef] = row
                print(json.dumps({"m": m, "ef_construction": ef_construction, "ef_search": ef, **row}), flush=True)
            conn.execute("DROP INDEX chunks_hnsw")
            report["builds"].append(build)
            if args.out:  # after every build, so a run cut short by its timeout keeps what it measured
                args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
