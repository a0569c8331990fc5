"""Property tests: for generated sources in every shipped language (and prose), chunk_file yields a partition.

Sources are random sequences of realistic snippets (functions, classes with methods, comments, blank lines,
language quirks) plus random text. Checked for each: `validate_partition` holds, the chunk texts concatenate
to the file, and no chunk exceeds the budget unless it is a single line (a line over budget cannot be split).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codeloupe.chunk import chunk_file, validate_partition
from codeloupe.chunk.specs import SPECS
from codeloupe.types import ChunkedFile

BUDGETS = (30, 120, 400, 4000)


def assert_partition(text: str, result: ChunkedFile, budget: int) -> None:
    validate_partition(text, result.chunks)
    assert "".join(chunk.text for chunk in result.chunks) == text
    assert not result.fallback_reason.startswith(("partition", "error")), result.fallback_reason
    for chunk in result.chunks:
        size = len("".join(chunk.text.split()))
        # The one allowed excess: a single line over budget (nothing smaller than a line exists).
        assert size <= budget or chunk.start_line == chunk.end_line, (chunk.start_line, chunk.end_line, size)


@dataclass(frozen=True)
class Snippets:
    """Templates: {n} a name, {body} statements at the function's indent, {members} methods."""

    function: str
    statement: str  # {ind} indent, {i} index, {pad} filler text
    body_indent: str
    cls: str = ""
    method: str = ""
    method_indent: str = ""
    comment: str = "// {pad}\n"
    prefix: str = ""
    extras: tuple[str, ...] = ()


