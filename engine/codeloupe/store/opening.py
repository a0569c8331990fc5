"""Which index a workspace opens: its own SQLite file, or its repository in the shared PostgreSQL database
(`store_url`, a setting only the user's own configuration or command line may give)."""

from __future__ import annotations

from pathlib import Path

from codeloupe.settings import Settings
from codeloupe.store import Store
from codeloupe.store.protocol import IndexStore


def repository_name(settings: Settings, root: Path) -> str:
    """The repository's id in the shared index: `store_repository`, else the workspace folder's name."""
    return settings.store_repository or Path(root).name or "root"


def open_store(settings: Settings, root: Path, index_path: Path, *, check: bool = True) -> IndexStore:
    """`check=False`: the SQLite file's integrity check waits for `check()` (PostgreSQL checks its own pages)."""
    if settings.store_url:
        from codeloupe.store.postgres import PgStore  # psycopg costs start-up time: only for a shared index

        return PgStore(settings.store_url, repository_name(settings, root), local_dir=index_path.parent)
    return Store(index_path, check=check)
