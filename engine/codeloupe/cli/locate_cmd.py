"""`codeloupe locate PATH TEXT`: every line of the indexed chunks holding the text exactly (no disk walk)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from .arguments import add_workspace_args, positive_count
from .common import answer_from_index, named, one_line


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("locate", help="exact text or a whole identifier in the indexed files")
    add_workspace_args(parser)
    parser.add_argument("text", help="the text to find, case-sensitive, on one line")
    parser.add_argument("--identifier", action="store_true",
                        help="match whole identifiers only (`get` does not match `getUser`)")
    parser.add_argument("--limit", type=positive_count, default=100, help="locations shown (default 100)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit status 0 when the text was found, 1 when not (like grep)."""
    from codeloupe.api import check_locate_text

    found = answer_from_index(args, lambda ws: ws.locate(args.text, identifier=args.identifier, limit=args.limit),
                              embed=False, quiet=args.json, check=lambda: check_locate_text(args.text))
    if args.json:
        print(json.dumps(dataclasses.asdict(found), indent=2))
    else:
        for hit in found.locations:
            print(one_line(f"{hit.path}:{hit.line}:{hit.column}: {hit.text}"))
        what = "identifier" if found.identifier else "text"
        shown = f" (first {len(found.locations)} shown)" if len(found.locations) < found.total else ""
        print(f"{found.total} location{'' if found.total == 1 else 's'} of the {what} {named(found.text)}{shown}")
    return 0 if found.total else 1
