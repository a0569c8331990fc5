"""Doc comment -> definition pairs (CodeSearchNet style), with the doc comment stripped from the indexed tree.

    python bench/devsets/doc_pairs.py [--pkgs /work/corpora/pkgs] [--out /work/corpora/devsets] [--per-package 40]

For every definition (function, method, class, type, ...) in a package's implementation files that carries a
doc comment, the query is the comment's first sentences; the gold is the defining file and the definition's
qualified name. The corpus indexed for the query is a copy of the package in which the doc comments of the
queried definitions are blanked (their lines kept empty, so line numbers stay), so the answer cannot be found
by matching the comment's words. Dropped, mechanically:
- comments too short (fewer than 5 words, or fewer than 3 beyond the definition's own name) or that point
  elsewhere or are tool output (see `_BOILERPLATE`);
- a query whose words (or its first 8 words) still occur anywhere in the stripped tree (a copy in a bundle, a
  README, a type declaration, a twin definition): the answer would again be a string match or ambiguous;
- a query text that two definitions share.
At most --per-package queries per package (a deterministic sample) so large packages do not dominate.
Writes docpairs.dev.json / docpairs.test.json (split by repository) and the stripped trees under
OUT/trees/docpairs/<id>/repo.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from common import (
    CorpusOut,
    copy_tree,
    is_implementation,
    normalise,
    run_builder,
    source_files,
    still_findable,
    tree_note,
)

from codeloupe.chunk import chunk_file, detect_language
from packages import Package, repo_path

SET_NAME = "docpairs"
TREE_NOTE = "doc comments of the queried definitions blanked (lines kept empty, line numbers unchanged)"
MIN_WORDS, MIN_NEW_WORDS, MAX_WORDS = 5, 3, 50
# Doc comments that say nothing of their own: pointers elsewhere, tool pragmas, licences, generated text.
_BOILERPLATE = re.compile(
    r"(generated|do not edit|deprecated|inheritdoc|\bsee\b|\balias\b|\btodo\b|fixme|copyright|license|"
    r"eslint|istanbul|noinspection|phpstan|psalm|@internal|same as|\bshortcut for|implementation of|"
    r"\boverride|implements)", re.IGNORECASE)
_KINDS = {"function", "method", "class", "struct", "enum", "trait", "interface", "type", "module", "impl"}
_LANGUAGES = {"python", "javascript", "typescript", "tsx", "rust", "go", "php", "ruby"}
# Per language: the line prefixes that make a doc comment above a definition, and lines allowed between the
# comment and the definition (attributes, decorators).
_LINE_DOC = {"rust": ("///",), "go": ("//",), "ruby": ("#",)}
_BLOCK_DOC = {"javascript", "typescript", "tsx", "php"}
_BETWEEN = {"rust": ("#[",), "php": ("#[",), "typescript": ("@",), "tsx": ("@",), "javascript": ("@",)}


@dataclass(frozen=True)
class DocSite:
    path: str
    symbol: str  # qualified name
    first: int  # 0-based lines of the doc comment, inclusive
    last: int
    raw: str  # the comment's text with its markers removed
    solo_body: bool = False  # Python: the docstring is the whole body (blanking leaves `...` there)


# ----------------------------------------------------------------------------------------------- finding


def _python_sites(path: str, text: str) -> list[DocSite]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    sites: list[DocSite] = []

    def visit(node: ast.AST, parents: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                body = child.body
                first = body[0] if body else None
                if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                        and isinstance(first.value.value, str) and first.end_lineno is not None):
                    sites.append(DocSite(path, ".".join((*parents, child.name)), first.lineno - 1,
                                         first.end_lineno - 1, first.value.value, solo_body=len(body) == 1))
                visit(child, (*parents, child.name))

    visit(tree, ())
    return sites


def _block_above(stripped: list[str], def_line: int, between: tuple[str, ...]) -> tuple[int, int] | None:
    """A `/** ... */` block that opens the definition's range or ends right above it (decorators between)."""
    if stripped[def_line].startswith("/**"):
        end = def_line
        while end < len(stripped) and not stripped[end].endswith("*/"):
            end += 1
        return (def_line, end) if end < len(stripped) else None
    i = def_line - 1
    while i >= 0 and between and stripped[i].startswith(between):
        i -= 1
    if i < 0 or not stripped[i].endswith("*/") or not stripped[i].startswith(("*", "/**")):
        return None
    end = i
    while i >= 0 and not stripped[i].startswith("/**"):
        if not stripped[i].startswith("*"):
            return None
        i -= 1
    return (i, end) if i >= 0 else None


def _comment_above(lines: list[str], def_line: int, language: str) -> tuple[int, int] | None:
    """The 0-based line range of the doc comment directly above (or opening) the definition at `def_line`."""
    between = _BETWEEN.get(language, ())
    stripped = [line.strip() for line in lines]
    if language in _BLOCK_DOC:
        return _block_above(stripped, def_line, between)
    prefixes = _LINE_DOC.get(language)
    if not prefixes:
        return None
    inner = "//!" if language == "rust" else None
    i = def_line
    if not stripped[i].startswith(prefixes):  # the definition's own line: look above it
        i -= 1
        while i >= 0 and between and stripped[i].startswith(between):
            i -= 1
    else:
        while i < len(lines) and stripped[i].startswith(prefixes):
            i += 1
        i -= 1
    end = i
    while i >= 0 and stripped[i].startswith(prefixes) and not (inner and stripped[i].startswith(inner)):
        i -= 1
    return (i + 1, end) if end > i else None


