"""`codeloupe mcp [PATH]`: an MCP server for coding agents over stdio (the `codeloupe_mcp` package)."""

from __future__ import annotations

import _thread
import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from . import CliError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mcp", help="serve one workspace to coding agents over MCP (stdio)",
        description="Speak MCP over stdin/stdout for one workspace: tools search, expand, locate, graph, status "
                    "(and ask when a chat model is configured). Settings are read as for every other command.")
    parser.add_argument("path", nargs="?", default=".",
                        help="the workspace folder, or a folder inside it (the root is found above it; default: the "
                             "current one)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.path)
    if not root.is_dir():
        raise CliError(f"{root}: no such directory")
    from codeloupe.api import WorkspaceError
    from codeloupe.parallel import when_parent_changes
    from codeloupe.settings import SettingsError, load_settings
    from codeloupe.store import StoreError

    from .common import locate_workspace

    try:
        from codeloupe_mcp.server import build_server
        from codeloupe_mcp.stdio import serve_stdio
        from codeloupe_serving.warm import WarmWorkspace
    except ImportError as exc:  # the server extras are not installed
        raise CliError(f"the MCP server needs the `mcp` package: {exc}") from exc
    try:
        warm = WarmWorkspace(locate_workspace(root, load_settings(root), served=True).root)
    except (SettingsError, WorkspaceError, StoreError) as exc:
        raise CliError(str(exc)) from exc
    # An MCP client that ends the server with SIGTERM (its stdin closed 2 s before, or not at all) has it stop its
    # index and close it, as a closed stdin does; so does Ctrl-C in a terminal, which asyncio's own handler turned
    # into a cancellation that then waited, the index going on, for a line on stdin.
    closing = threading.Lock()

    def close() -> None:
        with closing:
            warm.close()

    def leave(signum: int, _frame: object) -> None:
        # Never raises in the main thread: an exception there can land inside an import and leave the interpreter's
        # import lock held, every later import (the close's too) waiting for ever, as `serve` once hung. The close
        # runs on a thread of its own (a low-level one: `threading` takes locks the interrupted thread may hold);
        # a second signal while it waits kills the process.
        signal.signal(signum, signal.SIG_DFL)
        _thread.start_new_thread(_close_and_leave, (close, 0 if signum == signal.SIGTERM else 128 + signum))

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, leave)
    # A client killed or crashed while another process holds its end of the pipes (a wrapper, a child that inherited
    # them) never closes stdin, and the server ran on for good, its index open. MCP names no client process, but the
    # one that started the server is its parent: once that has died, the workspace is closed as on SIGTERM.
    when_parent_changes(os.getppid(), lambda: _close_and_leave(close, 1))
    try:
        serve_stdio(build_server(warm))
    finally:
        close()
    return 0


def _close_and_leave(close: Callable[[], None], status: int) -> None:
    """Close, then leave at once: the SDK's thread reading stdin waits in a read that only the client's end of the
    pipe can end, and the interpreter's exit would wait for that thread (the replies written are flushed first)."""
    close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
