"""`codeloupe` command line: one module per subcommand, registered here in one place.

Each subcommand module exposes `register(subparsers)`, which adds its parser and sets `func` to a
callable `(args) -> int` (the exit code). Errors meant for the user are raised as `CliError`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from codeloupe.types import package_version

from .stopping import StopBySignal

# Order here is the order of `codeloupe --help`.
_SUBCOMMANDS = ("index", "search", "locate", "get", "ask", "flows", "tour", "related", "graph", "chunks",
                "languages", "scan", "forge", "stats", "eval", "mcp", "serve", "worker", "admin", "trust")


class CliError(Exception):
    """A user-facing failure: printed as `codeloupe: <message>`, exit status 2 unless given."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


class IntermixedParser(argparse.ArgumentParser):
    """A subcommand's parser that takes its options between its positionals, as `git` and `rg` do:
    `search PATH --no-embed QUERY`, where argparse alone assigns positionals in runs between options and took the
    lone PATH for the query. The options are parsed first, with the positionals switched off, then the strings
    left, in order, are the positionals: `parse_intermixed_args`' two passes, except that only the strings before
    the first `--` can be options (argparse's own first pass drops a `--` that comes before every positional,
    `search -- PATH -q`, and then reads `-q` as an option). A parser with subcommands of its own (`admin`) parses
    as argparse does; its ACTIONs take its options again, so they may come after the ACTION too."""

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        positionals = self._get_positional_actions()
        if any(action.nargs in (argparse.PARSER, argparse.REMAINDER) for action in positionals):
            return super().parse_known_args(args, namespace)
        strings = list(sys.argv[1:] if args is None else args)
        end = strings.index("--") if "--" in strings else len(strings)
        # An error in either pass shows the whole usage, not the one with the switched-off positionals.
        with _set(self.usage or self.format_usage().removeprefix("usage: ").rstrip(), [self], "usage"):
            with _set(argparse.SUPPRESS, positionals, "nargs", "default"):
                namespace, left = super().parse_known_args(strings[:end], namespace)
            with _set(False, [*self._get_optional_actions(), *self._mutually_exclusive_groups], "required"):
                return super().parse_known_args(left + strings[end:], namespace)


@contextmanager
def _set(value: object, things: Iterable[object], *names: str) -> Iterator[None]:
    """Each thing's attributes NAMES set to VALUE for the block, then as they were."""
    saved = [(thing, name, getattr(thing, name)) for thing in things for name in names]
    for thing, name, _ in saved:
        setattr(thing, name, value)
    try:
        yield
    finally:
        for thing, name, before in saved:
            setattr(thing, name, before)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is (but not inside an import: `StopBySignal`), as Ctrl-C's KeyboardInterrupt
    is, so that it stops the same way (an index at its next file, its workers killed, closed): its default action
    killed the process mid-write, the index unclosed and a worker pool never let go (the resource tracker's leaked
    semaphores under the command's output)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codeloupe",
        description="Code retrieval for the editor: ranked, complete bundles with no model call; walkthroughs "
                    "whose code is read from disk.")
    parser.add_argument("--version", action="version", version=f"codeloupe {package_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       parser_class=IntermixedParser)
    for name in _SUBCOMMANDS:
        importlib.import_module(f"codeloupe.cli.{name}_cmd").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from codeloupe.cli.common import log_visibly, visible  # common imports this module
    from codeloupe.errors import StoreError

    parser = build_parser()
    args = parser.parse_args(argv)
    log_visibly()
    # Only the main thread takes signals (a test may run a command on another); `serve`, `mcp` and `worker` set
    # their own handlers for their own stops.
    previous = signal.signal(signal.SIGTERM, StopBySignal(Terminated)) \
        if threading.current_thread() is threading.main_thread() else None
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(visible(f"codeloupe: {exc}"), file=sys.stderr)
        return exc.status
    except StoreError as exc:
        # The index cannot be read now, past the open each command turns into a CliError: the shared index's
        # database went away mid-command (`stats` and `flows` ended in a traceback), a repository was dropped.
        print(visible(f"codeloupe: {exc}"), file=sys.stderr)
        return 2
    except Terminated:
        print("codeloupe: stopped by SIGTERM", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("codeloupe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`, a pager quit early): stop quietly, as a shell tool killed by SIGPIPE
        # does, and keep the interpreter's last flush of stdout from raising it again.
        _discard_stdout()
        return 128 + 13
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor behind stdout (a test's capture)
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
