"""Read-only columns and maps that stand on another's items instead of copying them.

A save's delta view (`search.Searcher._delta_view`) is the full snapshot with a few files taken out and put
in. Copied, its per-chunk columns were five 200K-element lists and its per-file maps seven 40K-entry dicts at
40K files, and each new copy was also walked, element by element, by the collector's next young passes (tens
of ms each after every save). These views hold the full snapshot's containers and only what the save changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import TypeVar, overload

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class Joined(Sequence[T]):
    """`head` then `tail` as one sequence, with the rows of `replaced` (row -> item) read from it instead."""

    __slots__ = ("_head", "_tail", "_split", "_replaced")

    def __init__(self, head: Sequence[T], tail: Sequence[T], replaced: Mapping[int, T] | None = None) -> None:
        self._head, self._tail, self._split = head, tail, len(head)
        self._replaced = dict(replaced or {})

    def __len__(self) -> int:
        return self._split + len(self._tail)

    @overload
    def __getitem__(self, row: int) -> T: ...
    @overload
    def __getitem__(self, row: slice) -> list[T]: ...
    def __getitem__(self, row: int | slice) -> T | list[T]:
        if isinstance(row, slice):
            return [self[r] for r in range(len(self))[row]]
        if row < 0:
            row += len(self)
        if row in self._replaced:
            return self._replaced[row]
        if 0 <= row < self._split:
            return self._head[row]
        if row < 0:
            raise IndexError("row out of range")
        return self._tail[row - self._split]  # IndexError past the end, as a list's

    def __iter__(self) -> Iterator[T]:
        items = chain(self._head, self._tail)
        if not self._replaced:
            return items
        return (self._replaced.get(row, item) for row, item in enumerate(items))


class Overlay(Mapping[K, V]):
    """`base` with the keys of `put` put in (or replaced) and those of `gone` taken out."""

    __slots__ = ("_base", "_put", "_gone", "_len")

    def __init__(self, base: Mapping[K, V], put: Mapping[K, V], gone: Iterable[K] = ()) -> None:
        self._base, self._put = base, dict(put)
        self._gone = {k for k in gone if k in base and k not in self._put}
        self._len = len(base) - len(self._gone) + sum(k not in base for k in self._put)

    def __getitem__(self, key: K) -> V:
        if key in self._put:
            return self._put[key]
        if key in self._gone:
            raise KeyError(key)
        return self._base[key]

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        if key in self._put:
            return self._put[key]
        if key in self._gone:
            return default
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._put or (key not in self._gone and key in self._base)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        skip = self._gone | self._put.keys()
        yield from (k for k in self._base if k not in skip)
        yield from self._put
