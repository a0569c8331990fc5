"""Documentation prose -> the file it describes, with that prose removed from the indexed tree.

    python bench/devsets/docs_pairs.py [--pkgs /work/corpora/pkgs] [--out /work/corpora/devsets] [--per-package 12]

From every package's Markdown / reStructuredText files (README, docs/, ...) it takes prose paragraphs (no code
blocks, tables, directives or HTML) and makes two kinds of query:
- ``short`` (code mode): a paragraph that names, as code (`x`, ``x``, :func:`x`), a definition found in exactly
  one implementation file of the package. The query is the first sentence naming it (plus the next one when
  short), with the code spans that name definitions of that file REMOVED -- they would hand over the answer;
  the gold is that file and the definition.
- ``docs`` (docs mode), in packages with at least `MIN_DOC_FILES` documentation files: a paragraph of at least
  `MIN_DOCS_WORDS` words and no code spans; the query is its first sentence(s), the gold is the document it
  came from.
Either way the paragraph is blanked (lines kept empty) in the indexed copy, OUT/trees/docs/<id>/repo, and a
query whose words (or first 8 words) still occur anywhere in that copy is dropped. Writes docs.dev.json /
docs.test.json, split by repository like every set.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections import defaultdict
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

SET_NAME = "docs"
TREE_NOTE = "documentation paragraphs the queries were taken from blanked (lines kept empty)"
MIN_DOC_FILES, MIN_DOCS_WORDS, MIN_WORDS, MAX_WORDS = 3, 25, 8, 50
_DOC_SUFFIXES = (".md", ".markdown", ".rst")
_CODE_LANGUAGES = {"python", "javascript", "typescript", "tsx", "rust", "go", "php", "ruby"}
_DEF_KINDS = {"function", "method", "class", "struct", "enum", "trait", "interface", "type", "module"}
_CODE_SPAN = re.compile(r"(?::[\w:]+:|\{[\w:]+\})?`{1,2}([^`]+)`{1,2}_?")
# Release notes and contributor files describe changes and people, not what a file does.
# Test data, fixtures and vendored files are not the package's documentation either.
_NOT_DOCS = re.compile(r"(^|/)(changelog|changes|history|news|authors|contributors|contributing|code_of_conduct|"
                       r"security|license|releasing)[^/]*$|(^|/)(changelog|changes|tests?|testdata|fixtures|"
                       r"vendor|node_modules)/", re.IGNORECASE)
# A query is a whole sentence of prose: it starts with a capital, is not a release note, holds no template code.
_SENTENCE = re.compile(r"^(?!(Fixed|Added|Changed|Removed|Deprecated)\b)[A-Z][^{}%|]*$")
MAX_REMOVED_SPANS = 2
_NOT_PROSE = re.compile(r"^(\s{4,}|\t|```|~~~|\||<|\.\.|:\w+:|[=\-~^*#+`]{3,}\s*$|!\[|\[!\[|>)")


@dataclass(frozen=True)
class Paragraph:
    path: str
    first: int  # 0-based line range, inclusive
    last: int
    text: str


def paragraphs(path: str, text: str) -> list[Paragraph]:
    """Plain prose paragraphs of a Markdown or reST file (outside fences, not headings, lists or tables)."""
    lines = text.split("\n")
    out: list[Paragraph] = []
    fenced, start = False, None

    def close(end: int) -> None:
        if start is not None:
            body = " ".join(line.strip() for line in lines[start:end + 1])
            out.append(Paragraph(path, start, end, body))

    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith(("```", "~~~")):
            fenced = not fenced
        next_is_rule = i + 1 < len(lines) and re.fullmatch(r"[=\-~^*#+`]{3,}", lines[i + 1].strip() or "x")
        prose = (not fenced and s and not _NOT_PROSE.match(line) and not s.startswith(("#", "- ", "* ", "+ "))
                 and not re.match(r"\d+\.\s", s) and not next_is_rule and not s.endswith("::"))
        if prose:
            start = i if start is None else start
        else:
            close(i - 1)
            start = None
    close(len(lines) - 1)
    return out


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`*])", text) if s]


def _clip(text: str) -> str:
    return " ".join(text.split()[:MAX_WORDS])


def _span_names(span: str) -> set[str]:
    tail = span.strip().lstrip("~!").rstrip("()").split("(")[0]
    return {tail.split(".")[-1].split("::")[-1].split("#")[-1]} if tail else set()


def definitions(files: dict[str, str]) -> dict[str, set[tuple[str, str]]]:
    """name -> {(file, qualified name)} over the package's implementation files."""
    defined: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path, text in files.items():
        language = detect_language(path, text[:256])
        if language not in _CODE_LANGUAGES or not is_implementation(path):
            continue
        for symbol in chunk_file(path, text, language).symbols:
            if symbol.kind in _DEF_KINDS and len(symbol.name) >= 4:
                defined[symbol.name].add((path, symbol.qualified_name))
    return defined


def name_words(name: str) -> str:
    """A definition's name as the plain words a person would write for it: `FileStorage` -> "file storage"."""
    name = name.split(".")[-1].split("::")[-1].split("#")[-1].strip("_")
    return " ".join(p.lower() for p in re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).replace("_", " ").split())


