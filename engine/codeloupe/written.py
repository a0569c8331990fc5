"""What a first index wrote, gathered as it wrote it, for the first search snapshot to be made from.

A first index of a large workspace ends with the editor waiting for its first answer: the search snapshot is
built from the whole index. Read back out of the index, each file's kept term counts and every symbol's name
were 8 s and 1.5 s of the two cores at 40K files, after chunking. The writing thread has both in hand as it
stores each file (the chunking workers meanwhile work on the next files), so it gathers them; the first full
build uses them where they are exactly its table's files and chunks, in order (`fit`), and reads the index
otherwise: a file written some other way meanwhile (a save) costs the time saved, never a wrong snapshot.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

import numpy as np

from codeloupe.lanes.lexical import KeptCounts, TermCounts, TermCountsJoin
from codeloupe.store import SymbolNames
from codeloupe.types import Symbol


class WrittenFiles:
    """The files an index run wrote into an empty index, in the order written: each one's id and chunk count,
    its chunks' term counts joined to those before (`TermCountsJoin`), and its symbols' names as the symbol
    lane reads them from the index (`IndexStore.iter_symbol_names`)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every file added (an index run starting over)."""
        self._join = TermCountsJoin()
        self._files, self._chunks = array("q"), array("q")
        self._symbol_lines = array("q")
        # Each file's symbols' names (and parents) as one string, a newline between them: a string per symbol
        # held 150 MB more at 40K files (1.35M symbols) through the whole index run.
        self._names: list[str] = []
        self._parents: list[str] = []
        self._symbol_files, self._counts = array("q"), array("q")  # each file in `_names`, and its symbols
        self._damaged = False

    def add(self, file_id: int, kept: KeptCounts, symbols: list[Symbol]) -> None:
        """File `file_id`, just written with `kept` (its chunks' term counts) and `symbols`."""
        if self._damaged:
            return
        counts = kept.unpacked()
        if counts is None:  # cannot be read back: this run's are not used
            self._damaged = True
            return
        if counts.ends:  # a file without chunks has no rows in a table
            self._files.append(file_id)
            self._chunks.append(len(counts.ends))
            self._join.add(counts)
        if not symbols:
            return
        names, parents = "\n".join([s.name for s in symbols]), "\n".join([s.parent for s in symbols])
        if names.count("\n") != len(symbols) - 1 or parents.count("\n") != len(symbols) - 1:
            self._damaged = True  # a name holding a newline (no chunker makes one): the index is read instead
            return
        self._symbol_files.append(file_id)
        self._symbol_lines.extend([s.start_line for s in symbols])
        self._names.append(names)
        self._parents.append(parents)
        self._counts.append(len(symbols))

    @property
    def files(self) -> int:
        return len(self._files)

    def fit(self, chunk_file_ids: np.ndarray) -> bool:
        """Whether these are the files of the chunks whose files are `chunk_file_ids`, in that order."""
        sizes = np.frombuffer(self._chunks, np.int64)
        return not self._damaged and len(chunk_file_ids) == int(sizes.sum()) and bool(
            np.array_equal(np.repeat(np.frombuffer(self._files, np.int64), sizes), chunk_file_ids))

    def term_counts(self) -> TermCounts:
        """The term counts joined, one document a chunk in the order written (spends them)."""
        return self._join.result()

    def symbol_names(self, page: int = 50_000) -> Iterator[SymbolNames]:
        """Every symbol written, in the order written (the order of their ids in the index), in pages of about
        `page` symbols (whole files), as the index gives them; spends them."""
        files = np.repeat(np.frombuffer(self._symbol_files, np.int64), np.frombuffer(self._counts, np.int64))
        lines = np.frombuffer(self._symbol_lines, np.int64)
        names, parents, counts = self._names, self._parents, self._counts.tolist()
        self.clear()
        first = at = start = 0
        for last, count in enumerate(counts, 1):
            at += count
            if at - start >= page or last == len(counts):
                yield SymbolNames(files[start:at], lines[start:at].copy(), "\n".join(names[first:last]).split("\n"),
                                  "\n".join(parents[first:last]).split("\n"))
                first, start = last, at
