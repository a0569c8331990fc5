"""What the subcommands share: the workspace argument, settings flags, and the progress display."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from codeloupe.api import Workspace, WorkspaceError
from codeloupe.discover import DiscoverError
from codeloupe.index import ProgressFn
from codeloupe.settings import SettingsError, load_settings
from codeloupe.store import StoreError
from codeloupe.types import Progress

from . import CliError
from .workspace_root import find_workspace_root


def add_workspace_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="the workspace folder, or a folder inside it (the workspace root is found above it)")
    group = parser.add_argument_group("settings (override .codeloupe.toml and CODELOUPE_* variables)")
    group.add_argument("--embed-provider", choices=["local", "openai", "onnx", "none"])
    group.add_argument("--embed-model")
    group.add_argument("--embed-base-url")
    group.add_argument("--chunk-budget", type=int)
    group.add_argument("--max-file-bytes", type=int)
    group.add_argument("--ignore", action="append", help="an extra gitignore-style glob (repeatable)")


def open_workspace(args: argparse.Namespace) -> Workspace:
    root = Path(args.path)
    if not root.exists():
        raise CliError(f"{root}: no such directory")
    if not root.is_dir():
        raise CliError(f"{root}: is a file, not a directory (pass the workspace folder)")
    overrides = {key: getattr(args, key, None) for key in
                 ("embed_provider", "embed_model", "embed_base_url", "chunk_budget", "max_file_bytes", "ignore")}
    try:
        index_path = load_settings(root, overrides).index_path
        located = find_workspace_root(root, lambda folder: index_path(folder).exists())
        root, args.subpath = located.root, located.subpath
        if located.subpath:
            print(f"codeloupe: workspace {root} (it has {located.reason}); {located.subpath} is a folder inside it",
                  file=sys.stderr)
        settings = load_settings(root, overrides)
        ws = Workspace(root, settings)
    except (SettingsError, WorkspaceError, StoreError) as exc:
        raise CliError(str(exc)) from exc
    if ws.store.rebuilt_reason:
        print(f"codeloupe: the index was rebuilt: {ws.store.rebuilt_reason}", file=sys.stderr)
    return ws


def index_workspace(ws: Workspace, *, embed: bool, quiet: bool = False):
    """Chunk what changed, then compute missing vectors; a progress bar on a terminal, nothing otherwise."""
    from codeloupe.embed import EmbeddingError

    try:
        with progress_display(quiet) as progress:
            report = ws.index(progress)
            embedded = None
            if embed and ws.settings.embed_provider != "none":
                try:
                    embedded = ws.embed(progress)
                except EmbeddingError as exc:
                    # The lexical and symbol lanes still answer; the result says the dense lane is not ready.
                    print(f"codeloupe: warning: no vectors computed: {exc}", file=sys.stderr)
    except DiscoverError as exc:
        raise CliError(str(exc)) from exc
    return report, embedded


@contextmanager
def progress_display(quiet: bool) -> Iterator[ProgressFn | None]:
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    with Bar(TextColumn("{task.description:>6}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
             transient=True, console=_stderr_console()) as bar:
        tasks: dict[str, int] = {}

        def report(event: Progress) -> None:
            if event.phase not in tasks:
                tasks[event.phase] = bar.add_task(event.phase, total=event.total)
            bar.update(tasks[event.phase], completed=event.done, total=event.total)

        yield report


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)
