"""Which index a workspace opens: its own SQLite file, or its repository in the shared PostgreSQL database
(`store_url`, a setting only the user's own configuration or command line may give)."""

from __future__ import annotations

from pathlib import Path

from codeloupe.repository_names import repository_name_problem
from codeloupe.settings import Settings
from codeloupe.store import Store, StoreError
from codeloupe.store.protocol import IndexStore


def repository_name(settings: Settings, root: Path) -> str:
    """The repository's id in the shared index: `store_repository`, else the workspace folder's name (refused
    when it breaks the rule of `codeloupe.repository_names`: the user names it)."""
    if settings.store_repository:
        return settings.store_repository  # checked as a setting
    name = Path(root).name or "root"
    if problem := repository_name_problem(name):
        raise StoreError(f"the folder's name {problem}: name the repository with --repo NAME (or store_repository)")
    return name


def open_store(settings: Settings, root: Path, index_path: Path, *, check: bool = True,
               create: bool = True, folder: Path | None = None) -> IndexStore:
    """`check=False`: the SQLite file's integrity check waits for `check()` (PostgreSQL checks its own pages).
    `create=False`: a repository the shared index does not hold is refused, not added (`PgStore`); the refusal
    names the repository indexed from `folder` (a workspace's; None where the root is a repository's name)."""
    if settings.store_url:
        from codeloupe.store.postgres import PgStore  # psycopg costs start-up time: only for a shared index

        return PgStore(settings.store_url, repository_name(settings, root), local_dir=index_path.parent,
                       create=create, folder=str(folder.resolve()) if folder else "")
    return Store(index_path, check=check)
