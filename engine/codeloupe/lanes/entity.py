"""The entity lane (issue mode only): one BM25 document per file of its path, symbol names and signatures.

A pasted bug report names functions and files more than it describes behaviour; scoring whole files by the
names they define finds the file a report is about even when no single chunk matches its prose.
"""

from __future__ import annotations

import numpy as np

from codeloupe.lanes.lexical import BM25Index
from codeloupe.lanes.tokens import path_tokens, tokenize


def build_entity_index(file_paths: dict[int, str], definition_words: dict[int, str]) -> tuple[np.ndarray, BM25Index]:
    """(file ids in document order, the BM25 index over them); `definition_words`: each file's definitions'
    names and signatures as one text (`Store.definition_words`). Documents are tokenised as the index
    consumes them, never all held at once."""
    file_ids = sorted(file_paths)
    docs = (path_tokens(file_paths[f]) + tokenize(definition_words.get(f, "")) for f in file_ids)
    return np.array(file_ids, np.int64), BM25Index(docs, keep_counts=False)
