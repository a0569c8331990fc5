"""The graph's workspace-wide state in compact form: what a warm graph keeps for 40K files.

Decoded per-file facts (an object per definition, import and use), one `Edge` object per edge and a set of
paths per mentioned word took about 0.9 GB at 40K files. Here facts stay compressed as stored and are decoded
when a resolution or a graph request reads them (a few recent ones kept decoded); edges are columns of
integers over pools of distinct strings, materialised as `Edge`s for the one node a caller asks about; word
mentions and top-level names are arrays of path numbers.
"""

from __future__ import annotations

import bisect
import json
import sys
import threading
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from codeloupe.arrays import distinct, find_sorted
from codeloupe.graph.facts import Definition, FileFacts, ImportFact
from codeloupe.saved import pack_bytes, pack_strings, unpack_bytes, unpack_strings

if TYPE_CHECKING:
    from codeloupe.graph.resolve import Edge

_Item = TypeVar("_Item")

DECODED_KEPT = 1024  # decoded facts kept per table: a save's resolution reads a few hundred files
DEFINITIONS_KEPT = 256  # nodes whose definitions a graph keeps decoded: a request reads a few

_Key = TypeVar("_Key")


class Recent(Generic[_Key, _Item]):
    """What was made for the last `size` keys asked about, kept (a graph is read from several threads)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._kept: OrderedDict[_Key, _Item] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _Key, make: Callable[[_Key], _Item]) -> _Item:
        """The value kept for `key`, or `make(key)`'s, then kept (made outside the lock: decoding is slow)."""
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        value = make(key)
        with self._lock:
            self._kept[key] = value
            if len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return value

    def pop(self, key: _Key) -> None:
        with self._lock:
            self._kept.pop(key, None)

    def __len__(self) -> int:
        return len(self._kept)


