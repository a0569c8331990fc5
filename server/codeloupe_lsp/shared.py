"""Repositories of the shared index the user named (`storeUrl` and `repositories`, the user's own editor
settings): searched beside the workspace folders, with no checkout. Their files are documents of the
`codeloupe-index:` scheme, `codeloupe-index:///<repository>/<path>?rev=<commit>`, which the editors open
read-only through `codeloupe/read` (docs/protocol.md); each names the commit its file's text was read at (the
repository's, or a queued index run's that has written the file and not yet ended: `Workspace.revisions`).

A request answers from a `Target`: a folder or a shared repository, each a `codeloupe.api` workspace, so ask,
related, the graph, tour, hover and lenses answer on a shared document as on a file of a folder.

The repository is the first segment of the path, not the URI's authority: VS Code lower-cases an authority,
and Neovim treats a buffer name as a URL (not a relative file name) only after `scheme://`."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar
from urllib.parse import parse_qs, quote, unquote, urlsplit

from pygls.exceptions import JsonRpcException

from codeloupe.api import Workspace, WorkspaceError, open_shared_held, unreadable_indexes
from codeloupe.types import Revisions
from codeloupe_lsp.convert import UriOf, file_uri
from codeloupe_lsp.folders import Folder
from codeloupe_lsp.params import invalid
from codeloupe_lsp.server import CodeloupeServer

log = logging.getLogger("codeloupe_lsp.shared")

SCHEME = "codeloupe-index"
# How much of the database's error a note quotes (the log has all of it): libpq names the socket or host tried
# before the reason, which a shorter quote cut off.
ERROR_SHOWN = 600

T = TypeVar("T")


def index_uri(repository: str, rel_path: str, revision: str) -> str:
    """The document URI of `rel_path` in a shared repository, pinned to `revision` when it has one."""
    uri = f"{SCHEME}:///{quote(repository, safe='')}/{quote(rel_path)}"
    return f"{uri}?rev={quote(revision, safe='')}" if revision else uri


@dataclass(frozen=True)
class IndexDocument:
    repository: str
    path: str  # as the URI names it: the workspace refuses one that escapes the repository
    revision: str  # "" when the URI pins none


def parse_index_uri(uri: str, what: str = "uri") -> IndexDocument:
    """The repository, path and commit a `codeloupe-index:` URI names (`codeloupe-index:///repo/path` or, as VS
    Code writes it, `codeloupe-index:/repo/path`); anything else is refused with -32602."""
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or parts.netloc or not parts.path.startswith("/"):
        raise invalid(f"`{what}` {uri!r} is not a {SCHEME}:///<repository>/<path> URI")
    repository, _, path = parts.path[1:].partition("/")
    # Clients re-encode a URI's query (VS Code sends `rev%3D...`): decode it before reading its fields.
    revision = parse_qs(unquote(parts.query)).get("rev", [""])[0]
    return IndexDocument(unquote(repository), unquote(path), revision)


def repository(ls: CodeloupeServer, name: str, what: str = "uri") -> Workspace:
    found = ls.shared.get(name)
    if found is None:
        opened = ", ".join(sorted(ls.shared)) or "none (set `storeUrl` and `repositories`)"
        raise invalid(f"`{what}` names repository {name!r}, which this server did not open from the shared index"
                      f" (open: {opened})")
    return found


@dataclass(frozen=True)
class Target:
    """What a request answers from: a workspace folder, or a repository of the shared index (`repository`)."""

    ws: Workspace
    uri: str  # the folder's URI, or `codeloupe-index:///<repository>`
    folder: Folder | None = None
    repository: str = ""

    def uris(self, revisions: Revisions) -> UriOf:
        """Its paths -> their documents; a shared repository's each pinned to its revision of `revisions` (where
        the answer read it)."""
        if self.folder is not None:
            return partial(file_uri, self.folder.root)
        return lambda path: index_uri(self.repository, path, revisions.of(path))

    async def ready(self) -> None:
        """Wait until it can answer: a folder's first index; a shared repository is indexed by the workers."""
        if self.folder is not None:
            await self.folder.searchable()


def folder_target(folder: Folder) -> Target:
    return Target(folder.ws, folder.uri, folder=folder)


def repository_target(ls: CodeloupeServer, name: str, what: str = "uri") -> Target:
    return Target(repository(ls, name, what), f"{SCHEME}:///{quote(name, safe='')}", repository=name)


def targets(ls: CodeloupeServer, folder_uri: str) -> list[Target]:
    """What a request's `folderUri` selects: one folder, one shared repository (`codeloupe-index:///<name>`), or
    (absent) every folder and every shared repository."""
    if folder_uri.startswith(f"{SCHEME}:"):
        return [repository_target(ls, parse_index_uri(folder_uri, "folderUri").repository, "folderUri")]
    if folder_uri:
        return [folder_target(f) for f in ls.folders_for(folder_uri)]
    # No folder open is no error while shared repositories answer (a server started only to search them).
    folders = ls.folders_for("") if len(ls.folders) or not ls.shared else []
    return [*map(folder_target, folders), *(repository_target(ls, name) for name in ls.shared)]


