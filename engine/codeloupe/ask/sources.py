"""Workspace files read at splice time, checked against the index.

A file is read once per answer, decoded exactly as the indexer decoded it (so line numbers agree), and its
sha256 compared with the indexed hash. A changed file is flagged: its spans are re-located by content, never
shown under the stale line numbers, and its indexed symbols (whose lines may have moved) are not used.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from codeloupe.context import WorkspaceContext
from codeloupe.discover import decode_source
from codeloupe.errors import WorkspaceError
from codeloupe.index import content_hash
from codeloupe.store import FileRow, SymbolRow
from codeloupe.types import one_line, split_lines


@dataclass(frozen=True)
class SourceFile:
    path: str
    lines: list[str] | None  # None: the file cannot be shown (deleted, now binary, ...); see `problem`
    verified: bool  # the bytes hash to the indexed hash: indexed line numbers and symbols hold
    row: FileRow | None
    problem: str = ""  # why not, naming the file on one line (`one_line`): it stands in the answer as a note

    @property
    def changed(self) -> bool:
        """Indexed, but the bytes on disk are no longer the indexed bytes."""
        return self.row is not None and not self.verified


class Sources:
    def __init__(self, ws: WorkspaceContext) -> None:
        self._ws = ws
        self._lock = threading.Lock()
        self._rows: dict[str, FileRow] | None = None
        self._files: dict[str, SourceFile] = {}
        self._symbols: dict[str, list[SymbolRow]] = {}

    def _row(self, path: str) -> FileRow | None:
        if self._rows is None:
            self._rows = self._ws.store.file_rows()
        return self._rows.get(path)

    def get(self, path: str) -> SourceFile:
        with self._lock:
            if path not in self._files:
                self._files[path] = self._read(path)
            return self._files[path]

    def _read(self, path: str) -> SourceFile:
        row = self._row(path)
        try:
            rel = self._ws.relative(path)
            raw = self._ws.read_bytes(rel)
        except (WorkspaceError, OSError) as exc:
            return SourceFile(path, None, False, row, one_line(f"cannot read {path}: {exc}"))
        decoded = decode_source(raw, self._ws.settings, rel)
        if decoded.text is None:
            return SourceFile(path, None, False, row, f"{one_line(path)} is no longer text ({decoded.skip_reason})")
        verified = row is not None and row.hash == content_hash(raw)
        return SourceFile(path, split_lines(decoded.text), verified, row)

    def symbols(self, path: str) -> list[SymbolRow]:
        """The indexed symbols of an unchanged file (none for a changed one: their lines may be stale)."""
        source = self.get(path)
        if not source.verified or source.row is None:
            return []
        with self._lock:
            if path not in self._symbols:
                self._symbols[path] = self._ws.store.symbols_of_file(source.row.id)
            return self._symbols[path]
