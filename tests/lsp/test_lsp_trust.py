"""The real server over stdio on a hostile repository: it learns trust from the client, and keys stay home.

The repository's settings point embeddings and the chat model at a `ChatServer` on 127.0.0.1 (the
repository's host, recording every request); the user's config points at another one, and the editor supplies the user's keys.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lsp_helpers import Client, start_server, stop_server, uri
from lsprotocol import types as lsp

from chat_server import ChatServer
from codeloupe.trust import user_config_dir
from hostile import MARKER, hostile_repo, write_user_config

EDITOR_CHAT_KEY = "editor-chat-secret"
EDITOR_EMBED_KEY = "editor-embed-secret"
# The editor's settings: the user's keys, and no embedProvider (the helpers' default "none" would hide the
# repository's provider choice).
EDITOR = {"embedProvider": None, "chatApiKey": EDITOR_CHAT_KEY, "embedApiKey": EDITOR_EMBED_KEY}


def _warnings(client: Client) -> list[str]:
    return [m.message for m in client.messages if m.type == lsp.MessageType.Warning]


async def _search_and_ask(client: Client) -> None:
    await client.wait_ready()
    await client.request("codeloupe/search", {"query": MARKER})
    answer = await client.request("codeloupe/ask", {"query": f"what does {MARKER} do?"})
    assert answer["fallback"], answer  # both hosts only record: the answer is the bundle


def _trust(repo: Path, *flags: str) -> None:
    """`codeloupe trust` run in a terminal: the real CLI, on the same user config dir as the server."""
    subprocess.run([sys.executable, "-m", "codeloupe", "trust", *flags, str(repo)], check=True, capture_output=True,
                   env=dict(os.environ))


async def _folder_when(client: Client, trusted: bool, provider: str) -> dict[str, Any]:
    """The only folder's status, once it says `trusted` and embeds with `provider`."""
    folders: list[dict[str, Any]] = []
    for _ in range(1200):  # not a speed check: the server re-reads the trust store about once a second
        folders = await client.status()
        if len(folders) == 1 and folders[0]["trusted"] is trusted and folders[0]["provider"] == provider:
            return folders[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"the folder never became trusted={trusted} on {provider}: {folders}")


def _repo_embedding_with(repo: Path, base_url: str, model: str) -> Path:
    """A repository whose `.codeloupe.toml` chooses an embedding endpoint (which only trust lets it choose)."""
    (repo / "app").mkdir(parents=True, exist_ok=True)
    (repo / "app" / "ledger.py").write_text("def post_entry(amount):\n    return amount\n", encoding="utf-8")
    settings_file = repo / ".codeloupe.toml"
    settings_file.write_text(f'embed_provider = "openai"\nembed_base_url = "{base_url}"\nembed_model = "{model}"\n',
                             encoding="utf-8")
    user_config = user_config_dir() / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text('embed_provider = "none"\n', encoding="utf-8")
    return settings_file


async def test_an_untrusted_folder_sends_nothing_to_the_repositorys_host(tmp_path: Path) -> None:
    with ChatServer() as repo_host, ChatServer() as user_host:
        repo = hostile_repo(tmp_path / "repo", repo_host.base_url)
        write_user_config(user_host.base_url)
        client = await start_server([repo], options=EDITOR)
        try:
            await _search_and_ask(client)
            await client.wait_until(lambda: any(p.endswith("/embeddings") for p in user_host.received_paths()),
                                    "embeddings on the user's own endpoint")
            warnings = [w for w in _warnings(client) if "ignoring settings" in w]
            assert len(warnings) == 1 and "embed_base_url" in warnings[0] and "chat_base_url" in warnings[0]
            assert f"codeloupe trust {repo.resolve()}" in warnings[0]
        finally:
            await stop_server(client)
        assert repo_host.received == [], repo_host.everything()
        assert all(seen.authorization == f"Bearer {EDITOR_EMBED_KEY}" for seen in user_host.received
                   if seen.path.endswith("/embeddings"))


