"""The lexical lane answered in PostgreSQL from BM25 term statistics kept in tables: written with the chunks,
scored in one statement, equal to the in-process lane's scores, and the search path reading no chunk text."""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from codeloupe import ranking as R
from codeloupe.api import Workspace
from codeloupe.lanes.indexed_lexical import IndexedBM25
from codeloupe.lanes.lexical import TOKENS_VERSION, BM25Index, TermCounts, TermStats, count_chunk_terms
from codeloupe.lanes.tokens import path_tokens, tokenize
from codeloupe.search import _documents
from codeloupe.store.postgres import (
    _TERM_POSTINGS,
    MIGRATIONS,
    SCHEMA_VERSION,
    STATE_TTL_S,
    PgStore,
    _read_postings,
    migrate,
    term_scores_across,
)
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton

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
                       " FROM lex_chunk_terms c WHERE c.terms @> ARRAY[t.id])", (store.repo_id,)) == [(0,)]
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


def test_the_statistics_are_written_from_the_counts_the_chunking_workers_made(tree: Path, pg_url: str) -> None:
    """A file comes with its chunks' term counts (the chunking worker's) and is not tokenised again: a term planted
    in them is what the statistics hold. Counts that do not fit the file's chunks are tokenised instead."""
    ws = _open(tree, store_url=pg_url)  # every file written with its worker's counts
    try:
        store = ws.store
        assert isinstance(store, PgStore)
        assert_statistics_match_the_chunks(store)
        text = "def planted_lookup(config):\n    return config\n"
        chunked = ChunkedFile("planted.py", "python", [Chunk(1, 2, "function", "planted_lookup",
                                                             "planted.py > planted_lookup", text, ())], [],
                              FileSkeleton("planted.py", text))
        counted = count_chunk_terms([(path_tokens("planted.py"), c.breadcrumb, c.text) for c in chunked.chunks])
        counted.terms[counted.terms.index("config")] = "zqxplanted"
        written = {"hash": "h", "size": len(text), "mtime": 1.0, "is_doc": False, "encoding": "utf-8",
                   "chunker_version": 1, "line_count": 2}
        store.replace_file(chunked, **written, terms=counted.kept())
        df = ("SELECT term, df FROM lex_terms WHERE repo_id = ? AND df > 0"
              " AND term IN ('zqxplanted', 'planted_lookup')")
        assert sorted(store.query(df, (store.repo_id,))) == [("planted_lookup", 1), ("zqxplanted", 1)]
        short = TermCounts(counted.terms, counted.columns, counted.counts, counted.ends[:0])  # no chunk's counts
        store.replace_file(chunked, **written, terms=short.kept())
        assert store.query(df, (store.repo_id,)) == [("planted_lookup", 1)]
        assert_statistics_match_the_chunks(store)
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
        conn.execute("DELETE FROM lex_chunk_terms")
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


def test_chunks_and_files_that_tie_rank_by_id_with_the_same_score(tmp_path: Path, pg_url: str) -> None:
    """The process sums each chunk's and file's terms in one order whatever order the postings arrive in, so
    copies of a file score the same to the last bit and rank by id, alone or asked with another repository."""
    root = tmp_path / "copies"
    root.mkdir()
    text = 'def parse_config(path):\n    """Read the settings file and parse its sections."""\n    return path\n'
    for name in ("one.py", "two.py", "six.py"):  # one path token each: the same lengths
        (root / name).write_text(text)
    (root / "other.py").write_text("def unrelated():\n    return 'nothing about parsing'\n")
    other_root = tmp_path / "fixture-copy"
    shutil.copytree(FIXTURES, other_root)
    ws, other = _open(root, store_url=pg_url), _open(other_root, store_url=pg_url)
    try:
        terms = tokenize("parse the settings file sections")
        alone = ws.store.term_scores(terms, 50, R.BM25_K1, R.BM25_B)
        for found in (alone.chunks, alone.files):
            tied = [i for i, score in found if score == found[0][1]]
            assert len(tied) == 3 and tied == sorted(tied), found
        assert term_scores_across([other.store, ws.store], terms, 50, R.BM25_K1, R.BM25_B)[ws.store.repo_id] == alone
    finally:
        ws.close()
        other.close()


