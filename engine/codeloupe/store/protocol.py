"""What the engine asks of an index store: the SQLite `Store` is one implementation, `PgStore` the other.

Everything above the store (the indexer, the lanes, the embedder, search, bundle, graph, ask) uses only these
names; the SQLite `Store` satisfies the protocol as it stands. `query` and `transaction` are for this
package's own modules (store.edges, store.flows), whose SQL is written in the subset SQLite and PostgreSQL
share, with `?` placeholders.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from codeloupe.lanes.lexical import KeptCounts
from codeloupe.store import ChunkTable, FileIds, FileRow, SkippedFile, SymbolNames, SymbolRow, VectorMatrix
from codeloupe.types import ChunkedFile, Revisions


@runtime_checkable
class IndexStore(Protocol):
    # Where files derived from this index are kept on this machine (the saved lexical index goes beside it).
    path: Path
    rebuilt_reason: str
    recoveries: int

    @property
    def index_id(self) -> str: ...

    def close(self) -> None: ...

    def check(self) -> None: ...

    def transaction(self) -> AbstractContextManager[Any]: ...

    def batch(self) -> AbstractContextManager[None]: ...

    def index_run(self, *, changes: bool) -> AbstractContextManager[None]: ...

    def query(self, sql: str, params: Iterable[object] = ()) -> list[tuple]: ...

    def get_meta(self, key: str, default: str = "") -> str: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def generation(self, name: str) -> int: ...

    def file_rows(self, paths: Iterable[str] | None = None, *, ids: Iterable[int] | None = None) -> dict[str, FileRow]: ...

    def file_ids(self) -> np.ndarray: ...

    def replace_file(self, chunked: ChunkedFile, *, hash: str, size: int, mtime: float, is_doc: bool,
                     encoding: str, chunker_version: int, line_count: int, terms: KeptCounts | None = None) -> int: ...

    def touch_file(self, path: str, size: int, mtime: float) -> None: ...

    def set_chunker_version(self, paths: Iterable[str], version: int) -> None: ...

    def delete_files(self, paths: Iterable[str]) -> int: ...

    def skipped_files(self) -> dict[str, SkippedFile]: ...

    def skipped_counts(self) -> dict[str, int]: ...

    def chunking_problems(self) -> list[tuple[str, str]]: ...

    def set_skipped(self, skipped: Iterable[SkippedFile], forget: Iterable[str] = ()) -> None: ...

    def chunk_table(self, file_ids: Iterable[int] | None = None) -> ChunkTable: ...

    def chunk_texts(self, ids: list[int]) -> dict[int, str]: ...

    def files_with_term_counts(self) -> np.ndarray: ...

    def kept_term_counts(self, file_ids: Iterable[int]) -> dict[int, KeptCounts]: ...

    def kept_rows_path(self) -> Path | None: ...

    def definition_counts(self) -> dict[int, int]: ...

    def iter_symbol_rows(self, page: int = 50_000) -> Iterator[SymbolRow]: ...

    def iter_symbol_names(self, page: int = 50_000) -> Iterator[SymbolNames]: ...

    def definition_words(self, file_ids: Iterable[int] | None = None) -> dict[int, str]: ...

    def symbol_rows(self, file_ids: Iterable[int] | None = None) -> list[SymbolRow]: ...

    def symbols_of_file(self, file_id: int) -> list[SymbolRow]: ...

    def definitions_holding(self, lines: Iterable[tuple[str, int]]
                            ) -> dict[tuple[str, int], list[tuple[int, int, str, str]]]: ...

    def file_encoding(self, file_id: int) -> str: ...

    def skeletons(self, file_ids: Iterable[int] | None = None) -> dict[int, str]: ...

    def counts(self) -> dict[str, int]: ...

    def has_files(self) -> bool: ...

    def language_counts(self) -> dict[str, int]: ...

    def chunks_missing_vectors(self, model: str, limit: int,
                               prefer_paths: Iterable[str] = ()) -> list[tuple[int, str, str]]: ...

    def skeletons_missing_vectors(self, model: str, limit: int) -> list[tuple[int, str]]: ...

    def files_with_text(self, file_ids: Iterable[int]) -> set[int]: ...

    def put_vectors(self, table: str, model: str, ids: list[int], vectors: np.ndarray) -> None: ...

    def vector_matrix(self, table: str, model: str) -> VectorMatrix: ...

    def vector_counts(self, model: str) -> dict[str, int]: ...

    def drop_vectors_not_of(self, model: str) -> None: ...


@runtime_checkable
class NearestChunks(Protocol):
    """A store that answers the dense lane itself (an approximate-nearest-neighbour index in the database)
    instead of handing its whole vector matrix to the process."""

    def nearest_chunks(self, model: str, query: np.ndarray, limit: int,
                       skeleton_weight: float) -> list[tuple[int, float]]: ...

    def vector_matrix_ids(self, table: str, model: str) -> np.ndarray: ...

    def searches_vectors_itself(self, model: str) -> bool:
        """Whether the repository holds too many vectors of `model` for a process to hold them (then only
        `nearest_chunks` searches them); a smaller one's are read whole (`vector_matrix`) and scanned in the
        process, as another store's."""
        ...


@runtime_checkable
class PinnedRevisions(Protocol):
    """A store whose files each record the commit they were read at (the shared index), which answers cite."""

    def revisions(self) -> Revisions: ...


@runtime_checkable
class FileIdChanges(Protocol):
    """A store that can say which files came and went since a reader's last look, without reading every id."""

    def file_ids_now(self, seen: FileIds | None = None) -> FileIds:
        """Every file id indexed now: from `seen` (an earlier answer of this store) and what changed since when
        it can tell, else read whole."""
        ...


@dataclass(frozen=True)
class TermScores:
    """One repository's BM25 answer to a query's terms, from the statistics the store keeps: the best chunks
    and files (id, score), best first, each query term's document frequency among chunks, and how many chunks."""

    chunks: list[tuple[int, float]]
    files: list[tuple[int, float]]
    chunk_frequency: dict[str, int]
    total_chunks: int
    # The same among files (a file holds a term when one of its chunks does): the file lane's statistics.
    file_frequency: dict[str, int] = field(default_factory=dict)
    total_files: int = 0


@runtime_checkable
class LexicalStatistics(Protocol):
    """A store that keeps the lexical lane's term statistics itself (written with the chunks) and answers BM25
    from them, instead of the process tokenising every chunk into its own matrix."""

    def term_scores(self, terms: list[str], limit: int, k1: float, b: float, *,
                    chunk_idf: dict[str, float] | None = None,
                    file_idf: dict[str, float] | None = None) -> TermScores: ...

    def term_scores_of(self, stores: Sequence[LexicalStatistics], terms: list[str], limit: int, k1: float,
                       b: float, *, chunk_idf: dict[str, float] | None = None,
                       file_idf: dict[str, float] | None = None) -> list[TermScores]:
        """`term_scores` of each of `stores` (this one's database answers those it holds in one statement)."""
        ...

    def chunk_frequencies(self, terms: list[str]) -> tuple[int, dict[str, int]]: ...
