"""`codeloupe` command line: one module per subcommand, registered here in one place.

Each subcommand module exposes `register(subparsers)`, which adds its parser and sets `func` to a
callable `(args) -> int` (the exit code). Errors meant for the user are raised as `CliError`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# Order here is the order of `codeloupe --help`.
_SUBCOMMANDS = ("index", "search", "locate", "get", "ask", "flows", "tour", "related", "graph", "chunks",
                "languages", "scan", "forge", "stats", "eval", "mcp", "serve", "worker", "admin", "trust")


class CliError(Exception):
    """A user-facing failure: printed as `codeloupe: <message>`, exit status 2 unless given."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codeloupe",
        description="Code retrieval for the editor: ranked, complete bundles with no model call; walkthroughs "
                    "whose code is read from disk.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _SUBCOMMANDS:
        importlib.import_module(f"codeloupe.cli.{name}_cmd").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from codeloupe.cli.common import log_visibly, visible  # common imports this module

    parser = build_parser()
    args = parser.parse_args(argv)
    log_visibly()
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(visible(f"codeloupe: {exc}"), file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("codeloupe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`, a pager quit early): stop quietly, as a shell tool killed by SIGPIPE
        # does, and keep the interpreter's last flush of stdout from raising it again.
        _discard_stdout()
        return 128 + 13


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor behind stdout (a test's capture)
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
