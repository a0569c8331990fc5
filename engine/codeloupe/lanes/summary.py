"""The summary lane: BM25 over one small document per file — its skeleton (path, signatures, doc paragraphs)
and the names its graph neighbours know it by.

A question that describes a behaviour in plain words, or a bug report that names the API a user called, often
matches a file's doc comments, its signatures or the names of its callers and callees, while the rest of its
body (the file lane's document) dilutes those words. The neighbours' names are evidence text about the file,
weighed by BM25 like its own words: the graph contributes words here, never a score (rule 3).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from codeloupe.lanes.lexical import BM25Index
from codeloupe.lanes.tokens import tokenize


def build_summary_index(file_ids: np.ndarray, skeletons: dict[int, str],
                        neighbour_words: dict[int, list[str]]) -> BM25Index:
    """One document per entry of `file_ids`, in that order (a file with neither skeleton nor neighbours gets
    an empty document and never ranks)."""
    return BM25Index(_documents(file_ids, skeletons, neighbour_words))


def _documents(file_ids: np.ndarray, skeletons: dict[int, str],
               neighbour_words: dict[int, list[str]]) -> Iterator[list[str]]:
    for file_id in file_ids.tolist():
        yield tokenize(skeletons.get(file_id, "")) + tokenize(" ".join(neighbour_words.get(file_id, ())))
