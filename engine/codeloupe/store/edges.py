"""Graph data in the workspace index: per-file facts and the edges resolved from them.

Both are derived data. A file's rows go when the file's row goes (re-indexing a file replaces its row, so its
facts and outgoing edges vanish with the old content); an extractor upgrade re-extracts facts for unchanged
files without touching chunks or vectors. Edges name their target by path because a target's row id changes
whenever the target is re-indexed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from codeloupe.store import Store, VectorMatrix

EDGES_SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_facts (
    file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    facts TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS edges (
    id INTEGER PRIMARY KEY,
    src_file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target_path TEXT NOT NULL DEFAULT '',
    raw TEXT NOT NULL,
    symbols TEXT NOT NULL DEFAULT '[]',
    line INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS edges_src ON edges(src_file_id);
CREATE INDEX IF NOT EXISTS edges_target ON edges(target_path);
"""

# (kind, target path, raw specifier, carrier symbols, line)
EdgeTuple = tuple[str, str, str, tuple[str, ...], int]


def files_needing_facts(store: Store, version: int, paths: Sequence[str] | None = None
                        ) -> list[tuple[int, str, str]]:
    """(file id, path, language) of code files whose facts are missing or from another extractor version;
    with `paths`, those files whatever their state."""
    if paths is not None:
        if not paths:
            return []
        marks = ",".join("?" * len(paths))
        return store.query(
            f"SELECT id, CAST(path AS TEXT), CAST(language AS TEXT) FROM files WHERE is_doc = 0 AND path IN ({marks})"
            " ORDER BY path",
            list(paths))
    return store.query(
        "SELECT f.id, CAST(f.path AS TEXT), CAST(f.language AS TEXT) FROM files f"
        " LEFT JOIN graph_facts g ON g.file_id = f.id"
        " WHERE f.is_doc = 0 AND (g.file_id IS NULL OR g.version != ?) ORDER BY f.path", (version,))


def file_text(store: Store, file_id: int) -> str:
    """A file's text as indexed: its chunks are a line partition, so they concatenate to the whole file."""
    return "".join(r[0] for r in store.query("SELECT text FROM chunks WHERE file_id=? ORDER BY ord", (file_id,)))


def indexed_path_kind(store: Store, rel: str) -> str:
    """"file" when an indexed file's path is `rel`, "folder" when one lies under `rel`, else "": what a
    repository read from its index (no folder of its own) holds there."""
    under = rel + "/"
    rows = store.query("SELECT CAST(path AS TEXT) FROM files WHERE path = ? OR substr(path, 1, length(?)) = ?"
                       " LIMIT 1", (rel, under, under))
    return "" if not rows else "file" if rows[0][0] == rel else "folder"


def put_facts(store: Store, version: int, rows: Iterable[tuple[int, str]]) -> None:
    """Store (file id, facts JSON) rows; a file re-indexed meanwhile (its id is gone) is skipped."""
    with store.transaction() as conn:
        conn.executemany(  # an upsert both SQLite and PostgreSQL speak (store.postgres runs this module too)
            "INSERT INTO graph_facts (file_id, version, facts)"
            " SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM files WHERE id = ?)"
            " ON CONFLICT (file_id) DO UPDATE SET version = excluded.version, facts = excluded.facts",
            [(file_id, version, facts, file_id) for file_id, facts in rows],
        )


def iter_facts(store: Store, page: int = 2000) -> Iterator[tuple[str, int, str]]:
    """(path, file id, facts JSON) of every file with facts, in path order, read a page at a time (every
    file's facts at once is a large transient: 133 MB of JSON at 40K files)."""
    last = ""
    while rows := store.query(
            "SELECT CAST(f.path AS TEXT), f.id, CAST(g.facts AS TEXT) FROM graph_facts g JOIN files f ON f.id = g.file_id"
            " WHERE f.path > ? ORDER BY f.path LIMIT ?", (last, page)):
        yield from rows
        last = rows[-1][0]
        if len(rows) < page:
            return


def code_file_count(store: Store) -> int:
    return store.query("SELECT count(*) FROM files WHERE is_doc = 0")[0][0]


def node_files(store: Store) -> list[tuple[int, str, str]]:
    """(file id, path, language) of every code file: the nodes of the graph."""
    return store.query("SELECT id, CAST(path AS TEXT), CAST(language AS TEXT) FROM files WHERE is_doc = 0 ORDER BY path")


def iter_edges(store: Store, page: int = 50_000) -> Iterator[tuple[int, str, str, str, tuple[str, ...], int]]:
    """(source file id, kind, target path, raw specifier, carrier symbols, line) of every edge, read a page at
    a time."""
    last = -1
    carriers = _Carriers()
    while rows := store.query("SELECT id, src_file_id, kind, target_path, raw, symbols, line FROM edges"
                              " WHERE id > ? ORDER BY id LIMIT ?", (last, page)):
        yield from ((src, kind, target, raw, carriers.read(symbols), line)
                    for _, src, kind, target, raw, symbols, line in rows)
        last = rows[-1][0]
        if len(rows) < page:
            return


