"""A cloned repository cannot send code or keys anywhere, load a model or exhaust the machine without trust.

The hostile repository's settings point at a `ChatServer` on 127.0.0.1 that stands in for a host the
repository chose (it records every request); the user's own endpoint is a second one. Everything runs for real: the `codeloupe` CLI in a
subprocess, real settings files, the real trust store under the test's own config dir.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chat_server import ChatServer
from codeloupe.cli import main
from codeloupe.embed.local import (
    MINILM_SHA256,
    _requantized_paths,
    can_requantize,
    is_known_derived,
    load_local_provider,
    options_from,
    shipped_model_path,
)
from codeloupe.settings import (
    WORKSPACE_MAX_FILE_BYTES,
    Settings,
    SettingsError,
    apply,
    load_settings,
    workspace_digest,
)
from codeloupe.trust import TrustStore, user_config_dir
from codeloupe.types import CONTROL_CHARACTERS, one_line
from hostile import MARKER, hostile_repo, write_user_config

USER_EMBED_KEY = "sk-user-embed-secret"
USER_CHAT_KEY = "user-chat-secret"


def codeloupe(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": USER_EMBED_KEY, "CODELOUPE_CHAT_API_KEY": USER_CHAT_KEY}
    return subprocess.run([sys.executable, "-m", "codeloupe", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


# ---------------------------------------------------------------------- the CLI against a hostile repository


def test_an_untrusted_repository_receives_nothing_from_index_search_or_ask(tmp_path: Path) -> None:
    with ChatServer() as repo_host, ChatServer() as user_host:
        repo = hostile_repo(tmp_path / "repo", repo_host.base_url, 'cache_dir = "planted-cache"\n')
        write_user_config(user_host.base_url)
        for command in (["index", str(repo)], ["search", str(repo), MARKER],
                        ["ask", str(repo), f"what does {MARKER} do?"]):
            result = codeloupe(*command)
            assert result.returncode == 0, result.stderr
            warnings = [line for line in result.stderr.splitlines() if "ignoring settings" in line]
            assert len(warnings) == 1, result.stderr
            for key in ("embed_provider", "embed_base_url", "embed_api_key", "chat_base_url", "cache_dir"):
                assert key in warnings[0]
            assert f"codeloupe trust {repo.resolve()}" in warnings[0]
            assert "chunk_budget" not in warnings[0].split("(")[1].split(")")[0]  # a safe key is applied
            assert "endpoints they chose" not in result.stderr  # ignored, they choose nothing
        assert repo_host.received == [], repo_host.everything()
        # Everything local still works, on the user's own settings: their endpoint, their key.
        embedded = [seen for seen in user_host.received if seen.path.endswith("/embeddings")]
        assert embedded and all(seen.authorization == f"Bearer {USER_EMBED_KEY}" for seen in embedded)
        assert MARKER in user_host.everything()
        assert any(seen.path.endswith("/chat/completions") and seen.authorization == f"Bearer {USER_CHAT_KEY}"
                   for seen in user_host.received)
        assert not (repo / "planted-cache").exists()


def test_chunks_sends_nothing_and_says_no_endpoint_notice(tmp_path: Path) -> None:
    """`codeloupe chunks` read a trusted workspace's settings (its chunk budget) and printed their endpoint notice,
    'this workspace's own settings send its code to endpoints they chose', though it chunks one file locally and
    sends nothing: a user read that the command had just sent the file. It says what its files hold that is not
    used, as before, and nothing of endpoints."""
    with ChatServer() as repo_host:
        repo = hostile_repo(tmp_path / "repo", repo_host.base_url, extra='store_url = "postgresql://elsewhere/x"\n')
        assert codeloupe("trust", str(repo)).returncode == 0
        result = codeloupe("chunks", str(repo / "app.py"))
        assert result.returncode == 0 and f"{repo / 'app.py'}: python, " in result.stdout, result.stderr
        assert "endpoints they chose" not in result.stderr, result.stderr
        assert "ignoring store_url" in result.stderr  # what the files hold that is not used is still said
        assert repo_host.received == [], repo_host.everything()


def test_after_trust_the_repository_settings_apply_but_no_user_key_travels_with_them(tmp_path: Path) -> None:
    with ChatServer() as repo_host, ChatServer() as user_host:
        repo = hostile_repo(tmp_path / "repo", repo_host.base_url)
        write_user_config(user_host.base_url)
        trusted = codeloupe("trust", str(repo))
        assert trusted.returncode == 0 and f"trusted: {repo.resolve()}" in trusted.stdout, trusted.stderr
        host, pyproject = repo_host.base_url.split("/")[2], f"{repo.resolve() / 'pyproject.toml'} [tool.codeloupe]"
        for command in (["index", str(repo)], ["search", str(repo), MARKER],
                        ["ask", str(repo), f"what does {MARKER} do?"]):
            result = codeloupe(*command)
            assert result.returncode == 0, result.stderr
            assert "ignoring settings" not in result.stderr
            # Trust applies the repository's endpoints: each command says once where they send its code (the
            # language server's notice; the CLI printed nothing of it).
            (notice,) = [line for line in result.stderr.splitlines() if "endpoints they chose" in line]
            assert f"embeddings to {host} (embed_provider in {pyproject}, embed_base_url in {pyproject})" in notice
            assert f"chat to {host} (chat_base_url in {pyproject})" in notice
            # What wins over them at a command line: it pointed only at the editor's settings.
            assert "CODELOUPE_* variables and flags on the command line" in notice, notice
        paths = repo_host.received_paths()
        assert any(p.endswith("/embeddings") for p in paths) and any(p.endswith("/chat/completions") for p in paths)
        # The repository's key goes to the repository's endpoint; the user's keys never do.
        assert all(seen.authorization == "Bearer repo-key" for seen in repo_host.received
                   if seen.path.endswith("/embeddings"))
        assert USER_EMBED_KEY not in repo_host.everything() and USER_CHAT_KEY not in repo_host.everything()
        assert user_host.received == []

        # An edited settings file needs trust again: the repository is back to its harmless settings.
        before = len(repo_host.received)
        (repo / ".codeloupe.toml").write_text('embed_api_key = "repo-key"\nembed_batch_size = 1\n', encoding="utf-8")
        (repo / "more.py").write_text("def another_function():\n    return 2\n", encoding="utf-8")
        result = codeloupe("index", str(repo))
        assert result.returncode == 0, result.stderr
        assert "changed since you trusted it" in result.stderr
        assert len(repo_host.received) == before
        assert any(seen.path.endswith("/embeddings") for seen in user_host.received)


def test_trust_list_and_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = hostile_repo(tmp_path / "repo", "http://127.0.0.1:9/v1")
    other = tmp_path / "other"
    other.mkdir()
    assert main(["trust", "--list"]) == 0
    assert "no trusted workspaces" in capsys.readouterr().out
    assert main(["trust", str(repo)]) == 0 and main(["trust", str(other)]) == 0
    capsys.readouterr()
    assert main(["trust", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in listed] == [[str(other.resolve()), "trusted"],
                                                     [str(repo.resolve()), "trusted"]]
    (repo / ".codeloupe.toml").write_text('embed_api_key = "another"\n', encoding="utf-8")
    (other / ".codeloupe.toml").write_text("chunk_budget = 800\n", encoding="utf-8")  # added after trust
    assert main(["trust", "--list"]) == 0
    assert all("settings changed since" in line for line in capsys.readouterr().out.splitlines())
    assert main(["trust", "--list", str(repo)]) == 2  # it listed every workspace, as if PATH narrowed it
    assert capsys.readouterr() == ("", "codeloupe: --list lists every trusted workspace and strategy: it takes no "
                                       "PATH or --strategy\n")
    assert main(["trust", "--revoke", str(repo)]) == 0
    assert main(["trust", "--revoke", str(repo)]) == 1
    assert "was not trusted" in capsys.readouterr().err
    assert [e.root for e in TrustStore.default().entries()] == [str(other.resolve())]
    assert load_settings(repo).ignored is not None



def test_trust_refuses_a_link_that_leads_to_itself_in_one_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`codeloupe trust` on a link loop (a -> b -> a) ended in a traceback (pathlib's RuntimeError)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert main(["trust", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err == f"codeloupe: {tmp_path / 'a'}: a symbolic link that leads to itself\n"
    assert TrustStore.default().entries() == []

def test_trust_shows_a_workspaces_keys_and_names_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`codeloupe trust` lists what it trusted as the files hold it: a key of the repository's own settings file
    (TOML quotes any text as a key) and the folder's name reached the terminal raw, so an escape sequence in one
    retitled or cleared it, or hid the endpoint listed after it, and a bidi override reordered the line. Every
    line of trust, --list and --revoke shows them escaped, as a file's name is shown elsewhere."""
    repo = tmp_path / "repo\u202egnp.toml"
    repo.mkdir()
    (repo / ".codeloupe.toml").write_text('"\\u001b[2J\\u001b]0;trusted\\u0007" = 1\n'
                                          'embed_base_url = "http://127.0.0.1:9/v1"\n', encoding="utf-8")
    strategy = repo / ".codeloupe" / "strategies" / "zog\x1b[8m.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text("EXTENSIONS = ('.zog',)\n", encoding="utf-8")
    assert main(["trust", str(repo)]) == 0
    assert main(["trust", "--strategy", str(strategy)]) == 0
    assert main(["trust", "--list"]) == 0
    assert main(["trust", "--revoke", str(repo)]) == 0 and main(["trust", "--revoke", str(repo)]) == 1
    assert main(["trust", "--revoke", "--strategy", str(strategy)]) == 0
    out, err = capsys.readouterr()
    for shown in (out, err):
        assert not CONTROL_CHARACTERS.search(shown), shown
    assert "  .codeloupe.toml: \\x1b[2J\\x1b]0;trusted\\x07 = 1, embed_base_url = 'http://127.0.0.1:9/v1'" in out
    assert f"trusted: {one_line(str(repo.resolve()))}" in out and one_line(str(strategy.resolve())) in out


# ---------------------------------------------------------------------- which settings a workspace may set


def test_an_untrusted_workspace_gets_only_its_harmless_settings(tmp_path: Path) -> None:
    repo = hostile_repo(tmp_path / "repo", "http://127.0.0.1:9/v1",
                        f'cache_dir = "planted-cache"\nembed_threads = 20000\nonnx_model_dir = "m"\n'
                        f"max_file_bytes = {WORKSPACE_MAX_FILE_BYTES + 1}\n")
    settings = load_settings(repo)
    defaults = Settings()
    assert (settings.chunk_budget, settings.ignore) == (900, ["vendor/**"])
    for key in ("embed_provider", "embed_base_url", "embed_api_key", "chat_base_url", "embed_threads",
                "onnx_model_dir", "max_file_bytes"):
        assert getattr(settings, key) == getattr(defaults, key), key
    assert settings.cache_root == Path(os.environ["CODELOUPE_CACHE_DIR"])  # the user's, not the repository's
    assert settings.ignored is not None and not settings.ignored.changed
    assert settings.ignored.keys == sorted(["embed_provider", "embed_base_url", "embed_model", "chat_base_url",
                                            "chat_model", "embed_api_key", "cache_dir", "embed_threads",
                                            "onnx_model_dir", "max_file_bytes"])
    # Within its bound a workspace may still raise the file-size limit.
    (repo / ".codeloupe.toml").write_text(f"max_file_bytes = {WORKSPACE_MAX_FILE_BYTES}\n", encoding="utf-8")
    assert load_settings(repo).max_file_bytes == WORKSPACE_MAX_FILE_BYTES