class PackedFacts(Mapping[str, FileFacts]):
    """path -> `FileFacts`, held as the stored JSON compressed and decoded on access. Which top-level names
    each file defines and which names its imports bind are kept apart (`defines`, `may_reexport`): resolution
    asks them of every module an import names, and decoding each of those files would cost a save most of
    its time."""

    def __init__(self, packed: dict[str, bytes] | None = None, languages: dict[str, str] | None = None) -> None:
        self._packed: dict[str, bytes] = packed if packed is not None else {}
        self._languages: dict[str, str] = languages if languages is not None else {}
        self._top_level: PathIndex | None = PathIndex() if packed is None else None
        self._bound = PathIndex()
        self._decoded: Recent[str, FileFacts] = Recent(DECODED_KEPT)
        self._imports: Recent[str, list[ImportFact]] = Recent(DECODED_KEPT)

    def put(self, path: str, raw: str, facts: FileFacts) -> None:
        """Keep `raw` (the stored JSON of `facts`) for `path`."""
        self.pop_facts(path)
        self._packed[path] = zlib.compress(raw.encode("utf-8"), 1)
        self._languages[path] = facts.language
        if self._top_level is not None:
            self._top_level.add(path, facts.top_level())
            self._bound.add(path, _bound_names(facts))

    def pop_facts(self, path: str) -> FileFacts | None:
        """Forget `path`; its facts as they were, or None when it had none."""
        facts = self.get(path)
        if facts is not None and self._top_level is not None:
            self._top_level.remove(path, facts.top_level())
            self._bound.remove(path, _bound_names(facts))
        self._packed.pop(path, None)
        self._languages.pop(path, None)
        self._decoded.pop(path)
        self._imports.pop(path)
        return facts

    def defines(self, path: str, name: str) -> bool:
        """Whether `path` defines `name` at top level (`FileFacts.top_level`), without decoding it."""
        if self._top_level is None:
            raise TypeError("a frozen copy of facts answers reads of whole facts only")
        return self._top_level.has(name, path)

    def may_reexport(self, path: str, name: str) -> bool:
        """Whether an import of `path` binds `name` or every name (a star import): only then can `path`
        re-export it (`ResolveContext.find_definition`)."""
        self.defines(path, name)  # the same refusal on a frozen copy
        return self._bound.has(name, path) or self._bound.has("*", path)

    def language(self, path: str) -> str:
        return self._languages.get(path, "")

    def languages(self) -> set[str]:
        return set(self._languages.values())

    def frozen(self) -> PackedFacts:
        """A copy that later `put`s and `pop_facts` do not change (the compressed texts are shared); it has no
        `defines`."""
        return PackedFacts(dict(self._packed), dict(self._languages))

    def __getitem__(self, path: str) -> FileFacts:
        return self._decoded.get(path, self.decode)

    def decode(self, path: str) -> FileFacts:
        """`path`'s facts decoded afresh, not kept."""
        return FileFacts.from_json(self._text(path))

    def imports(self, path: str) -> list[ImportFact]:
        """`path`'s imports, nothing else of its facts decoded (kept for the files asked last): resolution reads
        the imports of every module it follows a re-export through, and nothing else of them."""
        return self._imports.get(path, lambda key: FileFacts.stored_imports(self._text(key)))

    def definition_rows(self, path: str) -> list[list]:
        """`path`'s definitions as stored (`FileFacts.definition_rows`), nothing else of its facts decoded."""
        return FileFacts.definition_rows(self._text(path)) if path in self._packed else []

    def _text(self, path: str) -> str:
        return zlib.decompress(self._packed[path]).decode("utf-8")

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """Everything but the decoded facts kept, as plain arrays (`from_arrays` reads them back)."""
        if self._top_level is None:
            raise TypeError("only the facts a resolution keeps are saved")
        paths = list(self._packed)
        out: dict[str, np.ndarray] = {}
        out[f"{prefix}paths"], out[f"{prefix}paths_ends"] = pack_strings(paths)
        out[f"{prefix}languages"], out[f"{prefix}languages_ends"] = pack_strings([self._languages[p] for p in paths])
        out[f"{prefix}packed"], out[f"{prefix}packed_ends"] = pack_bytes([self._packed[p] for p in paths])
        return {**out, **self._top_level.arrays(f"{prefix}top_"), **self._bound.arrays(f"{prefix}bound_")}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str) -> PackedFacts:
        """What `arrays` saved; a ValueError (or KeyError) when its arrays do not fit together."""
        paths = unpack_strings(arrays[f"{prefix}paths"], arrays[f"{prefix}paths_ends"])
        languages = [sys.intern(language) for language in unpack_strings(arrays[f"{prefix}languages"],
                                                                          arrays[f"{prefix}languages_ends"])]
        packed = unpack_bytes(arrays[f"{prefix}packed"], arrays[f"{prefix}packed_ends"])
        if not len(paths) == len(languages) == len(packed) == len(set(paths)):
            raise ValueError("the saved facts' columns do not fit together")
        facts = cls(dict(zip(paths, packed)), dict(zip(paths, languages)))
        canonical = {path: path for path in paths}  # one string per path, shared with the name indexes
        facts._top_level = PathIndex.from_arrays(arrays, f"{prefix}top_", canonical)
        facts._bound = PathIndex.from_arrays(arrays, f"{prefix}bound_", canonical)
        return facts

    def __contains__(self, path: object) -> bool:
        return path in self._packed

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)


def _bound_names(facts: FileFacts) -> set[str]:
    """The local names the file's imports bind, and "*" when one is a star import."""
    return {local for imp in facts.imports for _, local in imp.names} | \
        ({"*"} if any(imp.is_star for imp in facts.imports) else set())


