"""`codeloupe stats PATH`: what the index holds, without changing it."""

from __future__ import annotations

import argparse
import dataclasses
import json

from codeloupe.types import IndexStatus

from .arguments import add_workspace_args
from .common import counted, one_line, open_workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("stats", help="show what the workspace index holds")
    add_workspace_args(parser)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skipped", action="store_true",
                        help="also list each file skipped for its content (generated, minified, ...), its name "
                             "(binary file types, lockfiles, ...) or size, each folder the index could not read, and "
                             "each file a chunk strategy or the chunker failed on, and why")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.discover import UNREADABLE_FOLDER
    from codeloupe.index import UNREADABLE_FOLDERS_NAMED, WALK_SKIPS_NAMED

    ws = open_workspace(args, indexed=True)
    try:
        status = ws.status()
        skipped = ws.skipped_files() if args.skipped else []
        problems = ws.chunking_problems()
    finally:
        ws.close()
    # What the index counts but does not name: unreadable folders past the first it names, and files skipped by name
    # or size (or as compiled copies) past the first it names (a folder of 20K images).
    more = status.skipped.get(UNREADABLE_FOLDER, 0) - sum(s.reason == UNREADABLE_FOLDER for s in skipped)
    files_more = sum(n for reason, n in status.skipped.items() if reason != UNREADABLE_FOLDER) \
        - sum(s.reason != UNREADABLE_FOLDER for s in skipped)
    if args.json:
        out = {**dataclasses.asdict(status), "chunking_problems": [dataclasses.asdict(p) for p in problems]}
        if args.skipped:
            out.update(skipped_files=[dataclasses.asdict(s) for s in skipped],
                       skipped_files_not_listed=max(files_more, 0), unreadable_folders_not_listed=max(more, 0))
        print(json.dumps(out, indent=2))
        return 0
    total = status.vectors_total or 1
    # The folder's name (a clone's is the repository's) and the model a trusted workspace's files set are shown
    # escaped, as a file's name is below.
    print(f"workspace {one_line(str(status.root))}")
    print(f"  index     {one_line(str(status.index_path))} (schema {status.schema_version})")
    if status.indexing:
        print(f"  WARNING   {one_line(status.indexing)}")
    print(f"  files     {status.files}   chunks {status.chunks}   symbols {status.symbols}" + _why_no_file(status))
    print("  languages " + (counted(status.languages.items()) or "-"))
    print(f"  vectors   {status.vectors_done}/{status.vectors_total} chunks ({status.vectors_done / total:.0%}), "
          f"{status.skeleton_vectors_done}/{status.files} skeletons  [{one_line(f'{status.provider} {status.model}')}]")
    if status.skipped:
        print("  skipped   " + counted((one_line(reason), count) for reason, count in status.skipped.items())
              + ("" if args.skipped else "  (--skipped lists them)"))
    if args.skipped:
        print(("  no file is skipped" if not skipped else "  skipped files and unreadable folders, and why")
              + " (the files ignore rules leave out and the folders not walked, such as node_modules, are counted "
                "by `codeloupe index` only)")
    for s in skipped:  # a file's name, nor a reason as the index holds it, is to drive the terminal or break lines
        print(f"    {one_line(s.path)}  ({one_line(s.reason)})")
    if args.skipped and more > 0:
        print(f"    ... and {more} more unreadable folder{'' if more == 1 else 's'} (the index names the first "
              f"{UNREADABLE_FOLDERS_NAMED} by path)")
    if args.skipped and files_more > 0:
        print(f"    ... and {files_more} more file{'' if files_more == 1 else 's'} (of those skipped by their name or "
              f"size or as compiled copies, the index names the first {WALK_SKIPS_NAMED:,} by path)")
    if problems:
        print(f"  chunking  {len(problems)} file{'' if len(problems) == 1 else 's'} not chunked as planned (a chunk "
              "strategy or the chunker failed on them)" + ("" if args.skipped else "  (--skipped lists them)"))
    for problem in problems if args.skipped else []:
        print(f"    {one_line(problem.path)}  ({one_line(problem.reason)})")
    return 0


def _why_no_file(status: IndexStatus) -> str:
    """Why the index holds no file, after the counts ("" when it holds some): an index that ran and found
    nothing to hold read as one never run ("nothing indexed yet"), sending the user to run it again."""
    if status.files:
        return ""
    if status.skipped:
        return "   (indexed: every file found was skipped, as counted below)"
    if status.indexed:
        return ("   (indexed: no file found to index; ignore rules and the folders not walked, such as node_modules,"
                " may leave every one out: `codeloupe index` counts those)")
    return "   (nothing indexed yet: `codeloupe index` indexes it)"
