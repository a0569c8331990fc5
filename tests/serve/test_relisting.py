"""A pool that lists its repositories again (`serve --store`), on real folder workspaces: the listing is a
function of the test's (which repositories are gone), and a dropped repository's read raises RepositoryDropped as
PgStore's does, at the moment the test needs (another call's listing in between). What the shared index's database
does itself is in tests/pg/test_pg_serve.py."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from serve_project import write_project

import codeloupe_serving.warm as warm_module
from codeloupe.api import RepositoryDropped, Workspace
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
