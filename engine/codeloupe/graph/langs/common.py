"""Small tree-sitter helpers shared by the language walkers."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING

from tree_sitter import Node, Parser

from codeloupe.chunk.languages import parse as parse_source

if TYPE_CHECKING:
    from codeloupe.graph.facts import FactsBuilder


@cache
def parser_for(grammar: str) -> Parser:
    from tree_sitter_language_pack import get_parser

    return get_parser(grammar)


def parse(grammar: str, source: bytes) -> Node:
    """The tree of `source` (UTF-8), past-U+FFFF characters read as letters (`codeloupe.chunk.languages.parse`): a
    node's `text` has them as `xxxx`, so names are read from `source` by its offsets (`FactsBuilder.text`)."""
    return parse_source(parser_for(grammar), source).root_node


def walk(root: Node) -> Iterator[Node]:
    """Every named node below `root`, in source order (pre-order), without recursion."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.named_children))


def string_value(out: FactsBuilder, node: Node | None) -> str:
    """The contents of a string literal node without its quotes; "" for anything that is not a plain string."""
    if node is None:
        return ""
    raw = out.text(node)
    if len(raw) >= 2 and raw[0] in "'\"`" and raw[-1] == raw[0]:
        inner = raw[1:-1]
        if raw[0] == "`" and "${" in inner:
            return ""  # a template with substitutions names no fixed file
        return inner
    return ""


def enclosing(out: FactsBuilder, node: Node, kinds: frozenset[str], name_field: str = "name") -> list[str]:
    """Names of the enclosing definitions of the given node types, outermost first."""
    names: list[str] = []
    current = node.parent
    while current is not None:
        if current.type in kinds:
            name = out.text(current.child_by_field_name(name_field))
            if name:
                names.append(name)
        current = current.parent
    return list(reversed(names))
