"""The language server never shows the password of its `storeUrl`: a URL libpq cannot parse made its error
text quote the password (or the whole URL) in the window/showMessage the editor shows and three times in the
server's stderr log (the message, the traceback's cause, the logged error); a host Python cannot split (`[::1`)
is refused as a setting, in words. Over real stdio; no database."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import RawServer, write_project


@pytest.mark.parametrize(("url", "secret"), [
    ("postgresql://postgres:lsp%ZZsecret@/review?host=/nonexistent/codeloupe-socket", "lsp%ZZsecret"),
    ("postgresql://postgres@/review?host=/nonexistent/codeloupe-socket&password=lsp%ZZparam", "lsp%ZZparam"),
    ("postgresql://postgres:lspsecret3@[::1/review", "lspsecret3"),
])
def test_a_store_url_it_cannot_open_is_shown_without_its_password(tmp_path: Path, url: str, secret: str) -> None:
    root = write_project(tmp_path / "project")
    errlog = tmp_path / "stderr.txt"
    server = RawServer(errlog)
    try:
        server.initialize([root], storeUrl=url, repositories=["billing"])
        shown: list[str] = []
        deadline = time.monotonic() + 120  # not a speed check
        while not any("cannot open the shared index" in text for text in shown):
            assert time.monotonic() < deadline, shown
            try:
                message: dict[str, Any] = server.messages.get(timeout=1)
            except queue.Empty:
                continue
            if message.get("method") == "window/showMessage":
                shown.append(message["params"]["message"])
        assert not [text for text in shown if secret in text], shown
        assert any("postgresql://postgres@" in text for text in shown), shown  # the URL, redacted
    finally:
        server.close()
    log = errlog.read_text()
    assert "postgresql://postgres@" in log and secret not in log, log
