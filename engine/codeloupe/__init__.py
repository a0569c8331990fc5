"""codeloupe: code retrieval for the editor.

`Workspace` is the warm engine (what the language server holds); `index_repo`, `search` and `status` are
one-shot conveniences over it.
"""

from codeloupe.api import Workspace, WorkspaceError, index_repo, search, status

__version__ = "0.1.0"
__all__ = ["Workspace", "WorkspaceError", "index_repo", "search", "status", "__version__"]
