"""Legacy PHP: HTML islands and top-level statement soup, chunked like prose with banner-comment headings.

Such files have no classes to split on; their authors structure them with banner comments
(`//--------` rules around a title) and `<?php ... ?>` islands. Those become the cut points.
"""

from __future__ import annotations

import re

from codeloupe.chunk.lines import Lines
from codeloupe.chunk.sections import FORBIDDEN, CutPlan, heading_score
from codeloupe.chunk.syntax import Definition, Node

_MODERN = frozenset({"namespace_definition", "class_declaration", "interface_declaration",
                     "trait_declaration", "enum_declaration"})
_QUIET = frozenset({"php_tag", "comment", "function_definition", "text", "text_interpolation"})
_HTML = frozenset({"text", "text_interpolation"})
_BANNER_RULE = re.compile(r"^\s*(?://+|#+|/\*+|\*+)\s*[-=*#~_+]{4,}")
_COMMENT_LINE = re.compile(r"^\s*(?://|#|/\*|\*)")
_COMMENT_TEXT = re.compile(r"^\s*(?://+|#+|/\*+|\*+)\s*(.*?)\s*(?:\*+/)?\s*$")
_ISLAND = re.compile(r"^\s*(?:<\?(?:php|=)?|\?>)")
ISLAND_SCORE = 40
DEFINITION_SCORE = 70
_STATEMENT_SOUP = 5  # top-level statements (outside functions) that make a file a script, not a library


def is_legacy_php(root: Node) -> bool:
    """No namespace and no classes, and either HTML islands or a soup of top-level statements."""
    children = root.named_children
    if any(child.type in _MODERN for child in children):
        return False
    if any(child.type in _HTML and child.text and child.text.strip() for child in children):
        return True
    return sum(child.type not in _QUIET for child in children) >= _STATEMENT_SOUP


def legacy_php_plan(lines: Lines, definitions: list[Definition]) -> CutPlan:
    texts = [line.rstrip("\r\n") for line in lines.lines]
    scores = [0] * len(texts)
    for index in range(1, len(texts)):
        if texts[index].strip() and not texts[index - 1].strip():
            scores[index] = 20
        if _ISLAND.match(texts[index]):
            scores[index] = max(scores[index], ISLAND_SCORE)
    plan = CutPlan(scores)
    for definition in definitions:
        if definition.owner is not None:
            continue
        for inside in range(definition.start, min(definition.end, len(texts))):
            scores[inside] = FORBIDDEN
        scores[definition.start - 1] = max(scores[definition.start - 1], DEFINITION_SCORE)
        plan.headings[definition.start - 1] = (2, definition.qualname)
    index = 0
    while index < len(texts):
        if scores[index] == FORBIDDEN or not _BANNER_RULE.match(texts[index]):
            index += 1
            continue
        block_end = index
        while block_end + 1 < len(texts) and _COMMENT_LINE.match(texts[block_end + 1]):
            block_end += 1
        titles = [_COMMENT_TEXT.match(texts[i]) for i in range(index, block_end + 1)
                  if not _BANNER_RULE.match(texts[i])]
        title = next((m.group(1) for m in titles if m and m.group(1)), "")
        scores[index] = heading_score(1)
        plan.headings[index] = (1, title)
        index = block_end + 1
    return plan
