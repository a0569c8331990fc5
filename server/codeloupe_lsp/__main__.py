"""`codeloupe-lsp` / `python -m codeloupe_lsp`: stdio by default, `--tcp HOST:PORT` for debugging."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys

from codeloupe.types import VisibleFormatter
from codeloupe_lsp import __version__


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


SWITCH_INTERVAL_S = 0.001
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="codeloupe-lsp", description="codeloupe language server")
    parser.add_argument("--version", action="version", version=f"codeloupe-lsp {__version__}")
    # vscode-languageclient appends --stdio for TransportKind.stdio; stdio is the default anyway.
    parser.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (the default)")
    parser.add_argument("--tcp", type=_host_port, metavar="HOST:PORT", help="serve one TCP client instead")
    parser.add_argument("--log-level", default="WARNING", type=str.upper, choices=LOG_LEVELS,
                        help="logging level for stderr (default WARNING)")
    args = parser.parse_args(argv)

    # stdout is the protocol channel: logs go to stderr only (the editor's output panel or log file), escaped as
    # the editor's messages are: they name the workspace's files.
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(VisibleFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[stderr])
    # A search that meets the start-up's background work (the walk, the graph's load) gives up the interpreter at
    # each query to the index and waits up to a switch interval to have it back, hundreds of times: at 40K files
    # the worst answer in the first seconds after the first took 1.6-2.0 s at Python's 5 ms, 0.8-1.6 s at 1 ms,
    # and the start-up refresh ended sooner (bench/cold_scale.py --follow; docs/measurements.md).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    from codeloupe_lsp.server import build_server

    server = build_server()
    if args.tcp:
        server.start_tcp(*args.tcp)
    else:
        server.start_io()  # SIGTERM ends it as `exit` does
    # Worker threads may still be in an index or a model call: leave without joining them (see shutdown).
    # (pygls has already flushed and closed stdout.) os._exit runs no finalizer: a worker pool already shut down
    # (a removed folder's graph facts, killed) but still in a reference cycle would leave its queues' named
    # semaphores to the resource tracker ("leaked semaphore objects" on stderr, once in a loaded CI run), so the
    # cycles are collected first, which runs their finalizers.
    logging.shutdown()
    gc.collect()
    os._exit(server.exit_status)


if __name__ == "__main__":
    main()
