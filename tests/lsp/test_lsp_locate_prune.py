"""`codeloupe/locate` and `codeloupe/search` with `prune`, over stdio on a server with two workspace folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_helpers import Client, expect_error, start_server, stop_server, uri, write_project
from lsprotocol import types as lsp

pytestmark = pytest.mark.asyncio(loop_scope="module")

INVALID_PARAMS = -32602
SECOND = {"lib/cache.py": "def load_user_cached(name):\n    return load_user(name)\n",
          "lib/door.py": 'KEY = "\N{KEY}"  # unlock_door\n'}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("locate")
    return write_project(root / "project"), write_project(root / "second", SECOND)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(folders: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    cache = tmp_path_factory.mktemp("locate-cache")
    lsp_client = await start_server(list(folders), env={"CODELOUPE_CACHE_DIR": str(cache)})
    await lsp_client.wait_ready(2)
    yield lsp_client
    await stop_server(lsp_client)


def line_of(path: Path, line0: int) -> str:
    return path.read_text().splitlines()[line0]


async def test_locate_answers_locations_of_the_text_with_their_lines(client: Client,
                                                                     folders: tuple[Path, Path]) -> None:
    project, second = folders
    found = await client.request("codeloupe/locate", {"text": "load_user"})
    assert (found["text"], found["identifier"], found["total"]) == ("load_user", False, 7)
    for hit in found["locations"]:  # the range covers exactly the text, on the line sent as `lineText`
        start, end = hit["range"]["start"], hit["range"]["end"]
        root = second if hit["path"] == "lib/cache.py" else project
        assert hit["uri"] == uri(root / hit["path"])
        assert hit["lineText"] == line_of(root / hit["path"], start["line"])
        assert hit["lineText"][start["character"]:end["character"]] == "load_user"
    assert [(h["path"], h["range"]["start"]["line"]) for h in found["locations"]] == [
        ("app/auth.py", 4), ("app/auth.py", 16), ("app/store.py", 5), ("app/web.py", 1), ("app/web.py", 9),
        ("lib/cache.py", 0), ("lib/cache.py", 1)]
    # Each line with the definition holding it, as `codeloupe locate` and MCP name it.
    assert [h["symbol"] for h in found["locations"] if h["path"] == "lib/cache.py"] == ["load_user_cached"] * 2


async def test_locate_identifier_limit_folder_and_not_found(client: Client, folders: tuple[Path, Path]) -> None:
    project, second = folders
    whole = await client.request("codeloupe/locate", {"text": "load_user", "identifier": True, "limit": 2})
    assert (whole["identifier"], whole["total"]) == (True, 6)  # `load_user_cached` is another identifier
    assert [h["path"] for h in whole["locations"]] == ["app/auth.py", "app/auth.py"]
    only = await client.request("codeloupe/locate", {"text": "load_user_cached", "identifier": True,
                                                     "folderUri": uri(second)})
    assert [(h["path"], h["range"]["start"]) for h in only["locations"]] == \
        [("lib/cache.py", {"line": 0, "character": 4})]
    wide = await client.request("codeloupe/locate", {"text": "unlock_door"})
    # The key is one code point but two UTF-16 units: the match starts at code point 13, UTF-16 unit 14.
    assert wide["locations"][0]["range"] == {"start": {"line": 0, "character": 14},
                                             "end": {"line": 0, "character": 25}}
    ignored = await client.request("codeloupe/locate", {"text": "ignoredDependency"})  # node_modules is skipped
    assert (ignored["total"], ignored["locations"]) == (0, [])
    message = await expect_error(client.request("codeloupe/locate", {"text": 3}), INVALID_PARAMS)
    assert "`text`" in message
    message = await expect_error(client.request("codeloupe/locate", {"text": "a\nb"}), INVALID_PARAMS)
    assert "`text` must be one line" in message  # every refusal names its param


async def test_a_query_of_whitespace_or_control_characters_is_refused(client: Client) -> None:
    """A NUL-only query passed the language server's blank check (`str.strip` keeps a NUL) and was searched;
    every surface now refuses what `codeloupe.types.is_blank` calls blank."""
    for query in ("   ", "\x00", " \x00\t\u200b"):
        for method in ("codeloupe/search", "codeloupe/ask"):
            message = await expect_error(client.request(method, {"query": query}), INVALID_PARAMS)
            assert "`query` must be a non-empty string" in message, (method, query, message)


async def test_workspace_symbols_put_an_exact_match_first_whichever_folder_holds_it(client: Client) -> None:
    """Each folder answered its own candidates in turn: `load_user_cached`, defined in the second folder, came
    after everything the first folder found for it (`USERS`, `load_user`, ...)."""
    found = await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="load_user_cached"))
    assert found and found[0].name == "load_user_cached"
    found = await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="load_user"))
    assert [s.name for s in found[:2]] == ["load_user", "load_user_cached"]  # exact, then the prefix


async def test_a_refusal_quotes_a_large_value_cut_short(client: Client) -> None:
    """A refusal quoted the value it refused whole: a query sent as a list of 20,000 words came back in full."""
    message = await expect_error(client.request("codeloupe/search", {"query": ["word"] * 20_000}), INVALID_PARAMS)
    assert "`query` must be" in message and "['word', 'word'" in message and "characters)" in message
    assert len(message) < 300
    message = await expect_error(client.request("codeloupe/locate", {"text": 3}), INVALID_PARAMS)
    assert message.endswith("got 3")  # a short one stays whole


async def test_search_prune_is_the_cli_prune_in_protocol_shape(client: Client, folders: tuple[Path, Path],
                                                              tmp_path: Path) -> None:
    project, _ = folders
    pruned = await client.request("codeloupe/search", {"query": "session login password", "prune": True,
                                                       "folderUri": uri(project)})
    cli = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(project), "session login password",
                          "--prune", "--embed-provider", "none"], capture_output=True, text=True, check=True,
                         env={**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")})
    expected = json.loads(cli.stdout)
    assert pruned["query"] == expected["query"] and pruned["chunks"]
    assert [{"rank": c["rank"], "path": c["path"], "start_line": c["startLine"] + 1, "end_line": c["endLine"] + 1,
             "anchor_line": c["anchorLine"] + 1, "breadcrumb": c["breadcrumb"], "text": c["text"],
             "truncated": c["truncated"], "text_start_line": c["textStartLine"] + 1, "repository": c["repository"],
             "revision": c["revision"]}
            for c in pruned["chunks"]] == expected["chunks"]
    first = pruned["chunks"][0]
    assert first["uri"] == uri(project / first["path"]) == first["location"]["uri"]
    assert first["location"]["range"]["start"]["line"] == first["startLine"]


async def test_search_prune_names_every_candidate_the_chunks_leave_out(client: Client, folders: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    """`prune` listed only the chunks, so the candidates with none to list (past the limit, the long tail) were
    missing from the answer without a word (rule 2: the bundle keeps every candidate); they follow the chunks in
    `tail`, each with its best lines, as the CLI's `--prune` lists them."""
    project, _ = folders
    query = "session login password"
    pruned = await client.request("codeloupe/search", {"query": query, "prune": True, "limit": 1,
                                                       "folderUri": uri(project)})
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    cli = [sys.executable, "-m", "codeloupe", "search", str(project), query, "--embed-provider", "none", "--limit", "1"]
    expected = json.loads(subprocess.run([*cli, "--prune"], capture_output=True, text=True, check=True,
                                         env=env).stdout)
    bundle = json.loads(subprocess.run([*cli, "--json"], capture_output=True, text=True, check=True, env=env).stdout)
    candidates = [hit["path"] for hit in [*bundle["core"], *bundle["related"]]]
    assert pruned["tail"], pruned  # the query finds more files than the one the limit ranks with code
    assert sorted({c["path"] for c in expected["chunks"]} | {f["path"] for f in expected["tail"]}) == sorted(candidates)
    assert [{"rank": f["rank"], "path": f["path"], "start_line": f["startLine"] + 1, "end_line": f["endLine"] + 1,
             "repository": f["repository"], "revision": f["revision"]} for f in pruned["tail"]] == expected["tail"]
    last = pruned["tail"][-1]
    assert last["uri"] == uri(project / last["path"]) == last["location"]["uri"]
    assert last["location"]["range"]["start"]["line"] == last["startLine"]

async def test_search_prune_over_several_folders_is_refused(client: Client) -> None:
    message = await expect_error(client.request("codeloupe/search", {"query": "load user", "prune": True}),
                                 INVALID_PARAMS)
    assert "one folder" in message
