"""What the graph lends retrieval: words, never a score (rule 3).

`neighbour_words` gives each file the names its neighbours know it by (what it calls, which definitions call
it); the summary lane (`lanes.summary`) indexes them as text beside the file's skeleton, where BM25 weighs them
like any other words.
"""

from __future__ import annotations

import bisect
import sys
from array import array
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codeloupe.graph.build import Graph


def neighbour_words(graph: Graph) -> dict[str, list[str]]:
    """path -> the distinct names of what the file calls or imports from other workspace files, and of the
    definitions (and the file stems) in other files that call into it. Hubs' callers are left out: the
    names of everything that logs say nothing about the logger.

    Every file's words are held at once (for the summary lane), so each distinct word is one string object;
    each caller's definitions are decoded once, for the names around its edges' lines, and let go (at 40K
    files they would otherwise all be alive together). Edges are read as columns: no `Edge` is made."""
    table = graph.edges
    carriers, symbols, lines = table.carriers, table.symbols.tolist(), table.line.tolist()
    words: list[dict[str, None]] = [{} for _ in graph.paths]
    around = [""] * len(lines)  # per edge: the caller's innermost definition around its line
    for i in range(len(graph.paths)):
        out_rows = table.neighbour_rows(i, incoming=False)
        for rows in out_rows.values():
            for row in rows:
                words[i].update((symbol, None) for symbol in carriers[symbols[row]])
        into = [row for target, rows in out_rows.items() if target not in graph.gods for row in rows]
        if into:
            spans = _Spans(graph.definitions.spans(i))
            for row in into:
                around[row] = spans.enclosing(lines[row])
    for i in range(len(graph.paths)):
        if i not in graph.gods:
            for j, rows in table.neighbour_rows(i, incoming=True).items():
                words[i][sys.intern(graph.paths[j].rsplit("/", 1)[-1].rsplit(".", 1)[0])] = None
                words[i].update((around[row], None) for row in rows if around[row])
    return {path: list(words[i]) for i, path in enumerate(graph.paths) if words[i]}


class _Spans:
    """A file's definitions, for the innermost one that holds a line."""

    def __init__(self, definitions: list[tuple[str, int, int]]) -> None:
        """`definitions`: (name, start line, end line) each."""
        ordered = sorted(definitions, key=lambda d: (d[1], -d[2]))
        self._starts = array("i", (start for _, start, _ in ordered))
        self._ends = array("i", (end for _, _, end in ordered))
        self._names = tuple(name for name, _, _ in ordered)

    def enclosing(self, line: int) -> str:
        k = bisect.bisect_right(self._starts, line) - 1
        while k >= 0:  # the nearest start at or above the line whose span reaches it is the innermost
            if self._ends[k] >= line:
                return sys.intern(self._names[k])
            k -= 1
        return ""