class PathIndex:
    """word -> the files it was added for (the words a file mentions, the names it defines), as sorted arrays
    of path numbers (a file read in path order appends; `has` is a binary search)."""

    def __init__(self) -> None:
        self._number: dict[str, int] = {}
        self._paths: list[str] = []
        self._users: dict[str, array] = {}

    def _of(self, path: str) -> int:
        number = self._number.get(path)
        if number is None:
            number = self._number[path] = len(self._paths)
            self._paths.append(path)
        return number

    def add(self, path: str, words: Iterable[str]) -> None:
        number = self._of(path)
        for word in words:
            users = self._users.get(word)
            if users is None:
                users = self._users[word] = array("i")
            if not users or users[-1] <= number:  # files read in path order: where insort would put it
                users.append(number)
            else:
                bisect.insort(users, number)

    def remove(self, path: str, words: Iterable[str]) -> None:
        number = self._of(path)
        for word in words:
            users = self._users.get(word)
            if users is not None and _holds(users, number):
                del users[bisect.bisect_left(users, number)]
                if not users:
                    del self._users[word]

    def users(self, word: str) -> set[str]:
        return {self._paths[n] for n in self._users.get(word, ())}

    def users_of(self, words: Iterable[str]) -> set[str]:
        """The paths that use any of `words`."""
        return {self._paths[n] for word in words for n in self._users.get(word, ())}

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The index as plain arrays: its paths, its words, and each word's path numbers one after another."""
        words = list(self._users)
        numbers = [self._users[word] for word in words]
        out: dict[str, np.ndarray] = {}
        out[f"{prefix}paths"], out[f"{prefix}paths_ends"] = pack_strings(self._paths)
        out[f"{prefix}words"], out[f"{prefix}words_ends"] = pack_strings(words)
        out[f"{prefix}numbers"] = np.frombuffer(b"".join(n.tobytes() for n in numbers), np.int32)
        out[f"{prefix}numbers_ends"] = np.cumsum(np.fromiter(map(len, numbers), np.int64, len(numbers)),
                                                 dtype=np.int64)
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str,
                    canonical: Mapping[str, str] | None = None) -> PathIndex:
        """What `arrays` saved, checked (every word's numbers name a path and rise); a ValueError when they
        do not. `canonical`: the path strings to share instead of new copies."""
        index = cls()
        paths = unpack_strings(arrays[f"{prefix}paths"], arrays[f"{prefix}paths_ends"])
        index._paths = [canonical.get(p, p) for p in paths] if canonical is not None else paths
        index._number = {path: k for k, path in enumerate(index._paths)}
        words = unpack_strings(arrays[f"{prefix}words"], arrays[f"{prefix}words_ends"])
        numbers, ends = arrays[f"{prefix}numbers"], arrays[f"{prefix}numbers_ends"]
        if numbers.dtype != np.int32 or numbers.ndim != 1 or ends.ndim != 1 or len(ends) != len(words) \
                or len(index._number) != len(paths):
            raise ValueError("the saved path index's arrays do not fit together")
        bounds = np.concatenate([[0], ends]).astype(np.int64)
        rising = np.ones(len(numbers), bool)  # each word's numbers rise; a new word starts anywhere
        rising[1:] = np.diff(numbers) > 0
        rising[bounds[:-1][bounds[:-1] < len(numbers)]] = True
        if (len(words) and (int(bounds[-1]) != len(numbers) or bool(np.any(np.diff(bounds) <= 0)))) \
                or (len(numbers) and (int(numbers.min()) < 0 or int(numbers.max()) >= len(paths))) \
                or not bool(rising.all()):
            raise ValueError("the saved path index's numbers are out of order or range")
        raw, size = numbers.tobytes(), numbers.itemsize
        for word, start, end in zip(words, bounds[:-1].tolist(), bounds[1:].tolist()):
            users = index._users[word] = array("i")
            users.frombytes(raw[start * size:end * size])
        return index

    def has(self, word: str, path: str) -> bool:
        number = self._number.get(path)
        return number is not None and _holds(self._users.get(word, _NO_USERS), number)


_NO_USERS = array("i")  # a word no file holds (one shared empty array: `has` is asked ~25,000 times a save)


def _holds(numbers: array, number: int) -> bool:
    k = bisect.bisect_left(numbers, number)
    return k < len(numbers) and numbers[k] == number


