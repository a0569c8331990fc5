"""The shared index's database going away and coming back, under a process that keeps repositories open (a
server, the language server): connections the server ended are not handed out again, `serve --store` answers
503 with the reason while the database is unreachable (/readyz too) and answers again once it is back, and a
repository dropped from under the process is named as such."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import httpx2 as httpx
import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from served_store import served_store

from codeloupe.api import Workspace, drop_shared_repository, open_shared
from codeloupe.store import StoreError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
QUERY = "charge the card total price"


def _index(tmp_path: Path, pg_url: str) -> list[str]:
    """The python fixture indexed as repository "python"; its ranked files."""
    root = tmp_path / "python"
    shutil.copytree(FIXTURES / "python", root)
    ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url})
    try:
        ws.index()
        return [hit.path for hit in ws.search(QUERY).files]
    finally:
        ws.close()


def _database(pg_url: str) -> str:
    return re.search(r"/(\w+)\?", pg_url).group(1)


def _end_sessions(pg_server: str, pg_url: str, *, refuse_new: bool = False) -> None:
    """What a restart of the database does to the sessions of `pg_url`'s database (and, `refuse_new`, a
    database that does not take connections until `_accept` says so)."""
    name = _database(pg_url)
    with psycopg.connect(pg_server, autocommit=True) as admin:
        if refuse_new:
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        ended = [pid for (pid,) in admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s",
                                                 (name,)).fetchall()]
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (ended,))
        # pg_terminate_backend only signals: a session is ended (its goodbye sent, its socket closed) once its
        # process is gone, and a statement sent before that races the ending (not what these tests are about).
        for _ in range(600):  # not a speed check
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (ended,)).fetchall():
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the terminated sessions {ended} never ended")


def _accept(pg_server: str, pg_url: str) -> None:
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {_database(pg_url)} ALLOW_CONNECTIONS true")


def test_a_repository_kept_open_answers_after_the_database_ended_its_sessions(tmp_path: Path, pg_url: str,
                                                                              pg_server: str) -> None:
    expected = _index(tmp_path, pg_url)
    [ws] = open_shared(["python"], {"store_url": pg_url, "embed_provider": "none"})
    assert [hit.path for hit in ws.search(QUERY).files] == expected
    _end_sessions(pg_server, pg_url)
    assert [hit.path for hit in ws.search(QUERY, scope="").files] == expected


def test_a_repository_dropped_from_under_a_process_says_so(tmp_path: Path, pg_url: str) -> None:
    """It said to restart the process, which `serve --store` never needs (it lists the repositories again on its
    own, within seconds): what it says holds for every process that opens repositories."""
    _index(tmp_path, pg_url)
    [ws] = open_shared(["python"], {"store_url": pg_url, "embed_provider": "none"})
    drop_shared_repository(pg_url, "python")
    with pytest.raises(StoreError, match="'python' was dropped from the shared index") as raised:
        ws.search("the store flushes")
    assert "restart" not in str(raised.value)
    assert str(raised.value).endswith("what is indexed under that name now is read once the repository is opened"
                                      " again")


def _readiness(base: str, status: int) -> dict:
    """/readyz's answer once it answers `status` (its last answer if it never does)."""
    for _ in range(300):  # not a speed check
        answer = httpx.get(f"{base}/readyz")
        if answer.status_code == status:
            break
        time.sleep(0.1)
    assert answer.status_code == status, answer.text
    return answer.json()


def test_serve_answers_503_while_the_database_is_unreachable_and_answers_once_it_is_back(
        tmp_path: Path, pg_url: str, pg_server: str) -> None:
    expected = _index(tmp_path, pg_url)
    with served_store(pg_url) as base:
        search = {"q": QUERY, "root": "python"}
        assert [f["path"] for f in httpx.get(f"{base}/v1/search", params=search).json()["core"]] == expected[:1]
        _end_sessions(pg_server, pg_url, refuse_new=True)
        try:
            for path, params in (("/v1/search", search), ("/v1/status", {}),
                                 ("/v1/search/all", {"q": "the store, once more"})):
                answer = httpx.get(f"{base}{path}", params=params)
                assert answer.status_code == 503, (path, answer.text)
                assert "not currently accepting connections" in answer.json()["error"]
            # Readiness follows the database (checked in the background: a few answers may come first).
            assert "not currently accepting connections" in _readiness(base, 503)["error"]
        finally:
            _accept(pg_server, pg_url)
        assert _readiness(base, 200) == {"ready": True}
        answer = httpx.get(f"{base}/v1/search", params=search)
        assert answer.status_code == 200 and [f["path"] for f in answer.json()["core"]] == expected[:1]


