"""The language server over repositories of the shared index the user has not cloned: `storeUrl` and
`repositories` in the editor's settings open them from PostgreSQL, searches answer with `codeloupe-index:`
URIs pinned to the commit indexed, and `codeloupe/read` returns a file's text from the index."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lsp"))
from lsp_helpers import (  # noqa: E402
    Client,
    expect_error,
    location_paths,
    start_server,
    stop_server,
    uri,
    write_project,
)
from protocol_doc import LSP_SHAPES, ShapeCheck, params_and_result, section  # noqa: E402

from chat_server import ChatServer, Reply  # noqa: E402
from codeloupe.api import Workspace, shared_repositories  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph" / "python"
INVALID_PARAMS = -32602
QUERY = "charge the card total price"


def _indexed_then_deleted(tmp_path: Path, pg_url: str, name: str = "billing") -> tuple[str, dict[str, str], list[str]]:
    """Index a git checkout named `name` into the shared index, then delete it: (commit, texts, ranking)."""
    root = tmp_path / name
    shutil.copytree(FIXTURES, root)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "fixture"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url})
    try:
        ws.index()
        ranking = [hit.path for hit in ws.search(QUERY).files]
        texts = {path: (root / path).read_text() for path in ws.store.file_rows()}
    finally:
        ws.close()
    shutil.rmtree(root)  # the editor's machine has no checkout
    return commit, texts, ranking


async def _search_when_open(client: Any, params: dict[str, Any], refusal: str) -> dict[str, Any]:
    """The first search answered once the server has opened the repositories (it opens them after
    `initialized`; until then a search is refused with `refusal`)."""
    for _ in range(600):  # not a speed check
        try:
            return await client.request("codeloupe/search", {"query": QUERY, **params})
        except JsonRpcException as exc:
            assert refusal in exc.message, exc.message
        await asyncio.sleep(0.05)
    raise AssertionError("the shared repositories were never opened")


async def test_a_repository_holding_a_folder_of_its_own_name_is_read_and_scoped_by_its_paths(
        tmp_path: Path, pg_url: str) -> None:
    """A repository named as one of its top-level folders (django/django, here `src` holding `src/`): its
    `codeloupe-index:///src/src/...` documents are read and taken as a scope as its paths. The repository's name
    was cut off the front of the path as if it were the workspace's root, so `codeloupe/read` found no such
    file and a scope searched another folder (here none: no result)."""
    _, texts, ranking = _indexed_then_deleted(tmp_path, pg_url, "src")
    client = await start_server([write_project(tmp_path / "project")], {"storeUrl": pg_url, "repositories": ["src"]})
    try:
        result = await _search_when_open(client, {"folderUri": "codeloupe-index:///src"},
                                         "did not open from the shared index")
        assert location_paths(result) == ranking and ranking[0].startswith("src/")
        read = await client.request("codeloupe/read", {"uri": result["core"][0]["uri"]})
        assert read["text"] == texts[ranking[0]]
        payments = await client.request("codeloupe/search", {"query": QUERY,
                                                             "scope": "codeloupe-index:///src/src/shop/payments"})
        assert location_paths(payments) == [p for p in ranking if p.startswith("src/shop/payments/")] != []
    finally:
        await stop_server(client)


async def test_search_and_read_a_repository_the_user_has_not_cloned(tmp_path: Path, pg_url: str) -> None:
    commit, texts, ranking = _indexed_then_deleted(tmp_path, pg_url)
    project = write_project(tmp_path / "project")
    client = await start_server([project], {"storeUrl": pg_url, "repositories": ["billing"]})
    try:
        result = await _search_when_open(client, {"folderUri": "codeloupe-index:///billing"},
                                         "did not open from the shared index")
        assert location_paths(result) == ranking
        # The open folder keeps its own index on this machine: storeUrl names the repositories' database only.
        [folder] = await client.wait_ready()
        assert "postgresql" not in folder["indexPath"], folder
        both = await client.request("codeloupe/search", {"query": "charge the card, check the password"})
        schemes = {f["uri"].split(":", 1)[0] for f in [*both["core"], *both["related"]]}
        assert schemes == {"file", "codeloupe-index"}, both
        for file in [*result["core"], *result["related"]]:
            assert file["uri"] == f"codeloupe-index:///billing/{file['path']}?rev={commit}"
            assert {c["location"]["uri"] for c in file["chunks"]} <= {file["uri"]}
        first = result["core"][0]
        read = await client.request("codeloupe/read", {"uri": first["uri"]})
        assert read["text"] == texts[first["path"]]
        assert (read["repository"], read["path"], read["revision"]) == ("billing", first["path"], commit)
        # The answers only a shared repository gives carry the fields docs/protocol.md names for them (the rest:
        # tests/lsp/test_lsp_protocol_doc.py).
        doc = ShapeCheck(dict(LSP_SHAPES))
        doc.check("codeloupe/read", read, params_and_result(section("### `codeloupe/read`"))[1], complete=True)
        status = await client.request("codeloupe/status", {})
        doc.check("codeloupe/status", status, params_and_result(section("### `codeloupe/status`"))[1], complete=True)
        problems = doc.problems + doc.unseen()
        assert not problems, "\n".join(problems)
        # VS Code writes the URI with one slash and re-encodes its query.
        encoded = first["uri"].replace(":///", ":/").replace("?rev=", "?rev%3D")
        assert (await client.request("codeloupe/read", {"uri": encoded}))["text"] == texts[first["path"]]

        # The other searches answer from it too.
        symbols = await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="charge"))
        shared_symbols = [s.location.uri for s in symbols if s.location.uri.startswith("codeloupe-index:")]
        assert f"codeloupe-index:///billing/src/shop/payments/card.py?rev={commit}" in shared_symbols, symbols
        located = await client.request("codeloupe/locate", {"text": "def charge",
                                                            "folderUri": "codeloupe-index:///billing"})
        assert [loc["uri"] for loc in located["locations"]] == [
            f"codeloupe-index:///billing/src/shop/payments/card.py?rev={commit}"]

        # A scope URI of the repository picks it and keeps its files under that folder (or that file alone).
        payments = await client.request("codeloupe/search", {"query": QUERY,
                                                             "scope": "codeloupe-index:///billing/src/shop/payments"})
        assert location_paths(payments) == [p for p in ranking if p.startswith("src/shop/payments/")] != []
        assert [f["uri"] for f in [*payments["core"], *payments["related"]]] == [
            f"codeloupe-index:///billing/{p}?rev={commit}" for p in location_paths(payments)]
        pinned = await client.request("codeloupe/search", {"query": QUERY, "scope": first["uri"]})
        assert location_paths(pinned) == [first["path"]]
        whole = await client.request("codeloupe/search", {"query": QUERY, "scope": "codeloupe-index:/billing/"})
        assert location_paths(whole) == ranking
        for scope, why in {"codeloupe-index:///billing/src/../../etc": "traversal",
                           "codeloupe-index:///billing/src?rev=0123abc": "indexed at",
                           "codeloupe-index:///payroll/src": "did not open"}.items():
            message = await expect_error(client.request("codeloupe/search", {"query": QUERY, "scope": scope}),
                                         INVALID_PARAMS)
            assert "`scope`" in message and why in message, (scope, message)

        refused = {
            "codeloupe-index:///billing/../../../etc/passwd": "traversal",
            "codeloupe-index:///billing/%2E%2E/%2E%2E/etc/passwd": "traversal",
            "codeloupe-index:///billing//etc/passwd": "absolute",
            "codeloupe-index:///billing/no/such/file.py": "no such file",
            f"codeloupe-index:///billing/{first['path']}?rev=0123abc": "indexed at",
            f"codeloupe-index:///payroll/{first['path']}": "did not open",
            "codeloupe-index://billing/app.py": "not a codeloupe-index:///<repository>/<path> URI",
            "file:///etc/passwd": "not a codeloupe-index:///<repository>/<path> URI",
        }
        for uri, why in refused.items():
            message = await expect_error(client.request("codeloupe/read", {"uri": uri}), INVALID_PARAMS)
            assert why in message, (uri, message)
    finally:
        await stop_server(client)
    # A server with no folder at all answers from the shared repositories alone.
    client = await start_server([], {"storeUrl": pg_url, "repositories": ["billing"]})
    try:
        alone = await _search_when_open(client, {}, "no workspace folder is open")
        assert location_paths(alone) == ranking
    finally:
        await stop_server(client)


def test_neovim_opens_a_shared_result_read_only(tmp_path: Path, pg_url: str) -> None:
    """Quickfix and picker open a `codeloupe-index:` result at its line, with the indexed text, read-only."""
    from test_neovim_client import FIXTURE, run_script

    _commit, texts, _ranking = _indexed_then_deleted(tmp_path, pg_url)
    expected = tmp_path / "expected"
    for path, text in texts.items():
        (expected / path).parent.mkdir(parents=True, exist_ok=True)
        (expected / path).write_text(text)
    workspace = tmp_path / "workspace"
    for path, text in FIXTURE.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text)
    run_script("index_documents.lua", workspace, tmp_path / "scratch",
               {"CODELOUPE_TEST_STORE_URL": pg_url, "CODELOUPE_TEST_EXPECTED": str(expected)})


def test_vscode_opens_a_shared_result_through_its_content_provider(tmp_path: Path, pg_url: str) -> None:
    """The search picker's `codeloupe-index:` result opens through the extension's content provider, which reads
    it with codeloupe/read: the indexed text, at the matching line (clients/vscode/test/indexDocuments.pg.js)."""
    from test_vscode_client import CLIENT, _server_command

    _commit, texts, _ranking = _indexed_then_deleted(tmp_path, pg_url)
    expected = tmp_path / "expected"
    for path, text in texts.items():
        (expected / path).parent.mkdir(parents=True, exist_ok=True)
        (expected / path).write_text(text)
    node = shutil.which("node")
    assert node and (CLIENT / "node_modules").is_dir(), "the VS Code client tests need Node 20 and npm ci"
    subprocess.run([node, "esbuild.mjs"], cwd=CLIENT, check=True, capture_output=True, timeout=120)
    env = {**os.environ, "CODELOUPE_LSP_COMMAND": _server_command(), "CODELOUPE_TEST_STORE_URL": pg_url,
           "CODELOUPE_TEST_EXPECTED": str(expected)}
    mocha = [node, str(CLIENT / "node_modules" / "mocha" / "bin" / "mocha.js"), "--no-config", "--require",
             "test/register.js", "--timeout", "60000", "--exit", "test/indexDocuments.pg.js"]
    done = subprocess.run(mocha, cwd=CLIENT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"[-20000:]


async def test_ask_related_graph_hover_and_lenses_answer_on_a_repository_the_user_has_not_cloned(
        tmp_path: Path, pg_url: str) -> None:
    """Every answer about a shared repository's documents comes from the shared index, its locations and links
    `codeloupe-index:` documents pinned to the commit indexed; `codeloupe/status` lists the repository."""
    commit, texts, _ranking = _indexed_then_deleted(tmp_path, pg_url)

    def pinned(path: str) -> str:
        return f"codeloupe-index:///billing/{path}?rev={commit}"

    card = pinned("src/shop/payments/card.py")
    repository = {"folderUri": "codeloupe-index:///billing"}
    with ChatServer() as chat:
        chat.add(Reply(text="The card is charged here. [[1]]"))
        client = await start_server([], {"storeUrl": pg_url, "repositories": ["billing"],
                                         "chatBaseUrl": chat.base_url, "chatModel": "scripted"})
        try:
            await _search_when_open(client, {}, "no workspace folder is open")
            status = await client.request("codeloupe/status", {})
            assert status["folders"] == []
            [listed] = status["repositories"]
            assert (listed["uri"], listed["repository"], listed["commit"]) == ("codeloupe-index:///billing", "billing",
                                                                               commit)
            assert listed["files"] == len(texts) and listed["chunks"] >= len(texts)

            client.progress_reports["ask"] = []
            answer = await client.request("codeloupe/ask", {"query": QUERY, "agents": False, "workDoneToken": "ask",
                                                            **repository})
            assert answer["fallback"] is None and not chat.pending(), answer["answer"]
            [cited] = answer["citations"]
            assert cited["location"]["uri"] == pinned(cited["path"])
            # The streamed code part names its document pinned as the answer's does (a reloaded window's draft reads it).
            events = [json.loads(r.message) for r in client.progress_reports["ask"] if r.kind == "report"]
            assert [e["location"] for e in events if e["type"] == "delta" and e["kind"] == "code"] == [cited["location"]]
            lines = texts[cited["path"]].splitlines(keepends=True)
            assert cited["text"] == "".join(lines[cited["startLine"] - 1:cited["endLine"]])  # the indexed text
            shown = [*answer["bundle"]["core"], *answer["bundle"]["related"], *answer["uncited"]]
            assert shown and {f["uri"] for f in shown} == {pinned(f["path"]) for f in shown}

            related = await client.request("codeloupe/related", {"uri": card})
            assert related["uri"] == card and related["chunks"], related
            assert {c["location"]["uri"] for c in related["chunks"]} == {pinned(c["path"]) for c in related["chunks"]}
            assert all(c["path"] != "src/shop/payments/card.py" for c in related["chunks"])

            node = await client.request("codeloupe/graph", {"mode": "node", "node": card})
            assert (node["path"], node["uri"]) == ("src/shop/payments/card.py", card)
            assert {n["uri"] for n in node["imports"]} == {pinned("src/shop/cart.py"), pinned("src/shop/log.py")}
            assert pinned("tests/check_shop.py") in {n["uri"] for n in node["importers"]}
            route = await client.request("codeloupe/graph", {"mode": "path", "from": card,
                                                             "to": "src/shop/pricing.py", **repository})
            spans = [hop[key] for hop in route["hops"] for key in ("use", "definition") if key in hop]
            assert route["found"] and spans and {s["uri"] for s in spans} <= {pinned(p) for p in texts}, route
            graph = await client.request("codeloupe/graph", {"mode": "map", **repository})
            assert {n["uri"] for n in graph["nodes"]} == {pinned(n["path"]) for n in graph["nodes"]}
            tour = await client.request("codeloupe/tour", repository)
            assert tour["stops"] and all(s["location"]["uri"] == pinned(s["path"]) for s in tour["stops"])

            document = lsp.TextDocumentIdentifier(uri=card)
            hover = await client.text_document_hover_async(lsp.HoverParams(text_document=document,
                                                                            position=lsp.Position(line=0, character=0)))
            assert hover is not None and f"({pinned('src/shop/cart.py')}#L1)" in hover.contents.value, hover
            used = await client.text_document_hover_async(lsp.HoverParams(text_document=document,
                                                                           position=lsp.Position(line=6, character=4)))
            assert used is not None and f"({pinned('tests/check_shop.py')}#L" in used.contents.value, used
            lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(text_document=document))
            assert [lens.range.start.line for lens in lenses] == [0, 6]
            resolved = await client.code_lens_resolve_async(lenses[1])
            assert resolved.command is not None and resolved.command.title == "used in 2 files"
            assert {loc["uri"] for loc in resolved.command.arguments[2]} == {
                pinned("src/shop/payments/__init__.py"), pinned("tests/check_shop.py")}

            # A document pinned to another commit than the index holds now: its lines may differ.
            stale = card.replace(commit, "0123abc")
            assert await client.text_document_hover_async(lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=stale), position=lsp.Position(line=0, character=0))) is None
            message = await expect_error(client.request("codeloupe/related", {"uri": stale}), INVALID_PARAMS)
            assert "indexed at" in message
        finally:
            await stop_server(client)


async def test_expand_reads_lines_of_a_repository_the_user_has_not_cloned(tmp_path: Path, pg_url: str) -> None:
    """`codeloupe/expand` on a `codeloupe-index:` document answers the indexed lines (no checkout on this machine),
    and refuses what `codeloupe/read` refuses: another commit, a path out of the repository, an unknown file."""
    commit, texts, _ranking = _indexed_then_deleted(tmp_path, pg_url)
    path = "src/shop/payments/card.py"
    card = f"codeloupe-index:///billing/{path}?rev={commit}"
    lines = texts[path].splitlines(keepends=True)
    client = await start_server([], {"storeUrl": pg_url, "repositories": ["billing"]})
    try:
        await _search_when_open(client, {}, "no workspace folder is open")
        whole = await client.request("codeloupe/expand", {"uri": card})
        assert whole["uri"] == card and whole["text"] == texts[path]
        assert whole["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}
        span = {"start": {"line": 2, "character": 0}, "end": {"line": 5, "character": 0}}
        # As VS Code writes the URI back: one slash, the query re-encoded.
        encoded = card.replace(":///", ":/").replace("?rev=", "?rev%3D")
        part = await client.request("codeloupe/expand", {"uri": encoded, "range": span})
        assert part["text"] == "".join(lines[2:5]) and part["range"] == span
        refused = {
            card.replace(commit, "0123abc"): "indexed at",
            "codeloupe-index:///billing/../../../etc/passwd": "traversal",
            "codeloupe-index:///billing/no/such/file.py": "no such file",
            f"codeloupe-index:///payroll/{path}": "did not open",
        }
        for uri, why in refused.items():
            message = await expect_error(client.request("codeloupe/expand", {"uri": uri}), INVALID_PARAMS)
            assert why in message, (uri, message)
    finally:
        await stop_server(client)


def _errors(client) -> list[str]:
    return [m.message for m in client.messages if m.type == lsp.MessageType.Error]


async def _the_one_error(client, what: str) -> str:
    """The error message the editor was shown, once it was shown: exactly one."""
    await client.wait_until(lambda: _errors(client), what)
    [message] = _errors(client)
    return message


def _two_folders_named_service(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the fixture in folders both named `service`, so both index as repository 'service'."""
    first, other = tmp_path / "a" / "service", tmp_path / "b" / "service"
    shutil.copytree(FIXTURES, first)
    shutil.copytree(FIXTURES, other)
    return first, other


