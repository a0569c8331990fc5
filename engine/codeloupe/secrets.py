"""Files that look like secrets: never shown to a model or an agent, whatever the index holds.

The index holds such a file when git does not ignore it (a developer searching in the editor may want
`.env.example`), and the CLI and the editors show it: they answer the user's own eyes. What answers a model
(`ask`: its excerpts and tools) or an agent (a workspace that `withholds_secrets`: the MCP and HTTP servers, whose
answers land in a cloud model's context) lists it as a candidate and never shows its content.

Matched on the path alone (no content sniffing: a key must not be opened to be refused). The list errs on
the side of refusing: a template such as `.env.example` is refused with the real `.env`, because the cost of
a wrong refusal is one file the model cannot read, and the cost of a wrong pass is a leaked key.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from codeloupe.types import elided

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext

# Whole file names (lower-cased) and name patterns.
SECRET_NAMES = (
    ".env", ".env.*", "*.env", ".envrc",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.ppk",
    "credentials", "credentials.*", "*credentials*.json", ".git-credentials",
    "secrets.json", "secrets.yml", "secrets.yaml", "secrets.toml", "secrets.ini", "secrets.env", "*.secret",
    "*.secrets", ".netrc", "_netrc", ".pgpass", ".htpasswd", ".npmrc", ".pypirc", ".dockercfg",
    "service-account*.json", "*.tfvars", "*.tfstate", "*.tfstate.*",
)
# Key and certificate stores, by extension.
SECRET_SUFFIXES = (".pem", ".key", ".p8", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".gpg", ".pgp")
# Directories whose every file is credentials.
SECRET_DIRS = frozenset({".ssh", ".aws", ".gnupg", ".docker", ".kube", ".azure", ".gcloud"})


def looks_secret(rel_path: str) -> bool:
    """True for a workspace path (POSIX, relative) that a model must never be shown."""
    parts = rel_path.lower().split("/")
    name = parts[-1]
    if any(part in SECRET_DIRS for part in parts[:-1]):
        return True
    return name.endswith(SECRET_SUFFIXES) or any(fnmatch.fnmatchcase(name, pattern) for pattern in SECRET_NAMES)


# What an answer to an agent says in place of such a file's content (a search's map line, a tour's entry point).
WITHHELD = "content withheld: the file looks like a secret"


def withheld(ws: WorkspaceContext, path: str) -> bool:
    """Whether `ws` answers agents (`withholds_secrets`) and `path` looks like a secret: its content is withheld
    (listed as a candidate, never shown)."""
    return ws.withholds_secrets and looks_secret(path)


def refusal(path: str) -> str:
    """Why a read of `path` is refused where it is `withheld`: one line, the same on every agent surface."""
    return (f"{elided(path)}: withheld: the file looks like a secret (keys, credentials, .env files), and its content is "
            "never sent to an agent")