def test_a_trusted_workspace_sets_everything_and_its_relative_paths_are_its_own(tmp_path: Path) -> None:
    repo = hostile_repo(tmp_path / "repo", "http://127.0.0.1:9/v1", 'cache_dir = "planted-cache"\n')
    TrustStore.default().trust(repo, workspace_digest(repo))
    settings = load_settings(repo)
    assert settings.ignored is None
    assert settings.embed_base_url == "http://127.0.0.1:9/v1" and settings.embed_api_key == "repo-key"
    without_cache_env = {"CODELOUPE_CONFIG_DIR": os.environ["CODELOUPE_CONFIG_DIR"]}
    assert load_settings(repo, environ=without_cache_env).cache_root == repo.resolve() / "planted-cache"  # not cwd's
    assert settings.party("embed_base_url") == "workspace" and settings.party("chunk_budget") == "workspace"
    # The client's own trust decision (an editor's workspace trust) is the same as the store's.
    TrustStore.default().revoke(repo)
    assert load_settings(repo).ignored is not None
    assert load_settings(repo, trusted=True) == settings


def test_the_endpoint_notice_shows_a_host_and_a_file_name_escaped(tmp_path: Path) -> None:
    """The host and the settings file a trusted workspace's notice names are the workspace's text: a bidi override
    in them (here the folder's name and the host's) reordered the notice, naming another host or file than it
    does; they are escaped as the CLI escapes a file name."""
    # The host in TOML's escapes: U+202E, then ESC c (a terminal's reset).
    repo = hostile_repo(tmp_path / "repo\u202egnp.toml", "http://127.0.0.1:9\\u202e\\u001bc/v1")
    notice = load_settings(repo, trusted=True).endpoint_notice
    assert notice is not None and "\u202e" not in notice and "\x1b" not in notice, notice
    assert "embeddings to 127.0.0.1:9\\u202e\\x1bc (embed_provider in " in notice, notice
    assert f"{tmp_path.resolve()}/repo\\u202egnp.toml/pyproject.toml [tool.codeloupe]" in notice, notice


