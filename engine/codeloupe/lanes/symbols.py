"""The symbol lane: identifiers named in a query, looked up in the symbol table.

Only definitions are indexed here, so a `class X` / `def X` / `func X` chunk is what this lane returns; call
sites and mentions are the lexical lane's business. A case-exact match of an identifier-shaped word is worth
most; a name defined in many places is discounted, since it cannot say which one is meant. A plain English
word inside a sentence (`option` in "how does an option read its value") is not a name at all: see
ranking.SYMBOL_PLAIN_WORD.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from itertools import count, islice

import numpy as np

from codeloupe import ranking as R
from codeloupe.arrays import distinct, made_consecutive
from codeloupe.lanes.tokens import STOP_WORDS, identifiers, looks_like_identifier
from codeloupe.saved import pack_strings, unpack_strings
from codeloupe.store import ChunkTable, SymbolNames, SymbolRow

# The name maps, in the order `arrays()` writes them.
_MAPS = ("by_name", "by_lower", "by_qualified")
# Frozen postings as (keys in slot order, group offsets, rows) (`Postings.listed`), and a part of the symbol
# table as those of each name map (`SymbolIndex.part_of`): what a worker process hands back.
PostingsPart = tuple[list[str], np.ndarray, np.ndarray]
SymbolPart = tuple[PostingsPart, ...]


class Postings:
    """Chunk rows per key, as one int32 array grouped by key (CSR) and a dict of keys to groups: a list per
    key held 1.35M Python ints three times over for the standard library copied to 200K chunks."""

    def __init__(self) -> None:
        self._slots: dict[str, int] = {}
        self._numbers = count()  # provisional slots while entries are added (`extend`)
        self._slot_of_entry = array("i")
        self._row_of_entry = array("i")
        self._offsets = np.zeros(1, np.int64)
        self._rows = np.zeros(0, np.int32)

    def extend(self, keys: Iterable[str], rows: np.ndarray) -> None:
        """Add `rows[i]` under `keys[i]` for each i, in that order (keys numbered as they first come).

        A new key takes the next of `_numbers`, a known one keeps its number, in one `setdefault` mapped in C
        (a Python-level call per key was 2 s of the symbol table of 1.35M symbols, three keys each): the
        numbers grow with each key's first coming, with gaps, and `freeze` makes them consecutive."""
        self._slot_of_entry.extend(map(self._slots.setdefault, keys, self._numbers))
        self._row_of_entry.frombytes(rows.astype(np.int32).tobytes())

    def freeze(self) -> None:
        """Group the added entries by key (in the order they were added) and drop the staging arrays."""
        slots = np.frombuffer(self._slot_of_entry, np.int32)
        renumbering = made_consecutive(self._slots, next(self._numbers))
        if renumbering is not None:
            consecutive, self._slots = renumbering
            slots = consecutive[slots]
        order = np.argsort(slots, kind="stable")
        self._rows = np.frombuffer(self._row_of_entry, np.int32)[order].copy()
        self._offsets = np.concatenate([[0], np.cumsum(np.bincount(slots, minlength=len(self._slots)))])
        self._slot_of_entry, self._row_of_entry = array("i"), array("i")

    def listed(self) -> PostingsPart:
        """The frozen postings as (keys in slot order, group offsets, rows): what `concatenated` takes."""
        return list(self._slots), self._offsets, self._rows

    @classmethod
    def concatenated(cls, parts: Iterable[tuple[PostingsPart, int]]) -> Postings:
        """The postings of a table whose rows are those of `parts` one after the other (each with the table row
        of its first added to its rows), as one pass adding each part's entries in turn makes them: keys numbered
        by their first coming, each key's rows in part order. Only each part's distinct keys are looked up here,
        not every entry."""
        out = cls()
        slots, rows = [], []
        for (keys, offsets, part_rows), first in parts:
            numbered = np.fromiter(map(out._slots.setdefault, keys, out._numbers), np.int64, len(keys))
            slots.append(np.repeat(numbered, np.diff(offsets)))
            rows.append(part_rows.astype(np.int64) + first)
        entry_slots = np.concatenate(slots) if slots else np.zeros(0, np.int64)
        renumbering = made_consecutive(out._slots, next(out._numbers))
        if renumbering is not None:
            consecutive, out._slots = renumbering
            entry_slots = consecutive[entry_slots]
        order = np.argsort(entry_slots, kind="stable")
        out._rows = (np.concatenate(rows) if rows else np.zeros(0, np.int64))[order].astype(np.int32)
        out._offsets = np.concatenate([[0], np.cumsum(np.bincount(entry_slots, minlength=len(out._slots)))])
        return out

    def get(self, key: str) -> list[int]:
        return self.array(key).tolist()

    def array(self, key: str) -> np.ndarray:
        """int32: the rows of `key` (a view, empty when the key is unknown)."""
        slot = self._slots.get(key)
        return self._rows[:0] if slot is None else self._rows[self._offsets[slot]:self._offsets[slot + 1]]

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The frozen postings as arrays (keys in slot order, group offsets, rows), to save beside the index."""
        keys, key_ends = pack_strings(list(self._slots))  # dict order is slot order
        return {f"{prefix}_keys": keys, f"{prefix}_key_ends": key_ends, f"{prefix}_offsets": self._offsets,
                f"{prefix}_rows": self._rows}

    @classmethod
    def merged(cls, first: Postings, first_rows: np.ndarray, then: Postings, offset: int) -> Postings:
        """`first`'s postings, each row r renumbered `first_rows[r]` (-1: left out), then `then`'s with `offset`
        added, key by key: the postings of a table whose rows are those of both, in that order, where `then`'s
        entries were added after `first`'s (a key no row is left under is left out). Its keys are numbered
        otherwise than a build in one pass numbers them, which no lookup depends on."""
        slots = dict(first._slots)
        then_slots = np.fromiter((slots.setdefault(key, len(slots)) for key in then._slots), np.int64,
                                 len(then._slots))
        rows = np.concatenate([first_rows[first._rows], then._rows.astype(np.int64) + offset])
        entry_slots = np.concatenate([np.repeat(np.arange(len(first._slots)), np.diff(first._offsets)),
                                      np.repeat(then_slots, np.diff(then._offsets))])
        kept = rows >= 0
        rows, entry_slots = rows[kept], entry_slots[kept]
        used = np.bincount(entry_slots, minlength=len(slots)) > 0
        entry_slots = (np.cumsum(used) - 1)[entry_slots]
        order = np.argsort(entry_slots, kind="stable")  # each key's rows: first's, then then's, in their order
        out = cls()
        out._slots = {key: slot for slot, key in enumerate(k for k, u in zip(slots, used.tolist()) if u)}
        out._rows = rows[order].astype(np.int32)
        out._offsets = np.concatenate([[0], np.cumsum(np.bincount(entry_slots, minlength=len(out._slots)))])
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str, n_chunks: int) -> Postings:
        """The postings `arrays()` wrote; a ValueError when they do not fit together or rows past `n_chunks`."""
        keys = unpack_strings(arrays[f"{prefix}_keys"], arrays[f"{prefix}_key_ends"])
        offsets, rows = arrays[f"{prefix}_offsets"].astype(np.int64), arrays[f"{prefix}_rows"].astype(np.int32)
        if len(offsets) != len(keys) + 1 or int(offsets[0]) != 0 or int(offsets[-1]) != len(rows) or \
                bool(np.any(np.diff(offsets) < 0)) or (len(rows) and not 0 <= int(rows.min()) <= int(rows.max())
                                                        < n_chunks):
            raise ValueError(f"the saved symbol map {prefix} does not fit the chunk table")
        postings = cls()
        postings._slots = {key: slot for slot, key in enumerate(keys)}
        postings._offsets, postings._rows = offsets, rows
        return postings


class SymbolIndex:
    def __init__(self, table: ChunkTable, symbols: Iterable[SymbolRow]) -> None:
        rows = iter(symbols)
        # a page at a time: the rows are not all held at once
        pages = map(SymbolNames.of_rows,
                    iter(lambda: [(s.file_id, s.start_line, s.name, s.parent) for s in islice(rows, _PAGE)], []))
        self._build(table.file_ids, table.start_lines, pages)

    @classmethod
    def of_names(cls, table: ChunkTable, pages: Iterable[SymbolNames]) -> SymbolIndex:
        """The index of the symbols given as pages of their (file id, start line, name, parent): all a build reads
        (`IndexStore.iter_symbol_names`; a whole symbol row read and made an object took 7 of the 12 s a build
        took at 1.35M symbols)."""
        index = cls.__new__(cls)
        index._build(table.file_ids, table.start_lines, pages)
        return index

    @classmethod
    def of_files(cls, file_ids: np.ndarray, pages: Iterable[SymbolNames]) -> SymbolIndex:
        """The index of the symbols of the files `file_ids` (distinct, ascending) with each file a row of its own:
        `definitions(name)` gives the positions in `file_ids` of the files defining it, looked up as a chunk's are.
        For a lookup by name that needs no chunk table (a one-shot `graph --node NAME`)."""
        index = cls.__new__(cls)
        index._build(file_ids, np.zeros(len(file_ids), np.int64), pages)  # a row from the file's first line on
        return index

    @classmethod
    def part_of(cls, file_ids: np.ndarray, start_lines: np.ndarray, names: SymbolNames) -> SymbolPart:
        """The name maps of some files' symbols (`names`, in id order) over those files' chunks (`file_ids` and
        `start_lines` of each, in id order, numbered from 0): a part `concatenated` joins with others."""
        index = cls.__new__(cls)
        index._build(file_ids, start_lines, [names])
        return tuple(getattr(index, name).listed() for name in _MAPS)

    @classmethod
    def concatenated(cls, table: ChunkTable, parts: Iterable[tuple[SymbolPart, int]]) -> SymbolIndex:
        """The index over `table` of the symbols of `parts`, each over a run of the table's rows whose first is
        given, the runs in table order and their symbols in id order one after the other: the index `of_names`
        makes of them (the same maps, keys numbered alike), from each part's distinct names."""
        listed = list(parts)
        index = cls.__new__(cls)
        index.n_chunks = len(table.ids)
        index._locate_chunks(table.file_ids, table.start_lines)
        for at, name in enumerate(_MAPS):
            setattr(index, name, Postings.concatenated((part[at], first) for part, first in listed))
        return index

    def _build(self, file_ids: np.ndarray, start_lines: np.ndarray, pages: Iterable[SymbolNames]) -> None:
        self.n_chunks = len(file_ids)
        self._locate_chunks(file_ids, start_lines)
        self.by_name, self.by_lower, self.by_qualified = Postings(), Postings(), Postings()
        for page in pages:
            names, parents = page.names, page.parents
            rows = self._chunks_at(page.file_ids, page.start_lines)
            held = np.flatnonzero(rows >= 0)  # a symbol in a file with no chunk is left out
            if len(held) < len(rows):
                names, parents = [names[i] for i in held.tolist()], [parents[i] for i in held.tolist()]
                rows = rows[held]
            lowers = list(map(str.lower, names))
            self.by_name.extend(names, rows)
            self.by_lower.extend(lowers, rows)
            self.by_qualified.extend([f"{parent}.{name}".lower() if parent else lower
                                      for name, parent, lower in zip(names, parents, lowers)], rows)
        for postings in (self.by_name, self.by_lower, self.by_qualified):
            postings.freeze()

    def _locate_chunks(self, file_ids: np.ndarray, start_lines: np.ndarray) -> None:
        # Chunk rows ordered by (file id, start line), keyed by both in one int64: the chunk holding a line
        # is one binary search (arrays, not a list of tuples per file: at 200K chunks those were 30 MB).
        order = np.lexsort((start_lines, file_ids))
        self._start_keys = _line_keys(file_ids[order], start_lines[order])
        self._start_rows = order.astype(np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        """The name maps as arrays, to save beside the index: rebuilding them is a Python loop over every
        symbol of the workspace."""
        out: dict[str, np.ndarray] = {}
        for name in _MAPS:
            out.update(getattr(self, name).arrays(name))
        return out

    @classmethod
    def from_arrays(cls, table: ChunkTable, arrays: dict[str, np.ndarray]) -> SymbolIndex:
        """The index `arrays()` described, over `table`; a ValueError when the arrays do not fit it."""
        index = cls.__new__(cls)
        index.n_chunks = len(table.ids)
        index._locate_chunks(table.file_ids, table.start_lines)
        index.by_name, index.by_lower, index.by_qualified = (Postings.from_arrays(arrays, name, index.n_chunks)
                                                             for name in _MAPS)
        return index

    @classmethod
    def compacted(cls, stacked: StackedSymbols, table: ChunkTable) -> SymbolIndex:
        """The index over `table` (the rows of `stacked`'s base still live, then those of its extra index, in
        that order: a delta view's full snapshot, `Searcher._compacted`) from `stacked`'s own postings, instead
        of every symbol of the workspace read from the store and looked up again (12 of the 17 s the full
        snapshot after a save took at 40K files). The extra index's symbols came after the base's, so each
        name's rows are in the order a build from the store gives them."""
        live = stacked.live[:stacked.offset]
        first_rows = np.where(live, np.cumsum(live) - 1, -1)
        index = cls.__new__(cls)
        index.n_chunks = len(table.ids)
        index._locate_chunks(table.file_ids, table.start_lines)
        for name in _MAPS:
            setattr(index, name, Postings.merged(getattr(stacked.base, name), first_rows, getattr(stacked.extra, name),
                                                 int(live.sum())))
        return index

    def chunk_at(self, file_id: int, line: int) -> int | None:
        """Row of the chunk of `file_id` that holds `line` (its first chunk for a line before it)."""
        row = int(self._chunks_at(np.array([file_id], np.int64), np.array([line], np.int64))[0])
        return None if row < 0 else row

    def _chunks_at(self, file_ids: np.ndarray, lines: np.ndarray) -> np.ndarray:
        """`chunk_at` for many (file id, line) pairs at once; -1 for a file with no chunk."""
        keys = self._start_keys
        if len(keys) == 0:
            return np.full(len(file_ids), -1, np.int64)
        pos = np.searchsorted(keys, _line_keys(file_ids, lines), side="right") - 1
        before = (pos < 0) | ((keys[np.maximum(pos, 0)] >> 32) != file_ids)  # line before the file's first chunk
        pos = np.where(before, pos + 1, pos)
        ok = (pos < len(keys)) & ((keys[np.minimum(pos, len(keys) - 1)] >> 32) == file_ids)
        return np.where(ok, self._start_rows[np.minimum(pos, len(keys) - 1)], -1)

    def definitions(self, name: str) -> list[int]:
        """Chunk rows defining `name` (exact, then qualified, then case-insensitive)."""
        key = _normalise_qualified(name)
        return self.by_name.get(name) or self.by_qualified.get(key) or self.by_lower.get(name.lower())

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
                if not len(rows) or weight <= 0:
                    continue
                # A name defined in thousands of chunks (`__init__` in a monorepo) is one array add, not a loop.
                rows = distinct(rows)
                out[rows] += weight / math.log2(1 + len(rows))
        return out

    def _matches(self, word: str, short: bool) -> list[tuple[np.ndarray, float]]:
        if any(sep in word for sep in (".", "::", "#")):
            key = _normalise_qualified(word)
            last = key.rsplit(".", 1)[-1]
            return [(self.by_qualified.array(key), R.SYMBOL_QUALIFIED),
                    (self.by_lower.array(last), R.SYMBOL_CASELESS_IDENTIFIER)]
        if short or looks_like_identifier(word):
            exact = self.by_name.array(word)
            return [(exact, R.SYMBOL_EXACT_IDENTIFIER)] if len(exact) else [(self.by_lower.array(word.lower()),
                                                                      R.SYMBOL_CASELESS_IDENTIFIER)]
        return [(self.by_lower.array(word.lower()), R.SYMBOL_PLAIN_WORD)]  # a word inside a sentence


_PAGE = 50_000


def _line_keys(file_ids: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """One sortable int64 per (file id, line): the file id in the high 32 bits."""
    return (file_ids.astype(np.int64) << 32) | np.clip(lines, 0, 2**32 - 1).astype(np.int64)


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
