"""docs/protocol.md against the real server: every documented request is sent with its documented params, and
every answer carries exactly the fields the doc names for it (read from the doc's own shapes, `protocol_doc`).

A field the server adds without the doc, or one the doc names that no answer has, fails here; so does a
documented param the server does not read (each is sent with a wrong type and must be refused naming it), a
progress message or an ask event the doc does not list. Shared-index repositories (`codeloupe/read`, status
`repositories`) need PostgreSQL: tests/pg/test_pg_lsp.py (`test_search_and_read_a_repository_the_user_has_not_cloned`)
holds them to the same doc."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from lsp_helpers import PROJECT, Client, expect_error, start_server, stop_server, uri, write_project
from protocol_doc import (
    LSP_SHAPES,
    Ref,
    Scalar,
    Shape,
    ShapeCheck,
    Value,
    doc_text,
    params_and_result,
    section,
    shape_after,
)

from chat_server import ChatServer, Reply, embedding_for
from codeloupe_lsp.convert import fallback_answer

INVALID_PARAMS = -32602
QUESTION = "how does login check the password"

# A second package that uses the first, so a folder's part of the graph has edges across it and the tour an
# entry point; a logger every tool imports (a hub: a god node), and a tool about logins that imports nothing else
# (it reads like app/auth.py, with no edge between them: a surprise).
TOOLS = {f"tools/tool{n}.py": f"from app.log import log\n\n\ndef tool{n}() -> None:\n    log('tool {n}')\n"
         for n in range(10)}
FILES = {
    **PROJECT,
    **TOOLS,
    "app/log.py": "def log(message: str) -> None:\n    print(message)\n",
    "tools/login_report.py": "from app.log import log\n\n\ndef login_report() -> None:\n    log('logins')\n",
    "cli/__init__.py": "",
    "cli/main.py": '''
        import sys

        from app.web import handle_login


        def main() -> int:
            print(handle_login({"name": sys.argv[1], "password": sys.argv[2]}))
            return 0


        if __name__ == "__main__":
            sys.exit(main())
        ''',
}


def login_alike(text: str) -> list[float]:
    """Texts about logging in read alike (semantic neighbours in the graph); every other text is its own."""
    if "login" not in text:
        return embedding_for(text)
    return [10.0 + value / 1000 for value in embedding_for(text)]


def search_shapes() -> tuple[dict[str, Value], Shape, Shape]:
    """The named shapes of `codeloupe/search` (SearchResult, FileResult), its params, and its `prune` answer."""
    text = section("### `codeloupe/search`")
    named = {"SearchResult": shape_after(text, "Result (`SearchResult`):")[0],
             "FileResult": shape_after(text, "`FileResult`:")[0]}
    return named, shape_after(text, "Params: ")[0], shape_after(text, "`prune: true` answers only")[0]


def graph_shapes() -> dict[str, Value]:
    text = section("### `codeloupe/graph`")
    return {"GraphParams": shape_after(text, "Params: ")[0],
            "GraphMap": shape_after(text, "- `map` -> ")[0],
            "GraphNode": shape_after(text, "- `node` -> ")[0],
            "Neighbour": shape_after(text, "`Neighbour = ")[0],
            "GraphNodeMiss": shape_after(text, "the answer is `")[0],
            "GraphFolder": shape_after(text, "(tell it from a file's answer by `folder`): ")[0],
            "GraphPath": shape_after(text, "- `path` -> ")[0],
            "Hop": shape_after(text, "`Hop = ")[0],
            "Code": shape_after(text, "`Code = ")[0]}


def wrong_value(doc_type: Value) -> Any:
    """A value of another type than the doc gives a param."""
    if isinstance(doc_type, Ref):
        return "not a " + doc_type.name
    kinds = doc_type.kinds if isinstance(doc_type, Scalar) else frozenset()
    if "boolean" in kinds:
        return "yes"
    if "number" in kinds:
        return [] if "string" in kinds else "many"
    return 42


def progress_patterns() -> list[re.Pattern[str]]:
    """Every message the doc gives indexing progress, as a pattern (N, M, F, C: counts)."""
    text = section("## Standard features")
    paragraph = " ".join(text[text.index("- Work-done progress while indexing"):].split())
    quoted = re.findall(r'"([^"]+)"', paragraph)
    assert quoted, "docs/protocol.md quotes no progress message"
    patterns = []
    for message in quoted:
        pattern = re.escape(message).replace(re.escape("<folder name>"), ".+")
        patterns.append(re.compile(re.sub(r"\b[NMFC]\b", r"\\d+", pattern)))
    return patterns


def ask_event_types() -> set[str]:
    text = " ".join(section("### `codeloupe/ask`").split())
    listed = re.search(r'one JSON event per report \(`\{"type": ((?:"[\w-]+"(?: \| )?)+)', text)
    assert listed, "docs/protocol.md no longer lists the ask's event types"
    return set(re.findall(r'"([\w-]+)"', listed.group(1)))


async def refused_naming(client: Client, method: str, params: dict[str, Any], name: str) -> None:
    message = await expect_error(client.request(method, params), INVALID_PARAMS)
    assert f"`{name}`" in message, f"{method} {params}: the refusal does not name `{name}`: {message}"


async def every_documented_param_is_read(client: Client, bases: dict[str, dict[str, dict[str, Any]]],
                                         documented: dict[str, Shape]) -> None:
    """Each documented param, sent with a wrong type, is refused with -32602 naming it: the server reads it."""
    for method, params in documented.items():
        for name, doc_type in params.fields.items():
            base = bases[method].get(name, bases[method][""])
            await refused_naming(client, method, {**base, name: wrong_value(doc_type)}, name)


async def test_every_answer_has_the_fields_the_doc_names(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project", FILES)
    auth = uri(project / "app/auth.py")
    named, search_params, pruned = search_shapes()
    graph = graph_shapes()
    ask_text = section("### `codeloupe/ask`")
    flow_use, _ = shape_after(ask_text, "saying what the flow cache did:")
    check = ShapeCheck({**LSP_SHAPES, **named, **graph, "FlowUse": flow_use})
    request_shapes = {method: params_and_result(section(f"### `{method}`")) for method in (
        "codeloupe/expand", "codeloupe/locate", "codeloupe/status", "codeloupe/flows", "codeloupe/related",
        "codeloupe/tour")}
    ask_result, _ = shape_after(ask_text, "Result:")
    reindex, _ = shape_after(section("## Commands"), "`codeloupe.reindex` `[folderUri?]` ->")

    # The narrator, and embeddings over loopback (semantic neighbours, the dense lane).
    with ChatServer(embedder=login_alike) as chat:
        chat.add(Reply(text="Login loads the user and compares salted hashes [[1]].", times=3))
        client = await start_server([project], options={
            "chatBaseUrl": chat.base_url, "chatModel": "scripted", "embedProvider": "openai",
            "embedBaseUrl": chat.base_url, "embedModel": "scripted-embed", "embedDimensions": 8})
        try:
            await client.wait_ready()
            for _ in range(1200):  # not a speed check: the vectors are computed in the background
                status = await client.request("codeloupe/status", {})
                vectors = status["folders"][0]["vectors"]
                if vectors["total"] and vectors["done"] == vectors["total"]:
                    break
                await asyncio.sleep(0.05)
            check.check("codeloupe/status", status, request_shapes["codeloupe/status"][1], complete=True)

            answer = await client.request("codeloupe/search", {"query": "login password session token"})
            check.check("codeloupe/search", answer, Ref("SearchResult"), complete=True)
            flat = await client.request("codeloupe/search", {"query": "login password", "prune": True})
            check.check("codeloupe/search prune", flat, pruned, complete=True)

            found = await client.request("codeloupe/locate", {"text": "load_user", "identifier": True})
            check.check("codeloupe/locate", found, request_shapes["codeloupe/locate"][1], complete=True)
            lines = await client.request("codeloupe/expand", {"uri": auth, "range": {
                "start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}})
            check.check("codeloupe/expand", lines, request_shapes["codeloupe/expand"][1], complete=True)
            near = await client.request("codeloupe/related", {"uri": auth, "limit": 5})
            check.check("codeloupe/related", near, request_shapes["codeloupe/related"][1], complete=True)
            tour = await client.request("codeloupe/tour", {"limit": 5, "entryPoints": 3})
            check.check("codeloupe/tour", tour, request_shapes["codeloupe/tour"][1], complete=True)

            graph_map = await client.request("codeloupe/graph", {"mode": "map", "html": True})
            check.check("codeloupe/graph map", graph_map, Ref("GraphMap"), complete=True)
            for node in ("app/auth.py", "app/store.py"):
                answer = await client.request("codeloupe/graph", {"mode": "node", "node": node})
                check.check("codeloupe/graph node", answer, Ref("GraphNode"), complete=True)
            miss = await client.request("codeloupe/graph", {"mode": "node", "node": "app/stores.py"})
            check.check("codeloupe/graph node miss", miss, Ref("GraphNodeMiss"), complete=True)
            for folder in ("app", "cli"):
                answer = await client.request("codeloupe/graph", {"mode": "node", "node": folder})
                check.check("codeloupe/graph folder", answer, Ref("GraphFolder"), complete=True)
            for source, goal in (("cli/main.py", "app/store.py"), ("app/store.py", "cli/main.py"),
                                 ("docs/guide.md", "app/store.py")):
                route = await client.request("codeloupe/graph", {"mode": "path", "from": source, "to": goal})
                check.check("codeloupe/graph path", route, Ref("GraphPath"), complete=True)

            client.progress_reports["ask"] = []
            narrated = await client.request("codeloupe/ask", {"query": QUESTION, "workDoneToken": "ask"})
            served = await client.request("codeloupe/ask", {"query": QUESTION, "workDoneToken": "ask"})
            assert served["flow"] is not None, served["flow"]  # the second is served from the flow cache
            for result in (narrated, served):
                check.check("codeloupe/ask", result, ask_result, complete=True)
            # The server's own fallback, when the engine's ask cannot run at all, answers the same shape.
            fallback = fallback_answer(narrated["bundle"], "the ask failed")
            check.check("codeloupe/ask", fallback, ask_result, complete=True)
            reports = client.progress_reports["ask"]
            begins = {f'"{r.title}"' for r in reports if r.kind == "begin"}
            if not all(f"title {title}" in " ".join(ask_text.replace("`", "").split()) for title in begins):
                check.problems.append(f"ask progress titles the doc does not give: {sorted(begins)}")
            events = {json.loads(r.message)["type"] for r in reports if r.kind == "report"}
            if events - ask_event_types():
                check.problems.append(f"ask events the doc does not list: {sorted(events - ask_event_types())}")

            flows = await client.request("codeloupe/flows", {})
            check.check("codeloupe/flows", flows, request_shapes["codeloupe/flows"][1], complete=True)
            counted = await client.command("codeloupe.reindex", uri(project))
            check.check("codeloupe.reindex", counted, reindex, complete=True)

            await every_documented_param_is_read(client, {
                "codeloupe/search": {"": {"query": "login"}},
                "codeloupe/ask": {"": {"query": "login"}},
                "codeloupe/locate": {"": {"text": "load_user"}},
                "codeloupe/expand": {"": {"uri": auth}},
                "codeloupe/related": {"": {"uri": auth}},
                "codeloupe/tour": {"": {}},
                "codeloupe/flows": {"": {}},
                "codeloupe/graph": {"": {"mode": "map"}, "node": {"mode": "node"},
                                    "from": {"mode": "path", "to": "app/store.py"},
                                    "to": {"mode": "path", "from": "cli/main.py"}},
            }, {"codeloupe/search": search_params, "codeloupe/ask": shape_after(ask_text, "Params: ")[0],
                "codeloupe/graph": graph["GraphParams"],
                **{method: shapes[0] for method, shapes in request_shapes.items() if method != "codeloupe/status"}})
        finally:
            await stop_server(client)

    patterns = progress_patterns()
    indexing = [r for token, reports in client.progress_reports.items() if token != "ask" for r in reports]
    messages = [r.title if r.kind == "begin" else r.message for r in indexing if r.kind in ("begin", "report", "end")]
    assert messages, "no indexing progress was sent"
    undocumented = sorted({m for m in messages if m and not any(p.fullmatch(m) for p in patterns)})
    if undocumented:
        check.problems.append(f"indexing progress messages the doc does not give: {undocumented}")
    # A shared repository's status entry is held to the doc where PostgreSQL runs (tests/pg).
    problems = list(dict.fromkeys(check.problems)) + check.unseen(skip=("codeloupe/status.repositories",))
    assert not problems, "\n".join(problems)


def test_the_doc_mentions_every_shape_this_test_reads() -> None:
    """The doc's shapes parse (a reworded marker fails here first, with the marker named)."""
    assert "FileResult" in search_shapes()[0]
    assert set(graph_shapes()) >= {"GraphMap", "GraphNode", "GraphPath", "Hop"}
    assert progress_patterns() and ask_event_types()
    assert "codeloupe.showLocations" in doc_text()
