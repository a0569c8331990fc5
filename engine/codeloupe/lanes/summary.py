"""The summary lane: BM25 over one small document per file — its skeleton (path, signatures, doc paragraphs)
and the names its graph neighbours know it by.

A question that describes a behaviour in plain words, or a bug report that names the API a user called, often
matches a file's doc comments, its signatures or the names of its callers and callees, while the rest of its
body (the file lane's document) dilutes those words. The neighbours' names are evidence text about the file,
weighed by BM25 like its own words: the graph contributes words here, never a score (rule 3).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from codeloupe.lanes.lexical import BM25Index, texts_in_pages
from codeloupe.lanes.tokens import tokenize
from codeloupe.parallel import until
from codeloupe.store.protocol import IndexStore

SKELETON_PAGE = 2000  # skeletons read at a time: all 40K files' texts at once were ~40 MB more at the peak


def build_summary_index(file_ids: np.ndarray, store: IndexStore, neighbour_words: dict[int, list[str]], *,
                        stats_from: BM25Index | None = None,
                        should_stop: Callable[[], bool] | None = None) -> BM25Index:
    """One document per entry of `file_ids`, in that order (a file with neither skeleton nor neighbours gets
    an empty document and never ranks); the skeletons are read from `store` a page of files at a time.
    `stats_from` as `BM25Index` takes it. `should_stop` is asked before each file: once true the index ends
    there, short of `file_ids` (the caller, asking it again, keeps none of it)."""
    skeletons = texts_in_pages(file_ids.tolist(), store.skeletons, SKELETON_PAGE)
    return BM25Index((tokenize(skeleton) + tokenize(" ".join(neighbour_words.get(file_id, ())))
                      for file_id, skeleton in (skeletons if should_stop is None else until(should_stop, skeletons))),
                     stats_from=stats_from)
