"""Flows in the workspace index: answered questions kept with the files they cite and two vectors.

A flow is derived data like the graph: it names its cited files by path with the SHA-256 they had when the
answer was spliced, so a re-index can tell which flows no longer describe the code (`mark_stale`). A stale
flow keeps its question (what `flows --refresh` re-asks) and is never served or attached.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from codeloupe.store import Store

# Kept per workspace, newest first: a lookup scores every live flow's two vectors on each ask.
MAX_FLOWS = 2000

FLOWS_SCHEMA = """
CREATE TABLE IF NOT EXISTS flows (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a refresh deletes the stale id it re-asked
    question TEXT NOT NULL,
    mode TEXT NOT NULL,
    model TEXT NOT NULL,
    question_vec BLOB NOT NULL,
    semantic_vec BLOB NOT NULL,
    prose TEXT NOT NULL,
    parts TEXT NOT NULL,
    created REAL NOT NULL,
    served INTEGER NOT NULL DEFAULT 0,
    stale INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS flow_files (
    flow_id INTEGER NOT NULL REFERENCES flows(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (flow_id, path)
);
CREATE INDEX IF NOT EXISTS flow_files_path ON flow_files(path);
"""


@dataclass
class FlowRow:
    id: int
    question: str
    mode: str
    model: str
    question_vec: np.ndarray  # float32 [d], L2-normalised
    semantic_vec: np.ndarray
    prose: str  # the model's words only: no code, no citations, no headings
    parts: list[dict[str, Any]]  # the rendered walkthrough (see `codeloupe.ask.flows`)
    created: float
    served: int
    stale: bool
    files: dict[str, str]  # cited path -> SHA-256 of its bytes when the answer was spliced


def _vec(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32).copy()


def flow_rows(store: Store, *, mode: str | None = None, model: str | None = None,
              live_only: bool = False, with_parts: bool = True) -> list[FlowRow]:
    """Flows, newest first; filtered by mode, embedding model and staleness when asked. Without `with_parts`
    their walkthroughs (the bulk: spliced code) stay in the index (`flow_parts` reads one)."""
    where, params = [], []
    if mode is not None:
        where.append("mode = ?")
        params.append(mode)
    if model is not None:
        where.append("model = ?")
        params.append(model)
    if live_only:
        where.append("stale = 0")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    parts = "parts" if with_parts else "'[]'"
    rows = store.query(
        f"SELECT id, question, mode, model, question_vec, semantic_vec, prose, {parts}, created, served, stale"
        f" FROM flows{clause} ORDER BY created DESC, id DESC", params)
    files: dict[int, dict[str, str]] = {}
    for flow_id, path, digest in store.query("SELECT flow_id, path, hash FROM flow_files ORDER BY path"):
        files.setdefault(flow_id, {})[path] = digest
    return [FlowRow(r[0], r[1], r[2], r[3], _vec(r[4]), _vec(r[5]), r[6], json.loads(r[7]), r[8], r[9],
                    bool(r[10]), files.get(r[0], {})) for r in rows]


def put_flow(store: Store, *, question: str, mode: str, model: str, question_vec: np.ndarray,
             semantic_vec: np.ndarray, prose: str, parts: list[dict[str, Any]], files: dict[str, str],
             replaces: Iterable[int] = ()) -> int:
    """Insert a flow (and delete the ones it replaces) in one transaction; returns its id."""
    with store.transaction() as conn:
        conn.executemany("DELETE FROM flows WHERE id = ?", [(i,) for i in replaces])  # flow_files cascade
        # RETURNING rather than lastrowid: store.postgres runs this module's SQL too.
        flow_id = int(conn.execute(
            "INSERT INTO flows (question, mode, model, question_vec, semantic_vec, prose, parts, created)"
            " VALUES (?,?,?,?,?,?,?,?) RETURNING id",
            (question, mode, model, np.asarray(question_vec, np.float32).tobytes(),
             np.asarray(semantic_vec, np.float32).tobytes(), prose, json.dumps(parts), time.time())).fetchone()[0])
        conn.executemany("INSERT INTO flow_files (flow_id, path, hash) VALUES (?,?,?)",
                         [(flow_id, path, digest) for path, digest in sorted(files.items())])
        conn.execute("DELETE FROM flows WHERE id NOT IN (SELECT id FROM flows ORDER BY created DESC, id DESC LIMIT ?)",
                     (MAX_FLOWS,))
    return flow_id


def flow_parts(store: Store, flow_id: int) -> list[dict[str, Any]]:
    rows = store.query("SELECT parts FROM flows WHERE id = ?", (flow_id,))
    return json.loads(rows[0][0]) if rows else []


def count_served(store: Store, flow_id: int) -> None:
    with store.transaction() as conn:
        conn.execute("UPDATE flows SET served = served + 1 WHERE id = ?", (flow_id,))


def mark_stale(store: Store) -> int:
    """Mark stale every live flow citing a file whose indexed hash differs from the cited one, or that is no
    longer indexed; returns how many. A read first, so an index run that changed nothing writes nothing."""
    doomed = [r[0] for r in store.query(
        "SELECT DISTINCT ff.flow_id FROM flow_files ff JOIN flows fl ON fl.id = ff.flow_id"
        " LEFT JOIN files f ON f.path = ff.path WHERE fl.stale = 0 AND (f.hash IS NULL OR f.hash != ff.hash)")]
    if doomed:
        with store.transaction() as conn:
            conn.executemany("UPDATE flows SET stale = 1 WHERE id = ?", [(i,) for i in doomed])
    return len(doomed)


def delete_flows(store: Store, ids: Iterable[int]) -> None:
    with store.transaction() as conn:
        conn.executemany("DELETE FROM flows WHERE id = ?", [(i,) for i in ids])
