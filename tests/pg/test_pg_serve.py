"""`codeloupe serve --store URL`: the HTTP API over repositories of the shared index, with no checkout on the
serving machine (files are rebuilt from the index's chunks) and answers pinned to the commit indexed."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import httpx2 as httpx
import pytest
from mcp import Client
from served_store import served_store

from codeloupe.api import Workspace, WorkspaceError, drop_shared_repository, open_shared, reopen_shared
from codeloupe.cli import main
from codeloupe.store import postgres
from codeloupe_mcp.server import build_server
from codeloupe_serving.warm import WarmWorkspaces
from codeloupe_web.app import create_app

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
# A query every fixture used here answers: go's store flushes, python's and ruby's carts total their prices.
ACROSS = "flush the store, total price"
NO_MODEL = {"embed_provider": "none"}


def test_serve_answers_every_repository_of_the_shared_index_without_a_checkout(tmp_path: Path,
                                                                               pg_url: str) -> None:
    queries = {"python": "charge the card total price", "go": "open the store and flush it"}
    expected = {}
    for name, query in queries.items():
        root = tmp_path / name
        shutil.copytree(FIXTURES / name, root)
        ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url})
        try:
            ws.index()
            expected[name] = ([h.path for h in ws.search(query).files],
                              (root / next(iter(sorted(ws.store.file_rows())))).read_text())
            first_path = sorted(ws.store.file_rows())[0]
        finally:
            ws.close()
        assert expected[name][0]
        if name == "python":
            python_first = first_path
        shutil.rmtree(root)  # the server has no checkout to read from
    with served_store(pg_url) as base:
        for name, query in queries.items():
            bundle = httpx.get(f"{base}/v1/search", params={"q": query, "root": name}).json()
            assert [f["path"] for f in bundle["core"] + bundle["related"]] == expected[name][0]
        text = httpx.get(f"{base}/v1/expand", params={"path": python_first, "root": "python"}).json()["text"]
        assert text == expected["python"][1]
        everything = httpx.get(f"{base}/v1/search/all", params={"q": "flush the store, total price"}).json()
        assert {hit["repository"] for hit in everything["core"] + everything["related"]} == {"python", "go"}
        subset = httpx.get(f"{base}/v1/search/all", params={"q": "flush the store, total price", "repos": "go"})
        assert {hit["repository"] for hit in subset.json()["core"] + subset.json()["related"]} == {"go"}
        assert httpx.get(f"{base}/v1/search/all", params={"q": "flush", "repos": "go,nowhere"}).status_code == 400
        # `*` names every repository, as in MCP's `repos` (it was refused as "not a served workspace" here).
        starred = httpx.get(f"{base}/v1/search/all", params={"q": "flush the store, total price", "repos": "*"})
        assert starred.status_code == 200, starred.text
        assert {hit["repository"] for hit in starred.json()["core"] + starred.json()["related"]} == {"python", "go"}
        status = httpx.get(f"{base}/v1/status").json()["workspaces"]
        assert {w["root"] for w in status} == {"python", "go"} and all(w["files"] for w in status)


def test_serve_takes_repositories_as_search_does_and_the_shared_index_from_the_store_url_setting(
        tmp_path: Path, pg_url: str) -> None:
    """`serve --repo python,go` was taken for one repository "python,go" (refused: not in the shared index), and
    serve read the shared index from `--store` only: `--repo` without it served the current folder."""
    for name in ("python", "go", "ruby"):
        ws = Workspace(shutil.copytree(FIXTURES / name, tmp_path / name), overrides={**NO_MODEL, "store_url": pg_url})
        try:
            ws.index()
        finally:
            ws.close()
    with served_store(pg_url, "--repo", "python,go", env={"CODELOUPE_STORE_URL": pg_url}) as base:
        status = httpx.get(f"{base}/v1/status").json()["workspaces"]
        assert sorted(w["root"] for w in status) == ["go", "python"]


def test_serve_answers_a_graph_target_from_the_index_never_from_its_own_working_directory(
        tmp_path: Path, pg_url: str, monkeypatch) -> None:
    root = tmp_path / "python"
    shutil.copytree(FIXTURES / "python", root)
    (root / "NOTES.md").write_text("# Notes\n\nIndexed, and no node of the graph.\n")
    ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url})
    try:
        ws.index()
    finally:
        ws.close()
    shutil.rmtree(root)
    # The server's working directory holds a folder named as the repository, with things the index does not
    # hold: a graph request once answered from them (`python` was taken for a folder of this machine).
    here = tmp_path / "server"
    (here / "python" / "planted" / "deeper").mkdir(parents=True)
    (here / "python" / "planted.py").write_text("print('on the server only')\n")
    monkeypatch.chdir(here)
    with served_store(pg_url) as base:
        def graph(node: str) -> httpx.Response:
            return httpx.get(f"{base}/v1/graph", params={"node": node, "root": "python"})

        for planted in ("planted/deeper", "planted.py"):
            assert graph(planted).json() == {"error": f"{planted} is not in the graph (no such file in the workspace)"}
        # What the index holds is answered with no checkout: a folder's part of the graph, a file not of it.
        folder = graph("src/shop").json()
        assert folder["folder"] == "src/shop" and "src/shop/cart.py" in [f["path"] for f in folder["files"]]
        assert graph("NOTES.md").json() == {"error": "NOTES.md is not in the graph (not a code file of the graph)"}


def _indexed(tmp_path: Path, pg_url: str, name: str, fixture: str) -> None:
    """The fixture `fixture` indexed as repository `name` from a checkout of its own."""
    root = tmp_path / f"{name}-{fixture}"
    shutil.copytree(FIXTURES / fixture, root)
    ws = Workspace(root, overrides={**NO_MODEL, "store_url": pg_url, "store_repository": name})
    try:
        ws.index()
    finally:
        ws.close()


def _answered_paths(bundle: dict) -> dict[str, set[str]]:
    """The files a bundle across repositories answers with, by repository."""
    found: dict[str, set[str]] = {}
    for hit in bundle["core"] + bundle["related"]:
        found.setdefault(hit["repository"], set()).add(hit["path"])
    return found


async def _searched_once(base: str, repositories: set[str]) -> dict[str, set[str]]:
    """What a search across every served repository answers once it answers from `repositories` (they are listed
    again every few seconds: asked until then, every answer a whole one)."""
    for _ in range(600):  # not a speed check
        answer = httpx.get(f"{base}/v1/search/all", params={"q": ACROSS})
        assert answer.status_code == 200, answer.text
        found = _answered_paths(answer.json())
        if set(found) == repositories:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"never answered from {sorted(repositories)} alone: {sorted(found)}")


async def test_serve_of_every_repository_follows_the_shared_index_as_repositories_are_dropped_and_indexed(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --store URL` listed the repositories once, at its start: after `admin drop b` every search across
    them failed (503, b's rows gone) until a restart, and a repository indexed since was never searched. It lists
    them again as calls come, over HTTP and MCP alike."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    _indexed(tmp_path, pg_url, "a", "python")
    _indexed(tmp_path, pg_url, "b", "go")
    with served_store(pg_url) as base:
        assert set(await _searched_once(base, {"a", "b"})) == {"a", "b"}
        assert main(["admin", "--store", pg_url, "drop", "b"]) == 0
        await _searched_once(base, {"a"})
        assert httpx.get(f"{base}/v1/search", params={"q": ACROSS, "root": "b"}).status_code == 400
        _indexed(tmp_path, pg_url, "c", "ruby")
        # Dropped and indexed again under its name: another repository, served in the first one's place.
        _indexed(tmp_path, pg_url, "b", "ruby")
        found = await _searched_once(base, {"a", "b", "c"})
        assert found["b"] <= {"lib/shop.rb", "lib/shop/cart.rb", "lib/shop/pricing.rb", "test/cart_test.rb"}
        assert httpx.get(f"{base}/v1/search", params={"q": ACROSS, "root": "c"}).status_code == 200
        assert {w["root"] for w in httpx.get(f"{base}/v1/status").json()["workspaces"]} == {"a", "b", "c"}
        async with Client(f"{base}/mcp", read_timeout_seconds=60) as client:
            answer = await client.call_tool("search", {"query": ACROSS, "repos": ["*"], "flat": True})
            chunks = json.loads("".join(part.text for part in answer.content))["chunks"]
            assert {chunk["repository"] for chunk in chunks} == {"a", "b", "c"}


def _relisting_pool(pg_url: str, relist_interval_s: float) -> WarmWorkspaces:
    """Every repository of the shared index warm, listed again as `serve --store URL` lists them."""
    overrides = {**NO_MODEL, "store_url": pg_url}
    pool = WarmWorkspaces(open_shared([], overrides), relist=lambda opened: reopen_shared(opened, [], overrides),
                          relist_interval_s=relist_interval_s)
    for warm in pool.all:
        warm.fresh()  # the first index
    return pool


def _repositories_found(pool: WarmWorkspaces) -> set[str]:
    return {hit.repository for hit in pool.search_across(["*"], ACROSS).files}


def test_a_repository_dropped_or_replaced_is_closed_once_no_call_holds_it(tmp_path: Path, pg_url: str) -> None:
    """What a server stops serving is closed (its connections, its snapshot), but never under a call still using
    it: a copy replaced was left open for good, and closing it at once failed the calls holding it."""
    for name, fixture in (("a", "python"), ("b", "go")):
        _indexed(tmp_path, pg_url, name, fixture)
    pool = _relisting_pool(pg_url, relist_interval_s=0)  # listed again before each call
    try:
        a, b = pool.all
        drop_shared_repository(pg_url, "b")
        assert pool.relist() and pool.all == [a]
        b.closer.join()
        assert b.ws.closed
        with pytest.raises(WorkspaceError, match="no longer served"), b.held():
            pass
        assert _repositories_found(pool) == {"a"}
        with a.held():  # a call under way on `a` as it is dropped and indexed again
            drop_shared_repository(pg_url, "a")
            _indexed(tmp_path, pg_url, "a", "ruby")
            assert pool.relist()
            [replaced] = pool.all
            assert replaced is not a and a.closer is None and not a.ws.closed
        a.closer.join()
        assert a.ws.closed
        assert {hit.path for hit in pool.search_across(["a"], ACROSS).files} <= {
            "lib/shop.rb", "lib/shop/cart.rb", "lib/shop/pricing.rb", "test/cart_test.rb"}
        _indexed(tmp_path, pg_url, "c", "go")
        assert pool.relist() and _repositories_found(pool) == {"a", "c"}
        assert not pool.relist()  # nothing changed since
    finally:
        pool.close()


def test_a_listing_under_way_as_the_server_closes_closes_what_it_opened(tmp_path: Path, pg_url: str) -> None:
    """A listing (on a worker thread) that opened a repository indexed since, ending after the pool closed, added
    it to a pool nobody closed again: its connections stayed open until the process died."""
    _indexed(tmp_path, pg_url, "a", "python")
    overrides = {**NO_MODEL, "store_url": pg_url}
    listing, closed = threading.Event(), threading.Event()
    opened_here: list[Workspace] = []

    def relist(opened):
        found = reopen_shared(opened, [], overrides)
        opened_here.extend(found[0])
        listing.set()
        closed.wait()
        return found

    pool = WarmWorkspaces(open_shared([], overrides), relist=relist)
    _indexed(tmp_path, pg_url, "b", "go")
    lister = threading.Thread(target=pool.relist, kwargs={"force": True})
    lister.start()
    listing.wait()
    pool.close()
    closed.set()
    lister.join()
    assert [ws.root.name for ws in opened_here] == ["b"]
    assert all(ws.closed for ws in opened_here)


def test_a_repository_dropped_while_a_call_holds_it_is_closed_with_the_server(tmp_path: Path, pg_url: str) -> None:
    """The server's close waited only for retired workspaces already closing: one a call still held was closed
    by that call's end, which a process exiting did not wait for (its connections left to the exit)."""
    for name, fixture in (("a", "python"), ("b", "go")):
        _indexed(tmp_path, pg_url, name, fixture)
    pool = _relisting_pool(pg_url, relist_interval_s=0)
    a, _b = pool.all
    with a.held():
        drop_shared_repository(pg_url, "a")
        assert pool.relist() and a.closer is None
        pool.close()
        assert a.ws.closed
    assert a.closer is not None and not a.closer.is_alive()


