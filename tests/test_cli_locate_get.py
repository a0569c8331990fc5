"""`codeloupe locate` and `codeloupe get`: the real CLI in a subprocess, on a small git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FILES = {
    "app/users.py": "def get(name):\n    return getUser(name)\n\n\ndef getUser(name):\n    return {'name': name}\n",
    "app/notes.md": "# Notes\n\nCall get to read a user.\n",
    "secret.py": "def get():\n    return 'token'\n",  # gitignored: never indexed, never served
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".gitignore").write_text("secret.py\n")
    (tmp_path / "outside.py").write_text("def get():\n    pass\n")
    (root / "link.py").symlink_to(tmp_path / "outside.py")  # inside by name, outside once resolved
    return root


def codeloupe(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "codeloupe", *args, "--embed-provider", "none"],
                            capture_output=True, text=True, env=dict(os.environ))
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_locate_prints_every_occurrence_and_the_count(repo: Path) -> None:
    out = codeloupe("locate", str(repo), "getUser").stdout.splitlines()
    assert out == ["app/users.py:2:12:     return getUser(name)",
                   "app/users.py:5:5: def getUser(name):",
                   "2 locations of the text 'getUser'"]


def test_locate_shows_control_characters_of_a_line_as_text(repo: Path) -> None:
    """A line's escape sequence is not sent to the terminal: it is shown as `\\x1b` (rule 6)."""
    (repo / "app/banner.py").write_text('BANNER = "\x1b]0;owned\x07getUser"\n')
    out = codeloupe("locate", str(repo), "BANNER").stdout
    assert r'app/banner.py:1:1: BANNER = "\x1b]0;owned\x07getUser"' in out.splitlines()
    assert "\x1b" not in out and "\x07" not in out


def test_locate_identifier_matches_whole_names_and_substring_matches_inside_them(repo: Path) -> None:
    substring = json.loads(codeloupe("locate", str(repo), "get", "--json").stdout)
    assert [(h["path"], h["line"]) for h in substring["locations"]] == \
        [("app/notes.md", 3), ("app/users.py", 1), ("app/users.py", 2), ("app/users.py", 5)]
    whole = json.loads(codeloupe("locate", str(repo), "get", "--identifier", "--json").stdout)
    assert (whole["identifier"], whole["total"]) == (True, 2)
    assert [(h["path"], h["line"], h["column"]) for h in whole["locations"]] == \
        [("app/notes.md", 3, 6), ("app/users.py", 1, 5)]
    assert all(h["path"] != "secret.py" for h in substring["locations"])  # ignored files never match

    limited = codeloupe("locate", str(repo), "get", "--limit", "1").stdout.splitlines()
    assert limited == ["app/notes.md:3:6: Call get to read a user.",
                       "4 locations of the text 'get' (first 1 shown)"]


def test_locate_not_found_exits_1_and_an_empty_or_multi_line_text_is_refused_naming_the_argument(repo: Path) -> None:
    missing = codeloupe("locate", str(repo), "nowhere_to_be_seen", check=False)
    assert (missing.returncode, missing.stdout) == (1, "0 locations of the text 'nowhere_to_be_seen'\n")
    empty = codeloupe("locate", str(repo), "", check=False)
    assert (empty.returncode, empty.stderr) == (2, "codeloupe: locate: argument text: must not be empty\n")
    # Spaces are not nothing: "must not be empty" left the user wondering what was sent.
    blank = codeloupe("locate", str(repo), " ", check=False)
    assert (blank.returncode, blank.stderr) == (
        2, "codeloupe: locate: argument text: is blank (whitespace only): send the exact text to find, such as an identifier\n")
    lines = codeloupe("locate", str(repo), "def getUser(name):\n    return", check=False)
    assert (lines.returncode, lines.stderr) == (2, "codeloupe: locate: argument text: must be one line, got 2 lines\n")


def test_get_prints_a_file_a_span_or_a_definition_verbatim(repo: Path) -> None:
    assert codeloupe("get", str(repo), "app/users.py").stdout == FILES["app/users.py"]
    assert codeloupe("get", str(repo), "app/users.py", "--lines", "5-6").stdout == \
        "def getUser(name):\n    return {'name': name}\n"
    found = json.loads(codeloupe("get", str(repo), "app/users.py", "--symbol", "getUser", "--json").stdout)
    assert found == {"path": "app/users.py", "start_line": 5, "end_line": 6, "symbol": "getUser",
                     "text": "def getUser(name):\n    return {'name': name}\n"}


