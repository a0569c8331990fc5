"""codeloupe's language server: a thin pygls shell over `codeloupe.api.Workspace`.

Each LSP feature is one small module that reads its params, calls one engine function off the event loop,
and converts the result; every LSP <-> engine conversion lives in `convert.py`. The contract with the editor
clients is docs/protocol.md.
"""

from codeloupe.types import package_version

__version__ = package_version()
