"""The errors a workspace request can end in, defined below every layer that raises them.

`codeloupe.api` re-exports them: callers above the engine catch `codeloupe.api.WorkspaceError`; the layers
below it (search, graph, ask, remote) raise them without importing the API they sit under.
"""

from __future__ import annotations


class WorkspaceError(ValueError):
    """A request the engine refuses: a path outside the workspace, a line range outside a file, ..."""


class InvalidArgument(WorkspaceError):
    """An argument of an engine call that it refuses for what the argument holds (a `text` to locate of several
    lines): `argument`, its name in the call; `problem`, what is wrong with it. Each surface names the argument
    as its protocol does (a CLI argument, an HTTP parameter, an MCP tool's argument); the message names it as
    the call does."""

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"`{argument}` {problem}")
        self.argument = argument
        self.problem = problem


class UnreadableFile(WorkspaceError):
    """A file that is there but cannot be read now (not a regular file: a FIFO, a device; no permission; too
    large): refused in words as every `WorkspaceError` is, and told apart where a protocol answers a failed read
    otherwise than a request for something not there (MCP's file resource: `-32603`, not `-32602`)."""


class RemoteError(WorkspaceError):
    """A remote source cannot be indexed (a bad spec, an HTTP failure, a refused archive); nothing was written."""


class StoreError(RuntimeError):
    """The index cannot be opened, read or written (permissions, disk full; the shared index's database gone).
    Re-exported by `codeloupe.store`, where it is raised: defined here so the command line can tell it apart
    without importing the store."""