def _strip_markers(block: list[str]) -> str:
    out = []
    for line in block:
        s = line.strip()
        s = re.sub(r"^(/\*\*+|\*/|\*+/?|///|//|#+)", "", s).removesuffix("*/").strip()
        out.append(s)
    return "\n".join(out)


def _symbol_sites(path: str, text: str, language: str) -> list[DocSite]:
    result = chunk_file(path, text, language)
    lines = text.split("\n")
    sites = []
    for symbol in result.symbols:
        if symbol.kind not in _KINDS or not 1 <= symbol.start_line <= len(lines):
            continue
        found = _comment_above(lines, symbol.start_line - 1, language)
        if found is None:
            continue
        first, last = found
        sites.append(DocSite(path, symbol.qualified_name, first, last, _strip_markers(lines[first:last + 1])))
    return sites


def doc_sites(path: str, text: str) -> list[DocSite]:
    language = detect_language(path, text[:256])
    if language not in _LANGUAGES or not is_implementation(path):
        return []
    return _python_sites(path, text) if language == "python" else _symbol_sites(path, text, language)


# ------------------------------------------------------------------------------------------- the query


def _first_paragraph(raw: str) -> str:
    kept = []
    for line in raw.strip().split("\n"):
        s = line.strip()
        if not s:
            if kept:
                break
            continue
        if s.startswith(("@", ":", "# ", "Args:", "Returns:", "Parameters", "Example", ">>>", "```", "..")):
            break
        kept.append(s)
    text = " ".join(kept)
    text = re.sub(r"\{@\w+\s+([^}]*)\}", r"\1", text)  # {@link Foo} -> Foo
    text = re.sub(r"\[`?([^\]`]+)`?\]\([^)]*\)", r"\1", text)  # [text](url) -> text
    text = re.sub(r"\[`?([^\]`]+)`?\]", r"\1", text)  # [`Foo`] -> Foo
    return re.sub(r"\s+", " ", text).strip()


def query_text(raw: str, symbol: str) -> str:
    """The first one or two sentences of the comment's first paragraph, at most MAX_WORDS words.

    A leading definition name ("AddTemplateFunc adds ...", the Go convention) is cut: it hands the answer over.
    """
    paragraph = _first_paragraph(raw)
    name = symbol.rsplit(".", 1)[-1]
    paragraph = re.sub(rf"^(The\s+)?`?{re.escape(name)}`?\s+", "", paragraph)
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", paragraph)
    text = sentences[0]
    if len(text.split()) < 8 and len(sentences) > 1:
        text = f"{text} {sentences[1]}"
    return " ".join(text.split()[:MAX_WORDS])


def _name_words(symbol: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", symbol)
    return set(normalise(spaced.replace("_", " ")).split())


_STOP = set("a an the of to and or for in on is are be by with this that it its from as at if returns return "
            "get gets set sets new create creates".split())


def usable(query: str, symbol: str) -> bool:
    words = normalise(query).split()
    if len(words) < MIN_WORDS or _BOILERPLATE.search(query) or "http" in query or "<" in query:
        return False
    new = [w for w in words if w not in _STOP and w not in _name_words(symbol)]
    return len(new) >= MIN_NEW_WORDS


# ---------------------------------------------------------------------------------------------- building


def _blank(lines: list[str], site: DocSite) -> None:
    for i in range(site.first, site.last + 1):
        lines[i] = ""
    if site.solo_body:  # the docstring was the whole body: keep the definition valid Python
        indent = re.match(r"\s*", lines[site.first - 1] if site.first else "").group(0)
        lines[site.first] = " " * (len(indent) + 4) + "..."


def build_corpus(package: Package, pkgs_dir: Path, trees: Path, per_package: int) -> CorpusOut:
    repo = repo_path(package, pkgs_dir)
    undecodable: list[str] = []
    files = dict(source_files(repo, undecodable))
    candidates: list[tuple[DocSite, str]] = []
    for path, text in files.items():
        for site in doc_sites(path, text):
            query = query_text(site.raw, site.symbol)
            if usable(query, site.symbol):
                candidates.append((site, query))
    by_text: dict[str, int] = {}
    for _, query in candidates:
        by_text[normalise(query)] = by_text.get(normalise(query), 0) + 1
    candidates = [(s, q) for s, q in candidates if by_text[normalise(q)] == 1]
    candidates.sort(key=lambda sq: hashlib.sha1(f"{sq[0].path}:{sq[0].symbol}".encode()).hexdigest())
    chosen = candidates[: per_package * 2]  # room for the ones the giveaway check drops

    lines_of = {path: files[path].split("\n") for path in {s.path for s, _ in chosen}}
    for site, _ in chosen:
        _blank(lines_of[site.path], site)
    stripped = {path: "\n".join(lines) for path, lines in lines_of.items()}
    findable = still_findable(files, stripped)

    out = CorpusOut(package, tree_note(TREE_NOTE, undecodable))
    for site, query in chosen:
        if findable(query):
            continue
        out.queries.append({
            "id": f"{package.id}-doc-{len(out.queries) + 1:03d}", "kind": "short", "query": query,
            "gold_files": [site.path], "gold_symbols": [site.symbol],
            "note": f"doc comment of {site.symbol} (lines {site.first + 1}-{site.last + 1}, blanked in the tree)",
        })
        if len(out.queries) >= per_package:
            break
    if out.queries:
        copy_tree(repo, trees / package.id / "repo", stripped, undecodable)
    return out


def main(argv: list[str] | None = None) -> int:
    return run_builder(SET_NAME, build_corpus, __doc__, 40, argv)


if __name__ == "__main__":
    sys.exit(main())
