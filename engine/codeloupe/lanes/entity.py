"""The entity lane (issue mode only): one BM25 document per file of its path, symbol names and signatures.

A pasted bug report names functions and files more than it describes behaviour; scoring whole files by the
names they define finds the file a report is about even when no single chunk matches its prose.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from codeloupe.lanes.lexical import BM25Index, texts_in_pages
from codeloupe.lanes.tokens import path_tokens, tokenize
from codeloupe.store.protocol import IndexStore

DEFINITIONS_PAGE = 2000  # files whose definitions are read at a time: 40K files' texts at once were the peak


def build_entity_index(file_paths: Mapping[int, str], store: IndexStore, *,
                       stats_from: BM25Index | None = None) -> tuple[np.ndarray, BM25Index]:
    """(file ids in document order, the BM25 index over them), a document being a file's path and its
    definitions' names and signatures (`definition_words`). Documents are read a page of files at a time and
    tokenised as the index consumes them, never all held at once. `stats_from` as `BM25Index` takes it."""
    file_ids = sorted(file_paths)
    docs = (path_tokens(file_paths[f]) + tokenize(words)
            for f, words in texts_in_pages(file_ids, store.definition_words, DEFINITIONS_PAGE))
    return np.array(file_ids, np.int64), BM25Index(docs, stats_from=stats_from, keep_counts=False)
