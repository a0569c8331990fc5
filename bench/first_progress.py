"""How soon the language server answers `initialize` and shows its first progress, this checkout against a baseline.

    .venv/bin/python bench/first_progress.py [--runs 12] [--baseline main] [--tree DIR]

The real `codeloupe-lsp` over stdio, started `--runs` times per engine, the two engines alternating (a loaded
machine's noise falls on both alike); each engine has its own index of the tree, made by a first run that is not
counted (so each counted run opens an index on disk, as an editor's restart does). Timed from just before the
process is started: the `initialize` answer, and the first `$/progress` (the start-up refresh's begin, sent once
the client has answered `window/workDoneProgress/create`). The tree defaults to a copy of this checkout's engine:
the first progress comes before the walk, so it is about the server's start, not the tree's size (a 40K-file
tree: `bench/cold_scale.py --phases server`). Medians, and this engine's as a ratio of the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def _read(reader: asyncio.StreamReader) -> dict[str, Any]:
    length = 0
    while (line := await reader.readline()).strip():
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if not length:
        raise EOFError("the server closed its output")
    return json.loads(await reader.readexactly(length))


async def one_run(engine: list[str], tree: Path, cache: Path, *, until_end: bool = False) -> dict[str, float]:
    """Start the server, initialize it on `tree`, and time the answer and the first progress (or, `until_end`,
    wait for the refresh's end too: the run that makes the index)."""
    # An installed server's modules are compiled once, at install or first import; where PYTHONDONTWRITEBYTECODE is
    # set (a sandbox, a CI image) the uncounted first run wrote no bytecode, and every counted start compiled the
    # checkout's and the baseline's code again (~0.1 s, the engine's modules most of it).
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=os.pathsep.join(engine), CODELOUPE_CACHE_DIR=str(cache))
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "codeloupe_lsp", env=env,
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": os.getpid(), "rootUri": tree.as_uri(),
        "capabilities": {"window": {"workDoneProgress": True}},
        "workspaceFolders": [{"uri": tree.as_uri(), "name": tree.name}],
        "initializationOptions": {"embedProvider": "none"}}}))
    seen: dict[str, float] = {}
    while "progress" not in seen or (until_end and "end" not in seen):
        message = await asyncio.wait_for(_read(proc.stdout), 300)
        now = time.perf_counter() - started
        if message.get("id") == 1 and "method" not in message:
            seen["initialize"] = now
            proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        elif "method" in message and "id" in message:  # progress token creation, the file watcher's registration
            proc.stdin.write(_frame({"jsonrpc": "2.0", "id": message["id"], "result": None}))
        elif message.get("method") == "$/progress":
            kind = message["params"]["value"]["kind"]
            seen.setdefault("progress" if kind == "begin" else kind, now)
    proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 60)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--baseline", default="main", help="the git revision compared against")
    parser.add_argument("--git", type=Path, default=HERE.parent, help="the repository the baseline is taken from")
    parser.add_argument("--tree", type=Path, help="the workspace opened (default: a copy of this engine's code)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="codeloupe-first-progress-"))
    try:
        archive = subprocess.run(["git", "-C", str(args.git), "archive", args.baseline, "engine", "server"],
                                 capture_output=True, check=True).stdout
        (scratch / "baseline").mkdir()
        subprocess.run(["tar", "-x", "-C", str(scratch / "baseline")], input=archive, check=True)
        engines = {"this": [str(HERE.parent / "engine"), str(HERE.parent / "server")],
                   args.baseline: [str(scratch / "baseline" / "engine"), str(scratch / "baseline" / "server")]}
        tree = args.tree or scratch / "tree"
        if args.tree is None:
            shutil.copytree(HERE.parent / "engine" / "codeloupe", tree,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for name, engine in engines.items():  # each engine's index made (and its bytecode compiled), not counted
            asyncio.run(one_run(engine, tree, scratch / f"cache-{name}", until_end=True))
        times: dict[str, dict[str, list[float]]] = {name: {"initialize": [], "progress": []} for name in engines}
        for run in range(args.runs):
            for name, engine in (engines.items() if run % 2 == 0 else reversed(engines.items())):
                seen = asyncio.run(one_run(engine, tree, scratch / f"cache-{name}"))
                for key in ("initialize", "progress"):
                    times[name][key].append(seen[key])
                print(f"{name:>10} run {run}: initialize {seen['initialize'] * 1000:.0f} ms,"
                      f" first progress {seen['progress'] * 1000:.0f} ms", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    this, base = times["this"], times[args.baseline]
    for key in ("initialize", "progress"):
        ours, theirs = statistics.median(this[key]), statistics.median(base[key])
        print(f"{key:>10}: this {ours * 1000:.0f} ms, {args.baseline} {theirs * 1000:.0f} ms (median of"
              f" {args.runs}), ratio {ours / theirs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
