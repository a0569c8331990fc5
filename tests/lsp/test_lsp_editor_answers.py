"""What the editors render (issue 14): empty settings, hop direction, files not in the graph, the anchor's symbol,
and searches that arrive before the first index."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from lsp_helpers import CAPABILITIES, Client, make_client, start_server, stop_server, uri, write_project
from lsprotocol import types as lsp


async def test_empty_settings_from_a_lua_client_are_no_settings(project: Path) -> None:
    """Neovim encodes an empty Lua table as `[]`: the server must not warn about it (each warning is a
    hit-enter prompt in Neovim)."""
    client = make_client()
    await client.start_io(sys.executable, "-m", "codeloupe_lsp",
                          env={**os.environ, "CODELOUPE_EMBED_PROVIDER": "none"})
    try:
        await client.initialize_session(lsp.InitializeParams(
            capabilities=CAPABILITIES, process_id=os.getpid(), initialization_options=[],
            workspace_folders=[lsp.WorkspaceFolder(uri=uri(project), name=project.name)]))
        await client.wait_ready()
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"codeloupe": []}))
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=[]))
        await client.wait_ready()  # answered after both notifications were handled
        assert [m.message for m in client.messages] == []
    finally:
        await stop_server(client)


async def test_a_hop_against_the_dependency_says_used_by_and_names_the_using_file(client: Client,
                                                                                  project: Path) -> None:
    route = await client.request("codeloupe/graph", {"mode": "path", "from": "app/store.py", "to": "app/auth.py"})
    assert route["found"] is True
    (hop,) = route["hops"]
    assert (hop["source"], hop["target"], hop["direction"]) == ("app/store.py", "app/auth.py", "used-by")
    # The use is in the file that uses the carrier (auth.py imports load_user), at a line that exists there.
    assert hop["use"]["uri"] == uri(project / "app/auth.py")
    use_line = hop["use"]["range"]["start"]["line"]
    assert "load_user" in (project / "app/auth.py").read_text().splitlines()[use_line]
    assert hop["definition"]["uri"] == uri(project / "app/store.py")
    assert route["meetsInMiddle"] is False
    assert "app/auth.py reaches app/store.py" in route["note"]


async def test_graph_node_of_a_file_outside_the_graph_says_so_and_offers_names(client: Client) -> None:
    readme = await client.request("codeloupe/graph", {"mode": "node", "node": "docs/guide.md"})
    assert readme["found"] is False and readme["node"] == "docs/guide.md"
    assert "not in the graph" in readme["message"] and "not a code file" in readme["message"]

    typo = await client.request("codeloupe/graph", {"mode": "node", "node": "app/auths.py"})
    assert typo["found"] is False and "no such file" in typo["message"]
    assert typo["suggestions"][0]["path"] == "app/auth.py"

    route = await client.request("codeloupe/graph", {"mode": "path", "from": "app/web.py", "to": "app/stor.py"})
    assert route["found"] is False and "app/stor.py is not in the graph" in route["note"]
    assert "app/store.py" in route["note"]

    # A concept is still resolved to the closest file, and a real node says found.
    concept = await client.request("codeloupe/graph", {"mode": "node", "node": "user store"})
    assert concept["found"] is True and concept["path"] == "app/store.py"
    assert concept["communityName"]


async def test_graph_map_lists_unconnected_files_once(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", {
        "pkg/a.py": "from pkg.b import helper\n\n\ndef run():\n    return helper()\n",
        "pkg/b.py": "def helper():\n    return 1\n",
        "pkg/lonely.py": "def alone():\n    return 2\n",
    })
    client = await start_server([project])
    try:
        await client.wait_ready()
        graph = await client.request("codeloupe/graph", {"mode": "map"})
        assert graph["unconnected"] == ["pkg/lonely.py"]
        assert [sorted(c["members"]) for c in graph["communities"]] == [["pkg/a.py", "pkg/b.py"]]
        names = {n["path"]: n["communityName"] for n in graph["nodes"]}
        assert names["pkg/a.py"] == graph["communities"][0]["name"]
    finally:
        await stop_server(client)


async def test_results_name_the_symbol_holding_the_match(tmp_path: Path) -> None:
    body = "\n".join(f"    value_{k} = {k}" for k in range(30))
    project = write_project(tmp_path / "p", {
        "mod.py": f"def first():\n{body}\n    return 0\n\n\ndef second():\n    return 'quetzalcoatl feathers'\n",
    })
    client = await start_server([project])
    try:
        await client.wait_ready()
        result = await client.request("codeloupe/search", {"query": "quetzalcoatl feathers"})
        chunk = next(c for c in result["core"][0]["chunks"] if "quetzalcoatl" in c["text"])
        lines = (project / "mod.py").read_text().splitlines()
        assert "quetzalcoatl" in lines[chunk["snippet"]["anchorLine"]]
        assert chunk["snippet"]["anchorSymbol"] == "second"
    finally:
        await stop_server(client)


async def test_a_search_before_the_first_index_waits_for_it(tmp_path: Path) -> None:
    files = {f"pkg/mod{k}.py": f"def helper_{k}():\n    return {k}\n" for k in range(200)}
    files["pkg/target.py"] = "def zanzibar_ledger():\n    return 'zanzibar'\n"
    project = write_project(tmp_path / "p", files)
    client = await start_server([project])
    try:
        result = await client.request("codeloupe/search", {"query": "zanzibar ledger"})
        assert result["core"] and result["core"][0]["path"] == "pkg/target.py"
    finally:
        await stop_server(client)


def _outside_code_spans(markdown: str) -> str:
    """The markdown with code spans, fenced blocks and link targets removed: what a renderer parses as prose."""
    markdown = re.sub(r"```.*?```", "", markdown, flags=re.S)
    markdown = re.sub(r"`[^`]*`", "", markdown)
    return re.sub(r"\]\([^)]*\)", "]", markdown)


async def test_markdown_the_server_builds_keeps_underscored_names(tmp_path: Path) -> None:
    """`__init__` and `_private` were rendered as bold/italic (`**init**`) in hovers and the ask fallback."""
    project = write_project(tmp_path / "p", {
        "pkg/__init__.py": '''
            """The package."""


            def _private_helper(value):
                """Double a value for __init__ callers."""
                return value * 2
            ''',
        "pkg/use_it.py": "from pkg import _private_helper\n\n\ndef run_twice():\n    return _private_helper(2)\n",
    })
    client = await start_server([project])
    try:
        await client.wait_ready()
        init = project / "pkg/__init__.py"
        hovers = []
        for line0 in (0, 3):
            result = await client.text_document_hover_async(lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri(init)), position=lsp.Position(line=line0, character=4)))
            hovers.append(result.contents.value)
        assert "`pkg/__init__.py`" in hovers[0]
        # The doc line a code span too: Neovim's float shows backslash escapes as written.
        assert hovers[1].startswith("`def _private_helper(value)`\n\n`Double a value for __init__ callers.`")
        answer = (await client.request("codeloupe/ask", {"query": "private helper doubles a value"}))["answer"]
        assert "`pkg/__init__.py`" in answer
        for markdown in (*hovers, answer):
            prose = _outside_code_spans(markdown)
            assert not re.search(r"(?<!\\)_", prose.replace("_No walkthrough", "").replace("files for_", "")), prose
    finally:
        await stop_server(client)


async def test_a_query_with_no_match_says_so(client: Client) -> None:
    found = await client.request("codeloupe/search", {"query": "hash password"})
    assert found["core"] and found["notes"] == []
    nothing = await client.request("codeloupe/search", {"query": "xylophone quasar"})
    assert nothing["notes"] == ["nothing in the workspace matches the query"]
    assert not nothing["core"]


async def test_every_view_counts_files_and_chunks_the_same(tmp_path: Path) -> None:
    """Progress, status and reindex said 257 / 256 files: a file found and then skipped was counted by one."""
    project = write_project(tmp_path / "p", {"a.py": "def one():\n    return 1\n", "b.py": "def two():\n    return 2\n"})
    (project / "blob.py").write_bytes(b"x = 1\n" + b"\x00" * 64)
    client = await start_server([project])
    try:
        (folder,) = await client.wait_ready()
        reindexed = await client.command("codeloupe.reindex")
        await client.wait_until(lambda: sum(r.kind == "end" for rs in client.progress_reports.values()
                                            for r in rs) >= 2, "the reindex progress to end")
        (folder,) = await client.status()
        ends = [r.message for rs in client.progress_reports.values() for r in rs if r.kind == "end"]
        assert reindexed == {"files": folder["files"], "chunks": folder["chunks"]}
        assert ends[-1] == f"{folder['files']} files, {folder['chunks']} chunks"
    finally:
        await stop_server(client)


# A repository's names and docs, each trying another piece of markdown: an image (fetched as the hover shows), a
# command link, raw HTML, emphasis, an entity, a list, a bidi override; a file name with line breaks that would end
# its code span and have the rest read as markdown; a folder (the files' community) with a bidi override.
_HOSTILE_DOC = ("1. Leak ![i](http:evil.example/d.png) <img src=x> [run](command:workbench.action.terminal.new) "
                "&#x202e; *em* `tick` ~~gone~~ \u202eright-to-left")
_HOSTILE_FOLDER = "pk\u202eg"
_HOSTILE_NAME = f"{_HOSTILE_FOLDER}/x\n\n![p](http:evil.example?p)\n# heading.py"


def _rendered(markdown: str) -> tuple[list[str], str]:
    """The node types a CommonMark renderer (with GitHub's tables and strikethrough) makes of `markdown` (a link
    with its target), and the text it shows, a line per block."""
    from markdown_it import MarkdownIt

    kinds, lines = [], []
    for token in MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown):
        children = token.children or []
        kinds += [node.type if node.type != "link_open" else f"link {node.attrs['href']}" for node in [token, *children]]
        if token.type == "inline":
            lines.append("".join(child.content for child in children if child.type in ("text", "code_inline")))
    return kinds, "\n".join(lines)


async def test_hovers_show_a_repositorys_names_and_docs_as_text_never_as_markdown(tmp_path: Path) -> None:
    """Hovers read a repository's file names, signatures and doc lines as markdown: a doc line or a name could show
    an image (a request to any host as soon as the hover opens), a link to a command, raw HTML, emphasis, a list,
    and a bidi override reordered it. Each is shown as written, escaped as the CLI shows it."""
    project = write_project(tmp_path / "p", {
        f"{_HOSTILE_FOLDER}/core.py": f'''
            """Core."""


            def helper(value="\u202e<img src=y>"):
                """{_HOSTILE_DOC}"""
                return value
            ''',
        _HOSTILE_NAME: "from .core import helper\n\n\ndef use():\n    return helper()\n",
    })
    client = await start_server([project])
    try:
        await client.wait_ready()
        core = uri(project / _HOSTILE_FOLDER / "core.py")
        hovers = []
        for document, line0 in ((core, 0), (core, 3), (uri(project / _HOSTILE_NAME), 0)):
            result = await client.text_document_hover_async(lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=document), position=lsp.Position(line=line0, character=4)))
            hovers.append(result.contents.value)
        lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(
            text_document=lsp.TextDocumentIdentifier(uri=core)))
        titles = [(await client.code_lens_resolve_async(lens)).command.title for lens in lenses]
    finally:
        await stop_server(client)
    shown_name = "pk\\u202eg/x\\n\\n![p](http:evil.example?p)\\n# heading.py"
    for markdown in hovers:
        kinds, text = _rendered(markdown)
        assert "\u202e" not in markdown, markdown
        made = [kind for kind in kinds if kind.split()[0] in ("image", "html_inline", "html_block", "em_open",
                                                               "strong_open", "s_open", "heading_open",
                                                               "ordered_list_open", "code_block", "fence")]
        links = [kind.split()[1] for kind in kinds if kind.startswith("link ")]
        assert made == [] and all(link.startswith(f"{uri(project)}/") for link in links), (kinds, markdown)
        assert shown_name in text, text
    file_hover, definition_hover, importer_hover = (_rendered(markdown)[1] for markdown in hovers)
    assert "community pk\\u202eg" in file_hover
    assert 'def helper(value="\\u202e<img src=y>")' in definition_hover
    assert _HOSTILE_DOC.replace("\u202e", "\\u202e") in definition_hover, definition_hover
    assert titles == ["pk\\u202eg · 0 imports · 1 importers", "used in 1 file"]
