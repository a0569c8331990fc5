"""The PostgreSQL store against the SQLite one on the same trees: the same files, chunks, symbols and graph,
and search answering with the same bundle (fusion and the bundle are the same code above both stores)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from codeloupe.api import Workspace
from codeloupe.settings import load_settings
from codeloupe.store import Store, StoreError
from codeloupe.store.postgres import MIGRATIONS, PgStore
from codeloupe.store.protocol import IndexStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # chat_server.py

from chat_server import ChatServer  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
QUERIES = ["parse the configuration file", "where are requests routed to handlers", "load settings",
           "the main entry point of the command line", "Session store token lookup", "resolve import paths"]


def _open(root: Path, **overrides) -> Workspace:
    ws = Workspace(root, overrides={"embed_provider": "none", **overrides})
    ws.index()
    return ws


def _answer(ws: Workspace, query: str) -> tuple[list[str], list[str], list[tuple[str, int, int, str | None]]]:
    """(files, RELATED files, each shown chunk's lines and the definition its snippet is named by)."""
    bundle = ws.search(query)
    return ([h.path for h in bundle.files], [h.path for h in bundle.related],
            [(c.path, c.start_line, c.end_line, c.snippet.anchor_symbol if c.snippet else None)
             for h in bundle.files for c in h.chunks])


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "fixture-repo"
    shutil.copytree(FIXTURES, root)
    return root


def test_both_stores_satisfy_the_store_protocol(tmp_path: Path, pg_url: str) -> None:
    sqlite = Store(tmp_path / "index.sqlite")
    shared = PgStore(pg_url, "r", local_dir=tmp_path)
    try:
        assert isinstance(sqlite, IndexStore) and isinstance(shared, IndexStore)
    finally:
        sqlite.close()
        shared.close()


def test_lexical_search_returns_the_same_bundle_from_both_stores(tree: Path, pg_url: str) -> None:
    local, shared = _open(tree), _open(tree, store_url=pg_url)
    try:
        assert isinstance(shared.store, PgStore)
        assert shared.status().index_path.endswith("(repository fixture-repo)")
        assert shared.status().files == local.status().files > 20
        assert shared.status().chunks == local.status().chunks
        assert shared.store.symbol_rows() and len(shared.store.symbol_rows()) == len(local.store.symbol_rows())
        assert all(_answer(local, query)[0] for query in QUERIES[1:])
        for query in QUERIES:
            assert _answer(shared, query) == _answer(local, query), query
        assert any(anchor for query in QUERIES for *_, anchor in _answer(shared, query)[2])
        graphs = [ws.graph_map() for ws in (local, shared)]
        assert graphs[1].edges and graphs[1].edges == graphs[0].edges
        assert graphs[1].nodes == graphs[0].nodes
    finally:
        local.close()
        shared.close()


@contextmanager
def _embedded(tree: Path, pg_url: str) -> Iterator[tuple[Workspace, Workspace]]:
    """(SQLite workspace, PostgreSQL workspace) of `tree`, both embedded by the scripted model."""
    with ChatServer() as chat:
        embed = {"embed_provider": "openai", "embed_base_url": chat.base_url, "embed_model": "scripted"}
        local, shared = _open(tree, **embed), _open(tree, store_url=pg_url, **embed)
        try:
            local.embed()
            shared.embed()
            yield local, shared
        finally:
            local.close()
            shared.close()


def _dense_files(ws: Workspace, query: str) -> list[str]:
    return [h.path for h in ws.searcher().search(query, lanes=("dense",)).files]


def test_dense_lane_answers_from_pgvector_with_the_same_ranking(tree: Path, pg_url: str) -> None:
    with _embedded(tree, pg_url) as (local, shared):
        assert shared.status().vectors_done == shared.status().vectors_total > 0
        for query in QUERIES[:3]:
            assert _dense_files(shared, query) == _dense_files(local, query), query
            assert _answer(shared, query) == _answer(local, query), query


def test_repositories_share_one_schema_and_never_see_each_others_rows(tree: Path, tmp_path: Path,
                                                                      pg_url: str) -> None:
    other = tmp_path / "other"
    shutil.copytree(FIXTURES / "go", other)
    first, second = _open(tree, store_url=pg_url), _open(other, store_url=pg_url)
    try:
        assert first.store.repo_id != second.store.repo_id
        assert set(second.store.file_rows()) == {p.relative_to(other).as_posix()
                                                 for p in other.rglob("*") if p.is_file()}
        assert not set(second.store.file_rows()) & {p for p in first.store.file_rows() if not p.startswith("go/")}
        with psycopg.connect(pg_url) as conn:
            versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
            repos = conn.execute("SELECT count(DISTINCT repo_id) FROM files").fetchone()[0]
        assert versions == [v for v, _ in MIGRATIONS] and repos == 2
        second.store.delete_files(list(second.store.file_rows()))
        assert first.store.counts() == _open(tree, store_url=pg_url).store.counts()  # untouched
    finally:
        first.close()
        second.close()


def test_a_workspace_cannot_choose_the_shared_database(tree: Path, pg_url: str) -> None:
    (tree / ".codeloupe.toml").write_text(f'store_url = "{pg_url}"\nstore_repository = "someone-else"\n')
    settings = load_settings(tree, trusted=True)
    assert settings.store_url == "" and settings.store_repository == ""


def test_citations_are_pinned_to_the_commit_indexed(tree: Path, pg_url: str) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tree)}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run([git, "-C", str(tree), *args], check=True, env=env)
    head = subprocess.run([git, "-C", str(tree), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    ws = _open(tree, store_url=pg_url)
    try:
        assert ws.revision == head
        assert ws.search(QUERIES[0]).revision == head
        with psycopg.connect(pg_url) as conn:
            assert {r[0] for r in conn.execute("SELECT DISTINCT commit_sha FROM files")} == {head}
    finally:
        ws.close()



def _hnsw_scans(pg_url: str) -> int:
    with psycopg.connect(pg_url) as conn:
        return conn.execute("SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes"
                            " WHERE indexrelname LIKE 'chunk_vectors_hnsw_%'").fetchone()[0]


def test_a_large_repository_is_searched_through_the_hnsw_index(tree: Path, pg_url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from codeloupe.store import postgres

    monkeypatch.setattr(postgres, "EXACT_SEARCH_MAX_VECTORS", 0)  # this small tree counts as large
    with _embedded(tree, pg_url) as (local, shared):
        before = _hnsw_scans(pg_url)
        found = _dense_files(shared, QUERIES[1])
        shared.store.query("SELECT pg_stat_force_next_flush()")  # the store's session reports its scans
        # ef_search is raised to the rows wanted, so on a tree this small HNSW finds every neighbour.
        assert found == _dense_files(local, QUERIES[1])
        assert _hnsw_scans(pg_url) > before

def test_a_repository_walks_its_own_hnsw_graph_not_every_repository_s(tree: Path, tmp_path: Path, pg_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """pgvector 0.6 filters HNSW results after the scan: with one index over every repository, a repository
    beside another of as many vectors kept about half of its neighbours. Each repository has its own index."""
    from codeloupe.store import postgres

    monkeypatch.setattr(postgres, "EXACT_SEARCH_MAX_VECTORS", 0)
    monkeypatch.setattr(postgres, "HNSW_EF_SEARCH_MAX", 10)  # a walk no wider than the rows asked for
    twin = tmp_path / "twin"
    shutil.copytree(tree, twin)
    for path in twin.rglob("*"):  # other text, so other vectors (equal vectors share one element of the graph)
        if path.is_file():
            path.write_text("".join(line.rstrip("\n") + " \n" for line in path.read_text().splitlines(True)))
    with ChatServer() as chat:
        embed = {"embed_provider": "openai", "embed_base_url": chat.base_url, "embed_model": "scripted"}
        shared = _open(tree, store_url=pg_url, **embed)
        other = _open(twin, store_url=pg_url, store_repository="twin", **embed)
        try:
            shared.embed()
            other.embed()
            qvec = shared.embedding_provider().embed_query(QUERIES[1])
            model = shared.embedding_provider().model_id
            own = set(shared.store.vector_matrix_ids("chunk", model).tolist())
            assert len(other.store.vector_matrix_ids("chunk", model)) >= len(own) > 10
            found = shared.store.nearest_chunks(model, qvec, 10, 0.0)
            assert len(found) == 10 and {i for i, _ in found} <= own
        finally:
            shared.close()
            other.close()


def test_a_second_folder_of_the_same_name_is_refused_unless_named(tree: Path, tmp_path: Path, pg_url: str) -> None:
    _open(tree, store_url=pg_url).close()
    twin = tmp_path / "elsewhere" / tree.name
    shutil.copytree(FIXTURES / "go", twin)
    ws = Workspace(twin, overrides={"embed_provider": "none", "store_url": pg_url})
    try:
        with pytest.raises(StoreError, match="--repo"):
            ws.index()
        assert len(ws.store.file_rows()) > len(list((FIXTURES / "go").rglob("*.go")))  # the first one's files
    finally:
        ws.close()
    named = _open(twin, store_url=pg_url, store_repository="go-service")
    try:
        assert named.store.repository == "go-service"
        assert set(named.store.file_rows()) == {p.relative_to(twin).as_posix() for p in twin.rglob("*") if p.is_file()}
    finally:
        named.close()


def test_content_embedded_for_one_repository_is_never_embedded_again_for_another(
        tree: Path, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tree, copy)
    with ChatServer() as chat:
        embed = {"embed_provider": "openai", "embed_base_url": chat.base_url, "embed_model": "scripted",
                 "store_url": pg_url}
        first = _open(tree, **embed)
        try:
            assert first.embed().computed > 0
        finally:
            first.close()
        asked = len(chat.received)
        # Another machine: its own (empty) vector cache, the same database.
        monkeypatch.setenv("CODELOUPE_CACHE_DIR", str(tmp_path / "another-machine"))
        second = _open(copy, **embed)
        try:
            report = second.embed()
            assert report.computed == 0 and len(chat.received) == asked
            assert second.status().vectors_done == second.status().vectors_total > 0
        finally:
            second.close()


def test_many_repositories_share_a_few_connections(tmp_path: Path, pg_url: str) -> None:
    stores = [PgStore(pg_url, f"repo-{i}", local_dir=tmp_path) for i in range(40)]
    for store in stores:
        assert store.counts() == {"files": 0, "chunks": 0, "symbols": 0}
        store.set_meta("seen", store.repository)
    assert [store.get_meta("seen") for store in stores] == [store.repository for store in stores]
    with psycopg.connect(pg_url) as conn:
        opened = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                              " AND pid != pg_backend_pid()").fetchone()[0]
    assert opened <= 2  # one at a time here: no connection per repository


def test_threads_of_a_server_query_one_repository_at_once(tree: Path, pg_url: str) -> None:
    ws = _open(tree, store_url=pg_url)
    try:
        expected = _answer(ws, QUERIES[1])
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: _answer(ws, QUERIES[1]), range(16)))
        assert answers == [expected] * 16
    finally:
        ws.close()


def test_a_restart_on_the_shared_index_loads_its_saved_snapshot(tree: Path, pg_url: str) -> None:
    """The saved search snapshot goes beside PgStore.path as beside a SQLite file, and the server's start-up
    path (integrity check deferred, chunking before edges) runs on PgStore too."""
    from codeloupe.snapshot_file import snapshot_file

    local = _open(tree)
    first = Workspace(tree, overrides={"embed_provider": "none", "store_url": pg_url}, check_index=False)
    try:
        assert first.check_index() == ""
        first.index(edges=False)
        expected = [_answer(first, query) for query in QUERIES]
        assert expected == [_answer(local, query) for query in QUERIES]
        saved = snapshot_file(first.store.path)
        assert saved.is_file()
        written = saved.stat().st_mtime_ns
    finally:
        first.close()
        local.close()
    again = _open(tree, store_url=pg_url)  # nothing changed: no file is re-read, the snapshot is loaded
    try:
        assert again.status().files > 20
        assert [_answer(again, query) for query in QUERIES] == expected
        assert saved.stat().st_mtime_ns == written
    finally:
        again.close()


# What a snapshot reads of a repository's tables whole (each store method's statement, on the scoped views).
SNAPSHOT_READS = {
    "symbols": "SELECT id, file_id FROM scoped.symbols WHERE id > -1 ORDER BY id LIMIT 50000",
    "skeletons": "SELECT file_id, text FROM scoped.skeletons",
    "skeleton_vectors": "SELECT file_id, vec FROM scoped.skeleton_vectors WHERE model = 'm' ORDER BY file_id",
    "graph_facts": "SELECT file_id, facts FROM scoped.graph_facts",
}


@pytest.mark.parametrize("table", sorted(SNAPSHOT_READS))
def test_a_repository_s_rows_are_read_through_an_index_on_its_own_range(tree: Path, tmp_path: Path,
                                                                         pg_url: str, table: str) -> None:
    """The snapshot reads a repository's symbols (a page of ids at a time), skeletons, skeleton vectors and
    graph facts. Through the primary key alone each read walked every repository's rows and filtered them
    (at 200 repositories, opening them all took minutes); an index starting with repo_id reads only the
    repository's own range."""
    other = tmp_path / "other"
    shutil.copytree(FIXTURES / "go", other)
    first, second = _open(tree, store_url=pg_url), _open(other, store_url=pg_url)
    try:
        expected = second.store.symbol_rows()
        assert expected and list(second.store.iter_symbol_rows(page=2)) == expected
        with psycopg.connect(pg_url) as conn:
            conn.execute(f"SET codeloupe.repo_id = {second.store.repo_id}")
            conn.execute("SET enable_seqscan = off")  # the tables are small: ask which index the plan reads
            conn.execute("SET enable_sort = off")
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + SNAPSHOT_READS[table]).fetchone()[0][0]["Plan"]
        while "Index Cond" not in plan:
            plan = plan["Plans"][0]
        assert "repo_id" in plan["Index Cond"], plan
    finally:
        first.close()
        second.close()


