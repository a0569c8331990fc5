"""The MCP server through the SDK's own client: over stdio (`codeloupe mcp`), over streamable HTTP (`/mcp`
under `codeloupe serve`), and in process for `ask` with the scripted chat server."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, LATEST_PROTOCOL_VERSION, PARSE_ERROR
from serve_project import subprocess_env

from codeloupe_mcp.server import MAX_QUERY_CHARS, build_server
from codeloupe_serving.warm import WarmWorkspace

LEAN_TOOLS = {"search", "expand", "locate", "graph", "status"}


def text_of(result) -> str:
    return "".join(part.text for part in result.content)


async def exercise(client: Client, project: Path, outside: Path) -> None:
    """What every transport must do: the lean tools, each called, refusals as tool errors, bounded answers."""
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == LEAN_TOOLS  # no chat model configured: `ask` is not listed
    assert "INSTEAD of grep" in tools["search"].description
    assert "repos" not in tools["search"].input_schema["properties"]  # one workspace: nothing to name
    assert "repo" not in tools["expand"].input_schema["properties"] | tools["graph"].input_schema["properties"]
    # Every argument of every tool says what it takes (`locate`'s and `graph`'s said nothing but their name).
    assert {(tool.name, name) for tool in tools.values() for name, spec in tool.input_schema["properties"].items()
            if not spec.get("description")} == set()

    found = await client.call_tool("search", {"query": "check the bearer token against the session store"})
    assert not found.is_error
    answer = text_of(found)
    assert "CORE" in answer and "app/auth.py" in answer and "app/store.py" in answer
    assert "def check_token(self, token: str) -> bool:" in answer  # CORE code in full

    flat = json.loads(text_of(await client.call_tool("search", {"query": "escape html", "flat": True})))
    first = flat["chunks"][0]
    assert first["path"] == "app/render.py" and {"anchor_line", "truncated", "text"} <= set(first)

    symbol = text_of(await client.call_tool("expand", {"path": "app/store.py", "symbol": "SessionStore.find"}))
    assert symbol.startswith("`app/store.py:14-15` (`SessionStore.find`)")
    assert "return self.sessions.get(token)" in symbol
    lines = text_of(await client.call_tool("expand", {"path": "app/auth.py", "start_line": 1, "end_line": 1}))
    assert '"""Login sessions' in lines and "class TokenChecker" not in lines
    # A line range with a symbol or an anchor line was dropped without a word: the whole definition came back
    # under the lines asked for. Each picks the lines, so one is asked for at a time.
    for chosen in ({"symbol": "SessionStore.find"}, {"anchor_line": 15}):
        for lines_asked in ({"start_line": 1, "end_line": 2}, {"start_line": 3}, {"end_line": 4}):
            mixed = await client.call_tool("expand", {"path": "app/store.py", **chosen, **lines_asked})
            assert mixed.is_error and "a line range is read on its own" in text_of(mixed), (chosen, text_of(mixed))

    located = text_of(await client.call_tool("locate", {"text": "SessionStore", "identifier": True}))
    assert "app/store.py:10:7" in located and "app/auth.py:3:" in located
    # Each line with the definition holding it (the chunk's breadcrumb named one of the chunk's several).
    assert "`app/store.py:15:16`  `return self.sessions.get(token)`  [in `SessionStore.find`]" in text_of(
        await client.call_tool("locate", {"text": "self.sessions.get"}))
    graph = text_of(await client.call_tool("graph", {"node": "app/auth.py"}))
    assert "app/store.py" in graph and "SessionStore" in graph
    status = json.loads(text_of(await client.call_tool("status", {})))
    assert status["files"] == 4 and status["ready"] is True  # secret.env is gitignored, never indexed

    # Refusals are tool errors with the engine's reason, and the server keeps answering.
    for arguments in ({"path": str(outside)}, {"path": "../outside/secret.txt"}, {"path": "secret.env"},
                      {"path": "app/auth.py", "symbol": "nothing_here"}):
        refused = await client.call_tool("expand", arguments)
        assert refused.is_error, arguments
        assert "do-not-serve" not in text_of(refused) and "hunter2" not in text_of(refused)
    # Arguments the schema refuses are named with their rule in plain words: pydantic's report (its model's name,
    # the value sent back whole, a link to its documentation) was the answer.
    for arguments, said in (({"query": 42}, "`query` must be a string"), ({}, "`query` is required"),
                            ({"query": "token", "max_bytes": 5}, "`max_bytes` must be at least 1,000"),
                            ({"query": "token", "max_bytes": 10**9}, "`max_bytes` must be at most 200,000"),
                            ({"query": "token", "mode": "all"}, "`mode` must be one of 'code', 'docs' or 'both'"),
                            ({"query": "", "limit": 0}, "`query` must not be empty; `limit` must be at least 1")):
        refused = await client.call_tool("search", arguments)
        assert refused.is_error and text_of(refused) == f"Error executing tool search: {said}", text_of(refused)
    # JSON's true is no line number or count: it was read as 1 (`start_line: true, end_line: true` answered line 1).
    for tool, arguments, said in (("expand", {"path": "app/auth.py", "start_line": True, "end_line": True},
                                   "`start_line` must be a whole number; `end_line` must be a whole number"),
                                  ("expand", {"path": "app/auth.py", "anchor_line": False},
                                   "`anchor_line` must be a whole number"),
                                  ("search", {"query": "token", "limit": True}, "`limit` must be a whole number"),
                                  ("locate", {"text": "token", "limit": True}, "`limit` must be a whole number")):
        refused = await client.call_tool(tool, arguments)
        assert refused.is_error and text_of(refused) == f"Error executing tool {tool}: {said}", text_of(refused)
    assert (await client.call_tool("graph", {"source": "app/auth.py"})).is_error
    lines = await client.call_tool("locate", {"text": "a\nb"})
    assert lines.is_error and "`text` must be one line, got 2 lines" in text_of(lines)  # the tool's argument, named
    for blank in ("   ", "\x00", "\t\n \x00\u200b"):  # answered with arbitrary files, as if close by meaning
        refused = await client.call_tool("search", {"query": blank})
        assert refused.is_error and "`query` must not be blank" in text_of(refused), text_of(refused)
    for blank in ("", "  "):  # a folder meant and none named: it searched the whole workspace without a word
        refused = await client.call_tool("search", {"query": "session store", "scope": blank})
        assert refused.is_error and text_of(refused) == (
            "Error executing tool search: `scope` is blank: name a folder or file of the workspace, or leave it out "
            "to search all of it"), text_of(refused)
    huge = await client.call_tool("search", {"query": "token " * (MAX_QUERY_CHARS // 6 + 1)})
    assert huge.is_error and text_of(huge) == (
        "Error executing tool search: `query` must be at most 20,000 characters, got 20,004"), text_of(huge)

    # A small budget is kept, and the answer says what it cut.
    small = await client.call_tool("search", {"query": "check the bearer token against the session store",
                                                "max_bytes": 1000})
    assert len(text_of(small).encode()) <= 1000 and "[cut:" in text_of(small)

    contents = (await client.read_resource("codeloupe://file/app/render.py")).contents
    assert contents[0].text == (project / "app/render.py").read_text()
    status_resource = json.loads((await client.read_resource("codeloupe://status")).contents[0].text)
    assert status_resource["files"] == 4
    tour = json.loads((await client.read_resource("codeloupe://tour")).contents[0].text)
    assert [stop["name"] for stop in tour["stops"]] == ["Session", "SessionStore"] and tour["notes"] == []
    assert [point["path"] for point in tour["entry_points"]] == ["app/render.py", "app/store.py"]
    # Each count is kept: the strongest entry point listed and the other counted; the first name only.
    listed = json.loads((await client.read_resource("codeloupe://tour?entry_points=1")).contents[0].text)
    assert listed["entry_points"] == tour["entry_points"][:1] and listed["entry_points_not_shown"] == 1
    assert listed["stops"] == tour["stops"]
    named = json.loads((await client.read_resource("codeloupe://tour?limit=1")).contents[0].text)
    assert named["stops"] == tour["stops"][:1] and named["entry_points"] == tour["entry_points"]
    both = json.loads((await client.read_resource("codeloupe://tour?limit=1&entry_points=1")).contents[0].text)
    assert (both["stops"], both["entry_points"]) == (named["stops"], listed["entry_points"])
    # A count the tour refuses is a resource error naming it and saying why, not a generic fault.
    for query, why in (("entry_points=0", "entry_points must be from 1 to 500, got 0"),
                       ("entry_points=501", "entry_points must be from 1 to 500, got 501"),
                       ("entry_points=many", "entry_points must be a whole number, got 'many'"),
                       ("limit=0", "limit must be from 1 to 50, got 0"),
                       ("limit=51", "limit must be from 1 to 50, got 51"),
                       ("limit=many", "limit must be a whole number, got 'many'"),
                       # A parameter the tour does not take was dropped: a typo answered the default 30 entry points.
                       ("entry_pionts=100", "`entry_pionts` is not a parameter of codeloupe://tour, which takes "
                                            "`entry_points`, `limit`"),
                       ("limit=5&x=1&y", "`x`, `y` are not parameters of codeloupe://tour")):
        with pytest.raises(MCPError) as refused:
            await client.read_resource(f"codeloupe://tour?{query}")
        assert refused.value.code == INVALID_PARAMS and why in str(refused.value), (query, refused.value)
    for uri in ("codeloupe://file/../outside/secret.txt", "codeloupe://file/secret.env",
                f"codeloupe://file/{outside}"):
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
        assert "hunter2" not in str(refused.value) and "do-not-serve" not in str(refused.value)
        assert refused.value.code == INVALID_PARAMS  # refused as a resource that is not there, not a fault
    assert (await client.call_tool("status", {})).is_error is False  # still alive after every refusal


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("hunter2\n")
    return secret


async def test_stdio_through_the_sdk_client(project: Path, outside: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "codeloupe", "mcp", str(project)],
                                   env=subprocess_env(), cwd=str(tmp_path))
    async with Client(params, read_timeout_seconds=60) as client:
        await exercise(client, project, outside)


async def test_streamable_http_under_serve(project: Path, outside: Path, serve) -> None:
    base = serve([project])
    async with Client(f"{base}/mcp", read_timeout_seconds=60) as client:
        await exercise(client, project, outside)


async def test_each_served_root_has_its_own_mcp_endpoint(project: Path, serve, tmp_path: Path) -> None:
    from serve_project import write_project

    second = write_project(tmp_path / "second")
    (second / "app/billing.py").write_text("def charge_invoice(amount):\n    return amount\n")
    base = serve([project, second])
    async with Client(f"{base}/mcp/1", read_timeout_seconds=60) as client:
        located = text_of(await client.call_tool("locate", {"text": "charge_invoice"}))
        search = next(tool for tool in (await client.list_tools()).tools if tool.name == "search")
        across = text_of(await client.call_tool("search", {"query": "charge invoice", "repos": ["*"]}))
    assert "app/billing.py:1:5" in located
    assert "repos" in search.input_schema["properties"] and "billing.py" in across


async def test_a_file_a_search_across_repositories_found_in_another_one_can_be_read(project: Path, serve,
                                                                                     tmp_path: Path) -> None:
    """A search across the served repositories named files of each (`project:app/auth.py`) and said to read them
    with `expand`, which read only its endpoint's repository: the other's files were refused as not in the index,
    however the path was written, so an agent on `/mcp/1` could not read what its search found. `expand` takes
    the repository as HTTP's `/v1/expand` takes its `root`."""
    from serve_project import write_project

    second = write_project(tmp_path / "second")
    (second / "app/billing.py").write_text("def charge_invoice(amount):\n    return amount\n")
    base = serve([project, second])
    async with Client(f"{base}/mcp/1", read_timeout_seconds=60) as client:
        expand = next(tool for tool in (await client.list_tools()).tools if tool.name == "expand")
        across = text_of(await client.call_tool("search", {"query": "bearer token session", "repos": ["*"]}))
        other = await client.call_tool("expand", {"path": "app/auth.py", "symbol": "TokenChecker.check_token",
                                                  "repo": "project"})
        own = await client.call_tool("expand", {"path": "app/billing.py", "repo": "second"})
        unknown = await client.call_tool("expand", {"path": "app/auth.py", "repo": "third"})
    async with Client(f"{base}/mcp", read_timeout_seconds=60) as client:
        default = text_of(await client.call_tool("expand", {"path": "app/auth.py", "start_line": 1, "end_line": 1}))
    assert "repo" in expand.input_schema["properties"]
    assert "project:app/auth.py" in across and "`repo`" in across  # where the repository is, and how to pass it
    assert not other.is_error and "def check_token(self, token: str) -> bool:" in text_of(other), text_of(other)
    assert not own.is_error and "def charge_invoice(amount):" in text_of(own)
    assert unknown.is_error and "third: not a served workspace" in text_of(unknown)
    assert default.startswith("`app/auth.py:1-1`")


async def test_the_graph_of_a_file_a_search_across_repositories_found_in_another_one(project: Path, serve,
                                                                                     tmp_path: Path) -> None:
    """`graph` read only its endpoint's repository, as `expand` once did: a file a search across repositories
    found in another one (`second:app/billing.py`) was "not in the graph (no such file in the workspace)", and
    `repo` was refused as no argument of graph. It takes the repository as `expand` does."""
    from serve_project import write_project

    second = write_project(tmp_path / "second")
    (second / "app/billing.py").write_text("from app.store import SessionStore\n\n\n"
                                           "def charge_invoice(store: SessionStore):\n    return store\n")
    base = serve([project, second])
    async with Client(f"{base}/mcp", read_timeout_seconds=60) as client:
        graph = next(tool for tool in (await client.list_tools()).tools if tool.name == "graph")
        across = text_of(await client.call_tool("search", {"query": "charge invoice", "repos": ["*"]}))
        other = await client.call_tool("graph", {"node": "app/billing.py", "repo": "second"})
        route = await client.call_tool("graph", {"source": "app/billing.py", "target": "app/store.py",
                                                 "repo": "second"})
        own = text_of(await client.call_tool("graph", {"node": "app/auth.py"}))
        unknown = await client.call_tool("graph", {"node": "app/auth.py", "repo": "third"})
    assert "second:app/billing.py" in across
    assert "repo" in graph.input_schema["properties"]
    assert not other.is_error and text_of(other).startswith("app/billing.py"), text_of(other)
    assert "app/store.py" in text_of(other) and "SessionStore" in text_of(other), text_of(other)
    assert not route.is_error and text_of(route).startswith("app/billing.py -> app/store.py"), text_of(route)
    assert own.startswith("app/auth.py") and "app/store.py" in own
    assert unknown.is_error and "third: not a served workspace" in text_of(unknown)


async def test_a_repository_name_two_served_roots_share_is_refused_naming_both(project: Path, serve,
                                                                               tmp_path: Path) -> None:
    """`codeloupe serve ~/work/app ~/forks/app`: a search across them named the first `app` and the second by
    its path, and `expand` with `repo: app` read the first whichever the agent meant. Both are named by their
    path, which `repo` and `repos` take; the shared name is refused naming both."""
    from serve_project import write_project

    fork = write_project(tmp_path / "fork" / "project")
    (fork / "app/fork_only.py").write_text("def fork_only_marker():\n    return 1\n", encoding="utf-8")
    base = serve([project, fork])
    async with Client(f"{base}/mcp", read_timeout_seconds=60) as client:
        across = text_of(await client.call_tool("search", {"query": "fork_only_marker", "repos": ["*"]}))
        # Searched alone, the fork is still named by its path: `project` would name either to `repo`.
        alone = text_of(await client.call_tool("search", {"query": "fork_only_marker", "repos": [str(fork)]}))
        read = await client.call_tool("expand", {"path": "app/fork_only.py", "repo": str(fork.resolve())})
        refused = [await client.call_tool("expand", {"path": "app/fork_only.py", "repo": "project"}),
                   await client.call_tool("search", {"query": "fork_only_marker", "repos": ["project"]})]
    assert f"{fork.resolve()}:app/fork_only.py" in across, across
    assert f"{fork.resolve()}:app/fork_only.py" in alone, alone
    assert not read.is_error and "def fork_only_marker():" in text_of(read)
    for answer in refused:
        assert answer.is_error and "project: names 2 served workspaces" in text_of(answer), text_of(answer)
        assert str(project.resolve()) in text_of(answer) and str(fork.resolve()) in text_of(answer)


async def test_ask_is_listed_only_with_a_user_configured_chat_model(project: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from chat_server import ChatServer, Reply

    with ChatServer() as chat:
        chat.add(Reply(text="Tokens are checked by `check_token` [[1]], which asks the store.", times=2))
        monkeypatch.setenv("CODELOUPE_CHAT_BASE_URL", chat.base_url)
        monkeypatch.setenv("CODELOUPE_CHAT_MODEL", "scripted")
        warm = WarmWorkspace(project)
        try:
            async with Client(build_server(warm)) as client:
                tools = (await client.list_tools()).tools
                assert {t.name for t in tools} == LEAN_TOOLS | {"ask"}
                ask = next(tool for tool in tools if tool.name == "ask")
                assert all(spec.get("description") for spec in ask.input_schema["properties"].values()), ask
                answer = text_of(await client.call_tool("ask", {"question": "how are bearer tokens checked"}))
                blank = await client.call_tool("ask", {"question": " \x00 "})
        finally:
            warm.close()
    assert "Tokens are checked by" in answer
    assert blank.is_error and "`question` must not be blank" in text_of(blank), text_of(blank)
    assert "def check_token(self, token: str) -> bool:" in answer  # the cited span, spliced from disk


async def test_an_ask_without_a_walkthrough_says_why_and_keeps_the_retrieved_files_within_max_bytes(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reason a walkthrough failed was put in front of a bundle already sized to the whole budget, and the
    answer was then cut again: the bundle's own closing note (what was cut, what to call next) was lost. The
    reason is now the bundle's first note, and the bundle is sized once."""
    from chat_server import ChatServer, Reply

    with ChatServer() as chat:
        chat.add(Reply(text="upstream exploded: " + "stack frame " * 400, status=500, times=3))
        monkeypatch.setenv("CODELOUPE_CHAT_BASE_URL", chat.base_url)
        monkeypatch.setenv("CODELOUPE_CHAT_MODEL", "scripted")
        warm = WarmWorkspace(project)
        try:
            async with Client(build_server(warm)) as client:
                answer = text_of(await client.call_tool("ask", {"question": "how are bearer tokens checked",
                                                                "max_bytes": 1500}))
        finally:
            warm.close()
    assert len(answer.encode("utf-8")) <= 1500
    assert "## 1. `app/" in answer, answer  # the retrieved files, ranked
    # sized as one bundle: its own closing note says what was cut and what to call, not a cut of the whole
    assert "[answer cut" not in answer and "`expand`" in answer.splitlines()[-1], answer
    [reason] = [line for line in answer.splitlines() if line.startswith("note: no walkthrough: ")]
    assert "upstream exploded: stack frame" in reason, reason


async def test_an_ask_the_client_cancels_has_its_model_call_cut_off(project: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that gives up on `ask` (its read timeout, a user's interrupt) sends notifications/cancelled: the
    tool's thread kept waiting on the model up to the chat timeout, holding a worker thread each time."""
    from chat_server import ChatServer, Reply

    with ChatServer() as chat:
        chat.add(Reply(text="Tokens are checked by `check_token` [[1]].", hold_after=1, times=3))
        monkeypatch.setenv("CODELOUPE_CHAT_BASE_URL", chat.base_url)
        monkeypatch.setenv("CODELOUPE_CHAT_MODEL", "scripted")
        monkeypatch.setenv("CODELOUPE_CHAT_TIMEOUT_S", "600")
        warm = WarmWorkspace(project)
        try:
            await anyio.to_thread.run_sync(warm.fresh)  # indexed first: the call's time goes to the held model call
            async with Client(build_server(warm)) as client:
                with pytest.raises(MCPError, match="Timed out"):  # the client cancels the call as it gives up
                    await client.call_tool("ask", {"question": "how are bearer tokens checked"},
                                           read_timeout_seconds=5)
                hangups = await anyio.to_thread.run_sync(chat.wait_for, "hangups", 1, 30)
                assert hangups == 1, "the model call was left open"
                status = json.loads(text_of(await client.call_tool("status", {})))  # still answering
        finally:
            warm.close()
    assert chat.held == 1 and status["ready"] is True


def test_a_served_root_says_which_of_its_settings_it_ignores(project: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`codeloupe mcp` and `serve` ignored an untrusted workspace's endpoint settings as the CLI does, but said
    nothing; the CLI prints why."""
    (project / ".codeloupe.toml").write_text('embed_base_url = "http://127.0.0.1:9/v1"\n')
    with caplog.at_level("WARNING", logger="codeloupe.warm"):
        warm = WarmWorkspace(project)
        warm.close()
    assert any("ignoring settings" in r.getMessage() and "embed_base_url" in r.getMessage() for r in caplog.records)


def test_a_served_root_with_a_typo_in_its_settings_file_is_served_and_says_so(project: Path, tmp_path: Path) -> None:
    """A typo (or a newer codeloupe's setting) in a repository's .codeloupe.toml ended `codeloupe mcp` at start
    with exit 2; it serves, and its stderr names the file and the key."""
    (project / ".codeloupe.toml").write_text("chunk_budgett = 900\n", encoding="utf-8")
    server = subprocess.Popen([sys.executable, "-m", "codeloupe", "mcp", str(project)], cwd=tmp_path, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=subprocess_env())
    _, stderr = server.communicate('{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n', timeout=60)
    assert server.returncode == 0, stderr
    file = project.resolve() / ".codeloupe.toml"
    warning = f"codeloupe: unknown setting 'chunk_budgett' in {file} (did you mean 'chunk_budget'?); ignored"
    assert warning in stderr.splitlines()


def test_mcp_and_serve_say_once_at_start_which_endpoints_a_trusted_roots_settings_chose(project: Path,
                                                                                         tmp_path: Path) -> None:
    """The language server told the editor which endpoints a trusted workspace's own settings send its code to;
    `codeloupe mcp` and `codeloupe serve` applied them without a word. Each says so once, on stderr, as it starts."""
    from codeloupe.settings import workspace_digest
    from codeloupe.trust import TrustStore

    (project / ".codeloupe.toml").write_text('chat_base_url = "http://127.0.0.1:9/v1"\nchat_model = "m"\n',
                                             encoding="utf-8")
    TrustStore.default().trust(project, workspace_digest(project))
    notice = (f"codeloupe: this workspace's own settings send its code to endpoints they chose: chat to "
              f"127.0.0.1:9 (chat_base_url in {project.resolve() / '.codeloupe.toml'}).")
    mcp = subprocess.Popen([sys.executable, "-m", "codeloupe", "mcp", str(project)], cwd=tmp_path, text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
    _, stderr = mcp.communicate('{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n', timeout=60)
    assert mcp.returncode == 0, stderr
    assert [line for line in stderr.splitlines() if "endpoints they chose" in line] == [f"{notice} They apply "
        "because the workspace is trusted; if you did not mean to send it there, set the endpoints yourself where "
        "they win over the workspace's files (your editor's codeloupe settings, or CODELOUPE_* variables and flags "
        "on the command line) or stop trusting it."], stderr

    serve = subprocess.Popen([sys.executable, "-m", "codeloupe", "serve", str(project), "--port", "0"], cwd=tmp_path,
                             text=True, stderr=subprocess.PIPE, env=subprocess_env())
    try:
        assert serve.stderr is not None
        before_serving = []
        while not (line := serve.stderr.readline()).startswith("codeloupe: serving "):
            assert line, before_serving  # stderr closed: the server ended before it served
            before_serving.append(line)
        assert len([line for line in before_serving if line.startswith(notice)]) == 1, before_serving
    finally:
        serve.terminate()
        assert serve.wait(timeout=30) == 0


def test_stdio_answers_every_line_that_is_not_a_message(project: Path, tmp_path: Path) -> None:
    """The SDK's stdio transport logged a line it could not read and answered nothing, so the client that sent
    it waited for good; JSON-RPC answers it with a null id (-32700 not JSON, -32600 not a message)."""
    lines = ["this is not json", '{"a": 1}', "[1, 2]", '{"jsonrpc": "2.0", "id": 7, "method": "ping"}']
    server = subprocess.Popen([sys.executable, "-m", "codeloupe", "mcp", str(project)], cwd=tmp_path, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=subprocess_env())
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write("".join(line + "\n" for line in lines))
        server.stdin.flush()
        answers = [json.loads(server.stdout.readline()) for _ in lines]  # stdin held open until all are in
    finally:
        server.stdin.close()
        assert server.wait(timeout=60) == 0
    assert [(answer["id"], answer.get("error", {}).get("code")) for answer in answers] == [
        (None, PARSE_ERROR), (None, INVALID_REQUEST), (None, INVALID_REQUEST), (7, None)]
    assert answers[-1]["result"] == {}  # and the server went on answering


def test_stdio_in_a_folder_of_a_repository_serves_the_repository(project: Path) -> None:
    """`codeloupe mcp` (no PATH) started in a folder inside a repository served that folder as its own workspace,
    with a second index of it, and that index then made the folder a workspace of its own for the CLI too
    (`codeloupe search app ...` searched only it). It serves the repository the folder is in, as every command
    finds it, and says so on stderr."""
    from codeloupe.settings import load_settings

    (project / ".git").mkdir()
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             # a search waits for the first index, which the status alone raced (it read files 0 under load)
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "search", "arguments": {"query": "session store"}}}]
    status_read = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "codeloupe://status"}}
    server = subprocess.Popen([sys.executable, "-m", "codeloupe", "mcp"], cwd=project / "app", text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=subprocess_env())
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:
        server.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
        server.stdin.flush()
        answers = {answer["id"]: answer for answer in (json.loads(server.stdout.readline()) for _ in range(2))}
        server.stdin.write(json.dumps(status_read) + "\n")  # once the search is answered
        server.stdin.flush()
        answers[3] = json.loads(server.stdout.readline())  # stdin held open until all are in
    finally:
        server.stdin.close()
        assert server.wait(timeout=60) == 0
    assert "result" in answers[2] and not answers[2]["result"].get("isError"), answers[2]
    status = json.loads(answers[3]["result"]["contents"][0]["text"])
    assert status["root"] == str(project) and status["files"] > 0, status
    said = server.stderr.read()
    assert f"codeloupe: workspace {project} (it has .git); app is a folder inside it; serving all of the workspace" \
        in said, said
    assert not load_settings(project / "app").index_path(project / "app").exists()


def test_a_request_before_initialize_is_refused_saying_so(project: Path, tmp_path: Path) -> None:
    """A request before `initialize` was answered with the SDK's bare "Invalid request parameters" (-32602, empty
    data), which read as a mistake in the call's arguments: it now says the session is not initialised and what to
    send, its code kept. `ping` is still answered, and so is every request once initialised."""
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": {}}},
             {"jsonrpc": "2.0", "id": 3, "method": "ping"}]
    server = subprocess.Popen([sys.executable, "-m", "codeloupe", "mcp", str(project)], cwd=tmp_path, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=subprocess_env())
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
        server.stdin.flush()
        answers = [json.loads(server.stdout.readline()) for _ in lines]  # stdin held open until all are in
    finally:
        server.stdin.close()
        assert server.wait(timeout=60) == 0
    for answer, method in zip(answers[:2], ("tools/list", "tools/call"), strict=True):
        assert answer["error"] == {"code": INVALID_PARAMS, "data": {"method": method}, "message": (
            f"the session is not initialised: send `initialize` (then `notifications/initialized`) before "
            f"`{method}`")}, answer
    assert answers[2] == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_an_answer_before_the_first_index_ends_says_what_it_lacks(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that waited FIRST_INDEX_WAIT_S answered from the files indexed so far without a word (216 of
    2,262 files, as if that were the workspace); it now says the index is still being built and how far it is,
    in the bundle's notes (HTTP's JSON) and in the tools' text."""
    import codeloupe_serving.warm as warm_module
    from codeloupe_mcp import sized

    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    monkeypatch.setattr(warm_module, "FIRST_INDEX_WAIT_S", 0.0)  # answer at once, as after the wait
    root = tmp_path / "large"
    for i in range(300):
        module = root / "pkg" / f"mod{i:03}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text("".join(f"def handler_{i}_{j}(request):\n    return request.get('field_{j}')\n\n\n"
                                  for j in range(40)))
    warm = WarmWorkspace(root)
    try:
        assert not warm.ready  # 300 files to chunk in worker processes: the first index has barely begun
        early = warm.search("handler request field")
        (note,) = [note for note in early.notes if "still being built" in note]
        assert note.startswith("the index of large is still being built (") and "missing from this answer" in note
        assert f"note: {note}" in sized.bundle_text(early)
        assert json.loads(sized.flat_json(early))["notes"][0] == note
        assert sized.located_text(warm.ws.locate("handler_1_1"), notes=[note]).startswith(f"note: {note}\n")
        warm._first_index.wait(120)
        late = warm.search("handler request field")
        assert not any("still being built" in note for note in late.notes) and warm.building_note() == ""
        assert "note:" not in sized.bundle_text(late)
    finally:
        warm.close()


async def test_every_tool_says_when_the_first_index_is_still_running(project: Path, first_index_held) -> None:
    """`search`, `locate` and `graph` said that their answer came while the first index ran; `expand` did not,
    and refused a file not indexed yet as "not indexed, ignored, or deleted" without saying why; nor did the
    `tour` and `file` resources."""
    warm = WarmWorkspace(project)
    try:
        assert first_index_held.stopped.wait(60)
        async with Client(build_server(warm)) as client:
            for tool, arguments in (("search", {"query": "session store"}), ("locate", {"text": "find"}),
                                    ("graph", {"node": "app/auth.py"}), ("expand", {"path": "app/auth.py"})):
                answer = await client.call_tool(tool, arguments)
                assert not answer.is_error, (tool, text_of(answer))
                assert "\nnote: the index of project is still being built (" in f"\n{text_of(answer)}", tool
            refused = await client.call_tool("expand", {"path": "app/later.py"})
            assert refused.is_error and "still being built" in text_of(refused)
            # The resources too: the tour's JSON has the note, a file not indexed yet is refused saying why; a file
            # read is its text from disk alone (a note in it would be read as the file's).
            tour = json.loads((await client.read_resource("codeloupe://tour")).contents[0].text)
            assert tour["notes"][0].startswith("the index of project is still being built ("), tour
            with pytest.raises(MCPError) as missing:
                await client.read_resource("codeloupe://file/app/later.py")
            assert missing.value.code == INVALID_PARAMS and "still being built" in str(missing.value)
            read = (await client.read_resource("codeloupe://file/app/auth.py")).contents[0].text
            assert read == (project / "app/auth.py").read_text()
    finally:
        first_index_held.release.set()
        warm.close()


async def test_a_tool_call_waiting_for_the_first_index_tells_its_progress(
        project: Path, first_index_held, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that waits for the first index (a large repository's takes minutes) told its client nothing until
    the answer, so an agent could take it for hung; one that asked for progress (a progress token) is now told
    how far the index got as it waits, and answered from the whole index once it ends."""
    import codeloupe_serving.warm as warm_module

    monkeypatch.setattr(warm_module, "FIRST_INDEX_WAIT_S", 600.0)  # the call waits for the whole first index
    told: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        told.append((done, total, message))

    warm = WarmWorkspace(project)
    valve = threading.Timer(60, first_index_held.release.set)  # only what keeps a failing test from hanging the run
    try:
        assert await anyio.to_thread.run_sync(first_index_held.stopped.wait, 60)
        valve.start()
        async with Client(build_server(warm)) as client, anyio.create_task_group() as calls:
            answers = []

            async def call() -> None:
                answers.append(await client.call_tool("search", {"query": "session store"}, progress_callback=progress))

            calls.start_soon(call)
            with anyio.fail_after(60):  # not a speed check: what keeps a failing test from hanging the run
                while not told:
                    await anyio.sleep(0.05)
            (done, total, message) = told[0]
            assert total is not None and done <= total, told
            assert message is not None and message.startswith("the index of project is still being built ("), told
            assert f"of {int(total):,} files indexed" in message, told
            assert not answers and not warm.ready  # told while it waits, not answered from part of the index
            first_index_held.release.set()
        (answer,) = answers
        assert not answer.is_error and "still being built" not in text_of(answer), text_of(answer)
        assert [done for done, _, _ in told] == sorted({done for done, _, _ in told})  # each told more than before
    finally:
        valve.cancel()
        first_index_held.release.set()
        warm.close()

async def test_a_tour_count_out_of_range_is_refused_while_the_first_index_runs(
        project: Path, first_index_held, monkeypatch: pytest.MonkeyPatch) -> None:
    """`codeloupe://tour?entry_points=0` was refused only once the first index ended (a count that is not a
    number was refused at once): a client waited up to two minutes to learn that its count was wrong. `limit`
    is refused as early."""
    import threading

    import codeloupe_serving.warm as warm_module

    monkeypatch.setattr(warm_module, "FIRST_INDEX_WAIT_S", 600.0)  # a read that waits, waits for the whole index
    warm = WarmWorkspace(project)
    valve = threading.Timer(60, first_index_held.release.set)  # only what keeps a failing test from hanging the run
    try:
        assert await anyio.to_thread.run_sync(first_index_held.stopped.wait, 60)
        valve.start()
        async with Client(build_server(warm)) as client:
            # A negative count is out of range too (it was refused as "not a whole number, got '-1'").
            for name, count, most in (("entry_points", 0, 500), ("entry_points", 501, 500), ("limit", 0, 50),
                                      ("limit", 51, 50), ("entry_points", -1, 500), ("limit", -3, 50)):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(f"codeloupe://tour?{name}={count}")
                assert refused.value.code == INVALID_PARAMS, refused.value
                assert f"{name} must be from 1 to {most}, got {count}" in str(refused.value)
                assert not warm.ready  # refused while the first index is still held
    finally:
        valve.cancel()
        first_index_held.release.set()
        warm.close()


async def test_mcp_calls_cancelled_during_the_first_index_free_their_worker_threads(
        project: Path, serve, first_index_held, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `serve`, a tool call arriving during a first index waited for it on a worker thread (up to two
    minutes), and went on waiting after its client cancelled: 40 such calls at `/mcp` held every thread of the
    process, and the HTTP API's sync endpoints (here /v1/status) waited behind them. A call now waits on the event
    loop and leaves when it is cancelled; one that stays gets the answer of the whole index."""
    import httpx2 as httpx
    from mcp.server.mcpserver import MCPServer
    from server_counts import ServerCounts

    import codeloupe_serving.warm as warm_module

    monkeypatch.setattr(warm_module, "FIRST_INDEX_WAIT_S", 600.0)  # a call waits for the whole first index
    # What the server did with each call, counted where it happens: arrived (a tool call, before its tool runs),
    # ended (answered or cancelled), and waiting for the first index (on the event loop, or on a worker thread in
    # `fresh` as calls did before they waited on the loop).
    counted = ServerCounts("arrived", "ended", "waiting")
    real_call_tool, real_fresh = MCPServer.call_tool, warm_module.WarmWorkspace.fresh

    async def counted_call_tool(self, *args, **kwargs):
        counted.count("arrived")
        try:
            return await real_call_tool(self, *args, **kwargs)
        finally:
            counted.count("ended")

    def counted_fresh(self):
        waits = not self.ready  # only a call before the first index ended waits in it
        counted.count("waiting", waits)
        try:
            return real_fresh(self)
        finally:
            counted.count("waiting", -waits)

    async def wait_until(what: str, expected: int) -> None:
        await counted.wait_until_async(what, expected)

    monkeypatch.setattr(MCPServer, "call_tool", counted_call_tool)
    monkeypatch.setattr(warm_module.WarmWorkspace, "fresh", counted_fresh)
    counted.count_first_index_waits(monkeypatch)
    base = serve([project], ready=False)
    assert await anyio.to_thread.run_sync(first_index_held.stopped.wait, 60)
    try:
        async with Client(f"{base}/mcp", read_timeout_seconds=120) as client, httpx.AsyncClient() as http:
            calls = (("search", {"query": "session store"}), ("locate", {"text": "find"}),
                     ("graph", {"node": "app/auth.py"}), ("expand", {"path": "app/auth.py"}))
            async with anyio.create_task_group() as given_up:
                for n in range(45):  # more than the pool's 40 threads
                    given_up.start_soon(client.call_tool, *calls[n % len(calls)])
                await wait_until("arrived", 45)
                # Before the fix 40 of them waited on a thread each, and the rest had no thread to wait on.
                await wait_until("waiting", 45)
                given_up.cancel_scope.cancel()  # the client sends notifications/cancelled for each
            await wait_until("ended", 45)
            await wait_until("waiting", 0)  # and each left its wait for the first index
            status = await http.get(f"{base}/v1/status", timeout=60)  # a sync handler: it needs a free thread
            assert status.status_code == 200 and status.json()["ready"] is False
            async with anyio.create_task_group() as patient:
                answers = []

                async def call() -> None:
                    answers.append(await client.call_tool("search", {"query": "session store"}))

                patient.start_soon(call)
                await wait_until("waiting", 1)
                assert not answers  # it waits for the first index: not answered from part of it
                first_index_held.release.set()
            (answer,) = answers
            assert not answer.is_error and "CORE" in text_of(answer) and "note:" not in text_of(answer)
    finally:
        first_index_held.release.set()


async def test_graph_of_a_folder_is_its_part_of_the_graph(project: Path) -> None:
    """`graph` with a folder for `node` was refused ("a folder, not a file") by every surface; the engine now
    answers the folder's files, their edges across its boundary and their communities (CLI, HTTP, MCP alike)."""
    (project / "lib").mkdir()
    (project / "lib/sessions.py").write_text('"""Stores."""\n\nfrom app.store import SessionStore\n\n\n'
                                             "def make_store():\n    return SessionStore()\n")
    (project / "many").mkdir()
    for n in range(60):
        (project / f"many/user_{n:02}.py").write_text(f"from app.store import SessionStore\n\n\ndef user_{n}():\n"
                                                      "    return SessionStore()\n")
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            answer = await client.call_tool("graph", {"node": "app/"})
            lib = await client.call_tool("graph", {"node": "lib"})
            many = await client.call_tool("graph", {"node": "many", "max_bytes": 1000})
            empty = await client.call_tool("graph", {"node": "docs"})
    finally:
        warm.close()
    assert not answer.is_error, text_of(answer)
    text = text_of(answer)
    assert text.startswith("app/  (folder: 3 files of the graph)") and "app/render.py  degree" in text
    assert "app/store.py <- lib/sessions.py:3 import  [SessionStore]" in text  # an edge in from outside
    assert "app/auth.py -> app/store.py" not in text  # an edge inside the folder is not across it
    # The line of an edge out is in the file inside, which uses the other: shown on it, not on the file outside.
    assert "lib/sessions.py:3 -> app/store.py import  [SessionStore]" in text_of(lib)
    # A big folder within a small budget: every section's heading and count, then what each one left out.
    cut = text_of(many)
    assert len(cut.encode()) <= 1000 and cut.startswith("many/  (folder: 60 files of the graph)"), cut
    for heading in ("communities (", "files (60)", "uses, outside the folder (60)", "used by, from outside (0)"):
        assert f"\n{heading}" in cut, cut
    listed = cut.count("many/user_")
    assert 0 < listed < 120 and cut.count("more not listed to stay within 1000 bytes") >= 2, cut
    assert empty.is_error and "a folder holding no code file of the graph" in text_of(empty)


async def test_an_argument_a_tool_does_not_take_is_refused_naming_what_it_takes(project: Path) -> None:
    """An argument a tool does not take was dropped without a word: `expand` with HTTP's `start` and `end` (its
    own are `start_line` and `end_line`) answered the whole file, `search` with `path` for `scope` searched the
    whole workspace, each as if asked so. The schemas now say that no other argument is taken, as HTTP's
    bodies refuse one (422)."""
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            ranged = await client.call_tool("expand", {"path": "app/auth.py", "start": 1, "end": 2})
            scoped = await client.call_tool("search", {"query": "session store", "path": "app/store.py"})
            long_name = await client.call_tool("status", {"x" * 5000: 1})
            fine = await client.call_tool("expand", {"path": "app/auth.py", "start_line": 1, "end_line": 1})
    finally:
        warm.close()
    assert all(tool.input_schema["additionalProperties"] is False for tool in tools.values())
    assert ranged.is_error and text_of(ranged) == (
        "Error executing tool expand: `end`, `start` are not arguments of expand, which takes `path`, `start_line`, "
        "`end_line`, `symbol`, `anchor_line`, `max_bytes`"), text_of(ranged)
    assert scoped.is_error and "`path` is not an argument of search, which takes `query`, `flat`, `scope`" in \
        text_of(scoped), text_of(scoped)
    assert long_name.is_error and len(text_of(long_name)) < 200, text_of(long_name)  # a name is not echoed whole
    assert not fine.is_error and '"""Login sessions' in text_of(fine)


def test_a_bulk_change_is_searched_before_the_call_is_answered(project: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """After more files changed than a delta view takes in (a branch switch), MCP and HTTP answered without
    them (not even their old text) until a background rebuild, "nothing matches" for their new words; the
    refresh before a call now brings the search snapshot up to date, as the language server's start-up does."""
    from codeloupe import ranking

    monkeypatch.setattr(ranking, "DELTA_MAX_FILES", 0)  # any change is a bulk change
    warm = WarmWorkspace(project, refresh_interval_s=0)
    try:
        assert "app/render.py" in [hit.path for hit in warm.search("escape html").files]
        (project / "app/render.py").write_text("def paint_branch_canvas(brush):\n    return brush\n")
        (project / "app/extra.py").write_text("def blend_branch_colours(a, b):\n    return b\n")
        found = warm.search("paint branch canvas blend colours")
        assert {"app/render.py", "app/extra.py"} <= {hit.path for hit in found.files}
        assert not any("join the index shortly" in note for note in found.notes)
    finally:
        warm.close()


async def test_repos_names_are_read_as_http_reads_them(project: Path, serve, tmp_path: Path) -> None:
    """A blank name in `repos` names no repository (it named the first served one), and spaces around a name are
    ignored, as in HTTP's comma-separated `repos`."""
    from serve_project import write_project

    second = write_project(tmp_path / "second")
    (second / "app/billing.py").write_text("def charge_invoice(amount):\n    return amount\n")
    base = serve([project, second])
    async with Client(f"{base}/mcp", read_timeout_seconds=60) as client:
        across = text_of(await client.call_tool("search", {"query": "charge invoice token", "repos": ["", " second "],
                                                           "flat": True}))
    repositories = {chunk["repository"] for chunk in json.loads(across)["chunks"]}
    assert repositories == {"second"}


# Embedding worker processes start only on more than one core; the tests below watch them end.
NEEDS_WORKER_POOL = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="no embedding worker pool on one core")


def many_long_chunks(root: Path, files: int = 12, functions: int = 16) -> Path:
    """A workspace whose embedding takes several steps of seconds each: every chunk a function whose docstring
    holds hundreds of words of its own (what is embedded is a chunk's distinct words, up to 4 windows)."""
    import random

    rng = random.Random(7)

    def word() -> str:
        return "".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(3))

    def docstring() -> str:
        return "\n".join("    " + " ".join(word() for _ in range(10)) for _ in range(40))

    root.mkdir(parents=True)
    for i in range(files):
        (root / f"mod{i}.py").write_text("".join(f'def handler_{i}_{j}(request):\n    """\n{docstring()}\n    """\n'
                                                 "    return request\n\n\n" for j in range(functions)))
    return root


@NEEDS_WORKER_POOL
def test_closing_a_warm_workspace_drops_the_embedding_step_under_way(tmp_path: Path) -> None:
    """Closing a served workspace let the embedding step under way finish (0.8-2.5 s on 2 cores, more on a loaded
    machine) and write its vectors: a server whose client went (an MCP client allows 2 s after closing stdin) was
    killed meanwhile. The step is now dropped: nothing of it is written, and its worker processes are killed."""
    import sqlite3
    import threading

    from codeloupe.api import Workspace
    from processes import alive, children_but_parse_workers

    ws = Workspace(many_long_chunks(tmp_path / "long"), overrides={"embed_provider": "local"})
    provider = ws.embedding_provider()
    embed_texts = provider.embed
    in_step, closing = threading.Event(), threading.Event()
    seen = {"steps": 0, "vectors": 0, "workers": []}  # what the embedding thread found as the watched step began

    def count(*tables: str) -> int:
        with contextlib.closing(sqlite3.connect(f"{ws.store.path.as_uri()}?mode=ro", uri=True)) as conn:
            return sum(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables)

    def vectors_written() -> int:
        return count("skeleton_vectors", "chunk_vectors")

    def embed_held(texts: list[str]):  # a gate only: what is checked is the store and the processes
        seen["steps"] += 1
        if seen["steps"] == 3:  # the skeletons, the first chunks (which started the worker pool), then this step
            seen["vectors"], seen["workers"] = vectors_written(), children_but_parse_workers(os.getpid())  # embedding's
            in_step.set()
            closing.wait(300)  # the step goes on only as the workspace is being closed: it cannot end before
        return embed_texts(texts)

    provider.embed = embed_held
    warm = WarmWorkspace(ws)
    try:
        assert in_step.wait(300), "the embedding did not reach its third step"
    finally:
        closing.set()
        warm.close()
    assert seen["workers"], "the worker pool was not running during the step"
    assert vectors_written() == seen["vectors"]  # the step under way wrote nothing
    assert 0 < vectors_written() < count("skeletons", "chunks")  # the pass stopped there: no step after it
    assert not [t for t in threading.enumerate() if t.name == "codeloupe-embed" and t.is_alive()]
    assert not any(alive(pid) for pid in seen["workers"])


def test_closing_a_warm_workspace_waits_for_a_refresh_on_a_request_thread(tmp_path: Path) -> None:
    """Closing a served workspace waited only for its first index's thread: a refresh run before a call (`fresh`,
    on a request thread) went on after close returned, and its next group met the closed index (`refreshing the
    index failed: Cannot operate on a closed database`). Close now waits for that refresh to stop (at its next
    file), so nothing of it comes after. The refresh is held in a chunking strategy (cut off after its time bound)
    until close returns, which it cannot do before the refresh has stopped."""
    import sqlite3
    import threading

    from codeloupe.api import Workspace, add_chunk_strategy
    from codeloupe.chunk.strategies import unregister_strategy

    held, closed = threading.Event(), threading.Event()

    def held_until_closed(text: str, lines: list[str]) -> list[tuple[int, int]]:  # a gate only
        held.set()
        closed.wait(60)
        return [(1, len(lines))]

    def indexed(ws: Workspace) -> list[tuple]:
        with contextlib.closing(sqlite3.connect(f"{ws.store.path.as_uri()}?mode=ro", uri=True)) as conn:
            return conn.execute("SELECT path, hash FROM files ORDER BY path").fetchall()

    add_chunk_strategy("held-until-closed", [".gate"], held_until_closed)
    try:
        root = tmp_path / "repo"
        root.mkdir()
        for i in range(3):
            (root / f"mod{i}.py").write_text(f"def handler_{i}(request):\n    return request\n")
        ws = Workspace(root, overrides={"embed_provider": "none"})
        warm = WarmWorkspace(ws, refresh_interval_s=0)
        warm.fresh()  # after the first index
        (root / "held.gate").write_text("held\nuntil closed\n")
        (root / "mod3.py").write_text("def handler_3(request):\n    return request\n")
        refresh = threading.Thread(target=warm.fresh)
        refresh.start()
        try:
            assert held.wait(60), "the refresh did not reach the held file"
            warm.close()
            at_close = indexed(ws)
        finally:
            closed.set()
        refresh.join(60)
    finally:
        unregister_strategy("held-until-closed")
    assert indexed(ws) == at_close and warm.last_error == ""


def test_closing_a_warm_workspace_twice_returns_at_once(tmp_path: Path) -> None:
    """A served workspace closed a second time (a caller's own `finally` after a pool's close) waited 30 s: its
    first close kept the refresh lock, which the second then waited out. Close now lets the lock go once no refresh
    holds it (a refresh taking it after the close returns at once), so a second close finds nothing to wait for."""
    import threading

    from codeloupe.api import Workspace

    (tmp_path / "mod.py").write_text("def handler(request):\n    return request\n")
    warm = WarmWorkspace(Workspace(tmp_path, overrides={"embed_provider": "none"}))
    warm.fresh()  # after the first index
    warm.close()
    again = threading.Thread(target=warm.close, daemon=True)
    again.start()
    again.join(20)  # a hang guard, far under the 30 s it waited and far over what closing an idle workspace takes
    assert not again.is_alive(), "the second close waited for the refresh lock the first one kept"


def test_closing_a_warm_workspace_kills_the_models_first_derivation(tmp_path: Path) -> None:
    """The first start on a machine derives the local model (seconds of CPU) before it embeds anything. It ran on
    the embedding thread, where closing the workspace could not stop it: the close waited for it (up to 30 s, past
    the 2 s an MCP client allows). It now runs in a child process that the close kills: the close returns long
    before the rest of a derivation would have run (a whole one is timed here, on the same machine), no process of
    it is left, nothing of it stays in the cache (derived file, work dir, the quantiser's temporary files), and the
    next start derives the model: the re-quantised one, not the shipped one a failure would have left for good."""
    import time

    from codeloupe.api import Workspace
    from codeloupe.embed.local import MINILM_SHA256, local_model_id, requantized_model, shipped_model_path
    from processes import alive, children_running

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "mod.py").write_text("def handler(request):\n    return request\n")
    ws = Workspace(tmp_path / "src", overrides={"embed_provider": "local"})
    models = ws.settings.cache_root / "models"  # a fresh cache (conftest): the model is derived
    warm = WarmWorkspace(ws)
    try:
        deadline = time.monotonic() + 300  # a hang guard only
        while not list(models.glob("requantize-*")):  # its work dir: the derivation starts
            assert time.monotonic() < deadline, "the derivation did not start"
            time.sleep(0.02)
        started = time.monotonic()
        while not list(models.glob("requantize-*/folded.onnx")):  # under way, its first step done
            assert time.monotonic() < deadline, "the derivation did not go on"
            time.sleep(0.02)
        derivers = children_running(os.getpid(), "codeloupe.embed.derive")
        asked = time.monotonic()
        ran_s = asked - started
    finally:
        warm.close()
    closed_s = time.monotonic() - asked
    assert derivers and not any(alive(pid) for pid in derivers)
    assert sorted(p.name for p in models.iterdir()) == ["sha256.json"]  # the shipped model's checksum, nothing else

    timed = time.monotonic()
    derived = requantized_model(shipped_model_path(), MINILM_SHA256, ws.settings.cache_root)
    whole_s = time.monotonic() - timed
    assert closed_s < (whole_s - ran_s) / 2, (closed_s, whole_s, ran_s)
    again = Workspace(tmp_path / "src", overrides={"embed_provider": "local"})
    try:
        assert again.embed().chunks_done > 0
        provider = again.embedding_provider()
        assert provider.model_path == derived and provider.model_id == local_model_id(again.settings)
    finally:
        again.close()


# An MCP client that starts the server on the pipes it was given (the test's, which the test holds open), writes the
# server's pid in the file its first argument names and waits to be killed.
CLIENT = """
import subprocess, sys, time
server = subprocess.Popen(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(str(server.pid))
time.sleep(1000)
"""


class StdioServer:
    """A real `codeloupe mcp ROOT` over pipes, initialised, its stderr in `errlog`; killed if a test leaves it
    running. With `client_pid_file`, `process` is a stand-in client (`CLIENT`) that started the server, and the
    server's pid is in that file once the server answered."""

    def __init__(self, root: Path, errlog: Path, client_pid_file: Path | None = None, **env: str) -> None:
        command = [sys.executable, "-m", "codeloupe", "mcp", str(root)]
        if client_pid_file is not None:
            command = [sys.executable, "-c", CLIENT, str(client_pid_file), *command]
        with errlog.open("w") as err:
            self.process = subprocess.Popen(command, cwd=errlog.parent, text=True, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=err, env=subprocess_env(**env))
        self.errlog = errlog
        self._calls = iter(range(1, 1_000_000))

    def _send(self, message: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        assert self.process.stdout is not None
        sent = next(self._calls)
        self._send({"jsonrpc": "2.0", "id": sent, "method": method, "params": params})
        while (answer := json.loads(self.process.stdout.readline())).get("id") != sent:
            pass  # a notification
        return answer["result"]

    def status(self) -> dict:
        return json.loads(self.call("tools/call", {"name": "status", "arguments": {}})["content"][0]["text"])

    def wait_for(self, condition: Callable[[dict], bool], timeout_s: float = 300) -> dict:
        """The first status that meets `condition`, asked again every 50 ms."""
        deadline = time.monotonic() + timeout_s
        while not condition(now := self.status()):
            assert time.monotonic() < deadline, now
            time.sleep(0.05)
        return now

    def close_stdin(self, timeout_s: float) -> int:
        """Close stdin as an MCP client does and wait up to `timeout_s` for the server to exit by itself; its
        return code (the server is killed, and the test fails, past that)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server was still running {timeout_s} s after its stdin closed")

    def __enter__(self) -> StdioServer:
        try:
            self.call("initialize", {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                                     "clientInfo": {"name": "test", "version": "0"}})
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@NEEDS_WORKER_POOL
def test_stdio_exits_on_its_own_when_stdin_closes_while_embedding(tmp_path: Path) -> None:
    """End to end: the real server, its stdin closed while it embeds, exits by itself (return code 0) without a
    leaked-semaphore warning and with its embedding workers gone. The wait is this test's own and generous, not
    an MCP client's 2 s before SIGTERM: that the step under way is dropped is the warm workspace's test above."""
    from processes import alive, children_of

    with StdioServer(many_long_chunks(tmp_path / "long"), tmp_path / "stderr.txt",
                     CODELOUPE_EMBED_PROVIDER="local") as server:
        now = server.wait_for(lambda status: status["vectors_done"] > 0)  # the model loaded, the first vectors
        assert now["vectors_done"] < now["vectors_total"]  # still embedding
        workers = children_of(server.process.pid)
        returncode = server.close_stdin(60)
    assert returncode == 0, server.errlog.read_text()  # exited by itself
    assert "leaked semaphore" not in server.errlog.read_text()
    assert workers and not any(alive(pid) for pid in workers)  # its embedding workers ended too


@NEEDS_WORKER_POOL
def test_stdio_exits_on_its_own_when_stdin_closes_during_the_first_index(tmp_path: Path) -> None:
    """A first index still running when stdin closed was waited for (up to 30 s, past the 2 s an MCP client allows
    before SIGTERM: the resource tracker then reported leaked semaphores and chunking workers could be left). It
    now stops before its next file: the server exits by itself with its chunking workers ended, the files it
    wrote whole in the index, and the next start indexes the rest. The bound is generous, not the client's 2 s."""
    import sqlite3

    from codeloupe.api import load_settings
    from processes import alive, children_of, many_small_files

    root = many_small_files(tmp_path / "many")
    with StdioServer(root, tmp_path / "stderr.txt") as server:
        server.wait_for(lambda status: status["files"] > 0 and not status["ready"])
        workers = children_of(server.process.pid)
        returncode = server.close_stdin(10)
    assert returncode == 0, server.errlog.read_text()
    assert "leaked semaphore" not in server.errlog.read_text()
    assert workers and not any(alive(pid) for pid in workers)  # the chunking workers ended with it

    index = load_settings(root.resolve(), {}).index_path(root)
    with contextlib.closing(sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True)) as conn:
        stored = conn.execute("SELECT count(*) FROM files").fetchone()[0]
        chunkless = conn.execute("SELECT count(*) FROM files WHERE id NOT IN (SELECT file_id FROM chunks)").fetchone()[0]
    assert 0 < stored < 1500 and chunkless == 0  # stopped part way, every file written whole

    with StdioServer(root, tmp_path / "stderr-again.txt") as again:
        done = again.wait_for(lambda status: status["ready"])
        assert done["files"] == 1500 and done["last_error"] == ""  # the next start resumed and finished
        assert again.close_stdin(60) == 0


@NEEDS_WORKER_POOL
@pytest.mark.parametrize(("stop", "status"), [("SIGTERM", 0), ("SIGINT", 130)])
def test_stdio_stops_and_closes_its_first_index_on_sigterm_or_ctrl_c(tmp_path: Path, stop: str, status: int) -> None:
    """An MCP client that ends the server with SIGTERM (its stdin left open, or closed too late) killed it by the
    default action mid first index: status -15, the index never closed (its write-ahead log left beside it) and the
    resource tracker reporting leaked semaphores. Ctrl-C (SIGINT) was taken by asyncio's handler for a cancellation
    that then waited for a line on stdin, the index going on. Both now end it as a closed stdin does: the index
    stopped before its next file and closed, its chunking workers ended."""
    import signal

    from codeloupe.api import load_settings
    from processes import alive, children_of, many_small_files

    root = many_small_files(tmp_path / "many")
    with StdioServer(root, tmp_path / "stderr.txt") as server:
        server.wait_for(lambda status: status["files"] > 0 and not status["ready"])
        workers = children_of(server.process.pid)
        server.process.send_signal(getattr(signal, stop))
        returncode = server.process.wait(timeout=30)
    assert returncode == status, server.errlog.read_text()
    assert "leaked semaphore" not in server.errlog.read_text()
    assert workers and not any(alive(pid) for pid in workers)
    index = load_settings(root.resolve(), {}).index_path(root)
    assert index.exists() and not Path(f"{index}-wal").exists()  # closed, its log folded in


def test_stdio_ends_when_its_client_dies_with_stdin_left_open(project: Path, tmp_path: Path) -> None:
    """An MCP client killed (SIGKILL) or crashed while another process still holds its end of the pipes (a wrapper,
    a child that inherited them) never closes the server's stdin: the server ran on for good, its index open and
    its workers with it. MCP names no client process, but the one that started the server is its parent: once that
    is gone (the server handed to init or a subreaper), the server closes its workspace as on SIGTERM and exits,
    status 1 (not observed here: the server is no child of the test's), its workers ended."""
    import signal

    from codeloupe.api import load_settings
    from processes import alive, children_of

    pid_file = tmp_path / "server.pid"
    pid, workers = 0, []
    try:
        with StdioServer(project, tmp_path / "stderr.txt", client_pid_file=pid_file) as server:
            server.wait_for(lambda status: status["ready"])
            pid = int(pid_file.read_text())
            workers = children_of(pid)
            assert workers  # the kept parse worker its index chunked in
            server.process.kill()  # the client; the test still holds the server's stdin and stdout
            server.process.wait(timeout=30)
            deadline = time.monotonic() + 60
            while left := [each for each in (pid, *workers) if alive(each)]:
                assert time.monotonic() < deadline, f"outlived the client: {left}"
                time.sleep(0.05)
    finally:
        for each in (pid, *workers):
            if each and alive(each):
                os.kill(each, signal.SIGKILL)
    log = server.errlog.read_text()
    assert "Traceback" not in log and "leaked semaphore" not in log, log
    index = load_settings(project.resolve(), {}).index_path(project)
    assert index.exists() and not Path(f"{index}-wal").exists()  # closed, its log folded in


# A file whose name holds a bidi override, an escape sequence, a markdown link's end and a newline that forges a
# heading of the answer.
HOSTILE_PATH = "app/grant\u202etxt\x1b[31m](http:x)\n## 9. forged.py"


async def test_the_tools_name_files_as_code_spans_on_one_line(project: Path) -> None:
    """`search`, `expand` and `locate` put a file's name (and a chunk's breadcrumb, which starts with it) raw in the
    headings, captions and lines around their code, and `graph` its names unescaped: in the agent's context (and
    a client that renders the answer as markdown) a newline in the name forged a heading of the answer, markdown in
    it formed a link, and a bidi override or an escape sequence reached the screen as it is. Each name is a code
    span, one_line'd (codeloupe.types.code_span), as in an ask answer; the graph's text is shown as the CLI
    shows it."""
    from codeloupe.types import CONTROL_CHARACTERS, code_span, one_line

    (project / HOSTILE_PATH).write_text(
        'from app.store import SessionStore\n\n\ndef grant_admin(user):\n    """Grant admin rights."""\n'
        "    return SessionStore().find(user)\n")
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            answers = {
                "search": text_of(await client.call_tool("search", {"query": "grant admin rights"})),
                "expand": text_of(await client.call_tool("expand", {"path": HOSTILE_PATH, "symbol": "grant_admin"})),
                "locate": text_of(await client.call_tool("locate", {"text": "grant_admin"})),
                "graph": text_of(await client.call_tool("graph", {"node": "app/store.py"})),
                # A refusal names the file asked for: on one line too.
                "refused": text_of(await client.call_tool("expand", {"path": HOSTILE_PATH, "start_line": 90,
                                                                     "end_line": 91})),
            }
            # The name as the answers show it, copied into `expand` by the agent, reads the file.
            copied = await client.call_tool("expand", {"path": one_line(HOSTILE_PATH), "start_line": 4, "end_line": 4})
    finally:
        warm.close()
    assert not copied.is_error and "def grant_admin(user):" in text_of(copied), copied.content
    for tool, answer in answers.items():
        assert not CONTROL_CHARACTERS.search(answer), (tool, answer)
        assert not [line for line in answer.splitlines() if line.startswith("## 9.")], (tool, answer)
    assert f"## 1. {code_span(HOSTILE_PATH)}  (" in answers["search"], answers["search"]
    caption = f"{code_span(HOSTILE_PATH + ':1-6')}  {code_span(HOSTILE_PATH + ' > def grant_admin(user)')}"
    assert f"{caption}\n```python\n" in answers["search"], answers["search"]
    assert answers["expand"].startswith(f"{code_span(HOSTILE_PATH + ':4-6')} ({code_span('grant_admin')})\n")
    assert f"{code_span(HOSTILE_PATH + ':4:5')}  {code_span('def grant_admin(user):')}" in answers["locate"]
    assert one_line(HOSTILE_PATH) in answers["graph"], answers["graph"]
    assert answers["refused"].endswith(f"{one_line(HOSTILE_PATH)}: lines 90-91 are outside the file (1-6)"), \
        answers["refused"]


async def test_a_name_copied_from_an_answer_is_the_file_or_folder_it_names(project: Path) -> None:
    """`expand` took a file's name as the answers show it (escaped on one line), but `graph` and `search`'s `scope`
    did not: a node or a route's end copied from an answer was read as a concept (another file, found by its words)
    and a scope as a folder the index does not hold ('no indexed file lies under ...'). The engine maps each back
    to the one indexed file or folder shown so, as the search's text and the graph's text show it."""
    from serve_project import CR_FILE, ESCAPED_FILE, ESCAPED_FOLDER, write_escaped_names

    from codeloupe.types import line_breaks_escaped, one_line

    write_escaped_names(project)
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            found = text_of(await client.call_tool("search", {"query": "grant admin rights"}))
            shown = text_of(await client.call_tool("graph", {"node": "app/store.py"}))
            scoped = text_of(await client.call_tool("search", {"query": "admin rights",
                                                                "scope": one_line(ESCAPED_FOLDER)}))
            node = text_of(await client.call_tool("graph", {"node": one_line(ESCAPED_FILE)}))
            folder = text_of(await client.call_tool("graph", {"node": one_line(ESCAPED_FOLDER) + "/"}))
            route = text_of(await client.call_tool("graph", {"source": one_line(ESCAPED_FILE),
                                                             "target": line_breaks_escaped(CR_FILE)}))
            carriage = text_of(await client.call_tool("graph", {"node": line_breaks_escaped(CR_FILE)}))
            expanded = text_of(await client.call_tool("expand", {"path": line_breaks_escaped(CR_FILE),
                                                                 "start_line": 4, "end_line": 4}))
    finally:
        warm.close()
    # The names as the answers show them, where an agent copies them from.
    assert f"`{one_line(ESCAPED_FILE)}:" in found and f"  {line_breaks_escaped(CR_FILE)}:1 import" in shown, shown
    assert scoped.startswith("1 candidate file") and f"## 1. `{one_line(ESCAPED_FILE)}`" in scoped, scoped
    assert node.startswith(f"{one_line(ESCAPED_FILE)}  (community ") and "; matched by path)" in node, node
    assert folder.startswith(f"{one_line(ESCAPED_FOLDER)}/  (folder: 1 file of the graph)"), folder
    assert route.startswith(f"{one_line(ESCAPED_FILE)} -> {line_breaks_escaped(CR_FILE)}:"), route
    assert "--> app/store.py [SessionStore]" in route and "def grant_admin(user):" in route, route
    assert carriage.startswith(f"{line_breaks_escaped(CR_FILE)}  (community ") and "matched by path" in carriage
    assert "def revoke_admin(user):" in expanded, expanded


async def test_a_file_resource_that_cannot_be_read_is_a_failed_read_and_a_deleted_one_is_not_there(
        project: Path) -> None:
    """An indexed file replaced by a FIFO (before the next refresh skips it) was answered `-32602`, as a resource
    that is not there, where a read that fails is `-32603` with its reason (as a shared index that cannot be read
    is): the engine said it in words, and its refusal was taken for the agent's mistake. A file deleted since it was
    indexed is still not there."""
    from mcp_types import INTERNAL_ERROR

    warm = WarmWorkspace(project, refresh_interval_s=86_400)  # the index as it was: no refresh after the first
    try:
        async with Client(build_server(warm)) as client:
            await client.call_tool("status", {})
            while not warm.ready:  # status answers from the index as it is once its wait for the first index ends
                await anyio.sleep(0.01)
            (project / "app/render.py").unlink()
            os.mkfifo(project / "app/render.py")
            (project / "app/store.py").unlink()
            with pytest.raises(MCPError) as unreadable:
                await client.read_resource("codeloupe://file/app/render.py")
            with pytest.raises(MCPError) as gone:
                await client.read_resource("codeloupe://file/app/store.py")
    finally:
        warm.close()
    assert unreadable.value.code == INTERNAL_ERROR, unreadable.value
    assert str(unreadable.value) == "app/render.py: cannot be read (not a regular file)", unreadable.value
    assert gone.value.code == INVALID_PARAMS and "app/store.py: no such file in the workspace" in str(gone.value)


async def test_a_resource_uri_is_named_in_an_error_on_one_line_and_cut(project: Path) -> None:
    """The SDK named an unknown resource's URI whole, in the error's message and again in its data: a 100 KB URI
    came back as 200 KB, and a line break in it broke the message's line. A file resource's path past what the
    `expand` tool takes (4,096 characters) was echoed whole in the engine's refusal. Each is named as a tool's
    unknown argument is: its start, on one line, an ellipsis after it."""
    warm = WarmWorkspace(project)
    errors = {}
    try:
        async with Client(build_server(warm)) as client:
            for name, uri in (("unknown", "codeloupe://nothing/" + "x" * 100_000),
                              ("line break", "codeloupe://nothing/a\nb"),
                              ("long path", "codeloupe://file/" + "y" * 60_000)):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(uri)
                errors[name] = refused.value
            still = (await client.read_resource("codeloupe://file/app/render.py")).contents[0].text
    finally:
        warm.close()
    assert still == (project / "app/render.py").read_text()
    unknown = errors["unknown"]
    assert unknown.code == INVALID_PARAMS and str(unknown) == "Unknown resource: codeloupe://nothing/" + "x" * 180 + "…"
    assert unknown.error.data == {"uri": "codeloupe://nothing/" + "x" * 180 + "…"}, str(unknown.error.data)[:300]
    broken = errors["line break"]
    assert str(broken) == "Unknown resource: codeloupe://nothing/a\\nb" and broken.error.data == {
        "uri": "codeloupe://nothing/a\\nb"}
    long_path = errors["long path"]
    assert long_path.code == INVALID_PARAMS and len(str(long_path)) + len(str(long_path.error.data)) < 500
    assert "`path` must be at most 4,096 characters, got 60,000" in str(long_path), str(long_path)[:300]


async def test_a_file_resource_over_a_tools_budget_is_cut_at_a_line_saying_how_to_read_on(project: Path) -> None:
    """The file resource had no bound: a 149 KB file came back whole (and one of up to the 64 MiB a read allows
    could), into an agent's finite context. Past what a tool answers by default (`expand`'s 24,000 bytes) it is its
    leading whole lines and a last line naming the `expand` call that reads on; a first line over that on its own
    is cut inside. A file that fits is the file's text alone, as before."""
    import re

    from codeloupe_mcp.sized import DEFAULT_BUDGET_BYTES

    big = "".join(f"def ledger_step_{i}(rows):  # {'ledger ' * 4}\n    return rows[{i}]\n\n" for i in range(2_500))
    one_long = "DATA = '" + "x" * 30_000 + "'\n" + "".join(f"value_{i} = {i}  # a short line\n" for i in range(2_000))
    (project / "app/ledger.py").write_text(big)
    (project / "app/data.py").write_text(one_long)
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            cut = (await client.read_resource("codeloupe://file/app/ledger.py")).contents[0].text
            long_line = (await client.read_resource("codeloupe://file/app/data.py")).contents[0].text
            small = (await client.read_resource("codeloupe://file/app/render.py")).contents[0].text
            (last, start, end), = re.findall(
                r"\n\[cut at line (\d+) to stay within 24000 bytes: read on with the `expand` tool: path "
                r"`app/ledger.py`, start_line=(\d+), end_line=(\d+)\]$", cut)
            read_on = text_of(await client.call_tool("expand", {"path": "app/ledger.py", "start_line": int(start),
                                                                "end_line": int(end)}))
    finally:
        warm.close()
    assert len(big.encode()) > 6 * DEFAULT_BUDGET_BYTES and len(cut.encode()) <= DEFAULT_BUDGET_BYTES
    lines = big.splitlines(keepends=True)
    assert cut.startswith("".join(lines[:int(last)])) and (int(start), int(end)) == (int(last) + 1, len(lines))
    assert read_on.startswith(f"`app/ledger.py:{start}-") and lines[int(start) - 1].rstrip() in read_on
    assert len(long_line.encode()) <= DEFAULT_BUDGET_BYTES and long_line.startswith("DATA = 'xxx")
    assert long_line.endswith(
        "\n[line 1 alone is 30009 bytes: its first 23" + long_line.split("its first 23", 1)[1]), long_line[-400:]
    assert long_line.endswith("read it with the `expand` tool: path `app/data.py`, start_line=1, end_line=1 and "
                              "max_bytes up to 200000; the lines after it: start_line=2, end_line=2001]"), long_line[-300:]
    assert small == (project / "app/render.py").read_text()


async def test_a_refusal_names_a_long_path_or_name_sent_by_its_start(project: Path) -> None:
    """A refused path was echoed whole, up to the 4,096 characters a tool takes (a concept to `graph`, 1,000), into
    the agent's context. Every refusal names what the client sent by its first 200 characters on one line, an
    ellipsis after them (`elided`, as a resource's URI was already named)."""
    long = "deep/" * 800  # 4,000 characters
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            refused = {str(arguments): await client.call_tool(tool, arguments) for tool, arguments in (
                ("expand", {"path": long + "missing.py"}),
                ("expand", {"path": "../" + long}),
                ("expand", {"path": long + ".env"}),
                ("expand", {"path": "app/auth.py", "symbol": "x" * 500}),
                ("graph", {"node": long[:995] + "x.py"}),
                ("graph", {"node": "z" * 1000}))}
            with pytest.raises(MCPError) as resource:
                await client.read_resource(f"codeloupe://file/{long}missing.py")
    finally:
        warm.close()
    for arguments, result in refused.items():
        said = text_of(result)
        assert result.is_error and len(said) < 500, (arguments, said[:300])
        assert "…" in said and ("deep/deep/" in said or "xxxx" in said or "zzzz" in said), (arguments, said[:300])
    assert f"{long[:200]}…: no such file in the index" in text_of(refused[str({"path": long + "missing.py"})])
    assert len(str(resource.value)) < 500 and f"{long[:200]}…: no such file" in str(resource.value)


async def test_a_call_whose_workspace_closes_under_it_is_refused_in_a_sentence(project: Path) -> None:
    """A search meeting its workspace's close (`codeloupe mcp` ending on SIGTERM or a closed stdin while it ran)
    stops with the graph build it waits for or runs (`IndexStopped`, 1f794d5): the SDK answered "Error executing
    tool search" and nothing more, and logged a traceback. It answers a sentence saying the workspace closed. The
    close is caught where it starts: `Workspace.close` marks the workspace closed first, then waits for its graph
    builds before it closes the index (the graph not built yet here: the first index leaves it to the first
    search)."""
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            assert not (await client.call_tool("locate", {"text": "SessionStore"})).is_error  # the first index done
            warm.ws.closed = True
            refused = await client.call_tool("search", {"query": "check the bearer token against the session store"})
            warm.ws.closed = False  # for the close below, which marks it itself
    finally:
        warm.close()
    assert refused.is_error and text_of(refused) == (
        "Error executing tool search: the workspace closed while the call ran (the server is stopping): ask again"
        " once it is back"), text_of(refused)
