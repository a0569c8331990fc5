"""A simulated organisation in the real PostgreSQL store, queried through `codeloupe.api`.

    flock /work/notes/heavy.lock timeout 3000 .venv/bin/python bench/pg_org.py --corpora /work/corpora/golden \
        --repos 200 --out /tmp/pg_org.json

One seed repository is indexed for real (`Workspace.index` + `Workspace.embed` into the store: the golden corpora
side by side, plus the standard library without its tests unless `--no-stdlib`, with them given `--stdlib-tests`),
so every table holds what the store's own write path writes: files, chunks with their text, symbols, skeletons,
graph facts, edges, the BM25 term statistics (`lex_chunk_terms`, `lex_terms`, `lex_files`, the repository's totals),
vectors and the repository's HNSW index where it is large enough to have one. Its rows are then copied under
`--repos - 1` more repository ids by INSERT ... SELECT (ids shifted, foreign-key triggers off for the copy: the rows
are copies of rows that passed them), except the chunk vectors: each copy's are synthetic, the seed chunk's real
MiniLM vector plus Gaussian noise of norm `--noise`, renormalised (bench/pg_hnsw.py's process), written by binary
COPY. Each copy (or the first `--hnsw-repos`) then gets the HNSW index the store builds per repository (the store's
own statement, CREATE INDEX CONCURRENTLY, one after another), built here whatever its size to time the builds: the
store itself builds one only for a repository of more than EXACT_SEARCH_MAX_VECTORS vectors.

The script runs unchanged against an older checkout's engine (PYTHONPATH=<its engine>; schema 3 kept
`lex_postings` instead of `lex_chunk_terms`), which is how before / after figures are taken.

Warm queries run through `codeloupe.api` as `codeloupe serve` / `codeloupe search --store` run them, with the
local MiniLM model embedding each query: one repository (`open_shared([name])`, `Workspace.search`: dense,
lexical, file, symbol and feedback lanes, the fused bundle), each public golden query asked once after one
unrelated query loaded the snapshot, then once more (repeated), the seed alone before the copies and one copy
in the full organisation; the lexical lane's own statement (`store.postgres.term_scores_across`, the golden
queries' terms, each asked once before the timed pass) for that repository and for every repository; and every
repository at once
(`open_shared()`, `search_repositories`), `--all-queries` of the golden queries, the choice of repositories those
searches begin with on its own (its lexical statement and dense scan timed apart), then the same queries once more
by a second replica (a new cache directory, as another machine: what the first kept in the database it takes from
there). `--global-index`: between the choice's timing and the second replica, one HNSW graph over every
repository's vectors is built (`codeloupe admin global-index`), the choice is timed again through it, and its
answers are compared with the exact scan's (the same repositories chosen; the exact 200 chunks kept). Reported:
rows and sizes of
every table and index, the seed's indexing time, the copy and index build times, p50 / p95, and memory (this
process's peak RSS, the PostgreSQL processes' RSS summed from /proc). The server's data directory is removed
at the end. `--lexical-only`: the seed indexed without vectors and copied, then only sizes and the lexical
statement (a few minutes at 10 repository ids: how the store's BM25 is compared between two engines).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import pg_server  # noqa: E402
from pg_hnsw import normalise  # noqa: E402
from pg_workers import GOLDEN, prepare_trees  # noqa: E402

SEED = "org-000"
# The tables indexing writes per repository, copied as they are (chunk vectors are synthesised instead).
# Those of them the database's schema lacks are skipped: `lex_postings` is schema 3's, `lex_chunk_terms` 4's.
COPIED = ("repo_meta", "files", "chunks", "symbols", "skeletons", "skeleton_vectors", "graph_facts", "edges",
          "lex_files", "lex_postings", "lex_chunk_terms", "lex_terms", "skipped_files")
# Columns holding a row id of a table with a sequence, shifted by the copy's offset; arrays of them, each id.
ID_COLUMNS = {"id", "file_id", "chunk_id", "src_file_id"}
ID_ARRAYS = {"terms"}
WARM_QUERY = "where are the command line options parsed"


def seed_tree(corpora: Path, scratch: Path, with_stdlib: bool, stdlib_tests: bool) -> Path:
    """One folder holding the golden corpora (and the standard library), hard-linked: the seed repository."""
    root = scratch / "seed"
    root.mkdir()
    for name, tree in prepare_trees(corpora, scratch / "trees", with_stdlib, stdlib_tests).items():
        shutil.copytree(tree, root / name, copy_function=os.link, symlinks=True,
                        ignore=shutil.ignore_patterns(".git"))
    return root


def copy_rows(conn, seed: int, first: int, last: int, offset: int) -> None:  # noqa: ANN001
    """Copies `first`..`last` of the seed repository's rows: copy k gets repository id seed + k and every row
    id shifted by k x `offset`."""
    conn.execute("INSERT INTO repositories (id, name, index_id, root, commit_sha, content_generation,"
                 " vector_generation, lex_version, lex_chunks, lex_files, lex_length)"
                 " SELECT r.id + k, 'org-' || lpad(k::text, 3, '0'), md5(r.index_id || k), r.root, r.commit_sha,"
                 " r.content_generation, r.vector_generation, r.lex_version, r.lex_chunks, r.lex_files,"
                 " r.lex_length FROM repositories r, generate_series(%s::int, %s::int) k WHERE r.id = %s", (first, last, seed))
    for table in COPIED:
        columns = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s"
            " ORDER BY ordinal_position", (table,))]
        if not columns:
            continue
        values = ["s.repo_id + k" if c == "repo_id" else f"s.{c} + k * {offset}" if c in ID_COLUMNS else
                  f"ARRAY(SELECT x + k * {offset} FROM unnest(s.{c}) WITH ORDINALITY AS u(x, n) ORDER BY n)"
                  if c in ID_ARRAYS else f"s.{c}" for c in columns]
        conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)}"
                     f" FROM {table} s, generate_series(%s::int, %s::int) k WHERE s.repo_id = %s", (first, last, seed))


def copy_vectors(conn, rows: list[tuple], repo_ids: list[int], offsets: list[int],  # noqa: ANN001
                 rng: np.random.Generator, noise: float) -> None:
    """Each copy's chunk vectors: the seed chunk's vector plus Gaussian noise, renormalised, by binary COPY
    (a pgvector value on the wire: int16 dim, int16 unused, big-endian float4s)."""
    ids = np.array([r[0] for r in rows], np.int64)
    model = rows[0][1].encode()
    seed = np.stack([np.array(r[3][1:-1].split(","), np.float32) for r in rows])
    dim = seed.shape[1]
    row = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("repo_len", ">i4"), ("repo", ">i4"),
                    ("model_len", ">i4"), ("model", f"S{len(model)}"), ("dim_len", ">i4"), ("dim", ">i4"),
                    ("vec_len", ">i4"), ("vdim", ">i2"), ("unused", ">i2"), ("vec", ">f4", (dim,))])
    with conn.cursor() as cur, cur.copy("COPY chunk_vectors (chunk_id, repo_id, model, dim, vec)"
                                        " FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        for repo_id, offset in zip(repo_ids, offsets, strict=True):
            batch = np.zeros(len(ids), row)
            batch["fields"], batch["id_len"], batch["repo_len"], batch["model_len"] = 5, 8, 4, len(model)
            batch["dim_len"], batch["vec_len"], batch["vdim"], batch["dim"] = 4, 4 + 4 * dim, dim, dim
            batch["id"], batch["repo"], batch["model"] = ids + offset, repo_id, model
            shaken = seed + rng.standard_normal(seed.shape, dtype=np.float32) * np.float32(noise / np.sqrt(dim))
            batch["vec"] = normalise(shaken)
            copy.write(batch.tobytes())
        copy.write(struct.pack(">h", -1))


def copy_organisation(conn, seed_id: int, copies: range, step: int, rng: np.random.Generator,  # noqa: ANN001
                      noise: float, offset: int | None = None) -> tuple[int, list[tuple]]:
    """The seed repository's rows copied as each copy k of `copies` (`copy_rows`: repository id seed + k, row ids
    shifted by k x the offset), `step` copies a statement, each copy's chunk vectors synthesised from the seed's
    (`copy_vectors`); (the row-id offset between copies, the seed's vector rows). `offset`: the one copies made
    before used (otherwise the power of ten above every row id so far)."""
    numbered = sequences(conn)
    offset = offset or 10 ** len(str(max(conn.execute(f"SELECT coalesce(max(id), 0) FROM {t}").fetchone()[0]
                                         for t in numbered if t != "repositories")))
    vectors = conn.execute("SELECT chunk_id, model, dim, vec::text FROM chunk_vectors WHERE repo_id = %s"
                           " ORDER BY chunk_id", (seed_id,)).fetchall()
    started = time.perf_counter()
    conn.execute("SET session_replication_role = replica")  # the copies' rows already passed the checks
    for first in range(copies.start, copies.stop, step):
        last = min(first + step, copies.stop) - 1
        with conn.transaction():
            copy_rows(conn, seed_id, first, last, offset)
            if vectors:
                copy_vectors(conn, vectors, [seed_id + k for k in range(first, last + 1)],
                             [k * offset for k in range(first, last + 1)], rng, noise)
        print(f"copied {last} of {copies.stop - 1}", round(time.perf_counter() - started), flush=True)
    conn.execute("SET session_replication_role = DEFAULT")
    for table, sequence in numbered.items():
        conn.execute(f"SELECT setval('{sequence}', (SELECT max(id) FROM {table}))")
    return offset, vectors


def sequences(conn) -> dict[str, str]:  # noqa: ANN001
    """Table -> the sequence numbering its `id` column, for every table with one."""
    tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.columns"
                                         " WHERE table_schema = 'public' AND column_name = 'id'")]
    found = {t: conn.execute("SELECT pg_get_serial_sequence(%s, 'id')", (t,)).fetchone()[0] for t in tables}
    return {table: sequence for table, sequence in found.items() if sequence}


def check_copy(seed, copy, shift: int, queries: list[tuple[str, str]]) -> None:  # noqa: ANN001 - PgStores
    """A copy's lexical statistics answer as the seed's, its chunk ids shifted by `shift` (ids inside arrays too):
    the same scores to the last bits a sum in another order changes."""
    from codeloupe import ranking as R
    from codeloupe.lanes.tokens import tokenize

    for query, _ in queries:
        expected = {i + shift: v for i, v in seed.term_scores(tokenize(query), 50, R.BM25_K1, R.BM25_B).chunks}
        got = dict(copy.term_scores(tokenize(query), 50, R.BM25_K1, R.BM25_B).chunks)
        assert np.allclose(sorted(got.values()), sorted(expected.values()), rtol=1e-12), query
        assert all(np.isclose(got[i], expected[i], rtol=1e-12) for i in got.keys() & expected.keys()), query


def lexical_statement(stores, queries: list[tuple[str, str]]) -> dict:  # noqa: ANN001 - PgStores of one database
    """The lexical lane's statement for `stores` at once, each query's terms asked once, then timed."""
    from codeloupe import ranking as R
    from codeloupe.lanes.tokens import tokenize
    from codeloupe.store.postgres import term_scores_across

    def ask(query: str, _mode: str) -> None:
        forget_recent_postings()  # the statement's own cost, not the process's memory of it
        term_scores_across(stores, tokenize(query), R.INDEXED_LEXICAL_DEPTH, R.BM25_K1, R.BM25_B)

    for query, mode in queries:
        ask(query, mode)
    return timed(ask, queries)


def forget_recent_postings() -> None:
    """Empty the postings the store keeps of terms asked lately (an older engine keeps none)."""
    from codeloupe.store import postgres

    getattr(postgres, "_recent_postings", {}).clear()


def best_chunks(stores, queries: list[tuple[str, str]]) -> dict:  # noqa: ANN001 - PgStores of one database
    """`best_chunks_across` for `stores` at once (the lexical lane's LANE_DEPTH best chunks across them, read
    with top-k pruning), timed as `lexical_statement`, with the share of the query terms' postings it read."""
    from codeloupe import ranking as R
    from codeloupe.lanes.tokens import tokenize
    from codeloupe.store.postgres import best_chunks_across

    read, held = [], []

    def ask(query: str, _mode: str) -> None:
        found = best_chunks_across(stores, tokenize(query), R.LANE_DEPTH, R.BM25_K1, R.BM25_B)
        read.append(found.postings_read)
        held.append(found.postings_held)

    for query, mode in queries:
        ask(query, mode)
    out = timed(ask, queries)
    out["postings_read_of_held"] = round(sum(read[len(queries):]) / max(sum(held[len(queries):]), 1), 4)
    out["postings_read_p50"] = int(statistics.median(read[len(queries):]))
    return out


def repository_choice(workspaces, queries: list[tuple[str, str]], answers: dict | None = None) -> dict:  # noqa: ANN001
    """The choice among `workspaces` (one shared index) that `search_repositories` makes before searching any in
    full, each query's vector embedded beforehand, with its two lanes timed apart: the pruned BM25 statement
    ("words") and the dense scan ("meaning"), each p50 / p95 in ms. `answers`: filled with each query's chosen
    repositories and the dense lane's chunks (`nearest_across`, asked once more untimed)."""
    from codeloupe import ranking as R
    from codeloupe.embed import describe_provider
    from codeloupe.repository_choice import choose_repositories
    from codeloupe.store.postgres import FilesSearched, nearest_across

    stores = [ws.store for ws in workspaces]
    model = describe_provider(workspaces[0].settings)[1]
    provider = workspaces[0].embedding_provider()
    vectors = {query: provider.embed_query(query) for query, _ in queries}
    lanes: dict[str, list[float]] = {}

    def ask(query: str, mode: str) -> None:
        choice = choose_repositories(stores, query, vectors[query], model, R.REPOSITORIES_SEARCHED_FULLY,
                                     FilesSearched("", mode))
        for lane, seconds in choice.seconds.items():
            lanes.setdefault(lane, []).append(seconds * 1000)
        if answers is not None:
            answers[query] = {"chosen": choice.chosen}

    out = timed(ask, queries)
    for query, mode in queries if answers is not None else []:
        answers[query]["dense"] = [c for _, c, _ in nearest_across(stores, model, vectors[query], R.LANE_DEPTH,
                                                                   FilesSearched("", mode))]
    for lane, millis in lanes.items():
        out[lane] = {"p50_ms": round(statistics.median(millis), 1),
                     "p95_ms": round(float(np.percentile(millis, 95)), 1)}
    return out


def agreement(exact: dict, graph: dict) -> dict:
    """How the choice through the global graph agrees with the exact scan's: the queries choosing the same
    repositories (in the same order; as a set), and the dense lane's recall of the exact scan's chunks."""
    same = [graph[q]["chosen"] == exact[q]["chosen"] for q in exact]
    same_set = [set(graph[q]["chosen"]) == set(exact[q]["chosen"]) for q in exact]
    recall = [len(set(graph[q]["dense"]) & set(exact[q]["dense"])) / max(len(exact[q]["dense"]), 1) for q in exact]
    return {"same_choice": round(sum(same) / len(same), 3), "same_set": round(sum(same_set) / len(same), 3),
            "dense_recall_mean": round(float(np.mean(recall)), 4), "dense_recall_min": round(min(recall), 4)}


@contextlib.contextmanager
def profiled(top: int):  # noqa: ANN201 - a context manager
    """The block under cProfile, its `top` functions by cumulative time printed to stderr (0: not profiled)."""
    if not top:
        yield
        return
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(top)


def _choice_timed() -> bool:
    """Whether this engine's repository choice times its lanes (an older one has no such figures)."""
    try:
        from codeloupe.repository_choice import RepositoryChoice
    except ImportError:
        return False
    return "seconds" in RepositoryChoice.__dataclass_fields__


def postgres_rss_mb(pgdata: Path) -> float:
    """RSS of the server's processes (postmaster and backends), summed: shared buffers counted once per
    process that touched them, so an upper bound of the server's memory."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"postgres" not in cmdline:
                continue
            cwd = os.readlink(f"/proc/{pid}/cwd")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if cwd.startswith(str(pgdata)):
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
    return round(total / 1024, 1)


def sizes(conn) -> dict:  # noqa: ANN001
    """Rows, heap (with TOAST) and index bytes of every table in MB, and the database's total."""
    out = {}
    for table, rows, heap, index in conn.execute(
            "SELECT c.relname, c.reltuples::bigint, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
            " ORDER BY pg_total_relation_size(c.oid) DESC"):
        out[table] = {"rows": rows, "table_mb": round(heap / 2**20, 1), "indexes_mb": round(index / 2**20, 1)}
    out["database_mb"] = round(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20)
    return out


def timed(fn, queries: list[tuple[str, str]]) -> dict:  # noqa: ANN001
    millis = []
    for query, mode in queries:
        started = time.perf_counter()
        fn(query, mode)
        millis.append((time.perf_counter() - started) * 1000)
        if millis[-1] > 1000:  # a slow one (every-repository queries take seconds): show progress
            print(f"{millis[-1]:.0f} ms: {query}", flush=True)
    return {"queries": len(millis), "p50_ms": round(statistics.median(millis), 1),
            "p95_ms": round(float(np.percentile(millis, 95)), 1), "max_ms": round(max(millis), 1)}


def one_repository(ws, queries: list[tuple[str, str]]) -> dict:  # noqa: ANN001 - a Workspace
    """Each query's first ask (after an unrelated one loaded the snapshot), then every query again."""
    try:
        ws.search(WARM_QUERY)
        return {"first": timed(lambda q, m: ws.search(q, mode=m), queries),
                "repeated": timed(lambda q, m: ws.search(q, mode=m), queries)}
    finally:
        ws.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", type=Path, default=Path("/work/shared/golden/public.json"))
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--no-stdlib", action="store_true", help="the golden corpora only (a quick check)")
    parser.add_argument("--stdlib-tests", action="store_true",
                        help="the standard library's test packages in the seed too (about 10K chunks a repository)")
    parser.add_argument("--repos", type=int, default=200, help="repository ids in all, the seed included")
    parser.add_argument("--copy-step", type=int, default=10, help="copies written per statement")
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--hnsw-repos", type=int, help="build the HNSW index of only this many copies"
                        " (each partial index scans the whole vector table)")
    parser.add_argument("--all-queries", type=int, default=10, help="golden queries asked of every repository"
                        " (by search_repositories; at more than 20 repository ids, by the pooled lexical statement"
                        " too, which otherwise asks all 80)")
    parser.add_argument("--all-repos", type=int, help="search_repositories over only the first N repositories"
                        " (each one's snapshot is held in this process: 200 do not fit in memory)")
    parser.add_argument("--full-repos", type=int, help="also search the first N repositories with every lane of"
                        " each (no repository chosen first): the way a search across them ran before")
    parser.add_argument("--cache", type=Path, help="embedding cache to start from (copied), e.g. the eval cache")
    parser.add_argument("--pg-parent", type=Path, default=Path(tempfile.gettempdir()) / "pgbench")
    parser.add_argument("--shared-buffers", default="2GB")
    parser.add_argument("--maintenance-work-mem", default="1GB")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", type=int, default=0, help="print the second replica's N most costly"
                        " functions (cProfile, cumulative) to stderr")
    parser.add_argument("--lexical-only", action="store_true",
                        help="no vectors, no queries through the API: sizes and the lexical statement alone")
    parser.add_argument("--global-index", action="store_true",
                        help="after the choice's exact pass, build the HNSW graph over every repository's vectors"
                             " (`codeloupe admin global-index`), time the choice again, and report how its"
                             " answers agree; the second replica then searches with the graph")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import psycopg

    from codeloupe import ranking as R
    from codeloupe.api import Workspace, open_shared, search_repositories
    from codeloupe.eval.golden import load_golden
    from codeloupe.store import postgres
    from codeloupe.store.postgres import (
        EXACT_SEARCH_MAX_VECTORS,
        HNSW_EF_CONSTRUCTION,
        HNSW_M,
        PgStore,
        vector_index_sql,
    )

    rng = np.random.default_rng(args.seed)
    corpora = [c for c in load_golden(args.golden).corpora if c.id in GOLDEN]
    queries = [(f"{q.query}", "docs" if q.kind == "docs" else "code") for c in corpora for q in c.queries]
    report: dict = {"repos": args.repos, "hnsw": {"m": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION,
                                                   "exact_search_max_vectors": EXACT_SEARCH_MAX_VECTORS},
                    "settings": {"shared_buffers": args.shared_buffers,
                                 "maintenance_work_mem": args.maintenance_work_mem}}
    settings = {"shared_buffers": args.shared_buffers, "maintenance_work_mem": args.maintenance_work_mem,
                "max_parallel_maintenance_workers": "1", "max_wal_size": "8GB", "synchronous_commit": "off",
                "jit": "off"}
    with contextlib.ExitStack() as stack:
        args.pg_parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="pg-org-", dir=args.pg_parent))
        stack.callback(shutil.rmtree, scratch, True)
        os.environ["CODELOUPE_CACHE_DIR"] = str(scratch / "cache")
        if args.cache:
            shutil.copytree(args.cache, scratch / "cache", ignore=shutil.ignore_patterns("indexes"))
        url = stack.enter_context(pg_server.running(args.pg_parent, settings))
        pgdata = Path(url.split("host=")[1].split("&")[0])
        overrides = {"store_url": url, "embed_provider": "none" if args.lexical_only else "local"}

        started = time.perf_counter()
        ws = Workspace(seed_tree(args.corpora, scratch, not args.no_stdlib, args.stdlib_tests),
                       overrides={**overrides, "store_repository": SEED})
        ws.index()
        report["seed_index_s"] = round(time.perf_counter() - started, 1)
        if not args.lexical_only:
            started = time.perf_counter()
            ws.embed()
            report["seed_embed_s"] = round(time.perf_counter() - started, 1)
        ws.close()
        if not args.lexical_only:
            report["seed_alone"] = one_repository(open_shared([SEED], overrides)[0], queries)
            print("seed alone", report["seed_alone"], flush=True)

        conn = psycopg.connect(url, autocommit=True)
        stack.callback(conn.close)
        seed_id = conn.execute("SELECT id FROM repositories WHERE name = %s", (SEED,)).fetchone()[0]
        # A term's chunk frequency is its postings' count, whichever way the schema keeps them.
        counts = conn.execute("SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM chunks),"
                              " (SELECT sum(df) FROM lex_terms), (SELECT count(*) FROM chunk_vectors)").fetchone()
        report["seed"] = dict(zip(("files", "chunks", "postings", "vectors"), counts, strict=True))
        print("seed", report["seed"], report["seed_index_s"], report.get("seed_embed_s"), flush=True)

        started = time.perf_counter()
        offset, vectors = copy_organisation(conn, seed_id, range(1, args.repos), args.copy_step, rng, args.noise)
        report["copy_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        report["vacuum_analyze_s"] = round(time.perf_counter() - started, 1)
        if vectors:
            started = time.perf_counter()
            built = range(1, min(args.repos, 1 + (args.hnsw_repos or args.repos)))
            for k in built:
                conn.execute(vector_index_sql(seed_id + k, vectors[0][2]))
            report["hnsw_build_s"] = round(time.perf_counter() - started, 1)
            # The store builds none for a repository it searches exactly (up to EXACT_SEARCH_MAX_VECTORS).
            report["hnsw_indexes_built"] = conn.execute("SELECT count(*) FROM pg_indexes"
                                                        " WHERE indexname LIKE 'chunk_vectors_hnsw_%'").fetchone()[0]
        report["sizes"] = sizes(conn)
        if args.out:
            args.out.write_text(json.dumps(report, indent=1))
        print("built", {k: report.get(k) for k in ("copy_s", "vacuum_analyze_s", "hnsw_build_s")},
              report["sizes"]["database_mb"], flush=True)

        if not args.lexical_only:
            report["one_repository"] = one_repository(open_shared([f"org-{args.repos // 2:03d}"], overrides)[0],
                                                      queries)
            print("one repository", report["one_repository"], flush=True)
        names = [r[0] for r in conn.execute("SELECT name FROM repositories ORDER BY id")]
        stores = [PgStore(url, name, local_dir=scratch / "local") for name in names]
        middle = len(stores) // 2
        check_copy(stores[0], stores[middle], middle * offset, queries)
        sample = [queries[i] for i in rng.choice(len(queries), min(args.all_queries, len(queries)), replace=False)]
        report["lexical_statement"] = {"one": lexical_statement([stores[middle]], queries),
                                       "all": lexical_statement(stores, queries if len(stores) <= 20 else sample)}
        print("lexical statement", report["lexical_statement"], flush=True)
        if hasattr(postgres, "best_chunks_across"):  # an older engine has no pruned statement
            report["best_chunks"] = {"one": best_chunks([stores[middle]], queries),
                                     "all": best_chunks(stores, queries if len(stores) <= 20 else sample)}
            print("best chunks", report["best_chunks"], flush=True)
        if args.lexical_only:
            return pg_server.emit(report, args.out)
        if args.out:
            args.out.write_text(json.dumps(report, indent=1))  # kept if the every-repository pass is cut
        report["postgres_rss_mb_one"] = postgres_rss_mb(pgdata)

        if args.full_repos:  # every lane of every one of them, as before repositories were chosen
            full = open_shared(names[:args.full_repos], overrides)
            for ws in full:
                stack.callback(ws.close)
            with contextlib.ExitStack() as unchosen:
                if hasattr(R, "REPOSITORIES_SEARCHED_FULLY"):
                    unchosen.callback(setattr, R, "REPOSITORIES_SEARCHED_FULLY", R.REPOSITORIES_SEARCHED_FULLY)
                    R.REPOSITORIES_SEARCHED_FULLY = len(full)
                started = time.perf_counter()
                search_repositories(full, WARM_QUERY)
                report["full_open_and_first_s"] = round(time.perf_counter() - started, 1)
                report["full_repositories"] = timed(lambda q, m: search_repositories(full, q, mode=m), sample)
            report["client_rss_mb_after_full"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            print("the first", len(full), "searched in full", report["full_open_and_first_s"],
                  report["full_repositories"], flush=True)
            for ws in full:
                ws.close()

        started = time.perf_counter()
        every = open_shared(names[:args.all_repos] if args.all_repos else [], overrides)
        report["all_repositories_opened"] = len(every)
        for ws in every:
            stack.callback(ws.close)
        search_repositories(every, WARM_QUERY)
        report["all_open_and_first_s"] = round(time.perf_counter() - started, 1)
        report["client_rss_mb_all_open"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        print("every repository opened and asked once", report["all_open_and_first_s"], flush=True)
        if args.out:
            args.out.write_text(json.dumps(report, indent=1))
        report["all_repositories"] = timed(lambda q, m: search_repositories(every, q, mode=m), sample)
        report["all_repositories_notes"] = search_repositories(every, sample[0][0], mode=sample[0][1]).notes
        print("all repositories", report["all_repositories"], flush=True)
        if _choice_timed():
            exact: dict = {}
            report["repository_choice"] = repository_choice(every, sample, exact)
            print("the choice alone", report["repository_choice"], flush=True)
            if args.global_index:
                from codeloupe.api import build_global_vector_indexes

                report["global_index"] = [dataclasses.asdict(g) for g in build_global_vector_indexes(url)]
                print("global index", report["global_index"], flush=True)
                graph: dict = {}
                report["repository_choice_graph"] = repository_choice(every, sample, graph)
                report["repository_choice_graph"]["agreement"] = agreement(exact, graph)
                print("the choice through the graph", report["repository_choice_graph"], flush=True)
        report["postgres_rss_mb_all"] = postgres_rss_mb(pgdata)
        report["client_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        if hasattr(postgres.PgStore, "keep_saved"):  # an older engine keeps nothing in the database
            # A second replica (its own empty cache directory, as on another machine) asks the same queries:
            # the files the first built for the repositories it chose are taken from the database.
            for ws in every:
                ws.close()
            forget_recent_postings()  # another machine has asked none of these terms
            replica = open_shared(names[:args.all_repos] if args.all_repos else [],
                                  {**overrides, "cache_dir": str(scratch / "replica")})
            for ws in replica:
                stack.callback(ws.close)
            started = time.perf_counter()
            search_repositories(replica, WARM_QUERY)  # loads the chosen repositories' snapshots from the database
            report["replica_open_and_first_s"] = round(time.perf_counter() - started, 1)
            with profiled(args.profile):
                report["replica_all_repositories"] = timed(lambda q, m: search_repositories(replica, q, mode=m),
                                                           sample)
            report["saved_files_mb"] = round(conn.execute(
                "SELECT coalesce(sum(length(data)), 0) FROM saved_files").fetchone()[0] / 2**20, 1)
            print("a second replica, all repositories", report["replica_all_repositories"], flush=True)
    return pg_server.emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