def test_a_repository_s_texts_are_read_for_the_files_asked_for(tree: Path, tmp_path: Path, pg_url: str) -> None:
    """The summary and entity lanes read skeletons and definition words a page of files at a time: on the shared
    schema a page gives exactly those files' texts, and another repository's file ids give nothing."""
    other = tmp_path / "other"
    shutil.copytree(FIXTURES / "go", other)
    first, second = _open(tree, store_url=pg_url), _open(other, store_url=pg_url)
    try:
        for read, read_other in ((first.store.skeletons, second.store.skeletons),
                                 (first.store.definition_words, second.store.definition_words)):
            every = read()
            some = sorted(every)[1:4]
            assert len(every) > 4 and read(some) == {file_id: every[file_id] for file_id in some}
            assert read(sorted(read_other())) == {}
    finally:
        first.close()
        second.close()


def test_a_save_reads_the_saved_files_rows_in_both_stores(tree: Path, tmp_path: Path, pg_url: str) -> None:
    """`file_rows(paths)` (a save's read) gives exactly those files' rows from either store, and on the shared
    schema never another repository's file of a path this one lacks."""
    other = tmp_path / "other"
    shutil.copytree(FIXTURES / "go", other)
    local, shared, second = _open(tree), _open(tree, store_url=pg_url), _open(other, store_url=pg_url)
    try:
        for ws in (local, shared):
            every = ws.store.file_rows()
            some = sorted(every)[1:4]
            assert ws.store.file_rows([*some, "no/such/file.py", some[0]]) == {p: every[p] for p in some}
        theirs = [p for p in second.store.file_rows() if p not in shared.store.file_rows()]
        assert theirs and shared.store.file_rows(theirs) == {}
        assert {p: (r.hash, r.size) for p, r in local.store.file_rows().items()} == \
            {p: (r.hash, r.size) for p, r in shared.store.file_rows().items()}
    finally:
        local.close()
        shared.close()
        second.close()