C_LIKE_STMT = "{ind}int v{i} = a + {i}; // {pad}\n"
LANGS: dict[str, Snippets] = {
    "python": Snippets(
        "def {n}(a, b):\n{body}", "{ind}v{i} = a + {i}  # {pad}\n", "    ",
        cls="@dataclass\nclass {n}(Base):\n    '''Doc {n}.'''\n    X = 1\n\n{members}",
        method="    @property\n    def {n}(self, a):\n{body}", method_indent="        ", comment="# {pad}\n",
        extras=("MAX_{n} = 10\n", "{n} = lambda a: a\n", "if __name__ == '__main__':\n    main()\n"),
    ),
    "javascript": Snippets(
        "function {n}(a, b) {\n{body}}\n", "{ind}let v{i} = a + {i}; // {pad}\n", "  ",
        cls="class {n} extends Base {\n{members}}\n", method="  {n}(a) {\n{body}  }\n", method_indent="    ",
        extras=("proto.{n} = function {n}(a) {\n  return a;\n};\n", "exports.{n} = (a) => a;\n",
                "module.exports = {\n  {n}: 1,\n};\n", "export default function () {\n  return 1;\n}\n",
                "const {n} = async (a) => {\n  await a;\n};\n", "/**\n * Doc {pad}\n */\n"),
    ),
    "typescript": Snippets(
        "export function {n}(a: number): number {\n{body}  return a;\n}\n",
        "{ind}const v{i}: number = a + {i}; // {pad}\n", "  ",
        cls="export default class {n} implements I {\n  private x = 1;\n{members}}\n",
        method="  public {n}(a: number): number {\n{body}    return a;\n  }\n", method_indent="    ",
        extras=("export interface {n} {\n  a(): void;\n}\n", "type {n} = { a: string };\n",
                "namespace {n} {\n  export const x = 1;\n}\n", "enum {n} { A, B }\n"),
    ),
    "tsx": Snippets(
        "export function {n}(a: Props) {\n{body}  return <div className=\"x\">{a.b}</div>;\n}\n",
        "{ind}const v{i} = a.n + {i}; // {pad}\n", "  ",
        cls="export class {n} extends React.Component<P> {\n{members}}\n",
        method="  {n}() {\n{body}    return <span>{this.props.x}</span>;\n  }\n", method_indent="    ",
        extras=("export const {n} = () => <div />;\n",),
    ),
    "ruby": Snippets(
        "def {n}(a, b)\n{body}end\n", "{ind}v{i} = a + {i} # {pad}\n", "  ",
        cls="class {n} < Base\n  DEFAULT = 1\n  class << self\n    def build; new; end\n  end\n{members}end\n",
        method="  def {n}(a)\n{body}  end\n", method_indent="    ", comment="# {pad}\n",
        extras=("module {n}\n  def self.x; end\nend\n", "require 'json'\n", "{n}.configure do |c|\n  c.x = 1\nend\n"),
    ),
    "go": Snippets(
        "func {n}(a int) int {\n{body}\treturn a\n}\n", "{ind}v{i} := a + {i} // {pad}\n", "\t",
        cls="type {n} struct {\n\tA int\n\tB string\n}\n", prefix="package main\n\nimport \"fmt\"\n",
        extras=("func (r *{n}) Get(a int) int {\n\treturn a\n}\n", "const {n} = 3\n",
                "var (\n\t{n} = 1\n)\n"),
    ),
    "rust": Snippets(
        "fn {n}(a: i32) -> i32 {\n{body}    a\n}\n", "{ind}let v{i} = a + {i}; // {pad}\n", "    ",
        cls="impl {n} {\n{members}}\n", method="    pub fn {n}(&self, a: i32) -> i32 {\n{body}        a\n    }\n",
        method_indent="        ",
        extras=("#[derive(Debug)]\nstruct {n} {\n    a: i32,\n}\n", "impl Display for {n} {\n    fn fmt(&self) {}\n}\n",
                "mod {n} {\n    pub const X: u8 = 1;\n}\n", "trait {n} {\n    fn t(&self);\n}\n"),
    ),
    "php": Snippets(
        "function {n}($a, $b) {\n{body}}\n", "{ind}$v{i} = $a + {i}; // {pad}\n", "    ",
        cls="class {n} extends Base {\n    const X = 1;\n{members}}\n",
        method="    public function {n}($a) {\n{body}    }\n", method_indent="        ", prefix="<?php\n",
        extras=("?>\n<div>{pad}</div>\n<?php\n", "//------------\n// {pad}\n//------------\n", "echo $a;\n",
                "namespace App\\{n};\n"),
    ),
    "java": Snippets(
        "interface {n} {\n  void run();\n}\n", C_LIKE_STMT, "    ",
        cls="@Entity\npublic class {n} extends Base {\n  private int x;\n{members}}\n",
        method="  public int {n}(int a) {\n{body}    return a;\n  }\n", method_indent="    ",
        prefix="package a.b;\n", extras=("enum {n} { A, B }\n", "record {n}(int a) {}\n"),
    ),
    "c": Snippets(
        "static int {n}(int a) {\n{body}    return a;\n}\n", C_LIKE_STMT, "    ",
        cls="struct {n} {\n    int a;\n    char *b;\n};\n",
        extras=("#define {n}_MAX 10\n", "#include <stdio.h>\n", "typedef struct {\n    int b;\n} {n};\n",
                "int *{n}(void);\n"),
    ),
    "cpp": Snippets(
        "int {n}(int a) {\n{body}    return a;\n}\n", C_LIKE_STMT, "    ",
        cls="class {n} : public Base {\n public:\n{members}};\n",
        method="    int {n}(int a) {\n{body}        return a;\n    }\n", method_indent="        ",
        extras=("namespace {n} {\nint f(int a) { return a; }\n}\n",
                "template <typename T>\nT {n}(T a) {\n    return a;\n}\n", "void A::{n}() {}\n"),
    ),
    "csharp": Snippets(
        "namespace N{n} {\n    class C {}\n}\n", "{ind}var v{i} = a + {i}; // {pad}\n", "        ",
        cls="public class {n} : Base\n{\n{members}}\n",
        method="    public int {n}(int a)\n    {\n{body}        return a;\n    }\n", method_indent="        ",
        prefix="using System;\n", extras=("interface I{n} { void M(); }\n", "public int {n} { get; set; }\n"),
    ),
    "kotlin": Snippets(
        "fun {n}(a: Int): Int {\n{body}    return a\n}\n", "{ind}val v{i} = a + {i} // {pad}\n", "    ",
        cls="class {n} : Base() {\n{members}}\n", method="    fun {n}(a: Int): Int {\n{body}        return a\n    }\n",
        method_indent="        ", prefix="package a\n", extras=("object {n} {\n    val x = 1\n}\n",),
    ),
    "swift": Snippets(
        "func {n}(a: Int) -> Int {\n{body}    return a\n}\n", "{ind}let v{i} = a + {i} // {pad}\n", "    ",
        cls="class {n}: Base {\n{members}}\n", method="    func {n}(a: Int) -> Int {\n{body}        return a\n    }\n",
        method_indent="        ", extras=("extension {n} {\n    func e() {}\n}\n", "protocol {n} {}\n"),
    ),
    "lua": Snippets(
        "local function {n}(a, b)\n{body}  return a\nend\n", "{ind}local v{i} = a + {i} -- {pad}\n", "  ",
        cls="function M.{n}(a)\n  return a\nend\n", comment="-- {pad}\n",
        extras=("function M:{n}(a)\n  return self\nend\n", "local M = {}\n", "return M\n"),
    ),
    "bash": Snippets(
        "{n}() {\n{body}}\n", "{ind}v{i}=$(( a + {i} )) # {pad}\n", "  ",
        cls="function {n} {\n  echo \"$@\"\n}\n", comment="# {pad}\n",
        extras=("set -euo pipefail\n", "if [ -n \"$a\" ]; then\n  echo {n}\nfi\n"),
    ),
}


