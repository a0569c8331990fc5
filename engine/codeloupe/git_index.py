"""The paths a git repository tracks, read from its index file (`.git/index`) without running git.

git applies `.gitignore` only to untracked files: a file that was committed stays part of the project though a
pattern matches it (a Go repository's `cobra` line meant for the built binary also matches its `cobra/`
source directory). Discovery asks this module which files are tracked so that it can follow the same rule.

The index is read, never written, and git is not run: a repository's own configuration can make git run
commands (`core.fsmonitor`), and a workspace is untrusted. The file is parsed defensively: anything that is
not a well-formed index of a known version (2, 3 or 4; SHA-1 or SHA-256 object names), or is larger than
`INDEX_MAX_BYTES`, reads as "tracks nothing known", which leaves the ignore rules as they are.
"""

from __future__ import annotations

import logging
import os
import stat
import struct
import threading
from pathlib import Path

from codeloupe.git_repo import git_dir_of
from codeloupe.regular_file import read_head

log = logging.getLogger("codeloupe.git_index")

# A 40,000-file repository's index is about 4 MB; a larger index than this (half a million files and more) is not
# read, and .gitignore then applies to every file there, as it did before tracked files were known: its names
# alone would hold several hundred MB in memory.
INDEX_MAX_BYTES = 64 * 1024 * 1024
# The longest path a name may be (Linux's PATH_MAX): a version 4 index adds each name to the one before it, so
# 60,000 entries of one byte each made names of up to 60,000 bytes (2 GB for a 4 MB file).
NAME_MAX_BYTES = 4096
_HEADER = struct.Struct(">4sII")
_STAT_BYTES = 40  # ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each)
_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF


# The last few indexes read, by path: the editor asks about one saved or created file at a time, and each
# question that meets a .gitignore rule needs its repository's index (70 ms to parse at 40,000 files).
_READ_HELD = 8
_read: dict[str, tuple[tuple[int, int, int, int], frozenset[str]]] = {}
_read_lock = threading.Lock()


class IndexFormatError(ValueError):
    """The bytes are not an index this reader understands."""


def index_file(repo_dir: Path) -> Path | None:
    """The index of the repository whose work tree is `repo_dir`: `.git/index`, or for a linked work tree or a
    submodule (where `.git` is a file saying `gitdir: PATH`) PATH's `index`. None when there is none."""
    git_dir = git_dir_of(repo_dir / ".git")
    return None if git_dir is None else git_dir / "index"


def tracked_paths(repo_dir: Path) -> frozenset[str]:
    """Every path (POSIX, relative to `repo_dir`) the repository at `repo_dir` tracks; empty when it is not a
    git work tree or its index cannot be read."""
    path = index_file(repo_dir)
    if path is None:
        return frozenset()
    try:
        st = os.stat(path)  # a link to a regular file is fine: linked work trees' git dirs live elsewhere
        if not stat.S_ISREG(st.st_mode) or st.st_size > INDEX_MAX_BYTES:
            return frozenset()
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with _read_lock:
            cached = _read.get(str(path))
        if cached is not None and cached[0] == identity:
            return cached[1]
        data = read_head(path, INDEX_MAX_BYTES)  # swapped for a FIFO since the stat: refused, not waited on
    except OSError:
        return frozenset()
    if len(data) > INDEX_MAX_BYTES:
        return frozenset()
    try:
        paths = parse_index(data)
    except IndexFormatError as exc:
        log.warning("%s: not read as a git index (%s); .gitignore applies to every file there", path, exc)
        paths = frozenset()
    # git replaces the index by renaming a new file over it, so a changed index has a new identity.
    with _read_lock:
        _read.pop(str(path), None)
        _read[str(path)] = (identity, paths)
        while len(_read) > _READ_HELD:
            _read.pop(next(iter(_read)))
    return paths


def parse_index(data: bytes) -> frozenset[str]:
    """The paths listed in the bytes of a git index file. Raises `IndexFormatError`."""
    if len(data) < _HEADER.size:
        raise IndexFormatError("too short")
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise IndexFormatError(f"signature {signature!r}, version {version}")
    errors = []
    for hash_bytes in (20, 32):  # SHA-1 repositories, then SHA-256 ones (the header does not say which)
        try:
            return _entries(data, version, count, hash_bytes)
        except IndexFormatError as exc:
            errors.append(str(exc))
    raise IndexFormatError("; ".join(errors))


def _entries(data: bytes, version: int, count: int, hash_bytes: int) -> frozenset[str]:
    fixed = _STAT_BYTES + hash_bytes + 2
    # Each entry takes at least its fixed part and a NUL; a count that cannot fit is a damaged header, refused
    # before any loop runs over it.
    if count * (fixed + 1) > len(data) - _HEADER.size:
        raise IndexFormatError(f"{count} entries cannot fit in {len(data)} bytes")
    names: set[str] = set()
    pos = _HEADER.size
    previous = b""
    total = 0  # bytes of every name: a version 4 index's names are compressed, and could expand quadratically
    for _ in range(count):
        if pos + fixed > len(data):
            raise IndexFormatError("an entry runs past the end")
        start = pos
        (flags,) = struct.unpack_from(">H", data, pos + _STAT_BYTES + hash_bytes)
        pos += fixed
        if flags & _EXTENDED:
            if version < 3:
                raise IndexFormatError("extended flags in a version 2 index")
            pos += 2
        if version == 4:
            strip, pos = _varint(data, pos)
            end = data.find(b"\0", pos)
            if end < 0 or strip > len(previous):
                raise IndexFormatError("a compressed name does not fit")
            name = previous[:len(previous) - strip] + data[pos:end]
            pos = end + 1
        else:
            end = data.find(b"\0", pos)
            if end < 0:
                raise IndexFormatError("a name has no end")
            name = data[pos:end]
            length = flags & _NAME_MASK
            if length != _NAME_MASK and length != len(name):
                raise IndexFormatError("a name's length disagrees with its flags")
            # Entries are padded with 1-8 NULs to a multiple of 8 bytes.
            pos = start + ((end - start) // 8 + 1) * 8
        if not name or name.startswith(b"/") or b"\0" in name:
            raise IndexFormatError("an empty or absolute name")
        total += len(name)
        if len(name) > NAME_MAX_BYTES or total > INDEX_MAX_BYTES:
            raise IndexFormatError("names longer than any path (each grows on the one before it)")
        previous = name
        try:
            names.add(name.decode("utf-8"))
        except UnicodeDecodeError:
            continue  # discovery skips such names anyway
    if pos > len(data):
        raise IndexFormatError("the last entry runs past the end")
    return frozenset(names)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset encoding (varint.c): each continuation adds one before shifting."""
    if pos >= len(data):
        raise IndexFormatError("a name prefix runs past the end")
    byte = data[pos]
    value = byte & 0x7F
    pos += 1
    while byte & 0x80:
        if pos >= len(data) or value > 1 << 40:
            raise IndexFormatError("a name prefix runs past the end")
        byte = data[pos]
        value = ((value + 1) << 7) | (byte & 0x7F)
        pos += 1
    return value, pos
