"""`codeloupe stats PATH`: what the index holds, without changing it."""

from __future__ import annotations

import argparse
import dataclasses
import json

from .common import add_workspace_args, open_workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("stats", help="show what the workspace index holds")
    add_workspace_args(parser)
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    try:
        status = ws.status()
    finally:
        ws.close()
    if args.json:
        print(json.dumps(dataclasses.asdict(status), indent=2))
        return 0
    total = status.vectors_total or 1
    print(f"workspace {status.root}")
    print(f"  index     {status.index_path} (schema {status.schema_version})")
    print(f"  files     {status.files}   chunks {status.chunks}   symbols {status.symbols}")
    print("  languages " + (", ".join(f"{k} {v}" for k, v in status.languages.items()) or "-"))
    print(f"  vectors   {status.vectors_done}/{status.vectors_total} chunks ({status.vectors_done / total:.0%}), "
          f"{status.skeleton_vectors_done}/{status.files} skeletons  [{status.provider} {status.model}]")
    return 0
