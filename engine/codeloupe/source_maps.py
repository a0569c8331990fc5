"""Where a line of compiled code came from, read from the source map beside it (source map v3).

A stack trace from compiled JavaScript (Node running a package's `dist/` or `build/`) names lines of files that
discovery leaves out: compiled copies of indexed sources (`discover.COMPILED`) or whole build folders (`dist/`).
The map beside such a file (`X.js.map`) says which source line each compiled line came from, so a bug report's
frame can still pin the file, and the line, a developer would fix.

The workspace is untrusted input: a map is read only inside the root, never through a link, and only up to
`MAP_MAX_BYTES`; a map that does not parse, whose mappings are not base64 VLQ or are longer than
`MAPPINGS_MAX_CHARS`, maps nothing.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from codeloupe.regular_file import read_head

SOURCE_MAP_SUFFIX = ".map"
MAP_MAX_BYTES = 16 * 1024 * 1024  # a development bundle's map with its sources' text is a few MB
# Decoding is pure Python on the query path: up to ~0.5 s a million characters of crafted mappings (2M of `;`:
# 1 s, 45 MB; 16 MB of them took 11 s and 380 MB before this bound). A development bundle's mappings are ~0.2 MB.
MAPPINGS_MAX_CHARS = 2 * 1024 * 1024
MAPS_KEPT = 4  # decoded maps a workspace keeps: a trace's frames mostly fall in one or two bundles
# Base64 digits to their values, and the two separators: a segment ends at `,`, a compiled line at `;`.
_COMMA, _SEMICOLON = 64, 65
_CODES = {**{c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")},
          ",": _COMMA, ";": _SEMICOLON}
_VLQ_SHIFT_MAX = 30  # a value past 2^30 is no line or column of a real file


@dataclass(frozen=True)
class SourceMap:
    """A decoded map: its sources as written (with `sourceRoot`), and its segments in three flat arrays (0-based
    compiled column, source index, 0-based source line), compiled line `n`'s (1-based) being those from
    `starts[n - 1]` to `starts[n]`. Machine integers, not a tuple a segment: a 16 MB map's segments were ~700 MB
    as tuples."""

    sources: tuple[str, ...]
    starts: array[int]
    columns: array[int]
    source_indexes: array[int]
    source_lines: array[int]

    def original(self, line: int, column: int = 0) -> tuple[str, int] | None:
        """(the source as the map names it, its 1-based line) of compiled `line` (1-based) at `column` (1-based;
        0: unknown, the line's first mapped segment)."""
        if not 1 <= line < len(self.starts):
            return None
        segments = range(self.starts[line - 1], self.starts[line])
        if not segments:
            return None
        columns = self.columns
        before = [i for i in segments if columns[i] < column]  # at or before the 1-based column
        chosen = max(before, key=columns.__getitem__) if before else min(segments, key=columns.__getitem__)
        source, source_line = self.source_indexes[chosen], self.source_lines[chosen]
        if not (0 <= source < len(self.sources) and self.sources[source] and source_line >= 0):
            return None  # a source the map lacks or does not name (`null`), or a line before its first
        return self.sources[source], source_line + 1


def decode(text: bytes) -> SourceMap | None:
    """The map in `text`, or None when it is not one (bad JSON, a nesting bomb, mappings that are not VLQ) or its
    mappings are longer than `MAPPINGS_MAX_CHARS`."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    sources, root, mappings = data.get("sources"), data.get("sourceRoot") or "", data.get("mappings")
    if not isinstance(sources, list) or not isinstance(root, str) or not isinstance(mappings, str) \
            or len(mappings) > MAPPINGS_MAX_CHARS:
        return None
    names = tuple(root.rstrip("/") + "/" + s if root and isinstance(s, str) else s if isinstance(s, str) else ""
                  for s in sources)
    starts, columns, source_indexes, source_lines = array("q", [0]), array("q"), array("q"), array("q")
    fields: list[int] = []  # the values of the segment being read
    column = source = source_line = value = shift = 0  # running values: each segment adds to the last one's
    for char in mappings + ";":
        code = _CODES.get(char)
        if code is None:
            return None
        if code < _COMMA:  # a base64 digit: 5 bits of a value, and whether more follow
            value += (code & 31) << shift
            if code & 32:
                shift += 5
                if shift > _VLQ_SHIFT_MAX:
                    return None
                continue
            fields.append(-(value >> 1) if value & 1 else value >> 1)
            value = shift = 0
            continue
        if shift or len(fields) not in (0, 1, 4, 5):  # a value cut off, or a segment of 2 or 3 values
            return None
        if fields:
            column += fields[0]
            if len(fields) >= 4:
                source += fields[1]
                source_line += fields[2]
                columns.append(column)
                source_indexes.append(source)
                source_lines.append(source_line)
            fields.clear()
        if code == _SEMICOLON:
            column = 0  # the compiled column starts again on every line
            starts.append(len(columns))
    return SourceMap(names, starts, columns, source_indexes, source_lines)


class SourceMaps:
    """A workspace's maps read when a frame asks, the last `MAPS_KEPT` kept decoded (keyed by the file's identity,
    size, mtime and ctime, so an edited or replaced map is read again: npm writes every file of a package with one
    fixed mtime, so an upgraded package's map can keep its size and mtime)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, int, int, int, int, int], SourceMap | None] = OrderedDict()

    def compiled_file(self, frame_path: str) -> str | None:
        """The workspace path (POSIX, from the root) of the compiled file a frame names, found by the longest
        suffix of `frame_path` that is a file in the workspace with a map beside it (frames come from other
        machines); None when there is none."""
        # No part with a colon: a drive (`C:`) or a scheme (`node:`, `file:`) names no folder of the workspace, and
        # on Windows a drive joined to the root would leave it.
        parts = [p for p in frame_path.replace("\\", "/").split("/") if p not in ("", ".", "..") and ":" not in p]
        for first in range(len(parts)):
            rel = "/".join(parts[first:])
            if _plain_file(self._root, rel) and _plain_file(self._root, rel + SOURCE_MAP_SUFFIX):
                return rel
        return None

    def original(self, compiled: str, line: int, column: int = 0) -> tuple[str, int] | None:
        """(the source's path, normalised from the map's folder, POSIX; its 1-based line) of `line` of the
        workspace file `compiled`, or None when its map does not say."""
        source_map = self._map(compiled + SOURCE_MAP_SUFFIX)
        found = source_map.original(line, column) if source_map is not None else None
        if found is None:
            return None
        source, source_line = found
        return os.path.normpath(os.path.join(os.path.dirname(compiled), source)).replace(os.sep, "/"), source_line

    def _map(self, rel: str) -> SourceMap | None:
        path = self._root / rel
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return None
        key = (rel, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        try:
            raw = read_head(path, MAP_MAX_BYTES, follow_links=False)
        except OSError:
            raw = b""
        decoded = decode(raw) if raw and len(raw) <= MAP_MAX_BYTES else None
        with self._lock:
            self._kept[key] = decoded
            while len(self._kept) > MAPS_KEPT:
                self._kept.popitem(last=False)
        return decoded


def _plain_file(root: Path, rel: str) -> bool:
    """Whether `rel` is a regular file under `root` reached through no link (a frame's path is the user's text,
    the folders on it the workspace's)."""
    path, st = root, None
    for part in rel.split("/"):
        path = path / part
        try:
            st = os.lstat(path)
        except (OSError, ValueError):  # absent, unreadable, or a name with a NUL
            return False
        if stat.S_ISLNK(st.st_mode):
            return False
    return st is not None and stat.S_ISREG(st.st_mode)
