"""`codeloupe tour PATH`: where to start reading: entry points, then the names most files mention."""

from __future__ import annotations

import argparse
import dataclasses
import json

from codeloupe.constants import MAX_TOUR_ENTRY_POINTS, MAX_TOUR_NAMES, TOUR_ENTRY_POINTS, TOUR_NAMES

from .arguments import add_workspace_args, count_up_to
from .common import index_workspace, one_line, open_workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tour", help="where to start reading: entry points and most mentioned names")
    add_workspace_args(parser)
    parser.add_argument("--limit", type=count_up_to(MAX_TOUR_NAMES), default=TOUR_NAMES,
                        help=f"how many names, 1-{MAX_TOUR_NAMES} (default {TOUR_NAMES})")
    parser.add_argument("--entry-points", type=count_up_to(MAX_TOUR_ENTRY_POINTS), default=TOUR_ENTRY_POINTS,
                        metavar="N", help=f"how many entry points, strongest first, 1-{MAX_TOUR_ENTRY_POINTS} "
                                          f"(default {TOUR_ENTRY_POINTS})")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    try:
        index_workspace(ws, embed=False, quiet=args.json)  # the tour reads only the lexical index
        tour = ws.tour(limit=args.limit, entry_point_limit=args.entry_points)
    finally:
        ws.close()
    if args.json:
        # `/v1/tour`'s and MCP's JSON, `notes` too: theirs note an index still being built; this one answers after
        # indexing, so it has none.
        print(json.dumps({**dataclasses.asdict(tour), "notes": []}, indent=2))
        return 0
    print(f"Where to start reading {one_line(str(tour.root))}\n")
    print("Entry points" if tour.entry_points else "No entry points found (no manifest, main, guard or shebang)")
    for point in tour.entry_points:
        print(one_line(f"  {point.path}:{point.line}  {point.kind}: {point.detail}"))
    if tour.entry_points_not_shown:
        print(f"  and {tour.entry_points_not_shown} more (--entry-points N lists more)")
    print(f"\nMost mentioned names (of {tour.names}; a mention is a file whose text holds the name)")
    width = max((len(s.name) for s in tour.stops), default=0)
    for stop in tour.stops:
        also = f" (+{stop.definitions - 1} more definitions)" if stop.definitions > 1 else ""
        print(one_line(f"  {stop.mentions:>5} files  {stop.name:<{width}}  {stop.kind} {stop.path}:{stop.line}{also}"))
    return 0
