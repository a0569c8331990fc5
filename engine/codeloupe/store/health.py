"""Damage and a full disk, for every SQLite file codeloupe keeps (the workspace index, the vector cache).

Both files are derived data: a damaged one is moved aside (kept once, for a bug report) and rebuilt, never
repaired in place and never left to fail every command. A full disk is an error a user can act on.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from pathlib import Path

log = logging.getLogger("codeloupe.store")

# SQLite's primary result codes for a damaged file and for a full disk (or a write the OS refused).
_SQLITE_CORRUPT, _SQLITE_NOTADB, _SQLITE_FULL, _SQLITE_IOERR, _SQLITE_READONLY = 11, 26, 13, 10, 8
SIDE_FILES = ("", "-wal", "-shm")
DAMAGED_SUFFIX = ".damaged"


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    return code & 0xFF if code is not None else None


def _says(exc: BaseException, kind: type[sqlite3.Error], codes: tuple[int, ...], phrases: tuple[str, ...]) -> bool:
    """`exc` is a `kind` with one of these result codes (or, before Python 3.11, one of these phrases)."""
    if not isinstance(exc, kind):
        return False
    code = _primary_code(exc)
    if code is not None:
        return code in codes
    return any(phrase in str(exc) for phrase in phrases)


def is_damage(exc: BaseException) -> bool:
    """The error says the file's pages are bad (not a lock, a constraint or a full disk).

    A text cell that is not UTF-8 is damage too: codeloupe only ever writes Python strings, so garbage over a
    page that still parses surfaces as the sqlite3 module's decode error rather than as SQLite's own."""
    if isinstance(exc, sqlite3.OperationalError) and str(exc).startswith("Could not decode to UTF-8"):
        return True
    return _says(exc, sqlite3.DatabaseError, (_SQLITE_CORRUPT, _SQLITE_NOTADB), ("malformed", "not a database"))


def is_disk_full(exc: BaseException) -> bool:
    """The write failed for lack of space or because the OS refused it (a size limit, an I/O error)."""
    return _says(exc, sqlite3.OperationalError, (_SQLITE_FULL, _SQLITE_IOERR), ("disk is full", "disk I/O error"))


def not_regular_files(path: Path) -> list[str]:
    """The names of the database at `path` and its WAL and shared-memory files that are there but are no regular
    file (a link, a directory, a FIFO, a device): what SQLite reports as a full disk or as a file it cannot open."""
    odd = []
    for suffix in SIDE_FILES:
        side = Path(str(path) + suffix)
        try:
            mode = side.lstat().st_mode
        except OSError:  # absent (the WAL between sessions), or not to be looked at: nothing to say of it
            continue
        if not stat.S_ISREG(mode):
            odd.append(side.name)
    return odd


def is_read_only(exc: BaseException) -> bool:
    """The file or its directory cannot be written (permissions, a read-only mount)."""
    return _says(exc, sqlite3.OperationalError, (_SQLITE_READONLY,), ("readonly",))


def integrity_problem(conn: sqlite3.Connection) -> str:
    """"" when `PRAGMA quick_check` finds the file sound, else its first finding.

    quick_check reports most damage as rows rather than raising; a caller that only runs it and ignores
    what it returns keeps a broken file."""
    rows = conn.execute("PRAGMA quick_check").fetchall()
    if rows == [("ok",)]:
        return ""
    first = str(rows[0][0]) if rows else "no answer"
    return first.replace("*** in database main ***", "").strip().splitlines()[0]


def move_aside(path: Path) -> Path:
    """Rename a damaged database (and its WAL and shared-memory files) to `<name>.damaged`, replacing an
    older damaged copy, so it is out of the way but still there to look at; returns the new path."""
    target = Path(str(path) + DAMAGED_SUFFIX)
    for suffix in SIDE_FILES:
        source = Path(str(path) + suffix)
        try:
            os.replace(source, Path(str(target) + suffix))
        except FileNotFoundError:
            Path(str(target) + suffix).unlink(missing_ok=True)
        except OSError as exc:  # cannot rename (a read-only dir): removing is the only way to start over
            log.debug("cannot move %s aside (%s); removing it", source, exc)
            source.unlink(missing_ok=True)
    return target
