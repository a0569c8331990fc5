"""The symbol lane: identifiers named in a query, looked up in the symbol table.

Only definitions are indexed here, so a `class X` / `def X` / `func X` chunk is what this lane returns; call
sites and mentions are the lexical lane's business. A case-exact match of an identifier-shaped word is worth
most; a name defined in many places is discounted, since it cannot say which one is meant. A plain English
word inside a sentence (`option` in "how does an option read its value") is not a name at all: see
ranking.SYMBOL_PLAIN_WORD.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from itertools import chain

import numpy as np

from codeloupe import ranking as R
from codeloupe.lanes.tokens import STOP_WORDS, identifiers, looks_like_identifier
from codeloupe.saved import pack_strings, unpack_strings
from codeloupe.store import ChunkTable, SymbolRow

# The name maps, in the order `arrays()` writes them.
_MAPS = ("by_name", "by_lower", "by_qualified")


class SymbolIndex:
    def __init__(self, table: ChunkTable, symbols: list[SymbolRow]) -> None:
        self.n_chunks = len(table.ids)
        self._file_starts = _file_starts(table)
        self.by_name: dict[str, list[int]] = defaultdict(list)
        self.by_lower: dict[str, list[int]] = defaultdict(list)
        self.by_qualified: dict[str, list[int]] = defaultdict(list)
        for sym in symbols:
            row = self.chunk_at(sym.file_id, sym.start_line)
            if row is None:
                continue
            self.by_name[sym.name].append(row)
            self.by_lower[sym.name.lower()].append(row)
            qualified = f"{sym.parent}.{sym.name}" if sym.parent else sym.name
            self.by_qualified[qualified.lower()].append(row)

    def arrays(self) -> dict[str, np.ndarray]:
        """The name maps as arrays (keys, end offsets, chunk rows), to save beside the index: rebuilding them
        is a Python loop over every symbol of the workspace."""
        out: dict[str, np.ndarray] = {}
        for name in _MAPS:
            mapping: dict[str, list[int]] = getattr(self, name)
            out[f"{name}_keys"], out[f"{name}_key_ends"] = pack_strings(list(mapping))
            out[f"{name}_row_ends"] = np.cumsum([len(rows) for rows in mapping.values()], dtype=np.int64)
            out[f"{name}_rows"] = np.fromiter(chain.from_iterable(mapping.values()), np.int64)
        return out

    @classmethod
    def from_arrays(cls, table: ChunkTable, arrays: dict[str, np.ndarray]) -> SymbolIndex:
        """The index `arrays()` described, over `table`; a ValueError when the arrays do not fit it."""
        index = cls.__new__(cls)
        index.n_chunks = len(table.ids)
        index._file_starts = _file_starts(table)
        for name in _MAPS:
            keys = unpack_strings(arrays[f"{name}_keys"], arrays[f"{name}_key_ends"])
            ends, rows = arrays[f"{name}_row_ends"], arrays[f"{name}_rows"]
            if len(ends) != len(keys) or (len(ends) and int(ends[-1]) != len(rows)) or \
                    bool(np.any(np.diff(ends) < 0)) or (len(rows) and not 0 <= int(rows.min()) <= int(rows.max())
                                                         < index.n_chunks):
                raise ValueError(f"the saved symbol map {name} does not fit the chunk table")
            flat, bounds = rows.tolist(), [0, *ends.tolist()]
            mapping: dict[str, list[int]] = defaultdict(list)
            mapping.update((key, flat[bounds[i]:bounds[i + 1]]) for i, key in enumerate(keys))
            setattr(index, name, mapping)
        return index

    def chunk_at(self, file_id: int, line: int) -> int | None:
        """Row of the chunk of `file_id` that holds `line`."""
        spans = self._file_starts.get(file_id)
        if not spans:
            return None
        i = bisect.bisect_right(spans, (line, math.inf)) - 1
        return spans[max(i, 0)][1]

    def definitions(self, name: str) -> list[int]:
        """Chunk rows defining `name` (exact, then qualified, then case-insensitive)."""
        key = _normalise_qualified(name)
        return self.by_name.get(name) or self.by_qualified.get(key) or self.by_lower.get(name.lower(), [])

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n_chunks, np.float32)
        seen: set[str] = set()
        # In a query of one to three words every word is a name the user is looking for ("Option"); in a
        # sentence, plain words are English and only identifier-shaped words name code.
        short = len(query.split()) <= 3
        for word in identifiers(query):
            if word in seen or len(word) < 3 or word.lower() in STOP_WORDS:
                continue
            seen.add(word)
            for rows, weight in self._matches(word, short):
                if not rows or weight <= 0:
                    continue
                share = weight / math.log2(1 + len(set(rows)))
                for row in set(rows):
                    out[row] += share
        return out

    def _matches(self, word: str, short: bool) -> list[tuple[list[int], float]]:
        if any(sep in word for sep in (".", "::", "#")):
            key = _normalise_qualified(word)
            last = key.rsplit(".", 1)[-1]
            return [(self.by_qualified.get(key, []), R.SYMBOL_QUALIFIED),
                    (self.by_lower.get(last, []), R.SYMBOL_CASELESS_IDENTIFIER)]
        if short or looks_like_identifier(word):
            exact = self.by_name.get(word, [])
            return [(exact, R.SYMBOL_EXACT_IDENTIFIER)] if exact else [(self.by_lower.get(word.lower(), []),
                                                                 R.SYMBOL_CASELESS_IDENTIFIER)]
        return [(self.by_lower.get(word.lower(), []), R.SYMBOL_PLAIN_WORD)]  # a word inside a sentence


def _file_starts(table: ChunkTable) -> dict[int, list[tuple[int, int]]]:
    """Per file: its chunks' (start line, row), sorted, to find the chunk holding a line."""
    rows = np.lexsort((np.arange(len(table.ids)), table.start_lines, table.file_ids))
    files, starts = table.file_ids[rows].tolist(), table.start_lines[rows].tolist()
    out: dict[int, list[tuple[int, int]]] = {}
    for file_id, start, row in zip(files, starts, rows.tolist()):
        out.setdefault(file_id, []).append((start, row))
    return out


def _normalise_qualified(name: str) -> str:
    return name.replace("::", ".").replace("#", ".").lower()


class StackedSymbols:
    """A full symbol index plus one over a batch of changed files whose rows follow it.

    Rows of files that have since changed (`live` false) never answer a lookup.
    """

    def __init__(self, base: SymbolIndex, extra: SymbolIndex, live: np.ndarray) -> None:
        self.base, self.extra, self.live = base, extra, live
        self.offset = base.n_chunks
        self.n_chunks = base.n_chunks + extra.n_chunks

    def chunk_at(self, file_id: int, line: int) -> int | None:
        row = self.extra.chunk_at(file_id, line)
        if row is not None:
            return row + self.offset
        row = self.base.chunk_at(file_id, line)
        return row if row is not None and self.live[row] else None

    def definitions(self, name: str) -> list[int]:
        base = [r for r in self.base.definitions(name) if self.live[r]]
        return base + [r + self.offset for r in self.extra.definitions(name)]

    def scores(self, query: str) -> np.ndarray:
        return np.concatenate([self.base.scores(query) * self.live[: self.offset], self.extra.scores(query)])
