"""Line numbers are the editor's: a line ends at \\n, \\r\\n or a lone \\r (the LSP's rule, VS Code's and Neovim's),
never at a form feed, U+2028 or another character `str.splitlines` ends a line at. Checked through the real CLI
in a subprocess on files with every kind of break before their definitions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codeloupe.types import count_line_breaks, split_lines
from line_break_files import DEFINITIONS, FILES, JAVASCRIPT, PYTHON, editor_lines, write_files


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_files(tmp_path_factory.mktemp("breaks") / "repo")


def codeloupe(*args: str, cache: Path) -> str:
    result = subprocess.run([sys.executable, "-m", "codeloupe", *args, "--embed-provider", "none"],
                            capture_output=True, text=True, env={**os.environ, "CODELOUPE_CACHE_DIR": str(cache)})
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("breaks-cache")


def test_the_definitions_stand_where_the_test_says() -> None:
    for name, (path, line) in DEFINITIONS.items():
        assert name in editor_lines(FILES[path])[line - 1]


@pytest.mark.parametrize("text", [
    "", "a", "a\n", "\n\n", "a\r\nb\rc\n", "\r\r\n\n", "x\r",
    *(f"a{c}b\nc{c}\r\nd{c}" for c in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
    PYTHON, JAVASCRIPT,
])
def test_split_lines_is_the_editors_rule(text: str) -> None:
    lines = editor_lines(text)
    assert split_lines(text) == lines
    assert split_lines(text, keepends=False) == [re.sub("(\r\n|\r|\n)$", "", line) for line in lines]
    assert count_line_breaks(text) == len(re.findall("\r\n|\r|\n", text))


def test_locate_names_the_editors_line_after_page_breaks_and_line_separators(repo: Path, cache: Path) -> None:
    for name, (path, line) in DEFINITIONS.items():
        found = json.loads(codeloupe("locate", str(repo), f"{name}(", "--json", cache=cache))
        assert [(hit["path"], hit["line"]) for hit in found["locations"]] == [(path, line)], name
        assert found["locations"][0]["text"] == editor_lines(FILES[path])[line - 1].rstrip("\r\n")


def test_get_reads_a_definition_from_the_editors_line(repo: Path, cache: Path) -> None:
    for name, (path, line) in DEFINITIONS.items():
        got = json.loads(codeloupe("get", str(repo), path, "--symbol", name, "--json", cache=cache))
        lines = editor_lines(FILES[path])
        assert got["start_line"] == line, name
        assert got["text"] == "".join(lines[line - 1:got["end_line"]])
        assert got["text"].startswith(lines[line - 1])


def test_search_spans_and_anchors_are_the_editors_lines(repo: Path, cache: Path) -> None:
    """Every chunk is the file's lines start..end as an editor numbers them, and the anchor of a hit is the
    line holding the query; the terminal rendering (piped) numbers the same lines."""
    for name, (path, line) in DEFINITIONS.items():
        pruned = json.loads(codeloupe("search", str(repo), name, "--prune", "--chunk-budget", "100", cache=cache))
        for chunk in pruned["chunks"]:
            first = chunk["text_start_line"] - 1
            lines = editor_lines(FILES[chunk["path"]])[first:first + len(editor_lines(chunk["text"]))]
            assert chunk["text"] == "".join(lines)
        best = pruned["chunks"][0]
        assert (best["path"], best["anchor_line"]) == (path, line), name
        assert best["start_line"] <= line <= best["end_line"]
    shown = codeloupe("search", str(repo), "after_lone_cr", "--chunk-budget", "100", cache=cache)
    assert re.search(r"^\s*15  def after_lone_cr\(\):$", shown, re.M), shown


def test_chunks_partition_the_editors_lines(repo: Path, cache: Path) -> None:
    for path, text in FILES.items():
        shown = subprocess.run([sys.executable, "-m", "codeloupe", "chunks", str(repo / path), "--json",
                                "--chunk-budget", "100"], capture_output=True, text=True, check=True,
                               env={**os.environ, "CODELOUPE_CACHE_DIR": str(cache)})
        chunks = json.loads(shown.stdout)
        assert len(chunks) > 1
        assert chunks[0]["start_line"] == 1 and chunks[-1]["end_line"] == len(editor_lines(text))
        for before, after in zip(chunks, chunks[1:], strict=False):
            assert after["start_line"] == before["end_line"] + 1