def test_a_search_meeting_a_repository_dropped_since_the_last_listing_answers_from_the_others(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between two listings a dropped repository fails the search that reads it: the repositories are listed at
    once, and the search answers from those left."""
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)  # a repository's row is read on every search
    for name, fixture in (("a", "python"), ("b", "go")):
        _indexed(tmp_path, pg_url, name, fixture)
    pool = _relisting_pool(pg_url, relist_interval_s=3600)  # no listing comes due during the test
    try:
        assert _repositories_found(pool) == {"a", "b"}
        drop_shared_repository(pg_url, "b")
        assert _repositories_found(pool) == {"a"}
        assert [warm.root.name for warm in pool.all] == ["a"]
    finally:
        pool.close()


async def test_the_repositories_are_listed_again_on_a_worker_thread_never_on_the_event_loop(
        tmp_path: Path, pg_url: str) -> None:
    """Listing them asks the database: on the event loop, every call of the server waited for it."""
    _indexed(tmp_path, pg_url, "a", "python")
    _indexed(tmp_path, pg_url, "b", "go")
    overrides = {**NO_MODEL, "store_url": pg_url}
    listed_on: list[threading.Thread] = []

    def relist(opened):
        listed_on.append(threading.current_thread())
        return reopen_shared(opened, [], overrides)

    pool = WarmWorkspaces(open_shared([], overrides), relist=relist, relist_interval_s=0)
    try:
        _indexed(tmp_path, pg_url, "c", "ruby")
        transport = httpx.ASGITransport(app=create_app(pool))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            for path, params in (("/v1/search/all", {"q": ACROSS}), ("/v1/search", {"q": ACROSS, "root": "c"}),
                                 ("/v1/status", {})):
                answer = await http.get(path, params=params)
                assert answer.status_code == 200, (path, answer.text)
        async with Client(build_server(pool.all[0], pool)) as client:
            answer = await client.call_tool("search", {"query": ACROSS, "repos": ["c"]})
            assert not answer.is_error, answer.content
        assert len(listed_on) >= 4 and threading.current_thread() not in listed_on
    finally:
        pool.close()


async def test_a_status_poll_more_often_than_the_listing_interval_never_holds_the_listing_off(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A monitor polling /v1/status every few seconds kept `serve --store` from ever listing the repositories
    again: each poll asked for a listing, found none due, and counted itself as one, so the next came due only
    after a quiet interval. A repository indexed (or dropped and indexed again) after the server started was then
    never served while the monitor ran. The server's clock is the test's: no timer."""
    import codeloupe_serving.warm as warm_module

    now = [0.0]
    monkeypatch.setattr(warm_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    _indexed(tmp_path, pg_url, "a", "python")
    overrides = {**NO_MODEL, "store_url": pg_url}
    pool = WarmWorkspaces(open_shared([], overrides), relist=lambda opened: reopen_shared(opened, [], overrides),
                          relist_interval_s=5)
    try:
        _indexed(tmp_path, pg_url, "b", "go")
        transport = httpx.ASGITransport(app=create_app(pool))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            served = []
            for poll in (3, 6, 9, 12):  # a status poll every 3 s; the listing is due every 5 s
                now[0] = poll
                status = await http.get("/v1/status")
                assert status.status_code == 200, status.text
                served.append({w["root"] for w in status.json()["workspaces"]})
            assert served == [{"a"}, {"a", "b"}, {"a", "b"}, {"a", "b"}]
            answer = await http.get("/v1/search", params={"q": ACROSS, "root": "b"})
            assert answer.status_code == 200, answer.text
    finally:
        pool.close()


async def test_mcp_status_polled_alone_answers_from_the_repository_indexed_since(tmp_path: Path, pg_url: str) -> None:
    """HTTP's /v1/status lists the repositories again when due, MCP's status did not: an agent polling it alone
    was answered from the repository as served at the last listing some other call made, so once its repository
    was dropped and indexed again, never from the new one. The tool and the resource now list them first."""
    _indexed(tmp_path, pg_url, "a", "python")
    pool = _relisting_pool(pg_url, relist_interval_s=0)  # a listing due before each call

    async def polled(client: Client) -> list[dict]:
        tool = await client.call_tool("status", {})
        assert not tool.is_error, tool.content
        resource = (await client.read_resource("codeloupe://status")).contents[0].text
        return [json.loads("".join(part.text for part in tool.content)), json.loads(resource)]

    try:
        async with Client(build_server(pool.all[0], pool)) as client:
            assert [status["languages"] for status in await polled(client)] == [{"python": 9, "toml": 1}] * 2
            drop_shared_repository(pg_url, "a")
            _indexed(tmp_path, pg_url, "a", "ruby")
            assert [status["languages"] for status in await polled(client)] == [{"ruby": 4}] * 2
    finally:
        pool.close()
