"""codeloupe: code retrieval for the editor.

`Workspace` is the warm engine (what the language server holds); `index_repo`, `search` and `status` are
one-shot conveniences over it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codeloupe.api import Workspace, WorkspaceError, index_repo, search, status

# onnxruntime (the pinned 1.32 on Linux and macOS) writes a device id under ~/.cache/Microsoft and queues usage
# events (the OS, the Python binary's path, each session) for Microsoft's collector from the moment it is imported,
# unless this is set first: nothing may leave the machine by default (docs/security.md). Set here, before any
# module of the engine imports it, and inherited by every worker process; a value the user set is kept.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"
__all__ = ["Workspace", "WorkspaceError", "index_repo", "search", "status", "__version__"]


def __getattr__(name: str) -> Any:
    # The engine's API is imported on first use, not with the package: a worker process needs one module
    # (codeloupe.embed.workers, codeloupe.chunk), and importing the whole engine cost each ~0.2 s of CPU.
    if name in __all__ and name != "__version__":
        from codeloupe import api

        return getattr(api, name)
    raise AttributeError(f"module 'codeloupe' has no attribute {name!r}")