def test_every_shipped_spec_has_generators() -> None:
    assert set(SPECS) <= set(LANGS)


names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
pads = st.text(alphabet="abcdefgh xyz0123456789", max_size=70)


@st.composite
def code_source(draw: st.DrawFn, snippets: Snippets) -> str:
    def body(indent: str) -> str:
        count = draw(st.integers(0, 14))
        return "".join(snippets.statement.replace("{ind}", indent).replace("{i}", str(i))
                       .replace("{pad}", draw(pads)) for i in range(count))

    def fill(template: str, indent: str) -> str:
        out = template.replace("{n}", draw(names)).replace("{pad}", draw(pads))
        if "{members}" in out:
            members = "\n".join(fill(snippets.method, snippets.method_indent)
                                for _ in range(draw(st.integers(0, 5))))
            out = out.replace("{members}", members)
        return out.replace("{body}", body(indent))

    kinds = ["function", "comment", "blank", "noise"] + (["class"] if snippets.cls else [])
    kinds += ["extra"] if snippets.extras else []
    parts = [snippets.prefix]
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=10)):
        if kind == "function":
            parts.append(fill(snippets.function, snippets.body_indent))
        elif kind == "class":
            parts.append(fill(snippets.cls, snippets.body_indent))
        elif kind == "comment":
            parts.append(snippets.comment.replace("{pad}", draw(pads)) * draw(st.integers(1, 4)))
        elif kind == "blank":
            parts.append("\n" * draw(st.integers(1, 3)))
        elif kind == "extra":
            parts.append(fill(draw(st.sampled_from(snippets.extras)), snippets.body_indent))
        else:
            parts.append(draw(st.text(max_size=60)))
    text = "".join(parts)
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.booleans()):
        text = text.rstrip("\n")
    return text


@pytest.mark.parametrize("language", sorted(LANGS))
def test_generated_code_partitions(language: str) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=code_source(LANGS[language]), budget=st.sampled_from(BUDGETS))
    def check(text: str, budget: int) -> None:
        assert_partition(text, chunk_file(f"gen.{language}", text, language, budget), budget)

    check()


@st.composite
def markdown_source(draw: st.DrawFn) -> str:
    blocks = []
    for kind in draw(st.lists(st.sampled_from(["heading", "para", "fence", "setext", "list", "noise"]),
                              max_size=14)):
        words = draw(pads)
        if kind == "heading":
            blocks.append("#" * draw(st.integers(1, 6)) + " " + words + "\n")
        elif kind == "para":
            blocks.append((words + "\n") * draw(st.integers(1, 6)) + "\n")
        elif kind == "fence":
            marker = draw(st.sampled_from(["```", "~~~", "````"]))
            inner = "".join(draw(st.sampled_from(["# not a heading\n", "code()\n", "\n", "## x\n"]))
                            for _ in range(draw(st.integers(0, 8))))
            blocks.append(f"{marker}python\n{inner}{marker}\n")
        elif kind == "setext":
            blocks.append(words + "x\n" + draw(st.sampled_from(["===", "---"])) + "\n")
        elif kind == "list":
            blocks.append("".join(f"- {words} {i}\n" for i in range(draw(st.integers(1, 5)))))
        else:
            blocks.append(draw(st.text(max_size=80)))
    return "".join(blocks)


@pytest.mark.parametrize("language", ["markdown", "rst", "asciidoc", "text"])
def test_generated_prose_partitions(language: str) -> None:
    @settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=markdown_source(), budget=st.sampled_from(BUDGETS))
    def check(text: str, budget: int) -> None:
        assert_partition(text, chunk_file("gen.md", text, language, budget), budget)

    check()


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=400), budget=st.sampled_from(BUDGETS),
       language=st.sampled_from(["python", "javascript", "markdown", "text", "yaml", "no-such-grammar"]))
def test_arbitrary_text_partitions(text: str, budget: int, language: str) -> None:
    assert_partition(text, chunk_file("random", text, language, budget), budget)
