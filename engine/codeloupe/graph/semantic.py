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

    Only the few entries at or above EDGE_COSINE leave numpy: a row's top neighbours are taken among those
    (ties by the smaller index), so the work in Python grows with the pairs found, not with rows x rows.
    """
    n = len(vectors)
    neighbours: dict[tuple[int, int], float] = {}
    close: dict[tuple[int, int], float] = {}
    if n < 2:
        return [], []
    for start in range(0, n, BLOCK_ROWS):
        block = vectors[start:start + BLOCK_ROWS] @ vectors.T
        rows = np.arange(len(block))
        block[rows, rows + start] = -1.0
        hit_rows, hit_cols = np.nonzero(block >= EDGE_COSINE - 1e-6)
        # float noise must not reorder equal neighbours: cosines are compared rounded to 6 decimals
        values = np.round(block[hit_rows, hit_cols].astype(np.float64), 6)
        keep = values >= EDGE_COSINE
        hit_rows, hit_cols, values = hit_rows[keep], hit_cols[keep], values[keep]
        # Row-major hits, each row's ordered by (-cosine, column): the first NEIGHBOURS_PER_FILE are its top.
        order = np.lexsort((hit_cols, -values, hit_rows))
        taken: dict[int, int] = {}
        for k in order:
            offset, j, cosine = int(hit_rows[k]), int(hit_cols[k]), float(values[k])
            i = start + offset
            if taken.get(offset, 0) < NEIGHBOURS_PER_FILE:
                taken[offset] = taken.get(offset, 0) + 1
                neighbours[(min(i, j), max(i, j))] = cosine
            if cosine >= SURPRISE_COSINE and j > i:
                close[(i, j)] = cosine
    return ([(i, j, c) for (i, j), c in sorted(neighbours.items())],
            [(i, j, c) for (i, j), c in sorted(close.items())])


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
