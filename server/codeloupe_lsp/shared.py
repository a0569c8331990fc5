"""Repositories of the shared index the user named (`storeUrl` and `repositories`, the user's own editor
settings): searched beside the workspace folders, with no checkout. Their files are documents of the
`codeloupe-index:` scheme, `codeloupe-index:///<repository>/<path>?rev=<commit>`, which the editors open
read-only through `codeloupe/read` (docs/protocol.md); every answer is pinned to the commit indexed.

The repository is the first segment of the path, not the URI's authority: VS Code lower-cases an authority,
and Neovim treats a buffer name as a URL (not a relative file name) only after `scheme://`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from urllib.parse import parse_qs, quote, unquote, urlsplit

from pygls.exceptions import JsonRpcException

from codeloupe.api import Workspace, WorkspaceError, open_shared
from codeloupe_lsp.convert import UriOf
from codeloupe_lsp.folders import Folder
from codeloupe_lsp.params import invalid
from codeloupe_lsp.server import CodeloupeServer

log = logging.getLogger("codeloupe_lsp.shared")

SCHEME = "codeloupe-index"


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


def targets(ls: CodeloupeServer, folder_uri: str) -> tuple[list[Folder], list[tuple[str, Workspace]]]:
    """What a request's `folderUri` selects: one folder, one shared repository (`codeloupe-index:///<name>`), or
    (absent) every folder and every shared repository."""
    if folder_uri.startswith(f"{SCHEME}:"):
        name = parse_index_uri(folder_uri, "folderUri").repository
        return [], [(name, repository(ls, name, "folderUri"))]
    if folder_uri:
        return ls.folders_for(folder_uri), []
    # No folder open is no error while shared repositories answer (a server started only to search them).
    return ls.folders_for("") if len(ls.folders) or not ls.shared else [], list(ls.shared.items())


async def uris_of(ls: CodeloupeServer, name: str, ws: Workspace) -> UriOf:
    """A shared repository's paths -> their documents, pinned to the commit it is indexed at."""
    revision = await ls.engine(lambda: ws.revision)
    return partial(index_uri, name, revision=revision)


def read_document(ws: Workspace, document: IndexDocument) -> tuple[str, str]:
    """The file's text as indexed and the commit it is pinned to; refused when the URI pins another commit
    than the one the index holds now."""
    revision = ws.revision
    if document.revision and document.revision != revision:
        raise WorkspaceError(f"{document.repository} is indexed at {revision or 'no commit'} now, not"
                             f" {document.revision}: search again for its current files")
    if not document.path:
        raise WorkspaceError(f"{document.repository}: the URI names no file")
    return ws.read_lines(document.path), revision


async def open_repositories(ls: CodeloupeServer) -> None:
    """(Re)open the repositories the user's settings name; a failure is shown, the folders keep working."""
    close_repositories(ls)
    names = ls.options.repositories
    if not names:
        return
    try:
        store = {"store_url": ls.options.store_url} if ls.options.store_url else {}
        opened = await ls.engine(open_shared, names, {**ls.options.overrides, **store})
    except JsonRpcException as exc:
        ls.show_error(f"codeloupe: cannot open the shared index's repositories: {exc.message}")
        return
    ls.shared = {str(ws.root): ws for ws in opened}
    log.info("shared index: opened %s", ", ".join(ls.shared))


def close_repositories(ls: CodeloupeServer) -> None:
    for ws in ls.shared.values():
        ws.close()
    ls.shared = {}
