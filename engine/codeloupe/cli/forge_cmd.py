"""`codeloupe forge PATH [--ext EXT]`: the chat model writes a chunk strategy for each uncovered file type.

A strategy is accepted only when it chunks every matching file as a line partition; it is then written to
`.codeloupe/strategies/` and trusted (its sha256 goes to the user's trust store). Indexing uses it from then on;
no model is called after this command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from . import CliError
from .arguments import add_chat_args, add_workspace_args
from .common import one_line, open_workspace, require_chat_model


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("forge", help="have the chat model write chunk strategies for uncovered files")
    add_workspace_args(parser)
    parser.add_argument("--ext", action="append", default=[], metavar="EXT",
                        help="only this extension (repeatable; default: every uncovered one with 2+ files)")
    parser.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    add_chat_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.discover import DiscoverError
    from codeloupe.forge import ForgeAttempt, ForgeError

    def show(extension: str, attempt: ForgeAttempt) -> None:
        if args.json:
            return
        verdict = "accepted" if not attempt.problems else f"refused ({len(attempt.problems)} problems)"
        # The extension is of the workspace's file names, a problem may quote the model's code: shown escaped.
        print(one_line(f"  {extension} attempt {attempt.number}: {verdict}"), file=sys.stderr)
        for problem in attempt.problems[:3]:
            print(one_line(f"      {problem}"), file=sys.stderr)

    ws = open_workspace(args, chat_base_url=args.chat_base_url, chat_model=args.chat_model)
    require_chat_model(ws, "forge asks")
    try:
        outcomes = ws.forge(args.ext or None, on_attempt=show)
    except (ForgeError, DiscoverError) as exc:
        raise CliError(str(exc)) from exc
    finally:
        ws.close()
    if args.json:
        print(json.dumps([dataclasses.asdict(o) for o in outcomes], indent=2))
    elif not outcomes:
        print("nothing to forge: no uncovered extension has 2 or more files (see `codeloupe scan`)")
    for outcome in outcomes if not args.json else []:
        if outcome.accepted:
            print(one_line(f"{outcome.extension}: wrote and trusted {outcome.path} (sha256 {outcome.sha256[:16]}…); "
                           "the next index uses it"))
        else:
            print(one_line(f"{outcome.extension}: nothing written: {outcome.reason}"))
    return 0 if all(o.accepted for o in outcomes) else 1
