"""What the subcommands share when they run: opening and indexing the workspace, the progress display and the
escaping of what they print. The engine is imported when a workspace is opened, not when the parser is built."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from codeloupe.errors import InvalidArgument, WorkspaceError
from codeloupe.types import VisibleFormatter, one_line, visible, visible_lines

from . import CliError
from .arguments import SET_A_MODEL, STORE_SETTING
from .workspace_root import WorkspaceRoot, find_workspace_root

if TYPE_CHECKING:
    from rich.console import Console

    from codeloupe.api import Workspace
    from codeloupe.index import ProgressFn
    from codeloupe.settings import Settings
    from codeloupe.types import Progress


def parse_lines(spec: str | None) -> tuple[int | None, int | None]:
    """`--lines A-B` (or `A`) as 1-based inclusive lines; (None, None) when the flag is absent."""
    if not spec:
        return None, None
    span = re.fullmatch(r"(\d+)(?:-(\d+))?", spec)
    if span is None:
        raise CliError(f"--lines {spec!r}: expected A-B (1-based, inclusive)")
    return int(span.group(1)), int(span.group(2) or span.group(1))


# Where a flag's setting came from, as a settings error names it.
COMMAND_LINE = "the command line"


def open_workspace(args: argparse.Namespace, *, replace_source: bool = False, create_repository: bool = False,
                   indexed: bool = False, **overrides: object) -> Workspace:
    """The workspace named by `args.path`, on its settings with the command's flags (and `overrides`) on top;
    a remote repository's index when the command takes one (`args.remote_refresh` set: it downloads afresh).
    `replace_source`, `create_repository`: `Workspace`'s (`index`, `index --replace`: every other command
    refuses a repository the shared index does not hold). `indexed`: a folder with no index is refused, as the
    shared index refuses a repository it does not hold, not given an empty index (a command that only reads it:
    `stats` left one behind)."""
    from codeloupe.api import Workspace, is_remote_source, open_remote
    from codeloupe.settings import SettingsError, load_settings
    from codeloupe.store import StoreError

    if hasattr(args, "remote_refresh") and is_remote_source(args.path):
        try:
            settings = load_settings(None, _flags(args, overrides), overrides_from=COMMAND_LINE)
            return open_remote(args.path, settings, refresh=args.remote_refresh)
        except (SettingsError, StoreError, WorkspaceError) as exc:
            raise CliError(str(exc)) from exc
    root, settings = open_folder(args, **overrides)
    if indexed and not settings.store_url and not settings.index_path(root).exists():
        raise CliError(one_line(f"{root}: not indexed (no index at {settings.index_path(root)}):"
                                f" `codeloupe index {root}` indexes it"))
    try:
        ws = Workspace(root, settings, replace_source=replace_source, create_repository=create_repository)
    except (WorkspaceError, StoreError) as exc:
        raise CliError(str(exc)) from exc
    say_notices(settings.notices, ws.strategy_load.warnings)
    if ws.store.rebuilt_reason:
        print(visible(f"codeloupe: the index was rebuilt: {ws.store.rebuilt_reason}"), file=sys.stderr)
    return ws


def open_folder(args: argparse.Namespace, **overrides: object) -> tuple[Path, Settings]:
    """The workspace folder named by `args.path` (its root, as every command finds it; `args.subpath` set) and
    its settings with the command's flags (and `overrides`) on top, its index left alone: what a command that
    reads only the files needs (`scan`), and `open_workspace` then opens."""
    from codeloupe.api import is_remote_source
    from codeloupe.discover import DiscoverError, check_root
    from codeloupe.settings import SettingsError, load_settings

    if is_remote_source(args.path):  # a URL read as a folder was "http:/host/...: no such directory"
        raise CliError(f"{visible(args.path)}: a remote repository; this command reads a folder (search, ask, graph "
                       "and index take a remote repository)")
    root = Path(args.path)
    try:
        check_root(root)  # before the settings files in it are read: an unreadable root is one clear line
    except DiscoverError as exc:
        hint = ""
        if hasattr(args, "remote_refresh") and not root.exists() and is_remote_source(f"{args.path}@main"):
            hint = f" (a remote repository is named with its ref: {args.path}@REF, e.g. {args.path}@main)"
        elif hasattr(args, "scope") and root.is_file():  # a search of one file is its folder's, scoped to it
            hint = f"; to search only this file: codeloupe search {root.parent} --scope {root.name} ..."
        raise CliError(f"{exc}{hint}") from exc
    flags = _flags(args, overrides)
    try:
        located = locate_workspace(root, load_settings(root, flags, overrides_from=COMMAND_LINE))
        args.subpath = located.subpath
        return located.root, load_settings(located.root, flags, overrides_from=COMMAND_LINE)
    except (SettingsError, WorkspaceError) as exc:
        raise CliError(str(exc)) from exc


def _flags(args: argparse.Namespace, overrides: dict[str, object]) -> dict[str, object]:
    """The settings the command line sets: the flags a command takes, then its own `overrides`."""
    flags = {key: getattr(args, key, None) for key in
             ("embed_provider", "embed_model", "embed_base_url", "chunk_budget", "max_file_bytes", "ignore",
              "store_url", "store_repository")}
    return {**flags, **overrides}


def say_notices(*notices: Iterable[str]) -> None:
    """What opening a folder has to tell on stderr, one line each: they name files of the workspace and its keys,
    and the endpoints a trusted workspace's files chose (its settings' notices, the strategy files left alone)."""
    for notice in (notice for group in notices for notice in group):
        print(one_line(notice), file=sys.stderr)


def shared_store_url(args: argparse.Namespace) -> str:
    """The shared index a command that works on it alone (`admin`, `worker`, `serve --repo`) opens: `--store`,
    else the `store_url` setting (CODELOUPE_STORE_URL, the user's config.toml), as a command that opens a workspace
    takes it; these took `--store` only."""
    from codeloupe.settings import SettingsError, load_settings

    try:
        url = load_settings(None, {"store_url": args.store_url} if args.store_url else None,
                            overrides_from=COMMAND_LINE).store_url
    except SettingsError as exc:
        raise CliError(str(exc)) from exc
    if not url:
        raise CliError(f"{args.command} works on the shared index: --store postgresql://... (or {STORE_SETTING})")
    return url


def locate_workspace(folder: Path, settings: Settings, *, served: bool = False) -> WorkspaceRoot:
    """The workspace `folder` is part of (`find_workspace_root`, an index found where `settings` put it), said on
    stderr when it is above `folder`; `served`: the command serves all of that workspace (`mcp`, `serve`), where
    serving the folder alone built a second index of it, which then made it a workspace of its own for every
    command."""
    located = find_workspace_root(folder, lambda candidate: settings.index_path(candidate).exists())
    if located.subpath:
        print(one_line(f"codeloupe: workspace {located.root} (it has {located.reason}); {located.subpath} is a folder "
                       f"inside it{'; serving all of the workspace' if served else ''}"), file=sys.stderr)
    return located


T = TypeVar("T")


def require_chat_model(ws: Workspace, asks: str) -> None:
    """Refuse, before any work, a command that `asks` the chat model where none is configured (`ws` is closed):
    each question or file type would otherwise fail on its own, or the command end on the bare reason."""
    if not (ws.settings.chat_base_url.strip() and ws.settings.chat_model.strip()):
        ws.close()
        raise CliError(f"{asks} a chat model: {SET_A_MODEL}")


def answer_from_index(args: argparse.Namespace, call: Callable[[Workspace], T], *, embed: bool, quiet: bool,
                      check: Callable[[], None] = lambda: None) -> T:
    """Open the workspace, bring its index up to date, answer `call` from it and close it; what the engine
    refuses (a path outside the workspace, a file not in the index) becomes a `CliError`, an argument it refuses
    named as the command's argument of that name is, as argparse names one (`locate: argument text: ...`).
    `check` refuses such an argument before the workspace is opened or indexed."""
    try:
        check()
    except InvalidArgument as exc:
        raise argument_error(args, exc) from exc
    ws = open_workspace(args)
    try:
        index_workspace(ws, embed=embed, quiet=quiet, answer_stale=True)
        return call(ws)
    except InvalidArgument as exc:
        raise argument_error(args, exc) from exc
    except WorkspaceError as exc:
        raise CliError(str(exc)) from exc
    finally:
        ws.close()


def argument_error(args: argparse.Namespace, exc: InvalidArgument) -> CliError:
    """An argument the engine refuses, named as argparse names one (`search: argument --scope: ...`)."""
    return CliError(f"{args.command}: argument {exc.argument}: {exc.problem}")


def index_workspace(ws: Workspace, *, embed: bool, quiet: bool = False, answer_stale: bool = False):
    """Chunk what changed, then compute missing vectors; a progress bar on a terminal, nothing otherwise.

    An index that cannot be written (a full disk) is an error for `codeloupe index`; a command that only
    needs to read it (`answer_stale`) warns and answers from the index as it stands."""
    from codeloupe.discover import DiscoverError
    from codeloupe.embed import EmbeddingError
    from codeloupe.errors import RemoteError
    from codeloupe.store import StoreError

    try:
        with progress_display(quiet) as progress:
            report = ws.index(progress)
            embedded = None
            if embed and ws.settings.embed_provider != "none":
                try:
                    embedded = ws.embed(progress)
                except EmbeddingError as exc:
                    # The lexical and symbol lanes still answer; the result says the dense lane is not ready.
                    print(visible(f"codeloupe: warning: no vectors computed: {exc}"), file=sys.stderr)
    except (DiscoverError, RemoteError) as exc:
        raise CliError(str(exc)) from exc
    except StoreError as exc:
        if not answer_stale:
            raise CliError(str(exc)) from exc
        print(visible(f"codeloupe: warning: {exc}"), file=sys.stderr)
        return None, None
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
    from .console import CommandConsole

    return CommandConsole(stderr=True)


def counted(counts: Iterable[tuple[str, int]]) -> str:
    """Named counts on one line, as every command prints them: "python 12, go 3"."""
    return ", ".join(f"{name} {count}" for name, count in counts)


# How much of a user's text a line repeats (`locate`'s count, a flow's question): a pasted page is named by its
# start and length, not echoed whole.
NAMED_CHARS = 60


def named(text: str) -> str:
    """`text` quoted as a line of output names it: whole, or its first NAMED_CHARS and its length."""
    if len(text) <= NAMED_CHARS:
        return repr(text)
    return f"{text[:NAMED_CHARS]!r}... ({len(text)} characters)"


def log_visibly() -> None:
    """Send the engine's warnings (they name the workspace's files) to stderr with their control characters
    escaped, where nothing has set logging up: Python's last-resort handler printed them raw, escape sequences
    in a file name and all."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(VisibleFormatter("%(message)s"))
    root.addHandler(handler)


def markup_safe(text: str) -> str:
    """One line of text from a repository or a model, for a rich markup string: shown as it is, never read as
    markup (a file named `d[/x].py` is a closing tag rich rejects), with no control character and no newline."""
    from rich.markup import escape

    return escape(one_line(text))


def print_code(console: Console, text: str, language: str, start_line: int) -> None:
    """Lines of a file: at a terminal highlighted and wrapped at its width, never cropped (a cropped line is
    code the file does not have: rule 5); piped, every line whole and as the file has it, numbered, for a pager,
    grep or a file (rich would wrap it at 80 columns and read brackets as markup). Lines are numbered as an editor
    numbers them (`split_lines`): a lone CR ends one; a form feed is shown as `\\x0c` inside its line."""
    lines = visible_lines(text) or [""]
    if console.is_terminal:
        from rich.syntax import Syntax

        console.print(Syntax("\n".join(lines), language, line_numbers=True, start_line=start_line, word_wrap=True))
        return
    width = len(str(start_line + len(lines) - 1))
    console.out("\n".join(f"{n:>{width}}  {line}" for n, line in enumerate(lines, start_line)), highlight=False)
