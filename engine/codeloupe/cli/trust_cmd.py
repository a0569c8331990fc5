"""`codeloupe trust [PATH]` / `--list` / `--revoke [PATH]`: the user's trust in a workspace's own settings.

Until trusted, a workspace's `pyproject.toml [tool.codeloupe]` and `.codeloupe.toml` may set only the harmless
settings (see `codeloupe.settings.WORKSPACE_SAFE`). Trust covers the settings as they are now: editing them
needs `codeloupe trust` again.

`codeloupe trust --strategy FILE` accepts a chunk strategy (`.codeloupe/strategies/*.py`, Python code) as its
bytes are now: only then is it imported, and only while it stays byte for byte the same.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from . import CliError
from .common import one_line
from .workspace_root import find_workspace_root

if TYPE_CHECKING:
    from codeloupe.trust import TrustStore


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "trust", help="let a workspace's own settings files set endpoints, keys, models and resources")
    parser.add_argument("path", nargs="?",
                        help="the workspace folder, or a folder inside it (default: the current one)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--list", action="store_true",
                        help="list every trusted workspace and strategy and whether they changed (takes no PATH)")
    action.add_argument("--revoke", action="store_true", help="stop trusting the workspace (or the --strategy)")
    parser.add_argument("--strategy", metavar="FILE",
                        help="trust this chunk strategy file as it is now (read it first: it is Python code)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.discover import DiscoverError, check_root
    from codeloupe.settings import workspace_digest, workspace_settings
    from codeloupe.trust import TrustStore

    store = TrustStore.default()
    if args.list:
        if args.path is not None or args.strategy:  # a PATH was listed as if it narrowed the list
            raise CliError("--list lists every trusted workspace and strategy: it takes no PATH or --strategy")
        return _list(store)
    if args.strategy:
        return _strategy(store, Path(args.strategy).resolve(), revoke=args.revoke)
    root = _workspace_root(Path(args.path or "."))
    if args.revoke:
        with _writing(store):
            revoked = store.revoke(root)
        if not revoked:
            print(one_line(f"codeloupe: {root} was not trusted"), file=sys.stderr)
            return 1
        print(one_line(f"no longer trusted: {root}"))
        return 0
    try:
        check_root(root)
    except DiscoverError as exc:
        raise CliError(str(exc)) from exc
    unread: list[str] = []
    files = workspace_settings(root, unread)
    digest = workspace_digest(root)
    for note in unread:  # a file that is not settings is left out of what is trusted
        print(one_line(note), file=sys.stderr)
    with _writing(store):
        store.trust(root, digest)
    # What was trusted, as the files hold it: a key (`"\x1b]0;x\x07" = 1` is one) and the folder's name shown escaped.
    print(one_line(f"trusted: {root}"))
    for where, table in files.items():
        print(one_line(f"  {where}: " + (", ".join(f"{key} = {_shown(value)!r}" for key, value in table.items())
                                         or "(empty)")))
    print("  until these settings change" if files else
          "  (no codeloupe settings yet: a settings file added later needs `codeloupe trust` again)")
    return 0


def _shown(value: object) -> object:
    """A setting's value as the listing shows it: a URL's password (`store_url = 'postgresql://u:PW@h/db'`,
    `embed_base_url = 'https://u:PW@h'`) left out, as every message leaves it out."""
    from codeloupe.url_secrets import redact

    return redact(value) if isinstance(value, str) and "://" in value else value


@contextmanager
def _writing(store: TrustStore) -> Iterator[None]:
    """A change to the trust store, whose failure (its folder a file, read-only or full) is one line."""
    try:
        yield
    except OSError as exc:
        raise CliError(f"cannot write the trust store {store.path}: {exc.strerror or exc}") from exc


def _workspace_root(folder: Path) -> Path:
    """The workspace `folder` belongs to, found as `codeloupe search` finds it: trusting a sub-folder would
    record a workspace no command opens."""
    from codeloupe.settings import SettingsError, load_settings

    if not folder.is_dir():
        try:
            return folder.resolve()
        except (OSError, RuntimeError):  # a link that leads to itself (Python before 3.13 raises RuntimeError)
            raise CliError(one_line(f"{folder}: a symbolic link that leads to itself")) from None
    try:
        index_path = load_settings(None).index_path
    except SettingsError as exc:  # the user's own config.toml
        raise CliError(str(exc)) from exc
    located = find_workspace_root(folder, lambda candidate: index_path(candidate).exists())
    if located.subpath:
        print(one_line(f"codeloupe: {folder} is inside the workspace {located.root} (it has {located.reason})"),
              file=sys.stderr)
    return located.root


def _strategy(store: TrustStore, path: Path, *, revoke: bool) -> int:
    from codeloupe.chunk.strategies import read_strategy_file
    from codeloupe.trust import file_digest

    if revoke:
        with _writing(store):
            revoked = store.revoke_strategy(path)
        if not revoked:
            print(one_line(f"codeloupe: the strategy {path} was not trusted"), file=sys.stderr)
            return 1
        print(one_line(f"no longer trusted: {path}"))
        return 0
    try:
        digest = file_digest(read_strategy_file(path))
    except OSError as exc:
        raise CliError(f"cannot trust the strategy {path}: {exc.strerror or exc}") from exc
    with _writing(store):
        store.trust_strategy(path, digest)
    print(f"trusted the chunk strategy {one_line(str(path))}\n  sha256 {digest}\n  until the file changes")
    return 0


def _list(store: TrustStore) -> int:
    entries = store.entries()
    strategies = store.strategy_entries()
    if not entries and not strategies:
        print(one_line(f"no trusted workspaces ({store.path})"))
        return 0
    for entry in entries:
        print(one_line(f"{entry.root}  {_state(store, Path(entry.root))}  (trusted {entry.trusted_at})"))
    for entry in strategies:
        state = _strategy_state(store, Path(entry.root))
        print(one_line(f"strategy {entry.root}  {state}  (trusted {entry.trusted_at})"))
    return 0


def _strategy_state(store: TrustStore, path: Path) -> str:
    from codeloupe.chunk.strategies import read_strategy_file
    from codeloupe.trust import CHANGED, TRUSTED, file_digest

    try:
        digest = file_digest(read_strategy_file(path))
    except OSError:
        return "missing"
    state = store.strategy_state(path, digest)
    return {TRUSTED: "trusted", CHANGED: "CHANGED since: not loaded until trusted again"}.get(state, state)


def _state(store: TrustStore, root: Path) -> str:
    from codeloupe.settings import SettingsError, workspace_digest
    from codeloupe.trust import CHANGED, TRUSTED

    if not root.is_dir():
        return "missing"
    try:
        state = store.state(root, workspace_digest(root))
    except SettingsError as exc:
        return f"unreadable settings ({exc})"
    return {TRUSTED: "trusted", CHANGED: "settings changed since: run `codeloupe trust` again"}.get(state, state)
