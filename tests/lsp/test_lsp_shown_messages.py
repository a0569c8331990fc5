"""The real server over stdio: what it tells a person (window/showMessage, an error response's message) quotes the
repository's file names escaped, one line, as the CLI prints them. Neovim shows both with vim.notify: a bidi override
in a name reordered the message, an escape sequence drove a terminal's screen, and a newline forged a line."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lsp_helpers import RawServer, expect_error, start_server, stop_server, uri, write_project

from codeloupe.types import CONTROL_CHARACTERS, one_line, visible, visible_lines

# A name that reads "gpj.py" as "yp.jpg" in a bidi-aware view, clears the screen and colours what follows in a
# terminal, and starts a line of its own.
HOSTILE_NAME = "invoice\u202egpj\x1b[2J\x1b[31m\nforged line"


def _raw(text: str) -> bool:
    return bool(CONTROL_CHARACTERS.search(text)) or "\n" in text


async def _asked(root: Path, query: str) -> dict:
    """`codeloupe/ask` of `query` from a server open on `root` once indexed (no chat model: its plain answer)."""
    client = await start_server([root])
    try:
        await client.wait_ready()
        return await client.request("codeloupe/ask", {"query": query})
    finally:
        await stop_server(client)


async def test_a_warning_quoting_a_strategy_files_name_shows_it_escaped(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    strategy = repo / ".codeloupe" / "strategies" / f"{HOSTILE_NAME}.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text("EXTENSIONS = ('.zog',)\n")
    (repo / "a.zog").write_text("rule a\n")
    client = await start_server([repo])
    try:
        await client.wait_ready()
        [warning] = [m.message for m in client.messages if "not loading the chunk strategy" in m.message]
        assert not _raw(warning), warning
        assert one_line(str(strategy)) in warning  # "invoice\u202egpj\x1b[2J\x1b[31m\nforged line.py", as typed
    finally:
        await stop_server(client)


async def test_an_error_naming_a_file_of_the_repository_shows_it_escaped(tmp_path: Path) -> None:
    root = write_project(tmp_path / "project", {"app/main.py": "def main():\n    return 1\n",
                                                f"app/{HOSTILE_NAME}.py": "def total():\n    return 2\n"})
    client = await start_server([root])
    try:
        await client.wait_ready()
        gone = root / "app" / f"{HOSTILE_NAME}.py"
        gone.unlink()  # deleted after the index named it (a search result the user then opens)
        message = await expect_error(client.request("codeloupe/expand", {"uri": uri(gone)}), -32602)
        assert "no such file" in message and not _raw(message), message
        assert one_line(HOSTILE_NAME) in message
    finally:
        await stop_server(client)


def test_the_servers_log_names_the_file_escaped(tmp_path: Path) -> None:
    """The stderr log (VS Code's output panel, Neovim's lsp.log read with `tail`) repeated each warning raw, as
    the CLI's stderr did before it escaped its log."""
    repo = tmp_path / "repo"
    strategy = repo / ".codeloupe" / "strategies" / f"{HOSTILE_NAME}.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text("EXTENSIONS = ('.zog',)\n")
    errlog = tmp_path / "stderr.txt"
    server = RawServer(errlog)
    try:
        server.initialize([repo])
        while server.messages.get(timeout=120).get("method") != "window/showMessage":
            pass  # the warning is logged as it is sent
    finally:
        server.close()
    log = errlog.read_text(encoding="utf-8")  # a log keeps its line breaks (a traceback's), as the CLI's does
    assert visible(str(strategy)) in log and not CONTROL_CHARACTERS.search(log), log


async def test_an_answers_markdown_shows_code_as_the_cli_does(tmp_path: Path) -> None:
    """`codeloupe/ask`'s `answer` (the engine's, and the server's own when the engine's ask cannot run) fenced the
    code raw: a bidi override made a line read otherwise than it runs, an escape sequence drove a terminal. Its
    lines are shown as the CLI shows them; `parts` and `bundle` keep the bytes."""
    from codeloupe_lsp.convert import fallback_answer

    code = 'def grant_admin(user):\n    access = "user"  # \u202e } \u2066if user.is_admin:\u2069\n    return "\x1b[2J"\n'
    result = await _asked(write_project(tmp_path / "project", {"app/perm.py": code}), "where is grant_admin")
    assert result["fallback"] == "no chat model configured"
    assert [p["text"] for p in result["parts"] if p["kind"] == "code"] == [code]
    assert result["bundle"]["core"][0]["chunks"][0]["text"] == code
    for answer in (result["answer"], fallback_answer(result["bundle"], "the ask failed")["answer"]):
        assert not _raw(answer.replace("\n", "")), answer
        assert "\n".join(visible_lines(code)) in answer, answer


