"""Graph edges in the workspace index (derived data: re-extracted without re-embedding)."""

from __future__ import annotations

EDGES_SCHEMA = """
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
"""
