"""The lexical lane in PostgreSQL vs in process, on a golden set: file-level R@1 / Acc@5 and lane latency.

    .venv/bin/python bench/pg_lexical.py ../shared/golden/public.json --corpora .golden \
        [--replicas 49] --out /tmp/pg_lexical.json

Every corpus is indexed by the real engine (no vectors) and its chunks are loaded into one PostgreSQL
schema, a repository id on every row, as the same token streams the in-process lane indexes (path terms,
breadcrumb and text through `lanes/tokens.py`: identifiers split, light stemming, stop words out). Then each
query runs through the real engine with the lexical lane's chunk scores coming from one backend at a time:

- `inprocess`: the engine's own BM25 matrix (the reference);
- `fts_codeterms`: full-text search over a tsvector of exactly those terms (positions kept, so term
  frequency counts), an OR tsquery of the query's terms, GIN index, ranked by `ts_rank_cd` / `ts_rank`;
- `fts_simple`: `to_tsvector('simple', text)` over the raw chunk text (PostgreSQL's own word splitting:
  snake_case parts but no joined form, no camelCase parts, no stemming), the query's terms OR'ed: what
  full-text search gives without code-aware tokens on the chunk side;
- `bm25_sql`: Okapi BM25 computed in SQL from per-repository term statistics kept in tables (document
  frequency per term, tf and length per posting, chunk count and mean length), the engine's k1 and b.

Scored twice: the lexical lane alone (`lanes=("lexical",)`, the engine's own file aggregation), and the
whole engine without vectors (the other lanes stay in process; the file lane and the feedback lane's term
choice keep the in-process statistics). Latency is the lexical lane's own time per query (the SQL round
trip over the unix socket, or the in-process matrix product), warm, every query run once before timing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

SCHEMA = """
CREATE TABLE lex_chunks (repo_id int, row_no int, length int, terms tsvector, body text,
                         simple tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                         PRIMARY KEY (repo_id, row_no));
CREATE TABLE lex_postings (repo_id int, term text, row_no int, tf int, length int,
                           PRIMARY KEY (repo_id, term, row_no));
CREATE TABLE lex_terms (repo_id int, term text, df int, PRIMARY KEY (repo_id, term));
CREATE TABLE lex_stats (repo_id int PRIMARY KEY, n_docs int, avg_len float8);
"""
INDEXES = """
CREATE INDEX lex_chunks_terms ON lex_chunks USING gin (terms);
CREATE INDEX lex_chunks_simple ON lex_chunks USING gin (simple);
CREATE INDEX lex_postings_term ON lex_postings (term);  -- a query over every repository looks terms up alone
ANALYZE;
"""
DEPTH = 1000  # chunk scores handed to the lane per query (the engine keeps its best 200 after masking)
FTS_RANKS = {"fts_codeterms_rank_cd": "ts_rank_cd(terms, q)", "fts_codeterms_rank_cd_len": "ts_rank_cd(terms, q, 1)",
             "fts_codeterms_rank_len": "ts_rank(terms, q, 1)"}
# {scope}: one repository (the golden queries, and a team searching one repository) or every repository.
ONE_REPO = "repo_id = %(repo)s"
EVERY_REPO = "repo_id >= 0"  # true of every row: the same templates serve both scopes
FTS_SQL = ("SELECT row_no, {rank} FROM lex_chunks, CAST(%(query)s AS tsquery) q WHERE {scope} AND terms @@ q "
           "ORDER BY 2 DESC LIMIT %(depth)s")
FTS_SIMPLE_SQL = ("SELECT row_no, ts_rank_cd(simple, q) FROM lex_chunks, "
                  "CAST(replace(plainto_tsquery('simple', %(query)s)::text, '&', '|') AS tsquery) q "
                  "WHERE {scope} AND simple @@ q ORDER BY 2 DESC LIMIT %(depth)s")
BM25_SQL = """
SELECT p.row_no, sum(q.qtf * ln(1 + (s.n_docs - t.df + 0.5) / (t.df + 0.5))
                     * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.length / s.avg_len)))