def _made_source(folder: Path, pg_url: str) -> None:
    """`codeloupe index FOLDER --replace`, as the refusal says to run: `folder` becomes its repository's source."""
    ws = Workspace(folder, overrides={"embed_provider": "none", "store_url": pg_url}, replace_source=True)
    ws.index()
    ws.close()


def _saved(client: Client, path: Path, added: str) -> None:
    """`added` appended to the file at `path`, then saved in the editor."""
    path.write_text((path.read_text() if path.exists() else "") + added)
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(
        text_document=lsp.TextDocumentIdentifier(uri=path.as_uri())))


def _says_what_to_run(message: str, folder: Path, *, holder: Path, then: str) -> None:
    """The refusal of `folder`, whose repository holds `holder`'s files, worded for an editor user: the command
    to run in a terminal and what to do `then` in the editor, not a flag of a command they never ran."""
    assert f"repository 'service' holds the files of {holder}, not this folder" in message, message
    assert f"run `codeloupe index {folder} --repo service --replace` in a terminal, then {then}" in message, message
    assert "--store URL" not in message, message


async def test_a_folder_whose_repository_holds_another_folders_files_is_refused_with_what_to_run(
        tmp_path: Path, pg_url: str) -> None:
    """With `store_url` in the user's settings, an editor folder named like a repository indexed from another
    folder is not opened on it; the message says what an editor user can do: the command to run in a terminal
    (its settings are the same config.toml) and to restart the server, not a flag of a command they never ran."""
    first, other = _two_folders_named_service(tmp_path)
    ws = Workspace(first, overrides={"embed_provider": "none", "store_url": pg_url})
    ws.index()
    ws.close()
    client = await start_server([other], env={"CODELOUPE_STORE_URL": pg_url})
    try:
        message = await _the_one_error(client, "the refusal")
        _says_what_to_run(message, other, holder=first, then="restart the language server")
        assert await client.status() == []
    finally:
        await stop_server(client)


