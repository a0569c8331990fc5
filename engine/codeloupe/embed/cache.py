"""The content-addressed vector cache: (model id, sha256 of the embedded text) -> int8 vector + scale.

One SQLite file (`settings.embed_cache_path`) shared by every workspace and checkout, so a second checkout
of a repository, a branch switch or a re-index after a chunker change embeds only text it has never seen.
WAL lets several editors read and write it at once. It is only a cache: a damaged file (found by the
open-time check or by a later statement) is moved aside and replaced by an empty one.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from pathlib import Path

import numpy as np

from codeloupe.store import quantize
from codeloupe.store.health import integrity_problem, is_damage, is_disk_full, is_read_only, move_aside

log = logging.getLogger("codeloupe.embed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    text_sha256 BLOB NOT NULL,
    scale REAL NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (model, text_sha256)
) WITHOUT ROWID;
"""
_LOOKUP_CHUNK = 500  # keys per SELECT, under SQLite's bound-parameter limit


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = self._open()
        except sqlite3.OperationalError as exc:
            if not (is_disk_full(exc) or is_read_only(exc)):
                raise
            # Opening a WAL file creates its shared-memory file; a full disk refuses. The vectors computed
            # now still reach the index: they are just not kept for other workspaces.
            log.warning("cannot open the embedding cache %s (%s); running without it", self.path, exc)
            self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            self._conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            self._conn = self._replace_damaged(exc)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            problem = integrity_problem(conn)
            if problem:
                raise sqlite3.DatabaseError(f"database disk image is malformed ({problem})")
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def _replace_damaged(self, exc: sqlite3.DatabaseError) -> sqlite3.Connection:
        moved = move_aside(self.path)
        log.warning("the embedding cache %s is damaged (%s); moved it to %s and started a new one",
                    self.path, exc, moved.name)
        return self._open()

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """Damage met in use (the lock is held): a new, empty cache in place of the damaged one."""
        try:
            self._conn.close()
        except sqlite3.Error:
            pass
        self._conn = self._replace_damaged(exc)

    def get(self, model: str, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """float32 vectors for the keys that are cached (dequantised from int8 + scale)."""
        with self._lock:
            try:
                return self._lookup(model, keys)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                self._recover(exc)
                return {}

    def _lookup(self, model: str, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        for start in range(0, len(keys), _LOOKUP_CHUNK):
            part = keys[start:start + _LOOKUP_CHUNK]
            rows = self._conn.execute(
                f"SELECT text_sha256, scale, vec FROM vectors WHERE model=? AND text_sha256 IN"
                f" ({','.join('?' * len(part))})", (model, *part),
            ).fetchall()
            for key, scale, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.int8).astype(np.float32) * np.float32(scale)
        return found

    def put(self, model: str, keys: list[bytes], vectors: np.ndarray) -> None:
        if not keys:
            return
        q, scales = quantize(vectors)
        rows = [(model, key, float(s), row.tobytes()) for key, s, row in zip(keys, scales, q)]
        with self._lock:
            try:
                self._insert(rows)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                self._recover(exc)
                self._insert(rows)

    def _insert(self, rows: list[tuple[str, bytes, float, bytes]]) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?,?,?,?)", rows)
            self._conn.execute("COMMIT")
        finally:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
