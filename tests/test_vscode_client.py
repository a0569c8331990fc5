"""Runs the VS Code extension's node suites against the real server.

`npm test --prefix clients/vscode` typechecks and bundles the extension, then runs mocha: the real `activate()`
with the real vscode-languageclient against `codeloupe-lsp` (under a stand-in `vscode` module), a protocol suite
over stdio, webview pages in headless Chromium, and `vsce package`. Needs Node 20, `npm ci --prefix
clients/vscode`, and Debian's `chromium`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from codeloupe.settings import BOUNDS

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "clients" / "vscode"


def _server_command() -> str:
    """The codeloupe-lsp of the interpreter running the tests (the venv), else the one on PATH."""
    found = shutil.which("codeloupe-lsp", path=str(Path(sys.executable).parent)) or shutil.which("codeloupe-lsp")
    assert found, "codeloupe-lsp is not installed: pip install -e . into the test environment"
    return found


def test_vscode_extension_node_suites() -> None:
    npm = shutil.which("npm")
    assert npm, "npm not found: the VS Code client tests need Node 20 and npm"
    assert (CLIENT / "node_modules").is_dir(), "clients/vscode/node_modules is missing: run npm ci --prefix clients/vscode"
    env = {**os.environ, "CODELOUPE_LSP_COMMAND": _server_command()}
    result = subprocess.run([npm, "test", "--prefix", str(CLIENT)], env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"npm test failed ({result.returncode}):\n{output[-30000:]}"


def test_manifest_number_settings_take_the_engines_range() -> None:
    """Each number setting of the extension's manifest takes the range the engine accepts, so VS Code's Settings editor
    flags what the server would refuse, and nothing it would take: codeloupe.chunkBudget said at least 200 where the
    engine takes 100, and said nothing of 200000, which the server then warned of and ignored."""
    properties = json.loads((CLIENT / "package.json").read_text(encoding="utf-8"))["contributes"]["configuration"]["properties"]
    numbers = {key: spec for key, spec in properties.items() if spec.get("type") in ("number", "integer")}
    assert numbers, "no number setting in the manifest"
    for key, spec in numbers.items():
        # codeloupe.chat.timeoutS -> chatTimeoutS -> chat_timeout_s, as settings.ts names the engine's option.
        camel = "".join(part[:1].upper() + part[1:] if i else part for i, part in enumerate(key.split(".")[1:]))
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
        assert (spec.get("minimum"), spec.get("maximum")) == BOUNDS[name], key