def test_get_at_a_terminal_shows_a_files_control_characters_as_text(repo: Path) -> None:
    """`codeloupe get` wrote a file's bytes raw to a terminal: a repository's escape sequences (a title, a colour, a
    clipboard write: OSC 52) reached the user's terminal. Piped or redirected the bytes stay verbatim (the reader's
    point); at a terminal control characters are shown as text, as every other command shows them."""
    from processes import at_a_terminal

    (repo / "app" / "banner.py").write_text("TITLE = '\x1b]0;pwned\x07'\n")
    codeloupe("index", str(repo))
    status, seen = at_a_terminal(lambda fd: subprocess.Popen(
        [sys.executable, "-m", "codeloupe", "get", str(repo), "app/banner.py", "--embed-provider", "none"],
        stdout=fd, stderr=fd))
    assert status == 0
    assert b"\x1b" not in seen and b"\x07" not in seen
    assert seen.replace(b"\r\n", b"\n") == b"TITLE = '\\x1b]0;pwned\\x07'\n"
    assert codeloupe("get", str(repo), "app/banner.py").stdout == "TITLE = '\x1b]0;pwned\x07'\n"  # piped: verbatim


@pytest.mark.parametrize(("target", "message"), [
    ("../outside.py", "outside the workspace"),
    ("ABSOLUTE", "outside the workspace"),
    ("link.py", "outside the workspace"),
    ("secret.py", "secret.py: not in the index: the index skips it (ignored)"),
    ("app/deleted.py", "no such file in the index (not indexed, ignored, or deleted)\n"),
    # A span as every answer shows it, copied whole into the path: named as the file and its lines.
    ("app/users.py:5-6", "app/users.py:5-6: no such file in the index (not indexed, ignored, or deleted);"
                         " app/users.py is, and `:5-6` after it reads as its lines 5 to 6: give the path alone and"
                         " the lines as the range\n"),
    ("app/users.py:5", "app/users.py is, and `:5` after it reads as its line 5"),
])
def test_get_refuses_paths_outside_the_workspace_and_unindexed_files(repo: Path, target: str,
                                                                    message: str) -> None:
    path = str(repo.parent / "outside.py") if target == "ABSOLUTE" else target
    refused = codeloupe("get", str(repo), path, check=False)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("codeloupe: ") and message in refused.stderr


def test_get_and_chunks_say_why_the_index_skips_a_file(repo: Path) -> None:
    """`get` names the reason the index skipped a file, and `chunks` still shows the cut but says on stderr that the
    index skips the file, with the reason `stats --skipped` gives."""
    (repo / ".codeloupe.toml").write_text("max_file_bytes = 2000\n")
    (repo / "app/huge.py").write_text("def big():\n    return 1\n" * 200)
    (repo / "app/nul.py").write_bytes(b"x = 1\x00\ny = 2\n")
    skipped = {"app/huge.py": "too large", "app/nul.py": "binary", "secret.py": "ignored"}
    for rel, reason in skipped.items():
        refused = codeloupe("get", str(repo), rel, check=False)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr == f"codeloupe: {rel}: not in the index: the index skips it ({reason})\n"
    listed = codeloupe("stats", str(repo), "--skipped").stdout
    assert "    app/huge.py  (too large)" in listed and "    app/nul.py  (binary)" in listed
    for rel in [*skipped, "app/users.py"]:
        shown = subprocess.run([sys.executable, "-m", "codeloupe", "chunks", str(repo / rel)], capture_output=True,
                               text=True, env=dict(os.environ), timeout=120, check=False)
        assert shown.returncode == 0 and shown.stdout.startswith(f"{repo / rel}: python, "), shown.stderr
        told = [f"{repo / rel}: the index skips this file ({skipped[rel]}), so none of these chunks is in it"] \
            if rel in skipped else []
        assert shown.stderr.splitlines() == told


def test_get_refuses_a_malformed_span(repo: Path) -> None:
    refused = codeloupe("get", str(repo), "app/users.py", "--lines", "five", check=False)
    assert refused.returncode == 2 and "expected A-B" in refused.stderr
    unknown = codeloupe("get", str(repo), "app/users.py", "--symbol", "nothing", check=False)
    assert unknown.returncode == 2 and "defines no symbol named 'nothing'" in unknown.stderr


def test_locate_names_a_long_text_by_its_start_not_in_full(repo: Path) -> None:
    """A pasted 100 KB text was echoed whole in the count line: a screenful to say 0."""
    text = "getUser lookup " * 7000
    missing = codeloupe("locate", str(repo), text, check=False)
    assert missing.returncode == 1
    assert missing.stdout == f"0 locations of the text {text[:60]!r}... ({len(text)} characters)\n"


def test_a_text_locate_cannot_look_for_is_refused_before_the_workspace_is_indexed(repo: Path, tmp_path: Path) -> None:
    """An empty or multi-line text was refused only once the whole workspace had been indexed (minutes on a large
    one, for a mistyped argument no index could answer)."""
    cache = tmp_path / "refused-cache"
    for text in (" ", "def getUser(name):\n    return"):
        refused = subprocess.run([sys.executable, "-m", "codeloupe", "locate", str(repo), text, "--embed-provider",
                                  "none"], capture_output=True, text=True,
                                 env={**os.environ, "CODELOUPE_CACHE_DIR": str(cache)})
        assert refused.returncode == 2 and "locate: argument text: " in refused.stderr, refused.stderr
        assert not cache.exists() or not any(cache.rglob("*")), sorted(cache.rglob("*"))  # no index written
