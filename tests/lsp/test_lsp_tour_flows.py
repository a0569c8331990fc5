"""`codeloupe/tour`, `codeloupe/flows`, `codeloupe/related` and the code of graph route hops over the real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsp_helpers import PROJECT, disk_lines, expect_error, start_server, stop_server, uri, write_project

from chat_server import ChatServer, Reply
from codeloupe.api import MAX_TOUR_ENTRY_POINTS, MAX_TOUR_NAMES, TOUR_ENTRY_POINTS

pytestmark = pytest.mark.asyncio


async def test_tour_and_flows(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    client = await start_server([project])
    try:
        await client.wait_ready()
        tour = await client.request("codeloupe/tour", {"limit": 2})
        first = tour["stops"][0]
        # load_user: defined in store.py, mentioned by auth.py and web.py.
        assert (first["name"], first["path"], first["mentions"]) == ("load_user", "app/store.py", 2)
        where = first["location"]
        assert where["uri"] == uri(project / "app/store.py")
        assert disk_lines(project / "app/store.py", where["range"]["start"]["line"],
                          where["range"]["start"]["line"] + 1).startswith("def load_user")
        assert len(tour["stops"]) == 2 and tour["entryPoints"] == [] and tour["names"] >= 4
        assert tour["entryPointsNotShown"] == 0  # as the engine cut them, for every surface
        assert await client.request("codeloupe/flows", {}) == {"flows": []}
        asked = await client.request("codeloupe/ask", {"query": "how does login check the password"})
        assert asked["flow"] is None  # no chat model: nothing narrated, nothing cached
        assert await client.request("codeloupe/flows", {"folderUri": uri(project)}) == {"flows": []}

        store = project / "app/store.py"
        anchor = {"start": {"line": 0, "character": 0}, "end": {"line": len(store.read_text().splitlines()),
                                                                "character": 0}}
        related = await client.request("codeloupe/related", {"uri": uri(store), "range": anchor})
        assert related["lane"] == "lexical" and related["language"] == "python" and related["range"] == anchor
        # Both files that say load_user, never the store itself or the guide (markdown).
        assert sorted(c["path"] for c in related["chunks"]) == ["app/auth.py", "app/web.py"]
        for chunk in related["chunks"]:
            rng = chunk["location"]["range"]
            assert disk_lines(project / chunk["path"], rng["start"]["line"], rng["end"]["line"]) == chunk["text"]

        route = await client.request("codeloupe/graph", {"mode": "path", "from": "app/web.py", "to": "app/store.py"})
        spliced = [hop[key] for hop in route["hops"] for key in ("useCode", "definitionCode") if key in hop]
        assert spliced
        for code in spliced:
            rng, path = code["location"]["range"], project / code["location"]["uri"].split(uri(project) + "/")[1]
            assert disk_lines(path, rng["start"]["line"], rng["end"]["line"]) == code["text"]
    finally:
        await stop_server(client)


async def test_tour_lists_more_entry_points_when_asked(tmp_path: Path) -> None:
    """`codeloupe/tour` listed the strongest 30 entry points with no way to ask for the rest; `entryPoints` asks
    for more, bounded as `/v1/tour`'s `entry_points` is."""
    scripts = {f"tools/script_{i:02}.py": f"def run_{i}():\n    return {i}\n\n\nif __name__ == '__main__':\n    run_{i}()\n"
               for i in range(TOUR_ENTRY_POINTS + 5)}
    project = write_project(tmp_path / "project", {**PROJECT, **scripts})
    client = await start_server([project])
    try:
        await client.wait_ready()
        cut = await client.request("codeloupe/tour", {})
        assert (len(cut["entryPoints"]), cut["entryPointsNotShown"]) == (TOUR_ENTRY_POINTS, 5)
        every = await client.request("codeloupe/tour", {"entryPoints": TOUR_ENTRY_POINTS + 5})
        assert (len(every["entryPoints"]), every["entryPointsNotShown"]) == (TOUR_ENTRY_POINTS + 5, 0)
        assert every["entryPoints"][:TOUR_ENTRY_POINTS] == cut["entryPoints"]  # the strongest first, as cut
        fewer = await client.request("codeloupe/tour", {"entryPoints": 2})
        assert fewer["entryPoints"] == cut["entryPoints"][:2] and fewer["entryPointsNotShown"] == TOUR_ENTRY_POINTS + 3
        for bad in (0, MAX_TOUR_ENTRY_POINTS + 1, "all", True):
            message = await expect_error(client.request("codeloupe/tour", {"entryPoints": bad}), -32602)
            assert message == f"codeloupe/tour: `entryPoints` must be an integer from 1 to {MAX_TOUR_ENTRY_POINTS}, " \
                              f"got {bad!r}"
    finally:
        await stop_server(client)


async def test_tour_refuses_a_limit_past_what_mcp_and_http_take(tmp_path: Path) -> None:
    """`codeloupe/tour` listed as many names as `limit` asked for (any number), where MCP's and HTTP's tours
    refuse one past `MAX_TOUR_NAMES`: the same check refuses it here, naming `limit`."""
    project = write_project(tmp_path / "project")
    client = await start_server([project])
    try:
        await client.wait_ready()
        message = await expect_error(client.request("codeloupe/tour", {"limit": MAX_TOUR_NAMES + 1}), -32602)
        assert message == f"codeloupe/tour: limit must be from 1 to {MAX_TOUR_NAMES}, got {MAX_TOUR_NAMES + 1}"
        most = await client.request("codeloupe/tour", {"limit": MAX_TOUR_NAMES})
        assert 0 < len(most["stops"]) <= MAX_TOUR_NAMES
    finally:
        await stop_server(client)


async def test_a_repeated_ask_is_served_from_the_flow_cache_and_listed(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    question = "how does login check the password"
    with ChatServer() as chat:  # the narrator, and the embeddings over loopback
        chat.add(Reply(text="Login loads the user and compares salted hashes [[1]]."))
        client = await start_server([project], options={
            "chatBaseUrl": chat.base_url, "chatModel": "scripted", "embedProvider": "openai",
            "embedBaseUrl": chat.base_url, "embedModel": "scripted-embed", "embedDimensions": 8})
        try:
            await client.wait_ready()
            for _ in range(200):  # a flow is matched on the query vector: wait for the dense lane
                vectors = (await client.request("codeloupe/status", {}))["folders"][0]["vectors"]
                if vectors["total"] and vectors["done"] == vectors["total"]:
                    break
                await asyncio.sleep(0.05)
            first = await client.request("codeloupe/ask", {"query": question})
            assert first["fallback"] is None and first["flow"] is None
            listed = (await client.request("codeloupe/flows", {}))["flows"]
            assert [(f["question"], f["stale"]) for f in listed] == [(question, False)]
            assert listed[0]["files"][0]["uri"].startswith(uri(project))
            calls = len(chat.requests)
            client.progress_reports[3] = []
            again = await client.request("codeloupe/ask", {"query": question, "workDoneToken": 3})
            assert len(chat.requests) == calls  # no model call
            assert again["flow"]["action"] == "served" and again["answer"] == first["answer"]
            types = [json.loads(r.message)["type"] for r in client.progress_reports[3] if r.kind == "report"]
            assert types[:2] == ["retrieval", "flow"] and types[-1] == "done"
        finally:
            await stop_server(client)
