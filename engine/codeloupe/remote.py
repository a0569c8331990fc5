"""Remote repositories: index a `.tar.gz` fetched over http(s), writing nothing but the index.

A source is any http(s) URL of a gzipped tarball, or `owner/repo@ref` expanded through the user's
`remote_tarball_url` template (GitHub's codeload by default). The tarball is downloaded into memory (at most
`remote_max_download_bytes`) and read as a stream: every decompressed byte counts against
`remote_max_unpacked_bytes`, and past the first `RATIO_FLOOR` bytes against `remote_max_ratio` times the
download, so a decompression bomb stops early with an error and no index change. Members are taken as data,
never extracted: absolute names, `..` components, names longer than `MAX_NAME_BYTES` or deeper than `MAX_DEPTH`
folders (discovery's cost per folder grows with its depth), links (symbolic and hard),
devices, fifos, sparse files (their holes would unpack to bytes no bound counts) and duplicate names are skipped
and counted. The regular files then pass discovery's own rules (`discover.tree_walk`: skipped
directories, the archive's `.gitignore` files, names, sizes) and only the survivors are decoded and chunked
(`index.index_files`).

Every path is pinned to one revision, found in this order: the commit id `git archive` writes into the tar's pax
header (GitHub's tarballs carry it), a 40-hex gzip header comment, a ref that is itself a full commit id, a
top-level folder named `NAME-<commit>`, then the user's `remote_commit_url` template (asked only when the
archive names no commit, since a branch can move between two requests). An archive that names no commit is
pinned by its own sha256 (`sha256:<hex>`). Bundles and ask citations carry the revision.

Fetching (`remote_http`) resolves each host once and connects only to the addresses it checked: never to a
special address (link-local, where cloud metadata services answer; unspecified; multicast) that the user's URL
does not name, and through a redirect never to another kind of network than the fetch started on.

The index holds the files' text (the chunks are a line partition), so search, graph and ask read a remote
file from the index, hash-checked against the digest taken from the tarball: nothing but the index is
written, and nothing is fetched after indexing. The `Workspace` over such an index is
`codeloupe.api.RemoteWorkspace` (the API sits on this module, not the other way round).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import logging
import math
import re
import tarfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from codeloupe.discover import Candidate, tree_walk
from codeloupe.errors import RemoteError
from codeloupe.remote_http import http_get
from codeloupe.settings import Settings

log = logging.getLogger("codeloupe.remote")

MAX_MEMBERS = 500_000
MAX_NAME_BYTES = 4096  # Linux's PATH_MAX: no checkout holds a longer path
MAX_DEPTH = 256  # folders within folders; real trees stay far below
RATIO_FLOOR = 32 * 2**20  # small archives may expand a lot (a few large text files); bombs go far past this
COMMIT_REPLY_BYTES = 1 << 20
_SHA = re.compile(r"[0-9a-f]{40}")
_OWNER_REPO = re.compile(r"(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)@(?P<ref>[^\s@]+)")
REVISION_KEY = "remote_revision"
SOURCE_KEY = "remote_source"


@dataclass(frozen=True)
class RemoteSpec:
    source: str  # as the user wrote it
    tarball_url: str
    commit_url: str  # "" when the revision can only come from the archive itself
    name: str  # owner/repo, or host/path of the URL
    ref: str = ""


@dataclass
class Snapshot:
    """A tarball read into memory: the files that passed discovery's rules, with their bytes."""

    spec: RemoteSpec
    revision: str
    revision_from: str  # which evidence pinned it
    files: list[tuple[Candidate, bytes]]
    skipped: Counter[str] = field(default_factory=Counter)
    download_bytes: int = 0
    unpacked_bytes: int = 0


def is_remote(text: str) -> bool:
    """An http(s) URL, or `owner/repo@ref` that is not a local path."""
    if urlsplit(text).scheme in ("http", "https"):
        return True
    return _OWNER_REPO.fullmatch(text) is not None and not Path(text).exists()