async def test_the_indexing_progress_names_the_folder_escaped(tmp_path: Path) -> None:
    # The title of the indexing progress named the folder raw: VS Code shows it in the status bar, Neovim's
    # progress handlers with vim.notify or in the status line.
    root = write_project(tmp_path / HOSTILE_NAME, {"app/main.py": "def main():\n    return 1\n"})
    client = await start_server([root])
    try:
        await client.wait_ready()
        titles = [r.title for token, reports in client.progress_reports.items() if token != "ask"
                  for r in reports if r.kind == "begin"]
    finally:
        await stop_server(client)
    assert titles and all(not _raw(title) for title in titles), titles
    assert f"codeloupe: indexing {one_line(HOSTILE_NAME)}" in titles


async def test_the_status_names_the_folder_and_the_shared_index_escaped(tmp_path: Path) -> None:
    """`codeloupe/status` gave the folder's root, its index file (named after the folder) and why the shared index's
    repositories are not open raw: Neovim's `:Codeloupe status` joins them into the lines it shows, VS Code's status
    bar tooltip and index view show them, so a newline in a clone's folder name forged a line of the status, a bidi
    override reordered it and an escape sequence reached a terminal. Every text of it is one_line'd, but its URIs."""
    from urllib.parse import quote

    root = write_project(tmp_path / f"{HOSTILE_NAME}](http:x)")
    socket_folder = Path("/nonexistent/db\u202e\x1b[31m")  # quoted by the database's error: no server there
    store = f"postgresql://postgres@/review?host={quote(str(socket_folder), safe='/')}"
    client = await start_server([root], {"storeUrl": store, "repositories": ["billing"]})
    try:
        await client.wait_ready()
        # The repositories are opened beside the folder's index: their failure is said once that open gave up.
        deadline = time.monotonic() + 60
        while not (status := await client.request("codeloupe/status", {}))["repositoriesMessage"]:
            assert time.monotonic() < deadline, status
            await asyncio.sleep(0.05)
    finally:
        await stop_server(client)
    [folder] = status["folders"]
    assert folder["uri"] == uri(root)  # a client matches it to its folder: a URI, not a name shown
    assert folder["root"] == one_line(str(root)), folder
    assert one_line(root.name) in folder["indexPath"], folder
    assert one_line(str(socket_folder)) in status["repositoriesMessage"], status
    shown = [folder["root"], folder["indexPath"], folder["message"], status["repositoriesMessage"]]
    assert not [text for text in shown if _raw(text)], shown


async def test_the_servers_own_plain_answer_names_a_file_in_a_why_on_one_line(tmp_path: Path) -> None:
    """When the engine's ask cannot run, the server answers with the bundle as markdown: a RELATED file's why, a
    callee's `called from PATH`, was shown with the path's line break in it, which markdown reads as a space (`called
    from app/quoll gate.py`, another file), as the engine's own plain answer did before it named it on one line."""
    from codeloupe_lsp.convert import fallback_answer

    name = "app/quoll\ngate.py"
    root = write_project(tmp_path / "project", {
        "app/__init__.py": "", "app/hinge.py": "def swing_hinge(visitor):\n    return visitor\n",
        name: "from app.hinge import swing_hinge\n\n\ndef open_quoll_gate(visitor):\n    return swing_hinge(visitor)\n"})
    result = await _asked(root, "open_quoll_gate")
    [hinge] = [file for file in result["bundle"]["related"] if file["path"] == "app/hinge.py"]
    assert hinge["why"] == f"swing_hinge called from {name}"
    shown = one_line(name).replace("\\", "\\\\")  # its backslash escaped as markdown: `app/quoll\\ngate.py`
    for answer in (result["answer"], fallback_answer(result["bundle"], "the ask failed")["answer"]):
        assert f"called from {shown}" in answer.replace("\\_", "_"), answer
