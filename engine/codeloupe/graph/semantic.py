"""The semantic lane: files whose skeletons (signatures, doc comments) embed close together.

Only code with definitions in it joins: two empty `__init__.py` files, two SVG logos or `cert.pem` and
`key.pem` embed alike because there is nothing in them, and a "surprise" between them tells nobody anything.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from codeloupe.arrays import distinct
from codeloupe.saved import pack_strings, unpack_strings

NEIGHBOURS_PER_FILE = 3
EDGE_COSINE = 0.80
SURPRISE_COSINE = 0.85
BLOCK_ROWS = 128  # rows of the similarity product held at once (128 x 40K files: 20 MB)
# A float32 product's cosine is within ~1e-5 of the exact one (384 terms): pairs this close to EDGE_COSINE are
# computed again exactly before the threshold decides.
_SCREEN_MARGIN = 1e-4
_RESCORE_PAIRS = 4096  # pairs computed again at once (two float64 rows each: 25 MB at 384 dimensions)
# Above this share of new or changed vectors the whole product is as cheap as the rows'.
INCREMENTAL_SHARE = 0.25
# A file keeps its best close pairs only (`_bounded`): a crowd of near-identical files otherwise makes n^2 / 2
# of them (2,000 identical skeletons: 2M pairs, 630 MB; 10,000 would not fit in memory).
PAIRS_PER_FILE = 32
_PRUNE_SLACK = 65_536  # pairs held before the running bound is first applied
_HASH_SEED = 0x5EED  # the row hash's multipliers (`_first_copies`): any fixed odd numbers do
# Languages that are data, configuration, markup or prose (the chunker's names): never in the semantic lane.
NON_CODE_LANGUAGES = frozenset({
    "", "asciidoc", "bibtex", "css", "csv", "dtd", "gitattributes", "gitignore", "gomod", "gosum", "html",
    "ini", "json", "kdl", "latex", "markdown", "mermaid", "org", "pem", "po", "properties", "requirements",
    "ron", "rst", "scss", "text", "toml", "tsv", "typst", "xml", "yaml",
})
MIN_DEFINITIONS = 1  # a file with no function, class or method has no skeleton worth comparing


def joins_semantic_lane(language: str, definitions: int) -> bool:
    return language not in NON_CODE_LANGUAGES and definitions >= MIN_DEFINITIONS


def similar_pairs(vectors: np.ndarray) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float]]]:
    """(each row's top neighbours with cosine >= EDGE_COSINE, its close pairs with cosine >= SURPRISE_COSINE),
    both as (i, j, cosine) with i < j, from a blocked product of the L2-normalised rows."""
    return chosen(*close_pairs(vectors))


def close_pairs(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first rows, second rows, cosines) of the close pairs i < j of L2-normalised rows: every pair with cosine
    >= EDGE_COSINE that is among the PAIRS_PER_FILE best of either of its rows (`_bounded`).

    The product is symmetric, so each block of rows is multiplied only by the rows from its own first one on
    (half the work of the whole product: the quadratic part of a first graph). Only the few entries near or
    above EDGE_COSINE leave the product, and their cosines are computed again one pair at a time
    (`_cosines`), so that a pair's cosine never depends on which product found it.
    """
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    copies = _first_copies(vectors)
    for start in range(0, len(vectors), BLOCK_ROWS):
        block = vectors[start:start + BLOCK_ROWS] @ vectors[start:].T
        rows, cols = np.nonzero(block >= EDGE_COSINE - _SCREEN_MARGIN)
        above = cols > rows  # the block's own rows: only pairs (i, j) with j > i
        found.append(_kept(vectors, copies, rows[above] + start, cols[above] + start))
        found = _bounded_so_far(found, len(vectors))
    return _bounded(*_joined(found))


def close_pairs_of(vectors: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The close pairs that rows `rows` (ascending) make with every row, each row's PAIRS_PER_FILE best of them
    (with the others' best among them): what a few new or changed vectors add, for a product of len(rows) x n
    instead of n x n."""
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    copies = _first_copies(vectors)
    for start in range(0, len(rows), BLOCK_ROWS):
        mine = rows[start:start + BLOCK_ROWS]
        at, others = np.nonzero(vectors[mine] @ vectors.T >= EDGE_COSINE - _SCREEN_MARGIN)
        ones = mine[at]
        keys = distinct(np.minimum(ones, others)[ones != others] * len(vectors)
                        + np.maximum(ones, others)[ones != others])  # a pair of two of `rows` found twice: once
        found.append(_kept(vectors, copies, keys // max(len(vectors), 1), keys % max(len(vectors), 1)))
        found = _bounded_so_far(found, len(vectors))
    return _bounded(*_joined(found))


def chosen(first: np.ndarray, second: np.ndarray, cosine: np.ndarray
           ) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float]]]:
    """(each row's top neighbours, the pairs with cosine >= SURPRISE_COSINE) among the close pairs (first <
    second, in any order), as `similar_pairs` gives them. A row's top neighbours are taken by one sort, ties by
    the smaller other row, so no Python loop runs per pair."""
    owner, other, value, _ = _by_row(first, second, cosine)
    top = _rank_in_row(owner) < NEIGHBOURS_PER_FILE
    low, high = np.minimum(owner[top], other[top]), np.maximum(owner[top], other[top])
    pairs, unique = np.unique(np.stack([low, high]), axis=1, return_index=True)
    neighbours = list(zip(pairs[0].tolist(), pairs[1].tolist(), value[top][unique].tolist(), strict=True))
    close_mask = cosine >= SURPRISE_COSINE
    close_order = np.lexsort((second[close_mask], first[close_mask]))
    close = list(zip(first[close_mask][close_order].tolist(), second[close_mask][close_order].tolist(),
                     cosine[close_mask][close_order].tolist(), strict=True))
    return neighbours, close


def _by_row(first: np.ndarray, second: np.ndarray, cosine: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every pair as a candidate of both its rows: (row, other row, cosine, the pair's index), grouped by row and
    each row's ordered by (-cosine, the other row)."""
    owner, other, value = np.r_[first, second], np.r_[second, first], np.r_[cosine, cosine]
    pair = np.r_[np.arange(len(first)), np.arange(len(first))]
    order = np.lexsort((other, -value, owner))
    return owner[order], other[order], value[order], pair[order]


def _rank_in_row(owner: np.ndarray) -> np.ndarray:
    """Each entry's place (0, 1, ...) within its row's run of `owner` (sorted by row)."""
    group_starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if len(owner) else np.zeros(0, np.intp)
    return np.arange(len(owner)) - np.repeat(group_starts, np.diff(np.r_[group_starts, len(owner)]))


def _bounded(first: np.ndarray, second: np.ndarray, cosine: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs among the PAIRS_PER_FILE best of either of their rows, in (first, second) order.

    A row's best are what the lane reads of it (its NEIGHBOURS_PER_FILE top neighbours are among them), so
    ordinary code loses nothing; a crowd of near-identical files (generated stubs, migrations, vendored copies)
    keeps n x PAIRS_PER_FILE pairs instead of n^2 / 2. Dropping a pair that is not among either row's best is
    safe at any time: more pairs only push a pair further down its rows' lists."""
    owner, _, _, pair = _by_row(first, second, cosine)
    keep = np.zeros(len(first), bool)
    keep[pair[_rank_in_row(owner) < PAIRS_PER_FILE]] = True
    order = np.lexsort((second[keep], first[keep]))
    return first[keep][order], second[keep][order], cosine[keep][order]


def _joined(found: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    return tuple(np.concatenate(part) for part in zip(*found, strict=True))  # type: ignore[return-value]


def _bounded_so_far(found: list[tuple[np.ndarray, np.ndarray, np.ndarray]], rows: int
                    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`found` bounded once it holds more pairs than its rows could keep twice over (never, in ordinary code)."""
    if sum(len(part[0]) for part in found) <= 2 * PAIRS_PER_FILE * rows + _PRUNE_SLACK:
        return found
    return [_bounded(*_joined(found))]


@dataclass
class LanePairs:
    """Every close pair of the semantic lane as file ids, with what they were computed from (the model, each
    file's vector fingerprint), so that the next vectors are compared with these instead of multiplied anew."""

    model: str
    ids: np.ndarray  # the lane's file ids, ascending (the rows of its matrix)
    prints: np.ndarray  # a fingerprint of each row's vector
    first: np.ndarray  # file ids, first < second
    second: np.ndarray
    cosine: np.ndarray

    def chosen(self) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float]]]:
        """`chosen` over file ids (their order is the rows' order)."""
        return chosen(self.first, self.second, self.cosine)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """What `from_arrays` reads back (saved with the graph)."""
        model, model_ends = pack_strings([self.model])
        return {f"{prefix}model": model, f"{prefix}model_ends": model_ends, f"{prefix}ids": self.ids,
                f"{prefix}prints": self.prints, f"{prefix}first": self.first, f"{prefix}second": self.second,
                f"{prefix}cosine": self.cosine}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> LanePairs:
        """The pairs `arrays` saved; a ValueError when the parts do not fit together."""
        ids, prints = arrays[f"{prefix}ids"].astype(np.int64), arrays[f"{prefix}prints"].astype(np.int64)
        first, second = arrays[f"{prefix}first"].astype(np.int64), arrays[f"{prefix}second"].astype(np.int64)
        cosine = arrays[f"{prefix}cosine"].astype(np.float64)
        if ids.ndim != 1 or prints.shape != ids.shape or not (first.shape == second.shape == cosine.shape) \
                or np.any(np.diff(ids) <= 0) or not (np.isin(first, ids).all() and np.isin(second, ids).all()):
            raise ValueError("saved semantic lane pairs that do not fit its files")
        (model,) = unpack_strings(arrays[f"{prefix}model"], arrays[f"{prefix}model_ends"])
        return cls(model, ids, prints, first, second, cosine)


def lane_pairs(model: str, ids: np.ndarray, vectors: np.ndarray, last: LanePairs | None = None) -> LanePairs:
    """The close pairs of the lane whose rows are `vectors` (file `ids` ascending), exactly as `close_pairs`
    finds them. With the `last` pairs of the same model, only the rows whose vector is new or changed since are
    multiplied (by every row): after a save, one file's re-embedded skeleton costs one row of the product, not
    the quadratic product again.

    A kept row that lost a pair to a changed one is multiplied again too when it held PAIRS_PER_FILE pairs or
    more: only then could its best pairs include one the bound left out (a row with fewer kept every pair it
    had)."""
    prints = np.array([int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8).digest(), "little", signed=True)
                       for row in vectors], np.int64)
    if last is not None and last.model == model:
        _, at_last, at_now = np.intersect1d(last.ids, ids, assume_unique=True, return_indices=True)
        same = last.prints[at_last] == prints[at_now]
        unchanged = ids[at_now[same]]
        keep = np.isin(last.first, unchanged) & np.isin(last.second, unchanged)
        held, counts = np.unique(np.r_[last.first, last.second], return_counts=True)
        lost = np.intersect1d(held[counts >= PAIRS_PER_FILE], np.r_[last.first[~keep], last.second[~keep]])
        again = np.isin(ids, unchanged) & np.isin(ids, lost)
        redo = np.flatnonzero(~np.isin(ids, unchanged) | again)
        if len(redo) <= INCREMENTAL_SHARE * len(ids):
            first, second, cosine = close_pairs_of(vectors, redo)
            first, second = ids[first], ids[second]
            # pairs of a row multiplied again with a kept row are found twice: once each, same cosine
            keys = np.r_[last.first[keep], first] * (int(ids.max(initial=0)) + 1) + np.r_[last.second[keep], second]
            _, once = np.unique(keys, return_index=True)
            both = (np.r_[last.first[keep], first][once], np.r_[last.second[keep], second][once],
                    np.r_[last.cosine[keep], cosine][once])
            return LanePairs(model, ids, prints, *_bounded(*both))
    first, second, cosine = close_pairs(vectors)
    return LanePairs(model, ids, prints, ids[first], ids[second], cosine)


def _kept(vectors: np.ndarray, copies: np.ndarray, first: np.ndarray, second: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cosine = _cosines(vectors, copies, first, second)
    keep = cosine >= EDGE_COSINE
    return first[keep], second[keep], cosine[keep]


def _first_copies(vectors: np.ndarray) -> np.ndarray:
    """Each row's first row with the same bytes (itself when none comes before it): rows grouped by a hash of
    their 64-bit words (10 ms at 35K rows, where sorting whole rows took 160) and checked byte for byte against
    their group's first row; should two different rows share a hash, the rows are sorted whole instead."""
    n = len(vectors)
    if n == 0:
        return np.zeros(0, np.int64)
    raw = np.ascontiguousarray(vectors).reshape(n, -1).view(np.uint8)
    if raw.shape[1] % 8:
        raw = np.pad(raw, ((0, 0), (0, 8 - raw.shape[1] % 8)))
    _, first, inverse = np.unique(_row_hashes(raw.view(np.uint64)), return_index=True, return_inverse=True)
    copies = first[inverse.ravel()]
    claimed = np.flatnonzero(copies != np.arange(n))
    if (raw[claimed] == raw[copies[claimed]]).all():
        return copies
    _, first, inverse = np.unique(raw.view(np.dtype((np.void, raw.shape[1]))).ravel(), return_index=True,
                                  return_inverse=True)
    return first[inverse.ravel()]


def _row_hashes(words: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of `words` (uint64): the sum of its words times fixed odd numbers, modulo 2**64,
    as one integer matrix-vector product (no temporary the size of the rows, on the graph build's peak)."""
    odd = np.random.default_rng(_HASH_SEED).integers(0, 2**63, words.shape[1], dtype=np.uint64) * 2 + 1
    return words @ odd


def _cosines(vectors: np.ndarray, copies: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The cosine of each pair, in float64 one pair at a time and rounded to 6 decimals: the same value whichever
    product found the pair (a float32 product's last bits depend on its shape, and float noise must not reorder
    equal neighbours).

    Computed once per pair of distinct vectors (`copies`: each row's first identical row), the same bits for
    every copy: a crowd of identical skeletons (generated stubs, vendored copies) screens n^2 / 2 pairs, whose
    rows gathered one pair at a time made 10,000 such files take 107 s."""
    a, b = copies[first], copies[second]
    low, high = np.minimum(a, b), np.maximum(a, b)  # the product is symmetric to the bit
    keys, inverse = np.unique(low * len(vectors) + high, return_inverse=True)
    low, high = keys // max(len(vectors), 1), keys % max(len(vectors), 1)
    out = np.empty(len(keys), np.float64)
    for start in range(0, len(keys), _RESCORE_PAIRS):
        part = slice(start, start + _RESCORE_PAIRS)
        out[part] = np.einsum("ij,ij->i", vectors[low[part]].astype(np.float64),
                              vectors[high[part]].astype(np.float64))
    return np.round(out, 6)[inverse.ravel()]


def capped_edges(candidates: list[tuple[int, int, float]], structural_degree: list[int]
                 ) -> list[tuple[int, int, float]]:
    """Keep similarity edges strongest first while both ends have room: a file never gets more similarity
    edges than it has structural ones (nor more than NEIGHBOURS_PER_FILE)."""
    room = [min(NEIGHBOURS_PER_FILE, d) for d in structural_degree]
    kept = []
    for i, j, cosine in sorted(candidates, key=lambda e: (-e[2], e[0], e[1])):
        if room[i] > 0 and room[j] > 0:
            room[i] -= 1
            room[j] -= 1
            kept.append((i, j, cosine))
    return sorted(kept)