FROM unnest(%(terms)s::text[], %(qtf)s::int[]) AS q(term, qtf)
JOIN lex_postings p ON p.term = q.term AND p.{scope}
JOIN lex_terms t ON t.repo_id = p.repo_id AND t.term = q.term
JOIN lex_stats s ON s.repo_id = p.repo_id
GROUP BY p.repo_id, p.row_no ORDER BY 2 DESC LIMIT %(depth)s
"""


def tsvector_literal(tokens: list[str]) -> str:
    """The terms with their positions (1..16383, at most 256 per term, PostgreSQL's limits) as a literal."""
    positions: dict[str, list[int]] = {}
    for pos, term in enumerate(tokens, start=1):
        held = positions.setdefault(term, [])
        if len(held) < 256 and pos <= 16383:
            held.append(pos)
    return " ".join(f"'{t}':{','.join(map(str, p))}" if p else f"'{t}'" for t, p in positions.items())


def tsquery_literal(terms: list[str]) -> str:
    return " | ".join(f"'{t}'" for t in dict.fromkeys(terms))


def load_corpus(conn, repo_id: int, docs: list[list[str]], texts: list[str]) -> None:  # noqa: ANN001
    """One repository's chunks, postings, term statistics and corpus statistics, in one transaction."""
    df: Counter[str] = Counter()
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy("COPY lex_chunks (repo_id, row_no, length, terms, body) FROM STDIN") as copy:
            for row, (tokens, text) in enumerate(zip(docs, texts, strict=True)):
                copy.write_row((repo_id, row, len(tokens), tsvector_literal(tokens), text))
        with cur.copy("COPY lex_postings (repo_id, term, row_no, tf, length) FROM STDIN") as copy:
            for row, tokens in enumerate(docs):
                counts = Counter(tokens)
                df.update(counts.keys())
                for term, tf in counts.items():
                    copy.write_row((repo_id, term, row, tf, len(tokens)))
        with cur.copy("COPY lex_terms (repo_id, term, df) FROM STDIN") as copy:
            for term, n in df.items():
                copy.write_row((repo_id, term, n))
        cur.execute("INSERT INTO lex_stats VALUES (%s, %s, %s)",
                    (repo_id, len(docs), float(np.mean([len(d) for d in docs])) if docs else 1.0))


class TimedLane:
    """Stands in for the snapshot's BM25 index: chunk scores from one backend, each call timed.

    `rarest` (the feedback lane's choice of expansion terms) stays with the in-process statistics."""

    def __init__(self, inprocess, score_rows) -> None:  # noqa: ANN001
        self.inprocess, self.score_rows = inprocess, score_rows
        self.millis: list[float] = []

    def scores(self, terms: list[str]) -> np.ndarray:
        started = time.perf_counter()
        out = self.score_rows(terms)
        self.millis.append((time.perf_counter() - started) * 1000)
        return out

    def rarest(self, terms: list[str], k: int) -> list[str]:
        return self.inprocess.rarest(terms, k)


def sql_backends() -> dict:
    """Name -> (SQL with a {scope} slot, `terms, repository -> parameters`) for every PostgreSQL backend."""
    from codeloupe.ranking import BM25_B, BM25_K1

    def tsquery_params(terms: list[str], repo: int) -> dict:
        return {"query": tsquery_literal(terms), "repo": repo, "depth": DEPTH}

    def words_params(terms: list[str], repo: int) -> dict:
        return {"query": " ".join(dict.fromkeys(terms)), "repo": repo, "depth": DEPTH}

    def bm25_params(terms: list[str], repo: int) -> dict:
        counts = Counter(terms)
        return {"terms": list(counts), "qtf": list(counts.values()), "repo": repo, "k1": BM25_K1, "b": BM25_B,
                "depth": DEPTH}

    out = {name: (FTS_SQL.replace("{rank}", rank), tsquery_params) for name, rank in FTS_RANKS.items()}
    out["fts_simple"] = (FTS_SIMPLE_SQL, words_params)
    out["bm25_sql"] = (BM25_SQL, bm25_params)
    return out


def sql_scorer(conn, sql: str, params, repo: int, n_rows: int):  # noqa: ANN001, ANN201
    """A `terms -> chunk scores` function over one repository's rows (`sql` yields (row_no, score))."""
    sql = sql.replace("{scope}", ONE_REPO)

    def score_rows(terms: list[str]) -> np.ndarray:
        out = np.zeros(n_rows, np.float32)
        if terms:
            for row, value in conn.execute(sql, params(terms, repo), prepare=True):
                out[row] = value
        return out
    return score_rows


def backends(conn, repo_id: int, snap) -> dict:  # noqa: ANN001
    """Name -> `terms -> scores` for every lexical backend, for one repository."""
    n = len(snap.table.ids)
    return {"inprocess": snap.bm25.scores,
            **{name: sql_scorer(conn, sql, params, repo_id, n) for name, (sql, params) in sql_backends().items()}}


def scale_latency(conn, corpora: list, replicas: int, seed: int) -> dict:  # noqa: ANN001
    """Every repository copied `replicas` times under new ids; warm latency of each PostgreSQL backend for
    one repository (a random copy of the query's corpus) and for every repository, top 200."""
    from codeloupe.lanes.tokens import tokenize

    n = len(corpora)
    for table, cols in (("lex_chunks", "row_no, length, terms, body"), ("lex_postings", "term, row_no, tf, length"),
                        ("lex_terms", "term, df"), ("lex_stats", "n_docs, avg_len")):
        conn.execute(f"INSERT INTO {table} (repo_id, {cols}) SELECT repo_id + %s * k, {cols} "  # noqa: S608
                     f"FROM {table}, generate_series(1, %s) k WHERE repo_id < %s", (n, replicas, n))
    conn.execute("VACUUM ANALYZE")
    rng = np.random.default_rng(seed)
    asked = [(repo + n * int(rng.integers(0, replicas + 1)), tokenize(q.query))
             for repo, corpus in enumerate(corpora) for q in corpus.queries]
    out: dict = {"repos": n * (replicas + 1),
                 "chunks": conn.execute("SELECT count(*) FROM lex_chunks").fetchone()[0],
                 "postings": conn.execute("SELECT count(*) FROM lex_postings").fetchone()[0],
                 "total_mb": round(conn.execute("SELECT sum(pg_total_relation_size(oid)) FROM pg_class "
                                                "WHERE relname LIKE 'lex_%' AND relkind = 'r'").fetchone()[0] / 2**20)}
    for name, (sql, params) in sql_backends().items():
        for label, scope in (("one_repo", ONE_REPO), ("every_repo", EVERY_REPO)):
            query = sql.replace("{scope}", scope)
            millis = []
            for timed in (False, True):
                for repo, terms in asked:
                    started = time.perf_counter()
                    conn.execute(query, {**params(terms, repo), "depth": 200}, prepare=True).fetchall()
                    if timed:
                        millis.append((time.perf_counter() - started) * 1000)
            out[f"{name}_{label}"] = {"p50_ms": round(statistics.median(millis), 2),
                                      "p95_ms": round(float(np.percentile(millis, 95)), 2)}
            print(name, label, out[f"{name}_{label}"], flush=True)
    return out


def score(outcomes: list[tuple[list[str], list[str]]]) -> dict:
    from codeloupe.eval import metrics

    return {"r_at_1": round(metrics.mean([float(metrics.hit_at_1(r, g)) for r, g in outcomes]), 4),
            "acc_at_5": round(metrics.mean([float(metrics.all_in_top_k(r, g, 5)) for r, g in outcomes]), 4),
            "bundle_recall": round(metrics.mean([float(metrics.all_in_bundle(r, g)) for r, g in outcomes]), 4)}


def run_queries(conn, repo_id: int, corpus, searcher, results: dict, millis: dict) -> None:  # noqa: ANN001
    """Every query of one corpus through the engine once per backend, lane alone and whole engine."""
    snap = searcher.snapshot()
    inprocess = snap.bm25
    try:
        for name, scorer in backends(conn, repo_id, snap).items():
            lane = TimedLane(inprocess, scorer)
            snap.bm25 = lane
            for label, lanes in (("lane", ("lexical",)), ("engine_no_embed", None)):
                for query in corpus.queries:
                    mode = "docs" if query.kind == "docs" else "code"
                    searcher.search(query.query, mode=mode, lanes=lanes)  # warm: plans and caches
                    lane.millis.clear()
                    bundle = searcher.search(query.query, mode=mode, lanes=lanes)
                    ranked = [hit.path for hit in bundle.files]
                    results.setdefault(name, {}).setdefault(label, []).append((ranked, list(query.gold_files)))
                    if label == "lane":
                        millis.setdefault(name, []).append(sum(lane.millis))
    finally:
        snap.bm25 = inprocess


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--pg-parent", type=Path, default=Path(tempfile.gettempdir()) / "pgbench",
                        help="the throwaway server's data directory is created (and removed) under this")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/pgbench/cache"),
                        help="the engine's index cache (CODELOUPE_CACHE_DIR) for the corpora")
    parser.add_argument("--corpus", action="append", help="only this corpus (repeatable)")
    parser.add_argument("--replicas", type=int, default=0,
                        help="then copy every repository this many times and time the SQL lanes at that size")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ["CODELOUPE_CACHE_DIR"] = str(args.cache_dir)

    import psycopg

    from codeloupe.api import Workspace
    from codeloupe.eval.golden import load_golden
    from codeloupe.eval.runner import corpus_repo
    from codeloupe.search import _documents  # the lexical lane's own token streams, not a copy of them

    sys.path.insert(0, str(Path(__file__).parent))
    import pg_server

    corpora = [c for c in load_golden(args.golden).corpora if not args.corpus or c.id in args.corpus]
    results: dict[str, dict[str, list]] = {}
    millis: dict[str, list[float]] = {}
    report: dict = {"corpora": {}, "queries": sum(len(c.queries) for c in corpora)}
    workspaces = []
    with contextlib.ExitStack() as stack:
        uri = stack.enter_context(pg_server.running(args.pg_parent, {"shared_buffers": "256MB", "jit": "off"}))
        conn = stack.enter_context(psycopg.connect(uri, autocommit=True))
        conn.execute(SCHEMA)
        for repo_id, corpus in enumerate(corpora):
            ws = Workspace(corpus_repo(args.corpora, corpus.id), overrides={"embed_provider": "none"})
            stack.callback(ws.close)
            ws.index()
            snap = ws.searcher().snapshot()
            snap.file_index()  # the file lane's index comes from the in-process BM25, built before it is swapped
            docs = list(_documents(snap.table, list(ws.store.file_rows().values())))
            started = time.perf_counter()
            load_corpus(conn, repo_id, docs, snap.table.texts)
            report["corpora"][corpus.id] = {"chunks": len(docs), "load_s": round(time.perf_counter() - started, 2)}
            workspaces.append(ws)
        conn.execute(INDEXES)
        sizes = conn.execute("SELECT relname, pg_total_relation_size(oid) FROM pg_class "
                             "WHERE relname LIKE 'lex_%' AND relkind IN ('r', 'i')").fetchall()
        report["sizes_kb"] = {name: size // 1024 for name, size in sizes}
        for repo_id, (corpus, ws) in enumerate(zip(corpora, workspaces, strict=True)):
            run_queries(conn, repo_id, corpus, ws.searcher(), results, millis)
        if args.replicas:
            report["scale"] = scale_latency(conn, corpora, args.replicas, seed=7)
    report["backends"] = {
        name: {**{label: score(outcomes) for label, outcomes in results[name].items()},
               "lane_p50_ms": round(statistics.median(millis[name]), 2),
               "lane_p95_ms": round(float(np.percentile(millis[name], 95)), 2)}
        for name in results}
    return pg_server.emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
