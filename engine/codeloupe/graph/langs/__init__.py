"""The languages the structural lane understands: an extractor and a resolver per language name (the names
are the chunker's `detect_language` names, stored in the index's `files.language`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from codeloupe.graph.facts import FileFacts
from codeloupe.graph.langs import golang, javascript, php, python, ruby, rust
from codeloupe.graph.resolve import LanguageResolver

_JS = javascript.JavaScriptResolver()

EXTRACTORS: dict[str, Callable[[str], FileFacts]] = {
    "python": python.extract,
    "javascript": partial(javascript.extract, grammar="javascript"),
    "typescript": partial(javascript.extract, grammar="typescript"),
    "tsx": partial(javascript.extract, grammar="tsx"),
    "go": golang.extract,
    "php": php.extract,
    "ruby": ruby.extract,
    "rust": rust.extract,
}

RESOLVERS: dict[str, LanguageResolver] = {
    "python": python.PythonResolver(),
    "javascript": _JS,
    "typescript": _JS,
    "tsx": _JS,
    "go": golang.GoResolver(),
    "php": php.PhpResolver(),
    "ruby": ruby.RubyResolver(),
    "rust": rust.RustResolver(),
}


def extract_facts(language: str, text: str) -> FileFacts | None:
    """The file's facts, or None for a language the graph does not read (it stays a node without edges)."""
    extractor = EXTRACTORS.get(language)
    return extractor(text) if extractor is not None else None
