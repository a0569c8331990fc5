"""The best rows of a lane's scores, as every lane's ranking and `related` cut them."""

from __future__ import annotations

import numpy as np


def top_rows(scores: np.ndarray, keep: np.ndarray, depth: int) -> list[int]:
    """Rows where `keep` (a mask, or the rows themselves in ascending order), best score first and ties by
    row, at most `depth`: the first `depth` of a sort of every kept row by (-score, row), from one partition
    instead (no full sort, no loop over rows).

    Rows tied with the `depth`-th best are all sorted before the cut, so which of them make it never depends
    on what else the array holds (a lane that scores only its candidates ranks as one that scores every row).
    """
    valid = np.flatnonzero(keep) if keep.dtype == bool else keep
    if len(valid) == 0 or depth <= 0:
        return []
    vals = scores[valid]
    if len(valid) > depth:
        floor = np.partition(vals, len(valid) - depth)[len(valid) - depth]
        inside = vals >= floor
        valid, vals = valid[inside], vals[inside]
    return valid[np.lexsort((valid, -vals))[:depth]].tolist()