async def test_a_folder_the_client_trusts_uses_its_settings_without_the_editors_keys(tmp_path: Path) -> None:
    with ChatServer() as repo_host, ChatServer() as user_host:
        repo = hostile_repo(tmp_path / "repo", repo_host.base_url)
        write_user_config(user_host.base_url)
        client = await start_server([repo], options={**EDITOR, "trusted": True})
        try:
            await _search_and_ask(client)
            await client.wait_until(lambda: any(p.endswith("/embeddings") for p in repo_host.received_paths()),
                                    "embeddings on the repository's endpoint")
            assert not [w for w in _warnings(client) if "ignoring settings" in w]
        finally:
            await stop_server(client)
        assert any(p.endswith("/chat/completions") for p in repo_host.received_paths())
        leaked = repo_host.everything()
        assert EDITOR_CHAT_KEY not in leaked and EDITOR_EMBED_KEY not in leaked
        # The editor's embedApiKey outranks the repository's embed_api_key and is the user's: the repository's
        # endpoint (loopback here) is sent no key at all.
        assert {seen.authorization for seen in repo_host.received} == {"Bearer unused-for-loopback",
                                                                       "Bearer no-key-needed-for-loopback"}
        assert user_host.received == []


async def test_a_trusted_folder_says_which_endpoints_its_own_settings_chose(tmp_path: Path) -> None:
    """Trusting a folder (in VS Code also what turns its extensions on) applied the endpoints its settings files
    chose with no word, and its code went to their host. The editor is now told once which setting sends it where,
    from which file; a folder whose endpoints are the user's own (their config.toml) is not announced."""
    with ChatServer() as repo_host, ChatServer() as user_host:
        repo = hostile_repo(tmp_path / "repo", repo_host.base_url)
        own = tmp_path / "own"
        own.mkdir()
        (own / "app.py").write_text("def post_entry(amount):\n    return amount\n", encoding="utf-8")
        (own / ".codeloupe.toml").write_text('ignore = ["vendor/**"]\n', encoding="utf-8")
        write_user_config(user_host.base_url)
        client = await start_server([repo, own], options={**EDITOR, "trusted": True})
        try:
            await client.wait_ready(2)
            await client.wait_until(lambda: any("endpoints they chose" in w for w in _warnings(client)), "the notice")
            client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"codeloupe": {
                **EDITOR, "ignore": ["vendor/**"], "bogus": 1}}))  # both folders reopen
            await client.wait_until(lambda: any("bogus" in w for w in _warnings(client)), "the settings push")
            await client.wait_ready(2)
        finally:
            await stop_server(client)
        (notice,) = [w for w in _warnings(client) if "endpoints they chose" in w]
        host, pyproject = urlsplit(repo_host.base_url).netloc, f"{repo.resolve() / 'pyproject.toml'} [tool.codeloupe]"
        assert f"embeddings to {host} (embed_provider in {pyproject}, embed_base_url in {pyproject})" in notice, notice
        assert f"chat to {host} (chat_base_url in {pyproject})" in notice, notice
        assert str(own.resolve()) not in notice and urlsplit(user_host.base_url).netloc not in notice, notice


async def test_trust_is_fixed_at_initialize_and_the_warning_is_not_repeated(tmp_path: Path) -> None:
    """A settings push cannot grant trust; a malformed decision is reported and means untrusted; reopening the
    folder on new settings does not repeat its warning."""
    with ChatServer() as repo_host:
        repo = hostile_repo(tmp_path / "repo", repo_host.base_url)
        client = await start_server([repo], options={"trusted": "yes"})
        try:
            (folder,) = await client.wait_ready()
            assert any("`trusted` must be true or false" in w for w in _warnings(client))
            client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"codeloupe": {
                "embedProvider": "none", "trusted": True, "ignore": ["app.py"], "bogus": 1}}))
            await client.wait_until(lambda: any("bogus" in w for w in _warnings(client)), "the settings push")

            async def reopened() -> bool:
                return (await client.wait_ready())[0]["files"] < folder["files"]

            while not await reopened():
                pass
            assert len([w for w in _warnings(client) if "ignoring settings" in w]) == 1
            answer = await client.request("codeloupe/ask", {"query": f"what does {MARKER} do?"})
            assert answer["fallback"] == "no chat model configured"
        finally:
            await stop_server(client)
        assert repo_host.received == []


