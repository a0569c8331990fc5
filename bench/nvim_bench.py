"""Time to the first answer through real Neovim (headless), cold and warm, and save -> searchable.

A copy of the standard library tree (no site-packages, no __pycache__) is the workspace. Each run starts
`nvim --headless` with the plugin's setup, opens os.py and gives `:Codeloupe search!` at once (the plugin queues
it until the server attaches; the server answers once an index exists):
  cold   empty cache: Neovim start -> first answer includes the server start and the first full index
  warm   the index on disk: Neovim start -> first answer from it
  save   edit a new file, :write, poll codeloupe/search for its unique token (through the same client)
Each session waits for the server to be ready, then 12 s more (what a restart reads is saved once the index is
quiet), before quitting, as an editor left open would.
Embedding is off (`CODELOUPE_EMBED_PROVIDER=none`): the lexical answer is what is timed.

Opening a Python file runs Neovim's own python filetype plugin, which asks whether the python3 provider works;
with nothing configured Neovim then starts every python3 on PATH in turn looking for pynvim (about a second,
the editor blocked). `CODELOUPE_BENCH_PYTHON_HOST=PATH` sets `g:python3_host_prog` to PATH first, as a user
with pynvim configured has it, so that the editor's own share of the start is not timed with the plugin's.

Usage: .venv/bin/python bench/nvim_bench.py [--tree PATH] [--saves 5] [--runs 2]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from editor_bench import run_bench, run_session

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def run_nvim(root: Path, cache: Path, saves: int) -> dict:
    from test_neovim_client import nvim_binary, server_command

    python_host = os.environ.get("CODELOUPE_BENCH_PYTHON_HOST", "")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODELOUPE_", "NVIM", "XDG_"))}
    env.update(CODELOUPE_BENCH_PYTHON_HOST=python_host, CODELOUPE_CACHE_DIR=str(cache), CODELOUPE_EMBED_PROVIDER="none",
               CODELOUPE_PLUGIN_DIR=str(REPO / "clients" / "neovim"), CODELOUPE_BENCH_ROOT=str(root),
               CODELOUPE_BENCH_CMD=json.dumps(server_command()), CODELOUPE_BENCH_SAVES=str(saves),
               XDG_STATE_HOME=str(cache / "xdg"), XDG_DATA_HOME=str(cache / "xdg"))
    return run_session([str(nvim_binary()), "--headless", "--clean", "-l", str(REPO / "bench" / "nvim_first_answer.lua")],
                       root, env)


def main() -> None:
    run_bench("Neovim", run_nvim, "codeloupe-nvim-bench-")


if __name__ == "__main__":
    main()