async def test_a_folder_replaced_as_its_repositorys_source_while_open_says_so_and_what_to_do(
        tmp_path: Path, pg_url: str) -> None:
    """An editor has a folder open on the shared index when another folder replaces it as the repository's
    source (`index --replace` elsewhere): its saves and searches are refused, and the editor is told once, with
    both folders and what to do, and the folder's status says so, rather than a save failing silently and a
    search with a generic engine error."""
    first, other = _two_folders_named_service(tmp_path)
    client = await start_server([first], env={"CODELOUPE_STORE_URL": pg_url})
    try:
        await client.wait_ready()
        assert (await client.request("codeloupe/search", {"query": QUERY}))["core"]
        _made_source(other, pg_url)
        _saved(client, first / "src" / "shop" / "cart.py", "\n\ndef refund_card():\n    return 0\n")

        message = await _the_one_error(client, "the save's refusal shown")
        assert f"{first} is no longer searched or indexed: another folder replaced it" in message, message
        # Open already: it is ready again at its next save once it is the source again (no restart).
        _says_what_to_run(message, first, holder=other, then="save one of its files")
        [folder] = await client.status()
        assert (folder["state"], f"codeloupe: {folder['message']}") == ("error", message), folder
        # A search is refused saying the same (seen a moment late, as every change of the repository is), and the
        # editor is not told again.
        for _ in range(600):  # not a speed check
            try:
                await client.request("codeloupe/search", {"query": QUERY})
            except JsonRpcException as exc:
                assert exc.message == message, exc.message
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("searches were never refused")
        assert _errors(client) == [message]
    finally:
        await stop_server(client)


