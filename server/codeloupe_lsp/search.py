"""`codeloupe/search`: the ranked, complete bundle (docs/protocol.md)."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from codeloupe.api import (
    MAX_QUERY_CHARS,
    InvalidArgument,
    Workspace,
    WorkspaceError,
    check_scope,
    repository_labels,
    search_repositories,
)
from codeloupe.types import Revisions
from codeloupe_lsp.convert import JSON, pruned_result, search_result, uri_to_path
from codeloupe_lsp.params import Params, invalid
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import (
    SCHEME,
    IndexDocument,
    Target,
    check_pinned,
    folder_target,
    parse_index_uri,
    repository_target,
    targets,
    without_unreachable,
)

METHOD = "codeloupe/search"
MODES = ("code", "docs", "both")
DEFAULT_LIMIT = 12
# A URI's scheme (two characters at least: `C:` starts a Windows path): a scope of another scheme names nothing here.
URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_search(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        query = params.text("query", required=True, non_empty=True, max_chars=MAX_QUERY_CHARS)
        return await search(ls, query, scope=params.text("scope"), mode=params.choice("docs", MODES, "code"),
                            limit=params.integer("limit", DEFAULT_LIMIT), folder_uri=params.text("folderUri"),
                            prune=bool(params.flag("prune", False)))


async def search(ls: CodeloupeServer, query: str, *, scope: str = "", mode: str = "code",
                 limit: int = DEFAULT_LIMIT, folder_uri: str = "", prune: bool = False) -> JSON:
    """Search one folder, or every folder and shared repository as one ranking (`api.search_repositories`);
    `scope` may be a URI (`file:`, or `codeloupe-index:` naming a shared repository or a folder or file of it),
    which also picks the folder or repository.

    `prune`: only the ranked chunks, flat (the CLI's `--prune`), from one folder: ranks of several folders'
    bundles do not merge into one flat list without their files' scores."""
    if scope:  # "" is no scope (a client sends it for none); spaces searched every folder whole as if it were
        try:
            check_scope(scope)
        except InvalidArgument as exc:
            raise invalid(f"{METHOD}: {exc}") from None
    if scope.startswith("file:"):
        if uri_to_path(scope) is None:
            raise invalid(f"{METHOD}: `scope` {scope!r} is not a file: URI")
        folder, scope = ls.folder_for(scope, "scope")
        chosen = [folder_target(folder)]
    elif scope.startswith(f"{SCHEME}:"):
        indexed = parse_index_uri(scope, "scope")
        target = repository_target(ls, indexed.repository, "scope")
        chosen, scope = [target], await ls.engine(_repository_scope, target.ws, indexed, scope)
    elif (scheme := URI_SCHEME.match(scope)) is not None:
        raise invalid(f"{METHOD}: `scope` {scope[:200]!r} is a URI of another scheme ({scheme.group()}): a scope is a"
                      f" path inside the folders, a file: URI or a {SCHEME}: URI (write a path holding a colon as ./{scope[:200]})")
    else:
        chosen = targets(ls, folder_uri)
        if scope:
            scope = _inside(chosen, scope)
    if prune and len(chosen) > 1:
        raise invalid(f"{METHOD}: `prune` answers from one folder; pass `folderUri` or a `scope` URI")
    for target in chosen:
        await target.ready()
    if len(chosen) == 1:
        (target,) = chosen
        bundle = await ls.engine(target.ws.search, query, scope=scope, mode=mode, limit=limit)
        return (pruned_result if prune else search_result)(bundle, target.uris(bundle.revisions()))
    (bundle, searched), unreachable = await ls.engine(without_unreachable, chosen, lambda answering: (
        search_repositories([t.ws for t in answering], query, scope=scope, mode=mode, limit=limit), answering))
    bundle.notes[:0] = unreachable
    by_label = dict(zip(repository_labels([t.ws for t in searched]), searched))
    return search_result(bundle, uri_for=lambda hit: by_label[hit.repository].uris(Revisions(hit.revision)))


def _inside(chosen: list[Target], scope: str) -> str:
    """`scope` as the one path it names inside every folder searched (`_scope_in`); refused, as MCP and HTTP
    refuse it, when it leaves one, or when a link makes it name different paths in different folders."""
    try:
        inside = {_scope_in(target.ws, scope) for target in chosen}
    except (WorkspaceError, ValueError, OSError) as exc:  # outside, or no path at all (a NUL byte)
        raise invalid(f"{METHOD}: `scope` {scope[:200]!r}: {exc}") from None
    if len(inside) > 1:
        raise invalid(f"{METHOD}: `scope` {scope[:200]!r} names {', '.join(map(repr, sorted(inside)))} in different"
                      " folders (a link): pass `folderUri`, or the URI of the folder to search")
    return inside.pop()


def _scope_in(ws: Workspace, scope: str) -> str:
    """`scope` as the path it keeps inside `ws` ("": all of it), normalised as a path first (`./docs` and
    `docs/../docs` are `docs`, as in a folder so in a shared repository); one that leaves `ws` is refused."""
    path = posixpath.normpath(scope)
    return "" if path == "." else ws.relative(path)


def _repository_scope(ws: Workspace, document: IndexDocument, uri: str) -> str:
    """The folder or file of a shared repository a `codeloupe-index:` scope names ("": the whole repository);
    refused, naming `scope`, as `codeloupe/read` refuses its URI (another commit, a path that escapes)."""
    try:
        check_pinned(ws, document)
        return _scope_in(ws, document.path)
    except WorkspaceError as exc:
        raise WorkspaceError(f"{METHOD}: `scope` {uri[:200]!r}: {exc}") from None
