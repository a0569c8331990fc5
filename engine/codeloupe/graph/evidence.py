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
    from codeloupe.graph.facts import Definition


def neighbour_words(graph: Graph) -> dict[str, list[str]]:
    """path -> the distinct names of what the file calls or imports from other workspace files, and of the
    definitions (and the file stems) in other files that call into it. Hubs' callers are left out: the
    names of everything that logs say nothing about the logger.

    Every file's words are held at once (for the summary lane), so each distinct word is one string object,
    and each caller's spans are kept as arrays: at 40K files the decoded definitions of every caller would
    otherwise all be alive together."""
    out: dict[str, list[str]] = {}
    spans: dict[int, _Spans] = {}
    for i, path in enumerate(graph.paths):
        words: dict[str, None] = {}
        for edges in graph.out_edges[i].values():
            words.update((symbol, None) for edge in edges for symbol in edge.symbols)
        if i not in graph.gods:
            for j, edges in graph.in_edges[i].items():
                words[sys.intern(graph.paths[j].rsplit("/", 1)[-1].rsplit(".", 1)[0])] = None
                caller = spans.get(j) or spans.setdefault(j, _Spans(graph.definitions[j]))
                words.update((name, None) for edge in edges if (name := caller.enclosing(edge.line)))
        if words:
            out[path] = list(words)
    return out


class _Spans:
    """A file's definitions, for the innermost one that holds a line."""

    def __init__(self, definitions: list[Definition]) -> None:
        ordered = sorted(definitions, key=lambda d: (d.start_line, -d.end_line))
        self._starts = array("i", (d.start_line for d in ordered))
        self._ends = array("i", (d.end_line for d in ordered))
        self._names = tuple(sys.intern(d.name) for d in ordered)

    def enclosing(self, line: int) -> str:
        k = bisect.bisect_right(self._starts, line) - 1
        while k >= 0:  # the nearest start at or above the line whose span reaches it is the innermost
            if self._ends[k] >= line:
                return self._names[k]
            k -= 1
        return ""
