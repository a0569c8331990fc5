"""`codeloupe get PATH FILE [--lines A-B | --symbol NAME]`: lines of an indexed file, verbatim from disk."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from codeloupe.types import visible

from .arguments import add_workspace_args
from .common import answer_from_index, parse_lines


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("get", help="a file, a span or a definition of an indexed file, verbatim")
    add_workspace_args(parser)
    parser.add_argument("file", help="an indexed file, relative to the workspace")
    span = parser.add_mutually_exclusive_group()
    span.add_argument("--lines", metavar="A-B", help="only these lines (1-based, inclusive; clipped to the file)")
    span.add_argument("--symbol", metavar="NAME", default="", help="only this definition (its qualified name)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (path, lines, text)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    first, last = parse_lines(args.lines)
    found = answer_from_index(args, lambda ws: ws.expand(args.file, first, last, symbol=args.symbol),
                              embed=False, quiet=True)
    if args.json:
        print(json.dumps(dataclasses.asdict(found), indent=2))
    elif sys.stdout.isatty():  # a repository's escape sequences never reach a person's terminal as commands
        sys.stdout.write(visible(found.text))
    else:  # piped or redirected: the file's text as it is, for a pager, a diff or a file
        sys.stdout.write(found.text)
    return 0