def test_a_workspace_opened_by_the_python_api_logs_the_endpoints_its_trusted_files_chose(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`Workspace(path)` loads the folder's settings itself and logs what the CLI prints of them: the endpoint notice
    (07a7aa9) reached the CLI, the servers and the editor, while a program on the Python API (`index_repo`) sent
    the code to the endpoints a trusted repository chose without a word, and was not told its settings were
    ignored either."""
    from codeloupe.api import Workspace

    repo = hostile_repo(tmp_path / "repo", "http://127.0.0.1:9/v1")
    TrustStore.default().trust(repo, workspace_digest(repo))
    with caplog.at_level(logging.WARNING, logger="codeloupe"):
        Workspace(repo).close()
    logged = [record.getMessage() for record in caplog.records]
    assert [message for message in logged if "endpoints they chose: embeddings to 127.0.0.1:9" in message], logged
    untrusted = hostile_repo(tmp_path / "untrusted", "http://127.0.0.1:9/v1")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="codeloupe"):
        Workspace(untrusted).close()
    assert [record for record in caplog.records if "ignoring settings from" in record.getMessage()], caplog.records


def test_the_user_config_is_below_the_workspace_and_the_environment_and_flags_win(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    write_user_config("http://127.0.0.1:7/v1")
    repo = hostile_repo(tmp_path / "repo", "http://127.0.0.1:9/v1")
    assert load_settings(repo).embed_base_url == "http://127.0.0.1:7/v1"  # untrusted: the user's
    assert load_settings(repo, trusted=True).embed_base_url == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("CODELOUPE_EMBED_BASE_URL", "http://127.0.0.1:8/v1")
    assert load_settings(repo, trusted=True).embed_base_url == "http://127.0.0.1:8/v1"
    assert load_settings(repo, {"embed_base_url": "http://127.0.0.1:6/v1"}).embed_base_url == "http://127.0.0.1:6/v1"


def test_a_key_travels_only_with_an_endpoint_of_the_same_party(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", USER_EMBED_KEY)
    repo = hostile_repo(tmp_path / "repo", "https://repo.example/v1")
    trusted = load_settings(repo, {"chat_api_key": USER_CHAT_KEY}, trusted=True)
    assert trusted.api_key("embed_base_url", "embed_api_key", "OPENAI_API_KEY") == ("repo-key", "")
    key, why = trusted.api_key("chat_base_url", "chat_api_key")
    assert key == "" and "chat_api_key (from overrides)" in why and "https://repo.example/v1" in why
    # The user's endpoint gets the user's key, never the workspace's.
    mine = load_settings(repo, {"embed_base_url": "https://mine.example/v1"}, trusted=True)
    assert mine.api_key("embed_base_url", "embed_api_key", "OPENAI_API_KEY") == (USER_EMBED_KEY, "")
    from codeloupe.ask.chat import ChatModel, ChatUnavailable
    from codeloupe.embed import EmbeddingError, make_provider

    with pytest.raises(ChatUnavailable, match="only goes to an endpoint set by the same party"):
        ChatModel.from_settings(trusted)
    with pytest.raises(EmbeddingError, match=r"\$OPENAI_API_KEY is not sent to embed_base_url"):
        make_provider(trusted.replace(embed_api_key=""))


# ---------------------------------------------------------------------- numbers


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("embed_threads", 20000, "outside 0..1024"),
    ("embed_threads", -1, "outside"),
    ("embed_batch_size", 0, "outside 1..2048"),
    ("embed_concurrency", 10_000, "outside"),
    ("embed_timeout_s", 0, "outside"),
    ("chat_timeout_s", float("nan"), "outside"),
    ("max_file_bytes", 10**12, r"outside 1\.\.67108864$"),  # not %g's 6.71089e+07
    ("chunk_budget", "abc", r"cannot use 'abc' \(expected a whole number\)$"),  # not int()'s "invalid literal"
    ("embed_timeout_s", [1], r"\(expected a number\)$"),
    ("chunk_budget", 3, "outside"),
    ("chunk_budget", 2.5, "whole number"),
    ("max_line_chars", True, "whole number"),
    ("chat_base_url", "file:///etc/passwd", r"not an http\(s\) URL"),
    ("embed_provider", "foo", "is not one of local, onnx, openai, none"),
    # a wrong type is an error too, not a value made of its text
    ("flows", "maybe", r"expected true or false \(1, true, yes, on / 0, false, no, off, ''\)\)$"),  # not a bare ', )'
    ("flows", 5, "expected true or false"),
    ("cache_dir", ["a", "b"], "expected a string"),
    ("chat_model", 5, "expected a string"),
    ("ignore", [1, 2], "expected a list of strings"),
    ("ignore", 5, "expected a list of strings"),
])
def test_nonsense_numbers_are_clear_errors_naming_the_source(key: str, value: object, problem: str) -> None:
    with pytest.raises(SettingsError, match=problem) as caught:
        apply(Settings(), {key: value}, "the environment")
    assert key in str(caught.value) and "the environment" in str(caught.value)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("flows", "off", False), ("flows", " Yes ", True), ("flows", "0", False), ("flows", True, True),
    ("ignore", "*.md, build/", ["*.md", "build/"]), ("ignore", ["*.md"], ["*.md"]), ("ignore", {}, []),
    ("chat_model", "m", "m"),
])
def test_booleans_lists_and_strings_read_as_the_environment_and_toml_write_them(key: str, value: object,
                                                                               expected: object) -> None:
    assert getattr(apply(Settings(), {key: value}, "the environment"), key) == expected


def test_an_unknown_embed_provider_is_one_line_naming_its_source_not_a_traceback(tmp_path: Path,
                                                                                monkeypatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "fooo")
    result = codeloupe("search", str(repo), "f", "--no-embed")
    assert result.returncode == 2, result.stderr
    assert "'embed_provider' from the environment: 'fooo' is not one of" in result.stderr
    assert "Traceback" not in result.stderr
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "None")  # the provider's name is read case-blind
    assert load_settings(repo).embed_provider == "None"


def test_embed_threads_from_a_workspace_is_ignored_and_from_the_user_is_bounded(tmp_path: Path,
                                                                                monkeypatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    (repo / ".codeloupe.toml").write_text("embed_threads = 20000\n", encoding="utf-8")
    settings = load_settings(repo)
    assert settings.embed_threads == 0 and settings.ignored is not None
    assert options_from(settings).threads == 0  # every core, not 20000
    monkeypatch.setenv("CODELOUPE_EMBED_THREADS", "20000")
    result = codeloupe("search", str(repo), "f")
    assert result.returncode == 2
    assert "'embed_threads' from the environment: 20000 is outside 0..1024" in result.stderr
    assert "Traceback" not in result.stderr
    monkeypatch.setenv("CODELOUPE_EMBED_THREADS", "1024")
    assert options_from(load_settings(repo)).threads == os.cpu_count()  # more threads than cores are clamped


# ---------------------------------------------------------------------- the derived model in the cache


def test_a_model_planted_in_the_cache_is_refused_and_derived_again(tmp_path: Path) -> None:
    assert can_requantize(), "the onnx package (a dependency) is needed to derive the model"
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    target, _ = _requantized_paths(settings.cache_root, MINILM_SHA256)
    target.parent.mkdir(parents=True)
    # A valid model, loadable, but not the one codeloupe derives: it must never be loaded under that name.
    shutil.copyfile(shipped_model_path(), target)
    planted = target.read_bytes()
    assert not is_known_derived(target)
    provider = load_local_provider(settings)
    assert provider.model_path == target
    assert target.read_bytes() != planted and is_known_derived(target)


def test_trust_from_a_folder_inside_the_workspace_trusts_the_workspace(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`codeloupe search REPO/src "..."` opens REPO; `codeloupe trust REPO/src` must trust that same REPO."""
    repo = hostile_repo(tmp_path / "repo", "http://127.0.0.1:9/v1")
    (repo / ".git").mkdir()
    inner = repo / "src" / "pkg"
    inner.mkdir(parents=True)
    assert main(["trust", str(inner)]) == 0
    assert f"inside the workspace {repo.resolve()}" in capsys.readouterr().err
    assert [e.root for e in TrustStore.default().entries()] == [str(repo.resolve())]
    assert load_settings(repo).ignored is None
    assert main(["trust", "--revoke", str(inner)]) == 0
    assert TrustStore.default().entries() == []


def test_a_huge_or_undecodable_user_config_is_a_clear_error_not_a_full_memory(tmp_path: Path) -> None:
    """(A workspace's such file is a warning: test_settings_workspace_files.py.)"""
    from codeloupe.settings import SETTINGS_FILE_MAX_BYTES

    config = user_config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("# padding\n" * (SETTINGS_FILE_MAX_BYTES // 10 + 1))
    with pytest.raises(SettingsError, match="larger than 1024 KiB"):
        load_settings(tmp_path)
    config.write_bytes(b"chunk_budget = 1\n# \xff\xfe\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(tmp_path)


def test_trust_names_a_file_and_a_broken_user_config_in_one_line(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`codeloupe trust FILE` said "no such directory" of a file that is there, and a user config.toml with a
    value out of range ended `codeloupe trust REPO` in a traceback."""
    repo = hostile_repo(tmp_path / "repo", "http://127.0.0.1:9/v1")
    assert main(["trust", str(repo / ".codeloupe.toml")]) == 2
    assert capsys.readouterr().err.strip().endswith(".codeloupe.toml: is a file, not a directory (pass the "
                                                    "workspace folder)")
    config = user_config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("embed_threads = -1\n", encoding="utf-8")
    assert main(["trust", str(repo)]) == 2
    assert capsys.readouterr().err.strip() == f"codeloupe: setting 'embed_threads' from {config}: -1 is outside 0..1024"
    assert TrustStore.default().entries() == []


def test_a_trust_store_that_cannot_be_written_is_one_line_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A config dir that is a file (or read-only) ended `codeloupe trust` in a FileExistsError traceback."""
    repo = hostile_repo(tmp_path / "repo", "http://127.0.0.1:9/v1")
    (tmp_path / "not-a-folder").write_text("", encoding="utf-8")
    monkeypatch.setenv("CODELOUPE_CONFIG_DIR", str(tmp_path / "not-a-folder"))
    store = tmp_path / "not-a-folder" / "trusted-workspaces.json"
    for command in (["trust", str(repo)], ["trust", "--strategy", str(repo / ".codeloupe.toml")]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"codeloupe: cannot write the trust store {store}: ") and "\n" not in err, err
    assert main(["trust", "--strategy", str(tmp_path / "missing.py")]) == 2
    assert capsys.readouterr().err.strip() == (f"codeloupe: cannot trust the strategy {tmp_path / 'missing.py'}: "
                                               "No such file or directory")


def test_a_digest_the_client_trusted_covers_only_the_tables_the_load_reads(tmp_path: Path) -> None:
    """The language server hands load_settings the digest of the settings files the editor trusted; the load
    compares it with the tables it reads itself, so a file rewritten after the server took that digest (a pull
    landing between two reads) is decided by the trust store, never applied under the editor's trust."""
    from codeloupe.settings import load_settings, workspace_digest

    (tmp_path / ".codeloupe.toml").write_text('embed_base_url = "http://127.0.0.1:9/v1"\n')
    trusted = workspace_digest(tmp_path)
    same = load_settings(tmp_path, trusted_digest=trusted)
    assert same.ignored is None and same.embed_base_url == "http://127.0.0.1:9/v1"

    (tmp_path / ".codeloupe.toml").write_text('embed_base_url = "http://127.0.0.1:8/v1"\n')
    changed = load_settings(tmp_path, trusted_digest=trusted)
    assert changed.ignored is not None and "embed_base_url" in changed.ignored.keys
    assert changed.embed_base_url != "http://127.0.0.1:8/v1"
