"""A workspace's own settings files never stop the tool: what in them cannot be used is warned about and left out.

A cloned repository whose `.codeloupe.toml` held a typo (or a setting of a newer codeloupe), a value out of range
or a file that is not TOML ended every command on it with exit 2. Now each is one warning naming the file and
the key, and the rest of the file applies; the user's own config.toml stays strict. Real files, the real trust
store and the `codeloupe` CLI in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codeloupe.settings import SETTINGS_FILE_MAX_BYTES, load_settings, workspace_digest
from codeloupe.trust import TrustStore, user_config_dir

APP = "def ledger_total(entries):\n    return sum(entries)\n"
VENDORED = "def ledger_total_vendored(entries):\n    return 0\n"


def repo_with(root: Path, settings: str) -> Path:
    """A repository with one file of its own, one under vendor/, and `settings` as its .codeloupe.toml."""
    (root / "vendor").mkdir(parents=True)
    (root / "app.py").write_text(APP, encoding="utf-8")
    (root / "vendor" / "copy.py").write_text(VENDORED, encoding="utf-8")
    (root / ".codeloupe.toml").write_text(settings, encoding="utf-8")
    return root


def search(repo: Path, query: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codeloupe", "search", str(repo), query, "--no-embed"],
                          env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)


def test_a_typo_in_a_workspace_file_is_one_warning_and_the_rest_of_the_file_applies(tmp_path: Path) -> None:
    repo = repo_with(tmp_path / "repo", 'ignore = ["vendor/**"]\nchunk_budgett = 900\n')
    result = search(repo, "ledger_total_vendored")
    assert result.returncode == 0, result.stderr
    warning = (f"codeloupe: unknown setting 'chunk_budgett' in {repo.resolve() / '.codeloupe.toml'} "
               "(did you mean 'chunk_budget'?); ignored")
    assert result.stderr.splitlines().count(warning) == 1, result.stderr
    assert "app.py" in result.stdout and "vendor/copy.py" not in result.stdout  # the file's `ignore` applied
    chunks = subprocess.run([sys.executable, "-m", "codeloupe", "chunks", str(repo / "app.py")], env=dict(os.environ),
                            capture_output=True, text=True, timeout=120, check=False)
    assert chunks.returncode == 0 and chunks.stderr.splitlines() == [warning], chunks.stderr


def test_a_library_workspace_that_loads_its_settings_logs_their_warnings_once(tmp_path: Path) -> None:
    """`codeloupe.api.Workspace(root)` reads the settings files itself, and nothing else shows what it left out of
    them: each is one warning on the codeloupe logger (here Python's last-resort handler, on stderr). A caller
    that passes the settings shows them itself (the CLI above, once)."""
    repo = repo_with(tmp_path / "repo", 'ignore = ["vendor/**"]\nchunk_budgett = 900\nchunk_budget = 3\n')
    script = ("import sys\nfrom codeloupe.api import Workspace\nfrom codeloupe.settings import load_settings\n"
              "Workspace(sys.argv[1]).close()\nprint('settings given:', file=sys.stderr)\n"
              "Workspace(sys.argv[1], load_settings(sys.argv[1])).close()\n")
    result = subprocess.run([sys.executable, "-c", script, str(repo)], env=dict(os.environ), capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    file = repo.resolve() / ".codeloupe.toml"
    assert result.stderr.splitlines() == [f"unknown setting 'chunk_budgett' in {file} (did you mean 'chunk_budget'?);"
                                          " ignored",
                                          f"setting 'chunk_budget' from {file}: 3 is outside 100..100000; ignored",
                                          "settings given:"], result.stderr


@pytest.mark.parametrize(("line", "problem"), [
    ("chunk_budget = 3", "setting 'chunk_budget' from {file}: 3 is outside 100..100000; ignored"),
    ('max_line_chars = "wide"', "setting 'max_line_chars' from {file}: cannot use 'wide' (expected a whole number)"
                                "; ignored"),
    ('max_file_bytes = "big"', "setting 'max_file_bytes' from {file}: cannot use 'big' (expected a whole number)"
                               "; ignored"),
    ('flows = "maybe"', "setting 'flows' from {file}: cannot use 'maybe'"),
    ("[ignore]\nx = 1", "setting 'ignore' from {file}: cannot use {{'x': 1}} (expected a list of strings); ignored"),
    ("[tool]\nx = 1", "unknown setting 'tool' in {file}; ignored"),
    ('store_url = "postgresql://db.example/x"', "ignoring store_url in {file}: only your own settings may set them"),
    # A whole number past any float (TOML's integers are not bounded for Python): an OverflowError traceback.
    (f"chunk_budget = {'9' * 400}", f"setting 'chunk_budget' from {{file}}: {'9' * 400} is outside 100..100000"),
])
def test_an_unusable_value_is_one_warning_and_the_rest_applies(tmp_path: Path, line: str, problem: str) -> None:
    valid, value = ("chunk_budget", 900) if "max_line_chars" in line else ("max_line_chars", 2000)
    repo = repo_with(tmp_path / "repo", f"{valid} = {value}\n{line}\n")
    settings = load_settings(repo)
    file = repo.resolve() / ".codeloupe.toml"
    assert len(settings.warnings) == 1 and settings.warnings[0].startswith("codeloupe: " + problem.format(file=file))
    assert getattr(settings, valid) == value
    assert settings.ignored is None  # nothing here is for trust to decide


def test_a_trusted_workspace_s_unusable_provider_is_a_warning_and_its_endpoint_still_applies(tmp_path: Path) -> None:
    repo = repo_with(tmp_path / "repo", 'embed_provider = "fancy"\nchat_base_url = "http://127.0.0.1:9/v1"\n')
    settings = load_settings(repo, trusted=True)
    assert settings.embed_provider == "local" and settings.chat_base_url == "http://127.0.0.1:9/v1"
    assert settings.warnings == (f"codeloupe: setting 'embed_provider' from {repo.resolve() / '.codeloupe.toml'}: "
                                 "'fancy' is not one of local, onnx, openai, none; ignored",)


def test_trust_covers_the_file_as_written_the_ignored_keys_included(tmp_path: Path) -> None:
    repo = repo_with(tmp_path / "repo", 'embed_model = "theirs"\nembed_modle = "typo"\n')
    untrusted = load_settings(repo)
    assert untrusted.ignored is not None and untrusted.ignored.keys == ["embed_model"]
    assert any("'embed_modle'" in warning for warning in untrusted.warnings)
    TrustStore.default().trust(repo.resolve(), workspace_digest(repo))
    trusted = load_settings(repo)
    assert trusted.ignored is None and trusted.embed_model == "theirs" and trusted.warnings == untrusted.warnings
    # Mending the typo changes what was trusted: the workspace is untrusted again until trusted again.
    (repo / ".codeloupe.toml").write_text('embed_model = "theirs"\nembed_model_ = "typo"\n', encoding="utf-8")
    assert load_settings(repo).ignored is not None


@pytest.mark.parametrize(("name", "content", "problem"), [
    ("pyproject.toml", b'[project\nname = "x"\n', "pyproject.toml: not valid TOML"),
    ("pyproject.toml", b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n",
     "pyproject.toml: not valid TOML (nested too deeply)"),
    ("pyproject.toml", b"[tool]\ncodeloupe = 5\n", "pyproject.toml: [tool.codeloupe] must be a table"),
    ("pyproject.toml", b"# padding\n" * (SETTINGS_FILE_MAX_BYTES // 10 + 1), "pyproject.toml: larger than 1024 KiB"),
    (".codeloupe.toml", b"chunk_budget = 1\n# \xff\xfe\n", ".codeloupe.toml: not valid TOML (not UTF-8"),
])
def test_a_settings_file_that_cannot_be_read_is_a_warning_and_the_other_applies(
        tmp_path: Path, name: str, content: bytes, problem: str) -> None:
    """A huge file is not read into memory, and one that is not TOML is left out: the other file still applies."""
    repo = tmp_path / "repo"
    repo.mkdir()
    other = ".codeloupe.toml" if name == "pyproject.toml" else "pyproject.toml"
    (repo / other).write_text("chunk_budget = 900\n" if other == ".codeloupe.toml"
                              else "[tool.codeloupe]\nchunk_budget = 900\n", encoding="utf-8")
    (repo / name).write_bytes(content)
    settings = load_settings(repo)
    assert settings.chunk_budget == 900
    assert len(settings.warnings) == 1 and settings.warnings[0].startswith(f"codeloupe: {repo.resolve()}/{problem}")
    assert settings.warnings[0].endswith("; not read for settings")


def test_the_user_s_own_config_stays_strict(tmp_path: Path) -> None:
    """What the user typed is still an error naming it: a typo in their config.toml stops the command."""
    repo = repo_with(tmp_path / "repo", "")
    config = user_config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("chunk_budgett = 900\n", encoding="utf-8")
    result = search(repo, "ledger_total")
    assert result.returncode == 2
    # the closest known setting suggested, here as in a workspace file's warning
    assert result.stderr.strip() == \
        f"codeloupe: unknown setting 'chunk_budgett' in {config} (did you mean 'chunk_budget'?)"
    config.write_bytes(b"chunk_budget = 900\n# \xff\n")
    result = search(repo, "ledger_total")
    assert result.returncode == 2 and "config.toml: not valid TOML (not UTF-8" in result.stderr
    config.write_text(f"chunk_budget = {'9' * 400}\n", encoding="utf-8")
    result = search(repo, "ledger_total")
    assert result.returncode == 2 and result.stderr.startswith(f"codeloupe: setting 'chunk_budget' from {config}: 999")


def test_trust_of_a_workspace_with_a_file_that_is_not_toml_trusts_the_other_and_says_so(tmp_path: Path) -> None:
    """`codeloupe trust` refused (exit 2) a workspace whose pyproject.toml is not TOML, though no command reads
    it for settings now: it trusts what the other file holds, and names the one left out."""
    repo = repo_with(tmp_path / "repo", 'embed_model = "theirs"\n')
    (repo / "pyproject.toml").write_text("[project\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "codeloupe", "trust", str(repo)], env=dict(os.environ),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"codeloupe: {repo.resolve() / 'pyproject.toml'}: not valid TOML")
    assert "embed_model = 'theirs'" in result.stdout
    settings = load_settings(repo)
    assert settings.ignored is None and settings.embed_model == "theirs"


def test_a_pyproject_whose_tool_is_no_table_holds_no_settings(tmp_path: Path) -> None:
    """`tool = 5` in a pyproject.toml (valid TOML) was an AttributeError traceback out of every command."""
    repo = repo_with(tmp_path / "repo", "chunk_budget = 900\n")
    (repo / "pyproject.toml").write_text('tool = 5\n[project]\nname = "x"\n', encoding="utf-8")
    result = search(repo, "ledger_total")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert load_settings(repo).chunk_budget == 900


def test_a_workspace_file_s_typo_is_never_told_to_be_a_setting_only_your_own_settings_may_set(tmp_path: Path) -> None:
    """`store_urll` in a workspace's file was answered '(did you mean 'store_url'?)': a setting the file may never
    set, which, fixed as told, was only ignored the other way. A workspace's file is pointed at what it may set."""
    repo = repo_with(tmp_path / "repo", 'store_urll = "postgresql://elsewhere/db"\nremote_timeout = 5\n')
    warnings = load_settings(repo, trusted=True).warnings
    file = repo.resolve() / ".codeloupe.toml"
    assert warnings[0] == f"codeloupe: unknown setting 'store_urll' in {file}; ignored", warnings
    assert len(warnings) == 2 and "remote_timeout_s" not in warnings[1], warnings
