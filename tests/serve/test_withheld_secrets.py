"""Files that look like secrets, served: the index holds a `.env` and a `config/credentials.py` git does not
ignore (the editor may search them), and every answer of MCP and of the HTTP API, which go to agents (a cloud
model's context), lists them as candidates and never carries their content; the CLI still shows it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from codeloupe.api import Workspace
from codeloupe.cli import main as cli_main

# A fake key: what no answer may carry.
KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
QUERY = "STRIPE_API_KEY stripe webhook secret"


@pytest.fixture
def secrets(project: Path) -> Path:
    """The project with a `.env` and a module named like credentials, both indexed, both holding `KEY`, and code
    that a query for the key's name matches too."""
    (project / ".env").write_text(f"STRIPE_API_KEY={KEY}\nSTRIPE_WEBHOOK_SECRET=whsec_{KEY}\n")
    (project / "config").mkdir()
    (project / "config/credentials.py").write_text(
        f'"""Deploy credentials: the Stripe webhook secret."""\n\nfrom app.store import SessionStore\n\n'
        f'STRIPE_WEBHOOK_SECRET = "whsec_{KEY}"\n\n\ndef signing_store():\n    return SessionStore()\n\n\n'
        'if __name__ == "__main__":\n    print(signing_store())\n')
    (project / "app/payments.py").write_text(
        'import os\n\n\ndef stripe_api_key() -> str:\n    """The Stripe API key and webhook secret, from the '
        'environment."""\n    return os.environ["STRIPE_API_KEY"]\n')
    return project


def text_of(result) -> str:
    return "".join(part.text for part in result.content)


async def test_mcp_lists_secret_looking_files_and_never_shows_their_content(secrets: Path, serve) -> None:
    base = serve([secrets])
    async with Client(f"{base}/mcp", read_timeout_seconds=60) as client:
        found = text_of(await client.call_tool("search", {"query": QUERY, "mode": "both"}))
        flat = json.loads(text_of(await client.call_tool("search", {"query": QUERY, "mode": "both", "flat": True})))
        scoped = text_of(await client.call_tool("search", {"query": QUERY, "scope": "config"}))
        refused = [(arguments["path"], await client.call_tool("expand", arguments)) for arguments in (
            {"path": ".env"}, {"path": "config/credentials.py", "start_line": 5, "end_line": 5},
            {"path": "config/credentials.py", "symbol": "signing_store"})]
        located = text_of(await client.call_tool("locate", {"text": "sk_live"}))
        named = text_of(await client.call_tool("locate", {"text": "STRIPE_API_KEY"}))
        node = text_of(await client.call_tool("graph", {"node": "config/credentials.py"}))
        route = await client.call_tool("graph", {"source": "config/credentials.py", "target": "app/store.py"})
        tour = (await client.read_resource("codeloupe://tour")).contents[0].text
        with pytest.raises(MCPError) as resource:
            await client.read_resource("codeloupe://file/.env")
        readable = (await client.read_resource("codeloupe://file/app/payments.py")).contents[0].text
    answers = [found, json.dumps(flat), scoped, *(text_of(answer) for _, answer in refused), located, named, node,
               text_of(route), tour, str(resource.value)]
    assert not [answer for answer in answers if KEY in answer], answers
    # Listed in its place, each with a line saying why it shows no code, and a note counting them.
    assert "`.env:1-2`" in found and "`config/credentials.py:" in found, found
    assert found.count("content withheld: the file looks like a secret") == 2, found
    assert "note: 2 candidate files look like a secret (keys, credentials, .env files): listed, content withheld" \
        in found, found
    assert "def stripe_api_key() -> str:" in found  # the code that reads it is shown
    assert sorted(flat["withheld"]) == [".env", "config/credentials.py"]
    assert {chunk["path"] for chunk in flat["chunks"]}.isdisjoint(flat["withheld"])
    assert "content withheld" in scoped and "config/credentials.py" in scoped
    for path, answer in refused:
        assert answer.is_error and text_of(answer) == (
            f"Error executing tool expand: {path}: withheld: the file looks like a secret (keys, credentials, .env files), and its content is "
            "never sent to an agent"), text_of(answer)
    assert resource.value.code == INVALID_PARAMS and "withheld: the file looks like a secret" in str(resource.value)
    assert readable == (secrets / "app/payments.py").read_text()
    # Not looked in at all (a count of its lines holding a text would tell what it holds), and said so.
    assert located.startswith("note: files that look like secrets (keys, credentials, .env files) are not looked "
                              "in\nno indexed line holds the text 'sk_live'"), located
    assert named.splitlines()[1:] == ["1 line holds the text 'STRIPE_API_KEY'", '`app/payments.py:6:24`  '
                                      '`return os.environ["STRIPE_API_KEY"]`  [in `stripe_api_key`]'], named
    # The graph names the file and its neighbours; a route shows no code of it (the other side's it does).
    assert "config/credentials.py" in node and "app/store.py" in node
    assert not route.is_error and "class SessionStore:" in text_of(route), text_of(route)
    assert "STRIPE_WEBHOOK_SECRET" not in text_of(route)
    assert json.loads(tour)["entry_points"][-1] == {"path": "config/credentials.py", "line": 12,
                                                    "kind": "main guard",
                                                    "detail": "content withheld: the file looks like a secret"}


