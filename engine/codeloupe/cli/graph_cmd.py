"""`codeloupe graph PATH [--node X] [--path A B] [--json] [--html out.html]`: the workspace graph."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from codeloupe.wording import amount

from . import CliError
from .arguments import add_workspace_args
from .common import index_workspace, open_workspace, visible


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("graph", help="import/call graph: communities, hubs, one file, a route")
    add_workspace_args(parser, remote=True)
    # Not a mutually exclusive group: `run` refuses `--node` with `--path`, saying what each asks for.
    parser.add_argument("--node", metavar="X", help="one file (a path, a file name or a concept) and its "
                        "neighbours, or a folder's part of the graph")
    parser.add_argument("--path", nargs=2, metavar=("A", "B"), dest="route", help="a hub-tolled route between two concepts")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--html", metavar="OUT", help="write the map as a self-contained HTML page")
    parser.add_argument("--no-embed", action="store_true",
                        help="do not compute missing skeleton vectors first (the semantic lane stays as it is)")
    parser.set_defaults(remote_refresh=False, func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.api import GraphRequest, render_html, render_text

    if args.html and (args.node or args.route):
        raise CliError("--html renders the whole map; it cannot be combined with --node or --path")
    # A blank part in the command line's words: the engine's (`target` is blank ... or leave it out) named a
    # parameter of MCP and HTTP, and told to leave out an end `--path` cannot do without. Given empty, `--node ""`
    # would read as not asked for (it printed the whole map).
    if args.node is not None and not args.node.strip():
        raise CliError("--node is blank: name a file, a folder or a concept, or leave --node out for the map")
    blank_ends = [end for end, name in zip(("A", "B"), args.route or ()) if not name.strip()]
    if blank_ends:
        raise CliError(f"--path A B: {' and '.join(blank_ends)} {'is' if len(blank_ends) == 1 else 'are'} "
                       f"blank: name a file or a concept at each end")
    if args.node is not None and args.route is not None:
        raise CliError("give --node (one file, folder or concept) or --path (a route), not both")
    asked = GraphRequest(args.node or "", *(args.route or ("", "")))  # refused above as the command line words it
    ws = open_workspace(args)
    try:
        index_workspace(ws, embed=not args.no_embed, quiet=args.json, answer_stale=True)
        html_map = ws.graph_map() if args.html else None  # --html asks for nothing but the map
        result = html_map if html_map is not None else ws.graph(asked)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    finally:
        ws.close()
    if html_map is not None:
        out = Path(args.html)
        try:
            out.write_text(render_html(html_map, str(ws.root)), encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc
        if not args.json:
            groups = sum(1 for community in html_map.communities if community.size > 1)  # as the text map counts
            print(f"wrote {out} ({amount(groups, 'community', 'communities')}, {amount(len(html_map.nodes), 'file')})")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    elif not args.html:
        print(visible(render_text(result)))  # names of the workspace's files
    return 0
