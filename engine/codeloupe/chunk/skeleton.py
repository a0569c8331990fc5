"""A file's skeleton: the path, then signatures, doc paragraphs and constants (or headings), capped.

When the file has more than fits the cap, the most informative lines win (module doc, top-level
signatures, their docs, member signatures, constants, member docs) and are shown in source order.
"""

from __future__ import annotations

from codeloupe.types import FileSkeleton

SKELETON_CHARS = 2000

# Priorities: lower is kept first.
MODULE_DOC, TOP_SIGNATURE, TOP_DOC, MEMBER_SIGNATURE, CONSTANT, MEMBER_DOC, HEADING = range(7)


class SkeletonBuilder:
    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: list[tuple[int, int, str]] = []  # (priority, order, line)

    def add(self, priority: int, line: str) -> None:
        if line.strip():
            self._entries.append((priority, len(self._entries), line))

    def build(self, cap: int = SKELETON_CHARS) -> FileSkeleton:
        budget = cap - len(self.path) - 1
        kept: list[tuple[int, str]] = []
        for _priority, order, line in sorted(self._entries):
            if len(line) + 1 > budget:
                continue
            budget -= len(line) + 1
            kept.append((order, line))
        body = "\n".join(line for _, line in sorted(kept))
        return FileSkeleton(self.path, f"{self.path}\n{body}" if body else self.path)