async def test_a_later_codeloupe_trust_and_revoke_reach_the_running_server(tmp_path: Path) -> None:
    """`codeloupe trust` run in a terminal while the editor is open: the folder reopens on its own settings (here an
    embedding endpoint, which only trust lets a workspace choose) and says `trusted`; `--revoke` takes both back.
    Until then nothing goes to the repository's host."""
    with ChatServer() as repo_host:
        repo = tmp_path / "repo"
        _repo_embedding_with(repo, repo_host.base_url, "exfil")
        client = await start_server([repo], options={"embedProvider": None})
        try:
            await client.wait_ready()
            await _folder_when(client, False, "none")
            assert (await client.request("codeloupe/search", {"query": "post entry"}))["core"]
            assert repo_host.received == []
            _trust(repo)
            trusted = await _folder_when(client, True, "openai")
            assert trusted["model"].endswith("/exfil@native"), trusted
            await client.wait_until(lambda: any(p.endswith("/embeddings") for p in repo_host.received_paths()),
                                    "embeddings on the endpoint the trusted folder chose")
            _trust(repo, "--revoke")
            await _folder_when(client, False, "none")
        finally:
            await stop_server(client)


async def test_a_trusted_settings_file_changed_in_the_running_editor_is_trusted_no_more(tmp_path: Path) -> None:
    """A folder trusted with `codeloupe trust` whose `.codeloupe.toml` then changes (a pull, an edit) while the
    editor runs: re-read on the watched-file change, the new file is not the one trusted, so its endpoint and model
    are ignored and the folder reopens on the user's settings; the new model never reaches the repository's
    host."""
    with ChatServer() as repo_host:
        repo = tmp_path / "repo"
        settings_file = _repo_embedding_with(repo, repo_host.base_url, "exfil")
        _trust(repo)
        client = await start_server([repo], options={"embedProvider": None})
        try:
            await client.wait_ready()
            await _folder_when(client, True, "openai")
            settings_file.write_text(settings_file.read_text(encoding="utf-8").replace('"exfil"', '"exfil-more"'),
                                     encoding="utf-8")
            client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(
                uri=uri(settings_file), type=lsp.FileChangeType.Changed)]))
            await _folder_when(client, False, "none")
            await client.wait_until(lambda: any("changed since you trusted it" in w and "embed_model" in w
                                                for w in _warnings(client)), "the ignored settings' warning")
        finally:
            await stop_server(client)
        assert "exfil-more" not in repo_host.everything()


async def test_the_editors_trust_covers_only_the_settings_file_it_trusted(tmp_path: Path) -> None:
    """The editor trusted the folder's `.codeloupe.toml` as it was at start (Neovim asks about its exact content);
    a pull that then points `embed_base_url` at another host is not covered by that trust: the folder reopens on
    the user's settings with one warning saying why and how to trust it again, and the new host is sent nothing.
    The content the editor trusted is trusted again; a file left with only keys any repository may set applies
    with no warning."""
    with ChatServer() as repo_host, ChatServer() as new_host:
        repo = tmp_path / "repo"
        settings_file = _repo_embedding_with(repo, repo_host.base_url, "trusted-model")
        trusted_text = settings_file.read_text(encoding="utf-8")
        client = await start_server([repo], options={"embedProvider": None, "trusted": True})

        async def changed(text: str, trusted: bool, provider: str) -> None:
            settings_file.write_text(text, encoding="utf-8")
            client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(
                uri=uri(settings_file), type=lsp.FileChangeType.Changed)]))
            await _folder_when(client, trusted, provider)

        try:
            await client.wait_ready()
            await _folder_when(client, True, "openai")
            await changed(trusted_text.replace(repo_host.base_url, new_host.base_url), False, "none")
            (warning,) = [w for w in _warnings(client) if "ignoring settings" in w]
            assert "changed since your editor trusted them" in warning and "embed_base_url" in warning, warning
            assert "restart your editor" in warning and f"codeloupe trust {repo.resolve()}" in warning, warning
            await changed(trusted_text, True, "openai")  # back to what the editor trusted
            await client.wait_until(lambda: any(p.endswith("/embeddings") for p in repo_host.received_paths()),
                                    "embeddings on the endpoint the editor trusted")
            shown = len(_warnings(client))
            await changed('ignore = ["app/**"]\n', False, "none")
            # `ignore` applied: once the reopened folder's index has dropped the file (its status turns before that)
            for _ in range(600):
                core = (await client.request("codeloupe/search", {"query": "post entry"}))["core"]
                if not core:
                    break
                await asyncio.sleep(0.05)
            assert not core, core
            assert len(_warnings(client)) == shown, _warnings(client)[shown:]
        finally:
            await stop_server(client)
        assert new_host.received == [], new_host.everything()


