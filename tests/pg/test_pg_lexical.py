"""The lexical lane answered in PostgreSQL from BM25 term statistics kept in tables: written with the chunks,
scored in one statement, equal to the in-process lane's scores, and the search path reading no chunk text."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest

from codeloupe import ranking as R
from codeloupe.api import Workspace
from codeloupe.lanes.indexed_lexical import IndexedBM25
from codeloupe.lanes.lexical import BM25Index, TermStats
from codeloupe.lanes.tokens import tokenize
from codeloupe.search import _documents
from codeloupe.store.postgres import STATE_TTL_S, PgStore, term_scores_across

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # test_index.py

from test_index import check_no_op_reindex_reads_no_file  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
QUERIES = ["parse the configuration file", "where are requests routed to handlers", "load settings",
           "the main entry point of the command line", "Session store token lookup", "resolve import paths"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "fixture-repo"
    shutil.copytree(FIXTURES, root)
    return root


def _open(root: Path, **overrides: str) -> Workspace:
    ws = Workspace(root, overrides={"embed_provider": "none", **overrides})
    ws.index()
    return ws


def _lexical_files(ws: Workspace, query: str) -> list[str]:
    return [hit.path for hit in ws.searcher().search(query, lanes=("lexical",)).files]


def assert_statistics_match_the_chunks(store: PgStore) -> None:
    """The store's BM25 (chunks, files, IDF) equals an in-process index built from its chunks now."""
    table = store.chunk_table()
    inprocess = BM25Index(_documents(table, list(store.file_rows().values())))
    indexed = IndexedBM25(store, table.ids)
    file_ids, groups = np.unique(table.file_ids, return_inverse=True)
    by_file = BM25Index.grouped(inprocess, groups.astype(np.int64), len(file_ids))
    assert len(table.ids) < R.INDEXED_LEXICAL_DEPTH  # every matching row comes back: compare them all
    for query in QUERIES + ["def return self", "handler handler config"]:
        terms = tokenize(query)
        assert np.allclose(indexed.scores(terms), inprocess.scores(terms), rtol=1e-5, atol=1e-6), query
        assert np.allclose(indexed.files(file_ids).scores(terms), by_file.scores(terms), rtol=1e-5, atol=1e-6)
        assert indexed.rarest(terms, 3) == inprocess.rarest(terms, 3)
        # A search across repositories pools the statistics and scores with the pooled IDF (passed to SQL).
        assert indexed.term_stats(terms) == inprocess.term_stats(terms)
        assert indexed.files(file_ids).term_stats(terms) == by_file.term_stats(terms)
        pooled = TermStats(3 * len(table.ids), {t: 2 * inprocess.term_stats([t]).df[t] + 1 for t in terms})
        assert np.allclose(indexed.scores(terms, pooled), inprocess.scores(terms, pooled), rtol=1e-5, atol=1e-6)
        assert np.allclose(indexed.files(file_ids).scores(terms, pooled), by_file.scores(terms, pooled),
                           rtol=1e-5, atol=1e-6)
    assert store.query("SELECT count(*) FROM lex_terms t WHERE t.repo_id = ? AND t.df <> (SELECT count(*)"
                       " FROM lex_postings p WHERE p.repo_id = t.repo_id AND p.term = t.term)",
                       (store.repo_id,)) == [(0,)]
    totals = store.query("SELECT lex_chunks, lex_files, lex_length FROM repositories WHERE id = ?", (store.repo_id,))
    assert totals == [(len(table.ids), len(file_ids), sum(len(d) for d in _documents(
        table, list(store.file_rows().values()))))]