def test_query_terms_are_bound_as_data_and_a_damaged_row_is_left_out(tree: Path, pg_url: str) -> None:
    """The postings statement's parameters are bound by psycopg: a term with quotes or a backslash is a value,
    never SQL. A chunk's row whose counts are fewer than its term ids (damaged) loses that
    posting, not the answer; a reply that is not rows of the seven fields is refused with a clear error."""
    ws = _open(tree, store_url=pg_url)
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            term, term_id = conn.execute("SELECT term, id FROM lex_terms ORDER BY df DESC, term LIMIT 1").fetchone()
        hostile = ["it's", "a\\b", "x'); DROP TABLE lex_terms; --", term]
        found = ws.store.term_scores(hostile, 1000, R.BM25_K1, R.BM25_B)
        assert found.chunks and set(found.chunk_frequency) == {term}
        with psycopg.connect(pg_url, autocommit=True) as conn:
            damaged = conn.execute(
                "UPDATE lex_chunk_terms SET tfs = tfs[1:array_position(terms, %(id)s) - 1] WHERE chunk_id ="
                " (SELECT chunk_id FROM lex_chunk_terms WHERE array_position(terms, %(id)s) > 1 LIMIT 1)"
                " RETURNING chunk_id", {"id": term_id}).fetchone()
            # The process keeps postings by repository state: the damage is read in the state after it.
            conn.execute("UPDATE repositories SET content_generation = content_generation + 1")
        assert damaged is not None
        time.sleep(STATE_TTL_S + 0.2)
        after = ws.store.term_scores([term], 1000, R.BM25_K1, R.BM25_B)
        assert {i for i, _ in after.chunks} == {i for i, _ in found.chunks} - {damaged[0]}
        columns = [bytes(4 * 2), bytes(4 * 2), bytes(8 * 2), bytes(8 * 2), bytes(4 * 2), bytes(4 * 2), bytes(4)]
        with pytest.raises(RuntimeError, match="malformed"):
            _read_postings(2, columns)  # a column a value short (a NULL the others have a value for)
        assert len(_read_postings(2, columns[:-1] + [bytes(8)])) == 0  # two rows, counts of zero: left out
    finally:
        ws.close()


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


def test_the_same_terms_asked_again_see_every_write_of_the_repository(tree: Path, pg_url: str) -> None:
    """The postings of terms asked lately are kept for the same repository states (a search across
    repositories asks them in each pass): a write here is seen by the next ask, another replica's within the
    state interval, as without them."""
    ws = _open(tree, store_url=pg_url)
    try:
        terms = ["zebra", "parse"]
        before = ws.store.term_scores(terms, 1000, R.BM25_K1, R.BM25_B)
        assert ws.store.term_scores(terms, 1000, R.BM25_K1, R.BM25_B) == before
        assert "zebra" not in before.chunk_frequency
        (tree / "zoo.py").write_text("def zebra_parse():\n    return 'zebra parse'\n")
        ws.index()
        after = ws.store.term_scores(terms, 1000, R.BM25_K1, R.BM25_B)
        assert after.chunk_frequency["zebra"] == 1 and after.chunk_frequency["parse"] == \
            before.chunk_frequency["parse"] + 1
        [zebra] = [chunk for chunk, _ in after.chunks if chunk not in dict(before.chunks)]
        with psycopg.connect(pg_url, autocommit=True) as conn:  # as another process removing the chunk's terms
            conn.execute("DELETE FROM lex_chunk_terms WHERE chunk_id = %s", (zebra,))
            conn.execute("UPDATE repositories SET content_generation = content_generation + 1")
        time.sleep(STATE_TTL_S + 0.2)
        gone = ws.store.term_scores(terms, 1000, R.BM25_K1, R.BM25_B)
        assert zebra not in dict(gone.chunks) and "zebra" not in gone.chunk_frequency
    finally:
        ws.close()


