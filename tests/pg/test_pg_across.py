"""Searching repositories of the shared index as one ranking (`api.search_repositories`, `search --all`,
`search --repo A,B`, MCP `search` with `repos`): each lane ranks one list across the repositories, and a
query about one repository finds its gold file first among all of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from codeloupe.api import Workspace, open_shared, reopen_shared, search_repositories
from codeloupe.bundle import merge_bundles
from codeloupe.cli import main
from codeloupe.eval import load_golden
from codeloupe.lanes.tokens import tokenize
from codeloupe.store import postgres
from codeloupe_mcp.server import build_server
from codeloupe_serving.warm import WarmWorkspaces

GOLDEN = Path(os.environ.get("CODELOUPE_GOLDEN", "/work/shared/golden/public.json"))
# The corpora .ci/run fetches (CODELOUPE_CORPORA), or another copy of them.
CORPORA = Path(os.environ.get("CODELOUPE_GOLDEN_CORPORA") or os.environ.get("CODELOUPE_CORPORA") or "/work/corpora/golden")
THREE = ("click", "express", "sinatra")
# Queries whose repository's own search ranks the gold file first, and whose gold file lost to another
# repository's file when repositories were ordered by their own fused scores (bench/search_across.py).
ABOUT_ONE = ("click-006", "click-013", "express-004", "express-008", "sinatra-003", "sinatra-015")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
NO_MODEL = {"embed_provider": "none"}


@pytest.mark.slow
@pytest.mark.skipif(not GOLDEN.is_file() or not all((CORPORA / c / "repo").exists() for c in THREE),
                    reason="needs the public golden set and its fetched corpora")
def test_a_query_about_one_of_three_repositories_finds_its_gold_file_first(pg_url: str) -> None:
    for corpus in THREE:
        ws = Workspace(CORPORA / corpus / "repo", overrides={**NO_MODEL, "store_url": pg_url,
                                                              "store_repository": corpus})
        try:
            ws.index()
        finally:
            ws.close()
    queries = {q.id: (corpus.id, q) for corpus in load_golden(GOLDEN).corpora if corpus.id in THREE
               for q in corpus.queries}
    shared = open_shared([], {**NO_MODEL, "store_url": pg_url})
    try:
        assert sorted(ws.repository_name for ws in shared) == sorted(THREE)
        old_method_wrong = 0
        for query_id in ABOUT_ONE:
            corpus, query = queries[query_id]
            assert shared[THREE.index(corpus)].search(query.query).files[0].path in query.gold_files
            first = search_repositories(shared, query.query).files[0]
            assert (first.repository, first.path in query.gold_files) == (corpus, True), query_id
            # What the repositories' own fused scores would have ranked first: mostly another repository's
            # file (which one wins there hangs on near-equal scores, so the count is asserted, not each query).
            separate = merge_bundles(query.query, "code", {ws.repository_name: ws.search(query.query)
                                                           for ws in shared})
            old_method_wrong += separate.files[0].repository != corpus
        assert old_method_wrong >= len(ABOUT_ONE) - 1
    finally:
        for ws in shared:
            ws.close()


def _indexed_checkouts(tmp_path: Path, pg_url: str) -> dict[str, str]:
    """Three fixture trees committed to git and indexed into the shared index; their HEAD commits."""
    heads = {}
    for name in ("python", "go", "js"):
        root = tmp_path / name
        shutil.copytree(FIXTURES / name, root)
        for command in (["init", "-q"], ["add", "-A"],
                        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "fixture"]):
            subprocess.run(["git", "-C", str(root), *command], check=True)
        heads[name] = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                     check=True).stdout.strip()
        ws = Workspace(root, overrides={**NO_MODEL, "store_url": pg_url})
        try:
            ws.index()
        finally:
            ws.close()
    return heads


def test_search_all_and_a_subset_from_the_command_line_name_repository_and_commit(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    heads = _indexed_checkouts(tmp_path, pg_url)
    assert main(["search", "--store", pg_url, "--all", "flush the store, parse the route, total of the cart",
                 "--json"]) == 0
    bundle = json.loads(capsys.readouterr().out)
    hits = bundle["core"] + bundle["related"]
    assert {hit["repository"] for hit in hits} == set(heads)  # one ranking holding every repository
    assert all(hit["revision"] == heads[hit["repository"]] for hit in hits)
    assert [hit["rank"] for hit in hits] == list(range(1, len(hits) + 1))
    assert main(["search", "--store", pg_url, "--all", "open the store and flush it", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["core"][0]["repository"] == "go"
    # The header counts the bundle's candidates, not the files of the repositories searched: "N files" was read
    # as the second.
    assert main(["search", "--store", pg_url, "--all", "flush the store, parse the route, total of the cart"]) == 0
    [header] = [line for line in capsys.readouterr().out.splitlines() if " · lanes: " in line]
    assert header.startswith(f"{len(hits)} candidate files · lanes: "), header

    assert main(["search", "--store", pg_url, "--repo", "python,js", "charge the card total price",
                 "--prune"]) == 0
    chunks = json.loads(capsys.readouterr().out)["chunks"]
    assert chunks and {c["repository"] for c in chunks} <= {"python", "js"} and chunks[0]["repository"] == "python"
    assert main(["search", "--store", pg_url, "--repo", "python,nowhere", "charge"]) == 2
    assert "nowhere: not in the shared index" in capsys.readouterr().err
    assert main(["search", "--store", pg_url, "charge"]) == 2  # neither a PATH, nor --all, nor --repo


async def test_the_mcp_search_tool_takes_the_repositories_to_search_as_one(tmp_path: Path, pg_url: str) -> None:
    heads = _indexed_checkouts(tmp_path, pg_url)
    pool = WarmWorkspaces(open_shared([], {**NO_MODEL, "store_url": pg_url}))
    try:
        async with Client(build_server(pool.all[0], pool)) as client:
            answer = await client.call_tool("search", {"query": "open the store and flush it", "repos": ["*"],
                                                       "flat": True})
            chunks = json.loads("".join(part.text for part in answer.content))["chunks"]
            assert chunks[0]["repository"] == "go" and chunks[0]["revision"] == heads["go"]
            text = "".join(part.text for part in (await client.call_tool(
                "search", {"query": "charge the card total price", "repos": ["python", "js"]})).content)
            assert "## 1. `python:" in text and f"@ {heads['python'][:12]}" in text and "go:" not in text
            refused = await client.call_tool("search", {"query": "charge", "repos": ["nowhere"]})
            assert refused.is_error and "not a served workspace" in "".join(p.text for p in refused.content)
            # A file found in another repository than the one served here is read by naming its repository.
            found = await client.call_tool("search", {"query": "charge the card total price", "repos": ["python"],
                                                      "flat": True})
            first = json.loads("".join(part.text for part in found.content))["chunks"][0]
            assert first["repository"] == "python" != pool.all[0].root.name
            line = first["start_line"]
            read = await client.call_tool("expand", {"path": first["path"], "repo": "python", "start_line": line,
                                                     "end_line": line})
            assert not read.is_error and "".join(p.text for p in read.content).startswith(
                f"`{first['path']}:{line}-{line}`"), read.content
    finally:
        pool.close()


def test_repositories_opened_together_share_one_embedding_model(pg_url: str) -> None:
    """Every repository of an organisation opened at once (a server, `search --all`) embeds the query with
    one provider: each loading its own model held a copy per repository (200 at organisation scale)."""
    for corpus in ("one", "two", "three"):
        ws = Workspace(FIXTURES, overrides={**NO_MODEL, "store_url": pg_url, "store_repository": corpus})
        try:
            ws.index()
        finally:
            ws.close()
    model = {"embed_provider": "openai", "embed_base_url": "http://127.0.0.1:9/v1", "embed_model": "scripted"}
    shared = open_shared([], {**model, "store_url": pg_url})
    try:
        providers = {id(ws.embedding_provider()) for ws in shared}
        assert len(shared) == 3 and len(providers) == 1
        # One indexed while they are open (a server lists them again): it embeds with their model too.
        ws = Workspace(FIXTURES, overrides={**NO_MODEL, "store_url": pg_url, "store_repository": "four"})
        try:
            ws.index()
        finally:
            ws.close()
        added, gone = reopen_shared(shared, [], {**model, "store_url": pg_url})
        shared += added
        assert [ws.repository_name for ws in added] == ["four"] and gone == []
        assert {id(ws.embedding_provider()) for ws in shared} == providers
    finally:
        for ws in shared:
            ws.close()


def test_every_repository_is_asked_the_lexical_lanes_in_one_statement_a_pass(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search across repositories asks the database for the query's BM25 once per pass for all of them
    (its own IDF, then the pooled IDF of the chunk and file lanes together), where each repository and lane
    asked on its own before (3 x repositories statements and more); the ranking is the one the passes give
    repository by repository."""
    names = ("one", "two", "three")
    for corpus in names:
        ws = Workspace(FIXTURES, overrides={**NO_MODEL, "store_url": pg_url, "store_repository": corpus})
        try:
            ws.index()
        finally:
            ws.close()
    query = "where are requests routed to handlers"
    reference = open_shared([], {**NO_MODEL, "store_url": pg_url})
    alone = {ws.repository_name: ws.searcher().lane_scores(query) for ws in reference}
    pooled = {ws.repository_name: ws.searcher().lane_scores(
        query, peers=[s for n, s in alone.items() if n != ws.repository_name]) for ws in reference}
    expected = merge_bundles(query, "code", {ws.repository_name: ws.search(
        query, peers=[s for n, s in pooled.items() if n != ws.repository_name]) for ws in reference})

    asked: list[tuple[int, list[str]]] = []
    real = postgres.term_scores_across

    def counted(stores: list[postgres.PgStore], terms: list[str], *args: object, **kwargs: object) -> object:
        asked.append((len(stores), sorted(terms)))
        return real(stores, terms, *args, **kwargs)

    monkeypatch.setattr(postgres, "term_scores_across", counted)
    shared = open_shared([], {**NO_MODEL, "store_url": pg_url})
    try:
        bundle = search_repositories(shared, query)
        assert [(f.repository, f.path, f.score) for f in bundle.files] == \
            [(f.repository, f.path, f.score) for f in expected.files]
        terms = sorted(tokenize(query))
        assert asked.count((3, terms)) == 2  # the repository's own IDF, then the pooled IDF
        assert all(n == 3 for n, t in asked if t == terms)  # no repository asked the query's terms alone
        assert len(asked) <= 2 + len(names)  # besides: each repository's feedback expansion, in its bundle
    finally:
        for ws in (*reference, *shared):
            ws.close()
