"""`codeloupe search PATH "query"`: the ranked, complete bundle (indexing first when needed)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import CliError
from .arguments import add_workspace_args, positive_count, repository_list
from .common import argument_error, index_workspace, markup_safe, open_workspace, print_code

if TYPE_CHECKING:
    from codeloupe.types import Bundle, ChunkHit, FileHit


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("search", help="search a workspace: CORE files in full, RELATED as a map")
    add_workspace_args(parser, remote=True)
    parser.add_argument("query", help="a question, an identifier, or a pasted bug report ('-' reads stdin)")
    docs = parser.add_mutually_exclusive_group()
    docs.add_argument("--docs", action="store_const", const="docs", dest="mode", help="search docs only")
    docs.add_argument("--with-docs", action="store_const", const="both", dest="mode", help="code and docs")
    parser.add_argument("--scope", default="", help="confine retrieval to this sub-path of the workspace")
    parser.add_argument("--limit", type=positive_count, default=12,
                        help="files ranked with their code (default 12): CORE's matching chunks in full, then each "
                             "other file's best chunk around its best-matching line; every other candidate is "
                             "still listed, as a one-line map")
    parser.add_argument("--no-embed", action="store_true",
                        help="do not compute missing vectors first (search with whatever lanes are ready)")
    parser.add_argument("--json", action="store_true", help="print the bundle as JSON")
    parser.add_argument("--prune", action="store_true",
                        help="print only the ranked chunks as JSON (path, lines, anchor line, text), then in `tail`"
                             " every candidate with no chunk to list (rank, path, best lines): for scripts")
    parser.add_argument("--all", action="store_true",
                        help="with no PATH: every repository of the shared index (--store) as one ranking;"
                             " --repo A,B searches those")
    parser.set_defaults(remote_refresh=False, func=run, mode="code")
    # `search --store URL --all "query"`: PATH may be left out.
    next(a for a in parser._actions if a.dest == "path").nargs = "?"


def run(args: argparse.Namespace) -> int:
    from codeloupe.api import InvalidArgument, check_scope
    from codeloupe.types import is_blank

    try:
        if args.scope:  # "" is no scope (the default); spaces searched the whole workspace as if it were
            check_scope(args.scope, "--scope")
    except InvalidArgument as exc:
        raise argument_error(args, exc) from exc
    if args.path is None:
        return _run_across(args)
    if args.all:
        raise CliError("--all searches the shared index's repositories: leave PATH out")
    query = sys.stdin.read() if args.query == "-" else args.query
    if is_blank(query):
        raise CliError("the query is empty")
    ws = open_workspace(args)
    try:
        index_workspace(ws, embed=not args.no_embed, quiet=args.json or args.prune, answer_stale=True)
        # A folder inside the workspace scopes the search; --scope is then read from that folder.
        subpath = getattr(args, "subpath", "")
        scope = ws.relative(Path(subpath) / args.scope) if args.scope else subpath
        bundle = ws.search(query, scope=scope, mode=args.mode, limit=args.limit)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    finally:
        ws.close()
    _print(args, bundle)
    return 0


def _run_across(args: argparse.Namespace) -> int:
    """Repositories of the shared index, searched as one ranking (nothing is indexed: the workers do that)."""
    from codeloupe.api import open_shared, search_repositories
    from codeloupe.errors import WorkspaceError
    from codeloupe.settings import SettingsError
    from codeloupe.store import StoreError
    from codeloupe.types import is_blank

    if args.scope:
        raise CliError("--scope is a path inside one workspace: not with --all / --repo A,B")
    query = sys.stdin.read() if args.query == "-" else args.query
    if is_blank(query):
        raise CliError("the query is empty")
    names = [] if args.all else repository_list(args.store_repository or "")
    if not args.all and not names:
        # `codeloupe search "query"` in a checkout: say how to name the folder it is in (a search never indexes
        # the current folder unasked: it may be a home directory).
        raise CliError(f"name the workspace to search: codeloupe search . {shlex.quote(query.strip()[:60])} for "
                       "this folder; or the shared index's repositories: --repo A,B or --all")
    overrides = {key: getattr(args, key) for key in ("store_url", "embed_provider", "embed_model", "embed_base_url")
                 if getattr(args, key) is not None}
    try:
        workspaces = open_shared(names, overrides)
    except (SettingsError, StoreError, WorkspaceError) as exc:
        raise CliError(str(exc)) from exc
    try:
        bundle = search_repositories(workspaces, query, mode=args.mode, limit=args.limit)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    finally:
        for ws in workspaces:
            ws.close()
    _print(args, bundle)
    return 0


def _print(args: argparse.Namespace, bundle: Bundle) -> None:
    if args.prune:
        print(json.dumps({"query": bundle.query, "chunks": [dataclasses.asdict(c) for c in bundle.pruned()],
                          "tail": [dataclasses.asdict(f) for f in bundle.pruned_files()]}, indent=2))
    elif args.json:
        print(json.dumps(dataclasses.asdict(bundle), indent=2))
    else:
        render(bundle)


def render(bundle: Bundle) -> None:
    from codeloupe.types import PrunedChunk, short_revision

    from .console import CommandConsole

    console = CommandConsole(highlight=False)
    lanes = ", ".join(lane.label() for lane in bundle.lanes)
    mode = " · issue mode" if bundle.issue_mode else ""
    if bundle.revision:
        console.print(f"[dim]{markup_safe(str(bundle.root))} @ {markup_safe(bundle.revision)}[/dim]")
    scope = f" · within {markup_safe(bundle.scope)}" if bundle.scope else ""
    # The bundle's candidates (CORE and RELATED), said as such: "27 files" over a search of the shared index's
    # repositories read as how many files they hold.
    files = len(bundle.core) + len(bundle.related)
    console.print(f"[dim]{files} candidate file{'' if files == 1 else 's'}{scope} · lanes: {lanes}{mode} · "
                  f"{bundle.timing_ms.get('total', 0):.1f} ms[/dim]")
    for note in bundle.notes:
        console.print(f"[yellow]note:[/yellow] {markup_safe(note)}")
    if not bundle.core:
        console.print("no match")
        return
    console.rule("CORE")
    for hit in bundle.core:
        # A file at another revision than the bundle's (a search across repositories names none; a queued index run
        # not yet ended has written the file at its commit).
        pinned = f" @ {markup_safe(short_revision(hit.revision))}" if hit.revision != bundle.revision else ""
        path = markup_safe(hit.shown_path)
        console.print(f"[bold]{hit.rank}. {path}[/bold]{pinned}  [dim]{markup_safe(hit.why)}[/dim]")
        for chunk in hit.chunks:
            console.print(f"[cyan]{path}:{chunk.start_line}-{chunk.end_line}[/cyan]  {markup_safe(chunk.breadcrumb)}")
            print_code(console, chunk.text, _lexer(hit), chunk.start_line)
    if bundle.related:
        console.rule("RELATED")
        for hit in bundle.related:
            if hit.tail:
                continue
            console.print(map_line(hit))
            for chunk in hit.chunks:  # a file within --limit: its best chunk, around its best-matching line
                window = PrunedChunk.of(hit, chunk)
                above, below = _cut_lines(chunk)
                if above:
                    console.print(f"[dim]... {_lines(above)} above, from line {chunk.start_line}[/dim]")
                print_code(console, window.text, _lexer(hit), window.text_start_line)
                if below:
                    console.print(f"[dim]... {below} more line{'' if below == 1 else 's'}, "
                                  f"to line {chunk.end_line}[/dim]")
        tail = sum(hit.tail for hit in bundle.related)
        if tail:
            console.print(f"[dim]... and {tail} lower-ranked candidate files (--json lists every one)[/dim]")


def map_line(hit: FileHit) -> str:
    """One RELATED file as a line of the map: path, best span, symbols, why."""
    symbols = markup_safe(", ".join(hit.symbols[:4]))
    via = " [magenta](via graph)[/magenta]" if hit.via == "graph" else ""
    return (f"{hit.rank:>3}. [cyan]{markup_safe(hit.shown_path)}:{hit.best_start_line}-{hit.best_end_line}[/cyan]"
            f"{'  ' + symbols if symbols else ''}  [dim]{markup_safe(hit.why)}[/dim]{via}")


def _cut_lines(chunk: ChunkHit) -> tuple[int, int]:
    """How many lines of the chunk its shown window leaves out above and below it ((0, 0) when shown whole)."""
    snippet = chunk.snippet
    if snippet is None or not snippet.truncated:
        return 0, 0
    return max(0, snippet.start_line - chunk.start_line), max(0, chunk.end_line - snippet.end_line)


def _lines(count: int) -> str:
    return f"{count} line{'' if count == 1 else 's'}"


def _lexer(hit: FileHit) -> str:
    return {"tsx": "tsx", "csharp": "csharp", "cpp": "cpp", "bash": "bash"}.get(hit.language, hit.language or "text")