def test_postings_kept_by_term_answer_as_asking_the_database_does(tree: Path, pg_url: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each term's postings are kept by repository state, so an ask mixing terms asked before with new ones
    (a repeated word, the feedback lane's expansion, another order) asks the database only for the new ones:
    the answers are those of asking every term afresh, to the bit."""
    from codeloupe.store import postgres

    ws = _open(tree, store_url=pg_url)
    try:
        asks = [tokenize(q) for q in QUERIES]
        asks += [list(reversed(terms)) + ["zzzunheard", terms[0]] for terms in asks] + [asks[0] + asks[1]]
        kept = [ws.store.term_scores(terms, 50, R.BM25_K1, R.BM25_B) for terms in asks]
        monkeypatch.setattr(postgres, "_RECENT_POSTINGS_BYTES", 0)  # nothing kept past the ask that read it
        with psycopg.connect(pg_url, autocommit=True) as conn:  # a state none of the kept postings are for
            conn.execute("UPDATE repositories SET content_generation = content_generation + 1")
        time.sleep(STATE_TTL_S + 0.2)
        assert [ws.store.term_scores(terms, 50, R.BM25_K1, R.BM25_B) for terms in asks] == kept
    finally:
        ws.close()


def test_files_skipped_for_their_content_are_remembered_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    check_no_op_reindex_reads_no_file(tmp_path, {"store_url": pg_url})


def _term_answers(store: PgStore) -> list[tuple[object, ...]]:
    """Everything the lexical statistics answer for QUERIES: BM25 of chunks and files, frequencies, totals."""
    answers: list[tuple[object, ...]] = []
    for query in QUERIES:
        terms = tokenize(query)
        answers.append((store.term_scores(terms, 50, R.BM25_K1, R.BM25_B), store.chunk_frequencies(terms)))
    return answers


def test_a_database_of_schema_3_moves_its_postings_to_interned_terms_in_place(tree: Path, pg_url: str) -> None:
    """Migration 4 turns version 3's postings (a row per chunk and term, the term as text) into each chunk's
    term ids and counts, in SQL: the statistics answer exactly as before, nothing is counted again from the
    chunks' texts (they are blanked meanwhile), and writes afterwards keep them equal to the chunks."""
    ws = _open(tree, store_url=pg_url)
    try:
        assert isinstance(ws.store, PgStore)
        expected = _term_answers(ws.store)
        # Version 3's postings table as released (migration 2), filled with what its writer wrote.
        postings = re.search(r"CREATE TABLE lex_postings \(.*?\);\nCREATE INDEX lex_postings_chunk[^;]*;",
                             dict(MIGRATIONS)[2], re.S)
        assert postings is not None
        with psycopg.connect(pg_url, autocommit=True) as conn, conn.transaction():
            conn.execute(postings.group(0))
            conn.execute("INSERT INTO lex_postings SELECT c.repo_id, t.term, c.chunk_id, c.file_id, u.tf, c.length,"
                         " c.file_length FROM lex_chunk_terms c, unnest(c.terms, c.tfs) AS u(id, tf)"
                         " JOIN lex_terms t ON t.id = u.id")
            conn.execute("DROP TABLE lex_chunk_terms")
            conn.execute("ALTER TABLE lex_terms DROP COLUMN id")
            conn.execute("DROP TABLE saved_files")  # migration 5's, made after version 4
            conn.execute("DELETE FROM schema_migrations WHERE version >= 4")
            conn.execute("CREATE TABLE saved_texts AS SELECT id, text FROM chunks")
            conn.execute("UPDATE chunks SET text = ''")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert migrate(conn) == SCHEMA_VERSION  # what the next process to open the database does
            tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
            assert "lex_postings" not in tables and "lex_chunk_terms" in tables
            assert conn.execute("SELECT lex_version FROM repositories").fetchall() == [(TOKENS_VERSION,)]
        assert _term_answers(ws.store) == expected
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE chunks c SET text = s.text FROM saved_texts s WHERE s.id = c.id")
        changed = next(p for p in sorted(tree.rglob("*.py")) if p.stat().st_size > 200)
        changed.write_text(changed.read_text() + "\ndef handler_config_lookup():\n    return 'config handler'\n")
        next(p for p in sorted(tree.rglob("*.go"))).unlink()
        assert ws.index().files_indexed == 1
        assert_statistics_match_the_chunks(ws.store)
    finally:
        ws.close()


def _plan_nodes(plan: dict) -> Iterator[dict]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


def test_a_query_term_s_chunks_come_from_the_gin_index_of_their_repository_s_term_ids(tree: Path,
                                                                                      pg_url: str) -> None:
    """The lexical statement looks each query term up in the repository's dictionary and reads the chunks
    holding that id through the GIN index (an id is one repository's term, so no other repository's chunks
    are read); the table is small here, so sequential scans are turned off to ask which index the plan can
    use."""
    ws = _open(tree, store_url=pg_url)
    try:
        terms = tokenize(QUERIES[0])
        with psycopg.connect(pg_url) as conn:
            conn.execute("SET enable_seqscan = off")
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + _TERM_POSTINGS, {
                "terms": terms, "repos": [ws.store.repo_id]}).fetchone()[0][0]["Plan"]
        reads = sorted((node["Node Type"], node.get("Index Name", "")) for node in _plan_nodes(plan)
                       if node.get("Relation Name") == "lex_chunk_terms"
                       or node.get("Index Name", "").startswith("lex_chunk_terms"))
        assert reads == [("Bitmap Heap Scan", ""), ("Bitmap Index Scan", "lex_chunk_terms_terms")], plan
    finally:
        ws.close()


def test_files_written_since_the_snapshot_rank_in_the_view_s_file_and_summary_lanes(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between a snapshot and its rebuild (a save, a queued run's batch, another process's index) a search of the
    shared index answers from a delta view, whose file lane (a file's whole text) and summary lane (its skeleton
    and neighbours' words) ranked only its base's files: a file written since had no row in them, so it lost both
    ranks, and its place, until the rebuild. Its files now score as after the rebuild, in every lane."""
    from test_search import SAVED_FILE_QUESTIONS, write_files

    monkeypatch.setattr(R, "REBUILD_QUIET_S", 3600.0)  # the delta view answers until `refresh`
    ws = _open(write_files(tmp_path / "repo"), store_url=pg_url)
    try:
        searcher = ws.searcher()
        searcher.refresh()
        saved = ["app/auth.py", "app/db.py", "app/render.py"]
        for rel in saved:
            with (ws.root / rel).open("a") as fh:
                fh.write("\n# reviewed\n")
        ws.update_files([ws.root / rel for rel in saved])
        assert searcher.snapshot().base is not None

        def saved_files() -> list[dict[str, tuple[float, str]]]:
            return [{f.path: (round(f.score, 3), f.why) for f in ws.search(q).files if f.path in saved}
                    for q in SAVED_FILE_QUESTIONS]

        from_view = saved_files()
        searcher.refresh()
        assert searcher.snapshot().base is None
        assert from_view == saved_files()
        whys = [why for answer in from_view for _, why in answer.values()]
        assert any("bm25 file #" in why for why in whys) and any("summary #" in why for why in whys)
    finally:
        ws.close()
