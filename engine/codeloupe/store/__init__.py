"""The workspace index: one SQLite file, the only module that speaks SQL.

WAL mode, and every file's update is one transaction, so a crash or a kill mid-index leaves a consistent
index that the next run resumes from. A schema version mismatch or a damaged file (found by the open-time
check or by any later statement) triggers a clean rebuild; a damaged file is moved aside first
(`Store.rebuilt_reason` says why). Reads never write, so a full disk or a read-only cache still searches;
a write on a full disk is a `StoreError` that leaves the index as it was. Two counters in `meta` let warm readers notice what changed:
`content_generation` (files, chunks, symbols) and `vector_generation` (embeddings).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar, overload

import numpy as np

from codeloupe.arrays import absent_from
from codeloupe.columns import Joined
from codeloupe.errors import StoreError
from codeloupe.lanes.lexical import TOKENS_VERSION, KeptCounts
from codeloupe.store.edges import EDGES_SCHEMA
from codeloupe.store.flows import FLOWS_SCHEMA
from codeloupe.store.health import (
    integrity_problem,
    is_damage,
    is_disk_full,
    is_read_only,
    move_aside,
    not_regular_files,
)
from codeloupe.types import BLANK_CHARS, ChunkedFile

log = logging.getLogger("codeloupe.store")

# 2: file and chunk ids are never reused (AUTOINCREMENT), so a snapshot's ids name one version of a file.
# 3: the flows tables (store.flows).
SCHEMA_VERSION = 3

# Tables an index of this schema always has: one missing from a file that says it is of this schema is damage.
_CORE_TABLES = frozenset({"files", "chunks", "symbols"})
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL UNIQUE,
    hash TEXT NOT NULL,
    language TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime REAL NOT NULL,
    is_doc INTEGER NOT NULL DEFAULT 0,
    encoding TEXT NOT NULL DEFAULT 'utf-8',
    chunker_version INTEGER NOT NULL,
    line_count INTEGER NOT NULL,
    fallback_reason TEXT NOT NULL DEFAULT ''
);
-- Every file row deleted (a changed file is deleted and written anew under a new id), in order, so a reader
-- can tell what went since its last look (`Store.file_ids_now`); only the last 10,000 to 20,000 are kept.
CREATE TABLE IF NOT EXISTS removed_files (seq INTEGER PRIMARY KEY AUTOINCREMENT, file_id INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS files_removed AFTER DELETE ON files
BEGIN INSERT INTO removed_files (file_id) VALUES (old.id); END;
CREATE TRIGGER IF NOT EXISTS removed_files_pruned AFTER INSERT ON removed_files WHEN new.seq % 10000 = 0
BEGIN
    DELETE FROM removed_files WHERE seq <= new.seq - 10000;
    INSERT OR REPLACE INTO meta VALUES ('removed_files_pruned_to', new.seq - 10000);
END;
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    ord INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    breadcrumb TEXT NOT NULL,
    symbols TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id);
CREATE TABLE IF NOT EXISTS symbols (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    parent TEXT NOT NULL,
    signature TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols(file_id);
-- Files read and then skipped for their content (binary, undecodable, minified, generated, too large), with
-- the size and mtime they had and the rules that judged them, so a re-index does not read them again.
CREATE TABLE IF NOT EXISTS skipped_files (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime REAL NOT NULL,
    rules TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS skeletons (
    file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    text TEXT NOT NULL
);
-- Each file's chunks' lexical term counts (`KeptCounts`), counted and packed when the file was indexed (in the
-- indexing workers), so that a lexical index is built from them without tokenising every chunk again.
-- `version`: the tokeniser's (`TOKENS_VERSION`); rows of another are not read. A file may have none (an index
-- written before these were kept): its chunks are tokenised when the lexical index is built.
CREATE TABLE IF NOT EXISTS file_terms (
    file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    terms BLOB NOT NULL,
    columns BLOB NOT NULL,
    counts BLOB NOT NULL,
    ends BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS chunk_vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    scale REAL NOT NULL,
    vec BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS skeleton_vectors (
    file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    scale REAL NOT NULL,
    vec BLOB NOT NULL
);
"""


# Indexes earlier versions kept that no statement reads. `symbols_name` (symbols by name, `COLLATE NOCASE`): the
# symbol lane's maps are built in memory; every symbol written was a random insert into it, which made writing
# 40K files 2.4 times slower.
_RETIRED_INDEXES = ("symbols_name",)
# How long the drop waits for another process's write to end before leaving it to a later open (the statements
# of an open otherwise only read, and a lock met there must never read as damage).
_RETIRED_DROP_WAIT_MS = 200


def _drop_retired_indexes(conn: sqlite3.Connection) -> None:
    """Drop the retired indexes an index made by an earlier version still has. It is the one write an open of an
    existing index makes: where another process is writing (or the disk is full) it is left for a later open."""
    marks = ",".join("?" * len(_RETIRED_INDEXES))
    present = [r[0] for r in conn.execute(
        f"SELECT name FROM sqlite_master WHERE type = 'index' AND name IN ({marks})", _RETIRED_INDEXES)]
    if not present:
        return
    (waited,) = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute(f"PRAGMA busy_timeout = {_RETIRED_DROP_WAIT_MS}")
    try:
        for name in present:
            conn.execute(f"DROP INDEX IF EXISTS {name}")
    except sqlite3.OperationalError as exc:
        log.info("left the retired indexes %s of the index for a later open: %s", present, exc)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(waited)}")


class RepositoryDropped(StoreError):
    """The shared index's repository a process opened was dropped from under it (`codeloupe admin drop`): its rows
    are gone, and one indexed again under its name is another repository."""


class CommitMoved(StoreError):
    """A batch's folder is no longer at the commit (or as clean as) when it was queued: its files are another
    revision's than the one the repository's answers name, so the batch is done with nothing written. Raised too
    from a direct run whose folder left its commit (`shared_index.pinned_source`): the run stops, as one cut off does."""


class SourceConflict(StoreError):
    """A folder opened on the shared index under a repository name that holds another folder's files: its
    index is not this folder's, so neither answering from it nor writing into it is honest. The message is the
    command line's; a surface with other ways (an editor) words its own from the fields."""

    def __init__(self, repository: str, indexed_from: str, folder: str) -> None:
        self.repository, self.indexed_from, self.folder = repository, indexed_from, folder
        super().__init__(f"the shared index's repository {repository!r} holds the files of {indexed_from}, not"
                         f" {folder}, so its answers would not be this folder's code: index this folder in their"
                         f" place with `codeloupe index {folder} --store URL --repo {repository} --replace`, give"
                         " it a repository of its own with --repo NAME (or store_repository), or search"
                         f" {repository!r} as indexed, with no folder: `codeloupe search --store URL --repo"
                         f' {repository} "QUERY"`')


