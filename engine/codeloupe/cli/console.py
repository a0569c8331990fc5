"""The rich console the commands print through (imported where a command prints with rich: rich is slow to load)."""

from __future__ import annotations

from typing import Any

from rich.console import Console


class CommandConsole(Console):
    """A rich Console that wraps lines only at a terminal, and whose reader going away (`| head`, a pager quit
    early) ends the command as `main` ends any other: quietly, with status 141. Rich's own handling exits with
    status 1, which is `locate`'s "nothing found" and, under `set -o pipefail`, a failure unlike that of any
    other command."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if not self.is_terminal:  # piped: every line whole, for grep and a pager (rich would wrap at 80 columns)
            self.soft_wrap = True

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError
