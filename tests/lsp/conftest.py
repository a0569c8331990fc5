"""Fixtures for the language server tests: a fixture project and a server indexed on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_helpers import Client, start_server, stop_server, write_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project")


@pytest_asyncio.fixture
async def client(project: Path) -> AsyncIterator[Client]:
    """A server on the fixture project, fully indexed."""
    lsp_client = await start_server([project])
    await lsp_client.wait_ready()
    yield lsp_client
    await stop_server(lsp_client)