async def test_a_replaced_folder_made_the_source_again_is_ready_again_at_its_next_save(
        tmp_path: Path, pg_url: str) -> None:
    """Once the user runs what the refusal says (`codeloupe index FOLDER --replace` in a terminal), the folder is
    its repository's source again: its next save is written, and its status no longer says `error`, without a
    restart of the server."""
    first, other = _two_folders_named_service(tmp_path)
    client = await start_server([first], env={"CODELOUPE_STORE_URL": pg_url})
    try:
        await client.wait_ready()
        _made_source(other, pg_url)
        _saved(client, first / "src" / "shop" / "cart.py", "\n")
        message = await _the_one_error(client, "the save's refusal shown")
        assert [f["state"] for f in await client.status()] == ["error"]

        _made_source(first, pg_url)  # what the message says to run in a terminal
        _saved(client, first / "src" / "shop" / "refunds.py", "def zanzibar_refund(order):\n    return order.total\n")
        for _ in range(600):  # not a speed check: until the save is searchable
            try:
                found = await client.request("codeloupe/search", {"query": "zanzibar refund"})
                if "src/shop/refunds.py" in location_paths(found):
                    break
            except JsonRpcException as exc:  # the replace back seen a moment late, as every change is
                assert exc.message == message, exc.message
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the save was never searchable")
        [folder] = await client.status()
        assert (folder["state"], folder["message"]) == ("ready", ""), folder
    finally:
        await stop_server(client)


