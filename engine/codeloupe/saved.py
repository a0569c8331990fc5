"""Arrays derived from the index, saved beside it so the next process (a restarted editor) loads them.

A saved file is a cache, never a source of truth: it carries the index state it was built from (the store's
index id and content generation, plus a format version) and is used only for exactly that state. One that
is missing, stale, truncated or damaged in any way reads as None and the caller rebuilds from the store.
Only plain arrays are written and read (`allow_pickle=False`): nothing in the file can run code.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger("codeloupe.saved")

_STAMP = "__stamp__"


def save_arrays(path: Path, stamp: str, arrays: dict[str, np.ndarray],
                *parts: Callable[[], dict[str, np.ndarray]]) -> None:
    """Write `arrays` tagged with `stamp`, replacing `path` atomically (a reader never sees half a file).
    `parts` make more arrays, each called only when its turn to be written comes and let go once written: a
    large file's arrays are never all alive at once. The file is what `np.savez` writes (`np.load` reads it)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for part in (lambda: arrays, *parts, lambda: {_STAMP: np.array(stamp)}):
                for name, array in part().items():
                    with archive.open(f"{name}.npy", "w", force_zip64=True) as fh:
                        np.lib.format.write_array(fh, np.asanyarray(array), allow_pickle=False)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk must not keep the partial file's space
        raise


def load_arrays(path: Path, stamp: str) -> dict[str, np.ndarray] | None:
    """Every array of `path` if it was saved for `stamp`; None when it is missing, stale or damaged."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            if _STAMP not in saved.files or str(saved[_STAMP]) != stamp:
                return None
            return {name: saved[name] for name in saved.files if name != _STAMP}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # truncated, bit-flipped, ...
        log.info("ignoring the saved file %s (%s); rebuilding it", path, exc)
        return None


def pack_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and the byte offset where each ends (an array needs no pickling)."""
    return pack_bytes([text.encode("utf-8", "surrogatepass") for text in strings])


def pack_bytes(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings as one byte array and the offset where each ends."""
    ends = np.cumsum(np.fromiter(map(len, blobs), np.int64, len(blobs)), dtype=np.int64)
    return np.frombuffer(b"".join(blobs), np.uint8), ends


def unpack_bytes(data: np.ndarray, ends: np.ndarray) -> list[bytes]:
    """The inverse of `pack_bytes`; a ValueError when the offsets do not fit the bytes."""
    bounds = _bounds(data, ends)
    raw = data.tobytes()
    return [raw[a:b] for a, b in zip(bounds, bounds[1:])]


def unpack_strings(data: np.ndarray, ends: np.ndarray) -> list[str]:
    """The inverse of `pack_strings`; a ValueError when the offsets do not fit the bytes."""
    bounds = _bounds(data, ends)
    if not bool(np.any(data >= 0x80)):  # ASCII (names, paths): decode once, then slice, which is much faster
        text = data.tobytes().decode("ascii")
        return [text[a:b] for a, b in zip(bounds, bounds[1:])]
    raw = data.tobytes()
    return [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(bounds, bounds[1:])]


def _bounds(data: np.ndarray, ends: np.ndarray) -> list[int]:
    """[0, end of string 0, end of string 1, ...], checked against the bytes they index."""
    if data.dtype != np.uint8 or data.ndim != 1 or ends.ndim != 1 or ends.dtype.kind not in "iu":
        raise ValueError("saved strings are not bytes and offsets")
    if len(ends) and (int(ends[-1]) != len(data) or int(ends[0]) < 0 or bool(np.any(np.diff(ends) < 0))):
        raise ValueError("string offsets do not match their bytes")
    return [0, *ends.tolist()]
