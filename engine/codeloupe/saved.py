"""Arrays derived from the index, saved beside it so the next process (a restarted editor) loads them.

A saved file is a cache, never a source of truth: it carries the index state it was built from (the store's
index id and content generation, plus a format version) and is used only for exactly that state. One that
is missing, stale, truncated or damaged in any way reads as None and the caller rebuilds from the store.
Only plain arrays are written and read (`allow_pickle=False`): nothing in the file can run code.

A shared index's repository is opened by many processes on many machines (`codeloupe serve` replicas), each of
which would otherwise build the same files again from the database (the first search of a 4,000-chunk
repository: about 2 s of CPU, mostly the graph and the file summaries). Its store keeps them in the database too
(`keep_files_elsewhere`): a file saved beside it is copied there, and one missing or stale here is taken from
there when the copy was saved for the same state, then read like any other (the same checks).
"""

from __future__ import annotations

import contextlib
import glob
import io
import logging
import mmap
import os
import struct
import tempfile
import time
import weakref
import zipfile
import zlib
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from codeloupe.regular_file import open_regular

log = logging.getLogger("codeloupe.saved")

_STAMP = "__stamp__"


class FileKeeper(Protocol):
    """Another place the files saved beside one index are kept, by the part of their name after the index's
    own (".graph.npz"). Both fail quietly: a copy that cannot be kept or fetched costs a rebuild, nothing else."""

    def fetch_saved(self, suffix: str, stamp: str) -> bytes | None: ...

    def keep_saved(self, suffix: str, stamp: str, data: bytes) -> None: ...


# Index path -> where the files saved beside it are kept too. Weak: a closed store's entry goes with it.
_keepers: weakref.WeakValueDictionary[Path, FileKeeper] = weakref.WeakValueDictionary()


def keep_files_elsewhere(index_path: Path, keeper: FileKeeper) -> None:
    """Keep the files saved beside `index_path` (its name, then "." and more) in `keeper` too."""
    _keepers[index_path] = keeper


def _keeper_of(path: Path) -> tuple[FileKeeper, str] | None:
    """The keeper of a file saved beside an index, and the file's suffix after the index's name."""
    name = path.name
    at = name.find(".")
    while at > 0:
        keeper = _keepers.get(path.with_name(name[:at]))
        if keeper is not None:
            return keeper, name[at:]
        at = name.find(".", at + 1)
    return None
# Where each array's bytes begin in a saved file is a multiple of this, so that an array read in place (mapped,
# not copied) is aligned for its type: a member starting on it keeps its array there too, since the .npy header
# is itself padded to a multiple of 64 bytes.
_ALIGN = 64
# A zip "extra field" of padding (an id no zip tool assigns, as Android's zipalign does); readers skip it.
_PADDING_FIELD = 0xC10E
_LOCAL_HEADER = 30  # a zip local file header's fixed part, before its name and extra fields
_ZIP64_LOCAL_EXTRA = 20  # the sizes' field zipfile adds to a local header written with force_zip64