async def test_a_folder_replaced_again_after_it_was_the_source_again_is_told_again(
        tmp_path: Path, pg_url: str) -> None:
    """The editor is told once per replacement, not once per server: a folder replaced, made the source again
    (ready again at its next save), then replaced a second time had its second refusal shown to no one (the same
    text was shown once already), its saves failing with only the status saying so."""
    first, other = _two_folders_named_service(tmp_path)
    saved = first / "src" / "shop" / "cart.py"
    client = await start_server([first], env={"CODELOUPE_STORE_URL": pg_url})
    try:
        await client.wait_ready()
        _made_source(other, pg_url)
        _saved(client, saved, "\n")
        message = await _the_one_error(client, "the first refusal shown")
        _made_source(first, pg_url)
        for attempt in range(600):  # not a speed check: until a save is written (the replace seen) and says so
            _saved(client, saved, f"\ndef zanzibar_{attempt}():\n    return {attempt}\n")
            await asyncio.sleep(0.1)
            if [f["state"] for f in await client.status()] == ["ready"]:
                break
        else:
            raise AssertionError("the folder never was ready again")

        _made_source(other, pg_url)
        _saved(client, saved, "\n")
        await client.wait_until(lambda: len(_errors(client)) == 2, "the second refusal shown")
        assert _errors(client) == [message, message]
        [folder] = await client.status()
        assert (folder["state"], f"codeloupe: {folder['message']}") == ("error", message), folder
    finally:
        await stop_server(client)


