"""The entity lane (issue mode only): one BM25 document per file of its path, symbol names and signatures.

A pasted bug report names functions and files more than it describes behaviour; scoring whole files by the
names they define finds the file a report is about even when no single chunk matches its prose.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from codeloupe.lanes.lexical import BM25Index
from codeloupe.lanes.tokens import path_tokens, tokenize
from codeloupe.store import SymbolRow


def build_entity_index(file_paths: dict[int, str], symbols: list[SymbolRow]) -> tuple[np.ndarray, BM25Index]:
    """(file ids in document order, the BM25 index over them)."""
    names: dict[int, list[str]] = defaultdict(list)
    for sym in symbols:
        names[sym.file_id].append(f"{sym.name} {sym.signature}")
    file_ids = sorted(file_paths)
    docs = [path_tokens(file_paths[f]) + tokenize(" ".join(names.get(f, []))) for f in file_ids]
    return np.array(file_ids, np.int64), BM25Index(docs, keep_counts=False)
