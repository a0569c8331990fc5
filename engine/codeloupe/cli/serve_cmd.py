"""`codeloupe serve [PATH ...]`: the HTTP API, MCP over streamable HTTP and the search page (`codeloupe_web`)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from . import CliError
from .arguments import add_store_url, number_of, repository_list


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve workspaces over HTTP: JSON API, MCP at /mcp, a search page",
        description="One process holding warm workspaces: /v1/search and friends (see docs/http.md), MCP over "
                    "streamable HTTP at /mcp, and a search page at /. Loopback only unless --host says otherwise; "
                    "beyond loopback a bearer token is required (one is generated and printed if not given).")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="workspace folders, or folders inside them (each root is found above it; default: .)")
    add_store_url(parser, "serve repositories of the shared index (postgresql://...) instead of folders: no "
                          "checkout needed, files are read from the index at the commit it was indexed at")
    parser.add_argument("--repo", action="extend", type=repository_list, default=[], metavar="NAME",
                        help="repositories of the shared index to serve, --repo A,B or repeated (default with"
                             " --store: every repository); without --store, from the shared index the store_url"
                             " setting names (CODELOUPE_STORE_URL or your config.toml)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=7341, help="port (default 7341; 0 picks a free one)")
    parser.add_argument("--token", help="require `Authorization: Bearer TOKEN` (mandatory beyond loopback; "
                                        "CODELOUPE_SERVE_TOKEN also sets it)")
    parser.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                        help="allow browser pages from this origin to call the API (repeatable; default none)")
    parser.add_argument("--rate", type=number_of("requests per second"),
                        help="requests per second per client (default 100)")
    parser.set_defaults(func=run)


def _port(value: str) -> int:
    if not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {value!r}")
    return int(value)


def run(args: argparse.Namespace) -> int:
    # Folders, each indexed where the settings say (the shared index too, where store_url is set), or
    # repositories of the shared index read with no checkout.
    shared = bool(args.store_url or args.repo)
    if shared and args.paths:
        raise CliError("serve --store / --repo serves repositories of the shared index: name them with --repo, not"
                       " PATH")
    args.paths = args.paths or ([] if shared else ["."])
    for path in args.paths:
        if Path(path).is_file():
            raise CliError(f"{path}: is a file, not a directory (pass the workspace folder)")
        if not Path(path).is_dir():
            raise CliError(f"{path}: no such directory")
    try:
        import uvicorn

        from codeloupe_serving.warm import WarmWorkspaces
        from codeloupe_web.app import create_app, mcp_path
        from codeloupe_web.guard import GuardConfig
        from codeloupe_web.listen import bind, server_config
    except ImportError as exc:
        raise CliError(f"serving needs the server packages (fastapi, uvicorn, mcp): {exc}") from exc
    from codeloupe.api import WorkspaceError, open_shared, reopen_shared
    from codeloupe.settings import SettingsError, load_settings
    from codeloupe.store import StoreError
    from codeloupe.types import one_line

    from .common import locate_workspace, shared_store_url

    url = shared_store_url(args) if shared else ""
    token = args.token or os.environ.get("CODELOUPE_SERVE_TOKEN") or None
    extra = {"rate_per_s": args.rate} if args.rate else {}
    guard, generated = GuardConfig.for_bind(args.host, token, cors_origins=args.cors_origin, **extra)
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    try:
        if shared:
            # Listed again as calls come: a repository indexed (or dropped) since is served (or no longer).
            overrides = {"store_url": url}
            pool = WarmWorkspaces(open_shared(args.repo, overrides),
                                  relist=lambda opened: reopen_shared(opened, args.repo, overrides))
        else:
            pool = WarmWorkspaces([locate_workspace(Path(p), load_settings(Path(p)), served=True).root
                                   for p in args.paths])
    except (SettingsError, WorkspaceError, StoreError) as exc:
        sock.close()
        raise CliError(str(exc)) from exc
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    # SIGTERM ends the serving as an ordinary exit: the workspaces closed below, status 0. Taken before the
    # "serving" line (a SIGTERM sent as soon as it was read killed the process with the default action), and by
    # uvicorn itself while it runs (its graceful shutdown, then the signal passed back to this handler).
    stopping = _Stopping()
    signal.signal(signal.SIGTERM, stopping.ask)
    try:
        roots = [one_line(str(w.root)) for w in pool.all]
        # With several, each root's own MCP endpoint: "MCP at /mcp" left the others' to be guessed.
        mcp = ", ".join(f"{mcp_path(i)} for {root}" for i, root in enumerate(roots)) if len(roots) > 1 else "/mcp"
        print(f"codeloupe: serving {', '.join(roots)} at http://{shown}:{port}/ "
              f"(MCP at {mcp}; API reference at /openapi.json)", file=sys.stderr, flush=True)
        if generated:
            print(f"codeloupe: bearer token (send `Authorization: Bearer <token>`): {guard.token}; the search page: "
                  f"http://{shown}:{port}/#token={guard.token}", file=sys.stderr, flush=True)
        server = uvicorn.Server(server_config(create_app(pool, guard), timeout_graceful_shutdown=5))
        stopping.server = server
        if not stopping.asked:
            server.run(sockets=[sock])
    finally:
        stopping.closing = True
        pool.close()
        sock.close()
    return 0


class _Stopping:
    """`serve`'s SIGTERM handler: it asks uvicorn to stop (or not to start) and never raises. An exception raised
    in the main thread by a signal can land inside an import, which this thread does plenty of as it starts (the
    app's modules, uvicorn's) while the first index imports the engine's on its own thread; left there, it kept
    the interpreter's import lock, and every later import in any thread waited for ever (the close included: a
    SIGTERM right after the "serving" line hung the server, 1 run in 4 on a loaded machine). A second SIGTERM while
    the workspaces close kills the process, as the default action would."""

    def __init__(self) -> None:
        self.asked = False
        self.closing = False
        self.server: Any = None

    def ask(self, signum: int, _frame: object) -> None:
        if self.closing:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.asked = True
        if self.server is not None:
            self.server.should_exit = True
