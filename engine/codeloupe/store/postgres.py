"""The shared index on PostgreSQL + pgvector: one schema for every repository of an organisation.

Every row carries its repository's id. A `PgStore` is one repository's view of the shared tables: its
sessions set `codeloupe.repo_id` and put the `scoped` schema first on the search path, whose views, named like
the tables (`files`, `chunks`, ...), show that repository's rows only and fill its id in on insert. So the SQL
of store.edges and store.flows (written in the subset SQLite and PostgreSQL share) runs unchanged and can never
read or write another repository's rows. Every repository a process opens in one database shares that
database's connection pool.

- Migrations are versioned: `schema_migrations` holds every version applied; opening a database applies the
  missing ones under an advisory lock (any number of servers and workers may open it at once; an up-to-date
  database is opened without it), and a database newer than this program is refused rather than written.
- Vectors live in pgvector columns with an HNSW index (`vector_cosine_ops`) per dimension. They are the
  SQLite store's int8 vectors dequantised (the same numbers the in-process lane scores), stored as float32:
  the pgvector bundled with the test server (0.6) has no halfvec or int8 type.
- `embeddings` caches vectors by (model, content key) for every repository: a chunk whose breadcrumb and text
  were embedded anywhere in the organisation takes that vector (`chunks_missing_vectors` fills them in SQL
  first), so the same content is never embedded twice.
- Citations are pinned: `commit_sha` (`git rev-parse HEAD` of the folder indexed, set once an index run's files
  are all written: by the indexer at its end, by a queued run's last batch) is the revision the repository is
  indexed at, and each file row records the commit it was read at (a save's: `written_at`): an answer cites each
  file at its own (`revisions`), which differs from the repository's only for the files written since the pin
  (by a run not yet ended, a save) and those another writer wrote at another commit while the pinning run was
  under way (`_PINNED_NOW`).
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import logging
import os
import select
import threading
import time
import uuid
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codeloupe.lanes.lexical import TOKENS_VERSION, KeptCounts
from codeloupe.lanes.tokens import document_counts, path_tokens
from codeloupe.repository_names import repository_name_problem, shown_repository_name
from codeloupe.saved import keep_files_elsewhere
from codeloupe.store import (
    ChunkTable,
    FileRow,
    RepositoryDropped,
    SkippedFile,
    SourceConflict,
    StoreError,
    SymbolNames,
    SymbolRow,
    VectorMatrix,
    paged_symbol_names,
    paged_symbol_rows,
    quantize,
)
from codeloupe.store.protocol import LexicalStatistics, TermScores
from codeloupe.types import BLANK_CHARS, ChunkedFile, Revisions
from codeloupe.url_secrets import redact, redact_text
from codeloupe.wording import amount

try:
    import psycopg
except ImportError:  # the `postgres` extra is not installed: saying so is PgStore's job
    psycopg = None  # type: ignore[assignment]

log = logging.getLogger("codeloupe.store.postgres")

# The repository a session works on: `scoped.<table>` shows that repository's rows of `public.<table>` only,
# and fills its id in on insert (a stable function, so the planner still uses the repo_id indexes).
_SCOPE = "current_setting('codeloupe.repo_id')::integer"
# Connections kept open per database for the next session (more are opened while more threads ask at once).
_IDLE_CONNECTIONS = 8
# How long a connection is waited for where the store URL (`connect_timeout`) or PGCONNECT_TIMEOUT does not
# say: libpq waits until TCP gives up (minutes for a host that never answers).
CONNECT_TIMEOUT_S = 10
# How long a repository's session waits for a lock another client holds (an indexer's or a worker's write of
# the same repository; a stalled one holds it until it is stopped) before its statement fails saying so, where
# nothing else set `lock_timeout` (the store URL's options, the role's or the database's setting win).
LOCK_TIMEOUT_MS = 60_000

# (version, statements): append only; a released migration is never edited.
MIGRATIONS: list[tuple[int, str]] = [(1, """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE repositories (
    id SERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    index_id TEXT NOT NULL,
    root TEXT NOT NULL DEFAULT '',
    commit_sha TEXT NOT NULL DEFAULT '',
    content_generation BIGINT NOT NULL DEFAULT 0,
    vector_generation BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE repo_meta (
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (repo_id, key)
);
CREATE TABLE files (
    id BIGSERIAL PRIMARY KEY,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    language TEXT NOT NULL,
    size BIGINT NOT NULL,
    mtime DOUBLE PRECISION NOT NULL,
    is_doc SMALLINT NOT NULL DEFAULT 0,
    encoding TEXT NOT NULL DEFAULT 'utf-8',
    chunker_version INTEGER NOT NULL,
    line_count INTEGER NOT NULL,
    fallback_reason TEXT NOT NULL DEFAULT '',
    commit_sha TEXT NOT NULL DEFAULT '',
    UNIQUE (repo_id, path)
);
CREATE TABLE chunks (
    id BIGSERIAL PRIMARY KEY,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    file_id BIGINT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    ord INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    breadcrumb TEXT NOT NULL,
    symbols TEXT NOT NULL,
    text TEXT NOT NULL,
    content_key BYTEA NOT NULL
);
CREATE INDEX chunks_file ON chunks(file_id);
CREATE INDEX chunks_repo ON chunks(repo_id, id);
CREATE TABLE symbols (
    id BIGSERIAL PRIMARY KEY,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    file_id BIGINT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    parent TEXT NOT NULL,
    signature TEXT NOT NULL
);
CREATE INDEX symbols_file ON symbols(file_id);
CREATE INDEX symbols_repo_name ON symbols(repo_id, lower(name));
CREATE TABLE skeletons (
    file_id BIGINT PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    text TEXT NOT NULL,
    content_key BYTEA NOT NULL
);
CREATE TABLE embeddings (
    model TEXT NOT NULL,
    content_key BYTEA NOT NULL,
    vec vector NOT NULL,
    PRIMARY KEY (model, content_key)
);
CREATE TABLE chunk_vectors (
    chunk_id BIGINT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec vector NOT NULL
);
CREATE INDEX chunk_vectors_repo ON chunk_vectors(repo_id, model);
CREATE TABLE skeleton_vectors (
    file_id BIGINT PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec vector NOT NULL
);
CREATE TABLE graph_facts (
    file_id BIGINT PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    facts TEXT NOT NULL
);
CREATE TABLE edges (
    id BIGSERIAL PRIMARY KEY,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    src_file_id BIGINT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target_path TEXT NOT NULL DEFAULT '',
    raw TEXT NOT NULL,
    symbols TEXT NOT NULL DEFAULT '[]',
    line INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX edges_src ON edges(src_file_id);
CREATE INDEX edges_target ON edges(repo_id, target_path);
CREATE TABLE flows (
    id BIGSERIAL PRIMARY KEY,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    question TEXT NOT NULL,
    mode TEXT NOT NULL,
    model TEXT NOT NULL,
    question_vec BYTEA NOT NULL,
    semantic_vec BYTEA NOT NULL,
    prose TEXT NOT NULL,
    parts TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    served INTEGER NOT NULL DEFAULT 0,
    stale INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE flow_files (
    flow_id BIGINT NOT NULL REFERENCES flows(id) ON DELETE CASCADE,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (flow_id, path)
);
CREATE INDEX flow_files_path ON flow_files(repo_id, path);
CREATE TABLE work_queue (
    id BIGSERIAL PRIMARY KEY,
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    root TEXT NOT NULL,
    commit_sha TEXT NOT NULL DEFAULT '',  -- the commit checked out when the batch was queued
    paths TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_by TEXT NOT NULL DEFAULT '',
    lease_until TIMESTAMPTZ,
    done_at TIMESTAMPTZ
);
CREATE INDEX work_queue_open ON work_queue(id) WHERE done_at IS NULL;
CREATE SCHEMA scoped;
""" + "".join(
    f"CREATE VIEW scoped.{table} AS SELECT * FROM public.{table} WHERE repo_id = {_SCOPE};"
    f" ALTER VIEW scoped.{table} ALTER COLUMN repo_id SET DEFAULT {_SCOPE};"
    for table in ("files", "chunks", "symbols", "skeletons", "chunk_vectors", "skeleton_vectors", "graph_facts",
                  "edges", "flows", "flow_files"))), (2, """
-- The lexical lane's BM25 statistics, written in the transaction that writes the chunks they count: a term's
-- postings (tf, the chunk's and its file's length in terms) and chunk frequency, each file's chunk count and
-- length (subtracted from the repository's totals when the file goes), and the repository's totals. Tokenised
-- as `lex_version` says: a repository of another version is re-counted from its chunks on its next search.
-- A write takes the repository's row first, so writers of one repository never lock `lex_terms` rows in
-- opposite orders.
ALTER TABLE repositories ADD COLUMN lex_version INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN lex_chunks BIGINT NOT NULL DEFAULT 0, ADD COLUMN lex_files BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN lex_length BIGINT NOT NULL DEFAULT 0;
CREATE TABLE lex_files (
    file_id BIGINT PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    repo_id INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    length BIGINT NOT NULL
);
-- No foreign key on repo_id (a check per posting written); the chunk's cascades a repository's removal.
CREATE TABLE lex_postings (
    repo_id INTEGER NOT NULL,
    term TEXT NOT NULL,
    chunk_id BIGINT NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    file_id BIGINT NOT NULL,
    tf INTEGER NOT NULL,
    length INTEGER NOT NULL,
    file_length INTEGER NOT NULL,
    PRIMARY KEY (repo_id, term, chunk_id)
);
CREATE INDEX lex_postings_chunk ON lex_postings(chunk_id);
CREATE TABLE lex_terms (
    repo_id INTEGER NOT NULL,
    term TEXT NOT NULL,
    df INTEGER NOT NULL,
    PRIMARY KEY (repo_id, term)
);
CREATE TABLE skipped_files (
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    size BIGINT NOT NULL,
    mtime DOUBLE PRECISION NOT NULL,
    rules TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (repo_id, path)
);
CREATE VIEW scoped.skipped_files AS SELECT * FROM public.skipped_files WHERE repo_id = """ + _SCOPE + ";"
    " ALTER VIEW scoped.skipped_files ALTER COLUMN repo_id SET DEFAULT " + _SCOPE + ";"), (3, """
-- A repository's rows of the tables a snapshot reads whole, by an index that starts with the repository:
-- through their primary keys alone each read walked every repository's rows (bench/pg_org.py, 200
-- repositories: a repository's symbol page scanned millions of rows, its skeleton vectors the whole table).
CREATE INDEX symbols_repo ON symbols(repo_id, id);
CREATE INDEX skeletons_repo ON skeletons(repo_id, file_id);
CREATE INDEX skeleton_vectors_repo ON skeleton_vectors(repo_id, model, file_id);
CREATE INDEX graph_facts_repo ON graph_facts(repo_id, file_id);
"""), (4, """
-- The BM25 postings, interned: a row a chunk (its terms as ids with their counts, its and its file's length)
-- under a GIN index of the term ids, in place of a row a posting with the term as text, a primary key
-- (repo_id, term, chunk_id) and a chunk index (149 bytes a posting, 70% of the organisation's database in
-- bench/pg_org.py). The dictionary is each repository's `lex_terms`, every (repository, term) numbered from
-- one sequence: an id names one repository's term, so the GIN's list for it holds that repository's chunks
-- and a one-repository query reads nothing of the others. The index keeps no pending list: every query scans
-- the whole list, so its time would follow how recently workers wrote. A chunk's row goes with the chunk (its
-- primary key takes the cascade), which is the path a file's delete takes.
ALTER TABLE lex_terms ADD COLUMN id BIGSERIAL;
CREATE UNIQUE INDEX lex_terms_id ON lex_terms(id);
CREATE TABLE lex_chunk_terms (
    chunk_id BIGINT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    repo_id INTEGER NOT NULL,
    file_id BIGINT NOT NULL,
    length INTEGER NOT NULL,
    file_length INTEGER NOT NULL,
    terms BIGINT[] NOT NULL,
    tfs INTEGER[] NOT NULL
);
INSERT INTO lex_chunk_terms
    SELECT p.chunk_id, min(p.repo_id), min(p.file_id), min(p.length), min(p.file_length),
           array_agg(t.id ORDER BY t.id), array_agg(p.tf ORDER BY t.id)
    FROM lex_postings p JOIN lex_terms t USING (repo_id, term) GROUP BY p.chunk_id;
CREATE INDEX lex_chunk_terms_terms ON lex_chunk_terms USING gin (terms) WITH (fastupdate = off);
DROP TABLE lex_postings;
"""), (5, """
-- Files a process derives from a repository's rows and saves beside its local name (the search snapshot's
-- inputs, the graph, the file summaries: `codeloupe.saved`), kept here for every other process that opens the
-- repository: each replica would otherwise build them again (seconds of CPU for a repository's first search).
-- One row a file, replaced when the repository's state moves (migration 6 keeps one per state); the stamp says
-- which state it was built from.
CREATE TABLE saved_files (
    repo_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    suffix TEXT NOT NULL,
    stamp TEXT NOT NULL,
    data BYTEA NOT NULL,
    saved_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (repo_id, suffix)
);
"""), (6, """
-- What an administrator chose for the whole shared index, read by every worker. `global_index`: "off" once
-- `codeloupe admin global-index drop` removed the vector graph over every repository (workers then never build
-- it on their own), "on" once it was built.
CREATE TABLE IF NOT EXISTS index_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- A saved file is kept per state it was built from (the stamp names the state and the file's format), the
-- newest `SAVED_STAMPS_KEPT` of a (repository, file): two replicas of different versions, or one still at the
-- state before a write, no longer replace each other's copy at every open and build it again.
ALTER TABLE saved_files DROP CONSTRAINT IF EXISTS saved_files_pkey;
ALTER TABLE saved_files ADD PRIMARY KEY (repo_id, suffix, stamp);
"""), (7, """
-- No statement reads symbols by name (a snapshot builds the symbol lane's maps in memory): the name index
-- made by migration 1 only cost every symbol a worker writes an index entry.
DROP INDEX IF EXISTS symbols_repo_name;
"""), (8, """
-- An index run of the repository that has not finished (`PgStore.index_run`): the run's id and when it began,
-- written before its first write and cleared once its files are all written. A run killed or stopped midway
-- leaves them, and every answer says the repository may lack files until a run finishes. While the run's process
-- lives, a session of it holds an advisory lock naming the repository: a run under way is told from one cut off.
ALTER TABLE repositories ADD COLUMN IF NOT EXISTS index_run TEXT NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS index_started TIMESTAMPTZ;
"""), (9, """
-- A queued index run (`index --queue`) pins the repository once its batches are all written: each batch names
-- its run, and the repository the newest run to pin it (`latest_run`: a queued one's, or a fresh id for each
-- direct index) with the files that had left the folder when it was queued (`latest_gone`, a JSON list). The
-- transaction that writes a run's last open batch deletes those files and moves `commit_sha` to the run's commit:
-- until then the repository names the commit its rows were read at. A batch of another run than `latest_run`
-- (superseded by a later index, or given up: '' once a batch of it was left unwritten) is marked done with
-- nothing written. Batches queued before this migration name no run (''): written as they were, until an index
-- of the repository runs.
ALTER TABLE work_queue ADD COLUMN IF NOT EXISTS run TEXT NOT NULL DEFAULT '';
ALTER TABLE repositories ADD COLUMN IF NOT EXISTS latest_run TEXT NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS latest_gone TEXT NOT NULL DEFAULT '[]';
"""), (10, """
-- Each file is cited at the commit its text was read at (`PgStore.revisions`). `pinned_through` is the newest file
-- row (its id) when `commit_sha` last moved: the run that moved it wrote each row up to it or found its file
-- unchanged, so those rows hold the pinned commit's text. A newer row (written by a run not yet ended, queued or
-- direct) holds the text of the commit it records. Set here to each repository's newest row: cited as before.
ALTER TABLE repositories ADD COLUMN IF NOT EXISTS pinned_through BIGINT NOT NULL DEFAULT 0;
UPDATE repositories r SET pinned_through = coalesce((SELECT max(f.id) FROM files f WHERE f.repo_id = r.id), 0);
-- A repository's open batches of its newest run, which every answer counts with the repository's state (whether a
-- queued run is under way or stuck: `queued_batches`): found through this index, not by reading the whole
-- organisation's open queue (24 ms a state read at 200K open batches of other repositories).
CREATE INDEX IF NOT EXISTS work_queue_open_run ON work_queue(repo_id, run) WHERE done_at IS NULL;
"""), (11, """
-- The newest file row when the repository's newest run began (`latest_run`: set with it, by a direct run's start
-- and by `index --queue`): the rows up to it are those the run compared with its folder. A row written since by
-- another writer (a run begun earlier and still writing, a save) at another commit than the run's holds no text
-- the run read: its pin marks the rows only up to the first such row (`_PINNED_NOW`), and those from it on keep
-- their own revision. Marked through every row then, the pin of the run begun last cited a file that an older run
-- still under way wrote after it at the newer commit, with the older text. Set here to each repository's mark.
ALTER TABLE repositories ADD COLUMN IF NOT EXISTS run_from BIGINT NOT NULL DEFAULT 0;
UPDATE repositories SET run_from = pinned_through;
""")]
SCHEMA_VERSION = MIGRATIONS[-1][0]
# Serialises migrations across every process opening the database.
_SCHEMA_LOCK = 7_304_118
# With a repository's id, the advisory lock (two keys, shared) an index run's session holds while it writes.
_INDEX_RUN_LOCK = 7_304_119

# A repository with at most this many vectors is searched exactly (its rows by the repo_id index, every
# distance computed): exact, and cheap at that size. Above it the repository's own HNSW index answers: one
# partial index per (repository, dimension). One index over every repository would not do for one repository:
# pgvector 0.6 filters HNSW results after the scan, so a repository among 200 kept about ef_search/200 of its
# neighbours (recall@10 0.02-0.10 in bench/pg_hnsw.py), whatever `ef_search` is raised to. A search across every
# repository is what such a graph answers (`global_vector_index_sql`, built by `codeloupe admin global-index`).
EXACT_SEARCH_MAX_VECTORS = 20_000
# After a repository's HNSW build gave up waiting for an old transaction, how long a process leaves it before
# its writes try again (each try waits the whole lock wait: every file of an index run would).
BUILD_RETRY_S = 600
HNSW_EF_SEARCH_MAX = 1000
# pgvector's defaults, stated here so there is one place to change them (pgbench measures the trade-off).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
# The graph over every repository (`global_vector_index_sql`) is built once by an administrator and asked for the
# 200 nearest of a question in natural language, not the 10 nearest of a chunk: at m 16 / ef_construction 64 it
# kept 0.957 of the exact 200 at ef_search 1000, at 32 / 128 0.991, for 3.2x the build (bench/pg_hnsw.py
# --questions, 207,000 vectors; docs/org-scale-measurements.md).
GLOBAL_HNSW_M = 32
GLOBAL_HNSW_EF_CONSTRUCTION = 128
# How long a repository's generations and commit, read in one statement, answer for it: a warm query then costs
# no round trip to learn that nothing changed, and a replica sees another process's write at most this late
# (this process's own writes are seen at once).
STATE_TTL_S = 1.0
# A batch claimed this many times without being written (a worker dies on it every time) is left alone and
# counted by `WorkQueue.stuck` for someone to look at.
MAX_ATTEMPTS = 5
# repo_meta: when a repository's files were last written.
INDEXED_AT_KEY = "indexed_at"
# A file saved beside a repository's local name is kept in the database for other processes up to this size
# (PostgreSQL's limit for one value is 1 GB); a larger one is built by each process that needs it.
SAVED_FILE_MAX_BYTES = 256 * 1024 * 1024
# Copies of one saved file kept for different stamps, newest first (see migration 6).
SAVED_STAMPS_KEPT = 2


class SqlConnection:
    """What store.edges and store.flows call a connection: `execute` / `executemany` with `?` placeholders
    (their SQL is the subset SQLite and PostgreSQL share; psycopg's placeholder is `%s`)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Iterable[object] = ()) -> Any:
        return self._conn.execute(_placeholders(sql), tuple(params))

    def executemany(self, sql: str, rows: Iterable[Iterable[object]]) -> Any:
        cursor = self._conn.cursor()
        rows = [tuple(r) for r in rows]
        if rows:
            cursor.executemany(_placeholders(sql), rows)
        return cursor


def _placeholders(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


def content_key(*parts: str) -> bytes:
    """The cache key of embedded content: a chunk's breadcrumb and text (all its embedded text is made of)."""
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()


def _vector_literal(row: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in row) + "]"


def _parse_vector(text: str) -> np.ndarray:
    return np.array(json.loads(text), dtype=np.float32)


def connect(url: str) -> Any:
    if psycopg is None:
        raise StoreError("store_url names PostgreSQL, but psycopg is not installed: pip install 'codeloupe[postgres]'")
    try:
        given = "connect_timeout" in psycopg.conninfo.conninfo_to_dict(url) or os.environ.get("PGCONNECT_TIMEOUT")
        return psycopg.connect(url, autocommit=True, **({} if given else {"connect_timeout": CONNECT_TIMEOUT_S}))
    except psycopg.Error as exc:
        # libpq's text may quote the URL or its password (a URL it cannot parse): redacted, and not chained, so
        # no traceback prints it either.
        raise StoreError(f"cannot connect to the shared index {redact(url)}: {said(exc, url)}") from None


def said(exc: Exception, url: str) -> str:
    """What the database (or libpq) said of `exc`, for one line of a message: the password of `url` left out, and
    its lines joined (libpq puts its hint on a line of its own: "Is the server running ...?")."""
    return "; ".join(line.strip() for line in redact_text(str(exc), url).splitlines() if line.strip())


def migrate(conn: Any, *, wait: bool = False) -> int:
    """Apply the migrations this database lacks; returns its schema version. Refuses a newer database.

    An up-to-date database is opened without the schema's lock: a drop of a large repository holds it for as
    long as its delete takes, and every process opening the database would wait for it. A migration's lock
    waits (for the schema's lock, then for the tables it alters) end as a write's do (`bound_lock_waits`): it
    then fails naming the session holding the schema's lock, and changes nothing. With `wait` (an `admin drop
    --wait`, which waits for its own locks however long) they are not bounded either."""
    if _schema_version(conn) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    locked = False  # whether the wait that gave up was for a table, past the schema's lock
    try:
        with conn.transaction():
            if not wait:
                bound_lock_waits(conn, transaction=True)
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            locked = True
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
                         " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            current = _schema_version(conn)
            if current > SCHEMA_VERSION:
                raise StoreError(f"the shared index has schema version {current}; this codeloupe knows up to"
                                 f" {SCHEMA_VERSION}: upgrade codeloupe before using it")
            for version, statements in MIGRATIONS:
                if version > current:
                    conn.execute(statements)
                    conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
    except psycopg.errors.LockNotAvailable as exc:
        raise _not_migrated(conn, exc, locked) from exc
    return SCHEMA_VERSION


def _not_migrated(conn: Any, exc: Exception, locked: bool) -> StoreError:
    """Why opening a database that needs a migration gave up (its lock wait's timeout; the migration rolled back),
    and what to do."""
    waited = str(exc).splitlines()[0]
    if locked:
        return StoreError(
            f"cannot open the shared index: migrating it to schema version {SCHEMA_VERSION} waited for a table"
            f" another session holds ({waited}; a long report or dump reading it), and changed nothing. Try again"
            " once it is done")
    # Only the schema's lock is named: a session locking a table against writes does not block that wait.
    holders = _sessions(conn, _schema_lock_pids(conn))
    return StoreError(
        f"cannot open the shared index: another session holds its schema and did not let go ({waited}):"
        f" {holders or 'it has let go since; try again'}. A process migrating the database"
        " (a newer codeloupe opening it) holds it until the migration is done, an `admin drop` until its"
        " repository is deleted; try again once it is done, or end the session (SELECT pg_terminate_backend(PID))")


def _schema_version(conn: Any) -> int:
    """The newest migration the database has committed (0 for a database never migrated)."""
    if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None:
        return 0
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])


class _Pool:
    """The connections of one database, shared by every repository this process opens in it: a serving
    process with hundreds of repositories holds as many connections as it has concurrent queries, not one
    per repository. Each connection's `search_path` puts the `scoped` views first. Open while a store uses it
    (`_open_pool`, `_close_pool`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.users = 0  # the PgStores open on it
        self._closed = False
        self._idle: list[Any] = []
        self._scope: dict[int, int] = {}  # id(connection) -> the repository its session is set to
        self._lock = threading.Lock()
        conn = connect(url)
        try:
            migrate(conn)
        finally:
            conn.close()

    def take(self, repo_id: int) -> Any:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or not connection_lost(conn):
                break
            self._scope.pop(id(conn), None)  # the server restarted or ended it while it sat idle
            conn.close()
        if conn is None:
            conn = connect(self.url)
            conn.execute("SET search_path = scoped, public")
            bound_lock_waits(conn)
        if self._scope.get(id(conn)) != repo_id:
            conn.execute("SELECT set_config('codeloupe.repo_id', %s, false)", (str(repo_id),))
            self._scope[id(conn)] = repo_id
        return conn

    def give(self, conn: Any) -> None:
        idle = not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with self._lock:
            if idle and not self._closed and len(self._idle) < _IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
            self._scope.pop(id(conn), None)
        conn.close()

    def close(self) -> None:
        """Close the idle connections, and each one in use when it is given back (a store used after its close
        still works, a connection a session)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            for conn in idle:
                self._scope.pop(id(conn), None)
        for conn in idle:
            conn.close()


def bound_lock_waits(conn: Any, *, transaction: bool = False) -> None:
    """Give up a lock wait after `LOCK_TIMEOUT_MS` on this session (`transaction`: until its transaction ends),
    where nothing set `lock_timeout` (the store URL's options, the role's or the database's setting win)."""
    conn.execute("SELECT set_config('lock_timeout', %s, %s) FROM pg_settings"
                 " WHERE name = 'lock_timeout' AND source = 'default'", (str(LOCK_TIMEOUT_MS), transaction))


# The row lock modes (`pg_get_multixact_members`) that conflict with FOR NO KEY UPDATE, the lock every writer of
# a repository takes on its row: a foreign key check's key-share lock (a row inserted that names the repository)
# does not, unless the row is deleted.
_BLOCKING_ROW_LOCKS = ["sh", "fornokeyupd", "forupd", "nokeyupd", "upd"]
# The table lock modes that conflict with a write's (ROW EXCLUSIVE, taken on every table it writes): a reader's
# or another writer's lock never blocks it (PostgreSQL's table of conflicting lock modes).
_BLOCKING_WRITES = ["ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"]


def lock_holders(conn: Any, *, repo_id: int | None = None, deletes_row: bool = False, schema: bool = False,
                 exclusive: Collection[str] = ()) -> str:
    """The sessions holding what a statement gave up waiting for (its lock timeout), asked of the catalog once its
    transaction is over, the longest open first ("" when none is left): the transactions holding repository
    `repo_id`'s row in a mode that blocks a writer (which takes it FOR NO KEY UPDATE first), or any mode where
    the waiting transaction `deletes_row`; where it takes the schema's advisory lock (`schema`: a drop of
    HNSW indexes, `drop_vector_indexes`), the sessions holding it (a migration, another drop); and the sessions holding a lock on a
    table of the shared index that conflicts with a write's, or any lock on the tables of `exclusive` (those
    the waiting transaction locks exclusively). Sessions that only read are never named. Nothing is read from
    the error's text: it is in the server's language, and a statement queued behind another waiter for a row
    has no context naming the row at all."""
    pids = _row_holders(conn, repo_id, deletes_row) if repo_id is not None else []
    pids += [r[0] for r in conn.execute(
        "SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
        " WHERE l.locktype = 'relation' AND l.granted AND c.relnamespace = 'public'::regnamespace"
        " AND (l.mode = ANY(%s) OR c.relname = ANY(%s))", (_BLOCKING_WRITES, list(exclusive)))]
    if schema:
        pids += _schema_lock_pids(conn)
    return _sessions(conn, pids)


def _schema_lock_pids(conn: Any) -> list[int]:
    """The sessions holding the schema's advisory lock (a migration, a drop)."""
    # A bigint advisory key is held as its high and low 32 bits.
    return [r[0] for r in conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
        " AND ((classid::bigint << 32) | objid::bigint) = %s", (_SCHEMA_LOCK,))]


def _sessions(conn: Any, pids: list[int]) -> str:
    """The open transactions of sessions `pids` but this one, the longest open first (at most three), each with
    its client and last statement; "" when none is left."""
    rows = conn.execute(
        "SELECT a.pid, a.state, a.xact_start, a.application_name, coalesce(host(a.client_addr), 'local'),"
        " left(regexp_replace(a.query, '\\s+', ' ', 'g'), 120) FROM pg_stat_activity a"
        " WHERE a.pid = ANY(%s) AND a.pid <> pg_backend_pid() AND a.datname = current_database()"
        " AND a.xact_start IS NOT NULL ORDER BY a.xact_start LIMIT 3", (pids,)).fetchall()
    return "; ".join(f"session {pid} ({application or 'no application name'}, from {client}), {state} since"
                     f" {started:%Y-%m-%d %H:%M:%S %Z}, its last statement: {query}"
                     for pid, state, started, application, client, query in rows)


def _row_holders(conn: Any, repo_id: int, deletes_row: bool) -> list[int]:
    """The sessions whose open transactions hold repository `repo_id`'s row: the one its xmax names, or the
    members of the multixact it names (several lockers: a write and the key-share lock of a foreign key check)
    whose lock blocks a writer (any, where the waiting transaction `deletes_row`). No catalog says which of the
    two an xmax is: a transaction of either number is taken, and only running ones hold a lock of their number."""
    found = conn.execute("SELECT xmax::text FROM public.repositories WHERE id = %s", (repo_id,)).fetchone()
    if found is None:
        return []
    xids = [found[0]]
    try:
        xids += [r[0] for r in conn.execute("SELECT xid::text FROM pg_get_multixact_members(%s::xid)"
                                            " WHERE %s OR mode = ANY(%s)", (found[0], deletes_row, _BLOCKING_ROW_LOCKS))]
    except psycopg.Error:  # not a multixact's number (PostgreSQL says it was never made or is long gone)
        pass
    return [r[0] for r in conn.execute("SELECT pid FROM pg_locks WHERE locktype = 'transactionid' AND granted"
                                       " AND mode = 'ExclusiveLock' AND transactionid::text = ANY(%s)", (xids,))]


def connection_lost(conn: Any) -> bool:
    """Whether an idle connection is gone: closed, or with something to read, which on an idle session is the
    server's goodbye (a restart, `pg_terminate_backend`, an idle timeout) or the end of the socket. Asked
    without a round trip; a connection dropped silently still fails its next statement (`_session`)."""
    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


_pools: dict[str, _Pool] = {}
_pools_lock = threading.Lock()


@dataclass(frozen=True)
class _RepositoryState:
    """What a warm query asks of a repository's row, read in one statement (see STATE_TTL_S)."""

    read_at: float  # time.monotonic() before the read
    content_generation: int
    vector_generation: int
    commit: str
    lex_version: int
    lex_chunks: int
    root: str  # the folder it was last indexed from
    index_run: str  # an index run not finished ("" when none: `PgStore.index_run`)
    index_started: str  # when it began (ISO 8601, the database's clock)
    queued_batches: int  # batches of its newest queued run not written yet (`queued_batches`)
    stuck_batches: int  # of those, the ones no worker could write
    pinned_through: int  # the newest file row when `commit` was pinned (migration 10)


# (url, repository id) -> its last state read, shared by every PgStore of this process (a worker and a server in
# one process see each other's writes at once).
_states: dict[tuple[str, int], _RepositoryState] = {}


def _open_pool(url: str) -> _Pool:
    """The pool of `url`'s database for one more store (`_close_pool` when it is closed)."""
    with _pools_lock:
        pool = _pools.get(url)
        if pool is None:
            pool = _pools[url] = _Pool(url)
        pool.users += 1
        return pool


def _close_pool(pool: _Pool) -> None:
    """One store of `pool` closed: the last one closes its connections (a long-running server opening and
    closing repositories keeps none of a database it no longer reads)."""
    with _pools_lock:
        pool.users -= 1
        if pool.users > 0:
            return
        if _pools.get(pool.url) is pool:
            del _pools[pool.url]
    pool.close()


@atexit.register
def _close_pools() -> None:
    """At exit, the connections of the stores a process never closed (psycopg warns of each one left open)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


# SQL (in an UPDATE of a repository's row that moves `commit_sha` to `%(commit)s`, the commit of its newest run, in
# a session scoped to it): the rows it holds now are those of the commit pinned (`PgStore.revisions`), up to the
# first one written since the run began at another commit (migration 11). The writers of its files hold its row,
# as this update and the run's start do, so no row of another commit can commit below the mark.
_PINNED_NOW = ("pinned_through = coalesce((SELECT min(id) - 1 FROM files WHERE id > repositories.run_from"
               " AND commit_sha <> %(commit)s), (SELECT max(id) FROM files), 0)")
# SQL (in an UPDATE of a repository's row, with the repository's id and a run's): the run recorded under way
# (`PgStore.index_run`) ended, its files all written, unless another run took the record over since.
_RUN_ENDED = "index_run = '', index_started = NULL WHERE id = %s AND index_run = %s"
# SQL (in an UPDATE of a repository's row that makes a run its newest, in a session scoped to it): where its rows
# are when the run begins (`run_from`, migration 11).
_RUN_FROM_NOW = "run_from = coalesce((SELECT max(id) FROM files), 0)"

# SQL: when a repository's unfinished index run began, as admin repos shows times (ISO 8601, UTC; "" for none).
INDEX_STARTED = """coalesce(to_char(index_started AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), '')"""


def run_under_way(repo_id: str) -> str:
    """SQL: whether a session holds the index run lock of the repository whose id `repo_id` (an SQL expression)
    gives: its recorded run is under way, not cut off (`PgStore.index_run`)."""
    return ("EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            f" AND classid::bigint = {_INDEX_RUN_LOCK} AND objid::bigint = {repo_id})")


def queued_batches(repository: str, *, stuck: bool) -> str:
    """SQL: how many batches of the newest queued run of the `repositories` row `repository` (an SQL name for it)
    are not written yet; `stuck`: only those that failed MAX_ATTEMPTS claims, the last one's lease over: no worker
    takes them again, so the run never ends (its commit is never pinned, the files that left the folder never
    deleted) until a later index supersedes it."""
    failed = f" AND q.attempts >= {MAX_ATTEMPTS} AND (q.lease_until IS NULL OR q.lease_until < now())" if stuck else ""
    return (f"(SELECT count(*) FROM work_queue q WHERE q.done_at IS NULL AND q.repo_id = {repository}.id AND q.run ="
            f" {repository}.latest_run AND q.run <> ''{failed})")


def unfinished_index_note(repository: str, run: bool, started: str, under_way: bool, queued: int, stuck: int) -> str:
    """What an answer, `stats` and `admin repos` say of an index run of `repository` that has not finished (`run`:
    one recorded, `PgStore.index_run`; `under_way` or cut off), and of its newest queued run while `queued` of its
    batches are not written yet, `stuck` of them left by every worker that tried (`queued_batches`); "" when
    neither."""
    shown = shown_repository_name(repository)
    notes = []
    if run and under_way:
        notes.append(f"indexing of {shown} (started {started}) is under way: answers may miss files until it finishes")
    elif run:
        notes.append(f"indexing of {shown} (started {started}) did not finish: answers may miss files; run"
                     " `codeloupe index` on it again")
    if queued and not stuck:
        # Until its last batch is written the repository mixes the run's files with the ones its pin names.
        one = queued == 1
        notes.append(f"an index run queued for {shown} is under way: {amount(queued, 'batch', 'batches')} of it"
                     f" {'is' if one else 'are'} not written yet, so answers may miss its new files or show older"
                     f" text of {'its' if one else 'their'} files until `codeloupe worker` writes"
                     f" {'it' if one else 'them'}")
    if stuck:
        one = stuck == 1
        notes.append(f"{amount(stuck, 'batch', 'batches')} of the index run queued for {shown} failed {MAX_ATTEMPTS}"
                     f" times and {'is' if one else 'are'} left unwritten: answers may miss {'its' if one else 'their'}"
                     f" files or show their older text; `codeloupe admin queue` counts {'it' if one else 'them'} stuck"
                     " and the workers' log says why: fix that, then run `codeloupe index --queue` in the folder again")
    return "; ".join(notes)


def not_held(names: Iterable[str], url: str, known: Iterable[str]) -> str:
    """What a request naming repositories the shared index at `url` does not hold is told: those names, and the
    `known` ones it holds."""
    return (f"{', '.join(names)}: not in the shared index {redact(url)}"
            f" (it holds {', '.join(map(shown_repository_name, known)) or 'no repository yet'})")


def repository_names(url: str) -> list[str]:
    """Every repository the shared index holds, by name."""
    return list(repository_ids(url))


def repository_ids(url: str) -> dict[str, int]:
    """Every repository the shared index holds, by name (in order), with its id: a repository dropped and indexed
    again under its name is another id (`PgStore.repo_id`)."""
    conn = connect(url)
    try:
        migrate(conn)
        return {r[0]: int(r[1]) for r in conn.execute("SELECT name, id FROM repositories ORDER BY name")}
    finally:
        conn.close()


@dataclass
class RunEnd:
    """How an index run that writes its files itself ended (`PgStore.writing_run`): `pinned` once its end deleted
    the files it deleted and pinned its commit; False while it runs, and for a run that a later one superseded
    (that one deletes and pins)."""

    pinned: bool = False


@dataclass(frozen=True)
class BatchFile:
    """One file a worker read and chunked, with what `replace_file` records about it."""

    chunked: ChunkedFile
    hash: str
    size: int
    mtime: float
    is_doc: bool
    encoding: str
    chunker_version: int
    line_count: int
    terms: KeptCounts | None = None  # its chunks' term counts, as the chunking worker counted them


# What `_count_terms` counts of a file just written: (file id, path, [(chunk id, breadcrumb, text)], the term
# counts its chunking worker made, if any).
_Written = tuple[int, str, list[tuple[int, str, str]], KeptCounts | None]


def _chunk_counts(kept: KeptCounts | None, chunks: int) -> list[dict[str, int]] | None:
    """Each chunk's {term: count} from the counts its chunking worker kept, or None where there are none, or
    they do not read back or fit the file's `chunks` (the caller tokenises then)."""
    counted = kept.unpacked() if kept is not None else None
    if counted is None or len(counted.ends) != chunks:
        return None
    terms = counted.terms
    columns = np.frombuffer(counted.columns, np.int32).tolist()
    counts = np.frombuffer(counted.counts, np.float32).astype(np.int64).tolist()
    bounds = [0, *counted.ends]
    return [dict(zip([terms[c] for c in columns[a:b]], counts[a:b])) for a, b in zip(bounds, bounds[1:])]


@dataclass(frozen=True)
class WorkItem:
    """A claimed batch: which repository, where its files are read from, and which paths."""

    id: int
    repository: str
    repo_id: int  # the repository's row: one dropped and indexed again under its name is another
    root: str
    paths: list[str]
    claimant: str
    attempts: int  # this claim included
    commit: str = ""  # the folder's revision when the batch was queued (`shared_index.workspace_commit`)
    # The index run it was queued with, and the repository's newest when it was claimed (migration 9; "" for
    # both where it was queued before and no index ran since).
    run: str = ""
    latest_run: str = ""
    source: str = ""  # the folder the repository was indexed from when it was claimed (`PgStore.set_source`)

    @property
    def superseded(self) -> bool:
        """Whether its run was no longer the repository's newest when claimed (`RunSuperseded`)."""
        return self.run != self.latest_run


class RunSuperseded(Exception):
    """A batch of an index run that is no longer the repository's newest: a later index superseded it, or a batch
    of it was left unwritten. Its files are not written (older text would land under a newer commit, or a run
    not written whole would pin its commit); the batch is done."""

    def __init__(self, latest_run: str) -> None:
        super().__init__(
            "a later `codeloupe index` of the repository superseded the run it was queued with (that index writes"
            " its files); nothing of the batch was written" if latest_run else
            "another batch of the run it was queued with was left unwritten (its folder had left the commit the run"
            " was queued at) or pruned as given up, so the run cannot be written whole; nothing of the batch was"
            " written: run `codeloupe index --queue` in its folder again")


class WorkQueue:
    """The workers' side of `work_queue`: claims are leases taken with `FOR UPDATE SKIP LOCKED`, so two workers
    never take the same batch, and a batch whose lease ran out (its worker died) is taken again."""

    def __init__(self, url: str, worker: str) -> None:
        self.worker = worker
        self._conn = connect(url)
        migrate(self._conn)

    def claim(self, lease_s: float) -> WorkItem | None:
        claimant = f"{self.worker}:{uuid.uuid4().hex[:8]}"
        with self._conn.transaction():
            row = self._conn.execute(
                "SELECT q.id, r.name, q.root, q.paths, q.attempts, q.repo_id, q.commit_sha, q.run, r.latest_run,"
                " r.root FROM work_queue q JOIN repositories r ON r.id = q.repo_id"
                " WHERE q.done_at IS NULL AND (q.lease_until IS NULL OR q.lease_until < now())"
                " AND q.attempts < %s ORDER BY q.id LIMIT 1 FOR UPDATE OF q SKIP LOCKED", (MAX_ATTEMPTS,)).fetchone()
            if row is None:
                return None
            self._conn.execute(
                "UPDATE work_queue SET claimed_by = %s, attempts = attempts + 1,"
                " lease_until = now() + make_interval(secs => %s) WHERE id = %s", (claimant, lease_s, row[0]))
        return WorkItem(int(row[0]), row[1], int(row[5]), row[2], json.loads(row[3]), claimant, int(row[4]) + 1,
                        row[6], row[7], row[8], row[9])

    def release(self, item: WorkItem) -> bool:
        """Give up the claim on a batch left unwritten: its lease ends now, so this worker or another takes it
        again at once rather than when the lease would have run out (one written meanwhile, or taken over, is
        left as it is: False)."""
        return self._conn.execute(
            "UPDATE work_queue SET lease_until = now() WHERE id = %s AND claimed_by = %s AND done_at IS NULL",
            (item.id, item.claimant)).rowcount == 1

    def give_back(self) -> list[tuple[int, str]]:
        """Give up every live claim of this worker (a stopped one), each claim's attempt given back: workers stopped
        while they held a batch (a service scaled down) never leave it stuck. Found by the claimant's name rather than
        by the batch the worker knows it holds, so a stop that lands as a claim commits, before the worker has the
        batch in hand, gives that one back too; (batch id, repository) of each."""
        mine = f"{self.worker}:"
        return [(int(r[0]), r[1]) for r in self._conn.execute(
            "UPDATE work_queue q SET lease_until = now(), attempts = q.attempts - 1 FROM repositories r"
            " WHERE r.id = q.repo_id AND left(q.claimed_by, length(%s)) = %s AND q.done_at IS NULL"
            " AND q.lease_until > now() RETURNING q.id, r.name", (mine, mine)).fetchall()]

    def leased(self) -> tuple[int, float]:
        """(open batches under a live lease, seconds until the last of those leases runs out): batches a worker
        is writing, or one that died left, which no worker can take before then."""
        count, seconds = self._conn.execute(
            "SELECT count(*), coalesce(extract(epoch FROM max(lease_until) - now()), 0) FROM work_queue"
            " WHERE done_at IS NULL AND lease_until >= now()").fetchone()
        return int(count), float(seconds)

    def lost(self) -> bool:
        """Whether the database ended this worker's session (a restart) or it is otherwise gone."""
        return connection_lost(self._conn)

    def stuck(self) -> int:
        """Batches no worker managed to write in MAX_ATTEMPTS claims."""
        return self._conn.execute("SELECT count(*) FROM work_queue WHERE done_at IS NULL AND attempts >= %s",
                                  (MAX_ATTEMPTS,)).fetchone()[0]

    def close(self) -> None:
        self._conn.close()


class PgStore:
    """One repository's index in the shared PostgreSQL database (see the module docstring)."""

    def __init__(self, url: str, repository: str, *, local_dir: Path, create: bool = True, folder: str = "") -> None:
        """`create`: add the repository when the shared index does not hold it (an indexer's open); without it,
        such a name is refused (`StoreError` naming those it holds, and the one indexed from `folder`, the
        workspace asking, if any): a command that only reads it would otherwise add an empty repository under a
        mistyped name."""
        self.url = url
        self.repository = repository
        self.rebuilt_reason = ""
        self.recoveries = 0  # nothing here is ever rebuilt behind the caller's back
        self._pool = _open_pool(url)
        self._closed = False
        self._held = threading.local()  # this thread's session: (connection, depth)
        self._indexed_dims: set[int] = set()  # dimensions whose HNSW index this process saw built
        # Whether this process's writes have looked for the repository's HNSW indexes a build left unfinished (a
        # build that gave up waiting, one killed midway): its first write does.
        self._looked_for_unbuilt = False
        self._gave_up: dict[int, float] = {}  # dimension -> when this process's build of its index last gave up
        # `revisions` as last read, and the repository's state it was read for (content generation, pin, mark).
        self._revisions: tuple[tuple[int, str, int], Revisions] | None = None
        # This thread's index run (`writing_run`): the commit its files are read at, the files it deletes, its
        # records of a run under way (`index_run`) that its pin ends; or the commit of the save it writes
        # (`written_at`). A thread's, not the store's: a save another thread writes meanwhile is no file of the run.
        self._run = threading.local()
        # The folder this process reads and writes the repository's files from (a workspace's: `set_source`,
        # `shared_index.check_source`); "" where it reads the repository as indexed (a server with no checkout)
        # or each write names its folder (a worker's batch).
        self.source_folder = ""
        try:
            self.repo_id, self._index_id = self._repository_row(repository, create, folder)
        except BaseException:
            self.close()
            raise
        # Files derived from this index on this machine (the saved lexical index) go beside this name.
        key = hashlib.sha256(f"{redact(url)}\0{repository}".encode()).hexdigest()[:16]
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(local_dir) / f"pg-{_slug(repository)}-{key}.index"
        keep_files_elsewhere(self.path, self)

    def fetch_saved(self, suffix: str, stamp: str) -> bytes | None:
        """The file saved beside this repository's local name as `suffix` for `stamp`, as another process kept
        it (`codeloupe.saved`); None when none was, for another state, or the database cannot say."""
        try:
            with self._session():
                # In binary: as text a file comes hex-encoded by the server, twice its size on the wire, and is
                # decoded here (a 12.7 MB search snapshot: 40 -> 15 ms)
                row = self._conn.execute("SELECT data FROM public.saved_files WHERE repo_id = %s AND suffix = %s"
                                         " AND stamp = %s", (self.repo_id, suffix, stamp), binary=True).fetchone()
        except (psycopg.Error, StoreError) as exc:
            log.info("could not read the saved %s of %s from the shared index: %s", suffix, self.repository, exc)
            return None
        return None if row is None else bytes(row[0])

    def keep_saved(self, suffix: str, stamp: str, data: bytes) -> None:
        """Keep a file saved beside this repository's local name for the other processes that open it; too large
        a file, or a database that refuses (a read-only role), leaves it to each process to build."""
        if len(data) > SAVED_FILE_MAX_BYTES:
            return
        try:
            with self._session(), self._conn.transaction():  # a savepoint inside a caller's transaction
                self._conn.execute(
                    "INSERT INTO public.saved_files (repo_id, suffix, stamp, data, saved_at)"
                    " VALUES (%s, %s, %s, %s, clock_timestamp()) ON CONFLICT (repo_id, suffix, stamp)"
                    " DO UPDATE SET data = EXCLUDED.data, saved_at = EXCLUDED.saved_at",
                    (self.repo_id, suffix, stamp, data))
                self._conn.execute(
                    "DELETE FROM public.saved_files WHERE repo_id = %(repo)s AND suffix = %(suffix)s AND stamp NOT IN"
                    " (SELECT stamp FROM public.saved_files WHERE repo_id = %(repo)s AND suffix = %(suffix)s"
                    "  ORDER BY saved_at DESC, stamp LIMIT %(kept)s)",
                    {"repo": self.repo_id, "suffix": suffix, "kept": SAVED_STAMPS_KEPT})
        except (psycopg.Error, StoreError) as exc:
            log.info("could not keep the saved %s of %s in the shared index: %s", suffix, self.repository, exc)

    def _repository_row(self, name: str, create: bool, folder: str) -> tuple[int, str]:
        """The repository's (id, index id); a new one is made only where `create` says, under a name that
        follows the rule (one an older version made under another name opens as it is). An existing one is
        read, never written: a writer holding its row (an indexer, a worker) keeps no one from opening it."""
        select = "SELECT id, index_id FROM repositories WHERE name = %s"
        conn = self._pool.take(0)
        try:
            row = conn.execute(select, (name,)).fetchone()
            if row is None:
                if problem := repository_name_problem(name):
                    raise StoreError(problem)
                if not create:
                    known = [r[0] for r in conn.execute("SELECT name FROM repositories ORDER BY name")]
                    # A folder indexed under another name (`index --repo NAME`, `--replace`) is asked for by its
                    # own name: say which repository holds its files rather than only that this name is unknown.
                    source = [r[0] for r in conn.execute("SELECT name FROM repositories WHERE root = %s ORDER BY name",
                                                         (folder,))] if folder else []
                    hint = (f"this folder is indexed as {', '.join(map(shown_repository_name, source))}: name it with"
                            f" --repo {shown_repository_name(source[0])}" if source else
                            "index the folder first, or name one it holds with --repo NAME")
                    raise StoreError(f"{not_held([name], self.url, known)}: only `codeloupe index` adds a"
                                     f" repository ({hint})")
                with conn.transaction():
                    # A new repository's term statistics are current from its first chunk.
                    conn.execute("INSERT INTO repositories (name, index_id, lex_version) VALUES (%s, %s, %s)"
                                 " ON CONFLICT (name) DO NOTHING", (name, uuid.uuid4().hex, TOKENS_VERSION))
                    row = conn.execute(select, (name,)).fetchone()
        finally:
            self._pool.give(conn)
        return int(row[0]), row[1]

    # ------------------------------------------------------------------ sessions and raw SQL

    @contextmanager
    def _session(self) -> Iterator[None]:
        """This thread's connection, set to this repository, for the block (`_conn`); nested blocks share it."""
        depth = getattr(self._held, "depth", 0)
        if depth == 0:
            self._held.conn = self._pool.take(self.repo_id)
            self._held.wrote = False
            self._held.pending_indexes = set()
        self._held.depth = depth + 1
        try:
            yield
            if depth == 0 and self._held.wrote:
                if not self._looked_for_unbuilt:
                    self._held.pending_indexes |= self._unbuilt_vector_indexes()
                    self._looked_for_unbuilt = True
                self._held.pending_indexes |= self._gave_up.keys()
            if depth == 0 and self._held.pending_indexes:  # the session's transaction is over
                self._build_vector_indexes()
        except psycopg.Error as exc:
            if depth == 0:
                self._explain(exc)
            raise
        finally:
            self._held.depth = depth
            if depth == 0:
                conn, self._held.conn = self._held.conn, None
                self._pool.give(conn)
                if self._held.wrote:  # committed (or rolled back): the next read of the state is fresh
                    self._forget_state()

    def _explain(self, exc: Exception) -> None:
        """Raise what a session's database error means for the caller where it is not the statement's own fault
        (the surfaces answer 503 for a StoreError): the database went away, or the repository was dropped from
        under this process (a write then meets its missing row)."""
        if self._held.conn.broken:
            raise StoreError(f"lost the connection to the shared index {redact(self.url)}:"
                             f" {said(exc, self.url)}") from exc
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            raise StoreError(f"the shared index's repository {self.repository!r} is held by another indexer or worker"
                             f" writing it ({str(exc).strip()}): {self._lock_holders() or 'it has let go since'}."
                             " Try again once it is done; `codeloupe admin --store URL queue` names the workers"
                             " holding batches, and a stalled one lets go once it is stopped (or its session is"
                             " ended: SELECT pg_terminate_backend(PID))") from exc
        if isinstance(exc, psycopg.errors.ForeignKeyViolation):
            self._repository_columns("id")

    def _lock_holders(self) -> str:
        """Who held what a statement of this session gave up waiting for (`lock_holders`), asked on its connection
        once its transaction is over; "" when the catalog cannot say."""
        try:
            return lock_holders(self._held.conn, repo_id=self.repo_id)
        except psycopg.Error:
            return ""

    @property
    def _conn(self) -> Any:
        conn = getattr(self._held, "conn", None)
        assert conn is not None, "PgStore SQL outside a session"
        return conn

    def close(self) -> None:
        """Let go of the database's pool (connections go back to it after each session): the last store of the
        database to close closes its connections. A second close does nothing."""
        with _pools_lock:
            closed, self._closed = self._closed, True
        if not closed:
            _close_pool(self._pool)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Where `Store.batch` groups an index run's writes, each file stays a transaction of its own here, as
        before (the grouping was measured on SQLite; workers on a shared index already write a batch each). In an
        index run on this thread, the run's check comes first (`writing_run`'s `before_writing`)."""
        before_writing = getattr(self._run, "before_writing", None)
        if before_writing is not None:
            before_writing()
        yield

    @contextmanager
    def transaction(self) -> Iterator[SqlConnection]:
        with self._session():
            try:
                with self._conn.transaction():
                    yield SqlConnection(self._conn)
            except psycopg.errors.LockNotAvailable:
                raise  # the session says who holds it
            except psycopg.OperationalError as exc:
                raise StoreError(f"cannot write the shared index {redact(self.url)}:"
                                 f" {said(exc, self.url)}") from exc

    def query(self, sql: str, params: Iterable[object] = ()) -> list[tuple]:
        with self._session():
            return self._conn.execute(_placeholders(sql), tuple(params)).fetchall()

    def _rows(self, sql: str, params: Iterable[object] = ()) -> list[tuple]:
        """This module's own SQL (psycopg placeholders)."""
        with self._session():
            return self._conn.execute(sql, tuple(params)).fetchall()

    # ------------------------------------------------------------------ meta and generations

    @property
    def index_id(self) -> str:
        return self._index_id

    @property
    def commit(self) -> str:
        """The commit the repository was last indexed at ("" when it is not a git checkout)."""
        return self._state().commit

    def revisions(self) -> Revisions:
        """The commit each file's text was read at: the repository's (`commit`), but for the files written since
        it was pinned at another commit (by an index run before its end pins its commit: a direct one's writes, a
        queued one's batches; by a save, `written_at`) and those the pin does not mark (written by another writer at
        another commit while the pinning run was under way: `_PINNED_NOW`), each at the commit its row records
        (migrations 10 and 11). Read in one statement when the repository's files or pin changed since the last
        read, as of the repository's state (`STATE_TTL_S`): after a run that no other writer overlapped, no row.
        A row past the mark that records no commit ('') was read where git named none (a folder that is no git work
        tree any more, git missing or failing): cited at no commit, as a run there pins none once it ends, where
        read as at the pin it cited its text at a commit whose text differs."""
        state = self._state()
        key = (state.content_generation, state.commit, state.pinned_through)
        known = self._revisions
        if known is not None and known[0] == key:
            return known[1]
        rows = self._rows("SELECT path, commit_sha FROM files WHERE id > %s AND commit_sha <> %s",
                          (state.pinned_through, state.commit))
        revisions = Revisions(state.commit, dict(rows))
        self._revisions = key, revisions
        return revisions

    @property
    def source_root(self) -> str:
        """The folder the repository was last indexed from ("" before its first index)."""
        return self._repository_columns("root")[0]

    def set_source(self, root: str, *, replace: bool = False, run: str = "") -> None:
        """Where the repository is indexed from; this process's folder from now on (`source_folder`); the pin
        stays (the run that writes the folder's files moves it: `writing_run`, a queued run's last batch). With a
        `run` (`writing_run`'s), that run is the repository's newest: every queued run not yet written is
        superseded (`RunSuperseded`: this run writes the files). Refused (`SourceConflict`) when the repository is
        another folder's, unless `replace`: checked under the repository's row, taken for the update (as every
        writer takes it: `lock_holders`), so a replace committed meanwhile is never undone."""
        with self._session(), self._conn.transaction():
            known = self._conn.execute("SELECT root FROM repositories WHERE id = %s FOR NO KEY UPDATE",
                                       (self.repo_id,)).fetchone()
            if known is None:
                self._repository_columns("id")  # dropped from under this process: says so
            if not replace and known[0] and known[0] != root:
                raise SourceConflict(self.repository, known[0], root)
            if not run:
                self._conn.execute("UPDATE repositories SET root = %s WHERE id = %s", (root, self.repo_id))
            else:
                self._conn.execute("UPDATE repositories SET root = %s, latest_run = %s, latest_gone = '[]',"
                                   f" {_RUN_FROM_NOW} WHERE id = %s", (root, run, self.repo_id))
            self._held.wrote = True
        self.source_folder = root

    @contextmanager
    def writing_run(self, root: str, commit: str, *,
                    before_writing: Callable[[], None] | None = None) -> Iterator[RunEnd]:
        """Around an index run that writes the files of `root` itself (`codeloupe index --store`, an editor's),
        read at `commit`: `root` is the repository's source from then on and the run its newest (`set_source`);
        each file it writes records `commit`, and once the block ends without an error (its files all written) one
        transaction deletes the files the run deleted (`delete_files` on the run's thread: those that left the
        folder, those now skipped; not one written again since the run began, a save's) and pins the repository to `commit`, with the newest file row then
        (`pinned_through`), as a queued run's last batch does (`_end_run`). Unless a later run (queued or not)
        became the newest meanwhile: that one deletes and pins, and the files this one wrote are cited at `commit`
        (`revisions`). A run cut off midway deletes nothing and leaves the pin where it was: each file it wrote is
        cited at `commit`, the others at the pin, as their text was read. Pinned as the run began, every answer
        named the new commit for the old text of the files it had not written yet (minutes, on a large
        repository); deleting as it began, answers lacked the files the pin still held for as long as it ran, and
        a run cut off left neither them nor the new pin. The run is this thread's: another thread's writes
        meanwhile (a save) are not the run's. `before_writing` is called as each group of the run's files begins
        (`batch`), its files read by then: raising (its folder left `commit`) stops the run with none of them
        written. Yields how the run ended (`RunEnd`), told once the block is left."""
        run, ended = uuid.uuid4().hex, RunEnd()
        self.set_source(root, run=run)
        self._run.commit, self._run.gone, self._run.before_writing = commit, [], before_writing
        self._run.ending = []  # the records of the run under way (`index_run`) that its end clears
        try:
            yield ended
            with self._session(), self._conn.transaction():
                for recorded, _ in self._run.ending:  # its files all written, superseded or not
                    self._conn.execute(f"UPDATE repositories SET {_RUN_ENDED}", (self.repo_id, recorded))
                latest = self._conn.execute("SELECT latest_run FROM repositories WHERE id = %s FOR NO KEY UPDATE",
                                            (self.repo_id,)).fetchone()
                if latest is not None and latest[0] == run:
                    # The rows the run found: a file put back and saved since (another thread's write, at once)
                    # is the folder's again, not the run's to delete.
                    gone = [row[0] for row in self._conn.execute(
                        "SELECT path FROM files WHERE path = ANY(%s) AND id <= (SELECT run_from FROM repositories"
                        " WHERE id = %s)", (self._run.gone, self.repo_id))] if self._run.gone else []
                    if gone and self._delete_paths(gone):
                        self._bump("content")
                    self._conn.execute(f"UPDATE repositories SET commit_sha = %(commit)s, {_PINNED_NOW}"
                                       " WHERE id = %(repo)s", {"commit": commit, "repo": self.repo_id})
                    ended.pinned = True
                self._held.wrote = True
            if self._run.ending:
                self._forget_state()
        finally:
            for _, holder in self._run.ending:  # the run's lock, held until its record is cleared (or cut off)
                holder.close()
            self._run.commit = self._run.gone = self._run.before_writing = self._run.ending = None

    @contextmanager
    def written_at(self, commit: str) -> Iterator[None]:
        """Around a save's writes on this thread (outside an index run: an editor's on its folder): each file
        written records `commit`, the revision its text was read at (`shared_index.saved_revision`). Recorded at
        the repository's pin, a file edited and saved, or saved once the folder had moved to another commit, was
        cited at a commit whose text differs."""
        around = getattr(self._run, "commit", None)
        self._run.commit = commit
        try:
            yield
        finally:
            self._run.commit = around

    def check_source(self, *, fresh: bool = False) -> None:
        """Refuse (`SourceConflict`) to answer for this process's folder (`source_folder`) once another folder is
        the repository's source (`index --replace` elsewhere): its index holds that folder's files, while this
        process reads its own folder's from disk as what was indexed. As of the repository's state read at most
        STATE_TTL_S ago (`fresh`: now); nothing to check for a process reading the repository as indexed."""
        if not self.source_folder:
            return
        known = self._repository_columns("root")[0] if fresh else self._state().root
        if known and known != self.source_folder:
            raise SourceConflict(self.repository, known, self.source_folder)

    def _hold_source(self, folder: str) -> None:
        """Inside a write's transaction: refuse (`SourceConflict`, the write rolled back) files of `folder` once
        another folder is the repository's source, and hold the repository's row until the write commits, so
        that a replace (`set_source`, which takes the row) lands before the check or after the write, never
        between them. The row is taken as every file write takes it anyway (the writers' turn, migration 2):
        a weaker share lock, upgraded by that write, would deadlock two writers. '' (a process reading the
        repository as indexed): nothing is checked."""
        if not folder:
            return
        known = self._conn.execute("SELECT root FROM repositories WHERE id = %s FOR NO KEY UPDATE",
                                   (self.repo_id,)).fetchone()
        if known is not None and known[0] and known[0] != folder:
            raise SourceConflict(self.repository, known[0], folder)

    @contextmanager
    def index_run(self, *, changes: bool) -> Iterator[None]:
        """Around an index run's writes: the repository records a run under way until the block ends without an
        error (its files all written). A run killed, stopped or failed midway leaves the record, so `admin repos`,
        `stats` and every answer say the repository may lack files (`unfinished_index`) until a run finishes. A
        session of this process holds the run's advisory lock meanwhile, gone with the process. Another run begun
        meanwhile takes the record over, and only its end clears it. A run that `changes` no file records nothing
        (an editor's refresh costs no connection and no write of the repository's row), unless a run is recorded
        unfinished: finding nothing left to write, it finishes that one (cut off after its last write).
        Inside a run that writes its files itself (`writing_run`, on this thread) the record and the lock last
        until the run's end, cleared in the transaction that deletes the files that left and pins its commit:
        cleared here, a run killed between the two was said finished with the old pin and those files kept."""
        if not changes and not self._state().index_run:
            yield
            return
        run = uuid.uuid4().hex
        holder: Any = connect(self.url)  # None once the run's end (`writing_run`) holds it
        try:
            holder.execute("SELECT pg_advisory_lock_shared(%s, %s)", (_INDEX_RUN_LOCK, self.repo_id))
            self._record_run("index_run = %s, index_started = now() WHERE id = %s", (run, self.repo_id))
            yield
            ending = getattr(self._run, "ending", None)
            if ending is not None:
                ending.append((run, holder))
                holder = None
                return
            self._record_run(_RUN_ENDED, (self.repo_id, run))
        finally:
            if holder is not None:
                holder.close()

    def _record_run(self, change: str, params: tuple) -> None:
        with self._session(), self._conn.transaction():
            self._conn.execute(f"UPDATE repositories SET {change}", params)
        self._forget_state()

    def unfinished_index(self) -> str:
        """Why answers may lack files of the repository: an index run under way or cut off (`index_run`), or its
        newest queued run not written whole yet (`queued_batches`); "" when every run finished."""
        state = self._state()
        under_way = bool(state.index_run) and self._rows(f"SELECT {run_under_way('%s')}", (self.repo_id,))[0][0]
        return unfinished_index_note(self.repository, bool(state.index_run), state.index_started, under_way,
                                     state.queued_batches, state.stuck_batches)

    def get_meta(self, key: str, default: str = "") -> str:
        if key == "schema_version":
            return str(SCHEMA_VERSION)
        rows = self._rows("SELECT value FROM repo_meta WHERE repo_id = %s AND key = %s", (self.repo_id, key))
        return rows[0][0] if rows else default

    def set_meta(self, key: str, value: str) -> None:
        with self._session(), self._conn.transaction():
            self._conn.execute("INSERT INTO repo_meta VALUES (%s, %s, %s)"
                               " ON CONFLICT (repo_id, key) DO UPDATE SET value = excluded.value",
                               (self.repo_id, key, value))

    def generation(self, name: str) -> int:
        state = self._state()
        return {"content": state.content_generation, "vector": state.vector_generation}[name]

    def _state(self) -> _RepositoryState:
        """The repository's generations, commit and term totals, read at most every STATE_TTL_S."""
        key = (self.url, self.repo_id)
        state = _states.get(key)
        now = time.monotonic()
        if state is None or now - state.read_at > STATE_TTL_S:
            row = self._repository_columns("content_generation, vector_generation, commit_sha, lex_version,"
                                           f" lex_chunks, root, index_run, {INDEX_STARTED},"
                                           f" {queued_batches('repositories', stuck=False)},"
                                           f" {queued_batches('repositories', stuck=True)}, pinned_through")
            state = _states[key] = _RepositoryState(now, int(row[0]), int(row[1]), row[2], int(row[3]), int(row[4]),
                                                    row[5], row[6], row[7], int(row[8]), int(row[9]), int(row[10]))
        return state

    def _repository_columns(self, columns: str) -> tuple:
        """These columns of the repository's row; `RepositoryDropped` once the repository was dropped from under this
        process (its rows are gone, and one indexed again under its name is another id)."""
        rows = self._rows(f"SELECT {columns} FROM repositories WHERE id = %s", (self.repo_id,))
        if not rows:
            # Said by every process that opens repositories: the command line's runs again, `serve --store` lists
            # them again on its own, an editor's language server opens them as it starts.
            raise RepositoryDropped(f"repository {self.repository!r} was dropped from the shared index {redact(self.url)}"
                                    " after this process opened it (`codeloupe admin drop`): what is indexed under"
                                    " that name now is read once the repository is opened again")
        return rows[0]

    def _forget_state(self) -> None:
        _states.pop((self.url, self.repo_id), None)

    def _bump(self, name: str) -> None:
        column = {"content": "content_generation", "vector": "vector_generation"}[name]
        self._conn.execute(f"UPDATE repositories SET {column} = {column} + 1 WHERE id = %s", (self.repo_id,))
        if name == "content":  # when its files last changed (`codeloupe admin repos`)
            self._conn.execute(f"INSERT INTO repo_meta VALUES (%s, '{INDEXED_AT_KEY}', now()::text)"
                               " ON CONFLICT (repo_id, key) DO UPDATE SET value = excluded.value", (self.repo_id,))
        self._held.wrote = True
        self._forget_state()

    # ------------------------------------------------------------------ files

    def file_rows(self, paths: Iterable[str] | None = None, *, ids: Iterable[int] | None = None) -> dict[str, FileRow]:
        """Every file's row by path, or only those of `paths` or of `ids` (a save's: nothing of the rest is read)."""
        sql = "SELECT id, path, hash, language, size, mtime, is_doc, chunker_version, line_count FROM files"
        if paths is None and ids is None:
            rows = self._rows(sql)
        elif paths is not None:
            rows = self._rows(f"{sql} WHERE path = ANY(%s)", (sorted(set(paths)),))
        else:
            rows = self._rows(f"{sql} WHERE id = ANY(%s)", (sorted(set(ids or ())),))
        return {r[1]: FileRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7], r[8]) for r in rows}

    def file_ids(self) -> np.ndarray:
        """int64 [files]: every indexed file's id, ascending (what a search's delta view compares its own with)."""
        return np.array([r[0] for r in self._rows("SELECT id FROM files ORDER BY id")], np.int64)

    def replace_file(self, chunked: ChunkedFile, *, hash: str, size: int, mtime: float, is_doc: bool,
                     encoding: str, chunker_version: int, line_count: int, terms: KeptCounts | None = None) -> int:
        """One file's chunks, symbols and skeleton in one transaction; returns the file id. `terms` is not
        kept: this store keeps its term statistics in tables, written from them (`_count_terms`)."""
        with self._session(), self._conn.transaction():
            self._hold_source(self.source_folder)
            written = self._write_file(BatchFile(chunked, hash, size, mtime, is_doc, encoding, chunker_version,
                                                 line_count, terms), getattr(self._run, "commit", None))
            self._count_terms([written])
            self._bump("content")
        return written[0]

    def _write_file(self, batch_file: BatchFile, commit: str | None) -> _Written:
        """The file's rows, read at `commit` (None: at the repository's pin, for a write that names no revision:
        neither an index run's nor a save's, `written_at`); returns what `_count_terms` counts (a worker counts a
        whole batch's files at once)."""
        conn, chunked = self._conn, batch_file.chunked
        self._delete_paths([chunked.path])
        file_id = conn.execute(
            "INSERT INTO files (path, hash, language, size, mtime, is_doc, encoding, chunker_version, line_count,"
            " fallback_reason, commit_sha) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"
            " coalesce(%s, (SELECT commit_sha FROM repositories WHERE id = %s))) RETURNING id",
            (chunked.path, batch_file.hash, chunked.language, batch_file.size, batch_file.mtime,
             int(batch_file.is_doc), batch_file.encoding, batch_file.chunker_version, batch_file.line_count,
             chunked.fallback_reason, commit, self.repo_id)).fetchone()[0]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO chunks (file_id, ord, start_line, end_line, kind, name, breadcrumb, symbols, text,"
                " content_key) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                [(file_id, i, c.start_line, c.end_line, c.kind, c.name, c.breadcrumb, json.dumps(list(c.symbols)),
                  c.text, content_key(c.breadcrumb, c.text)) for i, c in enumerate(chunked.chunks)], returning=True)
            chunk_ids = [cur.fetchone()[0] for _ in cur.results()]
            if chunked.symbols:
                cur.executemany(
                    "INSERT INTO symbols (file_id, name, kind, start_line, end_line, parent, signature)"
                    " VALUES (%s,%s,%s,%s,%s,%s,%s)",
                    [(file_id, s.name, s.kind, s.start_line, s.end_line, s.parent, s.signature)
                     for s in chunked.symbols])
        conn.execute("INSERT INTO skeletons (file_id, text, content_key) VALUES (%s, %s, %s)",
                     (file_id, chunked.skeleton.text, content_key(chunked.skeleton.text)))
        return int(file_id), chunked.path, [(chunk_id, c.breadcrumb, c.text) for chunk_id, c in
                                            zip(chunk_ids, chunked.chunks, strict=True)], batch_file.terms

    def _delete_paths(self, paths: list[str]) -> int:
        """Delete these files (their chunks, the chunks' terms and the rest cascade) and take their terms out of
        the repository's totals (first: the repository's row is the writers' turn, see the migration) and out
        of the chunk frequencies (the delete's subquery still sees the chunks' terms it removes); how many of
        them the index held."""
        self._conn.execute(
            "UPDATE repositories r SET lex_chunks = r.lex_chunks - g.chunks, lex_files = r.lex_files - g.files,"
            " lex_length = r.lex_length - g.length FROM (SELECT coalesce(sum(l.chunks), 0) AS chunks,"
            " count(*) FILTER (WHERE l.chunks > 0) AS files, coalesce(sum(l.length), 0) AS length"
            " FROM lex_files l JOIN files f ON f.id = l.file_id WHERE f.path = ANY(%s)) g WHERE r.id = %s",
            (paths, self.repo_id))
        return int(self._conn.execute(
            "WITH gone AS (DELETE FROM files WHERE path = ANY(%(paths)s) RETURNING id), terms AS ("
            " UPDATE lex_terms t SET df = t.df - g.n FROM (SELECT u.id, count(*) AS n FROM lex_chunk_terms l,"
            " unnest(l.terms) AS u(id) WHERE l.chunk_id IN (SELECT c.id FROM chunks c WHERE c.file_id IN"
            " (SELECT id FROM gone)) GROUP BY u.id) g WHERE t.id = g.id)"
            " SELECT count(*) FROM gone", {"paths": paths}).fetchone()[0])

    def _count_terms(self, files: list[_Written]) -> None:
        """The term statistics of files just written: each chunk's terms with their counts (its lexical document
        as the in-process lane builds it, `document_terms`: as the chunking worker counted them where it did,
        else tokenised here), each file's totals, and the repository's. The terms' frequencies go first: their
        upsert returns the dictionary ids the chunks' rows hold."""
        file_rows = []
        documents: list[tuple[int, int, int, int, dict[str, int]]] = []  # chunk, file, lengths, term counts
        frequency: Counter[str] = Counter()
        for file_id, path, chunks, kept in files:
            counts = _chunk_counts(kept, len(chunks))
            if counts is None:
                path_terms = path_tokens(path)
                counts = [document_counts(path_terms, breadcrumb, text) for _, breadcrumb, text in chunks]
            lengths = [sum(c.values()) for c in counts]
            file_length = sum(lengths)
            for (chunk_id, _, _), tf, length in zip(chunks, counts, lengths, strict=True):
                frequency.update(tf.keys())
                documents.append((chunk_id, file_id, length, file_length, tf))
            file_rows.append((file_id, len(chunks), file_length))
        terms = sorted(frequency)
        ids = dict(self._conn.execute(
            "WITH terms AS (INSERT INTO lex_terms (repo_id, term, df) SELECT %(repo)s, t, n"
            " FROM unnest(%(terms)s::text[], %(dfs)s::int[]) AS d(t, n)"
            " ON CONFLICT (repo_id, term) DO UPDATE SET df = lex_terms.df + excluded.df RETURNING term, id),"
            " added AS (INSERT INTO lex_files (file_id, repo_id, chunks, length)"
            " SELECT f, %(repo)s, c, n FROM unnest(%(files)s::bigint[], %(chunks)s::int[], %(lengths)s::bigint[])"
            " AS a(f, c, n) RETURNING chunks, length),"
            " totals AS (UPDATE repositories SET lex_chunks = lex_chunks + (SELECT coalesce(sum(chunks), 0) FROM added),"
            " lex_files = lex_files + (SELECT count(*) FROM added WHERE chunks > 0),"
            " lex_length = lex_length + (SELECT coalesce(sum(length), 0) FROM added) WHERE id = %(repo)s)"
            " SELECT term, id FROM terms",
            {"repo": self.repo_id, "files": [r[0] for r in file_rows], "chunks": [r[1] for r in file_rows],
             "lengths": [r[2] for r in file_rows], "terms": terms, "dfs": [frequency[t] for t in terms]}).fetchall())
        with self._conn.cursor() as cur, cur.copy("COPY lex_chunk_terms (chunk_id, repo_id, file_id, length,"
                                                  " file_length, terms, tfs) FROM STDIN") as copy:
            copy.set_types(["bigint", "integer", "bigint", "integer", "integer", "bigint[]", "integer[]"])
            for chunk_id, file_id, length, file_length, tf in documents:
                if tf:  # a chunk of no terms scores nothing: no row
                    copy.write_row((chunk_id, self.repo_id, file_id, length, file_length,
                                    [ids[term] for term in tf], list(tf.values())))

    def touch_file(self, path: str, size: int, mtime: float) -> None:
        with self._session(), self._conn.transaction():
            self._hold_source(self.source_folder)
            self._conn.execute("UPDATE files SET size = %s, mtime = %s WHERE path = %s", (size, mtime, path))

    def set_chunker_version(self, paths: Iterable[str], version: int) -> None:
        """`Store.set_chunker_version`: the files stay in every answer as they are until a run writes them again."""
        paths = sorted(set(paths))
        if not paths:
            return
        with self._session(), self._conn.transaction():
            self._hold_source(self.source_folder)
            self._conn.execute("UPDATE files SET chunker_version = %s WHERE path = ANY(%s)", (version, paths))

    def delete_files(self, paths: Iterable[str]) -> int:
        """Delete these files; inside an index run on this thread (`writing_run`), once the run ends, with its pin
        (counted as deleted here: a run that a later one superseded deletes none, `RunEnd`)."""
        paths = list(paths)
        if not paths:
            return 0
        gone = getattr(self._run, "gone", None)
        if gone is not None:
            gone.extend(paths)
            return len(paths)
        with self._session(), self._conn.transaction():
            self._hold_source(self.source_folder)
            self._delete_paths(paths)
            self._bump("content")
        return len(paths)

    def skipped_files(self) -> dict[str, SkippedFile]:
        """Every file remembered as skipped for its content, by path (as the SQLite store keeps them: size,
        mtime and the content rules that judged it; another checkout's copy of a file matches only when it kept
        both the size and the mtime, i.e. it is a copy)."""
        return {r[0]: SkippedFile(*r) for r in self._rows("SELECT path, size, mtime, rules, reason FROM skipped_files")}

    def skipped_counts(self) -> dict[str, int]:
        """Files remembered as skipped for their content, counted by reason."""
        return dict(self._rows("SELECT reason, COUNT(*) FROM skipped_files GROUP BY reason ORDER BY reason"))

    def chunking_problems(self) -> list[tuple[str, str]]:
        """(path, fallback reason) of each file a strategy, the chunker or its grammar failed on (`ChunkingProblem`)."""
        # '%%': the driver reads a lone '%' as a placeholder (doubled, a LIKE pattern means the same)
        return self._rows("SELECT path, fallback_reason FROM files WHERE fallback_reason LIKE 'strategy %%'"
                          " OR fallback_reason LIKE 'error:%%' OR fallback_reason LIKE 'partition:%%'"
                          " OR fallback_reason LIKE 'grammar crashed:%%'"
                          " OR fallback_reason LIKE 'grammar did not finish:%%'"
                          " OR fallback_reason LIKE 'grammar was not run:%%' ORDER BY path")

    def set_skipped(self, skipped: Iterable[SkippedFile], forget: Iterable[str] = ()) -> None:
        """Remember files skipped for their content and forget others (indexed now, or gone), in one write."""
        skipped, forget = list(skipped), list(forget)
        if not skipped and not forget:
            return
        with self._session(), self._conn.transaction(), self._conn.cursor() as cur:
            self._hold_source(self.source_folder)
            cur.execute("DELETE FROM skipped_files WHERE path = ANY(%s)", (forget,))
            cur.executemany("INSERT INTO skipped_files (path, size, mtime, rules, reason) VALUES (%s,%s,%s,%s,%s)"
                            " ON CONFLICT (repo_id, path) DO UPDATE SET size = excluded.size,"
                            " mtime = excluded.mtime, rules = excluded.rules, reason = excluded.reason",
                            [(s.path, s.size, s.mtime, s.rules, s.reason) for s in skipped])

    def check(self) -> None:
        """Nothing deferred: PostgreSQL checks its own pages (the SQLite file's open-time check is `Store.check`)."""

    # ------------------------------------------------------------------ reads for the lanes

    def chunk_table(self, file_ids: Iterable[int] | None = None) -> ChunkTable:
        sql = "SELECT id, file_id, start_line, end_line, kind, name, breadcrumb, symbols FROM chunks"
        rows = self._rows(sql + " ORDER BY id") if file_ids is None else \
            self._rows(sql + " WHERE file_id = ANY(%s) ORDER BY id", (list(file_ids),))
        return ChunkTable.from_rows(self, rows)

    def chunk_texts(self, ids: list[int]) -> dict[int, str]:
        """{chunk id: text} of those of `ids` still in this repository's index."""
        return dict(self._rows("SELECT id, text FROM chunks WHERE id = ANY(%s)", (list(ids),))) if ids else {}

    def files_with_term_counts(self) -> np.ndarray:
        """No file's: this store scores the lexical lane from its term statistics, never from kept counts."""
        return np.zeros(0, np.int64)

    def kept_term_counts(self, file_ids: Iterable[int]) -> dict[int, KeptCounts]:
        """None kept (`files_with_term_counts`)."""
        return {}

    def kept_rows_path(self) -> Path | None:
        """None kept (`files_with_term_counts`)."""
        return None

    def definition_counts(self) -> dict[int, int]:
        return dict(self._rows("SELECT file_id, count(*) FROM symbols GROUP BY file_id"))

    # ------------------------------------------------------------------ the lexical lane, scored here

    def term_scores(self, terms: list[str], limit: int, k1: float, b: float, *,
                    chunk_idf: dict[str, float] | None = None,
                    file_idf: dict[str, float] | None = None) -> TermScores:
        """BM25 of this repository's chunks and files (a file: the sum of its chunks' terms) for `terms` (a
        repeated term weighs more), from the term statistics: the `limit` best of each, in one statement.
        `chunk_idf` / `file_idf`: the IDF to score a term with instead of the repository's own (a search
        across repositories pools their statistics)."""
        return term_scores_across([self], terms, limit, k1, b, chunk_idf=chunk_idf, file_idf=file_idf)[self.repo_id]

    def term_scores_of(self, stores: Sequence[LexicalStatistics], terms: list[str], limit: int, k1: float,
                       b: float, *, chunk_idf: dict[str, float] | None = None,
                       file_idf: dict[str, float] | None = None) -> list[TermScores]:
        """`term_scores` of each of `stores` (repositories searched as one), one statement per database."""
        together: dict[int, list[PgStore]] = defaultdict(list)  # one connection pool per database
        for store in stores:
            if isinstance(store, PgStore):
                together[id(store._pool)].append(store)
        answers: dict[int, TermScores] = {}
        for group in together.values():
            for repo_id, found in term_scores_across(group, terms, limit, k1, b, chunk_idf=chunk_idf,
                                                     file_idf=file_idf).items():
                answers[id(next(s for s in group if s.repo_id == repo_id))] = found
        return [answers[id(store)] if id(store) in answers else
                store.term_scores(terms, limit, k1, b, chunk_idf=chunk_idf, file_idf=file_idf) for store in stores]

    def chunk_frequencies(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the repository, how many of them hold each of `terms` that any holds)."""
        total = self._current_terms().lex_chunks
        rows = self._rows("SELECT t.term, t.df FROM unnest(%s::text[]) AS q(term) JOIN lex_terms t"
                          " ON t.repo_id = %s AND t.term = q.term WHERE t.df > 0",
                          (sorted(set(terms)), self.repo_id)) if terms else []
        return total, {term: int(n) for term, n in rows}

    def _current_terms(self) -> _RepositoryState:
        """The state, once the term statistics are of this program's tokenisation (counted again otherwise)."""
        state = self._state()
        if state.lex_version == TOKENS_VERSION:
            return state
        with self._session(), self._conn.transaction():
            # Holding the repository's row: writers of this repository wait, and a second counter finds it done.
            version = self._conn.execute("SELECT lex_version FROM repositories WHERE id = %s FOR NO KEY UPDATE",
                                         (self.repo_id,)).fetchone()[0]
            if version != TOKENS_VERSION:
                # Through the repository's chunks: the chunks' terms have no index on the repository.
                self._conn.execute("DELETE FROM lex_chunk_terms WHERE chunk_id IN (SELECT id FROM chunks)")
                self._conn.execute("DELETE FROM lex_files WHERE repo_id = %s", (self.repo_id,))
                self._conn.execute("DELETE FROM lex_terms WHERE repo_id = %s", (self.repo_id,))
                self._conn.execute("UPDATE repositories SET lex_version = %s, lex_chunks = 0, lex_files = 0,"
                                   " lex_length = 0 WHERE id = %s", (TOKENS_VERSION, self.repo_id))
                files = self._conn.execute("SELECT id, path FROM files ORDER BY id").fetchall()
                for start in range(0, len(files), 500):
                    page = dict(files[start:start + 500])
                    chunks: dict[int, list[tuple[int, str, str]]] = {file_id: [] for file_id in page}
                    for file_id, chunk_id, breadcrumb, text in self._conn.execute(
                            "SELECT file_id, id, breadcrumb, text FROM chunks WHERE file_id = ANY(%s)"
                            " ORDER BY file_id, ord", (list(page),)):
                        chunks[file_id].append((chunk_id, breadcrumb, text))
                    self._count_terms([(file_id, path, chunks[file_id], None) for file_id, path in page.items()])
            self._held.wrote = True
        return self._state()

    def iter_symbol_rows(self, page: int = 50_000) -> Iterator[SymbolRow]:
        """Every symbol row, a page of ids at a time (as the SQLite store reads them)."""
        return paged_symbol_rows(self.query, page)

    def iter_symbol_names(self, page: int = 50_000) -> Iterator[SymbolNames]:
        return paged_symbol_names(self.query, page)

    def definition_words(self, file_ids: Iterable[int] | None = None) -> dict[int, str]:
        sql = "SELECT file_id, string_agg(name || ' ' || signature, ' ') FROM symbols"
        if file_ids is None:
            return dict(self._rows(sql + " GROUP BY file_id"))
        return dict(self._rows(sql + " WHERE file_id = ANY(%s) GROUP BY file_id", (list(file_ids),)))

    def symbol_rows(self, file_ids: Iterable[int] | None = None) -> list[SymbolRow]:
        sql = "SELECT file_id, name, kind, start_line, end_line, parent, signature FROM symbols"
        rows = self._rows(sql + " ORDER BY id") if file_ids is None else \
            self._rows(sql + " WHERE file_id = ANY(%s)", (list(file_ids),))
        return [SymbolRow(*r) for r in rows]

    def symbols_of_file(self, file_id: int) -> list[SymbolRow]:
        rows = self._rows("SELECT file_id, name, kind, start_line, end_line, parent, signature FROM symbols"
                          " WHERE file_id = %s ORDER BY start_line", (file_id,))
        return [SymbolRow(*r) for r in rows]

    def definitions_holding(self, lines: Iterable[tuple[str, int]]
                            ) -> dict[tuple[str, int], list[tuple[int, int, str, str]]]:
        wanted = sorted(set(lines))
        out: dict[tuple[str, int], list[tuple[int, int, str, str]]] = {pair: [] for pair in wanted}
        rows = self._rows(
            "SELECT w.path, w.line, s.start_line, s.end_line, s.name, s.parent"
            " FROM unnest(%s::text[], %s::int[]) AS w(path, line)"
            " JOIN files f ON f.path = w.path JOIN symbols s ON s.file_id = f.id"
            " WHERE s.start_line <= w.line AND s.end_line >= w.line",
            ([path for path, _ in wanted], [line for _, line in wanted])) if wanted else []
        for path, line, *definition in rows:
            out[path, line].append(tuple(definition))
        return out

    def file_encoding(self, file_id: int) -> str:
        rows = self._rows("SELECT encoding FROM files WHERE id = %s", (file_id,))
        return rows[0][0] if rows else ""

    def skeletons(self, file_ids: Iterable[int] | None = None) -> dict[int, str]:
        """{file id: skeleton text} of `file_ids` (every file's when None)."""
        if file_ids is None:
            return dict(self._rows("SELECT file_id, text FROM skeletons"))
        return dict(self._rows("SELECT file_id, text FROM skeletons WHERE file_id = ANY(%s)", (list(file_ids),)))

    def counts(self) -> dict[str, int]:
        return {table: self._rows(f"SELECT count(*) FROM {table}")[0][0] for table in ("files", "chunks", "symbols")}

    def has_files(self) -> bool:
        """Whether any file of the repository is indexed (one row looked up, where `counts` counts three tables)."""
        return bool(self._rows("SELECT EXISTS (SELECT 1 FROM files)")[0][0])

    def language_counts(self) -> dict[str, int]:
        return dict(self._rows("SELECT language, count(*) FROM files GROUP BY language ORDER BY 2 DESC, 1"))

    # ------------------------------------------------------------------ vectors

    def chunks_missing_vectors(self, model: str, limit: int,
                               prefer_paths: Iterable[str] = ()) -> list[tuple[int, str, str]]:
        """(chunk id, breadcrumb, text) of chunks with no vector for `model` (`prefer_paths` first); a chunk
        whose content the organisation has embedded before takes that vector instead of being handed out."""
        prefer = list(prefer_paths)
        base = ("SELECT c.id, c.breadcrumb, c.text FROM chunks c JOIN files f ON f.id = c.file_id"
                " LEFT JOIN chunk_vectors v ON v.chunk_id = c.id AND v.model = %s WHERE v.chunk_id IS NULL")
        while True:
            rows = self._rows(f"{base} AND f.path = ANY(%s) ORDER BY c.id LIMIT %s", (model, prefer, limit)) \
                if prefer else []
            if len(rows) < limit:
                seen = {r[0] for r in rows}
                more = self._rows(f"{base} ORDER BY c.id LIMIT %s", (model, limit + len(seen)))
                rows.extend(r for r in more if r[0] not in seen)
            if not self._vectors_from_cache("chunk", model, [r[0] for r in rows[:limit]]):
                return rows[:limit]

    def files_with_text(self, file_ids: Iterable[int]) -> set[int]:
        """Those of `file_ids` with a chunk holding more than `BLANK_CHARS` (the others have nothing to embed)."""
        return {r[0] for r in self._rows("SELECT DISTINCT file_id FROM chunks WHERE file_id = ANY(%s)"
                                         " AND btrim(text, %s) <> ''", (list(file_ids), BLANK_CHARS))}

    def skeletons_missing_vectors(self, model: str, limit: int) -> list[tuple[int, str]]:
        while True:
            rows = self._rows(
                "SELECT s.file_id, s.text FROM skeletons s LEFT JOIN skeleton_vectors v ON v.file_id = s.file_id"
                " AND v.model = %s WHERE v.file_id IS NULL ORDER BY s.file_id LIMIT %s", (model, limit))
            if not self._vectors_from_cache("skeleton", model, [r[0] for r in rows]):
                return rows

    def _vectors_from_cache(self, table: str, model: str, ids: list[int]) -> int:
        """Give those of `ids` (chunk or file ids) whose content is in the shared cache its vector; how many. Not a
        row with nothing to embed (`embed_pending` gives it the zero vector, as a worker does): a blank file's
        skeleton is its path alone, the key of a file with code but no definition at that path elsewhere, and a
        blank chunk's text was embedded and cached before such rows were given zero."""
        if not ids:
            return 0
        target, key, owner, owner_id = {"chunk": ("chunk_vectors", "chunk_id", "chunks", "id"),
                                        "skeleton": ("skeleton_vectors", "file_id", "skeletons", "file_id")}[table]
        filled = ("btrim(o.text, %s) <> ''" if table == "chunk" else
                  "EXISTS (SELECT 1 FROM chunks c WHERE c.file_id = o.file_id AND btrim(c.text, %s) <> '')")
        with self._session(), self._conn.transaction():
            dims = [r[0] for r in self._conn.execute(
                f"INSERT INTO {target} ({key}, model, dim, vec)"
                f" SELECT o.{owner_id}, e.model, vector_dims(e.vec), e.vec FROM {owner} o"
                f" JOIN embeddings e ON e.model = %s AND e.content_key = o.content_key"
                f" WHERE o.{owner_id} = ANY(%s) AND {filled} ON CONFLICT DO NOTHING RETURNING dim",
                (model, ids, BLANK_CHARS))]
            for dim in set(dims):  # a repository filled from the cache alone gets its index too
                self._ensure_vector_index(dim)
            if dims:
                self._bump("vector")
        return len(dims)

    def put_vectors(self, table: str, model: str, ids: list[int], vectors: np.ndarray) -> None:
        """Store vectors (as the SQLite store's int8 values, dequantised) and cache them by content."""
        owner, owner_id = ("chunks", "id") if table == "chunk" else ("skeletons", "file_id")
        with self._session(), self._conn.transaction():
            keys = dict(self._conn.execute(
                f"SELECT {owner_id}, content_key FROM {owner} WHERE {owner_id} = ANY(%s)", (list(ids),)).fetchall())
            # A row re-indexed meanwhile is gone: only live owners get a vector.
            live = [(i, keys[i], row) for i, row in zip(ids, np.asarray(vectors, np.float32)) if i in keys]
            self._insert_vectors(table, model, live)
            self._bump("vector")

    def _insert_vectors(self, table: str, model: str, rows: list[tuple[int, bytes, np.ndarray]]) -> None:
        """(owner id, content key, float32 vector) rows into the repository's vectors and the shared cache."""
        if not rows:
            return
        target, key = ("chunk_vectors", "chunk_id") if table == "chunk" else ("skeleton_vectors", "file_id")
        q, scales = quantize(np.stack([row for _, _, row in rows]))
        literals = [_vector_literal(row) for row in q.astype(np.float32) * scales[:, None]]
        dim = int(q.shape[1])
        self._ensure_vector_index(dim)
        with self._conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {target} ({key}, model, dim, vec) VALUES (%s, %s, %s, %s::vector)"
                f" ON CONFLICT ({key}) DO UPDATE SET model = excluded.model, dim = excluded.dim, vec = excluded.vec",
                [(i, model, dim, v) for (i, _, _), v in zip(rows, literals)])
            # A zero vector is no model's output (its row had nothing to embed: `types.BLANK_CHARS`), and a skeleton
            # judged blank by its file's chunks has a text (its path) that a file with code can share: never cached.
            cur.executemany("INSERT INTO embeddings (model, content_key, vec) VALUES (%s, %s, %s::vector)"
                            " ON CONFLICT DO NOTHING", [(model, k, v) for (_, k, row), v in zip(rows, literals)
                                                        if row.any()])

    def cache_vectors(self, model: str, vectors: dict[bytes, np.ndarray]) -> None:
        """Put vectors in the shared cache by content key now (committed), before any row holds them: other
        workers waiting for this content read them from there."""
        if not vectors:
            return
        q, scales = quantize(np.stack(list(vectors.values())))
        with self._session(), self._conn.transaction(), self._conn.cursor() as cur:
            cur.executemany("INSERT INTO embeddings (model, content_key, vec) VALUES (%s, %s, %s::vector)"
                            " ON CONFLICT DO NOTHING", [(model, k, _vector_literal(v)) for k, v in
                                                        zip(vectors, q.astype(np.float32) * scales[:, None])])

    def cached_vectors(self, model: str, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The shared cache's vectors of `model` for whichever of `keys` it holds."""
        rows = self._rows("SELECT content_key, vec::text FROM embeddings WHERE model = %s AND content_key = ANY(%s)",
                          (model, keys)) if keys else []
        return {bytes(k): _parse_vector(v) for k, v in rows}

    def write_batch(self, files: list[BatchFile], gone: list[str], model: str,
                    vectors: dict[bytes, np.ndarray], item: WorkItem, *,
                    touched: Sequence[tuple[str, int, float]] = (), skipped: Sequence[SkippedFile] = (),
                    before_deleting: Callable[[list[str]], None] | None = None) -> bool:
        """A worker's batch in one transaction: the files and their vectors in, `gone` out (those of them
        `skipped` for their content remembered), the new (path, size, mtime) of files `touched` with the same
        content, the queue item done. Nothing is written (False) when the claim is no longer the item's (its
        lease ran out and another worker took it over). A batch queued from a folder that is no longer the
        repository's source (`index --replace` elsewhere since) is marked done with nothing written, and
        `SourceConflict` raised: its files are not the new source's; likewise a batch of a run that is no longer
        the repository's newest (`RunSuperseded`).

        The batch that leaves its run with no batch open ends the run in the same transaction (`_end_run`): the
        files that left the folder are deleted (`before_deleting` is called with them first, inside the
        transaction: raising rolls the batch back) and the repository is pinned to the run's commit."""
        refused: Exception | None = None
        with self._session(), self._conn.transaction():
            # The repository's row before the queue's, in the order a drop takes them (its row, then its queued
            # batches): the other way round each could wait for the other, and PostgreSQL ended the drop. Held
            # until the write commits, it also orders the batches ending a run with each other and with `enqueue`.
            try:
                self._hold_source(item.root)
            except SourceConflict as exc:  # raised past no transaction block: a refused batch is still marked done
                refused = exc
            done = self._conn.execute(
                "UPDATE work_queue SET done_at = now() WHERE id = %s AND claimed_by = %s AND done_at IS NULL"
                " RETURNING id", (item.id, item.claimant)).fetchone()
            if done is None:
                return False
            if refused is None:
                latest = self._conn.execute("SELECT latest_run FROM repositories WHERE id = %s",
                                            (self.repo_id,)).fetchone()[0]
                if latest != item.run:
                    refused = RunSuperseded(latest)
            if refused is None:
                changed = self._write_batch_rows(files, gone, model, vectors, touched, skipped, item.commit)
                if item.run and not self._conn.execute(  # a batch queued before migration 9 ends no run
                        "SELECT EXISTS (SELECT 1 FROM work_queue WHERE repo_id = %s AND run = %s AND done_at IS NULL)",
                        (self.repo_id, item.run)).fetchone()[0]:
                    changed = self._end_run(item, before_deleting) or changed
                if changed:
                    self._bump("content")
                    self._bump("vector")
        if refused is not None:
            raise refused
        return True

    def _end_run(self, item: WorkItem, before_deleting: Callable[[list[str]], None] | None) -> bool:
        """Inside the transaction writing the last open batch of `item`'s run: delete the files that left the
        folder when the run was queued, and pin the repository to the run's commit; whether a file was deleted.
        Deleted by an earlier batch, a file left the repository while a batch still to be written (another
        worker's) held its replacement; pinned at the queue, every answer named the new commit for the old text."""
        gone = json.loads(self._conn.execute("SELECT latest_gone FROM repositories WHERE id = %s",
                                             (self.repo_id,)).fetchone()[0])
        deleted = False
        if gone:
            if before_deleting is not None:
                before_deleting(gone)
            deleted = self._delete_paths(gone) > 0
        self._conn.execute(f"UPDATE repositories SET commit_sha = %(commit)s, {_PINNED_NOW}, latest_gone = '[]'"
                           " WHERE id = %(repo)s", {"commit": item.commit, "repo": self.repo_id})
        self._held.wrote = True
        return deleted

    def leave_unwritten(self, item: WorkItem) -> None:
        """Mark a claimed batch done with nothing of it written (no longer this claim's: left as it is), and give
        its run up: the run cannot be written whole, so no batch of it ends it (its later batches are
        `RunSuperseded`) and the repository stays pinned where it is."""
        with self._session(), self._conn.transaction():
            self._conn.execute("SELECT id FROM repositories WHERE id = %s FOR NO KEY UPDATE", (self.repo_id,))
            done = self._conn.execute(
                "UPDATE work_queue SET done_at = now() WHERE id = %s AND claimed_by = %s AND done_at IS NULL"
                " RETURNING id", (item.id, item.claimant)).fetchone()
            if done is not None and item.run:
                self._conn.execute("UPDATE repositories SET latest_run = '', latest_gone = '[]' WHERE id = %s"
                                   " AND latest_run = %s", (self.repo_id, item.run))

    def _write_batch_rows(self, files: list[BatchFile], gone: list[str], model: str, vectors: dict[bytes, np.ndarray],
                          touched: Sequence[tuple[str, int, float]], skipped: Sequence[SkippedFile],
                          commit: str) -> bool:
        """`write_batch`'s rows, inside its transaction, its files read at `commit`; whether a file changed.
        A batch that changed no file (new stamps of the same content, files skipped that were never indexed)
        leaves the generations alone: every reader's snapshot and the graph stay current."""
        deleted = bool(gone) and self._delete_paths(gone) > 0  # first: `or` would skip it beside written files
        changed = bool(files) or deleted
        if touched:
            with self._conn.cursor() as cur:
                cur.executemany("UPDATE files SET size = %s, mtime = %s WHERE path = %s",
                                [(size, mtime, path) for path, size, mtime in touched])
        self.set_skipped(skipped, [f.chunked.path for f in files] + gone)
        chunk_rows: list[tuple[int, bytes, np.ndarray]] = []
        skeleton_rows: list[tuple[int, bytes, np.ndarray]] = []
        written = []
        for batch_file in files:
            written.append(self._write_file(batch_file, commit))
            file_id, _, chunks, _ = written[-1]
            skeleton = content_key(batch_file.chunked.skeleton.text)
            if skeleton in vectors:
                skeleton_rows.append((file_id, skeleton, vectors[skeleton]))
            for chunk_id, breadcrumb, text in chunks:
                key = content_key(breadcrumb, text)
                if key in vectors:
                    chunk_rows.append((chunk_id, key, vectors[key]))
        self._count_terms(written)  # the batch's terms in one COPY and one upsert of their frequencies
        if model:
            self._insert_vectors("chunk", model, chunk_rows)
            self._insert_vectors("skeleton", model, skeleton_rows)
        return changed

    def _ensure_vector_index(self, dim: int) -> None:
        """Ask for this repository's HNSW index for vectors of `dim` dimensions (an index needs a fixed
        dimension; a partial index per repository, so a search of one repository walks only its own graph).
        It is built once the session's transaction is over (`_build_vector_indexes`)."""
        if dim not in self._indexed_dims:
            self._held.pending_indexes.add(dim)

    def _build_vector_indexes(self) -> None:
        """Build the HNSW indexes this session asked for, outside any transaction, with CREATE INDEX
        CONCURRENTLY (`build_index_once`).

        Only a repository holding more vectors of that dimension than `nearest_chunks` scans exactly gets one:
        a smaller repository is never searched through it, each build reads the whole shared vector table (the
        index is partial), and the graph takes about as much disk as the vectors. A later write that takes the
        repository past that size asks again."""
        for dim in sorted(self._held.pending_indexes):
            if time.monotonic() - self._gave_up.get(dim, -BUILD_RETRY_S) < BUILD_RETRY_S:
                continue  # each write of an index run would wait the whole lock wait again
            held = self._conn.execute("SELECT count(*) FROM chunk_vectors WHERE dim = %s", (dim,)).fetchone()[0]
            if held <= EXACT_SEARCH_MAX_VECTORS:
                continue
            try:
                build_index_once(self._conn, _hnsw_index_name(self.repo_id, dim), vector_index_sql(self.repo_id, dim))
            except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
                # The write it follows has committed: it stands, and the index waits for a later write (the
                # unfinished index it leaves marks it for every process), searches scanning exactly meanwhile.
                log.warning("the HNSW index of %r for %d-dimension vectors was not built: its build waits for"
                            " the transactions older than itself, and one stayed open past the wait (%s; a long"
                            " report or dump, a stalled indexer or worker). Until it is built the repository's"
                            " searches scan its vectors exactly; the next write of the repository builds it (the"
                            " next `codeloupe index PATH --store URL` or worker batch; this process tries again in"
                            " %d minutes)", self.repository, dim, str(exc).splitlines()[0], BUILD_RETRY_S // 60)
                self._gave_up[dim] = time.monotonic()
                continue
            self._gave_up.pop(dim, None)
            self._indexed_dims.add(dim)
        self._held.pending_indexes.clear()

    def _unbuilt_vector_indexes(self) -> set[int]:
        """The dimensions of this repository's HNSW indexes a build left invalid (it gave up or was killed)."""
        rows = self._conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
            " WHERE NOT i.indisvalid AND starts_with(c.relname, %s)", (_hnsw_index_name(self.repo_id, ""),))
        return {int(name.rpartition("_")[2]) for name, in rows}

    def vector_matrix(self, table: str, model: str) -> VectorMatrix:
        """The repository's vectors of `model`, int8 as the SQLite store keeps them (the same rounding of the
        same floats: both stores' dense lanes then score alike). Read as two byte strings, the ids' and the
        vectors' binary forms back to back (text parsed per row took ~0.1 s per 1,000 vectors)."""
        target, key = {"chunk": ("chunk_vectors", "chunk_id"), "skeleton": ("skeleton_vectors", "file_id")}[table]
        count, ids, data = self._rows(
            f"SELECT count(*), coalesce(string_agg(int8send({key}), '' ORDER BY {key}), ''),"
            f" coalesce(string_agg(vector_send(vec), '' ORDER BY {key}), '') FROM {target} WHERE model = %s",
            (model,))[0]
        if not count:
            return VectorMatrix(np.zeros(0, np.int64), np.zeros((0, 0), np.int8), np.zeros(0, np.float32))
        ids, data = np.frombuffer(bytes(ids), ">i8").astype(np.int64), bytes(data)
        # Each vector: its dimension (int16), an unused int16, then its values (float4): one float4 slot of header.
        dim = int.from_bytes(data[:2], "big")
        rows = np.frombuffer(data, ">f4").reshape(count, -1) if len(data) == count * 4 * (dim + 1) else None
        if len(ids) != count or rows is None or (rows[:, :1].view(">i2")[:, 0] != dim).any():
            raise StoreError(f"the shared index {redact(self.url)} holds vectors of several sizes for {model} in"
                             f" {self.repository}: re-embed it")
        q, scales = quantize(rows[:, 1:].astype(np.float32))
        return VectorMatrix(ids, q, scales)

    def vector_counts(self, model: str) -> dict[str, int]:
        return {
            "chunks_done": self._rows("SELECT count(*) FROM chunk_vectors WHERE model = %s", (model,))[0][0],
            "skeletons_done": self._rows("SELECT count(*) FROM skeleton_vectors WHERE model = %s", (model,))[0][0],
        }

    def vector_matrix_ids(self, table: str, model: str) -> np.ndarray:
        """The ids `vector_matrix` would return, without the vectors (sorted)."""
        target, key = {"chunk": ("chunk_vectors", "chunk_id"), "skeleton": ("skeleton_vectors", "file_id")}[table]
        rows = self._rows(f"SELECT {key} FROM {target} WHERE model = %s ORDER BY {key}", (model,))
        return np.array([r[0] for r in rows], dtype=np.int64)

    def drop_vectors_not_of(self, model: str) -> None:
        """This repository's vectors are of one model; the shared cache keeps every model's."""
        stale = "SELECT 1 FROM {} WHERE model != %s LIMIT 1"
        if not any(self._rows(stale.format(t), (model,)) for t in ("chunk_vectors", "skeleton_vectors")):
            return
        with self._session(), self._conn.transaction():
            self._conn.execute("DELETE FROM chunk_vectors WHERE model != %s", (model,))
            self._conn.execute("DELETE FROM skeleton_vectors WHERE model != %s", (model,))
            self._bump("vector")

    def searches_vectors_itself(self, model: str) -> bool:
        """More than EXACT_SEARCH_MAX_VECTORS vectors of `model`: searched through the HNSW index. Up to that,
        the process holds them int8 (at most ~8 MB) and a query scans them in well under a millisecond, where
        the database's exact scan took ~30 ms a query at 4,000 vectors."""
        return self._rows("SELECT count(*) FROM chunk_vectors WHERE model = %s", (model,))[0][0] > \
            EXACT_SEARCH_MAX_VECTORS

    def nearest_chunks(self, model: str, query: np.ndarray, limit: int,
                       skeleton_weight: float) -> list[tuple[int, float]]:
        """(chunk id, score) of the `limit` chunks nearest to `query`, scored as the in-process lane scores:
        the chunk's inner product with the query plus `skeleton_weight` x its file skeleton's.

        A repository of up to EXACT_SEARCH_MAX_VECTORS vectors is scanned exactly; a larger one takes its
        candidates from the HNSW index (cosine order), which are then scored the same way."""
        dim = int(query.shape[0])
        literal = _vector_literal(np.asarray(query, np.float32))
        with self._session(), self._conn.transaction():
            total = self._conn.execute("SELECT count(*) FROM chunk_vectors WHERE model = %s AND dim = %s",
                                       (model, dim)).fetchone()[0]
            if total > EXACT_SEARCH_MAX_VECTORS:
                self._conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(limit, 40), HNSW_EF_SEARCH_MAX)}")
                # The planner would rather sort a selective repository's rows than walk the graph; for a
                # repository this large the graph is the point (pgbench measures the recall it keeps).
                self._conn.execute("SET LOCAL enable_sort = off")
                candidates = (f"SELECT chunk_id, vec FROM public.chunk_vectors WHERE dim = {dim} AND repo_id ="
                              f" {self.repo_id} AND model = %(model)s ORDER BY vec::vector({dim}) <=>"
                              f" %(q)s::vector({dim}) LIMIT %(limit)s")
            else:
                candidates = "SELECT chunk_id, vec FROM chunk_vectors WHERE model = %(model)s AND dim = " + str(dim)
            rows = self._conn.execute(
                f"SELECT n.chunk_id, -(n.vec <#> %(q)s::vector)"
                f" + %(w)s * coalesce(-(s.vec <#> %(q)s::vector), 0) AS score"
                f" FROM ({candidates}) n JOIN chunks c ON c.id = n.chunk_id"
                f" LEFT JOIN skeleton_vectors s ON s.file_id = c.file_id AND s.model = %(model)s"
                f" ORDER BY score DESC, n.chunk_id LIMIT %(limit)s",
                {"q": literal, "model": model, "limit": limit, "w": skeleton_weight}).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    # ------------------------------------------------------------------ the work queue (codeloupe worker)

    def enqueue(self, root: str, commit: str, batches: list[list[str]], gone: Sequence[str] = ()) -> int:
        """Queue an index run of this repository at `commit`: its file batches for the workers, the files that
        left the folder (`gone`) for the batch that ends it (`write_batch`), which pins the repository to
        `commit`; returns how many batches. The run is the repository's newest: the batches of runs queued before
        it are left unwritten (`RunSuperseded`). A run with no batch pins the repository at once (its rows hold
        the folder's files already), as does one into a repository that holds no file yet (each file it answers
        with is then one a batch of the run wrote). Refused (`SourceConflict`) once another folder is the
        repository's source."""
        run = uuid.uuid4().hex
        with self._session(), self._conn.transaction():
            self._hold_source(root)
            pinned_now = not batches or not self._conn.execute("SELECT EXISTS (SELECT 1 FROM files)").fetchone()[0]
            self._conn.execute(f"UPDATE repositories SET latest_run = %s, latest_gone = %s, {_RUN_FROM_NOW}"
                               " WHERE id = %s", (run, "[]" if pinned_now else json.dumps(list(gone)), self.repo_id))
            if pinned_now:
                self._conn.execute(f"UPDATE repositories SET commit_sha = %(commit)s, {_PINNED_NOW} WHERE id = %(repo)s",
                                   {"commit": commit, "repo": self.repo_id})
            with self._conn.cursor() as cur:
                cur.executemany("INSERT INTO work_queue (repo_id, root, commit_sha, paths, run) VALUES (%s,%s,%s,%s,%s)",
                                [(self.repo_id, root, commit, json.dumps(batch), run) for batch in batches])
            self._held.wrote = True
        return len(batches)