async def test_a_folder_whose_settings_file_has_a_typo_opens_and_the_editor_is_told(tmp_path: Path) -> None:
    """A typo (or a newer codeloupe's setting) in a repository's .codeloupe.toml left its folder unopened; a key only
    the user may set was said on the server's stderr alone. Each is now a warning in the editor, and the rest of
    the file applies."""
    repo = tmp_path / "repo"
    (repo / "vendor").mkdir(parents=True)
    (repo / "app.py").write_text("def post_entry(amount):\n    return amount\n", encoding="utf-8")
    (repo / "vendor" / "copy.py").write_text("def post_entry_vendored(amount):\n    return 0\n", encoding="utf-8")
    (repo / ".codeloupe.toml").write_text('ignore = ["vendor/**"]\nchunk_budgett = 900\nmax_line_chars = 5\n'
                                          'store_url = "postgresql://db.example/x"\n', encoding="utf-8")
    file = repo.resolve() / ".codeloupe.toml"
    client = await start_server([repo])
    try:
        await client.wait_ready()
        answer = await client.request("codeloupe/search", {"query": "post_entry_vendored"})
        assert "vendor/copy.py" not in str(answer) and "app.py" in str(answer)  # the file's `ignore` applied
        assert sorted(w for w in _warnings(client) if str(file) in w) == [
            f"codeloupe: ignoring store_url in {file}: only your own settings may set them",
            f"codeloupe: setting 'max_line_chars' from {file}: 5 is outside 100..1000000; ignored",
            f"codeloupe: unknown setting 'chunk_budgett' in {file} (did you mean 'chunk_budget'?); ignored",
        ]
    finally:
        await stop_server(client)


async def test_the_status_names_the_files_that_hold_the_folders_own_settings(tmp_path: Path) -> None:
    """Neovim told "no workspace settings" from its own reading of the files, which the server's differed from: a
    `[tool."codeloupe"]` table it did not see (the server ignored its keys, untrusted, while the editor said there
    was nothing to trust). The status now says which files hold settings, as the server reads them: none in a
    comment-only .codeloupe.toml or a pyproject.toml without the table."""
    empty, held = tmp_path / "empty", tmp_path / "held"
    for root in (empty, held):
        root.mkdir()
        (root / "app.py").write_text("def post_entry(amount):\n    return amount\n", encoding="utf-8")
    (empty / ".codeloupe.toml").write_text("# codeloupe settings (the defaults)\n# embed_threads = 2\n",
                                           encoding="utf-8")
    (empty / "pyproject.toml").write_text('[project]\nname = "app"  # see [tool.codeloupe] in the docs\n',
                                          encoding="utf-8")
    (held / "pyproject.toml").write_text('[project]\nname = "app"\n\n[tool."codeloupe"]\nembed_threads = 2\n',
                                         encoding="utf-8")
    (held / ".codeloupe.toml").write_text('ignore = ["vendor/**"]\n', encoding="utf-8")
    client = await start_server([empty, held])
    try:
        folders = {Path(folder["root"]).name: folder for folder in await client.wait_ready(2)}
    finally:
        await stop_server(client)
    assert folders["empty"]["settingsFiles"] == [] and folders["empty"]["trusted"] is False
    assert folders["held"]["settingsFiles"] == ["pyproject.toml", ".codeloupe.toml"]
    assert folders["held"]["trusted"] is False
