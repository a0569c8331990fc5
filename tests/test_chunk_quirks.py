"""Fixture tests for the chunker's grammar quirks, edge inputs, skeletons, languages and CLI."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest
import tree_sitter_language_pack

from codeloupe.chunk import (
    CHUNKER_VERSION,
    PartitionError,
    available_languages,
    chunk_file,
    detect_language,
    is_doc_language,
    validate_partition,
)
from codeloupe.chunk.lines import Lines
from codeloupe.cli import main
from codeloupe.types import Chunk, ChunkedFile, has_lone_cr

FIXTURES = Path(__file__).parent / "fixtures" / "chunk"


def chunked(name: str, budget: int = 4000) -> ChunkedFile:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    result = chunk_file(name, text, detect_language(name, text[:100]), budget)
    validate_partition(text, result.chunks)
    return result


def symbol(result: ChunkedFile, qualified: str):  # noqa: ANN201 - a Symbol
    matches = [s for s in result.symbols if s.qualified_name == qualified]
    assert matches, f"{qualified} not in {[s.qualified_name for s in result.symbols]}"
    return matches[0]


def chunk_at(result: ChunkedFile, line: int) -> Chunk:
    return next(c for c in result.chunks if c.start_line <= line <= c.end_line)


# ------------------------------------------------------------------------------------------- quirks


def test_rust_impl_blocks_are_named_by_their_type() -> None:
    result = chunked("rust_impl.rs", budget=60)
    assert symbol(result, "impl Point").kind == "impl"
    new = symbol(result, "Point.new")
    assert (new.kind, new.parent, new.signature) == ("method", "Point", "pub fn new(x: i32, y: i32) -> Self")
    assert symbol(result, "Point.fmt").parent == "Point"
    assert symbol(result, "impl fmt::Display for Point").start_line == 21
    crumb = chunk_at(result, 12).breadcrumb
    assert crumb == "rust_impl.rs > impl Point > pub fn new(x: i32, y: i32) -> Self"
    assert any(c.kind == "header" and c.name == "impl Point" for c in result.chunks)


def test_ruby_class_self_methods_belong_to_the_class() -> None:
    result = chunked("ruby_singleton.rb", budget=40)
    load = symbol(result, "Settings.Config.load")
    assert (load.kind, load.parent, load.start_line) == ("method", "Settings.Config", 7)
    assert symbol(result, "Settings.Config.build").parent == "Settings.Config"
    assert "class << self" not in [s.name for s in result.symbols]
    assert " > class << self > def load(path)" in chunk_at(result, 8).breadcrumb


def test_commonjs_assignments_are_definitions() -> None:
    result = chunked("commonjs.js")
    use = symbol(result, "proto.use")
    assert (use.name, use.parent, use.kind, use.start_line) == ("use", "proto", "function", 8)
    assert symbol(result, "exports.handle").signature == "exports.handle = function handle(req, res)"
    assert symbol(result, "module.exports").start_line in (3, 17)
    small = chunked("commonjs.js", budget=100)
    assert chunk_at(small, 9).name == "proto.use"
    # the JSDoc comment travels with the definition it documents
    assert chunk_at(small, 5).start_line == chunk_at(small, 8).start_line


@pytest.mark.parametrize(("name", "source"), [
    ("nested.js", "function outer() {\n  const helper = function () { return 1; };\n  const count = 3;\n"
                  "  return helper() + count;\n}\nconst LIMIT = 10;\n"),
    ("nested.py", "def outer():\n    helper = lambda x: x\n    count = 3\n    return helper(count)\n\nLIMIT = 10\n"),
])
def test_inside_a_definition_only_functions_assigned_are_definitions(name: str, source: str) -> None:
    """A function value assigned in a body is a definition of its own; a plain value there is not (the
    assignments of function bodies are dropped early, before their text is read), a constant at the top is."""
    result = chunk_file(name, source, detect_language(name, source[:100]))
    assert [(s.name, s.kind, s.parent) for s in result.symbols] == [
        ("outer", "function", ""), ("helper", "function", "outer"), ("LIMIT", "constant", "")]


def test_decorators_belong_to_the_definition() -> None:
    result = chunked("decorated.py", budget=120)
    index = symbol(result, "index")
    assert (index.start_line, index.end_line, index.signature) == (6, 12, "def index(request)")
    chunk = chunk_at(result, 10)
    assert chunk.start_line <= 6 and chunk.name == "index" and "index" in chunk.symbols
    assert symbol(result, "View.name").kind == "method"
    assert "Serve the index." in result.skeleton.text


def test_export_wrappers() -> None:
    result = chunked("export_default.ts", budget=40)
    assert symbol(result, "Router").kind == "class"
    assert symbol(result, "Router.route").kind == "method"
    assert symbol(result, "Handler").kind == "interface"
    assert symbol(result, "compose").kind == "function"
    assert chunk_at(result, 9).breadcrumb.startswith("export_default.ts > class Router > route(path: string)")
    anonymous = chunked("export_default_fn.js")
    assert [(s.name, s.kind) for s in anonymous.symbols] == [("default", "function")]


def test_legacy_php_is_cut_at_banner_comments() -> None:
    result = chunked("legacy.php", budget=300)
    assert {c.kind for c in result.chunks} == {"section"}
    starts = {c.start_line: c for c in result.chunks}
    assert starts[20].name == "Rendering"  # the second banner starts a chunk
    function = symbol(result, "fetch_items")
    assert chunk_at(result, function.start_line) is chunk_at(result, function.end_line)


def test_modern_php_uses_the_syntax_path() -> None:
    text = "<?php\nnamespace App;\n\nclass Cart {\n    public function total() {\n        return 1;\n    }\n}\n"
    result = chunk_file("Cart.php", text, "php")
    assert result.chunks[0].kind == "module"
    # `namespace App;` does not enclose the class in the tree: the class is top-level
    assert symbol(result, "Cart.total").kind == "method"


def test_markdown_fences_hide_hash_lines_and_sections_follow_headings() -> None:
    result = chunked("fences.md", budget=100)
    text = (FIXTURES / "fences.md").read_text(encoding="utf-8").splitlines()
    fence_inside = {i for i in range(8, 11)} | {22}
    for chunk in result.chunks:
        assert chunk.kind == "section"
        assert chunk.start_line not in fence_inside, chunk
    assert "still not a heading" not in result.skeleton.text
    assert result.skeleton.text.splitlines()[:3] == ["fences.md", "Project", "  Install"]
    usage = chunk_at(result, 14)
    assert usage.breadcrumb.startswith("fences.md > Project > ")
    assert text[chunk_at(result, 7).start_line - 1].startswith(("```", "## Install", ""))


def test_long_function_becomes_numbered_parts_and_class_a_header_plus_methods() -> None:
    body = "".join(f"        value_{i} = compute_something({i}) + other_thing({i})\n" for i in range(60))
    text = f"class Big:\n    '''Big doc.'''\n\n    def run(self):\n{body}\n    def stop(self):\n        pass\n"
    result = chunk_file("big.py", text, "python", budget=600)
    validate_partition(text, result.chunks)
    assert result.chunks[0].kind == "header" and result.chunks[0].start_line == 1
    parts = [c for c in result.chunks if c.kind == "part"]
    assert len(parts) >= 3
    assert [c.breadcrumb.rsplit(" > ", 1)[-1] for c in parts] == [
        f"part {k}/{len(parts)}" for k in range(1, len(parts) + 1)]
    assert all(c.name == "Big.run" for c in parts)
    assert result.chunks[-1].name == "Big.stop" and result.chunks[-1].kind == "method"


# ------------------------------------------------------------------------------------- edge inputs


def test_empty_text_has_no_chunks() -> None:
    result = chunk_file("empty.py", "", "python")
    assert result.chunks == [] and result.symbols == [] and result.fallback_reason == ""
    validate_partition("", [])


def test_giant_single_line_falls_back_to_one_window() -> None:
    text = "var a=" + "1+" * 2_500_000 + "1;"
    result = chunk_file("bundle.min.js", text, "javascript")
    assert result.fallback_reason.startswith("giant line")
    assert len(result.chunks) == 1 and result.chunks[0].kind == "window"
    validate_partition(text, result.chunks)


@pytest.mark.parametrize("text", [
    "# only\n# comments\n\n# here\n",
    "def f():\r\n    return 1\r\n\r\nclass A:\r\n    pass\r\n",
    "def f():\n    return 1",
    "x = 1\ry = 2\x0cz = 3\u2028w = 4\n",
])
def test_edge_texts_partition(text: str) -> None:
    result = chunk_file("edge.py", text, "python", budget=10)
    validate_partition(text, result.chunks)
    assert result.fallback_reason == ""


# What the budget counts of a line: the characters that are not these.
_NOT_COUNTED = str.maketrans("", "", " \t\r\n\x0b\x0c\x1c\x1d\x1e\x85\xa0\u2028\u2029\u3000\ufeff")
# Lines as editors and the LSP make them: each ends at \n, \r\n or a lone \r, and nowhere else.
_EDITOR_LINE = re.compile("[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


@pytest.mark.parametrize("text", [
    "a",
    "\n",
    "x = 1\r\ny = 2\r\n",
    "x = 1\ry = 2\r\n",
    "x = 1\ry = 2\x0cz = 3\u2028w = 4\n",
    "\ufeffname = '\u3000\xa0 caf\u00e9 \U0001F600'\x1c\x1d\x1e\x85\u2029 tail",
    "lone = '\ud800'\n\t\t\n  x\x0b",
])
def test_line_sizes_and_breaks_match_the_lines_editors_make(text: str) -> None:
    """Sizes, the longest line and whether tree-sitter's rows can be trusted, all counted over the whole text
    at once, agree with the same figures taken line by line, over the lines an editor shows."""
    lines = Lines(text)
    expected = _EDITOR_LINE.findall(text)
    assert lines.lines == expected
    assert lines.sizes == [len(line.translate(_NOT_COUNTED)) for line in expected]
    assert lines.size(1, lines.count) == len(text.translate(_NOT_COUNTED))
    assert lines.longest == max(map(len, expected))
    assert has_lone_cr(text) == bool(re.search("\r(?!\n)", text))


@pytest.mark.parametrize(("path", "language", "text", "expected"), [
    ("breaks.py", "python", "import os\x0c\ndef first():\r    return 1\n\x0c\ndef second():\n    return 2\n",
     {"first": 2, "second": 5}),
    ("breaks.js", "javascript", "const s = 'a\u2028b';\n\x0c\nfunction one() {\n  return 1;\n}\n\u2029\r"
     "function two() {\r\n  return 2;\r\n}\n", {"one": 3, "two": 7}),
])
def test_definitions_after_page_breaks_and_lone_crs_are_on_the_editors_lines(
        path: str, language: str, text: str, expected: dict[str, int]) -> None:
    """A form feed or U+2028 ends no line in an editor, a lone CR ends one for an editor but not a row for
    tree-sitter: every definition starts on the line an editor shows it on (nodes after a lone CR are placed
    by byte offsets)."""
    result = chunk_file(path, text, language, budget=10)
    validate_partition(text, result.chunks)
    assert {s.name: s.start_line for s in result.symbols if s.name in expected} == expected
    lines = _EDITOR_LINE.findall(text)
    for name, line in expected.items():
        assert name in lines[line - 1]
        assert any(c.start_line <= line <= c.end_line and name in c.text for c in result.chunks)


def test_syntax_errors_still_partition() -> None:
    result = chunked("syntax_error.py", budget=10)
    assert result.fallback_reason == ""
    assert len(result.chunks) >= 2


def test_unknown_grammar_falls_back_to_windows() -> None:
    text = "a\nb\nc\n"
    result = chunk_file("x.weird", text, "no-such-grammar")
    assert result.fallback_reason == "no grammar for 'no-such-grammar'"
    assert [c.kind for c in result.chunks] == ["window"]


def test_validate_partition_rejects_gaps_overlaps_and_edits() -> None:
    text = "a\nb\nc"
    ok = [Chunk(1, 2, "block", "", "p", "a\nb\n"), Chunk(3, 3, "block", "", "p", "c")]
    validate_partition(text, ok)
    with pytest.raises(PartitionError, match="starts at line 3; expected 1"):
        validate_partition(text, ok[1:])
    with pytest.raises(PartitionError, match="text differs"):
        validate_partition(text, [ok[0], Chunk(3, 3, "block", "", "p", "C")])
    with pytest.raises(PartitionError, match="the file has 3 lines"):
        validate_partition(text, ok[:1])
    with pytest.raises(PartitionError, match="empty file"):
        validate_partition("", ok)


# ---------------------------------------------------------------------------------------- skeleton


def test_skeleton_starts_with_the_path_and_is_capped() -> None:
    result = chunked("rust_impl.rs")
    lines = result.skeleton.text.splitlines()
    assert lines[0] == "rust_impl.rs" and "  pub fn new(x: i32, y: i32) -> Self" in lines
    assert "    Make a point." in lines
    many = "".join(f"def function_number_{i}(argument):\n    '''Doc {i}.'''\n\n" for i in range(400))
    big = chunk_file("many.py", "'''Module doc.'''\n" + many, "python")
    assert len(big.skeleton.text) <= 2000
    assert big.skeleton.text.startswith("many.py\nModule doc.\ndef function_number_0(argument)")


# --------------------------------------------------------------------------------------- languages


@pytest.mark.parametrize(("path", "head", "expected"), [
    ("a/b.py", "", "python"), ("x.tsx", "", "tsx"), ("x.ts", "", "typescript"), ("x.jsx", "", "javascript"),
    ("x.mjs", "", "javascript"), ("x.cjs", "", "javascript"), ("Gemfile", "", "ruby"), ("Rakefile", "", "ruby"),
    ("Makefile", "", "make"), ("Dockerfile", "", "dockerfile"), ("x.go", "", "go"), ("x.rs", "", "rust"),
    ("x.php", "", "php"), ("X.java", "", "java"), ("x.c", "", "c"), ("x.cc", "", "cpp"), ("x.cs", "", "csharp"),
    ("x.kt", "", "kotlin"), ("x.swift", "", "swift"), ("x.lua", "", "lua"), ("x.sh", "", "bash"),
    ("x.toml", "", "toml"), ("x.yml", "", "yaml"), ("x.json", "", "json"), ("x.html", "", "html"),
    ("x.css", "", "css"), ("x.sql", "", "sql"), ("README.md", "", "markdown"), ("x.rst", "", "rst"),
    ("x.adoc", "", "asciidoc"), ("notes.txt", "", "text"), ("LICENSE", "", "text"),
    ("bin/tool", "#!/usr/bin/env python3\n", "python"), ("bin/run", "#!/bin/sh\nset -e\n", "bash"),
    ("bin/serve", "#!/usr/bin/env -S node --harmony\n", "javascript"), ("x.unknownext", "", "text"),
])
def test_detect_language(path: str, head: str, expected: str) -> None:
    assert detect_language(path, head) == expected


def test_doc_languages() -> None:
    assert all(is_doc_language(name) for name in ("markdown", "rst", "asciidoc", "text"))
    assert not any(is_doc_language(name) for name in ("toml", "yaml", "json", "python"))


def test_available_languages_come_from_the_pack() -> None:
    languages = available_languages()
    assert languages == sorted(languages)
    assert set(languages) <= set(typing.get_args(tree_sitter_language_pack.SupportedLanguage))
    assert {"python", "typescript", "tsx", "ruby", "go", "rust", "php", "bash", "yaml"} <= set(languages)
    assert isinstance(CHUNKER_VERSION, int)


# --------------------------------------------------------------------------------------------- CLI


def test_cli_chunks_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chunks", str(FIXTURES / "rust_impl.rs"), "--json", "--chunk-budget", "100"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["start_line"] == 1 and rows[-1]["end_line"] == 25
    assert {"start_line", "end_line", "kind", "name", "breadcrumb", "symbols"} <= set(rows[0])
    assert any("Point.new" in row["symbols"] for row in rows)


def test_cli_chunks_a_link_to_a_file_outside_its_workspace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The file's place in its workspace was taken from the link's target: a link out of the workspace ended in a
    # ValueError traceback. It is named by the link, where the user (and the workspace) put it.
    (tmp_path / "ws" / ".git").mkdir(parents=True)
    (tmp_path / "elsewhere.py").write_text("def far():\n    return 1\n")
    (tmp_path / "ws" / "near.py").symlink_to(tmp_path / "elsewhere.py")
    assert main(["chunks", str(tmp_path / "ws" / "near.py"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert (rows[0]["start_line"], rows[-1]["end_line"]) == (1, 2) and rows[0]["breadcrumb"].startswith("near.py")


def test_cli_chunks_table_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["chunks", str(FIXTURES / "fences.md")]) == 0
    assert "section" in capsys.readouterr().out
    assert main(["chunks", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["chunks", str(tmp_path)]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_cli_chunks_refuses_a_file_larger_than_any_index_reads(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2 GB file (a sparse one costs no disk) was read whole and chunked: some 10 GB of memory, then a MemoryError
    traceback. Past the largest `max_file_bytes` any settings allow it is one line saying so (a lowered bound here)."""
    from codeloupe import settings

    monkeypatch.setattr(settings, "MAX_FILE_BYTES_CEILING", 2 * 2**20, raising=False)
    (tmp_path / ".git").mkdir()
    with open(tmp_path / "huge.py", "wb") as fh:
        fh.truncate(2 * 2**20 + 1)
    assert main(["chunks", str(tmp_path / "huge.py")]) == 2
    assert "huge.py: over 2 MiB, more than any index reads (max_file_bytes)" in capsys.readouterr().err


def test_cli_chunks_prints_each_file_and_chunk_on_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A newline in the file's name started a line of its own (a forged row of the table), and a control character
    in it or in a heading drove the terminal: the name, the fallback reason, names and breadcrumbs are shown as
    `one_line` shows them."""
    giant = tmp_path / "giant\nline.py"
    giant.write_text("x = '" + "a" * 25_000 + "'\n")
    assert main(["chunks", str(giant)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tmp_path}/giant\\nline.py: python, 1 chunk, 0 symbols") and "(fallback: giant line" in lines[0]
    assert len(lines) == 2 and lines[1].endswith("giant\\nline.py"), lines

    headed = tmp_path / "doc\n\x1b]0;owned\x07.md"
    headed.write_text("# Setup\x1b[2J\n\ntext\n")
    assert main(["chunks", str(headed)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "Setup\\x1b[2J" in out
    assert len(out.splitlines()) == 2 and out.splitlines()[0].startswith(f"{tmp_path}/doc\\n\\x1b]0;owned\\x07.md: ")


def test_cli_languages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["languages", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == available_languages()
