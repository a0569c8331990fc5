"""The HTTP API of `codeloupe serve`, served for real by uvicorn on loopback and called over HTTP."""

from __future__ import annotations

import json
import logging
import os
import resource
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2 as httpx
import pytest
from serve_project import fork_and_lone, subprocess_env

from codeloupe.cli import main as cli_main
from codeloupe_web.guard import GuardConfig


def without_timing(bundle: dict) -> dict:
    return {key: value for key, value in bundle.items() if key != "timing_ms"}


def test_search_answers_the_json_of_the_cli(project: Path, serve, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["search", str(project), "how are bearer tokens checked", "--json", "--no-embed"]) == 0
    cli = json.loads(capsys.readouterr().out)
    base = serve([project])
    got = httpx.get(f"{base}/v1/search", params={"q": "how are bearer tokens checked"})
    posted = httpx.post(f"{base}/v1/search", json={"query": "how are bearer tokens checked", "root": str(project)})
    assert got.status_code == posted.status_code == 200
    assert without_timing(got.json()) == without_timing(posted.json()) == without_timing(cli)
    assert got.json()["core"][0]["chunks"][0]["text"] == (project / got.json()["core"][0]["path"]).read_text()


def test_a_folder_names_each_files_community_as_the_cli_does(project: Path, serve,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A folder's files carried `communityName` only over the language server, which added it; the CLI's --json
    and /v1/graph gave a community's number alone."""
    assert cli_main(["graph", str(project), "--json", "--no-embed", "--node", "app"]) == 0
    cli = json.loads(capsys.readouterr().out)
    http = httpx.get(f"{serve([project])}/v1/graph", params={"node": "app"}).json()
    assert http.pop("notes") == [] and http == cli
    names = {c["id"]: c["name"] for c in cli["communities"]}
    assert [(f["path"], f["communityName"]) for f in cli["files"]] == [
        (f["path"], names[f["community"]]) for f in cli["files"]]
    assert all(f["communityName"] for f in cli["files"])


def test_every_refusal_has_the_documented_shape(project: Path, serve) -> None:
    """FastAPI's own refusals answered {"detail": ...}: a body that is not JSON (400, where the docs promise
    {"error": ...} for a 400), an unknown path (404), a method a path does not take (405)."""
    base = serve([project])
    for answer, status in ((httpx.post(f"{base}/v1/search", content=b'{"query": "\xff\xfe"}',
                                       headers={"content-type": "application/json"}), 400),
                           (httpx.get(f"{base}/v1/no-such-endpoint"), 404),
                           (httpx.delete(f"{base}/v1/search"), 405)):
        assert answer.status_code == status and set(answer.json()) == {"error"}, (status, answer.text)
    assert httpx.delete(f"{base}/v1/search").headers.get("allow")  # what the path takes, still said
    # `GET /v1/ask` said "Method Not Allowed" alone, leaving the method it takes to the headers or the docs.
    assert httpx.get(f"{base}/v1/ask", params={"q": "escape html"}).json() == {
        "error": "GET is not a method of /v1/ask, which takes POST"}
    # A body that does not parse as JSON (cut short, or no JSON at all) was a 422 with FastAPI's `json_invalid`
    # detail, where only one that is not UTF-8 answered the 400 the docs promise: now each says where it fails.
    for body, why in ((b'{"query": "escape html"', "Expecting ',' delimiter at character 23"),
                      (b"query=escape+html", "Expecting value at character 0")):
        for path in ("/v1/search", "/v1/ask"):
            answer = httpx.post(f"{base}{path}", content=body, headers={"content-type": "application/json"})
            assert (answer.status_code, answer.json()) == (400, {"error": f"the body is not JSON: {why}"}), \
                (path, answer.text)
    # A value of another JSON type is malformed, not coerced (`"limit": true` was read as 1, "yes" as true).
    assert httpx.post(f"{base}/v1/search", json={"query": "escape html", "limit": True}).status_code == 422
    assert httpx.post(f"{base}/v1/ask", json={"question": "escape html", "agents": "yes"}).status_code == 422
    assert httpx.post(f"{base}/v1/search", json={"query": "escape html", "limit": 3}).status_code == 200
    # A text to locate of several lines is malformed like an empty one, its parameter named the same way (it was
    # a 400 with the engine's "the text to find must be one line", which named no parameter).
    for text, problem in (("", "`text` must not be empty"), ("def find(\n    self", "`text` must be one line, got 2 lines")):
        answer = httpx.get(f"{base}/v1/locate", params={"text": text})
        assert (answer.status_code, answer.json()) == (422, {"error": problem}), answer.text


def test_a_malformed_request_is_refused_in_a_sentence_naming_each_parameter(project: Path, serve) -> None:
    """A malformed request answered FastAPI's `{"detail": [...]}` (pydantic's report: `loc`, `msg`, `input`, ...),
    where every other refusal is `{"error": ...}`: an agent had two shapes to read, and a web page to show. It is
    now one sentence naming each parameter or body field with the rule it breaks, as MCP refuses a tool's
    arguments, still 422 (a request to correct, where a 400 is the engine refusing what the request asks)."""
    base = serve([project])
    takes = "which takes `query`, `repo`, `scope`, `mode`, `limit`, `repos`"
    for method, path, request, error in (
            ("GET", "/v1/search", {"params": {"q": "token", "limit": "x"}}, "`limit` must be a whole number"),
            ("GET", "/v1/search", {"params": {"q": "token", "limit": "0"}}, "`limit` must be at least 1"),
            ("GET", "/v1/search", {"params": {"q": "token", "limit": "51", "mode": "all"}},
             "`mode` must be one of 'code', 'docs' or 'both'; `limit` must be at most 50"),
            ("GET", "/v1/search", {"params": {}}, "`query` is required"),
            ("GET", "/v1/locate", {"params": {"text": "x", "identifier": "maybe"}}, "`identifier` must be true or false"),
            ("POST", "/v1/search", {"json": {"query": "token", "limit": True}}, "`limit` must be a whole number"),
            ("POST", "/v1/search", {"json": {"query": "token", "limit": 2.5}}, "`limit` must be a whole number"),
            ("POST", "/v1/search", {"json": {"limit": 3}}, "`query` is required"),
            ("POST", "/v1/ask", {"json": {"question": "token", "agents": "yes"}}, "`agents` must be true or false"),
            ("POST", "/v1/search", {}, "the JSON body is required"),
            ("POST", "/v1/search", {"json": ["token"]}, "the JSON body must be a JSON object"),
            # A request never carries settings: a field the body does not take is named with those it does.
            ("POST", "/v1/search", {"json": {"query": "token", "chat_base_url": "http://evil.example/v1"}},
             f"`chat_base_url` is not a field of the JSON body of POST /v1/search, {takes}"),
            ("POST", "/v1/search", {"json": {"query": "", "embed_provider": "openai"}},
             f"`query` must not be empty; `embed_provider` is not a field of the JSON body of POST /v1/search, {takes}")):
        answer = httpx.request(method, f"{base}{path}", **request)
        assert (answer.status_code, answer.json()) == (422, {"error": error}), (path, request, answer.text)


def test_every_endpoint_answers(project: Path, serve) -> None:
    base = serve([project])
    assert httpx.get(f"{base}/healthz").json() == {"ok": True}
    assert httpx.get(f"{base}/readyz").status_code == 200
    status = httpx.get(f"{base}/v1/status").json()
    assert status["ready"] and status["workspaces"][0]["files"] == 4
    assert status["workspaces"][0]["building"] == ""  # what an answer lacks while the first index runs: nothing
    assert "python" in httpx.get(f"{base}/v1/languages").json()
    span = httpx.get(f"{base}/v1/expand", params={"path": "app/render.py", "symbol": "escape_html"}).json()
    assert span["text"].startswith("def escape_html") and span["symbol"] == "escape_html"
    line = httpx.get(f"{base}/v1/expand", params={"path": "app/auth.py", "start": 1, "end": 1}).json()
    assert line["start_line"] == line["end_line"] == 1
    # A range beside a symbol was dropped: the whole definition answered as if asked for.
    mixed = httpx.get(f"{base}/v1/expand", params={"path": "app/render.py", "symbol": "escape_html", "start": 1})
    assert mixed.status_code == 400 and "a line range is read on its own" in mixed.json()["error"], mixed.text
    located = httpx.get(f"{base}/v1/locate", params={"text": "find", "identifier": "true"}).json()
    assert [(loc["path"], loc["line"]) for loc in located["locations"]] == [("app/auth.py", 13), ("app/store.py", 14)]
    node = httpx.get(f"{base}/v1/graph", params={"node": "app/auth.py"}).json()
    assert any(n["path"] == "app/store.py" for n in node["imports"])
    assert "nodes" in httpx.get(f"{base}/v1/graph").json()
    folder = httpx.get(f"{base}/v1/graph", params={"node": "app"}).json()  # a folder: its part of the graph
    assert folder["folder"] == "app" and [f["path"] for f in folder["files"]] == [
        "app/auth.py", "app/render.py", "app/store.py"] and folder["notes"] == []
    tour = httpx.get(f"{base}/v1/tour", params={"limit": 3}).json()
    assert len(tour["stops"]) <= 3 and "SessionStore" in {stop["name"] for stop in tour["stops"]}
    # No chat model: nothing was ever narrated.
    assert httpx.get(f"{base}/v1/flows").json() == {"flows": [], "notes": []}
    near = httpx.get(f"{base}/v1/related", params={"path": "app/store.py"}).json()
    assert near["lane"] == "lexical" and "app/auth.py" in {c["path"] for c in near["chunks"]}
    docs = httpx.get(f"{base}/v1/docsearch", params={"q": "logging in with a password"}).json()
    assert docs["hits"][0]["path"] == "docs/guide.md" and "login" in docs["hits"][0]["text"]
    assert all(answer["notes"] == [] for answer in (span, located, node, tour, near, docs))  # the index is whole
    page = httpx.get(f"{base}/")
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    assert httpx.get(f"{base}/graph").text.startswith("<!DOCTYPE html>")
    for extra in ({"chat_base_url": "http://evil.example/v1"}, {"embed_provider": "openai"}):
        assert httpx.post(f"{base}/v1/search", json={"query": "token", **extra}).status_code == 422
        assert httpx.post(f"{base}/v1/ask", json={"question": "token", **extra}).status_code == 422
    schema = httpx.get(f"{base}/openapi.json").json()
    assert {"/v1/search", "/v1/expand", "/v1/ask", "/v1/ask/stream", "/v1/graph", "/v1/locate", "/v1/status",
            "/v1/languages", "/v1/docsearch", "/v1/tour", "/v1/flows", "/v1/related", "/healthz",
            "/readyz"} <= set(schema["paths"])


def test_a_query_parameter_an_endpoint_does_not_take_is_refused_naming_those_it_takes(project: Path,
                                                                                      serve) -> None:
    """A typo in a parameter's name (`?limt=5`, `?qq=...`) was ignored: the answer came as if it were absent (12
    files, not 5; or a 422 saying `q` is missing, never that `qq` is no parameter). Every endpoint of the API
    refuses a parameter it does not take, naming it and those it takes, as MCP refuses an argument; the pages,
    whose scripts read their own address (`/?q=...&file=...`), take any."""
    base = serve([project])
    takes = "which takes `query`, `repo`, `scope`, `mode`, `limit`, `repos`"
    for url, params, error in (
            ("/v1/search", {"q": "token", "limt": "5"}, f"`limt` is not a parameter of GET /v1/search, {takes}"),
            ("/v1/search", {"qq": "token"}, f"`qq` is not a parameter of GET /v1/search, {takes}"),
            ("/v1/search", {"q": "token", "b": "1", "a": "2"}, f"`b`, `a` are not parameters of GET /v1/search, {takes}"),
            # The names HTTP had first (`start`, `q`) are still taken, but a refusal names MCP's, which both share.
            ("/v1/expand", {"path": "app/auth.py", "begin": "3"},
             "`begin` is not a parameter of GET /v1/expand, which takes `path`, `repo`, `start_line`, `end_line`, "
             "`symbol`, `anchor_line`"),
            ("/v1/status", {"root": "project"}, "`root` is not a parameter of GET /v1/status, which takes no parameter")):
        answer = httpx.get(base + url, params=params)
        assert (answer.status_code, answer.json()) == (422, {"error": error}), answer.text[:300]
    posted = httpx.post(f"{base}/v1/search", params={"root": "project"}, json={"query": "token"})
    assert (posted.status_code, posted.json()["error"]) == (
        422, "`root` is not a parameter of POST /v1/search, which takes no parameter (its JSON body carries its "
             "arguments)")
    long = httpx.get(f"{base}/v1/search", params={"q": "token", "x" * 5_000: "1", **{f"p{n}": "1" for n in range(9)}})
    assert long.status_code == 422 and len(long.text) < 1_000 and " and 5 more are not parameters" in long.text
    # The pages and their files take what their scripts read (or a cache-busting parameter), as before.
    for url, params in (("/", {"q": "token", "file": "app/auth.py", "line": "3"}), ("/graph", {"root": "project"}),
                        ("/static/page.js", {"v": "2"})):
        assert httpx.get(base + url, params=params).status_code == 200, url
    assert httpx.get(f"{base}/v1/search", params={"q": "token", "limit": "5", "root": "project"}).status_code == 200
    # So do the health probes: a load balancer or a monitor adds its own (it got 400, and took the server for down).
    assert httpx.get(f"{base}/healthz", params={"_": "1733580000"}).json() == {"ok": True}
    assert httpx.get(f"{base}/readyz", params={"nocache": "1", "x": "y"}).json() == {"ready": True}


async def test_every_argument_of_an_mcp_tool_is_a_parameter_of_its_endpoint(project: Path, serve,
                                                                            tmp_path: Path) -> None:
    """HTTP's `/v1/expand` took `start`, `end` and `line` where MCP's `expand` takes `start_line`, `end_line` and
    `anchor_line` (and `/v1/search` `q` where `search` takes `query`; on a server of several repositories every
    endpoint `root` where MCP's tools take `repo`, and `/v1/search/all` a comma-separated string where `search`
    takes a list, `repos`): an agent that learnt one surface got the other wrong. Each tool's arguments are now
    parameters of its endpoint under the same names, but those that shape MCP's text answer, which HTTP has no
    use for; with one repository and with several (MCP's `repo` and `repos` then)."""
    from mcp import Client

    from codeloupe_mcp.server import build_server
    from codeloupe_serving.warm import WarmWorkspaces

    mcp_only = {"max_bytes", "flat"}  # a text answer's byte budget and its flat form: HTTP answers JSON
    fork, _ = fork_and_lone(tmp_path)
    for roots in ([project], [project, fork]):
        pool = WarmWorkspaces(list(roots))
        try:
            async with Client(build_server(pool.all[0], pool)) as client:
                tools = {tool.name: set(tool.input_schema["properties"]) - mcp_only
                         for tool in (await client.list_tools()).tools}
        finally:
            pool.close()
        schema = httpx.get(f"{serve(roots)}/openapi.json").json()

        def taken(method: str, path: str) -> set[str]:
            op = schema["paths"][path][method]  # noqa: B023 (the schema of this very server)
            if "requestBody" in op:
                name = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
                fields = schema["components"]["schemas"][name]["properties"]  # noqa: B023
                return {field for field, node in fields.items() if not node.get("deprecated")}
            return {p["name"] for p in op.get("parameters", []) if not p.get("deprecated")}

        for tool, method, path in (("search", "get", "/v1/search"), ("search", "post", "/v1/search"),
                                   ("expand", "get", "/v1/expand"), ("locate", "get", "/v1/locate"),
                                   ("graph", "get", "/v1/graph")):
            assert tools[tool] <= taken(method, path), (tool, path, tools[tool] - taken(method, path))
        assert ({"repos", "repo"} & set().union(*tools.values())) == ({"repos", "repo"} if len(roots) > 1 else set())
        assert "repos" in taken("get", "/v1/search/all") and "root" not in taken("get", "/v1/expand")
        assert "status" in tools and "ask" not in tools  # no chat model here; `/v1/ask`'s body: `question`, `mode`
        assert {"question", "mode", "repo"} <= taken("post", "/v1/ask")


def test_http_takes_mcps_names_and_still_its_own_earlier_ones(project: Path, serve) -> None:
    """`start_line`, `end_line`, `anchor_line` and `query` (MCP's names) were refused as parameters the endpoint
    does not take; HTTP's earlier `start`, `end`, `line` and `q` still answer the same (a /v1 client written for
    them keeps working), and both names of one parameter at once are refused, where one would be dropped."""
    base = serve([project])
    for path, mcps, https in (
            ("/v1/expand", {"path": "app/auth.py", "start_line": 2, "end_line": 3},
             {"path": "app/auth.py", "start": 2, "end": 3}),
            ("/v1/expand", {"path": "app/auth.py", "anchor_line": 14}, {"path": "app/auth.py", "line": 14}),
            ("/v1/related", {"path": "app/store.py", "start_line": 1, "end_line": 9},
             {"path": "app/store.py", "start": 1, "end": 9}),
            ("/v1/search", {"query": "session store"}, {"q": "session store"}),
            ("/v1/search/all", {"query": "session store"}, {"q": "session store"}),
            ("/v1/docsearch", {"query": "logging in"}, {"q": "logging in"})):
        by_mcps, by_https = httpx.get(f"{base}{path}", params=mcps), httpx.get(f"{base}{path}", params=https)
        assert by_mcps.status_code == by_https.status_code == 200, (path, by_mcps.text, by_https.text)
        assert without_timing(by_mcps.json()) == without_timing(by_https.json()), path
    anchored = httpx.get(f"{base}/v1/expand", params={"path": "app/auth.py", "anchor_line": 14}).json()
    assert anchored["start_line"] <= 14 <= anchored["end_line"] and anchored["symbol"], anchored
    for path, params, error in (
            ("/v1/expand", {"path": "app/auth.py", "start_line": 2, "start": 2},
             "`start` is HTTP's earlier name of `start_line`: send `start_line` alone"),
            ("/v1/expand", {"path": "app/auth.py", "anchor_line": 3, "line": 4},
             "`line` is HTTP's earlier name of `anchor_line`: send `anchor_line` alone"),
            ("/v1/related", {"path": "app/store.py", "end_line": 3, "end": 3},
             "`end` is HTTP's earlier name of `end_line`: send `end_line` alone"),
            ("/v1/search", {"query": "token", "q": "token"}, "`q` is HTTP's earlier name of `query`: send `query` alone"),
            ("/v1/docsearch", {}, "`query` is required"),
            ("/v1/search", {"query": " "}, "`query` must not be blank (whitespace or control characters only)")):
        answer = httpx.get(f"{base}{path}", params=params)
        assert (answer.status_code, answer.json()) == (422, {"error": error}), (path, answer.text)


def test_http_takes_mcps_repo_and_repos_and_still_root_and_the_comma_string(project: Path, serve,
                                                                            tmp_path: Path) -> None:
    """On a server of several repositories MCP's tools take `repo` and `search` a list, `repos`, where every
    endpoint took `root` and `/v1/search/all` a comma-separated string: the endpoints take `repo`, and `repos` as
    a repeated parameter or a JSON list in a body (`/v1/search` too, as MCP's `search` takes it); `root` and a
    comma-separated value still answer the same (deprecated), and both names at once are refused, as is `repos`
    with one repository's `repo` or `scope`."""
    fork, lone = fork_and_lone(tmp_path)
    base = serve([project, fork, lone])
    both = "fork_only_marker lone_marker"
    across = httpx.get(f"{base}/v1/search/all", params={"query": both, "repos": ["lone", str(fork)]})
    for mcps, https in (
            (httpx.get(f"{base}/v1/search", params={"query": "lone_marker", "repo": "lone"}),
             httpx.get(f"{base}/v1/search", params={"query": "lone_marker", "root": "lone"})),
            (httpx.post(f"{base}/v1/search", json={"query": "lone_marker", "repo": "lone"}),
             httpx.post(f"{base}/v1/search", json={"query": "lone_marker", "root": "lone"})),
            (httpx.get(f"{base}/v1/expand", params={"path": "app/fork_only.py", "repo": str(fork)}),
             httpx.get(f"{base}/v1/expand", params={"path": "app/fork_only.py", "root": str(fork)})),
            (across, httpx.get(f"{base}/v1/search/all", params={"query": both, "repos": f"lone,{fork}"})),
            (httpx.get(f"{base}/v1/search", params={"query": both, "repos": ["lone", str(fork)]}), across),
            (httpx.post(f"{base}/v1/search", json={"query": both, "repos": ["lone", str(fork)]}), across)):
        assert mcps.status_code == https.status_code == 200, (mcps.text[:300], https.text[:300])
        assert without_timing(mcps.json()) == without_timing(https.json())
    labels = {hit["repository"] for hit in across.json()["core"] + across.json()["related"]}
    assert labels == {"lone", str(fork.resolve())}, labels  # the two named, not the third
    for answer, error in (
            (httpx.get(f"{base}/v1/search", params={"query": "x", "repo": "lone", "root": "lone"}),
             "`root` is HTTP's earlier name of `repo`: send `repo` alone"),
            (httpx.post(f"{base}/v1/search", json={"query": "x", "repo": "lone", "root": "lone"}),
             "`root` is HTTP's earlier name of `repo`: send `repo` alone"),
            (httpx.post(f"{base}/v1/ask", json={"question": "x", "repo": "lone", "root": "lone"}),
             "`root` is HTTP's earlier name of `repo`: send `repo` alone"),
            (httpx.get(f"{base}/v1/search", params={"query": "x", "repos": ["lone"], "scope": "app"}),
             "`scope` is a path inside one repository: not with `repos`"),
            (httpx.post(f"{base}/v1/search", json={"query": "x", "repos": ["lone"], "repo": "lone"}),
             "`repo` names one repository to search: not with `repos`")):
        assert (answer.status_code, answer.json()) == (422, {"error": error}), answer.text[:300]


def test_every_answer_read_from_the_index_says_when_its_first_index_is_still_running(
        project: Path, serve, first_index_held) -> None:
    """A search answered before the first index ended said so in its notes; locate, expand, docsearch, graph,
    related, tour and flows answered from the files indexed so far without a word (as if that were the workspace),
    and a file not yet indexed was refused as "not indexed, ignored, or deleted"."""
    base = serve([project], ready=False)
    assert first_index_held.stopped.wait(60)
    try:
        for what, params in (("locate", {"text": "find"}), ("docsearch", {"q": "logging in"}), ("graph", {}),
                             ("graph", {"node": "app/auth.py"}), ("tour", {}), ("search", {"q": "session store"}),
                             ("expand", {"path": "app/auth.py"}), ("related", {"path": "app/auth.py"}),
                             ("flows", {})):
            answer = httpx.get(f"{base}/v1/{what}", params=params, timeout=60)
            assert answer.status_code == 200, (what, answer.text)
            assert answer.json()["notes"][0].startswith("the index of project is still being built ("), what
        # An ask's bundle (no chat model here: the bundle is the answer) and its streamed `done` too.
        asked = httpx.post(f"{base}/v1/ask", json={"question": "session store"}, timeout=60).json()
        assert asked["bundle"]["notes"][0].startswith("the index of project is still being built ("), asked
        with httpx.stream("POST", f"{base}/v1/ask/stream", json={"question": "session store"}, timeout=60) as events:
            done = [json.loads(line[6:]) for line in events.iter_lines() if line.startswith("data: ")][-1]
        assert done["type"] == "done" and "still being built" in done["bundle"]["notes"][0], done
        # A file the index does not hold (yet, as far as anyone can tell): the refusal says so too.
        refused = httpx.get(f"{base}/v1/expand", params={"path": "app/later.py"}, timeout=60)
        assert refused.status_code == 400 and "still being built" in refused.json()["error"]
        # What no index would answer otherwise is malformed meanwhile as after (a text of two lines to locate).
        lines = httpx.get(f"{base}/v1/locate", params={"text": "a\nb"}, timeout=60)
        assert (lines.status_code, lines.json()) == (422, {"error": "`text` must be one line, got 2 lines"}), lines.text
    finally:
        first_index_held.release.set()
    for _ in range(600):  # the first index ends (not a speed check: up to a minute)
        if httpx.get(f"{base}/readyz").status_code == 200:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the first index never ended once released")
    assert httpx.get(f"{base}/v1/locate", params={"text": "find"}).json()["notes"] == []


def test_a_blank_query_is_refused_by_every_endpoint_taking_one(project: Path, serve) -> None:
    """A query of spaces or a NUL was answered with a whole bundle (`"query": ""` and arbitrary CORE files) where
    the command line and the language server refuse it: each endpoint taking a query or question now answers 422
    naming its parameter, before any wait for an index."""
    base = serve([project])
    for blank in ("   ", "\x00", "\t\n \x00\u200b"):
        for method, path, request, name in (
                ("GET", "/v1/search", {"params": {"q": blank}}, "q"),
                ("POST", "/v1/search", {"json": {"query": blank}}, "query"),
                ("GET", "/v1/search/all", {"params": {"q": blank}}, "q"),
                ("GET", "/v1/docsearch", {"params": {"q": blank}}, "q"),
                ("POST", "/v1/ask", {"json": {"question": blank}}, "question"),
                ("POST", "/v1/ask/stream", {"json": {"question": blank}}, "question")):
            refused = httpx.request(method, f"{base}{path}", **request)
            assert (refused.status_code, refused.json()) == (422, {
                "error": f"`{name}` must not be blank (whitespace or control characters only)"}), (path, refused.text)
    assert httpx.get(f"{base}/v1/search", params={"q": "\x00token"}).status_code == 200  # words around a NUL


def test_a_scope_sent_blank_is_refused_and_one_left_out_searches_everything(project: Path, serve) -> None:
    """`?scope=` (or spaces) was read as no scope: a client that meant a folder and passed nothing was answered from
    the whole workspace without a word. It is refused naming `scope`, as MCP's `search` refuses it."""
    base = serve([project])
    for blank in ("", "  ", "\t"):
        for method, request in (("GET", {"params": {"q": "session store", "scope": blank}}),
                                ("POST", {"json": {"query": "session store", "scope": blank}})):
            refused = httpx.request(method, f"{base}/v1/search", **request)
            assert (refused.status_code, refused.json()) == (422, {"error": (
                "`scope` is blank: name a folder or file of the workspace, or leave it out to search all of it")}), \
                (method, blank, refused.text)
    whole = httpx.get(f"{base}/v1/search", params={"q": "session store"})
    assert whole.status_code == 200 and whole.json()["core"], whole.text
    posted = httpx.post(f"{base}/v1/search", json={"query": "session store"})
    assert posted.status_code == 200 and posted.json()["core"], posted.text
    assert httpx.get(f"{base}/v1/search", params={"q": "session store", "scope": "app"}).status_code == 200


def test_a_refusal_names_a_long_path_or_name_sent_by_its_start(project: Path, serve) -> None:
    """A refused path, root or repository name was echoed whole in the 400's error, up to the 4,096 characters a
    parameter takes: each is named by its first 200 characters on one line, an ellipsis after them, as MCP names
    it."""
    base = serve([project])
    long = "deep/" * 800  # 4,000 characters
    for path, params in (("/v1/expand", {"path": long + "missing.py"}), ("/v1/expand", {"path": "../" + long}),
                         ("/v1/related", {"path": long + "missing.py", "start": 1, "end": 1}),
                         ("/v1/graph", {"node": long[:995] + "x.py"}),
                         ("/v1/search", {"q": "token", "root": long}), ("/v1/search/all", {"q": "token", "repos": long})):
        refused = httpx.get(f"{base}{path}", params=params)
        assert refused.status_code == 400, (path, refused.text[:300])
        error = refused.json()["error"]
        assert len(error) < 500 and ("deep/deep/" in error and "…" in error), (path, error[:300])


def test_several_roots_are_served_and_chosen_by_request(project: Path, serve, tmp_path: Path) -> None:
    from serve_project import write_project

    second = write_project(tmp_path / "second")
    (second / "app/billing.py").write_text("def charge_invoice(amount):\n    return amount\n")
    base = serve([project, second])
    found = httpx.get(f"{base}/v1/search", params={"q": "charge invoice", "root": str(second)}).json()
    assert found["root"] == str(second.resolve()) and found["core"][0]["path"] == "app/billing.py"
    assert httpx.get(f"{base}/v1/search", params={"q": "charge invoice"}).json()["root"] == str(project.resolve())
    assert len(httpx.get(f"{base}/v1/status").json()["workspaces"]) == 2
    huge = httpx.get(f"{base}/v1/search", params={"q": "x" * 20_001})
    assert huge.status_code == 422  # bounded, not searched


def test_a_folder_name_two_served_roots_share_is_refused_naming_both(project: Path, serve, tmp_path: Path) -> None:
    """`codeloupe serve ~/work/app ~/forks/app`: `?root=app` answered from the first one served, silently, and
    a search across them labelled the first `app` and the second by its path. A name two roots share is refused
    naming both (their paths choose one); a search across them labels both by their path, which `root` and
    `repos` take back; a name only one root has still chooses it."""
    fork, lone = fork_and_lone(tmp_path)
    base = serve([project, fork, lone])
    shared = str(project.resolve()), str(fork.resolve())
    for answer in (httpx.get(f"{base}/v1/search", params={"q": "fork_only_marker", "root": "project"}),
                   httpx.post(f"{base}/v1/search", json={"query": "fork_only_marker", "root": "project"}),
                   httpx.get(f"{base}/v1/expand", params={"path": "app/auth.py", "root": "project"}),
                   httpx.get(f"{base}/v1/search/all", params={"q": "fork_only_marker", "repos": "lone,project"})):
        assert answer.status_code == 400, answer.text[:300]
        error = answer.json()["error"]
        assert error.startswith("project: names 2 served workspaces") and all(root in error for root in shared), error
    chosen = httpx.get(f"{base}/v1/search", params={"q": "fork_only_marker", "root": str(fork)}).json()
    assert chosen["root"] == shared[1] and chosen["core"][0]["path"] == "app/fork_only.py"
    assert httpx.get(f"{base}/v1/search", params={"q": "lone_marker", "root": "lone"}).json()["root"] == str(lone)
    across = httpx.get(f"{base}/v1/search/all", params={"q": "fork_only_marker lone_marker"}).json()
    labels = {hit["repository"] for hit in across["core"] + across["related"]}
    assert labels == {shared[1], "lone"}, labels
    again = httpx.get(f"{base}/v1/search/all", params={"q": "fork_only_marker", "repos": ",".join(labels)})
    assert again.status_code == 200 and again.json()["core"][0]["path"] == "app/fork_only.py"


def test_a_refused_long_value_is_not_echoed_back(project: Path, serve) -> None:
    """The 422 for a query over 20,000 characters held the query whole in its `input`: the value is left out of
    the answer, which says what is wrong with it."""
    base = serve([project])
    for answer, error in (
            (httpx.get(f"{base}/v1/search", params={"q": "x" * 20_001}), "`q` must be at most 20,000 characters, got 20,001"),
            (httpx.post(f"{base}/v1/search", json={"query": "x" * 20_001}),
             "`query` must be at most 20,000 characters, got 20,001"),
            (httpx.post(f"{base}/v1/ask", json={"question": "y" * 30_000, "best": "yes"}),
             "`question` must be at most 20,000 characters, got 30,000; `best` must be true or false")):
        assert (answer.status_code, answer.json()) == (422, {"error": error}), answer.text[:300]


def test_a_root_given_twice_is_indexed_and_served_once(project: Path, serve, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """`serve a ./a` built a workspace for the second `a` too, whose first index of the folder ran beside the
    first one's (the start delayed up to 30 s, the work done twice) before it was closed as a duplicate.

    Every workspace served is opened with its first index started, and says as it opens that the folder's
    settings file is ignored (the folder is not trusted): the duplicates said it again, one line each."""
    (project / ".codeloupe.toml").write_text('embed_base_url = "http://127.0.0.1:9/v1"\n')
    (tmp_path / "link").symlink_to(project)
    with caplog.at_level(logging.WARNING, logger="codeloupe.warm"):
        # Served once its first index ended; no refresh after it (an hour between refreshes).
        base = serve([project, project / "app" / "..", tmp_path / "link", project], refresh_interval_s=3600)
    assert [w["root"] for w in httpx.get(f"{base}/v1/status").json()["workspaces"]] == [str(project.resolve())]
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == f"{project.resolve()}: given more than once, served once"
    assert [line for line in said[1:] if "ignoring settings from" in line and "embed_base_url" in line] == said[1:]
    assert len(said) == 2, said  # one workspace opened, so one first index of the folder


def test_roots_opened_before_one_that_cannot_be_are_stopped(tmp_path: Path) -> None:
    """`serve good bad`, where bad cannot be opened (here it is no folder): the refusal came with good's first
    index still running on its own thread, left to run until the process ended."""
    import threading

    from codeloupe.api import WorkspaceError
    from codeloupe_serving.warm import WarmWorkspaces

    good = tmp_path / "good"
    good.mkdir()
    for i in range(100):  # a first index that outlasts opening the next root (and ends well within close's wait)
        (good / f"m{i}.py").write_text("".join(f"def f_{i}_{j}(x):\n    return x + {j}\n\n" for j in range(40)))
    with pytest.raises(WorkspaceError, match="not a directory"):
        WarmWorkspaces([good, tmp_path / "bad"])
    assert not [t for t in threading.enumerate() if t.name.startswith("codeloupe-first-index") and t.is_alive()]

def test_traversal_in_every_form_is_refused(project: Path, serve, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2\n")
    (project / "app/link.py").symlink_to(secret)  # a link inside the workspace to a file outside it
    (project / "linkdir").symlink_to(tmp_path)
    base = serve([project])
    attempts = ["../secret.txt", "app/../../secret.txt", str(secret), "/etc/passwd", "app/link.py",
                "linkdir/secret.txt", "secret.env", "app\\..\\..\\secret.txt", "app/auth.py\x00.txt", "~/secret.txt"]
    for path in attempts:
        answer = httpx.get(f"{base}/v1/expand", params={"path": path})
        assert answer.status_code == 400, path
        assert "hunter2" not in answer.text and "do-not-serve" not in answer.text
    # Encoded forms, sent as raw bytes so the client does not normalise them first.
    for raw in ("..%2Fsecret.txt", "%2E%2E%2Fsecret.txt", "%2e%2e/%2e%2e/secret.txt", "..%252Fsecret.txt",
                "app%2F..%2F..%2Fsecret.txt", "%2Fetc%2Fpasswd"):
        answer = httpx.get(f"{base}/v1/expand?path={raw}")
        assert answer.status_code == 400, raw
        assert "hunter2" not in answer.text
    for raw in ("..%2F..%2Fpyproject.toml", "..%2Fapp.py", "%2E%2E/guard.py"):
        assert httpx.get(f"{base}/static/{raw}").status_code == 404
    root = httpx.get(f"{base}/v1/search", params={"q": "token", "root": str(tmp_path)})
    assert root.status_code == 400 and "not a served workspace" in root.json()["error"]


def test_a_token_is_required_beyond_loopback(project: Path, serve) -> None:
    # The token logic by configuration: the guard a non-loopback bind gets, served on loopback for the test.
    guard, generated = GuardConfig.for_bind("0.0.0.0")
    assert generated and guard.token and len(guard.token) >= 32
    assert GuardConfig.for_bind("192.168.1.20", token="given")[0].token == "given"
    assert GuardConfig.for_bind("127.0.0.2") == (GuardConfig(host="127.0.0.2"), False)
    assert GuardConfig.for_bind("::1")[0].token is None and GuardConfig.for_bind("localhost")[0].token is None
    base = serve([project], guard=guard)
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": guard.token},
                    {"authorization": f"Basic {guard.token}"}):
        refused = httpx.get(f"{base}/v1/search", params={"q": "token"}, headers=headers)
        assert refused.status_code == 401 and "token" not in refused.text.split('"error"')[0]
    assert httpx.post(f"{base}/mcp", json={}).status_code == 401  # MCP too
    assert httpx.get(f"{base}/healthz").status_code == 200  # liveness carries no token
    ok = httpx.get(f"{base}/v1/search", params={"q": "token"}, headers={"authorization": f"Bearer {guard.token}"})
    assert ok.status_code == 200


def test_loopback_without_a_token_answers_loopback_host_names_only(project: Path, serve) -> None:
    base = serve([project], host="127.0.0.2")  # 127.0.0.0/8 is loopback: no token needed
    assert httpx.get(f"{base}/v1/status").status_code == 200
    for host in ("localhost:80", "[::1]:7341"):
        assert httpx.get(f"{base}/v1/status", headers={"host": host}).status_code == 200
    for host in ("evil.example", "evil.example:7341", "10.0.0.1"):  # DNS rebinding: a page on another site
        assert httpx.get(f"{base}/v1/status", headers={"host": host}).status_code == 403, host
    # A port that is not a number is no loopback address either (`localhost:evil` was read as `localhost`).
    for host in ("localhost:evil", "127.0.0.1:80x", "[::1]:evil", "[::1]evil", "localhost:"):
        assert httpx.get(f"{base}/v1/status", headers={"host": host}).status_code == 403, host


def test_bodies_and_rates_are_bounded_and_cors_is_off_unless_configured(project: Path, serve) -> None:
    base = serve([project], guard=GuardConfig(max_body_bytes=10_000))
    big = httpx.post(f"{base}/v1/search", content=b'{"query": "' + b"x" * 20_000 + b'"}',
                     headers={"content-type": "application/json"})
    assert big.status_code == 413

    def chunks():
        yield b'{"query": "'
        yield b"y" * 20_000  # no content-length: counted as it streams
        yield b'"}'

    assert httpx.post(f"{base}/v1/search", content=chunks(),
                      headers={"content-type": "application/json"}).status_code == 413
    preflight = httpx.options(f"{base}/v1/search", headers={"origin": "https://evil.example",
                                                            "access-control-request-method": "GET"})
    assert "access-control-allow-origin" not in preflight.headers
    limited = serve([project], guard=GuardConfig(rate_per_s=0.001, burst=3))  # no refill within the test
    assert [httpx.get(f"{limited}/healthz").status_code for _ in range(5)] == [200, 200, 200, 429, 429]

    allowed = serve([project], guard=GuardConfig(cors_origins=["http://localhost:3000"]))
    answer = httpx.get(f"{allowed}/v1/status", headers={"origin": "http://localhost:3000"})
    assert answer.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_a_cors_origin_can_call_a_server_that_needs_a_token(project: Path, serve) -> None:
    # A browser's preflight never carries the Authorization header it asks to send; refusing it for having no
    # token refused every cross-origin call with one (the browser never sends the real request).
    token = "t" * 40
    origin = "http://localhost:3000"
    base = serve([project], guard=GuardConfig(token=token, cors_origins=[origin]))
    preflight = httpx.options(f"{base}/v1/search", headers={
        "origin": origin, "access-control-request-method": "GET", "access-control-request-headers": "authorization"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == origin
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    answer = httpx.get(f"{base}/v1/search", params={"q": "token"},
                       headers={"origin": origin, "authorization": f"Bearer {token}"})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == origin
    # The preflight exempts nothing else: no data without the token, from the origin or not.
    assert httpx.get(f"{base}/v1/search", params={"q": "token"}, headers={"origin": origin}).status_code == 401
    assert httpx.options(f"{base}/v1/search", headers={"origin": origin}).status_code == 401
    evil = httpx.options(f"{base}/v1/search", headers={"origin": "https://evil.example",
                                                       "access-control-request-method": "GET"})
    assert "access-control-allow-origin" not in evil.headers
    # Without CORS configured a preflight is an ordinary request: the token is still required.
    closed = serve([project], guard=GuardConfig(token=token))
    assert httpx.options(f"{closed}/v1/search", headers={
        "origin": origin, "access-control-request-method": "GET"}).status_code == 401


def test_the_probes_answer_while_every_worker_thread_is_busy(project: Path, serve,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # 45 slow calls (an ask waiting on the model, a search waiting on the first index) hold all 40 threads of
    # the pool sync handlers run in; /healthz and /readyz must still answer at once.
    import threading

    from codeloupe_serving.warm import WarmWorkspace

    release, inside, lock = threading.Event(), [0], threading.Lock()
    real_search = WarmWorkspace.search

    def slow_search(self, *args, **kwargs):
        with lock:
            inside[0] += 1
        release.wait(600)  # far past the probes' own timeouts: a held pool cannot pass for a slow machine
        return real_search(self, *args, **kwargs)

    monkeypatch.setattr(WarmWorkspace, "search", slow_search)
    base = serve([project])
    with ThreadPoolExecutor(max_workers=45) as pool:
        try:
            slow = [pool.submit(httpx.get, f"{base}/v1/search", params={"q": "token"}, timeout=90) for _ in range(45)]
            deadline = time.monotonic() + 30
            while inside[0] < 40 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert inside[0] >= 40, inside[0]  # the pool is full
            assert httpx.get(f"{base}/healthz", timeout=30).json() == {"ok": True}
            assert httpx.get(f"{base}/readyz", timeout=30).status_code == 200
        finally:
            release.set()
        assert [f.result().status_code for f in slow] == [200] * 45


def test_searches_whose_clients_hang_up_during_the_first_index_free_their_worker_threads(
        project: Path, serve, first_index_held, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search arriving during a first index waited for it on a worker thread (up to two minutes), after its
    client had hung up too: 40 such hang-ups held every thread of the pool, and every sync call waited behind
    them (here /v1/status). A call now waits for the first index on the event loop and ends when its client
    goes; one whose client stays still gets the answer of the whole index."""
    from server_counts import ServerCounts

    import codeloupe_serving.warm as warm_module
    import codeloupe_web.guard as guard_module

    monkeypatch.setattr(warm_module, "FIRST_INDEX_WAIT_S", 600.0)  # a search waits for the whole first index
    # What the server did with each search, counted where it happens: arrived (read whole, before any route),
    # ended (answered, to whom it may concern), and waiting for the first index on the event loop.
    counted = ServerCounts("arrived", "ended", "waiting")
    real_guard = guard_module.Guard.__call__

    async def counted_guard(self, scope, receive, send) -> None:
        searched = scope["type"] == "http" and scope["path"] == "/v1/search"
        counted.count("arrived", searched)
        try:
            await real_guard(self, scope, receive, send)
        finally:
            counted.count("ended", searched)

    def wait_until(what: str, expected: int) -> None:
        counted.wait_until(what, expected, "searches")

    monkeypatch.setattr(guard_module.Guard, "__call__", counted_guard)
    counted.count_first_index_waits(monkeypatch)
    base = serve([project], ready=False)
    assert first_index_held.stopped.wait(60)
    host, port = base.removeprefix("http://").rsplit(":", 1)
    search = f"{base}/v1/search?q=session+store"
    try:
        clients = [socket.create_connection((host, int(port)), timeout=60) for _ in range(45)]
        for client in clients:  # more than the pool's 40 threads
            client.sendall(f"GET /v1/search?q=session+store HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        wait_until("arrived", 45)
        for client in clients:
            client.close()
        # Before the fix 40 of them held a thread each, waiting for the first index, and the rest queued behind.
        wait_until("ended", 45)
        wait_until("waiting", 0)  # and each left its wait for the first index
        status = httpx.get(f"{base}/v1/status", timeout=60)  # a sync handler: it needs a free thread
        assert status.status_code == 200 and status.json()["ready"] is False
        with ThreadPoolExecutor(max_workers=1) as patient:
            answer = patient.submit(httpx.get, search, timeout=120)
            wait_until("waiting", 1)
            assert not answer.done()  # it waits for the first index: not answered from part of it
            first_index_held.release.set()
            assert answer.result().status_code == 200
        assert answer.result().json()["notes"] == [] and answer.result().json()["core"]
    finally:
        first_index_held.release.set()


def sse_events(body: str) -> list[dict]:
    return [json.loads(message[len("data: "):]) for message in body.split("\n\n") if message.startswith("data: ")]


def test_ask_streams_the_events_of_the_cli_ending_with_done(project: Path, serve, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from chat_server import ChatServer, Reply

    with ChatServer() as chat:
        chat.add(Reply(text="The checker [[1]] asks the store for the session.", times=3))
        monkeypatch.setenv("CODELOUPE_CHAT_BASE_URL", chat.base_url)
        monkeypatch.setenv("CODELOUPE_CHAT_MODEL", "scripted")
        question = "how are bearer tokens checked"
        assert cli_main(["ask", str(project), question, "--json", "--no-embed", "--no-agents"]) == 0
        cli = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        base = serve([project])
        with httpx.stream("POST", f"{base}/v1/ask/stream", json={"question": question, "agents": False},
                          timeout=60) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            events = sse_events(response.read().decode())
        final = httpx.post(f"{base}/v1/ask", json={"question": question, "agents": False}, timeout=60).json()
    assert [e["type"] for e in events] == [e["type"] for e in cli]
    assert events[-1]["type"] == "done" and events[-1]["answer"] == cli[-1]["answer"] == final["answer"]
    assert "The checker" in final["answer"] and "def check_token" in final["answer"]
    cited = next(e for e in events if e["type"] == "citation")
    lines = (project / cited["path"]).read_text().splitlines(keepends=True)
    assert cited["text"] == "".join(lines[cited["start_line"] - 1:cited["end_line"]])


def _cites_badly(body: dict) -> str:
    """Six citations that name nothing (no such excerpt, lines outside it, no number, a reversed range), one good."""
    from chat_server import excerpt_numbers

    k, _, a, _ = next((k, p, a, b) for k, p, a, b in excerpt_numbers(body) if b - a >= 3)
    return (f"See [[999]] and [[{k}:99999-100005]] and [[/etc/passwd]] and [[{k}:0-0]] and [[-1]] and "
            f"[[{k}:{a + 3}-{a}]]; the code is [[{k}]].")


def test_an_ask_shows_where_it_dropped_a_citation_and_counts_the_drops(project: Path, serve,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Citations that resolved to nothing vanished ("See  and  and ..."), seen only in the metrics, and a
    reversed range was shown turned round. Each now leaves a plain-text placeholder, the answer ends with a
    count, and every surface has the same answer."""
    from chat_server import ChatServer, Reply

    with ChatServer() as chat:
        chat.add(Reply(render=_cites_badly, times=3))
        base = _served_with_a_model(serve, project, chat, monkeypatch)
        question = {"question": "how are bearer tokens checked", "agents": False}
        final = httpx.post(f"{base}/v1/ask", json=question, timeout=60).json()
        with httpx.stream("POST", f"{base}/v1/ask/stream", json=question, timeout=60) as response:
            events = sse_events(response.read().decode())
        assert cli_main(["ask", str(project), question["question"], "--json", "--no-embed", "--no-agents"]) == 0
        cli = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert final["fallback"] is None and len(final["citations"]) == 1
    (cited,) = final["citations"]
    prose = final["answer"][:final["answer"].index("\n")]
    assert prose == ("See (citation dropped: no such excerpt) and (citation dropped: lines outside the excerpt) and "
                     "(citation dropped: malformed) and (citation dropped: lines outside the excerpt) and "
                     "(citation dropped: malformed) and (citation dropped: malformed); the code is "
                     f"(`{cited['path']}:{cited['start_line']}-{cited['end_line']}`).")
    assert "\n(6 citations dropped: malformed 3, no such excerpt 1, lines outside the excerpt 2)\n" in final["answer"]
    assert [p["kind"] for p in final["parts"]].count("code") == 1  # a placeholder is never code
    assert final["metrics"]["splice_malformed"] == 3
    streamed = "".join(e["text"] for e in events if e["type"] == "delta")
    assert final["answer"].startswith(streamed) and streamed.endswith("lines outside the excerpt 2)\n")
    assert events[-1]["answer"] == cli[-1]["answer"] == final["answer"]


def test_an_ask_whose_client_hangs_up_ends_its_model_call_and_frees_its_worker(
        project: Path, serve, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client hanging up mid-ask left its worker thread waiting on the model (here one that holds its
    connection open, sending nothing, for as long as the ten-minute timeout): 40 of them held every thread of
    the pool and the server stopped answering. Each hang-up now cuts its model call off (the model sees its
    connection closed) and, after more hang-ups than there are threads, the server still answers."""
    from chat_server import ChatServer, Reply

    hangups = 45  # the pool sync handlers and the ask's steps run in has 40 threads
    with ChatServer() as chat:
        chat.add(Reply(text="The checker [[1]] asks the store for the session.", hold_after=1, times=hangups))
        base = _served_with_a_model(serve, project, chat, monkeypatch)
        for n in range(1, hangups + 1):
            _hang_up_once_the_model_answers(base, "/v1/ask/stream" if n % 2 else "/v1/ask", chat, n)
        answer = httpx.get(f"{base}/v1/search", params={"q": "session store"}, timeout=60)
        assert answer.status_code == 200 and answer.json()["core"]


def test_an_ask_stream_whose_client_hangs_up_closes_its_run(project: Path, serve,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream cancelled a run whose client hung up but left its events suspended, to be closed whenever the
    collector got to them (an answer returned whole closed its run at once)."""
    import inspect

    from chat_server import ChatServer, Reply
    from codeloupe.api import Workspace

    runs = []
    ask = Workspace.ask

    def recorded(self, *args, **kwargs):  # the real ask, its run kept to look at
        runs.append(ask(self, *args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(Workspace, "ask", recorded)
    with ChatServer() as chat:
        chat.add(Reply(text="The checker [[1]] asks the store for the session.", hold_after=1))
        _hang_up_once_the_model_answers(_served_with_a_model(serve, project, chat, monkeypatch), "/v1/ask/stream",
                                        chat, 1)
        [run] = runs
        deadline = time.monotonic() + 30
        while inspect.getgeneratorstate(run._events) != inspect.GEN_CLOSED and time.monotonic() < deadline:
            time.sleep(0.05)
        assert inspect.getgeneratorstate(run._events) == inspect.GEN_CLOSED


def _served_with_a_model(serve, project: Path, chat, monkeypatch: pytest.MonkeyPatch) -> str:
    """`serve` of `project` with `chat` as its model (answering for up to ten minutes); the base URL."""
    monkeypatch.setenv("CODELOUPE_CHAT_BASE_URL", chat.base_url)
    monkeypatch.setenv("CODELOUPE_CHAT_MODEL", "scripted")
    monkeypatch.setenv("CODELOUPE_CHAT_TIMEOUT_S", "600")
    return serve([project])


def _hang_up_once_the_model_answers(base: str, path: str, chat, n: int) -> None:
    """Ask at `path` on a raw connection, hang up once the model is answering (its `n`th held answer), and wait
    until the model sees its connection closed."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    body = json.dumps({"question": "how are bearer tokens checked", "agents": False})
    with socket.create_connection((host, int(port)), timeout=60) as client:
        client.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
        assert chat.wait_for("held", n) == n, path  # the model is answering it: hang up
    assert chat.wait_for("hangups", n) == n, path


def test_without_a_chat_model_ask_streams_the_bundle_and_ends_with_done(project: Path, serve) -> None:
    base = serve([project])
    with httpx.stream("POST", f"{base}/v1/ask/stream", json={"question": "session store"}, timeout=60) as response:
        events = sse_events(response.read().decode())
    assert [e["type"] for e in events][-2:] == ["fallback", "done"]
    assert events[-1]["bundle"]["core"]


def test_two_hundred_concurrent_searches_all_answer(project: Path, serve) -> None:
    base = serve([project])
    queries = ["session token", "escape html", "render page", "login password", "SessionStore.find"] * 40
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with httpx.Client(limits=httpx.Limits(max_connections=200), timeout=120) as client, \
            ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(lambda q: client.get(f"{base}/v1/search", params={"q": q}), queries))
    assert [a.status_code for a in answers] == [200] * 200
    assert all(a.json()["core"] for a in answers)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 300, f"peak memory grew {grown_mb:.0f} MB over 200 searches"


def test_changes_on_disk_and_index_writes_by_another_process_are_picked_up(project: Path, serve) -> None:
    # Refresh-before-call off (a day between walks): only the index written by someone else can show it.
    base = serve([project], refresh_interval_s=86_400)
    query = {"q": "quaternion slerp interpolation"}
    assert not any(h["path"] == "app/rotate.py" for h in httpx.get(f"{base}/v1/search", params=query).json()["core"])
    (project / "app/rotate.py").write_text("def quaternion_slerp(a, b, t):\n    return a  # interpolation\n")
    subprocess.run([sys.executable, "-m", "codeloupe", "index", str(project)], env=subprocess_env(), check=True,
                   capture_output=True, timeout=120)  # another process (the CLI here; the language server alike)
    assert httpx.get(f"{base}/v1/search", params=query).json()["core"][0]["path"] == "app/rotate.py"

    fresh_base = serve([project], refresh_interval_s=0)  # the default path: each call refreshes first
    (project / "app/scale.py").write_text("def zebra_scale_factor(x):\n    return x * 2\n")
    answer = httpx.get(f"{fresh_base}/v1/search", params={"q": "zebra scale factor"}).json()
    assert answer["core"][0]["path"] == "app/scale.py"
    assert os.path.exists(project / "app/scale.py")


def test_a_failed_refresh_fails_open(project: Path, serve) -> None:
    base = serve([project], refresh_interval_s=0)
    # A file name that is not UTF-8 (today it aborts an index run; see issue 12): whatever the indexer makes
    # of it, search keeps answering from the index it has, and the status says what went wrong if anything.
    with open(os.path.join(os.fsencode(project / "app"), b"bad\xff.py"), "w") as handle:
        handle.write("x = 1\n")
    answer = httpx.get(f"{base}/v1/search", params={"q": "session store"})
    assert answer.status_code == 200 and answer.json()["core"]
    error = httpx.get(f"{base}/v1/status").json()["workspaces"][0]["last_error"]
    assert error == "" or error.startswith("refreshing the index failed")


def test_codeloupe_serve_starts_says_where_and_stops(project: Path) -> None:
    import re

    proc = subprocess.Popen([sys.executable, "-m", "codeloupe", "serve", str(project), "--port", "0",
                             "--token", "s3cret-token"], env=subprocess_env(), stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        base = re.search(r"at (http://127\.0\.0\.1:\d+)/ ", line).group(1)
        auth = {"authorization": "Bearer s3cret-token"}
        for _ in range(600):  # the first index of the small project (not a speed check: up to a minute)
            if httpx.get(f"{base}/readyz", headers=auth).status_code == 200:
                break
            time.sleep(0.1)
        assert httpx.get(f"{base}/v1/search", params={"q": "escape html"}, headers=auth).json()["core"]
        assert httpx.get(f"{base}/v1/search", params={"q": "escape html"}).status_code == 401
        held_open_then_closed(base)
        assert httpx.get(f"{base}/v1/search", params={"q": "escape html"}, headers=auth).json()["core"]
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_codeloupe_serve_says_where_each_roots_mcp_answers(project: Path, tmp_path: Path) -> None:
    """Serving two folders, the first line said "MCP at /mcp" alone: the second folder's endpoint, `/mcp/1`, was
    left to be guessed (the README's "the N-th root" read as `/mcp/2`). It names each folder's, and each answers."""
    import re

    second = tmp_path / "second"
    second.mkdir()
    (second / "app.py").write_text("def main():\n    return 1\n")
    proc = subprocess.Popen([sys.executable, "-m", "codeloupe", "serve", str(project), str(second), "--port", "0"],
                            env=subprocess_env(), stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert f"(MCP at /mcp for {project}, /mcp/1 for {second}; API reference at /openapi.json)" in line, line
        base = re.search(r"at (http://127\.0\.0\.1:\d+)/ ", line).group(1)
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "test", "version": "1"}}}
        headers = {"accept": "application/json, text/event-stream"}
        for path, status in (("/mcp", 200), ("/mcp/1", 200), ("/mcp/2", 404)):
            assert httpx.post(f"{base}{path}", json=initialize, headers=headers, timeout=60).status_code == status, path
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_codeloupe_serve_in_a_folder_of_a_repository_serves_the_repository(project: Path) -> None:
    """`codeloupe serve` (PATH `.` by default) in a folder inside a repository served the folder as a workspace of
    its own, with a second index of it; it serves the repository the folder is in, as every command finds it."""
    (project / ".git").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "codeloupe", "serve", "--port", "0"], cwd=project / "app",
                            env=subprocess_env(), stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline()
        assert said == f"codeloupe: workspace {project} (it has .git); app is a folder inside it; serving all of " \
            "the workspace\n", said
        said = proc.stderr.readline()  # read only once the note came: the "serving" line is the last there is
        assert said.startswith(f"codeloupe: serving {project} at http://"), said
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_codeloupe_serve_names_the_folders_it_serves_escaped(tmp_path: Path) -> None:
    """Its first line printed the folders' names raw: a clone's folder is named by its repository, and a bidi
    override or an escape sequence in it reordered the line or drove the terminal."""
    from codeloupe.types import CONTROL_CHARACTERS, one_line

    root = tmp_path / "repo\u202egnp.py\x1b]0;owned\x07"
    root.mkdir()
    (root / "app.py").write_text("def main():\n    return 1\n")
    proc = subprocess.Popen([sys.executable, "-m", "codeloupe", "serve", str(root), "--port", "0", "--token", "t"],
                            env=subprocess_env(), stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert line.startswith(f"codeloupe: serving {one_line(str(root))} at http://") and \
        not CONTROL_CHARACTERS.search(line), line


def held_open_then_closed(base: str) -> None:
    """uvicorn timed out only idle kept-alive connections: one that sent nothing, half a request head, or a body
    a byte at a time stayed open for good (enough of them use up the server's file descriptors). Each is closed
    once its request has not arrived within the receive deadline; a slow request within it is answered."""
    from codeloupe_web.listen import REQUEST_RECEIVE_TIMEOUT_S

    host, port = base.removeprefix("http://").rsplit(":", 1)
    head = (f"POST /v1/search HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Authorization: Bearer s3cret-token\r\n")
    body = b'{"query": "escape html"}'
    sends = {"nothing": b"", "half a head": head.encode(),
             "a trickled body": f"{head}Content-Length: {len(body) + 100}\r\n\r\n".encode() + body[:5]}
    held = {}
    for what, first in sends.items():
        held[what] = socket.create_connection((host, int(port)), timeout=REQUEST_RECEIVE_TIMEOUT_S + 20)
        held[what].sendall(first)
    slow = socket.create_connection((host, int(port)), timeout=REQUEST_RECEIVE_TIMEOUT_S + 20)
    slow.sendall(head.encode())
    time.sleep(REQUEST_RECEIVE_TIMEOUT_S / 3)
    held["a trickled body"].sendall(body[5:6])
    slow.sendall(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert slow.recv(4096).startswith(b"HTTP/1.1 200")
    for what, sock in held.items():
        with sock:
            assert sock.recv(4096) == b"", what  # closed by the server, before this socket's own timeout
    slow.close()


def test_a_name_copied_from_an_answer_is_the_file_or_folder_it_names(project: Path, serve) -> None:
    """`/v1/search`'s `scope` and `/v1/graph`'s `node`, `source` and `target` take a name as the text answers (MCP,
    the CLI, the pages) show it escaped, as `/v1/expand` did: the scope was a folder the index does not hold, the
    node a concept that found another file by its words."""
    from serve_project import CR_FILE, ESCAPED_FILE, ESCAPED_FOLDER, write_escaped_names

    from codeloupe.types import line_breaks_escaped, one_line

    write_escaped_names(project)
    base = serve([project])
    scoped = httpx.get(f"{base}/v1/search", params={"q": "admin rights", "scope": one_line(ESCAPED_FOLDER)}).json()
    node = httpx.get(f"{base}/v1/graph", params={"node": one_line(ESCAPED_FILE)}).json()
    folder = httpx.get(f"{base}/v1/graph", params={"node": one_line(ESCAPED_FOLDER)}).json()
    route = httpx.get(f"{base}/v1/graph", params={"source": line_breaks_escaped(CR_FILE),
                                                  "target": one_line(ESCAPED_FILE)}).json()
    assert [hit["path"] for hit in scoped["core"] + scoped["related"]] == [ESCAPED_FILE], scoped
    assert (node["path"], node["resolvedBy"]) == (ESCAPED_FILE, "path"), node
    assert folder["folder"] == ESCAPED_FOLDER and [f["path"] for f in folder["files"]] == [ESCAPED_FILE], folder
    assert route["found"] and route["hops"][0]["source"] == CR_FILE and route["hops"][-1]["target"] == ESCAPED_FILE, \
        route
