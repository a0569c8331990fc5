"""What the layers below `codeloupe.api` see of a workspace: a protocol, so that none of them imports the API.

`codeloupe.api.Workspace` (and its remote variant) satisfies it; search, bundle, graph, tour, related, entry
points and ask take a `WorkspaceContext` and use nothing else of it. The API sits on top of all of them and
nothing below imports it (`tests/test_layering.py` holds both rules).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from codeloupe.embed import EmbeddingProvider
    from codeloupe.search import Searcher
    from codeloupe.settings import Settings
    from codeloupe.store.protocol import IndexStore
    from codeloupe.types import Bundle, EntryPoint, Expansion, Tour


class WorkspaceContext(Protocol):
    """One open workspace as the engine's internals use it: its index, settings, files and warm readers."""

    root: Path
    settings: Settings
    store: IndexStore
    # Set once the workspace is closed: a background build that fails after this is expected, not an error.
    closed: bool
    # A process that stays open: its first queries may leave out a bulk change until it is searchable.
    interim_answers: bool
    # Its answers go to agents (the MCP and HTTP servers): files that look like secrets are listed, never shown
    # (`codeloupe.secrets.withheld`).
    withholds_secrets: bool

    def relative(self, path: Path | str) -> str:
        """The POSIX path relative to the root; raises `WorkspaceError` for anything outside it."""
        ...

    def path_kind(self, rel: str) -> str:
        """What the workspace holds at `rel` (relative to the root): "file", "folder" or "" (nothing)."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """A file's bytes as its source holds them now; OSError when it cannot be read."""
        ...

    def read_lines(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Lines of a file (1-based, inclusive), verbatim from its source."""
        ...

    def expand(self, path: str, start_line: int | None = None, end_line: int | None = None, *,
               symbol: str = "", line: int | None = None) -> Expansion:
        """Lines of an indexed file (a range, a definition by name, or the definition around a line)."""
        ...

    def searcher(self) -> Searcher:
        """The warm searcher over this workspace's index."""
        ...

    def embedding_provider(self) -> EmbeddingProvider | None:
        """The configured embedding provider (None when embedding is off)."""
        ...

    def search(self, query: str, *, scope: str = "", mode: str = "code", limit: int = 12) -> Bundle:
        """The ranked bundle, as the API answers it."""
        ...

    def tour(self, *, limit: int = 20) -> Tour:
        """Where to start reading."""
        ...

    def entry_points(self) -> list[EntryPoint]:
        """Where the workspace's programs start."""
        ...
