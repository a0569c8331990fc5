"""`codeloupe scan PATH`: which file extensions no built-in chunker covers (the input to `codeloupe forge`)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from codeloupe.wording import amount, counted_noun

from . import CliError
from .arguments import add_workspace_args
from .common import one_line, open_folder, say_notices


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("scan", help="list the file extensions no chunker covers (deterministic)")
    add_workspace_args(parser)
    parser.add_argument("--json", action="store_true", help="print the census as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.api import scan
    from codeloupe.discover import DiscoverError
    from codeloupe.forge import MIN_FILES

    # The census is of the files on disk: no index is opened (one was created for a folder never indexed).
    root, settings = open_folder(args)
    try:
        census, strategy_load = scan(root, settings)
    except DiscoverError as exc:
        raise CliError(str(exc)) from exc
    say_notices(settings.notices, strategy_load.warnings)
    if args.json:
        print(json.dumps(dataclasses.asdict(census), indent=2))
        return 0
    print(f"{one_line(str(census.root))}: {amount(census.files, 'file')}, {census.covered} covered by a chunker")
    # codeloupe's own files (`.codeloupe/`) no chunker covers are in no list of the census: counted here
    own = census.files - census.covered - sum(count.files for count in census.uncovered)
    if not census.uncovered:
        print("  every file type has a chunker" if not own else "  every file type outside .codeloupe/ has a chunker")
    for count in census.uncovered:
        label = one_line(count.extension) or "(no extension)"  # of the workspace's file names
        hint = "  (forge can write one)" if count.extension and count.files >= MIN_FILES else ""
        whose = "its" if count.files == 1 else "their"
        print(f"  {label:<16} {count.files:>5} {counted_noun(count.files, 'file')}, no chunker of {whose} own{hint}")
    if own:
        print(f"  {'.codeloupe/':<16} {own:>5} {counted_noun(own, 'file')} of codeloupe's own, no chunker (no chunk "
              f"strategy cuts {'it' if own == 1 else 'them'})")
    for count in census.forged:
        print(f"  {one_line(count.extension):<16} {count.files:>5} {counted_noun(count.files, 'file')}, chunked by the strategy "
              f"{count.strategy!r}")
    return 0