def short_query(paragraph: Paragraph, defined: dict[str, set[tuple[str, str]]],
                names_as_words: bool = False) -> tuple[str, str, str] | None:
    """(query, gold file, gold symbol) when the paragraph names definitions of exactly one file. The code spans
    naming them are removed, or with `names_as_words` written as plain words (`name_words`)."""
    targets = {}
    for match in _CODE_SPAN.finditer(paragraph.text):
        for name in _span_names(match.group(1)):
            sites = defined.get(name, set())
            if len({path for path, _ in sites}) == 1 and not name.startswith("__"):
                targets[name] = min(sites)  # one file; its first name in order (a set has none)
    files = {path for path, _ in targets.values()}
    if len(files) != 1:
        return None
    gold = files.pop()
    gold_names = {name for name, (path, _) in targets.items() if path == gold}
    sentences = _sentences(paragraph.text)
    index = next((i for i, s in enumerate(sentences) if any(n in s for n in gold_names)), None)
    if index is None:
        return None
    text = sentences[index]
    if len(text.split()) < 12 and index + 1 < len(sentences):
        text = f"{text} {sentences[index + 1]}"

    removed = [m for m in _CODE_SPAN.finditer(text) if _span_names(m.group(1)) & gold_names]
    if len(removed) > MAX_REMOVED_SPANS:
        return None

    def replace(match: re.Match) -> str:
        named = _span_names(match.group(1)) & gold_names
        if not named:
            return match.group(1)
        return name_words(sorted(named)[0]) if names_as_words else ""

    text = re.sub(r"\[([^\]]*)\](\([^)]*\)|\[[^\]]*\])", r"\1", text)
    query = re.sub(r"\s+([.,;:])", r"\1", re.sub(r"\s+", " ", _CODE_SPAN.sub(replace, text))).strip()
    if ((not names_as_words and any(name in query for name in gold_names)) or len(normalise(query).split()) < MIN_WORDS
            or not _SENTENCE.match(query)):
        return None
    first_name = sorted(gold_names)[0]
    return _clip(query), gold, targets[first_name][1]


def _docs_query(paragraph: Paragraph) -> str | None:
    if _CODE_SPAN.search(paragraph.text) or len(paragraph.text.split()) < MIN_DOCS_WORDS:
        return None
    sentences = _sentences(paragraph.text)
    text = sentences[0] if len(sentences[0].split()) >= 12 or len(sentences) == 1 else " ".join(sentences[:2])
    text = re.sub(r"[*_]{1,2}([^*_]+)[*_]{1,2}", r"\1", text)
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    usable = "http" not in text and len(text.split()) >= MIN_WORDS and _SENTENCE.match(text)
    return _clip(text) if usable else None


def build_corpus(package: Package, pkgs_dir: Path, trees: Path, per_package: int) -> CorpusOut:
    repo = repo_path(package, pkgs_dir)
    undecodable: list[str] = []
    files = dict(source_files(repo, undecodable))
    docs = [path for path in files if path.lower().endswith(_DOC_SUFFIXES) and not _NOT_DOCS.search(path)]
    defined = definitions(files)
    candidates: list[tuple[Paragraph, str, str, str, str]] = []  # paragraph, kind, query, gold file, symbol
    for path in docs:
        for paragraph in paragraphs(path, files[path]):
            short = short_query(paragraph, defined)
            if short:
                candidates.append((paragraph, "short", *short))
            elif len(docs) >= MIN_DOC_FILES and (query := _docs_query(paragraph)):
                candidates.append((paragraph, "docs", query, path, ""))
    candidates.sort(key=lambda c: hashlib.sha1(f"{c[0].path}:{c[0].first}".encode()).hexdigest())
    chosen = [c for c in candidates if c[1] == "short"][:per_package * 2]
    chosen += [c for c in candidates if c[1] == "docs"][:per_package * 2]

    lines_of = {path: files[path].split("\n") for path in {c[0].path for c in chosen}}
    for paragraph, *_ in chosen:
        for i in range(paragraph.first, paragraph.last + 1):
            lines_of[paragraph.path][i] = ""
    stripped = {path: "\n".join(lines) for path, lines in lines_of.items()}
    findable = still_findable(files, stripped)

    out = CorpusOut(package, tree_note(TREE_NOTE, undecodable))
    kept = defaultdict(int)
    for paragraph, kind, query, gold, symbol in chosen:
        if kept[kind] >= per_package or findable(query):
            continue
        kept[kind] += 1
        out.queries.append({
            "id": f"{package.id}-{kind}-{len(out.queries) + 1:03d}", "kind": kind, "query": query,
            "gold_files": [gold], "gold_symbols": [symbol] if symbol else [],
            "note": f"from {paragraph.path} lines {paragraph.first + 1}-{paragraph.last + 1} (blanked in the tree)",
        })
    if out.queries:
        copy_tree(repo, trees / package.id / "repo", stripped, undecodable)
    return out


def main(argv: list[str] | None = None) -> int:
    return run_builder(SET_NAME, build_corpus, __doc__, 12, argv)


if __name__ == "__main__":
    sys.exit(main())
