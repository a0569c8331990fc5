"""The best rows of a lane's scores, as every lane's ranking and `related` cut them."""

from __future__ import annotations

import numpy as np

# A mask over many rows is first narrowed to the rows scoring at least a threshold read off every STRIDE-th row:
# the cut then partitions a few hundred rows instead of every kept one (at 200K chunks, most of a dense lane's
# cut). The threshold is the SAMPLED_PER_DEPTH x depth / STRIDE-th best sampled score, so about that many
# times `depth` rows pass it.
_STRIDE = 64
_SAMPLED_PER_DEPTH = 4


def top_rows(scores: np.ndarray, keep: np.ndarray, depth: int) -> list[int]:
    """Rows where `keep` (a mask, or the rows themselves in ascending order), best score first and ties by
    row, at most `depth`: the first `depth` of a sort of every kept row by (-score, row), from one partition
    instead (no full sort, no loop over rows).

    Rows tied with the `depth`-th best are all sorted before the cut, so which of them make it never depends
    on what else the array holds (a lane that scores only its candidates ranks as one that scores every row).
    """
    valid = _narrowed(scores, keep, depth) if keep.dtype == bool else keep
    if len(valid) == 0 or depth <= 0:
        return []
    vals = scores[valid]
    if len(valid) > depth:
        floor = np.partition(vals, len(valid) - depth)[len(valid) - depth]
        inside = vals >= floor
        valid, vals = valid[inside], vals[inside]
    return valid[np.lexsort((valid, -vals))[:depth]].tolist()


def _narrowed(scores: np.ndarray, keep: np.ndarray, depth: int) -> np.ndarray:
    """The rows of the mask `keep` that can be among its `depth` best, ascending: those scoring at least a
    threshold when at least `depth` kept rows do (the `depth`-th best kept score is then at least the threshold,
    so every row tied with it or above passes), else every kept row."""
    wanted = max(1, _SAMPLED_PER_DEPTH * depth // _STRIDE)
    if depth > 0 and len(keep) >= 4 * _STRIDE * wanted:
        sampled = np.arange(0, len(keep), _STRIDE)
        sampled = scores[sampled[keep[sampled]]]
        if len(sampled) > wanted:
            threshold = np.partition(sampled, len(sampled) - wanted)[len(sampled) - wanted]
            rows = np.flatnonzero(scores >= threshold)
            rows = rows[keep[rows]]
            if len(rows) >= depth:
                return rows
    return np.flatnonzero(keep)