def save_arrays(path: Path, stamp: str, arrays: dict[str, np.ndarray],
                *parts: Callable[[], dict[str, np.ndarray]], mapped: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Write `arrays` tagged with `stamp`, replacing `path` atomically (a reader never sees half a file).
    `parts` make more arrays, each called only when its turn to be written comes and let go once written: a
    large file's arrays are never all alive at once. The file is what `np.savez` writes (`np.load` reads it),
    each array's bytes starting at a multiple of 64 so that `load_arrays` can map them in place.

    Returns the arrays named in `mapped` (those written) as read-only views of the file just written, mapped
    before it took `path`'s place: the writer's own bytes (another writer replacing the file later cannot
    change them), so they are not read back to check them, as `load_arrays` checks a file another process
    wrote."""
    found: dict[str, np.ndarray] = {}

    def write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for part in (lambda: arrays, *parts, lambda: {_STAMP: np.array(stamp)}):
                for name, array in part().items():
                    member = _aligned_member(f"{name}.npy", archive.fp.tell())
                    with archive.open(member, "w", force_zip64=True) as fh:
                        np.lib.format.write_array(fh, np.asanyarray(array), allow_pickle=False)
        if mapped:
            with open(tmp, "rb") as fh, zipfile.ZipFile(fh) as archive:
                written = {name.removesuffix(".npy") for name in archive.namelist()}
                found.update(_mapped_members(fh, archive, [n for n in mapped if n in written], checked=False))

    _replace(path, write)
    kept = _keeper_of(path)
    if kept is not None:
        keeper, suffix = kept
        keeper.keep_saved(suffix, stamp, path.read_bytes())
    return found


def _aligned_member(name: str, offset: int) -> zipfile.ZipInfo:
    """A stored member whose local header, written at `offset`, is padded so that its data begins at a multiple
    of `_ALIGN`."""
    member = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    member.compress_type = zipfile.ZIP_STORED
    data_at = offset + _LOCAL_HEADER + len(name.encode("utf-8")) + 4 + _ZIP64_LOCAL_EXTRA
    pad = -data_at % _ALIGN
    member.extra = struct.pack("<HH", _PADDING_FIELD, pad) + bytes(pad)
    return member


def load_arrays(path: Path, stamp: str, mapped: Collection[str] = ()) -> dict[str, np.ndarray] | None:
    """Every array of `path` if it was saved for `stamp`; None when it is missing, stale or damaged.

    The arrays named in `mapped` are read-only views of the file mapped into memory rather than copies (where
    the file allows it: stored, aligned, a plain type): the process then holds only the pages it reads, which
    the system can drop and read again, where a copy holds every page for good. Their bytes are checked
    against the archive's checksums like the rest; `release_pages` lets go of the pages that check read."""
    found = _load_here(path, stamp, mapped)
    kept = _keeper_of(path) if found is None else None
    if kept is not None:
        keeper, suffix = kept
        data = keeper.fetch_saved(suffix, stamp)
        if data is not None:
            try:
                _write_whole(path, data)
            except OSError as exc:  # a full or read-only cache dir: rebuilt here instead
                log.info("could not write %s taken from the shared index: %s", path, exc)
                return None
            found = _load_here(path, stamp, mapped)
    return found


def saved_stamp(path: Path) -> str | None:
    """The stamp of the file at `path` (what it was saved for); None when it is missing or damaged. Only the stamp
    is read: the arrays are checked by whoever then loads them (`load_arrays` with this stamp)."""
    try:
        with open_regular(path) as fh, np.load(fh, allow_pickle=False) as saved:
            return str(saved[_STAMP]) if _STAMP in saved.files else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        log.info("ignoring the saved file %s (%s)", path, exc)
        return None


def saved_generation(path: Path, prefix: str) -> int | None:
    """The generation the file at `path` was saved for, where its stamp is `prefix` and then a generation number
    (a stamp of another format version or another index file has another prefix); None when it is missing,
    damaged or of another kind."""
    stamp = saved_stamp(path) or ""
    number = stamp[len(prefix):] if stamp.startswith(prefix) else ""
    # At most 18 digits: a generation is an int64, and int() refuses strings of thousands of digits.
    return int(number) if number.isascii() and number.isdigit() and len(number) <= 18 else None


def _load_here(path: Path, stamp: str, mapped: Collection[str]) -> dict[str, np.ndarray] | None:
    # Opened without blocking and only as a regular file: a FIFO in a saved file's place held every reader.
    try:
        with open_regular(path) as fh, np.load(fh, allow_pickle=False) as saved:
            if _STAMP not in saved.files or str(saved[_STAMP]) != stamp:
                return None
            names = [name for name in saved.files if name != _STAMP]
            in_place = _mapped_members(fh, saved.zip, [name for name in names if name in mapped])
            return {name: in_place[name] if name in in_place else saved[name] for name in names}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # truncated, bit-flipped, ...
        log.info("ignoring the saved file %s (%s); rebuilding it", path, exc)
        return None


def _write_whole(path: Path, data: bytes) -> None:
    """`data` as the file at `path`, replaced atomically."""
    _replace(path, lambda tmp: tmp.write_bytes(data))


# A writer's temporary file this old beside its target was left by a killed process (a large lexical index is
# written in seconds): the next writer of the same target removes it.
STALE_TMP_S = 3600


def _replace(path: Path, write: Callable[[Path], object]) -> None:
    """`write` a temporary file of this writer's own beside `path`, then put it in `path`'s place atomically.
    Writers of one file (two threads of a server, a server and a command) each have their own: one shared name
    let them write into the same file at once, mixing their bytes, and the later rename found nothing."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk must not keep the partial file's space
        raise
    now = time.time()
    for left in path.parent.glob(glob.escape(path.name) + ".*tmp"):
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to remove
            if now - left.stat().st_mtime > STALE_TMP_S:
                left.unlink()


def _mapped_members(fh: BinaryIO, archive: zipfile.ZipFile, names: list[str], *,
                    checked: bool = True) -> dict[str, np.ndarray]:
    """The arrays `names` of the archive in the file `fh` as views of one read-only mapping of it; a member
    that cannot be read in place is left out (the caller copies it). A member whose header does not fit the
    file, or (`checked`) whose bytes do not match its checksum, raises."""
    if not names:
        return {}
    whole = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    found = {}
    for name in names:
        info = archive.getinfo(f"{name}.npy")
        start = info.header_offset
        if not 0 <= start <= len(whole) - _LOCAL_HEADER or whole[start:start + 4] != b"PK\x03\x04":
            raise ValueError(f"{name}'s header is not where the archive says")
        if info.compress_type != zipfile.ZIP_STORED:
            continue
        name_length, extra_length = struct.unpack_from("<HH", whole, start + 26)
        member = start + _LOCAL_HEADER + name_length + extra_length
        end = member + info.file_size
        if end > len(whole):
            raise ValueError(f"{name} runs past the end of the file")
        header = io.BytesIO(whole[member:min(end, member + 65536)])
        version = np.lib.format.read_magic(header)
        if version not in ((1, 0), (2, 0)):
            continue
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(header)
        at = member + header.tell()
        count = int(np.prod(shape, dtype=np.int64))
        if fortran_order or dtype.hasobject or at % _ALIGN or not count:
            continue
        if at + count * dtype.itemsize != end:
            raise ValueError(f"{name}'s header does not fit its bytes")
        if checked and zlib.crc32(memoryview(whole)[member:end]) != info.CRC:
            raise zipfile.BadZipFile(f"{name} does not match its checksum")
        found[name] = np.frombuffer(whole, dtype, count, at).reshape(shape)
    return found


def release_pages(array: np.ndarray) -> None:
    """Let the system take back the pages read so far of the file `array` is a mapped view of (`load_arrays`),
    after a pass over the whole of it: they are read again, from the system's cache, only where they are
    used. Nothing for an array held in memory."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # what np.frombuffer keeps of the mapping
        base = base.obj
    if isinstance(base, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        base.madvise(mmap.MADV_DONTNEED)


def pack_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and the byte offset where each ends (an array needs no pickling)."""
    joined = "".join(strings)
    if joined.isascii():  # names, paths, words: a character a byte, encoded once (~4x faster than each apart)
        ends = np.cumsum(np.fromiter(map(len, strings), np.int64, len(strings)), dtype=np.int64)
        return np.frombuffer(joined.encode("ascii"), np.uint8), ends
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
