"""What a first index wrote, gathered as it wrote it, for the first search snapshot to be made from.

A first index of a large workspace ends with the editor waiting for its first answer: the search snapshot is
built from the whole index. Read back out of the index, each file's kept term counts and every symbol's name
were 8 s and 1.5 s of the two cores at 40K files after chunking, and entering the 1.35M names in the symbol
table's maps ~2 s more. The writing thread has all of it in hand as it stores each file (the chunking workers
meanwhile work on the next files), so it does that work file by file; the first full build uses it where the
files are exactly its table's, with their chunks, in order (`fit`), and reads the index otherwise: a file
written some other way meanwhile (a save) costs the time saved, never a wrong snapshot.
"""

from __future__ import annotations

from array import array

import numpy as np

from codeloupe.lanes.lexical import KeptCounts, TermCounts, TermCountsJoin
from codeloupe.lanes.symbols import NameMaps, SymbolIndex, rows_of_lines
from codeloupe.store import ChunkTable
from codeloupe.types import ChunkedFile


class WrittenFiles:
    """The files an index run wrote into an empty index, in the order written: each one's id and chunk count,
    its chunks' term counts joined to those before (`TermCountsJoin`), and its symbols entered in the symbol
    table's name maps under the rows their chunks will have in a table of these files (`NameMaps`)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every file added (an index run starting over)."""
        self._join = TermCountsJoin()
        self._maps = NameMaps()
        self._files, self._chunks = array("q"), array("q")
        self._rows = 0  # chunks added so far: the row of the next file's first chunk
        self._damaged = False

    def add(self, file_id: int, kept: KeptCounts, chunked: ChunkedFile) -> None:
        """File `file_id`, just written as `chunked` with `kept` (its chunks' term counts)."""
        if self._damaged:
            return
        counts = kept.unpacked()
        if counts is None or len(counts.ends) != len(chunked.chunks):  # cannot be read back: not used
            self._damaged = True
            return
        if not chunked.chunks:  # no rows in a table: its symbols are left out, as a build from the index does
            return
        self._files.append(file_id)
        self._chunks.append(len(chunked.chunks))
        self._join.add(counts)
        if chunked.symbols:
            starts = np.fromiter((c.start_line for c in chunked.chunks), np.int64, len(chunked.chunks))
            lines = np.fromiter((s.start_line for s in chunked.symbols), np.int64, len(chunked.symbols))
            self._maps.add([s.name for s in chunked.symbols], [s.parent for s in chunked.symbols],
                           rows_of_lines(self._rows, starts, lines))
        self._rows += len(chunked.chunks)

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

    def symbol_index(self, table: ChunkTable) -> SymbolIndex:
        """The symbol table over `table`, which these files are (`fit`); spends the name maps."""
        maps, self._maps = self._maps, NameMaps()
        return SymbolIndex.of_maps(table, maps)
