"""`codeloupe related PATH FILE [--lines A-B]`: the chunks nearest to a span, in its language."""

from __future__ import annotations

import argparse
import dataclasses
import json

from .arguments import add_workspace_args, positive_count
from .common import answer_from_index, one_line, parse_lines


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("related", help="the chunks nearest to a span of a file, in its language")
    add_workspace_args(parser)
    parser.add_argument("file", help="an indexed file, relative to the workspace")
    parser.add_argument("--lines", metavar="A-B", help="the anchor span (default: the whole file)")
    parser.add_argument("--limit", type=positive_count, default=10, help="related files shown (default 10)")
    parser.add_argument("--no-embed", action="store_true", help="do not compute missing vectors first")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    first, last = parse_lines(args.lines)
    found = answer_from_index(args, lambda ws: ws.find_related(args.file, first, last, limit=args.limit),
                              embed=not args.no_embed, quiet=args.json)
    if args.json:
        print(json.dumps(dataclasses.asdict(found), indent=2))
        return 0
    print(one_line(f"nearest to {found.path}:{found.start_line}-{found.end_line} ({found.language}, by {found.lane})"))
    for rank, chunk in enumerate(found.chunks, 1):
        print(one_line(f"{rank:>3}. {chunk.path}:{chunk.start_line}-{chunk.end_line}  {chunk.score:.3f}  {chunk.breadcrumb}"))
    return 0
