"""`codeloupe chunks FILE`: show how the chunker partitions one file."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from codeloupe.chunk import chunk_file, detect_language
from codeloupe.cli import CliError
from codeloupe.cli.common import amount, one_line
from codeloupe.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("chunks", help="show a file's chunks (its line partition)")
    parser.add_argument("file", help="the file to chunk")
    parser.add_argument("--json", action="store_true", help="print the chunks as a JSON list")
    parser.add_argument("--budget", type=int, default=Settings().chunk_budget,
                        help="non-whitespace characters per chunk (default: %(default)s)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.exists():
        raise CliError(f"{path}: no such file")
    if not path.is_file():
        raise CliError(f"{path}: not a regular file")
    if args.budget < 1:
        raise CliError(f"--budget must be at least 1, got {args.budget}")
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise CliError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    result = chunk_file(path.as_posix(), text, detect_language(path.as_posix(), text[:256]), args.budget)
    if args.json:
        rows = [{k: v for k, v in asdict(chunk).items() if k != "text"} | {"symbols": list(chunk.symbols)}
                for chunk in result.chunks]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    # The file's name, its headings and a strategy's failure are not to drive the terminal, nor to break the lines.
    print(f"{one_line(result.path)}: {result.language}, {amount(len(result.chunks), 'chunk')}, "
          f"{amount(len(result.symbols), 'symbol')}"
          + (f" (fallback: {one_line(result.fallback_reason)})" if result.fallback_reason else ""))
    for chunk in result.chunks:
        lines = f"{chunk.start_line}-{chunk.end_line}"
        print(f"{lines:>11}  {chunk.kind:<8} {one_line(chunk.name or '-'):<32} {one_line(chunk.breadcrumb)}")
    return 0
