"""A file as lines: sizes, node-to-line mapping, the partition check and line windows.

Lines are the editors' (`codeloupe.types.split_lines`): each ends at "\\n", "\\r\\n" or a lone "\\r", and a final
line without a break is a line; a form feed or U+2028 is a character of its line. Tree-sitter counts rows by
"\\n" only, so in a file with a lone CR, nodes are mapped to lines through byte offsets instead of rows.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from codeloupe.types import Chunk, lone_cr_line_starts, split_lines

# Whitespace left out of a line's size (the budget counts non-whitespace characters), as a table of the
# Basic Multilingual Plane, which holds all of it.
_WHITESPACE = " \t\r\n\x0b\x0c\x1c\x1d\x1e\x85\xa0\u2028\u2029\u3000\ufeff"
_IS_WHITESPACE = np.zeros(0x10000, bool)
_IS_WHITESPACE[[ord(c) for c in _WHITESPACE]] = True


class PartitionError(ValueError):
    """A file's chunks do not cover its lines exactly once, in order, verbatim."""


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


def _sizes_before(text: str, lengths: np.ndarray) -> list[int]:
    """[0, then for each line (of `lengths` characters) the non-whitespace characters up to its end]: counted
    over the text's code points at once (a count per line in Python was a tenth of chunking a file)."""
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    counted = np.cumsum(~_IS_WHITESPACE[np.minimum(points, 0xFFFF)], dtype=np.int64)
    return [0, *counted[np.cumsum(lengths) - 1].tolist()]


class Lines:
    """The lines of one file with O(1) range sizes and node-to-line mapping."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = split_lines(text)
        self.count = len(self.lines)
        lengths = np.fromiter(map(len, self.lines), np.int64, self.count)
        self.longest = int(lengths.max()) if self.count else 0  # characters, its line break included
        self._prefix = _sizes_before(text, lengths)
        self.sizes = np.diff(self._prefix).tolist()
        self.source = text.encode("utf-8", "surrogatepass")
        self._byte_starts = lone_cr_line_starts(text, self.lines)

    def size(self, first: int, last: int) -> int:
        """Non-whitespace characters of lines first..last (1-based, inclusive)."""
        return self._prefix[last] - self._prefix[first - 1]

    def slice(self, first: int, last: int) -> str:
        return "".join(self.lines[first - 1:last])

    def span(self, node: object) -> tuple[int, int]:
        """1-based inclusive lines of a tree-sitter node (a node ending in its newline ends on that line)."""
        # Comparisons rather than min/max calls: every node a chunker looks at is mapped (~100 a file).
        start_byte, end_byte = node.start_byte, node.end_byte  # type: ignore[attr-defined]
        if self._byte_starts is None:
            first = node.start_point.row + 1  # type: ignore[attr-defined]
            last, end_col = node.end_point  # type: ignore[attr-defined]
            if end_col > 0 or end_byte == start_byte:
                last += 1
            count = self.count
            if last > count:
                last = count
            if last < first:
                last = first
            return (first if first < count else count), last
        first = bisect_right(self._byte_starts, start_byte)
        last = bisect_right(self._byte_starts, end_byte - 1 if end_byte > start_byte else start_byte)
        return first, (last if last > first else first)


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