class StoreRebuilt(StoreError):
    """A statement found the index damaged: it was moved aside and the store started over, empty.

    Raised by a write (which cannot be replayed); reads retry on the new file and return what it holds."""


@dataclass(frozen=True)
class FileRow:
    id: int
    path: str
    hash: str
    language: str
    size: int
    mtime: float
    is_doc: bool
    chunker_version: int
    line_count: int


@dataclass(frozen=True)
class SkippedFile:
    path: str
    size: int
    mtime: float
    rules: str  # the content rules that judged it (a change of rules reads it again)
    reason: str


class TextReader(Protocol):
    """What a table's texts are read back from: either store."""

    def chunk_texts(self, ids: list[int]) -> dict[int, str]: ...


class ChunkTexts(Sequence[str]):
    """The text of each chunk of a table, read from the store when asked rather than held: at 200K chunks the
    texts were 400 MB of the server's memory, while a query reads a few dozen of them (snippets, feedback)
    and only whole-workspace passes (the BM25 build, `locate`, the tour) read them all, streamed in batches.

    A chunk replaced since the table was read (its file re-indexed) reads as "": the snapshot that holds
    the row already masks it out."""

    def __init__(self, store: TextReader, ids: np.ndarray) -> None:
        self._store = store
        self._ids = ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, row: int) -> str: ...
    @overload
    def __getitem__(self, row: slice) -> list[str]: ...
    def __getitem__(self, row: int | slice) -> str | list[str]:
        if isinstance(row, slice):
            return self.many(range(len(self._ids))[row])
        return self.many([row])[0]

    def many(self, rows: Iterable[int]) -> list[str]:
        """The texts of `rows`, in their order (one query per 500 rows)."""
        ids = self._ids[np.fromiter(rows, np.int64)].tolist()
        found = self._store.chunk_texts(ids)
        return [found.get(i, "") for i in ids]

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self._ids), _TEXT_BATCH):
            yield from self.many(range(start, min(start + _TEXT_BATCH, len(self._ids))))

    def __add__(self, other: ChunkTexts) -> ChunkTexts:
        return ChunkTexts(self._store, np.concatenate([self._ids, other._ids]))


_TEXT_BATCH = 2000
_PATH_BATCH = 500  # paths or ids bound to one statement (older SQLite builds allow 999 variables)
_VECTOR_PAGE = 20_000


class JsonLists(Sequence[list[str]]):
    """A column of short string lists kept as their JSON text (one string per row instead of a list and a
    string per item: a third of the memory), decoded when a row is read."""

    def __init__(self, encoded: Sequence[str]) -> None:
        self._encoded = encoded

    @property
    def encoded(self) -> Sequence[str]:
        """Each row's JSON text (what a saved snapshot writes)."""
        return self._encoded

    def __len__(self) -> int:
        return len(self._encoded)

    @overload
    def __getitem__(self, row: int) -> list[str]: ...
    @overload
    def __getitem__(self, row: slice) -> list[list[str]]: ...
    def __getitem__(self, row: int | slice) -> list[str] | list[list[str]]:
        if isinstance(row, slice):
            return [json.loads(e) for e in self._encoded[row]]
        return json.loads(self._encoded[row])

    def many(self, rows: Iterable[int]) -> list[list[str]]:
        """The lists of `rows`, in their order, decoded in one parse (a bundle's hundreds of map lines)."""
        return json.loads("[" + ",".join([self._encoded[row] for row in rows]) + "]")

    def __add__(self, other: JsonLists) -> JsonLists:
        """Both columns one after the other, standing on their rows (a save's delta view: no copy)."""
        return JsonLists(Joined(self._encoded, other._encoded))


def paged_symbol_names(query: Callable[..., list[tuple]], page: int) -> Iterator[SymbolNames]:
    """Every symbol's (file id, start line, name, parent) through `query` (either store's), a page at a time."""
    return map(SymbolNames.of_rows, _symbols_in_pages(query, f"file_id, start_line, {_as_text('name', 'parent')}", page))


def paged_symbol_rows(query: Callable[..., list[tuple]], page: int) -> Iterator[SymbolRow]:
    """Every symbol row through `query` (either store's), a page of ids at a time."""
    return (SymbolRow(*row) for rows in _symbols_in_pages(query, _SYMBOL_COLUMNS, page) for row in rows)


def _symbols_in_pages(query: Callable[..., list[tuple]], columns: str, page: int) -> Iterator[list[tuple]]:
    """`columns` of every symbol row, in id order, `page` rows a statement (the whole table at once is a large
    transient: 1.35M rows for the standard library copied to 200K chunks)."""
    sql = f"SELECT id, {columns} FROM symbols WHERE id > ? ORDER BY id LIMIT ?"
    last = -1
    while rows := query(sql, (last, page)):
        last = rows[-1][0]
        yield [r[1:] for r in rows]
        if len(rows) < page:
            return


@dataclass
class ChunkTable:
    """Every chunk of the workspace as parallel columns (what the lanes build their matrices from)."""

    ids: np.ndarray  # int64 [n]
    file_ids: np.ndarray  # int64 [n]
    start_lines: np.ndarray  # int32 [n]
    end_lines: np.ndarray  # int32 [n]
    kinds: Sequence[str]  # interned: a handful of distinct values
    names: Sequence[str]
    breadcrumbs: Sequence[str]
    symbols: JsonLists
    texts: ChunkTexts

    @classmethod
    def from_rows(cls, store: TextReader, rows: list[tuple]) -> ChunkTable:
        """From (id, file_id, start_line, end_line, kind, name, breadcrumb, symbols JSON) rows; the texts stay
        in `store` and are read when asked."""
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        return cls(
            ids=ids,
            file_ids=np.array([r[1] for r in rows], dtype=np.int64),
            start_lines=np.array([r[2] for r in rows], dtype=np.int32),
            end_lines=np.array([r[3] for r in rows], dtype=np.int32),
            kinds=[sys.intern(r[4]) for r in rows],
            names=[r[5] for r in rows],
            breadcrumbs=[r[6] for r in rows],
            symbols=JsonLists([r[7] for r in rows]),
            texts=ChunkTexts(store, ids),
        )


