"""The chunker: every file becomes a line partition of syntax-aligned chunks, plus symbols and a skeleton.

Code is chunked with cAST (split-then-merge over the tree-sitter syntax tree, `syntax.py`), driven by
per-grammar data (`specs.py`); prose is cut at scored heading/fence/paragraph boundaries (`sections.py`).
Whatever happens, `validate_partition` holds for the result of `chunk_file`.
"""

from codeloupe.chunk.chunker import CHUNKER_VERSION, chunk_file, chunk_file_apart, chunked_version
from codeloupe.chunk.languages import available_languages, detect_language, is_doc_language
from codeloupe.chunk.lines import PartitionError, validate_partition

__all__ = [
    "CHUNKER_VERSION",
    "PartitionError",
    "available_languages",
    "chunk_file",
    "chunk_file_apart",
    "chunked_version",
    "detect_language",
    "is_doc_language",
    "validate_partition",
]