def replace_edges(store: Store, by_file: dict[int, list[EdgeTuple]]) -> None:
    """Replace the outgoing edges of the given files, all in one transaction."""
    if not by_file:
        return
    with store.transaction() as conn:
        for file_id in by_file:
            conn.execute("DELETE FROM edges WHERE src_file_id=?", (file_id,))
        # A file re-indexed meanwhile (its id is gone) gets none: each row is checked against its own file's
        # row, not against a read of every file id (40K at monorepo scale, on a save's path).
        conn.executemany(
            "INSERT INTO edges (src_file_id, kind, target_path, raw, symbols, line)"
            " SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM files WHERE id = ?)",
            [(file_id, kind, target, raw, json.dumps(list(symbols)), line, file_id)
             for file_id, edges in by_file.items() for kind, target, raw, symbols, line in edges],
        )


def chunk_spans(store: Store, file_id: int) -> list[tuple[int, int, str, str]]:
    """(start line, end line, kind, name) of a file's chunks in order."""
    return store.query("SELECT start_line, end_line, kind, name FROM chunks WHERE file_id=? ORDER BY ord",
                       (file_id,))


def skeleton_model(store: Store) -> str | None:
    """The model of the stored skeleton vectors (None when there are none)."""
    models = [r[0] for r in store.query("SELECT DISTINCT model FROM skeleton_vectors ORDER BY model")]
    return models[0] if len(models) == 1 else None


def skeleton_matrix(store: Store, keep: Callable[[int], bool] | None = None) -> tuple[list[int], np.ndarray]:
    """(file ids, L2-normalised float32 skeleton vectors) of the files `keep` accepts (default: all); empty
    when no skeleton has been embedded. Only the kept rows are ever converted to float32, in place.

    Vectors of two models are never stored together (`Store.drop_vectors_not_of`), so whichever model is
    present is the current one.
    """
    model = skeleton_model(store)
    if model is None:
        return [], np.zeros((0, 0), np.float32)
    matrix: VectorMatrix = store.vector_matrix("skeleton", model)
    ids, q, scales = matrix.ids, matrix.q, matrix.scales
    if keep is not None:
        rows = np.array([k for k, file_id in enumerate(ids.tolist()) if keep(file_id)], dtype=np.int64)
        ids, q, scales = ids[rows], q[rows], scales[rows]
    vectors = q.astype(np.float32)
    vectors *= scales[:, None]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)  # a zero row stays zero
    return ids.tolist(), vectors


def _paths_in(store: Store, sql: str, paths: Iterable[str]) -> list[tuple]:
    """Rows of `sql` (whose one `{marks}` is a list of paths), in batches under SQLite's variable limit."""
    paths = list(paths)
    out: list[tuple] = []
    for start in range(0, len(paths), 500):
        part = paths[start:start + 500]
        out.extend(store.query(sql.format(marks=",".join("?" * len(part))), part))
    return out


def facts_of(store: Store, paths: Iterable[str]) -> dict[str, str]:
    """path -> facts JSON of the given files that have facts."""
    return dict(_paths_in(store, "SELECT CAST(f.path AS TEXT), CAST(g.facts AS TEXT) FROM graph_facts g JOIN files f ON f.id = g.file_id"
                                 " WHERE f.path IN ({marks})", paths))


def sources_of_edges_to(store: Store, targets: Iterable[str]) -> set[str]:
    """Paths of the files with an edge to any of `targets`."""
    return {r[0] for r in _paths_in(store, "SELECT DISTINCT f.path FROM edges e JOIN files f ON f.id = e.src_file_id"
                                           " WHERE e.target_path IN ({marks})", targets)}


def edges_of(store: Store, paths: Iterable[str]) -> dict[int, list[EdgeTuple]]:
    """file id -> outgoing edges (in stored order) of the given files."""
    out: dict[int, list[EdgeTuple]] = {}
    carriers = _Carriers()
    for file_id, kind, target, raw, symbols, line in _paths_in(
            store, "SELECT f.id, e.kind, e.target_path, e.raw, e.symbols, e.line FROM edges e"
                   " JOIN files f ON f.id = e.src_file_id WHERE f.path IN ({marks}) ORDER BY e.id", paths):
        out.setdefault(file_id, []).append((kind, target, raw, carriers.read(symbols), line))
    return out


class _Carriers:
    """An edge's carrier symbols decoded from their stored JSON, each distinct text once: edges repeat a few
    thousand lists (at 40K files, 437K edges decoded 472K times were 6.8 s of a first graph's profile)."""

    def __init__(self) -> None:
        self._read: dict[str, tuple[str, ...]] = {}

    def read(self, text: str) -> tuple[str, ...]:
        symbols = self._read.get(text)
        if symbols is None:
            symbols = self._read[text] = tuple(json.loads(text))
        return symbols
