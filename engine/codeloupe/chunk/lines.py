"""A file as lines: sizes, node-to-line mapping, the partition check and line windows.

Lines follow `str.splitlines(keepends=True)`: a final line without a newline is a line, and the exotic
separators Python recognises (lone CR, form feed, U+2028, ...) end lines too. Tree-sitter counts rows by
"\\n" only, so when such separators occur, nodes are mapped to lines through byte offsets instead of rows.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

from codeloupe.types import Chunk

# Separators that `splitlines` honours but tree-sitter's row counter does not.
_EXOTIC_BREAK = re.compile("\r(?!\n)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# Whitespace deleted before counting a line's size (the budget counts non-whitespace characters).
_DROP_WS = str.maketrans("", "", " \t\r\n\x0b\x0c\x1c\x1d\x1e\x85\xa0\u2028\u2029\u3000\ufeff")


class PartitionError(ValueError):
    """A file's chunks do not cover its lines exactly once, in order, verbatim."""


def split_lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def validate_partition(text: str, chunks: list[Chunk]) -> None:
    """Raise `PartitionError` unless `chunks` cover every line of `text` exactly once, in order, verbatim."""
    lines = split_lines(text)
    if not lines:
        if chunks:
            raise PartitionError(f"empty file has {len(chunks)} chunk(s); expected none")
        return
    if not chunks:
        raise PartitionError(f"file has {len(lines)} line(s) but no chunks")
    expected_start = 1
    for index, chunk in enumerate(chunks):
        where = f"chunk {index} (lines {chunk.start_line}-{chunk.end_line})"
        if chunk.start_line != expected_start:
            raise PartitionError(f"{where} starts at line {chunk.start_line}; expected {expected_start}")
        if chunk.end_line < chunk.start_line:
            raise PartitionError(f"{where} ends before it starts")
        if chunk.end_line > len(lines):
            raise PartitionError(f"{where} ends past the file's last line {len(lines)}")
        if chunk.text != "".join(lines[chunk.start_line - 1:chunk.end_line]):
            raise PartitionError(f"{where} text differs from the file's lines")
        expected_start = chunk.end_line + 1
    if expected_start != len(lines) + 1:
        raise PartitionError(f"chunks end at line {expected_start - 1}; the file has {len(lines)} lines")


class Lines:
    """The lines of one file with O(1) range sizes and node-to-line mapping."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = split_lines(text)
        self.count = len(self.lines)
        sizes = [len(line.translate(_DROP_WS)) for line in self.lines]
        self.sizes = sizes
        self._prefix = [0, *accumulate(sizes)]
        self.source = text.encode("utf-8", "surrogatepass")
        self._byte_starts: list[int] | None = None
        if _EXOTIC_BREAK.search(text):
            lengths = (len(line.encode("utf-8", "surrogatepass")) for line in self.lines)
            self._byte_starts = [0, *accumulate(lengths)][:-1]

    def size(self, first: int, last: int) -> int:
        """Non-whitespace characters of lines first..last (1-based, inclusive)."""
        return self._prefix[last] - self._prefix[first - 1]

    def slice(self, first: int, last: int) -> str:
        return "".join(self.lines[first - 1:last])

    def span(self, node: object) -> tuple[int, int]:
        """1-based inclusive lines of a tree-sitter node (a node ending in its newline ends on that line)."""
        start_byte, end_byte = node.start_byte, node.end_byte  # type: ignore[attr-defined]
        last_byte = max(start_byte, end_byte - 1)
        if self._byte_starts is None:
            first = node.start_point.row + 1  # type: ignore[attr-defined]
            end_row, end_col = node.end_point  # type: ignore[attr-defined]
            last = end_row + (1 if end_col > 0 or end_byte == start_byte else 0)
            last = max(first, min(last, self.count))
            return min(first, self.count), last
        first = bisect_right(self._byte_starts, start_byte)
        return first, max(first, bisect_right(self._byte_starts, last_byte))


@dataclass(frozen=True)
class Window:
    start: int
    end: int


def line_windows(lines: Lines, first: int, last: int, budget: int) -> Iterator[Window]:
    """Greedy runs of whole lines up to `budget`; a single line over budget is a window of its own."""
    start = first
    acc = 0
    for line_no in range(first, last + 1):
        size = lines.sizes[line_no - 1]
        if line_no > start and acc + size > budget:
            yield Window(start, line_no - 1)
            start, acc = line_no, 0
        acc += size
    if start <= last:
        yield Window(start, last)