@dataclass(frozen=True)
class FileIds:
    """Every file id an index held at one moment, ascending, and the last entry of its removal log then (-1:
    the index keeps none)."""

    ids: np.ndarray  # int64
    removed_up_to: int


@dataclass
class SymbolNames:
    """What the symbol lane reads of some symbols, as columns: their file ids, start lines, names and parents."""

    file_ids: np.ndarray  # int64
    start_lines: np.ndarray  # int64
    names: list[str]
    parents: list[str]

    @classmethod
    def of_rows(cls, rows: list[tuple[int, int, str, str]]) -> SymbolNames:
        """From (file id, start line, name, parent) rows."""
        file_ids, lines, names, parents = zip(*rows) if rows else ((), (), (), ())
        return cls(np.array(file_ids, np.int64), np.array(lines, np.int64), list(names), list(parents))

    def sorted_by(self, keys: np.ndarray) -> SymbolNames:
        """These symbols in the order of `keys` (one each, distinct): itself when they are in order already."""
        if len(keys) < 2 or bool((np.diff(keys) > 0).all()):
            return self
        order = np.argsort(keys, kind="stable")
        at = order.tolist()
        return SymbolNames(self.file_ids[order], self.start_lines[order], [self.names[i] for i in at],
                           [self.parents[i] for i in at])


@dataclass(frozen=True, slots=True)  # no per-row __dict__: the whole table is read at once
class SymbolRow:
    file_id: int
    name: str
    kind: str
    start_line: int
    end_line: int
    parent: str
    signature: str


@dataclass
class VectorMatrix:
    """int8 vectors with a per-row scale; `ids` are chunk ids (or file ids for skeletons)."""

    ids: np.ndarray  # int64 [n]
    q: np.ndarray  # int8 [n, d]
    scales: np.ndarray  # float32 [n]

    @property
    def dim(self) -> int:
        return int(self.q.shape[1]) if self.q.ndim == 2 else 0


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 [n, d] -> (int8 [n, d], float32 scale [n]) with symmetric per-row scaling."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales


def _as_text(*columns: str) -> str:
    """`columns` read as text whatever a row holds: SQLite keeps any type in any column, and a damaged row's
    blob would reach a tokenizer as bytes; cast, a blob that is not UTF-8 fails as a cell that does not decode
    does (`health.is_damage`: the index is moved aside and rebuilt) and any other reads as the text it holds."""
    return ", ".join(f"CAST({column} AS TEXT)" for column in columns)


# A `SymbolRow`'s fields as the symbols table holds them.
_SYMBOL_COLUMNS = f"file_id, {_as_text('name', 'kind')}, start_line, end_line, {_as_text('parent', 'signature')}"


def _kept_rows(query: Callable[..., list[tuple]], ids: list[int]) -> dict[int, KeptCounts]:
    out = {}
    for start in range(0, len(ids), 500):  # SQLite caps the number of bound parameters
        part = ids[start:start + 500]
        for file_id, *blobs in query("SELECT file_id, terms, columns, counts, ends FROM file_terms"
                                     f" WHERE version=? AND file_id IN ({','.join('?' * len(part))})",
                                     [TOKENS_VERSION, *part]):
            if all(isinstance(b, bytes) for b in blobs):
                out[file_id] = KeptCounts(*blobs)
    return out


T = TypeVar("T")


def read_kept_term_counts(path: Path, file_ids: list[int]) -> dict[int, KeptCounts] | None:
    """`Store.kept_term_counts` of the index at `path` (`Store.kept_rows_path`), read as `_read_apart` reads."""
    return _read_apart(path, lambda query: _kept_rows(query, file_ids))


def _read_apart(path: Path, read: Callable[[Callable[..., list[tuple]]], T]) -> T | None:
    """`read(query)` of the index at `path` through a read-only connection of the caller's own: a worker process
    must not use the one its parent opened. None when the index cannot be read so (gone, damaged, locked past
    the timeout)."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return None
    try:
        return read(lambda sql, params: conn.execute(sql, tuple(params)).fetchall())
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def read_symbol_part(path: Path, file_ids: list[int]) -> SymbolPartRows | None:
    """What the symbol lane reads of the files `file_ids` in the index at `path` (`symbol_part_rows`), read as
    `_read_apart` reads."""
    return _read_apart(path, lambda query: symbol_part_rows(query, file_ids))


@dataclass
class SymbolPartRows:
    """Some files' chunks (file id and start line of each) and symbols (`SymbolNames`, and the lowest and highest
    symbol id; -1 for none), each in id order."""

    chunk_file_ids: np.ndarray  # int64
    chunk_start_lines: np.ndarray  # int64
    names: SymbolNames
    first_id: int
    last_id: int


def symbol_part_rows(query: Callable[..., list[tuple]], file_ids: list[int]) -> SymbolPartRows:
    """`SymbolPartRows` of the files `file_ids`, each column read as one JSON array (as `iter_symbol_names`)."""
    files = json.dumps(file_ids)
    chunk_ids, chunk_files, starts = (json.loads(column) for column in query(
        "SELECT json_group_array(id), json_group_array(file_id), json_group_array(start_line) FROM (SELECT id,"
        " file_id, start_line FROM chunks WHERE file_id IN (SELECT value FROM json_each(?)) ORDER BY id)",
        (files,))[0])
    ids_json, symbol_files, lines, names, parents = query(
        "SELECT json_group_array(id), json_group_array(file_id), json_group_array(start_line),"
        " json_group_array(CAST(name AS TEXT)), json_group_array(CAST(parent AS TEXT))"
        " FROM (SELECT id, file_id, start_line, name, parent FROM symbols"
        " WHERE file_id IN (SELECT value FROM json_each(?)) ORDER BY id)", (files,))[0]
    ids = np.array(json.loads(ids_json), np.int64)
    order = np.argsort(np.array(chunk_ids, np.int64), kind="stable")  # an aggregate's order is SQLite's choice
    symbols = SymbolNames(np.array(json.loads(symbol_files), np.int64), np.array(json.loads(lines), np.int64),
                          json.loads(names), json.loads(parents)).sorted_by(ids)
    return SymbolPartRows(np.array(chunk_files, np.int64)[order], np.array(starts, np.int64)[order], symbols,
                          int(ids.min()) if len(ids) else -1, int(ids.max()) if len(ids) else -1)


def index_problem(conn: sqlite3.Connection) -> str:
    """"" when the index is sound, else what is wrong: its pages (`integrity_problem`), then whether every
    file's chunks still cover its lines."""
    return integrity_problem(conn) or _uncovered_files(conn)


