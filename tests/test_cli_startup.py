"""CLI start-up imports only what the command runs: the openai client (seconds of imports) is for the commands that
call a model, not for `codeloupe search`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def imported_modules(*args: str, cache: Path) -> set[str]:
    """The modules a real `python -m codeloupe ...` imported (`-X importtime` names each on stderr)."""
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "codeloupe", *args, "--embed-provider", "none"],
                          capture_output=True, text=True, check=True, env=env)
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_search_does_not_import_the_model_client_and_ask_does(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "ledger.py").write_text("def post_ledger_entry(account, amount):\n    return amount\n")
    searched = imported_modules("search", str(tmp_path / "repo"), "ledger entry", cache=tmp_path / "cache")
    assert "codeloupe.search" in searched
    assert not {m for m in searched if m.split(".")[0] == "openai" or m.startswith("codeloupe.ask")}
    # The same probe sees the client where a command needs a model (no model configured: the bundle answers).
    asked = imported_modules("ask", str(tmp_path / "repo"), "ledger entry", cache=tmp_path / "cache")
    assert "openai" in asked and "codeloupe.ask.run" in asked
