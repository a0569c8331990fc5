"""The errors a workspace request can end in, defined below every layer that raises them.

`codeloupe.api` re-exports them: callers above the engine catch `codeloupe.api.WorkspaceError`; the layers
below it (search, graph, ask, remote) raise them without importing the API they sit under.
"""

from __future__ import annotations


class WorkspaceError(ValueError):
    """A request the engine refuses: a path outside the workspace, a line range outside a file, ..."""


class RemoteError(WorkspaceError):
    """A remote source cannot be indexed (a bad spec, an HTTP failure, a refused archive); nothing was written."""
