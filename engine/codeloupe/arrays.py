"""Array operations where numpy's own general form is slow for the shapes the engine has."""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an array, ascending: what `np.unique(values)` returns.

    numpy 2.4's `np.unique` without `return_*` options finds distinct values through a hash table, which on
    many distinct 64-bit keys (a graph's node pairs, 2M of them at 40K files) runs ~50x slower than sorting
    and keeping each run's first value (2.7 s against 0.05 s on this project's reference machine).
    """
    ordered = np.sort(values, axis=None)  # flattened, as np.unique does
    if not len(ordered):
        return ordered
    keep = np.empty(len(ordered), bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def absent_from(values: np.ndarray, others: np.ndarray) -> np.ndarray:
    """The elements of `values` (non-negative integers: file or row ids) that `others` lacks, in their order:
    `np.setdiff1d(values, others)` for distinct ascending `values`, by one scatter into a mask instead of
    numpy 2.4's hash-based distinct values of both (a save's delta view at 40K files spent 144-195 ms there)."""
    if not len(values):
        return values
    seen = np.zeros(int(max(values.max(), others.max(initial=-1))) + 1, bool)
    seen[others] = True
    return values[~seen[values]]


def find_sorted(ascending: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each of `values`' position in `ascending`, a sorted array, where it is found; whether it is): positions
    of values not found point at some element, clipped into range. For keys too sparse for `absent_from`'s mask
    (a graph's node pairs), and where the positions are wanted."""
    if not len(ascending):
        return np.zeros(len(values), np.int64), np.zeros(len(values), bool)
    positions = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    return positions, ascending[positions] == values


def made_consecutive(numbered: dict[str, int], given: int) -> tuple[np.ndarray, dict[str, int]] | None:
    """Keys numbered provisionally, each new one taking the next of a counter that also moved for keys already
    numbered (one `dict.setdefault` mapped over the keys and an `itertools.count`, so that numbering runs in C):
    (int32 [given]: each provisional number's consecutive one, the keys numbered 0, 1, ... in their order), or
    None when `given` (the counter's next value) shows the numbers are consecutive already."""
    if given == len(numbered):
        return None
    consecutive = np.empty(given, np.int32)
    consecutive[np.fromiter(numbered.values(), np.int64, len(numbered))] = np.arange(len(numbered), dtype=np.int32)
    return consecutive, dict(zip(numbered, range(len(numbered))))
