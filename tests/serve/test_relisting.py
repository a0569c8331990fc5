"""A pool that lists its repositories again (`serve --store`), on real folder workspaces: the listing is a
function of the test's (which repositories are gone), and a dropped repository's read raises RepositoryDropped as
PgStore's does, at the moment the test needs (another call's listing in between). What the shared index's database
does itself is in tests/pg/test_pg_serve.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from mcp import Client
from serve_project import write_project

import codeloupe_serving.warm as warm_module
from codeloupe.api import RepositoryDropped, Workspace
from codeloupe_mcp.server import build_server
from codeloupe_serving.warm import WarmWorkspaces


def test_concurrent_searches_meeting_a_dropped_repository_each_answer_from_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search across repositories that reads one dropped since the last listing has them listed at once and
    answers from the others. Several such searches at once (an agent's parallel calls): the first to list them
    retired it, and every other one, finding nothing changed when its own turn to list came, answered 503."""
    a, b = (Workspace(write_project(tmp_path / name), overrides={"embed_provider": "none"}) for name in "ab")
    dropped: list[Workspace] = []
    pool = WarmWorkspaces([a, b], relist=lambda opened: ([], [ws for ws in opened if ws in dropped]),
                          relist_interval_s=3600)
    real_search = warm_module.search_repositories

    def search_repositories(workspaces: list[Workspace], query: str, **kwargs: object):
        if b in workspaces and b in dropped:
            # The rows of `b` are gone: its read fails, as PgStore's does. Another call met it first and listed
            # the repositories again before this one could (the order two threads can take).
            other = threading.Thread(target=pool.relist, kwargs={"force": True})
            other.start()
            other.join()
            raise RepositoryDropped("repository 'b' was dropped from the shared index")
        return real_search(workspaces, query, **kwargs)

    monkeypatch.setattr(warm_module, "search_repositories", search_repositories)
    try:
        for warm in pool.all:
            warm.fresh()
        dropped.append(b)
        bundle = pool.search_across(["*"], "check the session token")
        assert bundle.files and {hit.repository for hit in bundle.files} <= {"", a.root.name}, bundle.files
        assert [warm.ws for warm in pool.all] == [a]
    finally:
        pool.close()


async def test_an_mcp_endpoint_answers_from_its_repository_indexed_again_under_its_name(tmp_path: Path) -> None:
    """`/mcp` serves the first repository; dropped and indexed again under its name, the HTTP routes served the new
    one while every MCP call answered 'no longer served' until a restart, and a client of MCP alone never even had
    the repositories listed again (its reads failed as dropped for good)."""
    folder = write_project(tmp_path / "a")
    first = Workspace(folder, overrides={"embed_provider": "none"})
    b = Workspace(write_project(tmp_path / "b"), overrides={"embed_provider": "none"})
    indexed_again: list[Workspace] = []  # the repository under the name `a` now, once it was indexed again
    listings: list[int] = []

    def relist(opened: list[Workspace]) -> tuple[list[Workspace], list[Workspace]]:
        listings.append(len(opened))
        now = indexed_again[-1] if indexed_again else first
        return ([now] if all(ws is not now for ws in opened) else [],
                [ws for ws in opened if ws.root == folder.resolve() and ws is not now])

    pool = WarmWorkspaces([first, b], relist=relist, relist_interval_s=0)
    try:
        for warm in pool.all:
            warm.fresh()
        async with Client(build_server(pool.all[0], pool)) as client:
            indexed_again.append(Workspace(folder, overrides={"embed_provider": "none"}))
            pool.relist()  # as an HTTP request does
            answer = await client.call_tool("search", {"query": "check the session token", "flat": True})
            assert not answer.is_error and "app/auth.py" in text_of(answer), text_of(answer)
            assert first.closed
            # Indexed again once more, and only MCP calls come: they list the repositories again themselves.
            indexed_again.append(Workspace(folder, overrides={"embed_provider": "none"}))
            listed = len(listings)
            answer = await client.call_tool("expand", {"path": "app/auth.py", "symbol": "TokenChecker.check_token"})
            assert not answer.is_error and "def check_token" in text_of(answer), text_of(answer)
            assert len(listings) > listed and [warm.ws for warm in pool.all] == [b, indexed_again[-1]]
            status = json.loads(text_of(await client.call_tool("status", {})))
            assert status["root"] == str(folder.resolve()) and status["files"] > 0, status
    finally:
        pool.close()


def text_of(result: object) -> str:
    return "".join(part.text for part in result.content)  # type: ignore[attr-defined]