async def test_the_folders_keep_answering_while_the_shared_index_is_unreachable(
        tmp_path: Path, pg_url: str, pg_server: str) -> None:
    """The database of the shared repositories stops taking connections mid-session: a search, `workspace/symbol`
    and `codeloupe/locate` across everything answer from the local folder, a search's notes naming the repositories
    left out and why (no password), rather than failing as a whole with the engine's `cannot connect`."""
    from test_pg_outage import _accept, _end_sessions

    _indexed_then_deleted(tmp_path, pg_url, "billing")
    _indexed_then_deleted(tmp_path, pg_url, "payroll")
    # The local server trusts a unix socket's user: a password in the URL is ignored by it, and must never be shown.
    with_password = pg_url.replace("://postgres:@", "://postgres:hunter2secret@", 1)
    assert with_password != pg_url, pg_url
    project = write_project(tmp_path / "project")
    client = await start_server([project], {"storeUrl": with_password, "repositories": ["billing", "payroll"]})
    try:
        await _search_when_open(client, {"folderUri": "codeloupe-index:///payroll"},
                                "did not open from the shared index")
        both = {"query": "charge the card, check the password"}
        before = await client.request("codeloupe/search", both)
        assert {f["repository"] for f in [*before["core"], *before["related"]]} >= {"billing", "payroll", "project"}
        local = await client.request("codeloupe/search", {**both, "folderUri": uri(project)})
        _end_sessions(pg_server, pg_url, refuse_new=True)
        try:
            during = await client.request("codeloupe/search", both)
            assert location_paths(during) == location_paths(local) != []
            note = during["notes"][0]
            assert note.startswith("not searched: billing, payroll (the shared index cannot be reached now:"), note
            assert "not currently accepting connections" in note and "hunter2secret" not in note, note
            symbols = await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="login"))
            assert symbols and {s.location.uri.split(":", 1)[0] for s in symbols} == {"file"}, symbols
            located = await client.request("codeloupe/locate", {"text": "def handle_login"})
            assert [loc["path"] for loc in located["locations"]] == ["app/web.py"]
            [warned] = [m.message for m in client.messages if m.type == lsp.MessageType.Warning
                        and "not searched" in m.message]  # told once, not at each request
            assert "billing, payroll" in warned and "hunter2secret" not in warned, warned
        finally:
            _accept(pg_server, pg_url)
        after = await client.request("codeloupe/search", both)
        assert {f["repository"] for f in [*after["core"], *after["related"]]} >= {"billing", "payroll"}
    finally:
        await stop_server(client)