def test_readyz_answers_with_a_check_of_its_own(tmp_path: Path, pg_url: str, pg_server: str) -> None:
    """A probe was answered with the check before it (started by an earlier probe): 200 just after the database
    went away, 503 seconds after it came back. Each probe now waits a moment for the check it starts."""
    from codeloupe_serving.warm import READABLE_CHECK_INTERVAL_S

    _index(tmp_path, pg_url)
    with served_store(pg_url) as base:
        _readiness(base, 200)
        _end_sessions(pg_server, pg_url, refuse_new=True)
        try:
            time.sleep(READABLE_CHECK_INTERVAL_S + 0.2)  # the last check is over a check's interval old
            assert httpx.get(f"{base}/readyz").status_code == 503  # the first probe after the outage
        finally:
            _accept(pg_server, pg_url)
        time.sleep(READABLE_CHECK_INTERVAL_S + 0.2)
        assert httpx.get(f"{base}/readyz").json() == {"ready": True}  # the first probe after it came back


async def test_mcp_tools_and_resources_say_why_while_the_database_is_unreachable(
        tmp_path: Path, pg_url: str, pg_server: str) -> None:
    """Over MCP under `serve --store`, a tool or a resource read that meets the database gone says what failed, as
    the HTTP API's 503 does: the SDK answered a tool with "Error executing tool search" and a resource with
    "Error reading resource codeloupe://tour", naming nothing that went wrong."""
    _index(tmp_path, pg_url)
    with served_store(pg_url) as base:
        async with Client(f"{base}/mcp", read_timeout_seconds=60) as client:
            assert not (await client.call_tool("search", {"query": QUERY})).is_error
            _end_sessions(pg_server, pg_url, refuse_new=True)
            try:
                for tool, arguments in (("search", {"query": QUERY}), ("locate", {"text": "charge"}),
                                        ("expand", {"path": "src/shop/cart.py"}), ("status", {})):
                    answer = await client.call_tool(tool, arguments)
                    said = "".join(part.text for part in answer.content)
                    assert answer.is_error and "not currently accepting connections" in said, (tool, said)
                for uri in ("codeloupe://tour", "codeloupe://file/src/shop/cart.py", "codeloupe://status"):
                    with pytest.raises(MCPError) as refused:
                        await client.read_resource(uri)
                    assert refused.value.code == INTERNAL_ERROR, (uri, refused.value)
                    assert "not currently accepting connections" in str(refused.value), (uri, refused.value)
            finally:
                _accept(pg_server, pg_url)
            assert not (await client.call_tool("search", {"query": QUERY})).is_error


def test_commands_say_in_one_line_that_the_database_is_unreachable(
        tmp_path: Path, pg_url: str, pg_server: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`stats` and `flows` (and `search`) ended in a traceback when the database went away after they had opened
    the repository, and a database that never answered was told in two lines (libpq's hint on its own). Each now
    says it in one line, the URL's password left out, with exit status 2."""
    from codeloupe.cli import main

    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    secret = "s3cret-Pa55"  # the test server trusts local connections: any password opens it
    root = tmp_path / "python"
    shutil.copytree(FIXTURES / "python", root)
    nothing = tmp_path / "no-server"  # a socket folder with nothing listening in it
    nothing.mkdir()
    down = f"postgresql://someone:{secret}@/postgres?host={nothing}"

    def said(*command: str) -> str:
        assert main(list(command)) == 2, command
        out, err = capsys.readouterr()
        assert secret not in out + err
        assert err.count("\n") == 1 and err.startswith("codeloupe: ") and "Traceback" not in err, err
        return err

    for command in (["stats", str(root), "--store", down], ["flows", str(root), "--store", down],
                    ["search", "--store", down, "--repo", "python", QUERY], ["admin", "--store", down, "repos"]):
        assert f"cannot connect to the shared index postgresql://someone@/postgres?host={nothing}" in said(*command)

    up = f"{pg_url}&password={secret}"
    assert main(["index", str(root), "--store", up]) == 0
    capsys.readouterr()
    for command, method in ((["stats", str(root)], "status"), (["flows", str(root)], "flows"),
                            (["search", str(root), QUERY], "search")):
        answer = getattr(Workspace, method)

        def going_away(ws: Workspace, *args: object, answer=answer, **kwargs: object) -> object:
            _end_sessions(pg_server, pg_url, refuse_new=True)  # the repository is open: the database goes away
            return answer(ws, *args, **kwargs)

        monkeypatch.setattr(Workspace, method, going_away)
        try:
            assert "not currently accepting connections" in said(*command, "--store", up)
        finally:
            _accept(pg_server, pg_url)
            monkeypatch.undo()
            monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