class NodeDefinitions(Sequence[list[Definition]]):
    """Each node's definitions, in node order, decoded from the graph's frozen facts when asked for (the
    definitions of the last few nodes asked about are kept, nothing else of their facts)."""

    def __init__(self, facts: PackedFacts, paths: list[str]) -> None:
        self._facts = facts
        self._paths = paths
        self._kept: Recent[int, list[Definition]] = Recent(DEFINITIONS_KEPT)

    def __getitem__(self, i: int) -> list[Definition]:  # type: ignore[override]
        return self._kept.get(i, self._decoded)

    def _decoded(self, i: int) -> list[Definition]:
        path = self._paths[i]
        return self._facts.decode(path).definitions if path in self._facts else []

    def spans(self, i: int) -> list[tuple[str, int, int]]:
        """(name, start line, end line) of each of node `i`'s definitions, read without decoding the rest of
        its facts or keeping them (a pass over every node's definitions at 40K files)."""
        return [(name, start, end) for name, _, start, end, _ in self._facts.definition_rows(self._paths[i])]

    def __len__(self) -> int:
        return len(self._paths)


# The kinds of structural edges, in the order edges sort by.
EDGE_KINDS = ("call", "external", "import")
_EDGE_COLUMNS = ("source", "kind", "target", "line", "raw", "symbols")