def without_unreachable(chosen: list[Target], answer: Callable[[list[Target]], T]) -> tuple[T, list[str]]:
    """`answer(chosen)`, run on the engine's pool; where it fails because the shared index cannot be reached now
    (the database stopped or refuses connections), `answer` of the folders alone, and the note naming the
    repositories left out and why: the folders keep working while the database is away (docs/protocol.md)."""
    try:
        return answer(chosen), []
    except Exception:
        shared = [t for t in chosen if t.folder is None]
        folders = [t for t in chosen if t.folder is not None]
        why = unreadable_indexes(t.ws for t in shared) if shared and folders else ""
        if not why:
            raise
    log.warning("shared index unreachable, answering from the folders alone: %s", why)
    left_out = ", ".join(t.repository for t in shared)
    return answer(folders), [f"not searched: {left_out} (the shared index cannot be reached now: {why[:ERROR_SHOWN]});"
                             " these are the folders' results alone"]


async def each_answers(ls: CodeloupeServer, chosen: list[Target], answer: Callable[[Workspace], T]) -> list[tuple[UriOf, T]]:
    """`answer` of each of `chosen` once it can answer, with how its paths become documents; repositories of a
    shared index that cannot be reached now are left out, and the user told so once (an answer with no notes)."""
    for target in chosen:
        await target.ready()
    answered, unreachable = await ls.engine(without_unreachable, chosen, lambda answering: [
        (target, answer(target.ws), Revisions("") if target.folder is not None else target.ws.revisions())
        for target in answering])
    for note in unreachable:
        ls.warn(f"codeloupe: {note}", once=True)
    return [(target.uris(revisions), found) for target, found, revisions in answered]


async def one_target(ls: CodeloupeServer, folder_uri: str) -> Target:
    """What a request that answers from one place (ask, graph, tour) answers from: `folderUri`'s folder or
    repository, else the first folder, else the first shared repository; once it can answer."""
    target = targets(ls, folder_uri)[0]
    await target.ready()
    return target


async def uris_of(ls: CodeloupeServer, target: Target) -> UriOf:
    """The target's paths -> their documents; a shared repository's pinned to the commit each file is indexed at
    now."""
    if target.folder is not None:
        return target.uris(Revisions(""))
    return target.uris(await ls.engine(target.ws.revisions))


async def document(ls: CodeloupeServer, uri: str, what: str = "uri") -> tuple[Target, str]:
    """The folder or shared repository holding the document `uri` (`file:` or `codeloupe-index:`), and its path
    there; anything else is refused with -32602."""
    if not uri.startswith(f"{SCHEME}:"):
        folder, rel = ls.folder_for(uri, what)
        return folder_target(folder), rel
    indexed = parse_index_uri(uri, what)
    target = repository_target(ls, indexed.repository, what)
    return target, (await ls.engine(pinned_path, target.ws, indexed))[0]


async def document_or_none(ls: CodeloupeServer, uri: str) -> tuple[Target, str] | None:
    """`document`, or None where there is nothing to say (hovers and lenses are asked about every open file)."""
    try:
        return await document(ls, uri)
    except JsonRpcException:
        return None


def check_pinned(ws: Workspace, document: IndexDocument) -> str:
    """Refuse a `codeloupe-index:` URI that pins another commit than the one the index holds its file at now (its
    lines may differ); that revision (a folder's: the repository's)."""
    revision = ws.revisions().of(posixpath.normpath(document.path) if document.path else "")
    if document.revision and document.revision != revision:
        where = f"{document.repository}:{document.path}" if document.path else document.repository
        raise WorkspaceError(f"{where} is indexed at {revision or 'no commit'} now, not {document.revision}:"
                             " search again for its current files")
    return revision


def pinned_path(ws: Workspace, document: IndexDocument) -> tuple[str, str]:
    """The repository path a `codeloupe-index:` URI names, and the revision the index holds it at; refused when the
    URI pins another commit (`check_pinned`), names no file, or escapes the repository."""
    revision = check_pinned(ws, document)
    if not document.path:
        raise WorkspaceError(f"{document.repository}: the URI names no file")
    return ws.relative(document.path), revision


def read_document(ws: Workspace, document: IndexDocument) -> tuple[str, str]:
    """The file's text as indexed and the commit it was read at (`pinned_path`'s refusals)."""
    path, revision = pinned_path(ws, document)
    return ws.read_lines(path), revision


async def open_repositories(ls: CodeloupeServer) -> None:
    """(Re)open the repositories the user's settings name; a name the index does not hold, or a failure to open
    any, is shown and kept for `codeloupe/status`: the others, and the folders, keep working."""
    close_repositories(ls)
    names = ls.options.repositories
    if not names:
        return
    try:
        store = {"store_url": ls.options.store_url} if ls.options.store_url else {}
        opened, missing = await ls.engine(open_shared_held, names, {**ls.options.overrides, **store})
    except JsonRpcException as exc:
        ls.shared_problem = f"cannot open the shared index's repositories: {exc.message}"
        ls.show_error(f"codeloupe: {ls.shared_problem}")
        return
    ls.shared = {str(ws.root): ws for ws in opened}
    log.info("shared index: opened %s", ", ".join(ls.shared))
    if missing:
        ls.shared_problem = f"not opened from the shared index: {missing}"
        ls.show_error(f"codeloupe: {ls.shared_problem}")


def close_repositories(ls: CodeloupeServer) -> None:
    for ws in ls.shared.values():
        ws.close()
    ls.shared = {}
    ls.shared_problem = ""