def _uncovered_files(conn: sqlite3.Connection) -> str:
    """"" when every file's chunks cover as many lines as its row records, else which do not: a file's chunks
    are a line partition of it, so rows deleted from `chunks` (or added) by hand leave a file whose chunks
    cover fewer (or more) lines, which pages that read sound never reveal; the file would be searched with
    part of it missing, never indexed again until it changed. One aggregate over the chunks' line columns, no
    row read in Python: 0.3-1.1 s at 200K chunks (68K files, a 1.1 GB index) beside quick_check's 2.9-7.3 s."""
    row = conn.execute(
        "SELECT f.path, coalesce(c.covered, 0), f.line_count, count(*) OVER () FROM files f"
        " LEFT JOIN (SELECT file_id, sum(end_line - start_line + 1) AS covered FROM chunks GROUP BY file_id) c"
        " ON c.file_id = f.id WHERE coalesce(c.covered, 0) != f.line_count ORDER BY f.path LIMIT 1").fetchone()
    if row is None:
        return ""
    path, covered, lines, files = row
    return (f"the chunks of {files} file{'' if files == 1 else 's'} no longer cover their lines ({str(path)[:200]!r}:"
            f" {covered} of {lines})")


class Store:
    def __init__(self, path: Path, *, check: bool = True) -> None:
        """`check=False` defers the open-time integrity check (a read of every page: seconds on a large index)
        to `check()`, for a caller that has something to show first (the language server's progress)."""
        self.path = Path(path)
        self._unchecked = not check
        self.rebuilt_reason = ""
        self._lock = threading.RLock()
        self._batching = False  # within `batch`: transactions are part of its one
        self._generations: dict[str, int] = {}  # the last value each counter was read at
        self.read_only_reason = ""  # why the index was opened read-only ("" when it is writable)
        self.recoveries = 0  # damage met in use and repaired by starting over (a run in progress restarts)
        self._volatile_index_id = ""  # for an old index on a disk that cannot take the write
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the index directory {self.path.parent}: {exc}") from exc
        self._conn = self._open()

    # ------------------------------------------------------------------ lifecycle

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that writes nothing, not even WAL bookkeeping: for a full disk or a read-only cache.

        Opening a WAL index normally creates its shared-memory file, which a full disk refuses; `immutable`
        reads the main file as it stands (a clean close has checkpointed everything into it)."""
        uri = f"{self.path.resolve().as_uri()}?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = self._connect()
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            conn.executescript(_SCHEMA + EDGES_SCHEMA + FLOWS_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                has_files = conn.execute("SELECT count(*) FROM files").fetchone()[0]
                if has_files:
                    raise sqlite3.DatabaseError("schema version missing")
                self._initialise(conn)
            elif not (isinstance(row[0], str) and row[0].isascii() and row[0].isdigit()):
                raise sqlite3.DatabaseError(f"schema version {str(row[0])[:40]!r} is not a number")
            elif int(row[0]) != SCHEMA_VERSION:
                conn.close()
                return self._rebuild(f"schema version {row[0]} != {SCHEMA_VERSION}")
            elif missing := _CORE_TABLES - tables:
                # The schema script made them anew, empty: an index of files whose chunks are gone would answer
                # with empty code and re-index nothing (a file's row says it is indexed).
                raise sqlite3.DatabaseError(f"table {', '.join(sorted(missing))} missing")
            _drop_retired_indexes(conn)
            problem = "" if self._unchecked else index_problem(conn)
            if problem:
                conn.close()
                return self._rebuild(f"corrupt index ({problem})", damaged=True)
            return conn
        except sqlite3.OperationalError as exc:
            if odd := not_regular_files(self.path):  # put there by hand: SQLite calls it a full disk or unopenable
                return self._rebuild(f"{', '.join(odd)} not a regular file ({exc})", damaged=True)
            if is_disk_full(exc) or is_read_only(exc):
                return self._open_read_only(exc)
            if "unable to open" in str(exc):
                raise StoreError(f"cannot open the index {self.path}: {exc}") from exc
            return self._rebuild(f"unreadable index ({exc})", damaged=True)
        except sqlite3.DatabaseError as exc:
            return self._rebuild(f"corrupt index ({exc})", damaged=True)

    def _open_read_only(self, exc: sqlite3.OperationalError) -> sqlite3.Connection:
        """Searching still works when the index cannot be written; indexing then fails with a clear error."""
        if not self.path.is_file():
            raise StoreError(f"cannot create the index {self.path}: {exc}") from exc
        try:
            conn = self._connect_read_only()
        except sqlite3.Error as second:
            raise StoreError(f"cannot open the index {self.path}: {exc}; read-only: {second}") from exc
        self.read_only_reason = str(exc)
        log.info("the index %s cannot be written (%s); opened it read-only", self.path, exc)
        return conn

    def _rebuild(self, reason: str, *, damaged: bool = False) -> sqlite3.Connection:
        """A new, empty index in place of the old file; a damaged one is kept aside to look at."""
        if damaged:
            moved = move_aside(self.path)
            reason = f"{reason}; the damaged file was moved to {moved.name}"
            log.warning("the index %s was rebuilt: %s", self.path, reason)
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
        self.rebuilt_reason = reason
        conn = self._connect()
        conn.executescript(_SCHEMA + EDGES_SCHEMA + FLOWS_SCHEMA)
        self._initialise(conn)
        return conn

    @staticmethod
    def _initialise(conn: sqlite3.Connection) -> None:
        # Everything a reader may ask of `meta` is written now, so no read path ever has to write.
        conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                         [("schema_version", str(SCHEMA_VERSION)), ("index_id", uuid.uuid4().hex)])

    def check(self) -> None:
        """The integrity check a store opened with `check=False` skipped; damage is handled as at open (moved
        aside, started over; `rebuilt_reason` says so) and counted in `recoveries`, as damage met in use is."""
        if not self._unchecked:
            return
        self._unchecked = False
        # On a connection of its own, so reads (a search answering from the saved snapshot) go on meanwhile.
        conn = sqlite3.connect(self.path, check_same_thread=False)
        try:
            problem = index_problem(conn)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            problem = str(exc)
        finally:
            conn.close()
        if problem:
            with self._lock:
                self._recover(problem)

    def _recover(self, problem: sqlite3.DatabaseError | str) -> None:
        """Damage met while in use: move the file aside and start over; warm readers see the counters move."""
        seen = dict(self._generations)
        try:
            self._conn.close()
        except sqlite3.Error:
            pass
        self._conn = self._rebuild(f"corrupt index ({problem})", damaged=True)
        self.recoveries += 1
        if seen:
            with self.transaction() as conn:
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                 [(f"{name}_generation", str(value + 1)) for name, value in seen.items()])

    def _failure(self, exc: sqlite3.DatabaseError) -> StoreError | None:
        """What a failed write means to the caller, or None for an error that is not the store's condition."""
        if is_damage(exc):
            self._recover(exc)
            return StoreRebuilt(f"the index {self.path} was damaged ({exc}); it was moved aside and is being"
                                " rebuilt")
        if is_disk_full(exc) or is_read_only(exc):
            why = self.read_only_reason or str(exc)
            return StoreError(f"cannot write the index {self.path}: the disk is full or refused the write"
                              f" ({why}). The index is as it was before this write: searching still works;"
                              " free some space and index again.")
        return None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def index_run(self, *, changes: bool) -> Iterator[None]:
        """Nothing recorded (the shared index records a run that has not finished, `PgStore.index_run`): a
        workspace's own index is brought up to date by every command and editor that opens it before it answers,
        so a run cut off is finished by the next one to open it."""
        yield

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The writes made inside, by this thread, as one transaction: an index run writes its files a group at a
        time, where a commit a file rewrote the same pages (the files table's, the generation counter's) once
        for every file. Other threads' reads and writes wait for it (it holds the store's lock); a failure rolls
        the whole group back, so each file is in the index whole or not at all, as before."""
        with self.transaction():
            self._batching = True
            try:
                yield
            finally:
                self._batching = False

    # transaction() and query() are for this package's own modules (store.edges); nothing outside the store
    # speaks SQL.
    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._batching:  # inside `batch`, on its thread (the only one holding the lock)
                yield self._conn
                return
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                    self._conn.execute("COMMIT")
                finally:
                    if self._conn.in_transaction:  # the body or the commit failed (a full disk fails COMMIT)
                        self._conn.execute("ROLLBACK")
            except sqlite3.DatabaseError as exc:
                failure = self._failure(exc)
                if failure is None:
                    raise
                raise failure from exc

    def query(self, sql: str, params: Iterable[object] = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                self._recover(exc)
                return self._conn.execute(sql, tuple(params)).fetchall()

    # ------------------------------------------------------------------ meta

    def get_meta(self, key: str, default: str = "") -> str:
        rows = self.query("SELECT value FROM meta WHERE key=?", (key,))
        return rows[0][0] if rows else default

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @property
    def index_id(self) -> str:
        """A random id given to this index file when it was created: files derived from it (the saved
        lexical index) carry it, so they are never taken for a rebuilt index's."""
        if self._volatile_index_id:
            return self._volatile_index_id
        value = self.get_meta("index_id")
        if value:
            return value
        # An index made before ids were written at creation: give it one, unless the disk refuses (then an
        # id for this process only: derived files are rebuilt rather than trusted).
        try:
            with self.transaction() as conn:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('index_id', ?)", (uuid.uuid4().hex,))
        except (StoreError, sqlite3.OperationalError) as exc:
            log.debug("cannot record an index id in %s: %s", self.path, exc)
            self._volatile_index_id = self._volatile_index_id or uuid.uuid4().hex
            return self._volatile_index_id
        return self.get_meta("index_id")

    def renew_index_id(self) -> None:
        """Give the index a new id, so that no file derived from it before is taken for it again (its state went
        back: `codeloupe.search.saved_past`); an id for this process only where the disk refuses the write."""
        new = uuid.uuid4().hex
        try:
            self.set_meta("index_id", new)
        except (StoreError, sqlite3.OperationalError) as exc:
            log.debug("cannot record a new index id in %s: %s", self.path, exc)
            self._volatile_index_id = new

    def generation(self, name: str) -> int:
        stored = self.get_meta(f"{name}_generation", "0")
        try:
            value = int(stored)
        except (TypeError, ValueError):  # only this store writes it, and only as a number: a damaged row
            with self._lock:
                self._recover(f"its {name} generation is {str(stored)[:40]!r}, not a number")
            value = int(self.get_meta(f"{name}_generation", "0"))
        self._generations[name] = value
        return value

    @staticmethod
    def _bump(conn: sqlite3.Connection, name: str) -> None:
        conn.execute(
            "INSERT INTO meta VALUES (?, '1') ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            (f"{name}_generation",),
        )

    # ------------------------------------------------------------------ files

    def file_rows(self, paths: Iterable[str] | None = None, *, ids: Iterable[int] | None = None) -> dict[str, FileRow]:
        """Every file's row by path, or only those of `paths` or of `ids` (a save's: nothing of the rest is read)."""
        sql = (f"SELECT id, {_as_text('path', 'hash', 'language')}, size, mtime, is_doc, chunker_version,"
               " line_count FROM files")
        if paths is None and ids is None:
            rows = self.query(sql)
        else:
            column, wanted = ("path", sorted(set(paths))) if paths is not None else ("id", sorted(set(ids or ())))
            rows = [r for start in range(0, len(wanted), _PATH_BATCH) for r in self.query(
                f"{sql} WHERE {column} IN ({','.join('?' * len(wanted[start:start + _PATH_BATCH]))})",
                tuple(wanted[start:start + _PATH_BATCH]))]
        return {r[1]: FileRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7], r[8]) for r in rows}

    def file_ids(self) -> np.ndarray:
        """int64 [files]: every indexed file's id, ascending (what a search's delta view compares its own with)."""
        return np.array([r[0] for r in self.query("SELECT id FROM files ORDER BY id")], np.int64)

    def file_ids_now(self, seen: FileIds | None = None) -> FileIds:
        """Every file id indexed now (`protocol.FileIdChanges`). From `seen`: writers take turns and
        AUTOINCREMENT never hands an id out twice, so the files added since are the ids above `seen`'s largest,
        and those gone are in the removal log after `seen`'s last entry (a trigger writes it); the count
        checks the sum. Each answer is one statement, so one read transaction. A 40K-file index's ids read
        whole took 20-40 ms of the first search after every save."""
        try:
            return self._file_ids_now(seen)
        except sqlite3.OperationalError as exc:  # an older index opened read-only: it has no removal log
            if "removed_files" not in str(exc):
                raise
            return FileIds(self.file_ids(), -1)

    def _file_ids_now(self, seen: FileIds | None) -> FileIds:
        if seen is not None and seen.removed_up_to >= 0:
            parts: dict[int, list[int]] = defaultdict(list)
            last_id = int(seen.ids[-1]) if len(seen.ids) else 0
            for part, value in self.query(
                    "SELECT 0, count(*) FROM files UNION ALL SELECT 1, coalesce(max(seq), 0) FROM removed_files"
                    " UNION ALL SELECT 2, CAST(value AS INTEGER) FROM meta WHERE key = 'removed_files_pruned_to'"
                    " UNION ALL SELECT 3, id FROM files WHERE id > ?"
                    " UNION ALL SELECT 4, file_id FROM removed_files WHERE seq > ?", (last_id, seen.removed_up_to)):
                parts[part].append(value)
            pruned_to = parts[2][0] if parts[2] else 0
            if pruned_to <= seen.removed_up_to:  # the log still holds every removal since `seen`
                # A damaged log row (not an id) is left out: the count below then misses and every id is read.
                removed = np.array([v for v in parts[4] if isinstance(v, int)], np.int64)
                ids = np.concatenate([absent_from(seen.ids, removed),
                                      np.sort(np.array(parts[3], np.int64))])
                if len(ids) == parts[0][0]:
                    return FileIds(ids, parts[1][0])
        parts = defaultdict(list)
        for part, value in self.query("SELECT 0, coalesce(max(seq), 0) FROM removed_files"
                                      " UNION ALL SELECT 1, id FROM files"):
            parts[part].append(value)
        return FileIds(np.sort(np.array(parts[1], np.int64)), parts[0][0])

    def replace_file(self, chunked: ChunkedFile, *, hash: str, size: int, mtime: float, is_doc: bool,
                     encoding: str, chunker_version: int, line_count: int, terms: KeptCounts | None = None) -> int:
        """Store one file's chunks, symbols and skeleton in one transaction; returns the file id. `terms`: its
        chunks' lexical term counts, one document per chunk in order, kept beside them."""
        with self.transaction() as conn:
            old = conn.execute("SELECT id FROM files WHERE path=?", (chunked.path,)).fetchone()
            if old:
                conn.execute("DELETE FROM files WHERE id=?", (old[0],))
            cur = conn.execute(
                "INSERT INTO files (path, hash, language, size, mtime, is_doc, encoding, chunker_version,"
                " line_count, fallback_reason) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (chunked.path, hash, chunked.language, size, mtime, int(is_doc), encoding, chunker_version,
                 line_count, chunked.fallback_reason),
            )
            file_id = int(cur.lastrowid)
            conn.executemany(
                "INSERT INTO chunks (file_id, ord, start_line, end_line, kind, name, breadcrumb, symbols, text)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (file_id, i, c.start_line, c.end_line, c.kind, c.name, c.breadcrumb,
                     json.dumps(list(c.symbols)), c.text)
                    for i, c in enumerate(chunked.chunks)
                ],
            )
            conn.executemany(
                "INSERT INTO symbols (file_id, name, kind, start_line, end_line, parent, signature)"
                " VALUES (?,?,?,?,?,?,?)",
                [(file_id, s.name, s.kind, s.start_line, s.end_line, s.parent, s.signature)
                 for s in chunked.symbols],
            )
            conn.execute("INSERT INTO skeletons VALUES (?, ?)", (file_id, chunked.skeleton.text))
            if terms is not None and terms.chunks == len(chunked.chunks):
                conn.execute("INSERT INTO file_terms VALUES (?,?,?,?,?,?)",
                             (file_id, TOKENS_VERSION, terms.terms, terms.columns, terms.counts, terms.ends))
            self._bump(conn, "content")
        return file_id

    def touch_file(self, path: str, size: int, mtime: float) -> None:
        """Record a new mtime for a file whose content hash did not change."""
        with self.transaction() as conn:
            conn.execute("UPDATE files SET size=?, mtime=? WHERE path=?", (size, mtime, path))

    def set_chunker_version(self, paths: Iterable[str], version: int) -> None:
        """Record `version` as the chunker version of these files' rows, their chunks left as they are: a file of a
        version not this chunker's is chunked again by the next index run (`index.strategies_in_force`)."""
        with self.transaction() as conn:
            conn.executemany("UPDATE files SET chunker_version=? WHERE path=?", [(version, p) for p in paths])

    def delete_files(self, paths: Iterable[str]) -> int:
        paths = list(paths)
        if not paths:
            return 0
        with self.transaction() as conn:
            conn.executemany("DELETE FROM files WHERE path=?", [(p,) for p in paths])
            self._bump(conn, "content")
        return len(paths)

    def skipped_files(self) -> dict[str, SkippedFile]:
        """Every file remembered as skipped for its content, by path (one query for the whole workspace)."""
        return {r[0]: SkippedFile(*r) for r in self.query("SELECT path, size, mtime, rules, reason FROM skipped_files")}

    def skipped_counts(self) -> dict[str, int]:
        """Files remembered as skipped for their content, counted by reason (a status asked every second while
        indexing: counted in SQL, never a row per file)."""
        return dict(self.query("SELECT reason, COUNT(*) FROM skipped_files GROUP BY reason ORDER BY reason"))

    def chunking_problems(self) -> list[tuple[str, str]]:
        """(path, fallback reason) of each file a strategy, the chunker or its grammar failed on (`ChunkingProblem`)."""
        return self.query("SELECT path, fallback_reason FROM files WHERE fallback_reason LIKE 'strategy %'"
                          " OR fallback_reason LIKE 'error:%' OR fallback_reason LIKE 'partition:%'"
                          " OR fallback_reason LIKE 'grammar crashed:%'"
                          " OR fallback_reason LIKE 'grammar did not finish:%'"
                          " OR fallback_reason LIKE 'grammar was not run:%' ORDER BY path")

    def set_skipped(self, skipped: Iterable[SkippedFile], forget: Iterable[str] = ()) -> None:
        """Remember files skipped for their content and forget others (indexed now, or gone), in one write."""
        skipped, forget = list(skipped), list(forget)
        if not skipped and not forget:
            return
        with self.transaction() as conn:
            conn.executemany("DELETE FROM skipped_files WHERE path=?", [(p,) for p in forget])
            conn.executemany("INSERT OR REPLACE INTO skipped_files VALUES (?,?,?,?,?)",
                             [(s.path, s.size, s.mtime, s.rules, s.reason) for s in skipped])

    # ------------------------------------------------------------------ reads for the lanes

    def chunk_table(self, file_ids: Iterable[int] | None = None) -> ChunkTable:
        """Every chunk (or those of `file_ids`), ordered by id."""
        sql = f"SELECT id, file_id, start_line, end_line, {_as_text('kind', 'name', 'breadcrumb', 'symbols')} FROM chunks"
        rows = self.query(sql + " ORDER BY id") if file_ids is None else self._in_files(sql, file_ids, "id")
        return ChunkTable.from_rows(self, rows)

    def chunk_texts(self, ids: list[int]) -> dict[int, str]:
        """{chunk id: text} of those of `ids` still in the index."""
        out: dict[int, str] = {}
        for start in range(0, len(ids), 500):  # SQLite caps the number of bound parameters
            part = ids[start:start + 500]
            out.update(self.query(f"SELECT id, {_as_text('text')} FROM chunks WHERE id IN ({','.join('?' * len(part))})", part))
        return out

    def files_with_term_counts(self) -> np.ndarray:
        """The ids of the files whose term counts are kept (of this tokeniser's version), ascending."""
        rows = self.query("SELECT file_id FROM file_terms WHERE version=? ORDER BY file_id", (TOKENS_VERSION,))
        return np.array([r[0] for r in rows], np.int64)

    def kept_term_counts(self, file_ids: Iterable[int]) -> dict[int, KeptCounts]:
        """{file id: its chunks' term counts as kept (`KeptCounts.unpacked` reads them; a damaged row reads as
        None)} of those of `file_ids` that have them; a row holding something other than bytes is left out, as
        if none were kept. Packed: whoever reads them back may be another process."""
        return _kept_rows(self.query, list(file_ids))

    def kept_rows_path(self) -> Path | None:
        """Where another process may read the kept term counts itself (`read_kept_term_counts`): this index,
        unless it was opened read-only (its WAL then cannot be shared: the file is read as it stands)."""
        return None if self.read_only_reason else self.path

    def definition_counts(self) -> dict[int, int]:
        """{file id: how many definitions it has}, for files with any."""
        return dict(self.query("SELECT file_id, count(*) FROM symbols GROUP BY file_id"))

    def iter_symbol_rows(self, page: int = 50_000) -> Iterator[SymbolRow]:
        """Every symbol row, read a page of ids at a time (the whole table at once is a large transient:
        1.35M rows for the standard library copied to 200K chunks)."""
        return paged_symbol_rows(self.query, page)

    def iter_symbol_names(self, page: int = 50_000) -> Iterator[SymbolNames]:
        """Every symbol's (file id, start line, name, parent), a page at a time in id order: what the symbol lane
        reads. Each page is one row of JSON arrays (`json_group_array`), a column each: read as a tuple a row,
        the 1.35M symbols of 40K files made as many tuples, and the garbage collections they set off took 2 of
        the 6 s the symbol table took."""
        sql = ("SELECT json_group_array(id), json_group_array(file_id), json_group_array(start_line),"
               " json_group_array(CAST(name AS TEXT)), json_group_array(CAST(parent AS TEXT))"
               " FROM (SELECT id, file_id, start_line, name, parent FROM symbols WHERE id > ? ORDER BY id LIMIT ?)")
        last = -1
        while True:
            ids_json, file_ids, lines, names, parents = self.query(sql, (last, page))[0]
            ids = np.array(json.loads(ids_json), np.int64)
            if not len(ids):
                return
            columns = SymbolNames(np.array(json.loads(file_ids), np.int64), np.array(json.loads(lines), np.int64),
                                  json.loads(names), json.loads(parents))
            yield columns.sorted_by(ids)  # an aggregate's order is SQLite's choice (the subquery's, in practice)
            if len(ids) < page:
                return
            last = int(ids.max())

    def definition_words(self, file_ids: Iterable[int] | None = None) -> dict[int, str]:
        """{file id: the names and signatures of its definitions, space-separated} (the entity lane's text), of
        `file_ids` (every file's when None)."""
        sql = "SELECT file_id, group_concat(name || ' ' || signature, ' ') FROM symbols"
        if file_ids is None:
            return dict(self.query(sql + " GROUP BY file_id"))
        return dict(self._in_files(sql, file_ids, "", then=" GROUP BY file_id"))

    def symbol_rows(self, file_ids: Iterable[int] | None = None) -> list[SymbolRow]:
        sql = f"SELECT {_SYMBOL_COLUMNS} FROM symbols"
        rows = self.query(sql + " ORDER BY id") if file_ids is None else self._in_files(sql, file_ids, "")
        return [SymbolRow(*r) for r in rows]

    def _in_files(self, sql: str, file_ids: Iterable[int], order: str, then: str = "") -> list[tuple]:
        """`sql` restricted to `file_ids` (`then`: what follows the condition); sorted by the first column when
        `order` is "id"."""
        ids = list(file_ids)
        out: list[tuple] = []
        for start in range(0, len(ids), 500):  # SQLite caps the number of bound parameters
            part = ids[start:start + 500]
            out.extend(self.query(f"{sql} WHERE file_id IN ({','.join('?' * len(part))}){then}", part))
        return sorted(out, key=lambda r: r[0]) if order == "id" else out

    def symbols_of_file(self, file_id: int) -> list[SymbolRow]:
        rows = self.query(
            f"SELECT {_SYMBOL_COLUMNS} FROM symbols"
            " WHERE file_id=? ORDER BY start_line", (file_id,)
        )
        return [SymbolRow(*r) for r in rows]

    def file_encoding(self, file_id: int) -> str:
        """The encoding the file's bytes were decoded with ("" when the file is not in the index)."""
        rows = self.query("SELECT encoding FROM files WHERE id=?", (file_id,))
        return rows[0][0] if rows else ""

    def definitions_holding(self, lines: Iterable[tuple[str, int]]
                            ) -> dict[tuple[str, int], list[tuple[int, int, str, str]]]:
        """For each (path, line), the definitions whose lines hold it, as (start line, end line, name, parent):
        only those rows come back, not every definition of the files (a search's snippets name the innermost;
        the whole files' definitions were thousands of rows, 6 ms of a search at 200K chunks)."""
        wanted = sorted(set(lines))
        out: dict[tuple[str, int], list[tuple[int, int, str, str]]] = {pair: [] for pair in wanted}
        batch = _PATH_BATCH // 2  # two variables a line: within the 999 older SQLite builds allow
        for start in range(0, len(wanted), batch):
            part = wanted[start:start + batch]
            rows = self.query(
                f"WITH wanted(path, line) AS (VALUES {','.join(['(?, ?)'] * len(part))})"
                f" SELECT w.path, w.line, s.start_line, s.end_line, {_as_text('s.name', 's.parent')} FROM wanted w"
                " JOIN files f ON f.path = w.path JOIN symbols s ON s.file_id = f.id"
                " WHERE s.start_line <= w.line AND s.end_line >= w.line", [x for pair in part for x in pair])
            for path, line, *definition in rows:
                out[path, line].append(tuple(definition))
        return out

    def skeletons(self, file_ids: Iterable[int] | None = None) -> dict[int, str]:
        """{file id: skeleton text} of `file_ids` (every file's when None)."""
        sql = f"SELECT file_id, {_as_text('text')} FROM skeletons"
        return dict(self.query(sql) if file_ids is None else self._in_files(sql, file_ids, ""))

    def counts(self) -> dict[str, int]:
        out = {}
        for table in ("files", "chunks", "symbols"):
            out[table] = self.query(f"SELECT count(*) FROM {table}")[0][0]
        return out

    def has_files(self) -> bool:
        """Whether any file is indexed (one row looked up, where `counts` counts three tables)."""
        return bool(self.query("SELECT EXISTS (SELECT 1 FROM files)")[0][0])

    def language_counts(self) -> dict[str, int]:
        return dict(self.query("SELECT language, count(*) FROM files GROUP BY language ORDER BY 2 DESC"))

    # ------------------------------------------------------------------ vectors

    def chunks_missing_vectors(self, model: str, limit: int,
                               prefer_paths: Iterable[str] = ()) -> list[tuple[int, str, str]]:
        """(chunk id, breadcrumb, text) of chunks with no vector for `model`; chunks of `prefer_paths` first."""
        prefer = list(prefer_paths)
        rows: list[tuple[int, str, str]] = []
        base = (
            f"SELECT c.id, {_as_text('c.breadcrumb', 'c.text')} FROM chunks c JOIN files f ON f.id = c.file_id"
            " LEFT JOIN chunk_vectors v ON v.chunk_id = c.id AND v.model = ?"
            " WHERE v.chunk_id IS NULL"
        )
        if prefer:
            marks = ",".join("?" * len(prefer))
            rows = self.query(f"{base} AND f.path IN ({marks}) ORDER BY c.id LIMIT ?", (model, *prefer, limit))
        if len(rows) < limit:
            seen = {r[0] for r in rows}
            more = self.query(f"{base} ORDER BY c.id LIMIT ?", (model, limit + len(seen)))
            rows.extend(r for r in more if r[0] not in seen)
        return rows[:limit]

    def files_with_text(self, file_ids: Iterable[int]) -> set[int]:
        """Those of `file_ids` with a chunk holding more than `BLANK_CHARS`: the others (empty files, files of blank
        lines) have nothing to embed."""
        blank = "char(" + ",".join(str(ord(c)) for c in BLANK_CHARS) + ")"
        return {r[0] for r in self._in_files("SELECT DISTINCT file_id FROM chunks", file_ids, "",
                                             f" AND trim({_as_text('text')}, {blank}) != ''")}

    def skeletons_missing_vectors(self, model: str, limit: int) -> list[tuple[int, str]]:
        return self.query(
            f"SELECT s.file_id, {_as_text('s.text')} FROM skeletons s"
            " LEFT JOIN skeleton_vectors v ON v.file_id = s.file_id AND v.model = ?"
            " WHERE v.file_id IS NULL ORDER BY s.file_id LIMIT ?",
            (model, limit),
        )

    def put_vectors(self, table: str, model: str, ids: list[int], vectors: np.ndarray) -> None:
        """Store float32 vectors as int8 + scale. `table` is "chunk" or "skeleton"."""
        key = {"chunk": ("chunk_vectors", "chunk_id"), "skeleton": ("skeleton_vectors", "file_id")}[table]
        q, scales = quantize(vectors)
        with self.transaction() as conn:
            # A row may have vanished since it was handed out (file re-indexed): insert only live owners.
            owner = "chunks" if table == "chunk" else "files"
            live = {r[0] for r in conn.execute(
                f"SELECT id FROM {owner} WHERE id IN ({','.join('?' * len(ids))})", ids)}
            conn.executemany(
                f"INSERT OR REPLACE INTO {key[0]} ({key[1]}, model, scale, vec) VALUES (?,?,?,?)",
                [(i, model, float(s), row.tobytes()) for i, s, row in zip(ids, scales, q) if i in live],
            )
            self._bump(conn, "vector")

    def vector_matrix(self, table: str, model: str) -> VectorMatrix:
        key = {"chunk": ("chunk_vectors", "chunk_id"), "skeleton": ("skeleton_vectors", "file_id")}[table]
        sql = f"SELECT {key[1]}, scale, vec FROM {key[0]} WHERE model=? AND {key[1]} > ? ORDER BY {key[1]} LIMIT ?"
        # Read in pages of ids into arrays: the whole result as Python tuples was 1.4x the matrix again.
        parts: list[VectorMatrix] = []
        last = -1
        while True:
            rows = self.query(sql, (model, last, _VECTOR_PAGE))
            if rows:
                parts.append(VectorMatrix(
                    np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
                    np.frombuffer(b"".join(r[2] for r in rows), dtype=np.int8).reshape(len(rows), -1),
                    np.fromiter((r[1] for r in rows), dtype=np.float32, count=len(rows))))
                last = rows[-1][0]
            if len(rows) < _VECTOR_PAGE:
                break
        if not parts:
            return VectorMatrix(np.zeros(0, np.int64), np.zeros((0, 0), np.int8), np.zeros(0, np.float32))
        if len(parts) == 1:
            return parts[0]
        return VectorMatrix(np.concatenate([p.ids for p in parts]), np.concatenate([p.q for p in parts]),
                            np.concatenate([p.scales for p in parts]))

    def vector_counts(self, model: str) -> dict[str, int]:
        return {
            "chunks_done": self.query("SELECT count(*) FROM chunk_vectors WHERE model=?", (model,))[0][0],
            "skeletons_done": self.query("SELECT count(*) FROM skeleton_vectors WHERE model=?", (model,))[0][0],
        }

    def drop_vectors_not_of(self, model: str) -> None:
        """Vectors of two models are never mixed: switching models forgets the other model's vectors."""
        stale = "SELECT 1 FROM {} WHERE model != ? LIMIT 1"
        if not any(self.query(stale.format(t), (model,)) for t in ("chunk_vectors", "skeleton_vectors")):
            return  # the usual case, and a read must not write (a full disk still searches)
        with self.transaction() as conn:
            dropped = conn.execute("DELETE FROM chunk_vectors WHERE model != ?", (model,)).rowcount
            dropped += conn.execute("DELETE FROM skeleton_vectors WHERE model != ?", (model,)).rowcount
            if dropped:
                self._bump(conn, "vector")
