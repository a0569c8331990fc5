"""`codeloupe chunks FILE`: show how the chunker partitions one file, as the index of its workspace does (that
workspace's `chunk_budget` and trusted chunk strategies)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from codeloupe.cli import CliError
from codeloupe.cli.common import COMMAND_LINE, one_line
from codeloupe.cli.workspace_root import find_workspace_root
from codeloupe.wording import amount

if TYPE_CHECKING:
    from codeloupe.chunk.strategies import Strategy
    from codeloupe.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("chunks", help="show a file's chunks (its line partition), as its workspace's "
                                                  "index chunks it")
    parser.add_argument("file", help="the file to chunk")
    parser.add_argument("--json", action="store_true", help="print the chunks as a JSON list")
    parser.add_argument("--chunk-budget", type=int,
                        help="non-whitespace characters per chunk (default: the workspace's chunk_budget)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.chunk import chunk_file_apart, detect_language
    from codeloupe.regular_file import read_head
    from codeloupe.settings import MAX_FILE_BYTES_CEILING

    path = Path(args.file)
    if not path.exists():
        raise CliError(f"{path}: no such file")
    if not path.is_file():
        raise CliError(f"{path}: not a regular file")
    root, settings, strategies = _chunking(path, args.chunk_budget)
    budget = settings.chunk_budget
    try:
        data = read_head(path, MAX_FILE_BYTES_CEILING)
    except OSError as exc:
        raise CliError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    # A file no index reads has no cut to explain: a 2 GB file was read whole, and chunking it asked for some 10 GB of
    # memory (a MemoryError traceback, under a limit).
    if len(data) > MAX_FILE_BYTES_CEILING:
        raise CliError(f"{path}: over {MAX_FILE_BYTES_CEILING // 2**20} MiB, more than any index reads "
                       "(max_file_bytes)")
    text = data.decode("utf-8", errors="surrogateescape")
    # Its path in the workspace, as the index names it: a strategy claims a file by it (never one under
    # `.codeloupe/`). A link is named where it lies, not where it points (maybe out of the workspace).
    rel_path = (path.parent.resolve() / path.name).relative_to(root).as_posix()
    _tell_skip(root, rel_path, settings, path)
    result = chunk_file_apart(rel_path, text, detect_language(rel_path, text[:256]), budget, strategies)
    if args.json:
        rows = [{k: v for k, v in asdict(chunk).items() if k != "text"} | {"symbols": list(chunk.symbols)}
                for chunk in result.chunks]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    # The file's name, its headings and a strategy's failure are not to drive the terminal, nor to break the lines.
    print(f"{one_line(path.as_posix())}: {result.language}, {amount(len(result.chunks), 'chunk')}, "
          f"{amount(len(result.symbols), 'symbol')}"
          + (f" (fallback: {one_line(result.fallback_reason)})" if result.fallback_reason else ""))
    for chunk in result.chunks:
        lines = f"{chunk.start_line}-{chunk.end_line}"
        print(f"{lines:>11}  {chunk.kind:<8} {one_line(chunk.name or '-'):<32} {one_line(chunk.breadcrumb)}")
    return 0


def _tell_skip(root: Path, rel_path: str, settings: Settings, path: Path) -> None:
    """Say on stderr when the workspace's index skips the file (its chunks below are then in no index): its reason
    is the one `index` counts and `stats --skipped` lists."""
    from codeloupe.discover import file_skip_reason

    try:
        reason = file_skip_reason(root, rel_path, settings)
    except OSError as exc:
        reason = f"unreadable: {exc.strerror or exc}"
    if reason:
        print(f"{one_line(path.as_posix())}: the index skips this file ({one_line(reason)}), so none of these "
              "chunks is in it", file=sys.stderr)


def _chunking(path: Path, chunk_budget: int | None) -> tuple[Path, Settings, tuple[Strategy, ...]]:
    """The root of `path`'s workspace (found as `codeloupe index` finds it), its settings (the chunk budget) and the
    trusted strategies its index chunks with: with the defaults only, `chunks` disagreed with the index it
    explains."""
    from codeloupe.chunk.strategies import load_workspace_strategies
    from codeloupe.settings import SettingsError, load_settings

    try:
        index_path = load_settings(None).index_path
        root = find_workspace_root(path.parent, lambda folder: index_path(folder).exists()).root
        settings = load_settings(root, {"chunk_budget": chunk_budget}, overrides_from=COMMAND_LINE)
    except SettingsError as exc:
        raise CliError(str(exc)) from exc
    load = load_workspace_strategies(root)
    # They name files of the workspace. Not the endpoint notice: chunking one file sends nothing anywhere.
    for warning in [*settings.unused_notices, *load.warnings]:
        print(one_line(warning), file=sys.stderr)
    return root, settings, tuple(load.strategies)
