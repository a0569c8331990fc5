"""The CLI on a folder inside a workspace: one index at the workspace root, the folder as the search scope."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FILES = {
    "src/pkg/ledger.py": "def post_ledger_entry(account, amount):\n    return account.balance + amount\n",
    "src/other/ledger_report.py": "def print_ledger_entry(entry):\n    print(entry)\n",
}


def make_repo(root: Path, marker: str | None) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if marker:
        (root / marker).write_text("[project]\nname = 'demo'\n")
    return root


def codeloupe(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "codeloupe", *args, "--embed-provider", "none"],
                          capture_output=True, text=True, check=True, env=env)


def indexes(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "indexes").glob("*.sqlite"))


def test_a_sub_folder_searches_the_workspace_index_within_that_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "pyproject.toml")
    cache = tmp_path / "cache"
    out = codeloupe("search", str(repo / "src" / "pkg"), "ledger entry", "--json", cache=cache)
    data = json.loads(out.stdout)
    assert data["root"] == str(repo.resolve()) and data["scope"] == "src/pkg"
    assert [h["path"] for h in data["core"] + data["related"]] == ["src/pkg/ledger.py"]
    assert "pyproject.toml" in out.stderr and "src/pkg" in out.stderr
    assert [n.startswith("repo-") for n in indexes(cache)] == [True]
    text = codeloupe("search", str(repo / "src"), "ledger entry", "--scope", "other", cache=cache).stdout
    assert "within src/other " in text and "src/other/ledger_report.py" in text and "src/pkg" not in text
    assert len(indexes(cache)) == 1


def test_an_existing_index_marks_the_root_and_an_unmarked_folder_is_its_own(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "plain", None)
    cache = tmp_path / "cache"
    alone = json.loads(codeloupe("search", str(repo / "src" / "pkg"), "ledger entry", "--json", cache=cache).stdout)
    assert alone["root"] == str((repo / "src" / "pkg").resolve()) and alone["scope"] == ""
    codeloupe("index", str(repo), cache=cache)
    inside = json.loads(codeloupe("search", str(repo / "src" / "other"), "ledger", "--json", cache=cache).stdout)
    assert inside["root"] == str(repo.resolve()) and inside["scope"] == "src/other"


def test_a_search_of_a_file_says_how_to_search_only_that_file(tmp_path: Path) -> None:
    """`codeloupe search src/pkg/ledger.py "..."` ended on "is a file, not a directory (pass the workspace
    folder)", leaving `--scope` to be found; it says the command that searches only that file, and that one does."""
    repo = make_repo(tmp_path / "repo", "pyproject.toml")
    cache = tmp_path / "cache"
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(cache)}
    refused = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(repo / "src/pkg/ledger.py"),
                              "ledger entry", "--embed-provider", "none"], capture_output=True, text=True, env=env)
    hint = f"; to search only this file: codeloupe search {repo / 'src/pkg'} --scope ledger.py ..."
    assert refused.returncode == 2 and hint in refused.stderr, refused.stderr
    out = codeloupe("search", str(repo / "src/pkg"), "--scope", "ledger.py", "ledger entry", "--json", cache=cache)
    assert [f["path"] for f in json.loads(out.stdout)["core"]] == ["src/pkg/ledger.py"]