def drop_vector_indexes(conn: Any, repo_id: int) -> list[str]:
    """Drop a repository's HNSW indexes (one per vector dimension) inside the caller's transaction, under
    the lock their creation takes; returns their names."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
    names = [r[0] for r in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'chunk_vectors' AND starts_with(indexname, %s)"
        " ORDER BY indexname", (_hnsw_index_name(repo_id, ""),))]
    for name in names:
        conn.execute(f'DROP INDEX IF EXISTS public."{name}"')
    return names


# Okapi BM25 over the term statistics, for any set of repositories at once, each scored with its own totals
# (as each repository's in-process lane would be): chunks, files (a file's terms are its chunks' summed), and
# each term's chunk frequency (df). bench/pg_lexical.py measured this keeps the in-process lane's recall. A
# query term is each repository's dictionary id; the chunks holding it come from the GIN index, its count
# from the chunk's row (the position of the id in `terms` is the count's in `tfs`). The database hands over
# those postings (`_postings_of`) and the scores are summed here: aggregating them in SQL (df, files, sums, a
# window per repository) cost twice the lookup itself (docs/org-scale-measurements.md).
# A posting's columns (`_POSTING_COLUMNS`), from a chunk's row `c` and a query term `t` (its id, its
# 0-based position in the query `k`): every postings statement below selects these.
_POSTING_SELECT = """SELECT c.repo_id::int4, t.k::int4, c.chunk_id::int8, c.file_id::int8,
       coalesce(c.tfs[array_position(c.terms, t.id)], 0)::int4, c.length::int4, c.file_length::int4"""
_TERM_POSTINGS = """
WITH q AS (SELECT * FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, k)),
t AS (SELECT t.repo_id, t.id, q.k - 1 AS k FROM q JOIN lex_terms t ON t.repo_id = ANY(%(repos)s) AND t.term = q.term)
""" + _POSTING_SELECT + """
FROM t JOIN lex_chunk_terms c ON c.terms @> ARRAY[t.id]
"""
# Its rows reach the process as one row of seven byte strings, each column's values back to back in the
# database's binary form: a binary COPY sent a message per posting, and reading those messages one by one was
# most of a search across hundreds of repositories (1.4M messages, about 5 s in Python, for 8 queries).
_POSTING_COLUMNS = (("repo", "int4"), ("term", "int4"), ("chunk", "int8"), ("file", "int8"), ("tf", "int4"),
                    ("length", "int4"), ("file_length", "int4"))
_POSTING = np.dtype([(name, np.int32 if kind == "int4" else np.int64) for name, kind in _POSTING_COLUMNS])


def _postings_of(conn: Any, statement: str, params: dict) -> np.ndarray:
    """The rows of `statement` (a postings statement: `_POSTING_COLUMNS` in order) as one array. A column with a
    NULL (its values would no longer line up with the others') is refused with the database named as the
    cause; a row whose count is not positive (a chunk's `tfs` shorter than its `terms`: a damaged row) is left
    out."""
    names = [name for name, _ in _POSTING_COLUMNS]
    packed = ", ".join(f"coalesce(string_agg({kind}send({name}), ''), '')" for name, kind in _POSTING_COLUMNS)
    count, *columns = conn.execute(f"SELECT count(*), {packed} FROM ({statement}) p({', '.join(names)})",
                                   params).fetchone()
    return _read_postings(int(count), [bytes(c) for c in columns])


def _read_postings(count: int, columns: list[bytes]) -> np.ndarray:
    """`count` postings from their columns' bytes (big-endian, `_POSTING_COLUMNS` in order)."""
    postings = np.zeros(count, _POSTING)
    for (name, kind), data in zip(_POSTING_COLUMNS, columns, strict=True):
        width = 4 if kind == "int4" else 8
        if len(data) != count * width:
            raise RuntimeError("the PostgreSQL store's term statistics came back malformed"
                               " (a damaged lex_chunk_terms row?)")
        postings[name] = np.frombuffer(data, f">i{width}")
    return postings[postings["tf"] > 0]


def _bm25(ids: np.ndarray, weights: np.ndarray, tf: np.ndarray, length: np.ndarray, average: float | np.ndarray,
          k1: float, b: float, limit: int) -> list[tuple[int, float]]:
    """The `limit` best of `ids` (one row per posting) by BM25, best first, ties by id; `weights` are each
    posting's query count times its term's IDF; `average`, the document length of the posting's repository.
    Summed in the row order: the callers sort by (id, term), so one repository's scores are the same bits
    asked alone, with others, or through `best_chunks_across`."""
    unique, scores = _summed(ids, weights, tf, length, average, k1, b)
    best = np.lexsort((unique, -scores))[:limit]
    return list(zip(unique[best].tolist(), scores[best].tolist(), strict=True))


def _summed(ids: np.ndarray, weights: np.ndarray, tf: np.ndarray, length: np.ndarray, average: float | np.ndarray,
            k1: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """(each distinct id, ascending; the BM25 contributions of its rows summed in row order)."""
    contribution = weights * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
    unique, inverse = np.unique(ids, return_inverse=True)
    return unique, np.bincount(inverse, weights=contribution, minlength=len(unique))


def _idf(total: float, frequency: np.ndarray) -> np.ndarray:
    return np.log(1 + (total - frequency + 0.5) / (frequency + 0.5))


def term_scores_across(stores: list[PgStore], terms: list[str], limit: int, k1: float, b: float, *,
                       chunk_idf: dict[str, float] | None = None,
                       file_idf: dict[str, float] | None = None) -> dict[int, TermScores]:
    """Each repository's BM25 answer to `terms` (repository id -> its `TermScores`), one lookup for all of
    them; the stores share one database. A term in `chunk_idf` / `file_idf` is scored with that IDF instead of
    each repository's own."""
    answers = {store.repo_id: TermScores([], [], {}, store._current_terms().lex_chunks) for store in stores}
    counts = Counter(terms)
    if not stores or not counts:
        return answers
    words = list(counts)
    query_count = np.array(list(counts.values()), np.float64)
    given = {"chunk": chunk_idf or {}, "file": file_idf or {}}
    totals, postings = _term_postings(stores, words)
    for repo_id, chunks, files, length in totals:
        mine = postings[postings["repo"] == repo_id]
        mine = mine[np.lexsort((mine["term"], mine["chunk"]))]
        term = mine["term"].astype(np.intp)
        chunk_df = np.bincount(term, minlength=len(words))
        # A file holds a term as often as its chunks do together; its length is the one its chunks carry. The
        # (file, term) pairs as one key each, in the same order: a unique over two rows sorts 16x slower.
        keys, inverse = np.unique(mine["file"] * len(words) + mine["term"], return_inverse=True)
        pairs, inverse = np.stack([keys // len(words), keys % len(words)]), inverse.ravel()
        file_tf = np.bincount(inverse, weights=mine["tf"], minlength=pairs.shape[1])
        file_length = np.zeros(pairs.shape[1], np.float64)
        np.maximum.at(file_length, inverse, mine["file_length"])
        pair_term = pairs[1].astype(np.intp)
        file_df = np.bincount(pair_term, minlength=len(words))
        idf = {}
        for lane, total, df in (("chunk", chunks, chunk_df), ("file", files, file_df)):
            own = _idf(float(total), df.astype(np.float64))
            idf[lane] = np.array([given[lane].get(w, own[k]) for k, w in enumerate(words)], np.float64)
        answers[repo_id] = dataclasses.replace(
            answers[repo_id], total_files=int(files),
            chunks=_bm25(mine["chunk"], (query_count * idf["chunk"])[term], mine["tf"].astype(np.float64),
                         mine["length"].astype(np.float64), max(length / max(chunks, 1), 1e-9), k1, b, limit),
            files=_bm25(pairs[0], (query_count * idf["file"])[pair_term], file_tf,
                        file_length, max(length / max(files, 1), 1e-9), k1, b, limit),
            chunk_frequency={w: int(chunk_df[k]) for k, w in enumerate(words) if chunk_df[k]},
            file_frequency={w: int(file_df[k]) for k, w in enumerate(words) if file_df[k]})
    return answers


# The postings `term_scores_across` read lately, by database, repository state and term: a search across
# repositories asks the same terms of the same repositories in its passes (each repository's own statistics,
# then the pooled ones), each time every posting of the terms (hundreds of thousands for a common word across 8
# repositories, ~0.4 s a statement), and the feedback lane asks each repository the query's terms again beside
# a few rare ones of its own: kept by term, only those are asked. A repository's postings change only with its
# content generation or its tokenisation (`_bump`, `_current_terms`), both in the key, and its state is read at
# most STATE_TTL_S late: a kept answer is never staler than an asked one could be. A term with no postings in a
# repository is kept too (as nothing), and counts `_KEPT_ENTRY_BYTES` against the cap like every entry.
_RECENT_POSTINGS_BYTES = 64 * 2**20
_KEPT_ENTRY_BYTES = 200
_recent_postings: OrderedDict[tuple, np.ndarray] = OrderedDict()  # (url, repo id, generation, version, term)
_recent_totals: OrderedDict[tuple, tuple] = OrderedDict()  # (url, repo id, generation, version): its totals row
_recent_bytes = 0
_recent_postings_lock = threading.Lock()


def _term_postings(stores: list[PgStore], words: list[str]) -> tuple[list[tuple], np.ndarray]:
    """(each repository's (id, chunks, files, length) totals row, the postings of `words` in all of them, each
    posting's `term` its word's place in `words`) of `stores` (one database); a (repository, term) asked before
    in the same repository state is not asked again."""
    url = stores[0].url
    states = sorted((url, store.repo_id, state.content_generation, state.lex_version)
                    for store in stores for state in [store._current_terms()])
    with _recent_postings_lock:
        kept = {(state[1], word): _recent_postings.get(state + (word,)) for state in states for word in words}
        totals = {state[1]: _recent_totals.get(state) for state in states}
        for key in [state + (word,) for state in states for word in words if kept[state[1], word] is not None]:
            _recent_postings.move_to_end(key)
    asking = [state for state in states
              if totals[state[1]] is None or any(kept[state[1], word] is None for word in words)]
    if asking:
        repo_ids = [state[1] for state in asking]
        missing = [word for word in words if any(kept[repo_id, word] is None for repo_id in repo_ids)]
        with stores[0]._session():
            conn = stores[0]._conn
            rows = conn.execute("SELECT id, lex_chunks, lex_files, lex_length FROM repositories WHERE id = ANY(%s)",
                                (repo_ids,)).fetchall()
            fetched = _postings_of(conn, _TERM_POSTINGS, {"terms": missing, "repos": repo_ids})
        totals.update({int(row[0]): tuple(row) for row in rows})
        asked = _by_repository_and_term(fetched, repo_ids, missing)
        kept.update(asked)
        _keep(asking, missing, asked, totals)
    pieces = [kept[state[1], word] for state in states for word in words]
    postings = np.concatenate(pieces) if pieces else np.zeros(0, _POSTING)
    postings["term"] = np.repeat(np.tile(np.arange(len(words), dtype=np.int32), len(states)),
                                 [len(piece) for piece in pieces])
    return [totals[state[1]] for state in states if totals[state[1]] is not None], postings


def _by_repository_and_term(postings: np.ndarray, repo_ids: list[int], words: list[str]
                            ) -> dict[tuple[int, str], np.ndarray]:
    """`postings` of `words` in `repo_ids` split by (repository, word): every pair, empty where none."""
    postings = postings[np.lexsort((postings["term"], postings["repo"]))]
    pair = postings["repo"].astype(np.int64) * len(words) + postings["term"]
    wanted = [repo_id * len(words) + k for repo_id in repo_ids for k in range(len(words))]
    starts, ends = np.searchsorted(pair, wanted), np.searchsorted(pair, wanted, side="right")
    pieces = iter(zip(starts.tolist(), ends.tolist(), strict=True))
    out = {}
    for repo_id in repo_ids:
        for word in words:
            start, end = next(pieces)
            piece = postings[start:end].copy()
            piece.setflags(write=False)  # shared by every caller of the cache
            out[repo_id, word] = piece
    return out


def _keep(states: list[tuple], words: list[str], asked: dict[tuple[int, str], np.ndarray],
          totals: dict[int, tuple | None]) -> None:
    """Keep what was just asked, the longest unused let go past `_RECENT_POSTINGS_BYTES`."""
    global _recent_bytes
    with _recent_postings_lock:
        if not _recent_postings:  # emptied from outside (a bench forgetting them): nothing is held
            _recent_bytes = 0
        for state in states:
            if totals[state[1]] is not None:
                _recent_totals[state] = totals[state[1]]
                _recent_totals.move_to_end(state)
            for word in words:
                key = state + (word,)
                old = _recent_postings.pop(key, None)
                if old is not None:
                    _recent_bytes -= old.nbytes + _KEPT_ENTRY_BYTES
                _recent_postings[key] = asked[state[1], word]
                _recent_bytes += asked[state[1], word].nbytes + _KEPT_ENTRY_BYTES
        while _recent_bytes > _RECENT_POSTINGS_BYTES and _recent_postings:
            _recent_bytes -= _recent_postings.popitem(last=False)[1].nbytes + _KEPT_ENTRY_BYTES
        while len(_recent_totals) > _RECENT_POSTINGS_BYTES // _KEPT_ENTRY_BYTES:
            _recent_totals.popitem(last=False)


@dataclass(frozen=True)
class BestChunks:
    """The best chunks of several repositories for a query's terms, by BM25 with IDF pooled over them."""

    chunks: list[tuple[int, int, float]]  # (repository id, chunk id, score), best first, ties by chunk id
    postings_read: int  # postings the database handed over (`term_scores_across` hands over every one)
    postings_held: int  # postings of the query's terms in those repositories


@dataclass(frozen=True)
class FilesSearched:
    """The files whose chunks a search reads, as `search`'s own mask has them: not the documentation in code
    mode, only it in docs mode, and only those under `scope` (a folder inside each repository) when one is
    given; as a condition on a file id column for the statements that ask many repositories at once."""

    scope: str = ""
    mode: str = "both"

    def condition(self, file_id: str) -> tuple[str, dict[str, str]]:
        """" AND <a condition on `file_id`>" and its parameters (the statement's %(repos)s included), or ("", {})
        when every file is searched."""
        kept, params = [], {}
        if self.mode == "code":
            kept.append("f.is_doc = 0")
        elif self.mode == "docs":
            kept.append("f.is_doc <> 0")
        scope = self.scope.strip().strip("/")
        if scope and scope != ".":
            kept.append("(f.path = %(scope)s OR starts_with(f.path, %(scope_prefix)s))")
            params = {"scope": scope, "scope_prefix": scope + "/"}
        if not kept:
            return "", {}
        return (f" AND {file_id} IN (SELECT f.id FROM public.files f WHERE f.repo_id = ANY(%(repos)s)"
                f" AND {' AND '.join(kept)})", params)


EVERY_FILE = FilesSearched()


# The postings of some (repository, term) pairs, named by term id: `_TERM_POSTINGS`' columns.
_POSTINGS_OF_TERMS = """
WITH t AS (SELECT * FROM unnest(%(ids)s::int8[], %(ks)s::int4[]) AS t(id, k))
""" + _POSTING_SELECT + """
FROM t JOIN lex_chunk_terms c ON c.terms @> ARRAY[t.id]
WHERE true"""
# The same for some chunks only (their rows by primary key), each with the terms asked of its repository.
_POSTINGS_IN_CHUNKS = """
WITH t AS (SELECT * FROM unnest(%(ids)s::int8[], %(ks)s::int4[], %(repos)s::int4[]) AS t(id, k, repo_id))
""" + _POSTING_SELECT + """
FROM lex_chunk_terms c JOIN t ON t.repo_id = c.repo_id
WHERE c.chunk_id = ANY(%(chunks)s)
"""
# A round of `best_chunks_across` hands over the rarest terms' postings up to this many (at least one term's).
_POSTINGS_PER_ROUND = 20_000
# Slack on the pruning bound: partial sums are taken in another order than the final ones.
_BOUND_SLACK = 1e-9


def best_chunks_across(stores: list[PgStore], terms: list[str], limit: int, k1: float, b: float, *,
                       rarest: int | None = None, files: FilesSearched = EVERY_FILE) -> BestChunks:
    """The `limit` best chunks of all of `stores` (one database) for `terms` by BM25, with each term's IDF
    pooled over them (chunks and document frequencies summed: `TermStats.idf`) and each chunk's length taken
    against its own repository's average: the chunks, scores and order that `term_scores_across` with that
    IDF gives when every repository's answers are merged, without the postings that cannot change them.

    Top-k pruning (MaxScore): a term adds at most its weight x (k1 + 1) to a chunk's score. The rarest terms'
    postings are read first, a round at a time, until the terms left could not lift a chunk that holds none of
    the terms read to the `limit`-th best score so far; those terms are then read only in the chunks whose
    score so far plus that bound still reaches it (by primary key). A query's common words, most of the
    postings, are then read in a few chunks instead of in every chunk holding them.

    `rarest`: score only that many of the terms, those the fewest chunks hold (a long report's common words
    cost the most postings and weigh the least). `files`: only their chunks are ranked (the IDF stays the
    repositories' own, as a search's scope and mode filter rows without changing the statistics)."""
    counts = Counter(terms)
    repos = [store.repo_id for store in stores]
    if not stores or not counts or limit <= 0:
        return BestChunks([], 0, 0)
    words = list(counts)
    with _asking_across(stores, "rank chunks by the query's words") as conn:
        totals = {int(r): (int(chunks), int(length)) for r, chunks, length in conn.execute(
            "SELECT id, lex_chunks, lex_length FROM repositories WHERE id = ANY(%s)", (repos,)).fetchall()}
        dictionary = conn.execute("SELECT repo_id, term, id, df FROM lex_terms WHERE repo_id = ANY(%s)"
                                  " AND term = ANY(%s) AND df > 0", (repos, words)).fetchall()
        position = {w: k for k, w in enumerate(words)}
        df = np.zeros(len(words), np.int64)
        ids_of: dict[int, list[tuple[int, int]]] = defaultdict(list)  # term -> (repository, its term id)
        for repo_id, word, term_id, n in dictionary:
            df[position[word]] += n
            ids_of[position[word]].append((int(repo_id), int(term_id)))
        total = sum(chunks for chunks, _ in totals.values())
        idf = np.log1p((total - df + 0.5) / (df + 0.5))
        weight = np.array([counts[w] for w in words], np.float64) * idf
        bound = weight * (k1 + 1)
        average = {r: max(length / max(chunks, 1), 1e-9) for r, (chunks, length) in totals.items()}
        left = sorted((k for k in range(len(words)) if df[k]), key=lambda k: (df[k], k))[:rarest]  # rarest first
        # The files' condition on the postings once they are read: asked inside the statement, it made the planner
        # scan every chunk row and test each against every term (6-8 s at 118K chunks, against 0.15 s through
        # the terms' index). The chunks read by primary key below come from these files already.
        kept, kept_params = files.condition("found.file_id")
        of_terms = f"WITH found AS MATERIALIZED ({_POSTINGS_OF_TERMS}) SELECT * FROM found WHERE true{kept}" \
            if kept else _POSTINGS_OF_TERMS
        held = int(df[left].sum())
        read: list[np.ndarray] = []
        postings_read = 0

        def fetch(statement: str, params: dict) -> np.ndarray:
            nonlocal postings_read
            found = _postings_of(conn, statement, params)
            postings_read += len(found)
            return found

        def pairs(ks: list[int]) -> tuple[list[int], list[int], list[int]]:
            chosen = [(term_id, k, repo_id) for k in ks for repo_id, term_id in ids_of[k]]
            return [c[0] for c in chosen], [c[1] for c in chosen], [c[2] for c in chosen]

        while left:
            batch, budget = [], 0
            while left and (not batch or budget + df[left[0]] <= _POSTINGS_PER_ROUND):
                budget += df[left[0]]
                batch.append(left.pop(0))
            ids, ks, _ = pairs(batch)
            read.append(fetch(of_terms, {"ids": ids, "ks": ks, "repos": repos, **kept_params}))
            if not left:
                break
            chunk_ids, partial = _summed_postings(np.concatenate(read), weight, average, k1, b)
            if len(partial) < limit:
                continue  # fewer chunks than asked for: every chunk holding any term is among the best
            floor = np.partition(partial, len(partial) - limit)[len(partial) - limit] * (1 - _BOUND_SLACK)
            rest = float(bound[left].sum())
            if rest >= floor:
                continue  # a chunk holding only the terms left could still be among the best
            live = chunk_ids[partial + rest * (1 + _BOUND_SLACK) >= floor]
            if len(live) * len(left) >= int(df[left].sum()):
                continue  # reading the terms left in every chunk costs no more
            ids, ks, owners = pairs(left)
            read.append(fetch(_POSTINGS_IN_CHUNKS, {"ids": ids, "ks": ks, "repos": owners,
                                                    "chunks": live.tolist()}))
            left = []
    postings = np.concatenate(read) if read else np.zeros(0, _POSTING)
    postings = postings[np.lexsort((postings["term"], postings["chunk"]))]
    chunk_ids, scores = _summed_postings(postings, weight, average, k1, b)
    order = np.lexsort((chunk_ids, -scores))[:limit]
    best = zip(chunk_ids[order].tolist(), scores[order].tolist(), strict=True)
    repo_of = dict(zip(postings["chunk"].tolist(), postings["repo"].tolist()))
    return BestChunks([(repo_of[chunk], chunk, score) for chunk, score in best], postings_read, held)


def nearest_across(stores: list[PgStore], model: str, query: np.ndarray, limit: int,
                   files: FilesSearched = EVERY_FILE) -> list[tuple[int, int, float]]:
    """The `limit` chunks of all of `stores` (one database) whose vectors of `model` are nearest to `query`, by
    the chunk's own cosine (not the file skeleton's share the dense lane adds): (repository id, chunk id,
    cosine), best first, ties by chunk id; only chunks of `files`. One statement for all of them: asking each
    repository its own nearest (`nearest_chunks`) took three round trips each, about 1 s for 200 repositories
    before any vector was read.

    Where the shared index holds one HNSW graph over every repository's vectors of that dimension (`codeloupe
    admin global-index`), the `HNSW_EF_SEARCH_MAX` nearest in the graph are kept to those of `stores`, `model`
    and `files` and scored exactly: an approximate answer in milliseconds whatever the organisation's size.
    When fewer than `limit` of them are kept (a few repositories of many named, a mode whose files are few),
    or without the graph, every vector of `stores` is scanned exactly: linear in their vectors (0.56 s at
    207,000)."""
    if not stores:
        return []
    dim = int(query.shape[0])
    kept, kept_params = files.condition("c.file_id")
    params = {"q": _vector_literal(np.asarray(query, np.float32)), "repos": [s.repo_id for s in stores],
              "model": model, "dim": dim, "limit": limit, **kept_params}

    def nearest(vectors: str) -> list[tuple[int, int, float]]:
        rows = conn.execute(
            f"SELECT v.repo_id, v.chunk_id, -(v.vec <#> %(q)s::vector) FROM {vectors} v"
            + (" JOIN public.chunks c ON c.id = v.chunk_id" if kept else "")
            + " WHERE v.repo_id = ANY(%(repos)s) AND v.model = %(model)s AND v.dim = %(dim)s" + kept
            + " ORDER BY v.vec <#> %(q)s::vector, v.chunk_id LIMIT %(limit)s", params).fetchall()
        return [(int(r), int(c), float(score)) for r, c, score in rows]

    with _asking_across(stores, "rank chunks by the query's meaning") as conn, conn.transaction():
        if index_valid(conn, global_vector_index_name(dim)):
            conn.execute(f"SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH_MAX}")
            # Sorting a small table's rows would cost the planner less than walking the graph; it is the
            # graph's nearest that the statement asks for, as at any size.
            conn.execute("SET LOCAL enable_sort = off")
            graph = nearest(f"(SELECT repo_id, chunk_id, model, dim, vec FROM public.chunk_vectors WHERE dim ="
                            f" {dim} ORDER BY vec::vector({dim}) <=> %(q)s::vector({dim})"
                            f" LIMIT {HNSW_EF_SEARCH_MAX})")
            if len(graph) >= limit:
                return graph
            conn.execute("SET LOCAL enable_sort = on")
        started = time.perf_counter()
        scanned = nearest("public.chunk_vectors")
        _suggest_global_index(stores[0].url, len(stores), time.perf_counter() - started)
        return scanned


# An exact scan across repositories slower than this is worth a word to whoever runs the index (once a process).
SLOW_SCAN_S = 1.0
_suggested: set[str] = set()


def _suggest_global_index(url: str, repositories: int, seconds: float) -> None:
    if seconds > SLOW_SCAN_S and url not in _suggested:
        _suggested.add(url)
        log.warning("ranking chunks of %d repositories by meaning scanned every vector (%.1f s): `codeloupe admin"
                    " --store URL global-index` builds one graph over every repository that answers it in"
                    " milliseconds", repositories, seconds)


@contextmanager
def _asking_across(stores: list[PgStore], what: str) -> Iterator[Any]:
    """The connection of a statement asked of all of `stores` (one database); a database error (a timeout, a
    lock wait, a value the database refuses) as a StoreError saying it could not `what`."""
    with stores[0]._session():
        try:
            yield stores[0]._conn
        except psycopg.Error as exc:
            raise StoreError(f"the shared index {redact(stores[0].url)} could not {what}:"
                             f" {said(exc, stores[0].url)}") from exc


def one_database(stores: Sequence[object]) -> bool:
    """Whether `stores` are all repositories of one shared index (one database, asked together)."""
    return bool(stores) and all(isinstance(s, PgStore) for s in stores) and \
        len({id(s._pool) for s in stores if isinstance(s, PgStore)}) == 1


def _averages(postings: np.ndarray, average: dict[int, float]) -> np.ndarray:
    """Each posting's repository's average chunk length."""
    repo_ids = np.array(sorted(average), np.int64)
    values = np.array([average[r] for r in repo_ids.tolist()], np.float64)
    return values[np.searchsorted(repo_ids, postings["repo"].astype(np.int64))] if len(repo_ids) else \
        np.zeros(len(postings), np.float64)


def _summed_postings(postings: np.ndarray, weight: np.ndarray, average: dict[int, float], k1: float,
                     b: float) -> tuple[np.ndarray, np.ndarray]:
    """(chunk ids, their BM25 over these postings): what the terms read so far give each chunk."""
    return _summed(postings["chunk"], weight[postings["term"].astype(np.intp)], postings["tf"].astype(np.float64),
                   postings["length"].astype(np.float64), _averages(postings, average), k1, b)


def vector_index_sql(repo_id: int, dim: int) -> str:
    """The statement building a repository's HNSW index for vectors of `dim` dimensions (a partial index, so
    a search of one repository walks only its own graph), concurrently with other repositories' writes."""
    return _hnsw_sql(_hnsw_index_name(repo_id, dim), dim, f"repo_id = {int(repo_id)} AND dim = {dim}", HNSW_M,
                     HNSW_EF_CONSTRUCTION)


def global_vector_index_sql(dim: int) -> str:
    """The statement building one HNSW graph over every repository's vectors of `dim` dimensions: where a
    search across all of them takes its nearest chunks (`nearest_across`), concurrently with writes."""
    return _hnsw_sql(global_vector_index_name(dim), dim, f"dim = {dim}", GLOBAL_HNSW_M,
                     GLOBAL_HNSW_EF_CONSTRUCTION)


def _hnsw_sql(name: str, dim: int, rows: str, m: int, ef_construction: int) -> str:
    return (f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON public.chunk_vectors"
            f" USING hnsw ((vec::vector({dim})) vector_cosine_ops)"
            f" WITH (m = {m}, ef_construction = {ef_construction}) WHERE {rows}")


def global_vector_index_name(dim: int) -> str:
    return f"chunk_vectors_hnsw_all_{int(dim)}"


def index_valid(conn: Any, name: str) -> bool | None:
    """Whether index `name` is ready to be read (False: a concurrent build is running or was killed midway;
    None: there is none)."""
    row = conn.execute("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
                       " WHERE c.relname = %s", (name,)).fetchone()
    return None if row is None else bool(row[0])


def build_index_once(conn: Any, name: str, sql: str) -> bool:
    """Build index `name` by `sql` (a CREATE INDEX CONCURRENTLY, run outside any transaction: a plain CREATE
    INDEX holds a lock on the shared `chunk_vectors` that stops every repository's vector writes for the whole
    build) unless a valid one exists; whether it was built. Two processes racing for one index take turns on
    an advisory lock of its name; an invalid index (a concurrent build killed midway) is dropped and built
    again."""
    lock = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    # Polled, not waited on: a session waiting on the lock would hold a snapshot that the other's concurrent
    # build waits for (a deadlock).
    while not conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()[0]:
        time.sleep(0.2)
    try:
        valid = index_valid(conn, name)
        if valid is False:
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS public.{name}")
        if not valid:
            conn.execute(sql)
        return not valid
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))


def _hnsw_index_name(repo_id: int, dim: int | str) -> str:
    return f"chunk_vectors_hnsw_r{int(repo_id)}_{dim}"


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40] or "repo"