class EdgeTable:
    """The graph's structural edges (external ones too, target -1) as integer columns, sorted as the graph
    lists them: by source, kind, target, line, specifier, carriers."""

    def __init__(self, paths: list[str], rows: Iterable[tuple[int, str, int, str, tuple[str, ...], int]]) -> None:
        """`rows`: (source node, kind, target node or -1, raw specifier, carrier symbols, line)."""
        self.paths = paths
        raws: dict[str, int] = {}
        carriers: dict[tuple[str, ...], int] = {}
        self._sort(_encoded(rows, raws, carriers), list(raws), list(carriers))

    def replaced(self, paths: list[str], sources: Iterable[str],
                 rows: Iterable[tuple[int, str, int, str, tuple[str, ...], int]]) -> EdgeTable:
        """This table over the nodes `paths` now are, with every edge from `sources` (paths) replaced by `rows`
        (as the constructor takes them, numbered over `paths`): the graph after a save, from the edges it
        re-resolved instead of every stored edge. Edges from or to a node that is gone are dropped."""
        index = {path: i for i, path in enumerate(paths)}
        replaced = set(sources)
        renumber = np.array([index.get(path, -1) for path in self.paths], np.int32)
        gone = np.array([path in replaced or path not in index for path in self.paths], bool)
        keep = ~gone[self.source] if len(self.paths) else np.zeros(0, bool)
        structural = self.target >= 0
        targets = np.where(structural, renumber[np.maximum(self.target, 0)] if len(self.paths) else -1, -1)
        keep &= ~structural | (targets >= 0)
        raws = {raw: k for k, raw in enumerate(self.raws)}
        carriers = {carried: k for k, carried in enumerate(self.carriers)}
        added = _encoded(rows, raws, carriers)
        kept = (renumber[self.source[keep]] if len(self.paths) else self.source[keep], self.kind[keep],
                targets[keep].astype(np.int32), self.line[keep], self.raw[keep], self.symbols[keep])
        columns = [np.concatenate([a, b]) for a, b in zip(kept, added)]
        # only the specifiers and carriers still used stay in the pools
        pool_raws, pool_carriers = list(raws), list(carriers)
        used_raws, raw_codes = _used_codes(columns[4], len(pool_raws))
        used_carriers, carrier_codes = _used_codes(columns[5], len(pool_carriers))
        columns[4], columns[5] = raw_codes, carrier_codes
        table = EdgeTable.__new__(EdgeTable)
        table.paths = paths
        used = [pool_raws[k] for k in used_raws.tolist()], [pool_carriers[k] for k in used_carriers.tolist()]
        survivors = renumber[renumber >= 0]
        if np.all(survivors[1:] > survivors[:-1]):  # the nodes kept their order: the kept edges keep theirs
            table._merge(columns, len(kept[0]), *used)
        else:
            table._sort(columns, *used)
        return table

    def _merge(self, columns: list[np.ndarray], sorted_rows: int, raws: list[str], carriers: list[tuple[str, ...]]
               ) -> None:
        """`_sort` for columns whose first `sorted_rows` rows are in the graph's order already and whose other
        rows come from sources none of those has (a save's re-resolved files): those are sorted alone and put in
        place by their source, not every edge sorted again (a sort of six keys over every edge, 0.1 s at 40K
        files after every save). Rows that break this are sorted with the rest (`_sort`)."""
        head, tail = columns[0][:sorted_rows], columns[0][sorted_rows:]
        if np.any(find_sorted(head, tail)[1]):  # a source in both parts
            self._sort(columns, raws, carriers)
            return
        at = np.searchsorted(head, tail)
        self.raws, self.carriers = raws, carriers
        raw_rank, carrier_rank = _ranks(raws)[columns[4][sorted_rows:]], _ranks(carriers)[columns[5][sorted_rows:]]
        added = [c[sorted_rows:] for c in columns]
        order = np.lexsort((carrier_rank, raw_rank, added[3], added[2], added[1], added[0]))
        at = at[order]
        self.source, self.kind, self.target, self.line, self.raw, self.symbols = (
            np.insert(c[:sorted_rows], at, a[order]) for c, a in zip(columns, added))
        self._index_columns()

    def _sort(self, columns: list[np.ndarray], raws: list[str], carriers: list[tuple[str, ...]]) -> None:
        """Take `columns` (source, kind, target, line, raw, symbols codes over `raws` and `carriers`) in the
        graph's order."""
        self.raws, self.carriers = raws, carriers
        source, kind, target, line, raw, symbols = columns
        raw_rank = _ranks(self.raws)[raw]
        carrier_rank = _ranks(self.carriers)[symbols]
        order = np.lexsort((carrier_rank, raw_rank, line, target, kind, source))
        self.source, self.kind, self.target, self.line, self.raw, self.symbols = (
            c[order].copy() for c in (source, kind, target, line, raw, symbols))
        self._index_columns()

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The table as plain arrays: its columns in order, its pools of specifiers and carrier symbols."""
        out = {f"{prefix}{name}": getattr(self, name) for name in _EDGE_COLUMNS}
        out[f"{prefix}raws"], out[f"{prefix}raws_ends"] = pack_strings(self.raws)
        out[f"{prefix}carriers"], out[f"{prefix}carriers_ends"] = pack_strings(
            [json.dumps(carried) for carried in self.carriers])
        return out

    @classmethod
    def from_arrays(cls, paths: list[str], arrays: Mapping[str, np.ndarray], prefix: str) -> EdgeTable:
        """A table `arrays` saved, over `paths`, checked (every number in range, sources in order); a
        ValueError when it is not one."""
        table = cls.__new__(cls)
        table.paths = paths
        table.raws = unpack_strings(arrays[f"{prefix}raws"], arrays[f"{prefix}raws_ends"])
        table.carriers = [tuple(json.loads(text)) for text in
                          unpack_strings(arrays[f"{prefix}carriers"], arrays[f"{prefix}carriers_ends"])]
        if not all(all(isinstance(symbol, str) for symbol in carried) for carried in table.carriers):
            raise ValueError("saved carrier symbols that are not names")
        columns = [arrays[f"{prefix}{name}"] for name in _EDGE_COLUMNS]
        if any(c.dtype != np.int32 or c.shape != columns[0].shape or c.ndim != 1 for c in columns):
            raise ValueError("the saved edge columns do not fit together")
        table.source, table.kind, table.target, table.line, table.raw, table.symbols = columns
        n = len(paths)
        if len(table.source) and (
                int(table.source.min()) < 0 or int(table.source.max()) >= n
                or bool(np.any(np.diff(table.source) < 0))
                or int(table.target.min()) < -1 or int(table.target.max()) >= n
                or int(table.kind.min()) < 0 or int(table.kind.max()) >= len(EDGE_KINDS)
                or int(table.raw.min()) < 0 or int(table.raw.max()) >= len(table.raws)
                or int(table.symbols.min()) < 0 or int(table.symbols.max()) >= len(table.carriers)):
            raise ValueError("the saved edges name nodes, kinds or pools out of range")
        table._index_columns()
        return table

    def _index_columns(self) -> None:
        """Where each node's outgoing rows start, and its incoming rows in order."""
        n = len(self.paths)
        self._out_start = np.searchsorted(self.source, np.arange(n + 1))
        structural = np.flatnonzero(self.target >= 0)
        self._in_order = structural[np.argsort(self.target[structural], kind="stable")]
        self._in_start = np.searchsorted(self.target[self._in_order], np.arange(n + 1))

    def edges(self, rows: np.ndarray) -> list[Edge]:
        """The edges at `rows` (positions in the graph's order), materialised."""
        from codeloupe.graph.resolve import Edge

        paths, raws, carriers = self.paths, self.raws, self.carriers
        columns = (c[rows].tolist() for c in (self.source, self.kind, self.target, self.raw, self.symbols, self.line))
        return [Edge(paths[s], EDGE_KINDS[k], paths[t] if t >= 0 else "", raws[r], carriers[c], line)
                for s, k, t, r, c, line in zip(*columns)]

    def __iter__(self) -> Iterator[Edge]:
        for start in range(0, len(self.source), 10_000):
            yield from self.edges(np.arange(start, min(start + 10_000, len(self.source))))

    def __len__(self) -> int:
        return len(self.source)

    def _rows_with(self, i: int, *, incoming: bool) -> tuple[np.ndarray, np.ndarray]:
        """(the rows of node `i`'s structural edges, the node at each one's other end): those into `i` in
        the order `incoming` lists them, or those from it in the graph's order."""
        if incoming:
            rows = self._in_order[self._in_start[i]:self._in_start[i + 1]]
            return rows, self.source[rows]
        rows = np.arange(self._out_start[i], self._out_start[i + 1])
        rows = rows[self.target[rows] >= 0]
        return rows, self.target[rows]

    def neighbour_rows(self, i: int, *, incoming: bool) -> dict[int, list[int]]:
        """Neighbour node -> the rows of its edges with node `i`, grouped and ordered as `incoming` /
        `outgoing` list the edges themselves (rows of the columns, no `Edge` made)."""
        rows, others = self._rows_with(i, incoming=incoming)
        return _grouped(others.tolist(), rows.tolist())

    def linked(self, i: int, *, incoming: bool) -> dict[int, bool]:
        """Neighbour node (as `neighbour_rows`) -> whether one of its edges with node `i` is an import: what
        a list of neighbours says of each, read from the columns (no `Edge` made)."""
        rows, others = self._rows_with(i, incoming=incoming)
        importing = set(others[self.kind[rows] == EDGE_KINDS.index("import")].tolist())
        return {j: j in importing for j in others.tolist()}

    def outgoing(self, i: int) -> dict[int, list[Edge]]:
        """Target node -> the edges from node `i` to it, in the graph's order."""
        rows, targets = self._rows_with(i, incoming=False)
        return _grouped(targets.tolist(), self.edges(rows))

    def incoming(self, i: int) -> dict[int, list[Edge]]:
        """Source node -> the edges from it to node `i`, in the graph's order."""
        rows, sources = self._rows_with(i, incoming=True)
        return _grouped(sources.tolist(), self.edges(rows))

    def external(self, i: int) -> list[str]:
        """The raw specifiers node `i` imports from outside the workspace, sorted and distinct."""
        span = slice(self._out_start[i], self._out_start[i + 1])
        return sorted({self.raws[r] for r in self.raw[span][self.target[span] < 0]})

    def counted(self) -> list[tuple[str, str, str, int]]:
        """(source, target path or the raw specifier of an external edge, kind, how many edges) of every
        distinct such triple, sorted: what a map of the whole graph shows, counted on the columns instead of
        one `Edge` per edge (437K at 40K files)."""
        words = sorted(set(self.paths) | set(self.raws))  # a specifier may read as a path: one word for both
        rank = {word: k for k, word in enumerate(words)}
        path_rank = np.array([rank[p] for p in self.paths], np.int64)
        raw_rank = np.array([rank[r] for r in self.raws], np.int64)
        second = np.where(self.target >= 0, path_rank[np.maximum(self.target, 0)] if len(path_rank)
                          else 0, raw_rank[self.raw] if len(raw_rank) else 0)
        first = path_rank[self.source] if len(path_rank) else np.zeros(0, np.int64)
        # EDGE_KINDS is in the kinds' sorted order
        keys = (first * len(words) + second) * len(EDGE_KINDS) + self.kind
        distinct, counts = np.unique(keys, return_counts=True)
        rest, kinds = np.divmod(distinct, len(EDGE_KINDS))
        firsts, seconds = np.divmod(rest, max(len(words), 1))
        return [(words[s], words[w], EDGE_KINDS[k], c) for s, w, k, c in
                zip(firsts.tolist(), seconds.tolist(), kinds.tolist(), counts.tolist())]

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source, target, kind) of the structural edges."""
        structural = self.target >= 0
        return self.source[structural], self.target[structural], self.kind[structural]


class Adjacency(Sequence[dict[int, "list[Edge]"]]):
    """`graph.out_edges[i]` / `graph.in_edges[i]`: node -> edges, materialised for the node asked about."""

    def __init__(self, table: EdgeTable, incoming: bool) -> None:
        self._table = table
        self._incoming = incoming
        self._counts: np.ndarray | None = None  # counted on the first `count`: a sort of every edge, which
        # every graph built after a save would pay for a file summary few ask for

    def __getitem__(self, i: int) -> dict[int, list[Edge]]:  # type: ignore[override]
        return self._table.incoming(i) if self._incoming else self._table.outgoing(i)

    def __len__(self) -> int:
        return len(self._table.paths)

    def count(self, i: int) -> int:
        """How many distinct nodes `self[i]` holds, without materialising it."""
        if self._counts is None:
            table, n = self._table, len(self._table.paths)
            sources, targets, _ = table.pairs()
            ends, others = (targets, sources) if self._incoming else (sources, targets)
            pairs_seen = distinct(ends.astype(np.int64) * (n + 1) + others)
            self._counts = np.bincount(pairs_seen // (n + 1), minlength=n)
        return int(self._counts[i])


def _encoded(rows: Iterable[tuple[int, str, int, str, tuple[str, ...], int]], raws: dict[str, int],
             carriers: dict[tuple[str, ...], int]) -> list[np.ndarray]:
    """`rows` as int32 columns (source, kind, target, line, raw, symbols), specifiers and carriers numbered in
    `raws` / `carriers` (new ones added)."""
    kind_code = {kind: k for k, kind in enumerate(EDGE_KINDS)}
    columns = [array("i") for _ in range(6)]
    for source, kind, target, raw, symbols, line in rows:
        for column, value in zip(columns, (source, kind_code[kind], target, line, raws.setdefault(raw, len(raws)),
                                           carriers.setdefault(symbols, len(carriers)))):
            column.append(value)
    return [np.frombuffer(c, dtype=np.int32) if len(c) else np.zeros(0, np.int32) for c in columns]


def _used_codes(codes: np.ndarray, pool_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(the codes in use, ascending; each code's position among them, int32): `np.unique(codes,
    return_inverse=True)` for codes below `pool_size`, counted instead of sorted (two sorts of every edge were
    a tenth of the graph rebuilt after a file created at 40K files)."""
    used = np.flatnonzero(np.bincount(codes, minlength=pool_size))
    position = np.zeros(pool_size, np.int32)
    position[used] = np.arange(len(used), dtype=np.int32)
    return used, position[codes]


def _grouped(nodes: list[int], items: list[_Item]) -> dict[int, list[_Item]]:
    """node -> its items (edges, rows), in order of first appearance."""
    out: dict[int, list[_Item]] = {}
    for node, item in zip(nodes, items):
        out.setdefault(node, []).append(item)
    return out


def _ranks(values: list) -> np.ndarray:
    """Each value's position in the sorted order of `values` (distinct values)."""
    ranks = np.zeros(len(values), np.int32)
    for rank, k in enumerate(sorted(range(len(values)), key=values.__getitem__)):
        ranks[k] = rank
    return ranks
