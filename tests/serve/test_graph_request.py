"""A graph request that cannot be answered (a node and a route at once, half a route, a blank part) is refused
by every surface in the same words: the engine's `GraphRequest` checks it once. MCP said "graph: a route needs
both `source` and `target`", HTTP "pass `node`, or both `source` and `target`, or neither (the map)", the CLI
argparse's "argument --path: not allowed with argument --node", and all three "empty graph target" for a blank
part. The command line says them in its own words, naming its options (`--path A B`). Such a request, and a text `locate` cannot look for, is refused before the first index is waited for."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client

from codeloupe.api import GraphRequest, GraphRequestError, WorkspaceError
from codeloupe.cli import main as cli_main
from codeloupe_mcp.server import build_server
from codeloupe_serving.warm import WarmWorkspace

# (the request, as /v1/graph's query parameters and MCP's `graph` arguments; the refusal every surface says)
BAD = [
    ({"node": "app/render.py", "source": "app/auth.py", "target": "app/store.py"},
     "ask for one `node` or for a route (`source` and `target`), not both"),
    ({"node": "app/render.py", "target": "app/store.py"},
     "ask for one `node` or for a route (`source` and `target`), not both"),
    ({"source": "app/auth.py"}, "a route needs a `target` as well as its `source`"),
    ({"target": "app/store.py"}, "a route needs a `source` as well as its `target`"),
    # Only whitespace is a part given blank, not one left out (it met the lookup's vague "empty graph target")
    ({"node": " "}, "`node` is blank: name a file or a concept, or leave it out"),
    ({"source": " ", "target": "app/store.py"}, "`source` is blank: name a file or a concept, or leave it out"),
    ({"source": "app/auth.py", "target": "\t "}, "`target` is blank: name a file or a concept, or leave it out"),
]
IDS = ["node and route", "node and target", "source alone", "target alone", "blank node", "blank source",
       "blank target"]


@pytest.mark.parametrize(("asked", "message"), BAD, ids=IDS)
def test_the_engine_refuses_each_mistake_with_its_own_message(asked: dict[str, str], message: str) -> None:
    with pytest.raises(GraphRequestError) as refused:
        GraphRequest(**asked)
    assert str(refused.value) == message
    assert isinstance(refused.value, WorkspaceError)  # every surface's refusal, not a fault


def test_http_says_the_engine_message(project: Path, serve) -> None:
    base = serve([project])
    for asked, message in BAD:
        answer = httpx.get(f"{base}/v1/graph", params=asked)
        assert (answer.status_code, answer.json()) == (400, {"error": message}), asked
    assert httpx.get(f"{base}/v1/graph", params={"source": "app/auth.py", "target": "app/store.py"}).json()["found"]


def test_http_refuses_a_part_given_empty(project: Path, serve) -> None:
    """`?node=` is a node given blank, as the command line's `--node ""` is: it counted as left out, and the answer
    was the whole map."""
    base = serve([project])
    for raw, part in (("node=", "node"), ("source=&target=app/store.py", "source"), ("source=app/auth.py&target=",
                                                                                     "target")):
        answer = httpx.get(f"{base}/v1/graph?{raw}")
        assert (answer.status_code, answer.json()) == (
            400, {"error": f"`{part}` is blank: name a file or a concept, or leave it out"}), raw
    assert "nodes" in httpx.get(f"{base}/v1/graph").json()  # left out: the map


async def test_mcp_says_the_engine_message(project: Path) -> None:
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            for asked, message in BAD:
                refused = await client.call_tool("graph", asked)
                said = "".join(part.text for part in refused.content)  # the SDK names the tool before it
                assert refused.is_error and said == f"Error executing tool graph: {message}", asked
    finally:
        warm.close()


@pytest.fixture
def first_index_waits(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The root of each call that reached its wait for a workspace's first index, in order."""
    import codeloupe_serving.warm as warm_module

    waits: list[Path] = []
    real_first_index = warm_module.WarmWorkspace.first_index

    async def counted_first_index(self) -> None:
        waits.append(self.root)
        await real_first_index(self)

    monkeypatch.setattr(warm_module.WarmWorkspace, "first_index", counted_first_index)
    return waits