def parse_remote(text: str, settings: Settings) -> RemoteSpec:
    parts = urlsplit(text)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise RemoteError(f"{text}: not a URL with a host")
        return RemoteSpec(text, text, "", f"{parts.hostname}{parts.path}".rstrip("/"))
    found = _OWNER_REPO.fullmatch(text)
    if found is None:
        raise RemoteError(f"{text}: not an http(s) URL of a .tar.gz, nor owner/repo@ref")
    fields = {key: quote(value, safe="") for key, value in found.groupdict().items()}
    try:
        tarball = settings.remote_tarball_url.format(**fields)
        commit = settings.remote_commit_url.format(**fields) if settings.remote_commit_url else ""
    except (KeyError, IndexError, ValueError) as exc:
        raise RemoteError(f"the remote URL templates may use only {{owner}}, {{repo}} and {{ref}} ({exc})") from exc
    return RemoteSpec(text, tarball, commit, f"{found['owner']}/{found['repo']}", found["ref"])


class _BoundedGunzip(io.RawIOBase):
    """Decompresses a gzip body, refusing to produce more than the bounds allow."""

    def __init__(self, data: bytes, settings: Settings) -> None:
        self._inner = gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb")
        self._limit = settings.remote_max_unpacked_bytes
        self._ratio_limit = max(RATIO_FLOOR, settings.remote_max_ratio * len(data))
        self._ratio = settings.remote_max_ratio
        self.produced = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._inner.readinto(buffer)
        self.produced += count
        if self.produced > self._limit:
            raise RemoteError(f"refused: the archive unpacks to more than remote_max_unpacked_bytes ({self._limit})")
        if self.produced > self._ratio_limit:
            raise RemoteError(f"refused: the archive expands more than remote_max_ratio ({self._ratio}x) its "
                              "download (a decompression bomb?)")
        return count


def member_path(name: str) -> tuple[str, str]:
    """(the member's normalised POSIX path, "") or ("", why it is refused)."""
    if "\\" in name or any(ord(ch) < 32 for ch in name):
        return "", "unsafe path (name)"
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        return "", "unsafe path (name)"
    if len(encoded) > MAX_NAME_BYTES:
        return "", "unsafe path (too long)"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "", "unsafe path (absolute)"
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        return "", "unsafe path (traversal)"
    if not parts:
        return "", "unsafe path (empty)"
    if len(parts) > MAX_DEPTH + 1:
        return "", "unsafe path (too deep)"
    return "/".join(parts), ""


@dataclass
class _Members:
    sizes: dict[str, int] = field(default_factory=dict)  # regular files as named in the archive
    data: dict[str, bytes] = field(default_factory=dict)  # ... and the bytes of those small enough to index
    mtimes: dict[str, float] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)  # every folder the regular files sit in
    comment: str = ""  # the pax global header's comment
    skipped: Counter[str] = field(default_factory=Counter)


def _read_members(data: bytes, settings: Settings) -> tuple[_Members, int]:
    reader = _BoundedGunzip(data, settings)
    out = _Members()
    try:
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for count, member in enumerate(tar, 1):
                if count > MAX_MEMBERS:
                    raise RemoteError(f"refused: the archive has more than {MAX_MEMBERS} members")
                out.comment = out.comment or str(tar.pax_headers.get("comment", ""))
                _take(tar, member, out, settings)
                if len(out.folders) > MAX_MEMBERS:  # discovery judges every folder: they count as members too
                    raise RemoteError(f"refused: the archive's files sit in more than {MAX_MEMBERS} folders")
    except RemoteError:
        raise
    # gzip.BadGzipFile is an OSError; tarfile raises ValueError on some malformed headers (a GNU sparse map)
    except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError) as exc:
        raise RemoteError(f"not a readable .tar.gz: {type(exc).__name__}: {exc}") from exc
    return out, reader.produced


