"""The semantic lane: files whose skeletons (signatures, doc comments) embed close together.

Only code with definitions in it joins: two empty `__init__.py` files, two SVG logos or `cert.pem` and
`key.pem` embed alike because there is nothing in them, and a "surprise" between them tells nobody anything.
"""

from __future__ import annotations

import numpy as np

NEIGHBOURS_PER_FILE = 3
EDGE_COSINE = 0.80
SURPRISE_COSINE = 0.85
BLOCK_ROWS = 128  # rows of the similarity product held at once (128 x 40K files: 20 MB)
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
    """(each row's top neighbours with cosine >= EDGE_COSINE, every pair with cosine >= SURPRISE_COSINE),
    both as (i, j, cosine) with i < j, from a blocked product of the L2-normalised rows.

    The product is symmetric, so each block of rows is multiplied only by the rows from its own first one on
    (half the work of the whole product: the quadratic part of a first graph) and a pair's one cosine serves
    both its rows. Only the few entries at or above EDGE_COSINE leave the product; a row's top neighbours are
    taken among them by one sort (ties by the smaller index), so no Python loop runs per pair.
    """
    n = len(vectors)
    if n < 2:
        return [], []
    firsts, seconds, cosines = [], [], []
    for start in range(0, n, BLOCK_ROWS):
        block = vectors[start:start + BLOCK_ROWS] @ vectors[start:].T
        rows, cols = np.nonzero(block >= EDGE_COSINE - 1e-6)
        above = cols > rows  # the block's own rows: only pairs (i, j) with j > i
        rows, cols = rows[above], cols[above]
        # float noise must not reorder equal neighbours: cosines are compared rounded to 6 decimals
        values = np.round(block[rows, cols].astype(np.float64), 6)
        keep = values >= EDGE_COSINE
        firsts.append(rows[keep] + start)
        seconds.append(cols[keep] + start)
        cosines.append(values[keep])
    first, second, cosine = np.concatenate(firsts), np.concatenate(seconds), np.concatenate(cosines)
    # Every pair is a candidate of both its rows; each row's candidates by (-cosine, the other's index).
    owner, other, value = np.r_[first, second], np.r_[second, first], np.r_[cosine, cosine]
    order = np.lexsort((other, -value, owner))
    owner, other, value = owner[order], other[order], value[order]
    group_starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    rank = np.arange(len(owner)) - np.repeat(group_starts, np.diff(np.r_[group_starts, len(owner)]))
    top = rank < NEIGHBOURS_PER_FILE
    low, high = np.minimum(owner[top], other[top]), np.maximum(owner[top], other[top])
    pairs, unique = np.unique(np.stack([low, high]), axis=1, return_index=True)
    neighbours = list(zip(pairs[0].tolist(), pairs[1].tolist(), value[top][unique].tolist(), strict=True))
    close_mask = cosine >= SURPRISE_COSINE
    close_order = np.lexsort((second[close_mask], first[close_mask]))
    close = list(zip(first[close_mask][close_order].tolist(), second[close_mask][close_order].tolist(),
                     cosine[close_mask][close_order].tolist(), strict=True))
    return neighbours, close


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
