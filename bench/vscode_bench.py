"""Time to the first answer through the VS Code client, cold and warm, and save -> searchable.

The extension's real bundle (clients/vscode/out/extension.js, `npm run build --prefix clients/vscode`) with the real
vscode-languageclient against the real codeloupe-lsp, under the `vscode` stub the mocha suite uses. The workspace
is the same copy of the standard library as bench/nvim_bench.py. Each run activates the extension and runs
"Codeloupe: Search the Codebase" at once, typing the query as soon as the picker opens (the command waits for
the client; the picker's 150 ms debounce is included; the server answers once an index exists):
  cold   empty cache: activation -> first answer in the picker includes the server start and the first full index
  warm   the index on disk: activation -> first answer from it
  save   write a new file through the stub's save (the client sends didSave), poll codeloupe/search for its token
Each session waits for the server to be ready, then 12 s more, before quitting, as the Neovim bench does.
Embedding is off (`codeloupe.embed.provider: none`): the lexical answer is what is timed.

Usage: .venv/bin/python bench/vscode_bench.py [--tree PATH] [--saves 5] [--runs 2]
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from editor_bench import run_bench, run_session

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "clients" / "vscode" / "out" / "extension.js"


def run_vscode(root: Path, cache: Path, saves: int) -> dict:
    if not BUNDLE.is_file():
        raise SystemExit(f"{BUNDLE} is missing: npm run build --prefix clients/vscode")
    server = shutil.which("codeloupe-lsp", path=str(Path(sys.executable).parent)) or shutil.which("codeloupe-lsp")
    if server is None:
        raise SystemExit("codeloupe-lsp is not installed: pip install -e . into this environment")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOUPE_")}
    env.update(CODELOUPE_CACHE_DIR=str(cache), CODELOUPE_LSP_COMMAND=server, CODELOUPE_BENCH_ROOT=str(root),
               CODELOUPE_BENCH_SAVES=str(saves))
    return run_session(["node", str(REPO / "bench" / "vscode_first_answer.js")], root, env)


def main() -> None:
    run_bench("VS Code", run_vscode, "codeloupe-vscode-bench-")


if __name__ == "__main__":
    main()