def _take(tar: tarfile.TarFile, member: tarfile.TarInfo, out: _Members, settings: Settings) -> None:
    # Checked before any member is skipped: tarfile steps over a member's data by reading its claimed size in
    # 16 KiB blocks, empty ones once the archive ends, so a 10 KB archive whose pax header claims 10**30 bytes
    # spun a core for ever; no member of an archive within the bound can be larger than the bound.
    if member.size > settings.remote_max_unpacked_bytes:
        raise RemoteError(f"refused: a member claims {member.size:,} bytes, more than remote_max_unpacked_bytes "
                          f"({settings.remote_max_unpacked_bytes:,})")
    if member.isdir():
        return
    path, problem = member_path(member.name)
    if problem:
        out.skipped[problem] += 1
        return
    if member.issym() or member.islnk():
        out.skipped["link member"] += 1
        return
    if member.issparse():
        out.skipped["sparse file member"] += 1
        return
    if not member.isreg():
        out.skipped["special file member"] += 1
        return
    if path in out.sizes:
        out.skipped["duplicate member"] += 1
    out.sizes[path] = member.size
    folder = path.rpartition("/")[0]
    while folder and folder not in out.folders:
        out.folders.add(folder)
        folder = folder.rpartition("/")[0]
    # A pax header's mtime is any float text: "nan" was written to the index as NULL and failed the whole fetch.
    out.mtimes[path] = float(member.mtime) if math.isfinite(member.mtime) else 0.0
    out.data.pop(path, None)
    if member.size <= settings.max_file_bytes:  # larger ones are counted as too large by the walk's rules
        handle = tar.extractfile(member)
        out.data[path] = handle.read() if handle is not None else b""


def _top_folder(paths: list[str]) -> str:
    """The one folder every member sits in (GitHub's `repo-<sha>/`), or ""."""
    tops = {path.split("/", 1)[0] for path in paths}
    if len(tops) == 1 and all("/" in path for path in paths):
        return tops.pop()
    return ""


def _gzip_comment(data: bytes) -> str:
    """The FCOMMENT field of a gzip header (RFC 1952), "" when there is none."""
    try:
        if data[:2] != b"\x1f\x8b":
            return ""
        flags, pos = data[3], 10
        if flags & 0x04:
            pos += 2 + int.from_bytes(data[pos:pos + 2], "little")
        if flags & 0x08:
            pos = data.index(b"\0", pos) + 1
        if flags & 0x10:
            return data[pos:data.index(b"\0", pos)].decode("latin-1")
    except (IndexError, ValueError):
        pass
    return ""


def _commit_from_endpoint(url: str, settings: Settings) -> str:
    try:
        body = http_get(url, settings, COMMIT_REPLY_BYTES, "application/vnd.github.sha, application/json;q=0.9")
    except RemoteError as exc:
        log.warning("cannot resolve the commit through %s: %s", url, exc)
        return ""
    text = body.decode("utf-8", "replace").strip()
    if _SHA.fullmatch(text.lower()):
        return text.lower()
    try:
        sha = json.loads(text).get("sha", "")
    except (ValueError, AttributeError):
        return ""
    return sha.lower() if isinstance(sha, str) and _SHA.fullmatch(sha.lower()) else ""


def _revision(spec: RemoteSpec, data: bytes, comment: str, top: str, settings: Settings) -> tuple[str, str]:
    for found, evidence in ((comment.strip().lower(), "the archive's pax comment"),
                            (_gzip_comment(data).strip().lower(), "the gzip comment"),
                            (spec.ref.lower(), "the ref"),
                            (top.rsplit("-", 1)[-1].lower() if "-" in top else "", "the top-level folder name")):
        if _SHA.fullmatch(found):
            return found, evidence
    if spec.commit_url:
        sha = _commit_from_endpoint(spec.commit_url, settings)
        if sha:
            return sha, "the commit endpoint"
    return "sha256:" + hashlib.sha256(data).hexdigest(), "the tarball's digest (it names no commit)"


def fetch_snapshot(spec: RemoteSpec, settings: Settings) -> Snapshot:
    """Download and read a tarball in memory; the files discovery would index, with their bytes."""
    data = http_get(spec.tarball_url, settings, settings.remote_max_download_bytes,
                "application/gzip, application/x-gzip, application/octet-stream;q=0.9, */*;q=0.1")
    members, unpacked = _read_members(data, settings)
    top = _top_folder(list(members.sizes))
    strip = len(top) + 1 if top else 0
    sizes = {path[strip:]: size for path, size in members.sizes.items()}
    raw = {path[strip:]: blob for path, blob in members.data.items()}
    mtimes = {path[strip:]: mtime for path, mtime in members.mtimes.items()}

    found = tree_walk(sizes, raw.get, settings)
    files = [(dataclasses.replace(c, mtime=mtimes[c.rel_path]), raw[c.rel_path]) for c in found.candidates]
    revision, evidence = _revision(spec, data, members.comment, top, settings)
    return Snapshot(spec, revision, evidence, files, members.skipped + found.skipped, len(data), unpacked)