def test_the_http_api_lists_secret_looking_files_and_never_shows_their_content(secrets: Path, serve) -> None:
    base = serve([secrets])
    get = {
        "search": httpx.get(f"{base}/v1/search", params={"q": QUERY, "mode": "both"}),
        "search_post": httpx.post(f"{base}/v1/search", json={"query": QUERY, "mode": "both"}),
        "search_all": httpx.get(f"{base}/v1/search/all", params={"q": QUERY, "mode": "both"}),
        "docsearch": httpx.get(f"{base}/v1/docsearch", params={"q": QUERY}),
        "expand": httpx.get(f"{base}/v1/expand", params={"path": ".env"}),
        "expand_symbol": httpx.get(f"{base}/v1/expand", params={"path": "config/credentials.py", "line": 9}),
        "locate": httpx.get(f"{base}/v1/locate", params={"text": "sk_live"}),
        "related": httpx.get(f"{base}/v1/related", params={"path": "app/payments.py"}),
        "related_to": httpx.get(f"{base}/v1/related", params={"path": ".env"}),
        "node": httpx.get(f"{base}/v1/graph", params={"node": "config/credentials.py"}),
        "route": httpx.get(f"{base}/v1/graph", params={"source": "config/credentials.py", "target": "app/store.py"}),
        "tour": httpx.get(f"{base}/v1/tour"),
    }
    with httpx.stream("POST", f"{base}/v1/ask/stream", json={"question": QUERY}, timeout=60) as response:
        asked = response.read().decode()
    assert not [name for name, answer in get.items() if KEY in answer.text], {n: a.text for n, a in get.items()}
    assert KEY not in asked
    bundle = get["search"].json()
    assert get["search_post"].json()["core"] == bundle["core"]
    hidden = {hit["path"]: hit for hit in bundle["core"] + bundle["related"] if hit["withheld"]}
    assert sorted(hidden) == [".env", "config/credentials.py"], bundle
    assert all(hit["chunks"] == [] and hit["symbols"] == [] and hit["why"].endswith(
        "; content withheld: the file looks like a secret") for hit in hidden.values())
    assert "2 candidate files look like a secret (keys, credentials, .env files): listed, content withheld" \
        in bundle["notes"]
    assert ".env" in {hit["path"] for hit in get["search_all"].json()["related"] + get["search_all"].json()["core"]}
    for refused in ("expand", "expand_symbol", "related_to"):
        assert get[refused].status_code == 400 and "withheld: the file looks like a secret" in get[refused].json()[
            "error"], get[refused].text
    located = get["locate"].json()
    assert located["total"] == 0 and located["secrets_skipped"] is True
    assert {chunk["path"] for chunk in get["related"].json()["chunks"]}.isdisjoint({".env", "config/credentials.py"})
    assert get["node"].json()["chunks"] == [] and get["node"].json()["symbols"]  # its names, none of its lines
    (hop,) = get["route"].json()["hops"]
    assert "useCode" not in hop and hop["definitionCode"]["text"].startswith("class SessionStore:")
    assert {"config/credentials.py", "app/store.py"} <= {p["path"] for p in get["tour"].json()["entry_points"]}


def test_the_cli_still_shows_what_the_index_holds(secrets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The user's own eyes: the CLI (as the editors) answers with the files' content."""
    assert cli_main(["search", str(secrets), QUERY, "--with-docs", "--json", "--no-embed"]) == 0
    bundle = json.loads(capsys.readouterr().out)
    assert KEY in json.dumps(bundle) and not any(hit["withheld"] for hit in bundle["core"] + bundle["related"])
    assert cli_main(["locate", str(secrets), "sk_live"]) == 0
    assert ".env:1:" in capsys.readouterr().out


def test_an_entry_point_that_looks_like_a_secret_says_it_is_withheld_once(
        secrets: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    """A question for where the program starts lists `config/credentials.py` (its `__main__` guard) as an entry
    point whose detail is withheld; its map line said so twice ("entry point: guard (content withheld: ...);
    content withheld: ...")."""
    ws = lexical_workspace(secrets)
    ws.withholds_secrets = True  # as the MCP and HTTP servers' workspaces are
    hit = next(h for h in ws.search("where does the program start").files if h.path == "config/credentials.py")
    assert hit.withheld and hit.why.count("content withheld") == 1, hit.why
