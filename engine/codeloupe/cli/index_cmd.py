"""`codeloupe index PATH`: bring the workspace index up to date and say what happened."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from typing import TYPE_CHECKING

from codeloupe.wording import amount

from . import CliError
from .arguments import add_workspace_args
from .common import counted, index_workspace, one_line, open_workspace

if TYPE_CHECKING:
    from codeloupe.api import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("index", help="index a workspace (incremental)")
    add_workspace_args(parser, remote=True)
    parser.add_argument("--no-embed", action="store_true", help="chunk only; compute vectors later")
    parser.add_argument("--no-prepare", action="store_true",
                        help="leave the search snapshot and the graph to the next search (by default they are "
                             "built and saved here, so an editor opening the index answers without building them)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--queue", action="store_true",
                        help="with --store: queue the changed files for `codeloupe worker` processes instead of "
                             "indexing them here")
    parser.add_argument("--replace", action="store_true",
                        help="with --store: index this folder under a repository name the shared index holds from"
                             " another folder, replacing that folder's files (without it, that is refused)")
    parser.set_defaults(remote_refresh=True, func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.api import is_remote_source
    from codeloupe.store import Store

    started = time.perf_counter()
    ws = open_workspace(args, replace_source=args.replace, create_repository=True)
    if args.queue:
        return _queue(ws)
    try:
        report, embedded = index_workspace(ws, embed=not args.no_embed, quiet=args.json)
        where = report.index_path if isinstance(ws.store, Store) else _shared_location(ws)
        if not isinstance(ws.store, Store):
            _warn_dirty(ws.store.commit)
        # The shared index's serving processes keep what they build in the database: not measured there yet.
        prepared_s = None if args.no_prepare or not isinstance(ws.store, Store) else _prepare(ws)
    finally:
        ws.close()
    if args.json:
        out = dataclasses.asdict(report)
        out["embedding"] = dataclasses.asdict(embedded) if embedded is not None else None
        out["prepared_s"] = prepared_s
        print(json.dumps(out, indent=2))
        return 0
    print(f"indexed {one_line(str(report.root))}")  # the folder's name: a clone's is its repository's
    print(f"  files     {report.files_seen} seen, {report.files_indexed} (re)chunked, "
          f"{report.files_unchanged} unchanged, {report.files_deleted} removed")
    print(f"  chunks    {report.chunks}   symbols {report.symbols}")
    if report.languages:
        print("  languages " + counted(list(report.languages.items())[:10]))
    if report.skipped:
        # `stats` reads a folder only: named after a remote repository's counts, it refused the user.
        listed = "" if is_remote_source(args.path) else \
            f"  (`codeloupe stats {one_line(shlex.quote(args.path))} --skipped` names each but ignored ones)"
        print("  skipped   " + counted(report.skipped.items()) + listed)
    if report.decoded_fallback:
        print(f"  decoded   {report.decoded_fallback} files as Windows-1252 (not UTF-8)")
    if report.partition_violations:
        print(f"  WARNING   {report.partition_violations} files broke the line partition and fell back to "
              "line windows (a chunker bug: please report it)")
    if embedded is not None:
        blank = f", {embedded.blank} with nothing to embed (zero)" if embedded.blank else ""
        print(f"  vectors   {embedded.computed} computed, {embedded.cache_hits} from cache{blank} "
              f"in {embedded.elapsed_s:.1f}s")
    if prepared_s is not None:
        print(f"  prepared  the search snapshot and graph in {prepared_s:.1f}s (the next search or editor start "
              "loads them)")
    print(f"  index     {one_line(where)}")
    print(f"  elapsed   {time.perf_counter() - started:.2f}s (chunks and symbols {report.elapsed_s:.2f}s)")
    return 0


def _prepare(ws: Workspace) -> float | None:
    """Seconds spent building and saving the search snapshot and the graph; None when the saved ones were
    current. A terminal index that leaves them to the editor leaves its first answer waiting for the snapshot
    (14.7 s at 40K files, against 2.4 s to load it), and its next ones sharing the machine with the graph."""
    started = time.perf_counter()
    if not ws.prepare_search():
        return None
    return round(time.perf_counter() - started, 2)


def _shared_location(ws: Workspace) -> str:
    from codeloupe.url_secrets import redact

    return f"{redact(ws.store.url)}, repository {ws.store.repository} at {ws.store.commit or 'the files on disk'}"


def _warn_dirty(commit: str) -> None:
    """Say on stderr that the shared index now pins the repository to no commit: its files were read from a work
    tree with uncommitted changes (`shared_index.DIRTY_SUFFIX`)."""
    from codeloupe.shared_index import DIRTY_SUFFIX

    if commit.endswith(DIRTY_SUFFIX):
        print(f"codeloupe: warning: the folder's files differ from commit {commit.removesuffix(DIRTY_SUFFIX)}"
              f" (uncommitted or untracked files): the shared index's answers name {commit}, no commit anyone can"
              " check out. Index a clean checkout (as CI does) to pin them to a commit", file=sys.stderr)


def _queue(ws: Workspace) -> int:
    from codeloupe.shared_index import enqueue_workspace
    from codeloupe.store import StoreError
    from codeloupe.store.postgres import PgStore

    try:
        if not isinstance(ws.store, PgStore):
            raise CliError("--queue needs the shared index: --store postgresql://... (or store_url)")
        queued = enqueue_workspace(ws.store, ws.root, ws.settings)
        _warn_dirty(queued.commit)
        pinned = ws.store.commit
        print(f"queued {amount(queued.batches, 'batch', 'batches')} of {ws.store.repository} at"
              f" {queued.commit or 'the files on disk'} for `codeloupe worker`"
              + (f" (answers name {pinned}, the commit its files were read at, for each file until a worker has"
                 " written it)"
                 if queued.batches and pinned and pinned != queued.commit else ""))
    except StoreError as exc:
        raise CliError(str(exc)) from exc
    finally:
        ws.close()
    return 0