async def test_a_repository_the_shared_index_does_not_hold_leaves_the_others_open_and_is_named(
        tmp_path: Path, pg_url: str) -> None:
    """`repositories` naming one the index does not hold (a typo, one not indexed yet) opened none of them: the
    status listed no repository and every search of them was refused. The others open; the unknown one is named
    once with showMessage, and in the status."""
    _indexed_then_deleted(tmp_path, pg_url, "billing")
    _, _, payroll = _indexed_then_deleted(tmp_path, pg_url, "payroll")
    client = await start_server([write_project(tmp_path / "project")],
                                {"storeUrl": pg_url, "repositories": ["billing", "nosuch", "payroll"]})
    try:
        found = await _search_when_open(client, {"folderUri": "codeloupe-index:///payroll"},
                                        "did not open from the shared index")
        assert location_paths(found) == payroll
        message = await _the_one_error(client, "the unknown repository named")
        assert "nosuch: not in the shared index" in message and "billing" in message, message  # what it holds
        status = await client.request("codeloupe/status", {})
        assert [r["repository"] for r in status["repositories"]] == ["billing", "payroll"]
        assert f"codeloupe: {status['repositoriesMessage']}" == message
        assert _errors(client) == [message]
    finally:
        await stop_server(client)


# git as the language server runs it, the real git but for one thing: the first `moves` times it is asked for the
# folder's `status` (an index run asks as it begins, once it has read HEAD), it first moves the folder to another
# commit (an empty commit: what a branch switched or a pull does to HEAD), so the run's check before it writes
# finds the folder at another commit than the one it began at, every time, however loaded the machine.
_MOVING_GIT = """#!/bin/sh
case " $* " in
*" status "*)
    moved=$(cat {count} 2>/dev/null || echo 0)
    if [ "$moved" -lt {moves} ]; then
        echo $((moved + 1)) > {count}
        {git} -C {root} -c user.name=t -c user.email=t@t -c commit.gpgsign=false commit -q --allow-empty -m moved
    fi;;
esac
exec {git} "$@"
"""