# Per MCP tool: calls it refuses (and the whole error it answers), and one it answers.
MCP_REFUSED = {
    "graph": ([(asked, f"Error executing tool graph: {message}") for asked, message in BAD], {"node": "app/auth.py"}),
    "locate": ([({"text": " "}, "Error executing tool locate: `text` is blank (whitespace only): send the exact "
                                              "text to find, such as an identifier"),
                ({"text": "a\nb"}, "Error executing tool locate: `text` must be one line, got 2 lines")],
               {"text": "SessionStore"}),
}


@pytest.mark.parametrize("tool", sorted(MCP_REFUSED))
async def test_mcp_refuses_before_waiting_for_the_first_index(tool: str, project: Path, first_index_held,
                                                              first_index_waits: list[Path]) -> None:
    """MCP's `graph` waited for the first index (up to `FIRST_INDEX_WAIT_S`, two minutes) before refusing a
    request it could never answer, where HTTP and the CLI refused at once; so did its `locate` an empty or
    multi-line text."""
    refusals, answerable = MCP_REFUSED[tool]
    warm = WarmWorkspace(project)
    try:
        assert first_index_held.stopped.wait(60)
        async with Client(build_server(warm)) as client:
            for asked, message in refusals:
                refused = await client.call_tool(tool, asked)
                said = "".join(part.text for part in refused.content)
                assert refused.is_error and said == message, asked
            assert first_index_waits == []
            answer = await client.call_tool(tool, answerable)  # one it can answer still waits
            assert not answer.is_error and len(first_index_waits) == 1
    finally:
        first_index_held.release.set()
        warm.close()


def test_http_refuses_before_waiting_for_the_first_index(project: Path, serve, first_index_held,
                                                         first_index_waits: list[Path]) -> None:
    base = serve([project], ready=False)
    assert first_index_held.stopped.wait(60)
    for asked, message in BAD:
        assert httpx.get(f"{base}/v1/graph", params=asked).json() == {"error": message}, asked
    assert first_index_waits == []
    assert httpx.get(f"{base}/v1/graph", params={"node": "app/auth.py"}).status_code == 200
    assert len(first_index_waits) == 1


# The same mistakes on the command line (`--path A B` is the route), and its words for them: the engine's named
# MCP's and HTTP's parameters (`target`), and told to leave out a route's end, which `--path` cannot do without.
_BLANK_NODE = "--node is blank: name a file, a folder or a concept, or leave --node out for the map"
CLI_BAD = [
    (["--node", "app/render.py", "--path", "app/auth.py", "app/store.py"],
     "give --node (one file, folder or concept) or --path (a route), not both"),
    (["--node", "app/render.py", "--path", "", "app/store.py"], "--path A B: A is blank: name a file or a concept at "
                                                                 "each end"),
    (["--path", "app/auth.py", ""], "--path A B: B is blank: name a file or a concept at each end"),
    (["--path", "app/auth.py", "\t "], "--path A B: B is blank: name a file or a concept at each end"),
    (["--path", " ", "app/store.py"], "--path A B: A is blank: name a file or a concept at each end"),
    # `--path "" ""` and `--node ""` printed the whole map, as if neither were given.
    (["--path", "", ""], "--path A B: A and B are blank: name a file or a concept at each end"),
    (["--node", " "], _BLANK_NODE),
    (["--node", ""], _BLANK_NODE),
]


@pytest.mark.parametrize(("args", "message"), CLI_BAD, ids=[
    "node and route", "node and blank source", "source alone", "blank target", "blank source", "neither end",
    "blank node", "empty node"])
def test_the_cli_refuses_each_mistake_naming_its_options(args: list[str], message: str, project: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         isolated_cache: Path) -> None:
    """Refused before the workspace is indexed, naming the options as the command line takes them."""
    assert cli_main(["graph", str(project), "--no-embed", *args]) == 2
    assert capsys.readouterr().err == f"codeloupe: {message}\n"
    assert not any(isolated_cache.iterdir())  # no index was built for a request refused anyway


def test_http_refuses_a_text_locate_cannot_look_for_before_waiting_for_the_first_index(
        project: Path, serve, first_index_held, first_index_waits: list[Path]) -> None:
    base = serve([project], ready=False)
    assert first_index_held.stopped.wait(60)
    answer = httpx.get(f"{base}/v1/locate", params={"text": "a\nb"})
    assert (answer.status_code, answer.json()) == (422, {"error": "`text` must be one line, got 2 lines"}), answer.text
    assert first_index_waits == []
    assert httpx.get(f"{base}/v1/locate", params={"text": "SessionStore"}).status_code == 200
    assert len(first_index_waits) == 1