def test_the_lexical_lane_answers_from_the_statistics_without_reading_chunk_text(tree: Path, pg_url: str) -> None:
    local, shared = _open(tree), _open(tree, store_url=pg_url)
    try:
        expected = {query: _lexical_files(local, query) for query in QUERIES}
        assert all(expected.values())
        # With every chunk's text gone from the database, a new process's lexical lane still ranks the same
        # files: it reads the term statistics, never the texts (the old lane tokenised them all on start).
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE chunks SET text = ''")
        fresh = Workspace(tree, overrides={"embed_provider": "none", "store_url": pg_url})
        try:
            assert {query: _lexical_files(fresh, query) for query in QUERIES} == expected
            store_path = Path(fresh.store.path)  # no in-process matrix either
            assert not store_path.with_name(store_path.name + ".bm25.npz").exists()
        finally:
            fresh.close()
    finally:
        local.close()
        shared.close()


def test_the_statistics_follow_every_write_of_the_chunks(tree: Path, pg_url: str) -> None:
    ws = _open(tree, store_url=pg_url)
    try:
        assert isinstance(ws.store, PgStore)
        assert_statistics_match_the_chunks(ws.store)
        changed = next(p for p in sorted(tree.rglob("*.py")) if p.stat().st_size > 200)
        changed.write_text(changed.read_text() + "\ndef handler_config_lookup():\n    return 'config handler'\n")
        gone = next(p for p in sorted(tree.rglob("*.go")))
        gone.unlink()
        (tree / "added.py").write_text("def load_settings_file(path):\n    return parse_config(path)\n")
        report = ws.index()
        assert report.files_indexed == 2 and report.files_deleted == 1
        assert_statistics_match_the_chunks(ws.store)
        ws.store.delete_files([changed.relative_to(tree).as_posix()])
        assert_statistics_match_the_chunks(ws.store)
    finally:
        ws.close()


def test_statistics_of_another_tokenisation_are_counted_again(tree: Path, pg_url: str) -> None:
    ws = _open(tree, store_url=pg_url)
    try:
        expected = {query: _lexical_files(ws, query) for query in QUERIES}
    finally:
        ws.close()
    # A repository indexed before the statistics existed (or by another tokenisation): none kept, version 0.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM lex_postings")
        conn.execute("DELETE FROM lex_files")
        conn.execute("DELETE FROM lex_terms")
        conn.execute("UPDATE repositories SET lex_version = 0, lex_chunks = 0, lex_files = 0, lex_length = 0")
    time.sleep(STATE_TTL_S + 0.2)  # as a process started later finds it
    again = Workspace(tree, overrides={"embed_provider": "none", "store_url": pg_url})
    try:
        assert {query: _lexical_files(again, query) for query in QUERIES} == expected
        assert_statistics_match_the_chunks(again.store)
    finally:
        again.close()


def test_one_statement_scores_several_repositories_each_on_its_own_statistics(tree: Path, tmp_path: Path,
                                                                              pg_url: str) -> None:
    other = tmp_path / "other"
    shutil.copytree(FIXTURES / "go", other)
    first, second = _open(tree, store_url=pg_url), _open(other, store_url=pg_url)
    try:
        stores = [first.store, second.store]
        for query in QUERIES:
            terms = tokenize(query)
            across = term_scores_across(stores, terms, 50, R.BM25_K1, R.BM25_B)
            assert across == {s.repo_id: s.term_scores(terms, 50, R.BM25_K1, R.BM25_B) for s in stores}
        assert across[first.store.repo_id].chunks and across[second.store.repo_id].chunks
    finally:
        first.close()
        second.close()


def test_another_replicas_write_is_seen_within_the_state_interval(tree: Path, pg_url: str) -> None:
    ws = _open(tree, store_url=pg_url)
    try:
        before = ws.store.generation("content")
        with psycopg.connect(pg_url, autocommit=True) as conn:  # as another process writing the repository
            conn.execute("UPDATE repositories SET content_generation = content_generation + 1")
        time.sleep(STATE_TTL_S + 0.2)
        assert ws.store.generation("content") == before + 1
    finally:
        ws.close()


def test_files_skipped_for_their_content_are_remembered_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    check_no_op_reindex_reads_no_file(tmp_path, {"store_url": pg_url})
