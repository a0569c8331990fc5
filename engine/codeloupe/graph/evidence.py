"""What the graph lends retrieval: words, never a score (rule 3).

`neighbour_words` gives each file the names its neighbours know it by (what it calls, which definitions call
it); the summary lane (`lanes.summary`) indexes them as text beside the file's skeleton, where BM25 weighs them
like any other words.
"""

from __future__ import annotations

import bisect
import sys
from array import array
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codeloupe.graph.build import Graph


def neighbour_words(graph: Graph, paths: Iterable[str] | None = None) -> dict[str, list[str]]:
    """path -> the distinct names of what the file calls or imports from other workspace files, and of the
    definitions (and the file stems) in other files that call into it; for every file, or for `paths` alone
    (the files a delta view took in). Hubs' callers are left out: the names of everything that logs say
    nothing about the logger.

    Every file's words are held at once (for the summary lane), so each distinct word is one string object;
    each caller's definitions are decoded once, for the names around its edges' lines, and let go (at 40K
    files they would otherwise all be alive together). Edges are read as columns: no `Edge` is made."""
    table = graph.edges
    carriers = table.carriers
    # per edge: the caller's innermost definition around its line
    around: list[str] | dict[int, str]
    if paths is None:  # every row is read: as lists, once
        symbols, lines = table.symbols.tolist(), table.line.tolist()
        wanted: Collection[int] = range(len(graph.paths))
        callers: Iterable[int] = wanted
        around = [""] * len(lines)
    else:  # a few files' rows: read where they are (a list of every row took ~10 ms at 40K files)
        symbols, lines = table.symbols, table.line
        wanted = {i for i in map(graph.index_of, paths) if i is not None}
        callers = sorted({j for i in wanted if i not in graph.gods for j in table.neighbour_rows(i, incoming=True)})
        around = {}
    words: dict[int, dict[str, None]] = {i: {} for i in wanted}
    for j in callers:
        into = [row for target, rows in table.neighbour_rows(j, incoming=False).items()
                if target not in graph.gods and target in wanted for row in rows]
        if into:
            spans = _Spans(graph.definitions.spans(j))
            for row in into:
                around[row] = spans.enclosing(lines[row])
    for i in wanted:
        for rows in table.neighbour_rows(i, incoming=False).values():
            for row in rows:
                words[i].update((symbol, None) for symbol in carriers[symbols[row]])
        if i not in graph.gods:
            for j, rows in table.neighbour_rows(i, incoming=True).items():
                words[i][sys.intern(graph.paths[j].rsplit("/", 1)[-1].rsplit(".", 1)[0])] = None
                words[i].update((around[row], None) for row in rows if around[row])
    return {graph.paths[i]: list(found) for i, found in sorted(words.items()) if found}


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
