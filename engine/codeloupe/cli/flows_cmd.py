"""`codeloupe flows PATH`: the cached walkthroughs (flows) of a workspace; re-ask stale ones, or pre-ask.

`--refresh` re-indexes, then re-asks every flow a changed file made stale; `--warm` pre-asks the workspace's
main workflows (questions derived from its most mentioned definitions). Both need a chat model; listing does
not change anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import TYPE_CHECKING

from codeloupe.wording import counted_noun

from .arguments import add_chat_args, add_workspace_args, positive_count
from .common import index_workspace, named, one_line, open_workspace, require_chat_model

if TYPE_CHECKING:
    from codeloupe.types import Flow, FlowOutcome


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("flows", help="list cached walkthroughs; re-ask stale ones or pre-ask")
    add_workspace_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--refresh", action="store_true", help="re-index, then re-ask the stale flows")
    parser.add_argument("--warm", action="store_true", help="pre-ask the workspace's main workflows")
    parser.add_argument("--warm-limit", type=positive_count, default=5,
                        help="how many questions --warm asks (default 5)")
    add_chat_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ws = open_workspace(args, chat_base_url=args.chat_base_url, chat_model=args.chat_model)
    if args.refresh or args.warm:  # each question would otherwise be reported failed, one by one, with status 0
        require_chat_model(ws, "--refresh and --warm ask")
    try:
        outcomes: list[FlowOutcome] = []
        if args.refresh or args.warm:
            index_workspace(ws, embed=True, quiet=args.json)
            if args.refresh:
                outcomes += ws.refresh_flows()
            if args.warm:
                outcomes += ws.warm_flows(limit=args.warm_limit)
        flows, kept = ws.flows(), ws.flows_kept()
    finally:
        ws.close()
    if args.json:
        print(json.dumps({"flows": [dataclasses.asdict(f) for f in flows],
                          "asked": [dataclasses.asdict(o) for o in outcomes]}, indent=2))
        return 0
    for outcome in outcomes:
        detail = f": {outcome.detail}" if outcome.detail else ""
        if outcome.replaced:  # answered, but the cache holds no more flows for it: say which it took the place of
            detail = (f": in place of the earlier {counted_noun(len(outcome.replaced), 'flow')} of "
                      + ", ".join(named(q) for q in outcome.replaced))
        print(one_line(f"{outcome.outcome:>8}  {outcome.question}{detail}"))
    if outcomes:
        print()
    if not kept:
        print("flows are turned off (the `flows` setting or CODELOUPE_NO_FLOWS): no walkthrough is kept"
              + ("; those kept before, below, answer no question until they are on again" if flows else ""))
        if not flows:
            return 0
    print("\n".join(_line(f) for f in flows) if flows else "no cached walkthroughs yet (each successful ask adds one)")
    return 0


def _line(flow: Flow) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(flow.created))
    state = "  STALE (a cited file changed: flows --refresh)" if flow.stale else ""
    return (f"#{flow.id}  {named(flow.question)}  [{flow.mode}]  {when}  served {flow.served}{state}\n"
            f"      cites {one_line(', '.join(flow.files))}")