async def _indexed_while_its_folder_moves(tmp_path: Path, pg_url: str, moves: int) -> tuple[Client, Path, Path]:
    """The editor open on a git checkout with the shared index in the user's settings, its first index read while
    the folder moves to another commit, `moves` times at most: (client, folder, the file counting the moves)."""
    root, count, bin_dir = tmp_path / "svc", tmp_path / "moves", tmp_path / "bin"
    shutil.copytree(FIXTURES, root)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "fixture"], check=True)
    real_git = shutil.which("git")
    assert real_git is not None, "these tests need git, as CI has it"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(_MOVING_GIT.format(count=count, moves=moves, root=root, git=real_git))
    (bin_dir / "git").chmod(0o755)
    client = await start_server([root], env={"CODELOUPE_STORE_URL": pg_url,
                                             "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    return client, root, count


async def test_a_folder_moved_to_another_commit_while_the_editor_indexes_it_is_indexed_at_the_new_commit(
        tmp_path: Path, pg_url: str) -> None:
    """A branch switched while the editor's first index of a folder on the shared index ran: the run stops, as it
    must (nothing read after the move is cited at the old commit), and the editor showed "indexing failed: ...
    moved from commit ..." with the folder in `error`, half of it never written, until the user asked for a
    re-index. The folder is now indexed again at its new commit, and the user is shown nothing."""
    client, root, count = await _indexed_while_its_folder_moves(tmp_path, pg_url, moves=1)
    try:
        [folder] = await client.wait_ready()
        assert folder["state"] == "ready", folder
        assert count.read_text().strip() == "1"  # the first run did see the folder move
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()
        [repository] = shared_repositories(pg_url)
        assert (repository.commit, repository.indexing) == (head, ""), repository
        assert repository.files == len([p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts])
        assert _errors(client) == []
        assert (await client.request("codeloupe/search", {"query": QUERY}))["core"]
    finally:
        await stop_server(client)


async def test_a_folder_whose_commit_keeps_moving_while_the_editor_indexes_it_is_said_to_have_failed(
        tmp_path: Path, pg_url: str) -> None:
    """Indexed again at each move, a folder whose HEAD never rests would be indexed for ever: after three runs in a
    row stopped by a move, the fourth's failure is shown, as before."""
    client, _, count = await _indexed_while_its_folder_moves(tmp_path, pg_url, moves=99)
    try:
        message = await _the_one_error(client, "the failure shown")
        assert "moved from commit" in message, message
        [folder] = await client.status()
        assert folder["state"] == "error", folder
        assert count.read_text().strip() == "4"
    finally:
        await stop_server(client)
