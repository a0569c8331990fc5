"""Shared test setup: every test gets its own cache dir, so no index or vector lands in the user cache."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from codeloupe.api import Workspace


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    cache = tmp_path_factory.mktemp("codeloupe-cache")
    monkeypatch.setenv("CODELOUPE_CACHE_DIR", str(cache))
    for name in ("CODELOUPE_EMBED_PROVIDER", "CODELOUPE_EMBED_BASE_URL", "CODELOUPE_EMBED_MODEL",
                 "CODELOUPE_EMBED_API_KEY", "CODELOUPE_CHAT_BASE_URL", "CODELOUPE_CHAT_MODEL",
                 "CODELOUPE_CHAT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return cache


@pytest.fixture
def lexical_workspace() -> Iterator[Callable[[Path], Workspace]]:
    """Open and index a workspace with embeddings off (fast, no model); closed after the test."""
    opened: list[Workspace] = []

    def open_indexed(root: Path) -> Workspace:
        ws = Workspace(root, overrides={"embed_provider": "none"})
        ws.index()
        opened.append(ws)
        return ws

    yield open_indexed
    for ws in opened:
        ws.close()
